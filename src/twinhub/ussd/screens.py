"""The words of every USSD screen. Each rendered reply fits in 182 characters.

Wording lives here, apart from the navigation rules in `menu.py`, so that a programme can
adapt it without touching the flow.
"""

from __future__ import annotations

from dataclasses import dataclass

from twinhub.services.customers import CustomerView

MAX_SCREEN = 182  # characters of a whole reply, "CON " included
FOOTER = "0. Back\n*. Exit"
EXIT_ONLY = "*. Exit"


@dataclass(frozen=True, slots=True)
class Content:
    service_name: str = "twinhub"
    support_contact: str = ""

    # -- closing messages (END) ------------------------------------------------------------
    invalid_request: str = "Invalid input. Please try again."
    unavailable: str = "Service temporarily unavailable. Please try again later."
    expired: str = "Your session has expired. Please dial again."
    ended: str = "This session has ended. Please dial again."
    logged_out: str = "You have logged out. Goodbye."

    @property
    def goodbye(self) -> str:
        return f"Thank you for using {self.service_name}. Goodbye."

    def locked(self, attempts: int) -> str:
        contact = f" Call {self.support_contact}." if self.support_contact else ""
        return f"Your account is locked after {attempts} wrong PINs. Contact support.{contact}"

    # -- menus (CON) -----------------------------------------------------------------------
    def welcome(self) -> str:
        return f"Welcome to {self.service_name}\n1. Know More\n2. Account Menu\n{EXIT_ONLY}"

    know_more: str = f"Know More\n1. About\n2. Pricing\n3. Delivery\n{FOOTER}"
    about: str = (
        "About\nWe link clean cooking stoves to verified carbon credits. "
        f"Cooking on your stove cuts smoke and earns credits.\n{FOOTER}"
    )
    pricing: str = (
        "Pricing\nStove prices are set by your programme. Agents offer pay-as-you-go plans. "
        f"This service is free.\n{FOOTER}"
    )
    delivery: str = (
        "Delivery\nAn agent brings your stove and shows you how to use it. "
        f"Ask your agent for dates in your area.\n{FOOTER}"
    )
    account_menu: str = f"Account Menu\n1. Log In\n2. Create Account\n{FOOTER}"
    create_name: str = f"Create Account\nEnter your full name\n{FOOTER}"
    create_pin: str = f"Choose a 5-digit PIN\n{FOOTER}"
    create_pin_confirm: str = f"Enter the same PIN again\n{FOOTER}"
    login_id: str = f"Log In\nEnter your customer ID\n1. Use this phone's account\n{FOOTER}"
    login_pin: str = f"Enter your 5-digit PIN\n{FOOTER}"
    change_pin_current: str = f"Change PIN\nEnter your current PIN\n{FOOTER}"
    change_pin_new: str = f"Enter a new 5-digit PIN\n{FOOTER}"
    change_pin_confirm: str = f"Enter the new PIN again\n{FOOTER}"

    def account_created(self, customer_id: str) -> str:
        return (
            f"Account created.\nYour customer ID is {customer_id}. "
            f"Keep it to log in.\n1. Main Menu\n{EXIT_ONLY}"
        )

    def main_menu(self, first_name: str) -> str:
        return f"Hello {first_name}\n1. My Account\n2. Change PIN\n3. Log Out\n{EXIT_ONLY}"

    def account_details(self, customer: CustomerView) -> str:
        return (
            f"My Account\n{customer.full_name}\nID: {customer.customer_id}\n"
            f"Phone: {customer.phone_number}\n"
            f"Since: {customer.created_at:%Y-%m-%d}\n{FOOTER}"
        )


class Notice:
    """One-line messages put above a re-shown screen after a wrong answer."""

    invalid_choice = "Invalid choice."
    bad_name = "Enter 2 to 40 letters."
    pin_mismatch = "PINs did not match. Try again."
    same_pin = "New PIN must differ from the old one."
    pin_changed = "PIN changed."
    bad_customer_id = "Check the customer ID and try again."
    unknown_customer = "Customer ID not found."
    no_phone_account = "No account for this phone."
    phone_registered = "This phone has an account. Log in."
    pin_digits = "PIN must be 5 digits."

    @staticmethod
    def wrong_pin(attempts_left: int) -> str:
        plural = "s" if attempts_left != 1 else ""
        return f"Wrong PIN. {attempts_left} attempt{plural} left."
