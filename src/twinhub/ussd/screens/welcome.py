"""The welcome menu: Know More and its pages, and the Language menu."""

from __future__ import annotations

from twinhub.ussd.i18n import ENGLISH, LANGUAGES
from twinhub.ussd.screens.words import Wording


class WelcomeScreens(Wording):
    """The screens before logging in, except the account's own."""

    def __init__(self, language: str = ENGLISH, service_name: str = "twinhub") -> None:
        super().__init__(language)
        self.service_name = service_name

    def welcome(self) -> str:
        return self._menu(
            # Translators: first screen's title; {service} is up to 20 characters.
            self._("Welcome to {service}", service=self.service_name),
            # Translators: welcome menu item; 20 characters at most.
            self._("Know More"),
            # Translators: welcome menu item; 20 characters at most.
            self._("Account Menu"),
            # Translators: menu item that opens the list of languages; 16 characters at most.
            self._("Language"),
            back=False,
        )

    @property
    def know_more(self) -> str:
        return self._menu(
            self._("Know More"),
            # Translators: Know More menu item; 20 characters at most.
            self._("About"),
            # Translators: Know More menu item; 20 characters at most.
            self._("Pricing"),
            # Translators: Know More menu item; 20 characters at most.
            self._("Delivery"),
        )

    @property
    def about(self) -> str:
        return self._page(
            self._("About"),
            # Translators: the About screen's text; 125 characters at most.
            self._(
                "We link clean cooking stoves to verified carbon credits. "
                "Cooking on your stove cuts smoke and earns credits."
            ),
        )

    @property
    def pricing(self) -> str:
        return self._page(
            self._("Pricing"),
            # Translators: the Pricing screen's text; 125 characters at most.
            self._(
                "Stove prices are set by your programme. Agents offer pay-as-you-go plans. "
                "This service is free."
            ),
        )

    @property
    def delivery(self) -> str:
        return self._page(
            self._("Delivery"),
            # Translators: the Delivery screen's text; 125 characters at most.
            self._(
                "An agent brings your stove and shows you how to use it. "
                "Ask your agent for dates in your area."
            ),
        )

    @property
    def language(self) -> str:
        """Every served language under its own name, numbered in the order of LANGUAGES."""
        return self._menu(self._("Language"), *LANGUAGES.values())
