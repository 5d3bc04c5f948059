"""The account menu: signing up and logging in, and a PIN typed on one screen and confirmed
on the next (sign-up, Change PIN)."""

from __future__ import annotations

import base64

from twinhub.security.pins import PinCipher
from twinhub.services.customer_ids import CUSTOMER_ID_LENGTH, is_valid_customer_id
from twinhub.services.customers import (
    CustomerService,
    LoginOutcome,
    LoginResult,
    PhoneAlreadyRegistered,
    clean_full_name,
)
from twinhub.ussd.i18n import known_language
from twinhub.ussd.languages import LanguageMemory, customer_key
from twinhub.ussd.navigation import Navigator
from twinhub.ussd.screens import Content, Notice
from twinhub.ussd.sessions import Session
from twinhub.ussd.states import (
    LOGIN_ID,
    NAME,
    PENDING_PIN,
    Handler,
    Renderer,
    Reply,
    State,
    looks_like_pin,
    pending_context,
    pin_notice,
    wrong_pin,
)


class PendingPins:
    """A new PIN between its two screens: kept encrypted in the session record, never in
    plain text (it may sit in Redis)."""

    def __init__(self, cipher: PinCipher) -> None:
        self._cipher = cipher

    def remember(self, session: Session, pin: str) -> None:
        ciphertext = self._cipher.encrypt(pin, pending_context(session))
        session.scratch[PENDING_PIN] = base64.b64encode(ciphertext).decode()

    def matches(self, session: Session, candidate: str) -> bool:
        stored = session.scratch.get(PENDING_PIN)
        if stored is None:
            return False
        ciphertext = base64.b64decode(stored)
        return self._cipher.matches(ciphertext, candidate, pending_context(session))


def locked_reply(
    nav: Navigator, customers: CustomerService, session: Session, result: LoginResult
) -> Reply:
    """The session ends on a lock-out, of the phone or of the account."""
    content = nav.content_for(session)
    if result.phone_locked:
        return nav.end(session, content.closing.phone_locked(result.locked_seconds))
    attempts = customers.max_pin_attempts
    return nav.end(session, content.closing.locked(attempts, result.locked_seconds))


class AccountFlow:
    """Account Menu: log in with an ID and a PIN, or create an account."""

    def __init__(
        self,
        nav: Navigator,
        customers: CustomerService,
        pins: PendingPins,
        languages: LanguageMemory,
    ) -> None:
        self._nav = nav
        self._customers = customers
        self._pins = pins
        self._languages = languages

    def handlers(self) -> dict[State, Handler]:
        return {
            State.account_menu: self._account_menu,
            State.create_name: self._create_name,
            State.create_pin: self._create_pin,
            State.create_pin_confirm: self._create_pin_confirm,
            State.account_created: self._account_created,
            State.login_id: self._login_id,
            State.login_pin: self._login_pin,
        }

    def renderers(self) -> dict[State, Renderer]:
        return {State.account_created: self._created_screen}

    async def _created_screen(self, session: Session, content: Content) -> str:
        return content.account.account_created(session.customer_id or "")

    async def _account_menu(self, session: Session, answer: str) -> Reply:
        if answer == "1":
            return await self._nav.show(session, State.login_id)
        if answer == "2":
            if await self._customers.by_phone(session.phone_number) is not None:
                return await self._nav.show(session, State.account_menu, Notice.phone_registered)
            return await self._nav.show(session, State.create_name)
        return await self._nav.show(session, State.account_menu, Notice.invalid_choice)

    async def _create_name(self, session: Session, answer: str) -> Reply:
        name = clean_full_name(answer)
        if name is None:
            return await self._nav.show(session, State.create_name, Notice.bad_name)
        session.scratch[NAME] = name
        return await self._nav.show(session, State.create_pin)

    async def _create_pin(self, session: Session, answer: str) -> Reply:
        problem = pin_notice(answer, session.phone_number)
        if problem:
            return await self._nav.show(session, State.create_pin, problem)
        self._pins.remember(session, answer)
        return await self._nav.show(session, State.create_pin_confirm)

    async def _create_pin_confirm(self, session: Session, answer: str) -> Reply:
        if not self._pins.matches(session, answer):
            session.scratch.pop(PENDING_PIN, None)
            return await self._nav.show(session, State.create_pin, Notice.pin_mismatch)
        try:
            customer = await self._customers.create(
                session.phone_number, session.scratch[NAME], answer
            )
        except PhoneAlreadyRegistered:
            return await self._nav.show(session, State.account_menu, Notice.phone_registered)
        session.scratch.clear()
        session.customer_id = customer.customer_id
        # The language the account was made in becomes the customer's own.
        await self._languages.remember(session.language, customer_key(customer.customer_id))
        return await self._nav.show(session, State.account_created)

    async def _account_created(self, session: Session, answer: str) -> Reply:
        if answer == "1":
            return await self._nav.show(session, State.main_menu)
        return await self._nav.show(session, State.account_created, Notice.invalid_choice)

    async def _login_id(self, session: Session, answer: str) -> Reply:
        """A well-formed ID goes on to the PIN screen whether or not it exists: whether an ID
        is registered is never told to a phone that is not its own (see CustomerService)."""
        if answer == "1":
            customer = await self._customers.by_phone(session.phone_number)
            if customer is None:
                return await self._nav.show(session, State.login_id, Notice.no_phone_account)
            customer_id = customer.customer_id
        elif len(answer) == CUSTOMER_ID_LENGTH and answer.isdigit():
            if not is_valid_customer_id(answer):
                return await self._nav.show(session, State.login_id, Notice.bad_customer_id)
            customer_id = answer
        else:
            return await self._nav.show(session, State.login_id, Notice.bad_customer_id)
        session.scratch[LOGIN_ID] = customer_id
        return await self._nav.show(session, State.login_pin)

    async def _login_pin(self, session: Session, answer: str) -> Reply:
        if not looks_like_pin(answer):
            return await self._nav.show(session, State.login_pin, Notice.pin_digits)
        result = await self._customers.login(
            session.scratch[LOGIN_ID], answer, session.phone_number
        )
        if result.outcome is LoginOutcome.ok and result.customer is not None:
            session.scratch.clear()
            session.customer_id = result.customer.customer_id
            own = await self._languages.recalled(customer_key(session.customer_id))
            session.language = known_language(own) or session.language
            return await self._nav.show(session, State.main_menu)
        if result.outcome is LoginOutcome.locked:
            return locked_reply(self._nav, self._customers, session, result)
        return await self._nav.show(session, State.login_pin, wrong_pin(result))
