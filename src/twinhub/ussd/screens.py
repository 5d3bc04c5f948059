"""The words of every USSD screen. Each rendered reply fits in 182 characters.

Wording lives here, apart from the navigation rules in `menu.py`, so that a programme can
adapt it without touching the flow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from twinhub.services.customers import CustomerView
from twinhub.services.stoves import COOKING, MAX_QUANTITY, MIN_QUANTITY, ClaimLine, StoveView

MAX_SCREEN = 182  # characters of a whole reply, "CON " included
FOOTER = "0. Back\n*. Exit"
EXIT_ONLY = "*. Exit"
MORE = "9"  # the key that turns a list's page
# Lists have fixed page sizes so that a number typed after a notice picks the same row.
# Their rows are cut to LIST_ROW characters; with a title, "9. More" and the footer, a
# full page leaves room for the one notice a list screen carries ("Invalid choice.").
STOVES_PER_PAGE, CLAIMS_PER_PAGE, MAX_TOKENS = 3, 4, 4
LIST_ROW = 40
NAME_WIDTH = 24  # a stove's name on its own screens
SERIAL_WIDTH = 16
SHORT_ID = 6  # characters of a claim id shown to the customer
TOKEN_WIDTH = 12


def fit(text: str, width: int) -> str:
    """`text` on one line of at most `width` characters (names come from the registry)."""
    clean = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return clean if len(clean) <= width else clean[: width - 1].rstrip() + "."


def short_id(claim_id: str) -> str:
    return claim_id[:SHORT_ID]


def pages_of(count: int, per_page: int) -> int:
    """How many pages a list of `count` rows takes (an empty list still has its one page)."""
    return max(1, -(-count // per_page))


def _list_title(title: str, page: int, pages: int) -> str:
    """ "My Stoves 2/4"; past 99 pages the page number alone, so the title keeps its width."""
    if pages == 1:
        return title
    return f"{title} {page + 1}/{pages}" if pages <= 99 else f"{title} {page + 1}"


def _more(page: int, pages: int) -> str:
    return f"{MORE}. More\n" if page + 1 < pages else ""


def stove_state(stove: StoveView) -> str:
    """The short status a stove's list row shows: its own, then its project's."""
    if stove.project is None:
        project = "no project"
    else:
        project = "verified" if stove.project_verified else "unverified"
    return f"{stove.status}, {project}"


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

    def locked(self, attempts: int, seconds: int = 0) -> str:
        contact = f" Call {self.support_contact}." if self.support_contact else ""
        wait = f" for {_duration(seconds)}" if seconds else ""
        return f"Your account is locked{wait} after {attempts} wrong PINs. Try later.{contact}"

    def phone_locked(self, seconds: int) -> str:
        contact = f" Call {self.support_contact}." if self.support_contact else ""
        return f"Too many wrong PINs from this phone. Try again in {_duration(seconds)}.{contact}"

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
        return (
            f"Hello {first_name}\n1. My Account\n2. Change PIN\n3. Log Out\n"
            f"4. My Stoves\n5. My Claims\n6. My Credits\n{EXIT_ONLY}"
        )

    def account_details(self, customer: CustomerView) -> str:
        return (
            f"My Account\n{customer.full_name}\nID: {customer.customer_id}\n"
            f"Phone: {customer.phone_number}\n"
            f"Since: {customer.created_at:%Y-%m-%d}\n{FOOTER}"
        )

    # -- stoves, reports, claims, credits --------------------------------------------------
    no_stoves: str = f"My Stoves\nNo stoves yet.\n{FOOTER}"
    no_claims: str = f"My Claims\nNo claims yet.\n{FOOTER}"
    stove_gone: str = f"Stove not found.\n{FOOTER}"
    # What a refused report says, by the outcome the menu records (see report_result).
    report_not_verified: str = "Project not verified yet."
    report_no_collection: str = "No open collection."
    report_inactive: str = "This stove is not active."
    report_gone: str = "Stove not found."
    report_refused: str = "Report not accepted. Try again later."

    def stoves(self, shown: Sequence[StoveView], page: int, pages: int) -> str:
        """One page of the customer's stoves, numbered from 1 on every page."""
        if not shown:
            return self.no_stoves
        rows = []
        for number, stove in enumerate(shown, start=1):
            prefix, suffix = f"{number}. ", f" ({stove_state(stove)})"
            rows.append(f"{prefix}{fit(stove.name, LIST_ROW - len(prefix) - len(suffix))}{suffix}")
        title = _list_title("My Stoves", page, pages)
        return f"{title}\n" + "\n".join(rows) + f"\n{_more(page, pages)}{FOOTER}"

    def stove_details(self, stove: StoveView) -> str:
        if stove.project is None:
            project = "no project"
        else:
            project = "project " + ("verified" if stove.project_verified else "not verified")
        serial = ""
        if stove.serial and stove.serial != stove.name:
            serial = f"Serial: {fit(stove.serial, SERIAL_WIDTH)}\n"
        return (
            f"{fit(stove.name, NAME_WIDTH)}\n{stove.status}, {project}\n{serial}"
            f"1. Report cooking\n2. Report fuel\n{FOOTER}"
        )

    def report_quantity(self, stove: StoveView, kind: str) -> str:
        if kind == COOKING:
            title, question = "Report cooking", "How many meals were cooked?"
        else:
            title, question = "Report fuel", "How many kg of fuel were bought?"
        return (
            f"{title}\n{fit(stove.name, NAME_WIDTH)}\n{question}\n"
            f"Enter {MIN_QUANTITY} to {MAX_QUANTITY}\n{FOOTER}"
        )

    def report_confirm(self, stove: StoveView, kind: str, quantity: int) -> str:
        if kind == COOKING:
            what = f"{quantity} meal{'s' if quantity != 1 else ''}"
        else:
            what = f"{quantity} kg of fuel"
        return f"Report {what} for {fit(stove.name, NAME_WIDTH)}?\n1. Confirm\n{FOOTER}"

    def report_result(self, outcome: str, claim: str = "") -> str:
        """`outcome` is "sent" (then `claim` is its short id) or why the report was refused:
        notVerified, noCollection, inactive, gone, refused."""
        words = {
            "sent": f"Report sent. Claim {claim} is pending.",
            "notVerified": self.report_not_verified,
            "noCollection": self.report_no_collection,
            "inactive": self.report_inactive,
            "gone": self.report_gone,
        }.get(outcome, self.report_refused)
        return f"{words}\n{FOOTER}"

    def claims(self, shown: Sequence[ClaimLine], page: int, pages: int) -> str:
        """One page of the customer's claims, newest first: short id, date, status."""
        if not shown:
            return self.no_claims
        rows = [
            fit(f"{short_id(c.id)} {c.submitted_at:%Y-%m-%d} {c.status}", LIST_ROW) for c in shown
        ]
        title = _list_title("My Claims", page, pages)
        return f"{title}\n" + "\n".join(rows) + f"\n{_more(page, pages)}{FOOTER}"

    def credits(self, balances: Sequence[tuple[str, int]]) -> str:
        if not balances:
            return f"My Credits\nNo credits yet.\n{FOOTER}"
        shown = list(balances[:MAX_TOKENS])
        rows = [f"{fit(token, TOKEN_WIDTH)}: {amount}" for token, amount in shown]
        if len(balances) > MAX_TOKENS:
            rows[-1] = f"and {len(balances) - MAX_TOKENS + 1} more"
        return "My Credits\n" + "\n".join(rows) + f"\n{FOOTER}"


def _duration(seconds: int) -> str:
    """'45 seconds', '2 minutes', '1 hour': a lock-out's length in a few characters."""
    if seconds < 60:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    minutes = (seconds + 59) // 60
    if minutes < 60:
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    hours = (minutes + 59) // 60
    return f"{hours} hour{'s' if hours != 1 else ''}"


class Notice:
    """One-line messages put above a re-shown screen after a wrong answer."""

    invalid_choice = "Invalid choice."
    bad_name = "Enter 2 to 40 letters."
    pin_mismatch = "PINs did not match. Try again."
    same_pin = "New PIN must differ from the old one."
    pin_changed = "PIN changed."
    bad_customer_id = "Check the customer ID and try again."
    unknown_customer = "Customer ID not found."
    wrong_id_or_pin = "Wrong customer ID or PIN."
    no_phone_account = "No account for this phone."
    phone_registered = "This phone has an account. Log in."
    pin_digits = "PIN must be 5 digits."
    quantity_digits = "Enter digits only, e.g. 5."
    quantity_range = f"Enter a number from {MIN_QUANTITY} to {MAX_QUANTITY}."

    @staticmethod
    def wrong_pin(attempts_left: int) -> str:
        plural = "s" if attempts_left != 1 else ""
        return f"Wrong PIN. {attempts_left} attempt{plural} left."
