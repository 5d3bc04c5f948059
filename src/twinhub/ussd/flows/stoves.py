"""My Stoves: the list, a stove's screen, and reporting cooking or fuel for it."""

from __future__ import annotations

from datetime import UTC, date, datetime

from twinhub.kernel.errors import Conflict, Invalid, NotFound, NotVerified, ServiceError
from twinhub.logging import get_logger
from twinhub.services.claims import PeriodClaimed
from twinhub.services.stove_care import owned_stoves
from twinhub.services.stoves import (
    NoOpenCollection,
    StoveInactive,
    StoveService,
    StoveView,
    quantity_problem,
    report_month,
)
from twinhub.ussd.inputs import BACK
from twinhub.ussd.navigation import Navigator
from twinhub.ussd.screens import MORE, STOVES_PER_PAGE, Content, Notice, pages_of, short_id
from twinhub.ussd.sessions import Session
from twinhub.ussd.states import (
    CLAIM,
    KIND,
    MONTH,
    OUTCOME,
    PAGE,
    QUANTITY,
    REPORT_KINDS,
    STOVE,
    Handler,
    Renderer,
    Reply,
    State,
    customer_of,
    small_number,
)

log = get_logger(__name__)


class StoveFlow:
    """The customer's stoves page by page; one picked to report on."""

    def __init__(self, nav: Navigator, stoves: StoveService) -> None:
        self._nav = nav
        self._stoves = stoves

    def handlers(self) -> dict[State, Handler]:
        return {
            State.stoves: self._stove_list,
            State.stove_details: self._stove_details,
            State.report_quantity: self._report_quantity,
            State.report_confirm: self._report_confirm,
            State.report_result: self._nav.info,
        }

    def renderers(self) -> dict[State, Renderer]:
        return {
            State.stoves: self._list_screen,
            State.stove_details: self._details_screen,
            State.report_quantity: self._quantity_screen,
            State.report_confirm: self._confirm_screen,
            State.report_result: self._result_screen,
        }

    async def open(self, session: Session) -> Reply:
        """The list's first page, from the main menu."""
        session.scratch[PAGE] = "0"
        return await self._nav.show(session, State.stoves)

    async def stove_page(self, session: Session) -> tuple[list[StoveView], int, int]:
        """The stoves on the session's page (the page clamped: a stove may have gone)."""
        stoves = await owned_stoves(self._stoves, customer_of(session))
        pages = pages_of(len(stoves), STOVES_PER_PAGE)
        page = min(int(session.scratch.get(PAGE, "0")), pages - 1)
        first = page * STOVES_PER_PAGE
        return stoves[first : first + STOVES_PER_PAGE], page, pages

    async def page_stoves(self, session: Session, answer: str, here: State, chosen: State) -> Reply:
        """A page of the customer's stoves: turn the page, go back, or pick one."""
        stoves, page, pages = await self.stove_page(session)
        if answer == BACK:
            if page == 0:
                return await self._nav.show(session, State.main_menu)
            session.scratch[PAGE] = str(page - 1)
            return await self._nav.show(session, here)
        if answer == MORE and page + 1 < pages:
            session.scratch[PAGE] = str(page + 1)
            return await self._nav.show(session, here)
        number = small_number(answer)
        if number is not None and 1 <= number <= len(stoves):
            session.scratch[PAGE] = str(page)
            session.scratch[STOVE] = stoves[number - 1].did
            return await self._nav.show(session, chosen)
        return await self._nav.show(session, here, Notice.invalid_choice)

    async def _chosen_stove(self, session: Session) -> StoveView | None:
        """The stove picked from the list, if the customer still owns it."""
        did = session.scratch.get(STOVE)
        if did is None:
            return None
        try:
            return await self._stoves.stove_of(customer_of(session), did)
        except NotFound:
            return None

    async def _list_screen(self, session: Session, content: Content) -> str:
        stoves, page, pages = await self.stove_page(session)
        return content.stoves.stoves(stoves, page, pages)

    async def _details_screen(self, session: Session, content: Content) -> str:
        stove = await self._chosen_stove(session)
        if stove is None:
            return content.stoves.stove_gone
        return content.stoves.stove_details(stove)

    async def _quantity_screen(self, session: Session, content: Content) -> str:
        stove = await self._chosen_stove(session)
        if stove is None:
            return content.stoves.stove_gone
        return content.stoves.report_quantity(stove, session.scratch[KIND])

    async def _confirm_screen(self, session: Session, content: Content) -> str:
        stove = await self._chosen_stove(session)
        if stove is None:
            return content.stoves.stove_gone
        kind, quantity = session.scratch[KIND], int(session.scratch[QUANTITY])
        month = report_month(datetime.now(UTC))
        return content.stoves.report_confirm(stove, kind, quantity, month)

    async def _result_screen(self, session: Session, content: Content) -> str:
        month = session.scratch.get(MONTH)
        return content.stoves.report_result(
            session.scratch.get(OUTCOME, ""),
            session.scratch.get(CLAIM, ""),
            date.fromisoformat(month) if month else None,
        )

    async def _stove_list(self, session: Session, answer: str) -> Reply:
        return await self.page_stoves(session, answer, State.stoves, State.stove_details)

    async def _stove_details(self, session: Session, answer: str) -> Reply:
        kind = REPORT_KINDS.get(answer)
        if kind is None or await self._chosen_stove(session) is None:
            return await self._nav.show(session, State.stove_details, Notice.invalid_choice)
        session.scratch[KIND] = kind
        return await self._nav.show(session, State.report_quantity)

    async def _report_quantity(self, session: Session, answer: str) -> Reply:
        if not (answer.isascii() and answer.isdigit()):
            return await self._nav.show(session, State.report_quantity, Notice.quantity_digits)
        quantity = small_number(answer)
        if quantity is None or quantity_problem(quantity):
            return await self._nav.show(session, State.report_quantity, Notice.quantity_range)
        session.scratch[QUANTITY] = str(quantity)
        return await self._nav.show(session, State.report_confirm)

    async def _report_confirm(self, session: Session, answer: str) -> Reply:
        if answer != "1":
            return await self._nav.show(session, State.report_confirm, Notice.invalid_choice)
        scratch = session.scratch
        outcome, claim = "sent", ""
        month = report_month(datetime.now(UTC))
        try:
            view = await self._stoves.report(
                customer_of(session), scratch[STOVE], scratch[KIND], int(scratch[QUANTITY])
            )
            claim = short_id(view["id"])
            month = date.fromisoformat(view["data"]["periodStart"][:10])  # what it counts
        except NotVerified:
            outcome = "notVerified"
        except StoveInactive:
            outcome = "inactive"
        except PeriodClaimed:  # the same stove-month came in by API or phone already
            outcome = "periodClaimed"
        except Invalid:  # outside the range the claim protocol declares
            outcome = "outOfRange"
        except (NoOpenCollection, Conflict):  # closed, out of its window or full meanwhile
            outcome = "noCollection"
        except NotFound:
            outcome = "gone"
        except ServiceError as error:
            log.warning("ussd report refused", code=error.code, session_id=session.session_id)
            outcome = "refused"
        for key in (KIND, QUANTITY):
            scratch.pop(key, None)
        scratch[OUTCOME], scratch[CLAIM], scratch[MONTH] = outcome, claim, month.isoformat()
        return await self._nav.show(session, State.report_result)
