"""The USSD menu tree: which screen follows which answer.

Every state has one screen and one handler. "0" goes back where a screen offers it, "*"
ends the session from every screen, and any other unexpected answer re-shows the same
screen under a one-line notice: a wrong keypress never ends a session or raises.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum

from twinhub.security.pins import PIN_LENGTH, PinCipher, pin_problem
from twinhub.services.customer_ids import CUSTOMER_ID_LENGTH, is_valid_customer_id
from twinhub.services.customers import (
    CustomerService,
    CustomerView,
    LoginOutcome,
    PhoneAlreadyRegistered,
    clean_full_name,
)
from twinhub.ussd.inputs import BACK, EXIT
from twinhub.ussd.screens import Content, Notice
from twinhub.ussd.sessions import ENDED, Session


class State(StrEnum):
    pre_menu = "preMenu"
    know_more = "knowMore"
    about = "about"
    pricing = "pricing"
    delivery = "delivery"
    account_menu = "accountMenu"
    create_name = "createName"
    create_pin = "createPin"
    create_pin_confirm = "createPinConfirm"
    account_created = "accountCreated"
    login_id = "loginId"
    login_pin = "loginPin"
    main_menu = "mainMenu"
    account_details = "accountDetails"
    change_pin_current = "changePinCurrent"
    change_pin_new = "changePinNew"
    change_pin_confirm = "changePinConfirm"


# Where "0" leads from each screen that shows "0. Back".
PARENT: dict[State, State] = {
    State.know_more: State.pre_menu,
    State.about: State.know_more,
    State.pricing: State.know_more,
    State.delivery: State.know_more,
    State.account_menu: State.pre_menu,
    State.create_name: State.account_menu,
    State.create_pin: State.create_name,
    State.create_pin_confirm: State.create_pin,
    State.login_id: State.account_menu,
    State.login_pin: State.login_id,
    State.account_details: State.main_menu,
    State.change_pin_current: State.main_menu,
    State.change_pin_new: State.main_menu,
    State.change_pin_confirm: State.change_pin_new,
}
SIGNED_IN = frozenset(
    {
        State.account_created,
        State.main_menu,
        State.account_details,
        State.change_pin_current,
        State.change_pin_new,
        State.change_pin_confirm,
    }
)
# Scratch keys: what a multi-screen flow remembers between screens.
NAME, PENDING_PIN, LOGIN_ID = "name", "pendingPin", "loginId"


@dataclass(frozen=True, slots=True)
class Reply:
    end: bool
    text: str

    def render(self) -> str:
        return ("END " if self.end else "CON ") + self.text


Handler = Callable[[Session, str], Awaitable[Reply]]


class Menu:
    def __init__(self, customers: CustomerService, cipher: PinCipher, content: Content) -> None:
        self._customers = customers
        self._cipher = cipher
        self._content = content
        self._handlers: dict[State, Handler] = {
            State.pre_menu: self._pre_menu,
            State.know_more: self._know_more,
            State.about: self._info,
            State.pricing: self._info,
            State.delivery: self._info,
            State.account_menu: self._account_menu,
            State.create_name: self._create_name,
            State.create_pin: self._create_pin,
            State.create_pin_confirm: self._create_pin_confirm,
            State.account_created: self._account_created,
            State.login_id: self._login_id,
            State.login_pin: self._login_pin,
            State.main_menu: self._main_menu,
            State.account_details: self._info,
            State.change_pin_current: self._change_pin_current,
            State.change_pin_new: self._change_pin_new,
            State.change_pin_confirm: self._change_pin_confirm,
        }

    # -- entry points ----------------------------------------------------------------------
    async def start(self, session: Session) -> Reply:
        return await self._show(session, State.pre_menu)

    async def answer(self, session: Session, raw: str) -> Reply:
        answer = raw.strip()
        state = State(session.state)
        if state in SIGNED_IN and not session.is_authenticated:
            return await self._show(session, State.pre_menu, Notice.invalid_choice)
        if answer == EXIT:
            return self._end(session, self._content.goodbye)
        if answer == BACK and state in PARENT:
            return await self._show(session, PARENT[state])
        return await self._handlers[state](session, answer)

    # -- rendering -------------------------------------------------------------------------
    async def _show(self, session: Session, state: State, notice: str | None = None) -> Reply:
        if state in (State.pre_menu, State.account_menu, State.login_id, State.create_name):
            session.scratch.clear()  # leaving a flow forgets its half-typed answers
        if state is State.pre_menu:
            session.customer_id = None
        body = await self._screen(session, state)
        text = f"{notice}\n{body}" if notice else body
        session.state = state.value
        session.message = text
        return Reply(end=False, text=text)

    def _end(self, session: Session, message: str) -> Reply:
        session.status = ENDED
        session.customer_id = None
        session.scratch.clear()
        session.message = message
        return Reply(end=True, text=message)

    async def _screen(self, session: Session, state: State) -> str:
        content = self._content
        match state:
            case State.pre_menu:
                return content.welcome()
            case State.account_created:
                return content.account_created(session.customer_id or "")
            case State.main_menu:
                customer = await self._signed_in_customer(session)
                return content.main_menu(customer.full_name.split()[0] if customer else "")
            case State.account_details:
                customer = await self._signed_in_customer(session)
                assert customer is not None, "signed-in sessions always have an account"
                return content.account_details(customer)
            case _:
                return str(getattr(content, state_attribute(state)))

    async def _signed_in_customer(self, session: Session) -> CustomerView | None:
        if session.customer_id is None:
            return None
        return await self._customers.by_customer_id(session.customer_id)

    # -- handlers --------------------------------------------------------------------------
    async def _pre_menu(self, session: Session, answer: str) -> Reply:
        return await self._choose(session, answer, {"1": State.know_more, "2": State.account_menu})

    async def _know_more(self, session: Session, answer: str) -> Reply:
        choices = {"1": State.about, "2": State.pricing, "3": State.delivery}
        return await self._choose(session, answer, choices)

    async def _choose(self, session: Session, answer: str, choices: dict[str, State]) -> Reply:
        """Plain menus: go to the chosen screen, or stay with a notice."""
        target = choices.get(answer)
        if target is None:
            return await self._show(session, State(session.state), Notice.invalid_choice)
        return await self._show(session, target)

    async def _info(self, session: Session, answer: str) -> Reply:
        """Information screens offer only back and exit."""
        return await self._show(session, State(session.state), Notice.invalid_choice)

    async def _account_menu(self, session: Session, answer: str) -> Reply:
        if answer == "1":
            return await self._show(session, State.login_id)
        if answer == "2":
            if await self._customers.by_phone(session.phone_number) is not None:
                return await self._show(session, State.account_menu, Notice.phone_registered)
            return await self._show(session, State.create_name)
        return await self._show(session, State.account_menu, Notice.invalid_choice)

    async def _create_name(self, session: Session, answer: str) -> Reply:
        name = clean_full_name(answer)
        if name is None:
            return await self._show(session, State.create_name, Notice.bad_name)
        session.scratch[NAME] = name
        return await self._show(session, State.create_pin)

    async def _create_pin(self, session: Session, answer: str) -> Reply:
        problem = pin_problem(answer, session.phone_number)
        if problem:
            return await self._show(session, State.create_pin, problem)
        self._remember_pin(session, answer)
        return await self._show(session, State.create_pin_confirm)

    async def _create_pin_confirm(self, session: Session, answer: str) -> Reply:
        if not self._pin_remembered(session, answer):
            session.scratch.pop(PENDING_PIN, None)
            return await self._show(session, State.create_pin, Notice.pin_mismatch)
        try:
            customer = await self._customers.create(
                session.phone_number, session.scratch[NAME], answer
            )
        except PhoneAlreadyRegistered:
            return await self._show(session, State.account_menu, Notice.phone_registered)
        session.scratch.clear()
        session.customer_id = customer.customer_id
        return await self._show(session, State.account_created)

    async def _account_created(self, session: Session, answer: str) -> Reply:
        if answer == "1":
            return await self._show(session, State.main_menu)
        return await self._show(session, State.account_created, Notice.invalid_choice)

    async def _login_id(self, session: Session, answer: str) -> Reply:
        if answer == "1":
            customer = await self._customers.by_phone(session.phone_number)
            if customer is None:
                return await self._show(session, State.login_id, Notice.no_phone_account)
        elif len(answer) == CUSTOMER_ID_LENGTH and answer.isdigit():
            if not is_valid_customer_id(answer):
                return await self._show(session, State.login_id, Notice.bad_customer_id)
            customer = await self._customers.by_customer_id(answer)
            if customer is None:
                return await self._show(session, State.login_id, Notice.unknown_customer)
        else:
            return await self._show(session, State.login_id, Notice.bad_customer_id)
        if customer.locked:
            return self._end(session, self._content.locked(self._customers.max_pin_attempts))
        session.scratch[LOGIN_ID] = customer.customer_id
        return await self._show(session, State.login_pin)

    async def _login_pin(self, session: Session, answer: str) -> Reply:
        if not _looks_like_pin(answer):
            return await self._show(session, State.login_pin, Notice.pin_digits)
        result = await self._customers.login(session.scratch[LOGIN_ID], answer)
        if result.outcome is LoginOutcome.ok and result.customer is not None:
            session.scratch.clear()
            session.customer_id = result.customer.customer_id
            return await self._show(session, State.main_menu)
        if result.outcome is LoginOutcome.wrong_pin:
            return await self._show(
                session, State.login_pin, Notice.wrong_pin(result.attempts_left)
            )
        if result.outcome is LoginOutcome.locked:
            return self._end(session, self._content.locked(self._customers.max_pin_attempts))
        return await self._show(session, State.login_id, Notice.unknown_customer)

    async def _main_menu(self, session: Session, answer: str) -> Reply:
        if answer == "1":
            return await self._show(session, State.account_details)
        if answer == "2":
            return await self._show(session, State.change_pin_current)
        if answer == "3":
            return self._end(session, self._content.logged_out)
        return await self._show(session, State.main_menu, Notice.invalid_choice)

    async def _change_pin_current(self, session: Session, answer: str) -> Reply:
        if not _looks_like_pin(answer):
            return await self._show(session, State.change_pin_current, Notice.pin_digits)
        assert session.customer_id is not None
        result = await self._customers.login(session.customer_id, answer)
        if result.outcome is LoginOutcome.ok:
            return await self._show(session, State.change_pin_new)
        if result.outcome is LoginOutcome.wrong_pin:
            notice = Notice.wrong_pin(result.attempts_left)
            return await self._show(session, State.change_pin_current, notice)
        return self._end(session, self._content.locked(self._customers.max_pin_attempts))

    async def _change_pin_new(self, session: Session, answer: str) -> Reply:
        assert session.customer_id is not None
        problem = pin_problem(answer, session.phone_number)
        if problem:
            return await self._show(session, State.change_pin_new, problem)
        if await self._customers.pin_matches(session.customer_id, answer):
            return await self._show(session, State.change_pin_new, Notice.same_pin)
        self._remember_pin(session, answer)
        return await self._show(session, State.change_pin_confirm)

    async def _change_pin_confirm(self, session: Session, answer: str) -> Reply:
        assert session.customer_id is not None
        if not self._pin_remembered(session, answer):
            session.scratch.pop(PENDING_PIN, None)
            return await self._show(session, State.change_pin_new, Notice.pin_mismatch)
        await self._customers.set_pin(session.customer_id, answer)
        session.scratch.clear()
        return await self._show(session, State.main_menu, Notice.pin_changed)

    # -- a PIN typed on one screen and confirmed on the next -------------------------------
    def _remember_pin(self, session: Session, pin: str) -> None:
        """Kept encrypted in the session record, never in plain text (it may sit in Redis)."""
        ciphertext = self._cipher.encrypt(pin, _pending_context(session))
        session.scratch[PENDING_PIN] = base64.b64encode(ciphertext).decode()

    def _pin_remembered(self, session: Session, candidate: str) -> bool:
        stored = session.scratch.get(PENDING_PIN)
        if stored is None:
            return False
        ciphertext = base64.b64decode(stored)
        return self._cipher.matches(ciphertext, candidate, _pending_context(session))


def _pending_context(session: Session) -> str:
    return f"pending-pin:{session.session_id}"


def _looks_like_pin(answer: str) -> bool:
    return len(answer) == PIN_LENGTH and answer.isascii() and answer.isdigit()


def state_attribute(state: State) -> str:
    """The Content attribute of a fixed screen: createPinConfirm -> create_pin_confirm."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in state.value)
