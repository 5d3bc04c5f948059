"""Showing a state's screen: in the session's language, under an optional notice, built once
per language when it depends on nothing else. Every flow moves through here.
"""

from __future__ import annotations

from collections.abc import Callable

from twinhub.ussd.i18n import ServiceDefaults
from twinhub.ussd.screens import Content, Notice, NoticeText
from twinhub.ussd.sessions import ENDED, Session
from twinhub.ussd.states import (
    DYNAMIC_SCREENS,
    FORGETS_SCRATCH,
    PRE_MENU,
    VALUE,
    Renderer,
    Reply,
    State,
)

# The screens that depend on their language alone (menus, information pages).
FIXED_SCREENS: dict[State, Callable[[Content], str]] = {
    State.pre_menu: lambda content: content.welcome.welcome(),
    State.know_more: lambda content: content.welcome.know_more,
    State.about: lambda content: content.welcome.about,
    State.pricing: lambda content: content.welcome.pricing,
    State.delivery: lambda content: content.welcome.delivery,
    State.account_menu: lambda content: content.account.account_menu,
    State.create_name: lambda content: content.account.create_name,
    State.create_pin: lambda content: content.account.create_pin,
    State.create_pin_confirm: lambda content: content.account.create_pin_confirm,
    State.login_id: lambda content: content.account.login_id,
    State.login_pin: lambda content: content.account.login_pin,
    State.change_pin_current: lambda content: content.account.change_pin_current,
    State.change_pin_new: lambda content: content.account.change_pin_new,
    State.change_pin_confirm: lambda content: content.account.change_pin_confirm,
    State.survey_done: lambda content: content.survey.done,
}


class Navigator:
    """Shows screens and ends sessions; the flows register how their screens are built."""

    def __init__(self, contents: dict[str, Content], defaults: ServiceDefaults) -> None:
        self._contents = contents
        self._defaults = defaults
        self._fixed_screens: dict[tuple[Content, State], str] = {}
        self._renderers: dict[State, Renderer] = {}

    def add_renderers(self, renderers: dict[State, Renderer]) -> None:
        self._renderers.update(renderers)

    def content_for(self, session: Session) -> Content:
        """The screens in the session's language (any unknown code: the default's)."""
        content = self._contents.get(session.language)
        return content if content is not None else self._contents[self._defaults.default]

    async def show(self, session: Session, state: State, notice: NoticeText | None = None) -> Reply:
        if state not in DYNAMIC_SCREENS:
            return self.show_fixed(session, state, notice)
        if state in FORGETS_SCRATCH:
            session.scratch.clear()  # leaving a flow forgets its half-typed answers
        content = self.content_for(session)
        body = await self._renderers[state](session, content)
        text = f"{content.notice(notice)}\n{body}" if notice else body
        session.state = VALUE[state]
        session.message = text
        return Reply(False, text)

    def show_fixed(self, session: Session, state: State, notice: NoticeText | None = None) -> Reply:
        """`show` of a screen that depends on its language alone: nothing to await."""
        if state in FORGETS_SCRATCH:
            session.scratch.clear()  # leaving a flow forgets its half-typed answers
        if state is PRE_MENU:
            session.customer_id = None
        content = self._contents.get(session.language)  # content_for, inline
        if content is None:
            content = self._contents[self._defaults.default]
        body = self._fixed_screens.get((content, state)) or self.fixed(content, state)
        text = f"{content.notice(notice)}\n{body}" if notice else body
        session.state = VALUE[state]
        session.message = text
        return Reply(False, text)

    def end(self, session: Session, message: str) -> Reply:
        session.status = ENDED
        session.customer_id = None
        session.scratch.clear()
        session.message = message
        return Reply(True, message)

    def fixed(self, content: Content, state: State) -> str:
        """A screen that depends on its language alone (menus, information pages), built
        once per language: the welcome screen alone is half of every new session's steps."""
        key = (content, state)
        text = self._fixed_screens.get(key)
        if text is None:
            text = self._fixed_screens[key] = FIXED_SCREENS[state](content)
        return text

    async def choose(self, session: Session, answer: str, choices: dict[str, State]) -> Reply:
        """Plain menus: go to the chosen screen, or stay with a notice."""
        target = choices.get(answer)
        if target is None:
            return await self.show(session, State(session.state), Notice.invalid_choice)
        return await self.show(session, target)

    async def info(self, session: Session, answer: str) -> Reply:
        """Information screens offer only back and exit."""
        return await self.show(session, State(session.state), Notice.invalid_choice)
