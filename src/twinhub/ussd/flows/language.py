"""The Language menu, from the welcome menu and from the main menu."""

from __future__ import annotations

from twinhub.ussd.languages import LanguageMemory, customer_key, phone_key
from twinhub.ussd.navigation import Navigator
from twinhub.ussd.screens import Content, Notice
from twinhub.ussd.sessions import Session
from twinhub.ussd.states import (
    LANGUAGE_CODES,
    PARENT,
    Handler,
    Renderer,
    Reply,
    State,
    small_number,
)


class LanguageFlow:
    """Choosing the menus' language, remembered for the phone and the customer."""

    def __init__(self, nav: Navigator, languages: LanguageMemory) -> None:
        self._nav = nav
        self._languages = languages

    def handlers(self) -> dict[State, Handler]:
        return {State.language: self._language, State.language_signed_in: self._language}

    def renderers(self) -> dict[State, Renderer]:
        return {State.language: self._screen, State.language_signed_in: self._screen}

    async def _screen(self, session: Session, content: Content) -> str:
        return content.welcome.language

    async def _language(self, session: Session, answer: str) -> Reply:
        """Pick a language by its number: it is remembered for the phone, and for the
        customer when one is logged in, and the menu comes back in it."""
        number = small_number(answer)
        here = State(session.state)
        if number is None or not 1 <= number <= len(LANGUAGE_CODES):
            return await self._nav.show(session, here, Notice.invalid_choice)
        session.language = LANGUAGE_CODES[number - 1]
        keys = [phone_key(session.phone_number)]
        if session.customer_id is not None:
            keys.append(customer_key(session.customer_id))
        await self._languages.remember(session.language, *keys)
        return await self._nav.show(session, PARENT[here], Notice.language_set)
