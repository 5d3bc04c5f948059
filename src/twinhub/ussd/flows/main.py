"""The main menu of a logged-in customer, My Account and Change PIN."""

from __future__ import annotations

from twinhub.services.customers import CustomerService, CustomerView, LoginOutcome
from twinhub.ussd.flows.account import PendingPins, locked_reply
from twinhub.ussd.flows.claims import ClaimFlow
from twinhub.ussd.flows.status import StatusFlow
from twinhub.ussd.flows.stoves import StoveFlow
from twinhub.ussd.navigation import Navigator
from twinhub.ussd.screens import Content, Notice
from twinhub.ussd.sessions import Session
from twinhub.ussd.states import (
    PENDING_PIN,
    Handler,
    Renderer,
    Reply,
    State,
    looks_like_pin,
    pin_notice,
    wrong_pin,
)


class MainMenuFlow:
    """The main menu's choices, and the account's own screens under it."""

    def __init__(
        self,
        nav: Navigator,
        customers: CustomerService,
        pins: PendingPins,
        stoves: StoveFlow,
        claims: ClaimFlow,
        status: StatusFlow,
    ) -> None:
        self._nav = nav
        self._customers = customers
        self._pins = pins
        self._stoves = stoves
        self._claims = claims
        self._status = status

    def handlers(self) -> dict[State, Handler]:
        return {
            State.main_menu: self._main_menu,
            State.account_details: self._nav.info,
            State.change_pin_current: self._change_pin_current,
            State.change_pin_new: self._change_pin_new,
            State.change_pin_confirm: self._change_pin_confirm,
        }

    def renderers(self) -> dict[State, Renderer]:
        return {State.main_menu: self._menu_screen, State.account_details: self._details_screen}

    async def _signed_in_customer(self, session: Session) -> CustomerView | None:
        if session.customer_id is None:
            return None
        return await self._customers.by_customer_id(session.customer_id)

    async def _menu_screen(self, session: Session, content: Content) -> str:
        customer = await self._signed_in_customer(session)
        return content.account.main_menu(customer.full_name.split()[0] if customer else "")

    async def _details_screen(self, session: Session, content: Content) -> str:
        customer = await self._signed_in_customer(session)
        assert customer is not None, "signed-in sessions always have an account"
        return content.account.account_details(customer)

    async def _main_menu(self, session: Session, answer: str) -> Reply:
        if answer == "1":
            return await self._nav.show(session, State.account_details)
        if answer == "2":
            return await self._nav.show(session, State.change_pin_current)
        if answer == "3":
            return self._nav.end(session, self._nav.content_for(session).closing.logged_out)
        if answer == "4":
            return await self._stoves.open(session)
        if answer == "5":
            return await self._claims.open(session)
        if answer == "6":
            return await self._nav.show(session, State.credits)
        if answer == "7":
            return await self._status.open(session)
        if answer == "8":
            return await self._nav.show(session, State.language_signed_in)
        return await self._nav.show(session, State.main_menu, Notice.invalid_choice)

    async def _change_pin_current(self, session: Session, answer: str) -> Reply:
        if not looks_like_pin(answer):
            return await self._nav.show(session, State.change_pin_current, Notice.pin_digits)
        assert session.customer_id is not None
        result = await self._customers.login(session.customer_id, answer, session.phone_number)
        if result.outcome is LoginOutcome.ok:
            return await self._nav.show(session, State.change_pin_new)
        if result.outcome is LoginOutcome.locked:
            return locked_reply(self._nav, self._customers, session, result)
        return await self._nav.show(session, State.change_pin_current, wrong_pin(result))

    async def _change_pin_new(self, session: Session, answer: str) -> Reply:
        assert session.customer_id is not None
        problem = pin_notice(answer, session.phone_number)
        if problem:
            return await self._nav.show(session, State.change_pin_new, problem)
        if await self._customers.pin_matches(session.customer_id, answer):
            return await self._nav.show(session, State.change_pin_new, Notice.same_pin)
        self._pins.remember(session, answer)
        return await self._nav.show(session, State.change_pin_confirm)

    async def _change_pin_confirm(self, session: Session, answer: str) -> Reply:
        assert session.customer_id is not None
        if not self._pins.matches(session, answer):
            session.scratch.pop(PENDING_PIN, None)
            return await self._nav.show(session, State.change_pin_new, Notice.pin_mismatch)
        await self._customers.set_pin(session.customer_id, answer)
        session.scratch.clear()
        return await self._nav.show(session, State.main_menu, Notice.pin_changed)
