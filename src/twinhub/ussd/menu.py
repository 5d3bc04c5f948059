"""The USSD menu tree: which screen follows which answer.

Every state has one screen and one handler, written in the flow of its menu (`flows/`).
"0" goes back where a screen offers it, "*" ends the session from every screen, and any
other unexpected answer re-shows the same screen under a one-line notice: a wrong keypress
never ends a session or raises.

Lists longer than a screen page with "9. More"; there "0" goes to the previous page, and
from the first page back to the menu. A list re-shows itself only under "Invalid choice."
(its page is sized to leave room for that notice, see screens/words.py).
"""

from __future__ import annotations

from twinhub.security.pins import PinCipher
from twinhub.services.customers import CustomerService
from twinhub.services.stove_care import StoveCare
from twinhub.services.stoves import StoveService
from twinhub.services.surveys import SurveyService
from twinhub.ussd.flows.account import AccountFlow, PendingPins
from twinhub.ussd.flows.claims import ClaimFlow
from twinhub.ussd.flows.language import LanguageFlow
from twinhub.ussd.flows.main import MainMenuFlow
from twinhub.ussd.flows.status import StatusFlow
from twinhub.ussd.flows.stoves import StoveFlow
from twinhub.ussd.flows.survey import SurveyFlow
from twinhub.ussd.flows.welcome import WelcomeFlow
from twinhub.ussd.i18n import ServiceDefaults, choose_language
from twinhub.ussd.inputs import BACK, EXIT
from twinhub.ussd.languages import LanguageMemory, phone_key
from twinhub.ussd.navigation import Navigator
from twinhub.ussd.screens import Content, Notice
from twinhub.ussd.sessions import Session
from twinhub.ussd.states import (
    DYNAMIC_SCREENS,
    PARENT,
    PLAIN_MENUS,
    PRE_MENU,
    SIGNED_IN,
    STATE_OF,
    Handler,
    Reply,
    State,
)

__all__ = ["Menu", "Reply", "State"]


class Menu:
    """The menu's entry points: a new session, and an answer to the screen shown."""

    def __init__(
        self,
        customers: CustomerService,
        cipher: PinCipher,
        contents: dict[str, Content],
        stoves: StoveService,
        languages: LanguageMemory,
        defaults: ServiceDefaults,
        care: StoveCare,
        surveys: SurveyService,
    ) -> None:
        self._languages = languages
        self._surveys = surveys
        self._defaults = defaults
        self._nav = nav = Navigator(contents, defaults)
        pins = PendingPins(cipher)
        stove_flow = StoveFlow(nav, stoves)
        claim_flow = ClaimFlow(nav, stoves)
        status_flow = StatusFlow(nav, stoves, care, stove_flow)
        self._survey_flow = survey_flow = SurveyFlow(nav, surveys)
        flows = (
            WelcomeFlow(nav),
            AccountFlow(nav, customers, pins, languages),
            MainMenuFlow(nav, customers, pins, stove_flow, claim_flow, status_flow),
            stove_flow,
            claim_flow,
            status_flow,
            LanguageFlow(nav, languages),
            survey_flow,
        )
        self._handlers: dict[State, Handler] = {}
        for flow in flows:
            self._handlers.update(flow.handlers())
            nav.add_renderers(flow.renderers())
        assert set(self._handlers) == set(State), "every state has its handler"
        self._info_screens = frozenset(s for s, h in self._handlers.items() if h == nav.info)

    async def start(self, session: Session, shortcut: bool = False) -> Reply:
        """A new session speaks the phone's remembered language, else its service code's.
        A household a survey asks gets its next question first, unless it dialled a
        shortcut (answers in the first text): those lead where they were meant to."""
        remembered = await self._languages.recalled(phone_key(session.phone_number))
        session.language = choose_language(
            remembered, self._defaults.for_service(session.service_code)
        )
        if not shortcut:
            question = await self._surveys.question_for(session.phone_number)
            if question is not None:
                return await self._survey_flow.ask(session, question)
        return await self._nav.show(session, PRE_MENU)

    def start_now(self, session: Session, shortcut: bool = False) -> Reply | None:
        """`start` without awaiting, when this process's cache knows the phone's language
        and that no survey asks it; None when `start` must be awaited (a cache miss, the
        cache is in Redis, or a survey may ask the phone)."""
        if not shortcut and not self._surveys.surely_not_asked(session.phone_number):
            return None
        remembered = self._languages.cached_now(phone_key(session.phone_number))
        if remembered is None:
            return None
        session.language = choose_language(
            remembered or None, self._defaults.for_service(session.service_code)
        )
        return self._nav.show_fixed(session, PRE_MENU)

    def answer_now(self, session: Session, raw: str) -> Reply | None:
        """`answer` without awaiting, for the screens that need neither the database nor
        an account: the welcome and Know More menus, their information pages, and back and
        exit from them (a USSD gateway's busiest steps). None when `answer` must be
        awaited; what it returns is exactly what `answer` would (tested side by side)."""
        state = STATE_OF.get(session.state)
        if state is None or state in SIGNED_IN:
            return None
        nav = self._nav
        answer = raw.strip()
        if answer == EXIT:
            return nav.end(session, nav.content_for(session).closing.goodbye)
        if answer == BACK and state in PARENT:
            parent = PARENT[state]
            return None if parent in DYNAMIC_SCREENS else nav.show_fixed(session, parent)
        choices = PLAIN_MENUS.get(state)
        if choices is not None:
            target = choices.get(answer)
            if target is None:
                return nav.show_fixed(session, state, Notice.invalid_choice)
            return None if target in DYNAMIC_SCREENS else nav.show_fixed(session, target)
        if state in self._info_screens:
            return nav.show_fixed(session, state, Notice.invalid_choice)
        return None

    def content_for(self, session: Session) -> Content:
        """The screens in the session's language (any unknown code: the default's)."""
        return self._nav.content_for(session)

    async def answer(self, session: Session, raw: str) -> Reply:
        answer = raw.strip()
        state = STATE_OF.get(session.state) or State(session.state)
        if state in SIGNED_IN and not session.is_authenticated:
            return await self._nav.show(session, PRE_MENU, Notice.invalid_choice)
        if answer == EXIT:
            return self._nav.end(session, self.content_for(session).closing.goodbye)
        if answer == BACK and state in PARENT:
            return await self._nav.show(session, PARENT[state])
        return await self._handlers[state](session, answer)
