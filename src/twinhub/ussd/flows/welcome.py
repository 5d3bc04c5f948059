"""The welcome menu and Know More: plain menus and information pages, no account needed."""

from __future__ import annotations

from twinhub.ussd.navigation import Navigator
from twinhub.ussd.sessions import Session
from twinhub.ussd.states import KNOW_MORE_CHOICES, WELCOME_CHOICES, Handler, Renderer, Reply, State


class WelcomeFlow:
    """The first screen's choices and the Know More pages."""

    def __init__(self, nav: Navigator) -> None:
        self._nav = nav

    def handlers(self) -> dict[State, Handler]:
        return {
            State.pre_menu: self._pre_menu,
            State.know_more: self._know_more,
            State.about: self._nav.info,
            State.pricing: self._nav.info,
            State.delivery: self._nav.info,
        }

    def renderers(self) -> dict[State, Renderer]:
        return {}  # its screens depend on their language alone (navigation.FIXED_SCREENS)

    async def _pre_menu(self, session: Session, answer: str) -> Reply:
        return await self._nav.choose(session, answer, WELCOME_CHOICES)

    async def _know_more(self, session: Session, answer: str) -> Reply:
        return await self._nav.choose(session, answer, KNOW_MORE_CHOICES)
