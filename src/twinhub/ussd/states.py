"""The USSD menu's states, where "0" leads from each, what a flow remembers between screens,
and the reply a step returns: what the navigation and every flow share.

Every state has one screen and one handler. "0" goes back where a screen offers it, "*"
ends the session from every screen, and any other unexpected answer re-shows the same
screen under a one-line notice: a wrong keypress never ends a session or raises.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import NamedTuple

from twinhub.security.pins import PIN_LENGTH, pin_problem
from twinhub.services.customers import LoginResult
from twinhub.services.stoves import COOKING, FUEL
from twinhub.ussd.i18n import LANGUAGES
from twinhub.ussd.screens import Content, Notice, NoticeText
from twinhub.ussd.sessions import Session


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
    survey_people = "surveyPeople"  # a sampled household's survey, before the welcome menu
    survey_in_use = "surveyInUse"
    survey_fuel = "surveyFuel"
    survey_done = "surveyDone"


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
    # "0" leaves a survey for the welcome menu: what is answered is kept, the rest is
    # asked when the household dials again.
    State.survey_people: State.pre_menu,
    State.survey_in_use: State.pre_menu,
    State.survey_fuel: State.pre_menu,
    State.survey_done: State.pre_menu,
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
PRE_MENU = State.pre_menu
FORGETS_SCRATCH = frozenset(
    {State.pre_menu, State.account_menu, State.login_id, State.create_name, State.main_menu}
)
# Screens built from more than their language (see `_screen`); every other is fixed.
DYNAMIC_SCREENS = frozenset(
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
        State.survey_people,
        State.survey_in_use,
        State.survey_fuel,
    }
)
WELCOME_CHOICES = {"1": State.know_more, "2": State.account_menu, "3": State.language}
KNOW_MORE_CHOICES = {"1": State.about, "2": State.pricing, "3": State.delivery}
PLAIN_MENUS = {State.pre_menu: WELCOME_CHOICES, State.know_more: KNOW_MORE_CHOICES}
VALUE = {state: state.value for state in State}

# Scratch keys: what a multi-screen flow remembers between screens. The session record may
# sit in Redis, so a flow keeps references (a page number, a DID), never copies of lists.
NAME, PENDING_PIN, LOGIN_ID = "name", "pendingPin", "loginId"
PAGE = "page"  # the stove list's page, from 0
STOVE = "stove"  # the chosen stove's DID
KIND, QUANTITY = "kind", "quantity"  # the report being typed: cooking|fuel, a number
OUTCOME, CLAIM = "outcome", "claim"  # how the report went; the new claim's short id
MONTH = "month"  # the first day of the month the report covers (ISO date)
CLAIM_PAGES = "claimPages"  # cursors of the claim pages walked, space-separated
REPORT_KINDS = {"1": COOKING, "2": FUEL}
ONLY_STOVE = "onlyStove"  # Stove Status went straight to the customer's one stove
PROBLEM, REFERENCE = "problem", "reference"  # the problem kind chosen; its reference
LANGUAGE_CODES = list(LANGUAGES)  # the Language menu's order
# The survey question on screen: the survey, the stove, its name, the household sizes' range.
SURVEY, SURVEY_STOVE, SURVEY_NAME, SURVEY_RANGE = "survey", "surveyStove", "surveyName", "range"


class Reply(NamedTuple):
    """A screen and whether it ends the session (a named tuple: made on every request, and
    a frozen dataclass sets its fields through object.__setattr__, one call each)."""

    end: bool
    text: str

    def render(self) -> str:
        return ("END " if self.end else "CON ") + self.text


Handler = Callable[[Session, str], Awaitable[Reply]]  # a state's answer, to the next reply
Renderer = Callable[[Session, Content], Awaitable[str]]  # a screen built from more than words


def pending_context(session: Session) -> str:
    return f"pending-pin:{session.session_id}"


def customer_of(session: Session) -> str:
    assert session.customer_id is not None, "only signed-in states reach here"
    return session.customer_id


def trail(session: Session) -> list[str]:
    """The cursors of the claim pages walked so far; the last one is the page shown."""
    return session.scratch.get(CLAIM_PAGES, "").split(" ")


def small_number(answer: str) -> int | None:
    """A typed number of a few ASCII digits (a menu choice, a quantity), else None."""
    if answer.isascii() and answer.isdigit() and len(answer) <= 6:
        return int(answer)
    return None


def pin_notice(pin: str, phone_number: str) -> str | None:
    """Why a new PIN is refused, as a notice the screen translates; None if acceptable."""
    if pin_problem(pin, phone_number) is None:
        return None
    return Notice.pin_too_easy if looks_like_pin(pin) else Notice.pin_digits


def wrong_pin(result: LoginResult) -> NoticeText:
    """The account's own phone learns its attempts left; any other phone the same words
    for an unknown ID, a wrong PIN and an account locked against it."""
    if result.attempts_left:
        return Notice.wrong_pin(result.attempts_left)
    return Notice.wrong_id_or_pin


def looks_like_pin(answer: str) -> bool:
    return len(answer) == PIN_LENGTH and answer.isascii() and answer.isdigit()
