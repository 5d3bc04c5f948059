"""The USSD menu tree: which screen follows which answer.

Every state has one screen and one handler. "0" goes back where a screen offers it, "*"
ends the session from every screen, and any other unexpected answer re-shows the same
screen under a one-line notice: a wrong keypress never ends a session or raises.

Lists longer than a screen page with "9. More"; there "0" goes to the previous page, and
from the first page back to the menu. A list re-shows itself only under "Invalid choice."
(its page is sized to leave room for that notice, see screens.py).
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import NamedTuple

from twinhub.kernel.errors import Conflict, Invalid, NotFound, NotVerified, ServiceError
from twinhub.logging import get_logger
from twinhub.security.pins import PIN_LENGTH, PinCipher, pin_problem
from twinhub.services.claims import PeriodClaimed
from twinhub.services.customer_ids import CUSTOMER_ID_LENGTH, is_valid_customer_id
from twinhub.services.customers import (
    CustomerService,
    CustomerView,
    LoginOutcome,
    LoginResult,
    PhoneAlreadyRegistered,
    clean_full_name,
)
from twinhub.services.stove_care import PROBLEM_KINDS, StoveCare, owned_stoves
from twinhub.services.stoves import (
    COOKING,
    FUEL,
    NoOpenCollection,
    StoveInactive,
    StoveService,
    StoveView,
    quantity_problem,
)
from twinhub.ussd.i18n import LANGUAGES, ServiceDefaults, choose_language, known_language
from twinhub.ussd.inputs import BACK, EXIT
from twinhub.ussd.languages import LanguageMemory, customer_key, phone_key
from twinhub.ussd.screens import (
    CLAIMS_PER_PAGE,
    MORE,
    STOVES_PER_PAGE,
    Content,
    Notice,
    NoticeText,
    pages_of,
    short_id,
)
from twinhub.ussd.sessions import ENDED, Session

log = get_logger(__name__)


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
    stoves = "stoves"
    stove_details = "stoveDetails"
    report_quantity = "reportQuantity"
    report_confirm = "reportConfirm"
    report_result = "reportResult"
    claims = "claims"
    credits = "credits"
    language = "language"  # from the welcome menu
    language_signed_in = "languageSignedIn"  # from the main menu
    stove_pick = "stovePick"  # Stove Status: which stove, for a customer with several
    stove_status = "stoveStatus"
    problem_kind = "problemKind"
    problem_confirm = "problemConfirm"
    problem_sent = "problemSent"


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
    State.stove_details: State.stoves,
    State.report_quantity: State.stove_details,
    State.report_confirm: State.report_quantity,
    State.report_result: State.stove_details,  # never back to the confirmation: no resend
    State.credits: State.main_menu,
    State.language: State.pre_menu,
    State.language_signed_in: State.main_menu,
    State.stove_pick: State.main_menu,
    State.problem_kind: State.stove_status,
    State.problem_confirm: State.problem_kind,
    State.problem_sent: State.stove_status,  # never back to the confirmation: no resend
}
SIGNED_IN = frozenset(
    {
        State.account_created,
        State.main_menu,
        State.account_details,
        State.change_pin_current,
        State.change_pin_new,
        State.change_pin_confirm,
        State.stoves,
        State.stove_details,
        State.report_quantity,
        State.report_confirm,
        State.report_result,
        State.claims,
        State.credits,
        State.language_signed_in,
        State.stove_pick,
        State.stove_status,
        State.problem_kind,
        State.problem_confirm,
        State.problem_sent,
    }
)
# Python 3.11's EnumType has a `__getattr__`, which sends every `State.x` through a slow
# lookup hook (about a microsecond each): what every request needs is looked up once here.
STATE_OF: dict[str, State] = {state.value: state for state in State}
_PRE_MENU = State.pre_menu
_FORGETS_SCRATCH = frozenset(
    {State.pre_menu, State.account_menu, State.login_id, State.create_name, State.main_menu}
)
# Screens built from more than their language (see `_screen`); every other is fixed.
_DYNAMIC_SCREENS = frozenset(
    {
        State.account_created,
        State.main_menu,
        State.account_details,
        State.stoves,
        State.stove_details,
        State.report_quantity,
        State.report_confirm,
        State.report_result,
        State.claims,
        State.credits,
        State.language,
        State.language_signed_in,
        State.stove_pick,
        State.stove_status,
        State.problem_confirm,
        State.problem_kind,
        State.problem_sent,
    }
)
_WELCOME_CHOICES = {"1": State.know_more, "2": State.account_menu, "3": State.language}
_KNOW_MORE_CHOICES = {"1": State.about, "2": State.pricing, "3": State.delivery}
_PLAIN_MENUS = {State.pre_menu: _WELCOME_CHOICES, State.know_more: _KNOW_MORE_CHOICES}
_VALUE = {state: state.value for state in State}

# Scratch keys: what a multi-screen flow remembers between screens. The session record may
# sit in Redis, so a flow keeps references (a page number, a DID), never copies of lists.
NAME, PENDING_PIN, LOGIN_ID = "name", "pendingPin", "loginId"
PAGE = "page"  # the stove list's page, from 0
STOVE = "stove"  # the chosen stove's DID
KIND, QUANTITY = "kind", "quantity"  # the report being typed: cooking|fuel, a number
OUTCOME, CLAIM = "outcome", "claim"  # how the report went; the new claim's short id
CLAIM_PAGES = "claimPages"  # cursors of the claim pages walked, space-separated
REPORT_KINDS = {"1": COOKING, "2": FUEL}
ONLY_STOVE = "onlyStove"  # Stove Status went straight to the customer's one stove
PROBLEM, REFERENCE = "problem", "reference"  # the problem kind chosen; its reference
LANGUAGE_CODES = list(LANGUAGES)  # the Language menu's order


class Reply(NamedTuple):
    """A screen and whether it ends the session (a named tuple: made on every request, and
    a frozen dataclass sets its fields through object.__setattr__, one call each)."""

    end: bool
    text: str

    def render(self) -> str:
        return ("END " if self.end else "CON ") + self.text


Handler = Callable[[Session, str], Awaitable[Reply]]


class Menu:
    def __init__(
        self,
        customers: CustomerService,
        cipher: PinCipher,
        contents: dict[str, Content],
        stoves: StoveService,
        languages: LanguageMemory,
        defaults: ServiceDefaults,
        care: StoveCare,
    ) -> None:
        self._customers = customers
        self._cipher = cipher
        self._contents = contents
        self._stoves = stoves
        self._languages = languages
        self._defaults = defaults
        self._care = care
        self._fixed_screens: dict[tuple[Content, State], str] = {}
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
            State.stoves: self._stove_list,
            State.stove_details: self._stove_details,
            State.report_quantity: self._report_quantity,
            State.report_confirm: self._report_confirm,
            State.report_result: self._info,
            State.claims: self._claim_list,
            State.credits: self._info,
            State.language: self._language,
            State.language_signed_in: self._language,
            State.stove_pick: self._stove_pick,
            State.stove_status: self._stove_status,
            State.problem_kind: self._problem_kind,
            State.problem_confirm: self._problem_confirm,
            State.problem_sent: self._info,
        }
        self._info_screens = frozenset(s for s, h in self._handlers.items() if h == self._info)

    # -- entry points ----------------------------------------------------------------------
    async def start(self, session: Session) -> Reply:
        """A new session speaks the phone's remembered language, else its service code's."""
        remembered = await self._languages.recalled(phone_key(session.phone_number))
        session.language = choose_language(
            remembered, self._defaults.for_service(session.service_code)
        )
        return await self._show(session, _PRE_MENU)

    def start_now(self, session: Session) -> Reply | None:
        """`start` without awaiting, when this process's cache knows the phone's language;
        None when `start` must be awaited (a cache miss, or the cache is in Redis)."""
        remembered = self._languages.cached_now(phone_key(session.phone_number))
        if remembered is None:
            return None
        session.language = choose_language(
            remembered or None, self._defaults.for_service(session.service_code)
        )
        return self._show_fixed(session, _PRE_MENU)

    def answer_now(self, session: Session, raw: str) -> Reply | None:
        """`answer` without awaiting, for the screens that need neither the database nor
        an account: the welcome and Know More menus, their information pages, and back and
        exit from them (a USSD gateway's busiest steps). None when `answer` must be
        awaited; what it returns is exactly what `answer` would (tested side by side)."""
        state = STATE_OF.get(session.state)
        if state is None or state in SIGNED_IN:
            return None
        answer = raw.strip()
        if answer == EXIT:
            return self._end(session, self.content_for(session).goodbye)
        if answer == BACK and state in PARENT:
            parent = PARENT[state]
            return None if parent in _DYNAMIC_SCREENS else self._show_fixed(session, parent)
        choices = _PLAIN_MENUS.get(state)
        if choices is not None:
            target = choices.get(answer)
            if target is None:
                return self._show_fixed(session, state, Notice.invalid_choice)
            return None if target in _DYNAMIC_SCREENS else self._show_fixed(session, target)
        if state in self._info_screens:
            return self._show_fixed(session, state, Notice.invalid_choice)
        return None

    def content_for(self, session: Session) -> Content:
        """The screens in the session's language (any unknown code: the default's)."""
        content = self._contents.get(session.language)
        return content if content is not None else self._contents[self._defaults.default]

    async def answer(self, session: Session, raw: str) -> Reply:
        answer = raw.strip()
        state = STATE_OF.get(session.state) or State(session.state)
        if state in SIGNED_IN and not session.is_authenticated:
            return await self._show(session, _PRE_MENU, Notice.invalid_choice)
        if answer == EXIT:
            return self._end(session, self.content_for(session).goodbye)
        if answer == BACK and state in PARENT:
            return await self._show(session, PARENT[state])
        return await self._handlers[state](session, answer)

    # -- rendering -------------------------------------------------------------------------
    async def _show(
        self, session: Session, state: State, notice: NoticeText | None = None
    ) -> Reply:
        if state not in _DYNAMIC_SCREENS:
            return self._show_fixed(session, state, notice)
        if state in _FORGETS_SCRATCH:
            session.scratch.clear()  # leaving a flow forgets its half-typed answers
        content = self.content_for(session)
        body = await self._screen(session, state, content)
        text = f"{content.notice(notice)}\n{body}" if notice else body
        session.state = _VALUE[state]
        session.message = text
        return Reply(False, text)

    def _show_fixed(
        self, session: Session, state: State, notice: NoticeText | None = None
    ) -> Reply:
        """`_show` of a screen that depends on its language alone: nothing to await."""
        if state in _FORGETS_SCRATCH:
            session.scratch.clear()  # leaving a flow forgets its half-typed answers
        if state is _PRE_MENU:
            session.customer_id = None
        content = self._contents.get(session.language)  # content_for, inline
        if content is None:
            content = self._contents[self._defaults.default]
        body = self._fixed_screens.get((content, state)) or self._fixed(content, state)
        text = f"{content.notice(notice)}\n{body}" if notice else body
        session.state = _VALUE[state]
        session.message = text
        return Reply(False, text)

    def _end(self, session: Session, message: str) -> Reply:
        session.status = ENDED
        session.customer_id = None
        session.scratch.clear()
        session.message = message
        return Reply(True, message)

    async def _screen(self, session: Session, state: State, content: Content) -> str:
        match state:
            case State.account_created:
                return content.account_created(session.customer_id or "")
            case State.main_menu:
                customer = await self._signed_in_customer(session)
                return content.main_menu(customer.full_name.split()[0] if customer else "")
            case State.account_details:
                customer = await self._signed_in_customer(session)
                assert customer is not None, "signed-in sessions always have an account"
                return content.account_details(customer)
            case State.stoves:
                stoves, page, pages = await self._stove_page(session)
                return content.stoves(stoves, page, pages)
            case State.stove_details | State.report_quantity | State.report_confirm:
                stove = await self._chosen_stove(session)
                if stove is None:
                    return content.stove_gone
                if state is State.stove_details:
                    return content.stove_details(stove)
                kind = session.scratch[KIND]
                if state is State.report_quantity:
                    return content.report_quantity(stove, kind)
                return content.report_confirm(stove, kind, int(session.scratch[QUANTITY]))
            case State.report_result:
                return content.report_result(
                    session.scratch.get(OUTCOME, ""), session.scratch.get(CLAIM, "")
                )
            case State.claims:
                trail = _trail(session)
                claims = await self._stoves.claims_of(
                    _customer(session), trail[-1] or None, CLAIMS_PER_PAGE
                )
                later = -(-claims.older // CLAIMS_PER_PAGE)  # pages of older claims
                return content.claims(claims.items, len(trail) - 1, len(trail) + later)
            case State.credits:
                return content.credits(await self._stoves.balance(_customer(session)))
            case State.language | State.language_signed_in:
                return content.language
            case State.stove_pick:
                stoves, page, pages = await self._stove_page(session)
                if not stoves:
                    return content.no_stove_status
                return content.stove_pick(stoves, page, pages)
            case State.stove_status | State.problem_confirm:
                stove = await self._my_stove(session)
                if stove is None:
                    return content.stove_gone
                if state is State.problem_confirm:
                    return content.problem_confirm(stove, session.scratch[PROBLEM])
                return content.stove_status(stove, await self._care.health(stove.did))
            case State.problem_kind:
                return content.problem_kinds
            case State.problem_sent:
                return content.problem_sent(session.scratch.get(REFERENCE, ""))
            case _:
                return self._fixed(content, state)

    def _fixed(self, content: Content, state: State) -> str:
        """A screen that depends on its language alone (menus, information pages), built
        once per language: the welcome screen alone is half of every new session's steps."""
        key = (content, state)
        text = self._fixed_screens.get(key)
        if text is None:
            text = (
                content.welcome()
                if state is _PRE_MENU
                else str(getattr(content, _ATTRIBUTES[state]))
            )
            self._fixed_screens[key] = text
        return text

    async def _signed_in_customer(self, session: Session) -> CustomerView | None:
        if session.customer_id is None:
            return None
        return await self._customers.by_customer_id(session.customer_id)

    # -- handlers --------------------------------------------------------------------------
    async def _pre_menu(self, session: Session, answer: str) -> Reply:
        return await self._choose(session, answer, _WELCOME_CHOICES)

    async def _know_more(self, session: Session, answer: str) -> Reply:
        return await self._choose(session, answer, _KNOW_MORE_CHOICES)

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
        problem = _pin_notice(answer, session.phone_number)
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
        # The language the account was made in becomes the customer's own.
        await self._languages.remember(session.language, customer_key(customer.customer_id))
        return await self._show(session, State.account_created)

    async def _account_created(self, session: Session, answer: str) -> Reply:
        if answer == "1":
            return await self._show(session, State.main_menu)
        return await self._show(session, State.account_created, Notice.invalid_choice)

    async def _login_id(self, session: Session, answer: str) -> Reply:
        """A well-formed ID goes on to the PIN screen whether or not it exists: whether an ID
        is registered is never told to a phone that is not its own (see CustomerService)."""
        if answer == "1":
            customer = await self._customers.by_phone(session.phone_number)
            if customer is None:
                return await self._show(session, State.login_id, Notice.no_phone_account)
            customer_id = customer.customer_id
        elif len(answer) == CUSTOMER_ID_LENGTH and answer.isdigit():
            if not is_valid_customer_id(answer):
                return await self._show(session, State.login_id, Notice.bad_customer_id)
            customer_id = answer
        else:
            return await self._show(session, State.login_id, Notice.bad_customer_id)
        session.scratch[LOGIN_ID] = customer_id
        return await self._show(session, State.login_pin)

    async def _login_pin(self, session: Session, answer: str) -> Reply:
        if not _looks_like_pin(answer):
            return await self._show(session, State.login_pin, Notice.pin_digits)
        result = await self._customers.login(
            session.scratch[LOGIN_ID], answer, session.phone_number
        )
        if result.outcome is LoginOutcome.ok and result.customer is not None:
            session.scratch.clear()
            session.customer_id = result.customer.customer_id
            own = await self._languages.recalled(customer_key(session.customer_id))
            session.language = known_language(own) or session.language
            return await self._show(session, State.main_menu)
        if result.outcome is LoginOutcome.locked:
            return self._locked(session, result)
        return await self._show(session, State.login_pin, _wrong(result))

    def _locked(self, session: Session, result: LoginResult) -> Reply:
        content = self.content_for(session)
        if result.phone_locked:
            return self._end(session, content.phone_locked(result.locked_seconds))
        attempts = self._customers.max_pin_attempts
        return self._end(session, content.locked(attempts, result.locked_seconds))

    async def _main_menu(self, session: Session, answer: str) -> Reply:
        if answer == "1":
            return await self._show(session, State.account_details)
        if answer == "2":
            return await self._show(session, State.change_pin_current)
        if answer == "3":
            return self._end(session, self.content_for(session).logged_out)
        if answer == "4":
            session.scratch[PAGE] = "0"
            return await self._show(session, State.stoves)
        if answer == "5":
            # Cut the pages from the claims there are now: later ones wait for a new visit.
            first = await self._stoves.claims_of(_customer(session), None, CLAIMS_PER_PAGE)
            session.scratch[CLAIM_PAGES] = first.cursor
            return await self._show(session, State.claims)
        if answer == "6":
            return await self._show(session, State.credits)
        if answer == "7":
            return await self._open_stove_status(session)
        if answer == "8":
            return await self._show(session, State.language_signed_in)
        return await self._show(session, State.main_menu, Notice.invalid_choice)

    async def _change_pin_current(self, session: Session, answer: str) -> Reply:
        if not _looks_like_pin(answer):
            return await self._show(session, State.change_pin_current, Notice.pin_digits)
        assert session.customer_id is not None
        result = await self._customers.login(session.customer_id, answer, session.phone_number)
        if result.outcome is LoginOutcome.ok:
            return await self._show(session, State.change_pin_new)
        if result.outcome is LoginOutcome.locked:
            return self._locked(session, result)
        return await self._show(session, State.change_pin_current, _wrong(result))

    async def _change_pin_new(self, session: Session, answer: str) -> Reply:
        assert session.customer_id is not None
        problem = _pin_notice(answer, session.phone_number)
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

    # -- stoves and their reports ----------------------------------------------------------
    async def _stove_page(self, session: Session) -> tuple[list[StoveView], int, int]:
        """The stoves on the session's page (the page clamped: a stove may have gone)."""
        stoves = await owned_stoves(self._stoves, _customer(session))
        pages = pages_of(len(stoves), STOVES_PER_PAGE)
        page = min(int(session.scratch.get(PAGE, "0")), pages - 1)
        first = page * STOVES_PER_PAGE
        return stoves[first : first + STOVES_PER_PAGE], page, pages

    async def _chosen_stove(self, session: Session) -> StoveView | None:
        """The stove picked from the list, if the customer still owns it."""
        did = session.scratch.get(STOVE)
        if did is None:
            return None
        try:
            return await self._stoves.stove_of(_customer(session), did)
        except NotFound:
            return None

    async def _stove_list(self, session: Session, answer: str) -> Reply:
        return await self._page_stoves(session, answer, State.stoves, State.stove_details)

    async def _page_stoves(
        self, session: Session, answer: str, here: State, chosen: State
    ) -> Reply:
        """A page of the customer's stoves: turn the page, go back, or pick one."""
        stoves, page, pages = await self._stove_page(session)
        if answer == BACK:
            if page == 0:
                return await self._show(session, State.main_menu)
            session.scratch[PAGE] = str(page - 1)
            return await self._show(session, here)
        if answer == MORE and page + 1 < pages:
            session.scratch[PAGE] = str(page + 1)
            return await self._show(session, here)
        number = _small_number(answer)
        if number is not None and 1 <= number <= len(stoves):
            session.scratch[PAGE] = str(page)
            session.scratch[STOVE] = stoves[number - 1].did
            return await self._show(session, chosen)
        return await self._show(session, here, Notice.invalid_choice)

    async def _stove_details(self, session: Session, answer: str) -> Reply:
        kind = REPORT_KINDS.get(answer)
        if kind is None or await self._chosen_stove(session) is None:
            return await self._show(session, State.stove_details, Notice.invalid_choice)
        session.scratch[KIND] = kind
        return await self._show(session, State.report_quantity)

    async def _report_quantity(self, session: Session, answer: str) -> Reply:
        if not (answer.isascii() and answer.isdigit()):
            return await self._show(session, State.report_quantity, Notice.quantity_digits)
        quantity = _small_number(answer)
        if quantity is None or quantity_problem(quantity):
            return await self._show(session, State.report_quantity, Notice.quantity_range)
        session.scratch[QUANTITY] = str(quantity)
        return await self._show(session, State.report_confirm)

    async def _report_confirm(self, session: Session, answer: str) -> Reply:
        if answer != "1":
            return await self._show(session, State.report_confirm, Notice.invalid_choice)
        scratch = session.scratch
        outcome, claim = "sent", ""
        try:
            view = await self._stoves.report(
                _customer(session), scratch[STOVE], scratch[KIND], int(scratch[QUANTITY])
            )
            claim = short_id(view["id"])
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
        scratch[OUTCOME], scratch[CLAIM] = outcome, claim
        return await self._show(session, State.report_result)

    # -- claims ----------------------------------------------------------------------------
    async def _claim_list(self, session: Session, answer: str) -> Reply:
        trail = _trail(session)
        if answer == BACK:
            if len(trail) == 1:
                return await self._show(session, State.main_menu)
            session.scratch[CLAIM_PAGES] = " ".join(trail[:-1])
            return await self._show(session, State.claims)
        if answer == MORE:
            page = await self._stoves.claims_of(
                _customer(session), trail[-1] or None, CLAIMS_PER_PAGE
            )
            if page.next_cursor is not None:
                session.scratch[CLAIM_PAGES] = " ".join([*trail, page.next_cursor])
                return await self._show(session, State.claims)
        return await self._show(session, State.claims, Notice.invalid_choice)

    # -- language ---------------------------------------------------------------------------
    async def _language(self, session: Session, answer: str) -> Reply:
        """Pick a language by its number: it is remembered for the phone, and for the
        customer when one is logged in, and the menu comes back in it."""
        number = _small_number(answer)
        here = State(session.state)
        if number is None or not 1 <= number <= len(LANGUAGE_CODES):
            return await self._show(session, here, Notice.invalid_choice)
        session.language = LANGUAGE_CODES[number - 1]
        keys = [phone_key(session.phone_number)]
        if session.customer_id is not None:
            keys.append(customer_key(session.customer_id))
        await self._languages.remember(session.language, *keys)
        return await self._show(session, PARENT[here], Notice.language_set)

    # -- stove status and problem reports ---------------------------------------------------
    async def _open_stove_status(self, session: Session) -> Reply:
        """Straight to the stove of a customer who has one; a list to pick from otherwise."""
        session.scratch[PAGE] = "0"
        stoves = await owned_stoves(self._stoves, _customer(session))
        if len(stoves) == 1:
            session.scratch[STOVE] = stoves[0].did
            session.scratch[ONLY_STOVE] = "1"
            return await self._show(session, State.stove_status)
        return await self._show(session, State.stove_pick)

    async def _my_stove(self, session: Session) -> StoveView | None:
        """The stove chosen for Stove Status, if the customer still owns it."""
        did = session.scratch.get(STOVE)
        stoves = await owned_stoves(self._stoves, _customer(session)) if did else []
        return next((stove for stove in stoves if stove.did == did), None)

    async def _stove_pick(self, session: Session, answer: str) -> Reply:
        return await self._page_stoves(session, answer, State.stove_pick, State.stove_status)

    async def _stove_status(self, session: Session, answer: str) -> Reply:
        if answer == BACK:
            if session.scratch.get(ONLY_STOVE):
                return await self._show(session, State.main_menu)
            return await self._show(session, State.stove_pick)
        if answer == "1" and await self._my_stove(session) is not None:
            return await self._show(session, State.problem_kind)
        return await self._show(session, State.stove_status, Notice.invalid_choice)

    async def _problem_kind(self, session: Session, answer: str) -> Reply:
        number = _small_number(answer)
        if number is None or not 1 <= number <= len(PROBLEM_KINDS):
            return await self._show(session, State.problem_kind, Notice.invalid_choice)
        session.scratch[PROBLEM] = PROBLEM_KINDS[number - 1]
        return await self._show(session, State.problem_confirm)

    async def _problem_confirm(self, session: Session, answer: str) -> Reply:
        stove = await self._my_stove(session)
        if answer != "1" or stove is None:
            return await self._show(session, State.problem_confirm, Notice.invalid_choice)
        problem = await self._care.report_problem(
            _customer(session), stove.did, session.scratch.pop(PROBLEM)
        )
        session.scratch[REFERENCE] = problem.reference
        return await self._show(session, State.problem_sent)

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


def _customer(session: Session) -> str:
    assert session.customer_id is not None, "only signed-in states reach here"
    return session.customer_id


def _trail(session: Session) -> list[str]:
    """The cursors of the claim pages walked so far; the last one is the page shown."""
    return session.scratch.get(CLAIM_PAGES, "").split(" ")


def _small_number(answer: str) -> int | None:
    """A typed number of a few ASCII digits (a menu choice, a quantity), else None."""
    if answer.isascii() and answer.isdigit() and len(answer) <= 6:
        return int(answer)
    return None


def _pin_notice(pin: str, phone_number: str) -> str | None:
    """Why a new PIN is refused, as a notice the screen translates; None if acceptable."""
    if pin_problem(pin, phone_number) is None:
        return None
    return Notice.pin_too_easy if _looks_like_pin(pin) else Notice.pin_digits


def _wrong(result: LoginResult) -> NoticeText:
    """The account's own phone learns its attempts left; any other phone the same words
    for an unknown ID, a wrong PIN and an account locked against it."""
    if result.attempts_left:
        return Notice.wrong_pin(result.attempts_left)
    return Notice.wrong_id_or_pin


def _looks_like_pin(answer: str) -> bool:
    return len(answer) == PIN_LENGTH and answer.isascii() and answer.isdigit()


def state_attribute(state: State) -> str:
    """The Content attribute of a fixed screen: createPinConfirm -> create_pin_confirm."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in state.value)


_ATTRIBUTES = {state: state_attribute(state) for state in State}  # computed once, not per screen
