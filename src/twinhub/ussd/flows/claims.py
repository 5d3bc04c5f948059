"""My Claims and My Credits: what the customer's reports became."""

from __future__ import annotations

from twinhub.services.stoves import StoveService
from twinhub.ussd.inputs import BACK
from twinhub.ussd.navigation import Navigator
from twinhub.ussd.screens import CLAIMS_PER_PAGE, MORE, Content, Notice
from twinhub.ussd.sessions import Session
from twinhub.ussd.states import (
    CLAIM_PAGES,
    Handler,
    Renderer,
    Reply,
    State,
    customer_of,
    trail,
)


class ClaimFlow:
    """The customer's claims, newest first, page by page; and their credits."""

    def __init__(self, nav: Navigator, stoves: StoveService) -> None:
        self._nav = nav
        self._stoves = stoves

    def handlers(self) -> dict[State, Handler]:
        return {State.claims: self._claim_list, State.credits: self._nav.info}

    def renderers(self) -> dict[State, Renderer]:
        return {State.claims: self._claims_screen, State.credits: self._credits_screen}

    async def open(self, session: Session) -> Reply:
        """The first page, from the main menu."""
        # Cut the pages from the claims there are now: later ones wait for a new visit.
        first = await self._stoves.claims_of(customer_of(session), None, CLAIMS_PER_PAGE)
        session.scratch[CLAIM_PAGES] = first.cursor
        return await self._nav.show(session, State.claims)

    async def _claims_screen(self, session: Session, content: Content) -> str:
        walked = trail(session)
        claims = await self._stoves.claims_of(
            customer_of(session), walked[-1] or None, CLAIMS_PER_PAGE
        )
        later = -(-claims.older // CLAIMS_PER_PAGE)  # pages of older claims
        return content.claims.claims(claims.items, len(walked) - 1, len(walked) + later)

    async def _credits_screen(self, session: Session, content: Content) -> str:
        return content.claims.credits(await self._stoves.balance(customer_of(session)))

    async def _claim_list(self, session: Session, answer: str) -> Reply:
        walked = trail(session)
        if answer == BACK:
            if len(walked) == 1:
                return await self._nav.show(session, State.main_menu)
            session.scratch[CLAIM_PAGES] = " ".join(walked[:-1])
            return await self._nav.show(session, State.claims)
        if answer == MORE:
            page = await self._stoves.claims_of(
                customer_of(session), walked[-1] or None, CLAIMS_PER_PAGE
            )
            if page.next_cursor is not None:
                session.scratch[CLAIM_PAGES] = " ".join([*walked, page.next_cursor])
                return await self._nav.show(session, State.claims)
        return await self._nav.show(session, State.claims, Notice.invalid_choice)
