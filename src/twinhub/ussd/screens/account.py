"""The account menu: sign up, log in, the main menu, My Account and Change PIN."""

from __future__ import annotations

from twinhub.services.customers import CustomerView
from twinhub.ussd.screens.words import FIRST_NAME_WIDTH, Wording, fit


class AccountScreens(Wording):
    """The screens of an account: making one, entering it, and its own details."""

    @property
    def account_menu(self) -> str:
        return self._menu(
            self._("Account Menu"),
            # Translators: account menu item and the log-in screen's title; 20 characters.
            self._("Log In"),
            # Translators: account menu item and the sign-up screen's title; 20 characters.
            self._("Create Account"),
        )

    @property
    def create_name(self) -> str:
        # Translators: sign-up question; 40 characters at most.
        question = self._("Enter your full name")
        return self._page(self._("Create Account"), question)

    @property
    def create_pin(self) -> str:
        # Translators: sign-up question; {digits} is 5. 40 characters at most.
        return self._("Choose a {digits}-digit PIN") + "\n" + self.footer

    @property
    def create_pin_confirm(self) -> str:
        # Translators: sign-up question; 40 characters at most.
        return self._("Enter the same PIN again") + "\n" + self.footer

    @property
    def login_id(self) -> str:
        # Translators: log-in question; 40 characters at most.
        question = self._("Enter your customer ID")
        # Translators: log-in menu item: log in as the account of the phone; 30 characters.
        own = self._("Use this phone's account")
        return self._page(self._("Log In"), f"{question}\n1. {own}")

    @property
    def login_pin(self) -> str:
        # Translators: log-in question; {digits} is 5. 40 characters at most.
        return self._("Enter your {digits}-digit PIN") + "\n" + self.footer

    @property
    def change_pin_current(self) -> str:
        # Translators: title, and a main menu item; 20 characters at most.
        title = self._("Change PIN")
        # Translators: change-PIN question; 40 characters at most.
        return self._page(title, self._("Enter your current PIN"))

    @property
    def change_pin_new(self) -> str:
        # Translators: change-PIN question; {digits} is 5. 40 characters at most.
        return self._("Enter a new {digits}-digit PIN") + "\n" + self.footer

    @property
    def change_pin_confirm(self) -> str:
        # Translators: change-PIN question; 40 characters at most.
        return self._("Enter the new PIN again") + "\n" + self.footer

    def account_created(self, customer_id: str) -> str:
        # Translators: after sign-up; 20 characters at most.
        created = self._("Account created.")
        # Translators: {customer_id} is 8 digits. 70 characters at most.
        keep = self._(
            "Your customer ID is {customer_id}. Keep it to log in.", customer_id=customer_id
        )
        # Translators: the one item after sign-up; 20 characters at most.
        main = self._("Main Menu")
        return f"{created}\n{keep}\n1. {main}\n{self.exit_only}"

    def main_menu(self, first_name: str) -> str:
        return self._menu(
            # Translators: main menu title; {name} is the first name (16 characters).
            self._("Hello {name}", name=fit(first_name, FIRST_NAME_WIDTH)),
            # Translators: main menu item and its screen's title; 16 characters at most.
            self._("My Account"),
            self._("Change PIN"),
            # Translators: main menu item; 16 characters at most.
            self._("Log Out"),
            # Translators: main menu item and its screen's title; 16 characters at most.
            self._("My Stoves"),
            # Translators: main menu item and its screen's title; 16 characters at most.
            self._("My Claims"),
            # Translators: main menu item and its screen's title; 16 characters at most.
            self._("My Credits"),
            # Translators: main menu item: is my stove on, cooking, report a problem. 16 chars.
            self._("Stove Status"),
            self._("Language"),
            back=False,
        )

    def account_details(self, customer: CustomerView) -> str:
        return self._page(
            self._("My Account"),
            "\n".join(
                (
                    fit(customer.full_name, 40),
                    # Translators: account screen line: the 8-digit customer ID.
                    self._("ID: {value}", value=customer.customer_id),
                    # Translators: account screen line: the phone number (16 characters).
                    self._("Phone: {value}", value=customer.phone_number),
                    # Translators: account screen line: the sign-up date, as 2026-11-23.
                    self._("Since: {value}", value=f"{customer.created_at:%Y-%m-%d}"),
                )
            ),
        )
