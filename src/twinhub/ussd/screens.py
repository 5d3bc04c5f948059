"""The words of every USSD screen, in the customer's language. Each reply fits 182 characters.

Wording lives here, apart from the navigation rules in `menu.py`, so that a programme can
adapt it without touching the flow. Every user-facing sentence is an English msgid passed
to `self._` (or `self._n` for a count), translated through the gettext catalogues under
`locale/` (see i18n.py); the comments starting "Translators:" above a msgid travel into
the catalogues and tell a translator where the words show and how short they must be.
Numbers of menu items ("1. ") and the "CON"/"END" prefix are never in a msgid.

Translations keep to the GSM 03.38 default alphabet (GSM-7): a single character outside
it makes the aggregator send the whole screen as UCS-2, which halves what fits.
"""

from __future__ import annotations

import gettext
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo

from twinhub.security.pins import PIN_LENGTH
from twinhub.services.customers import CustomerView
from twinhub.services.stove_care import PROBLEM_KINDS, StoveHealth
from twinhub.services.stoves import COOKING, MAX_QUANTITY, MIN_QUANTITY, ClaimLine, StoveView
from twinhub.ussd.i18n import ENGLISH, LANGUAGES, translations

MAX_SCREEN = 182  # characters of a whole reply, "CON " included
MORE = "9"  # the key that turns a list's page
# Lists have fixed page sizes so that a number typed after a notice picks the same row.
# Their rows are cut to LIST_ROW characters; with a title, "9. More" and the footer, a
# full page leaves room for the one notice a list screen carries ("Invalid choice.").
STOVES_PER_PAGE, CLAIMS_PER_PAGE, MAX_TOKENS = 3, 4, 4
LIST_ROW = 34
NAME_WIDTH = 24
MIN_NAME = (
    8  # a list row shows at least this much of a stove's name  # a stove's name on its own screens
)
FIRST_NAME_WIDTH = 16  # the greeting of the main menu
SERIAL_WIDTH = 16
SHORT_ID = 6  # characters of a claim id shown to the customer
TOKEN_WIDTH = 12
# Values every msgid may use by name (str.format ignores the ones it does not use).
FIXED = {"digits": PIN_LENGTH, "low": MIN_QUANTITY, "high": MAX_QUANTITY}


def N_(message: str) -> str:
    """Marks a msgid for the catalogues where it is defined; translated where shown."""
    return message


@dataclass(frozen=True, slots=True)
class Plural:
    """A notice that counts something: translated with ngettext at render time."""

    singular: str
    plural: str
    n: int


NoticeText = str | Plural


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


# What the registry says of a stove or a claim, as the screens say it.
STATUS_WORDS = {
    # Translators: a stove's state on stove screens, 12 characters at most.
    "active": N_("active"),
    # Translators: a stove's state on stove screens, 12 characters at most.
    "deactivated": N_("deactivated"),
    # Translators: a claim's state in the claims list, 12 characters at most.
    "pending": N_("pending"),
    # Translators: a claim's state in the claims list, 12 characters at most.
    "approved": N_("approved"),
    # Translators: a claim's state in the claims list, 12 characters at most.
    "rejected": N_("rejected"),
    # Translators: a claim's state in the claims list, 12 characters at most.
    "flagged": N_("flagged"),
    # Translators: a claim's state in the claims list, 12 characters at most.
    "disputed": N_("disputed"),
    # Translators: a claim's state in the claims list, 12 characters at most.
    "invalidated": N_("invalidated"),
}
# The problems a customer can report about a stove, in the order of the menu.
PROBLEM_WORDS = {
    # Translators: a kind of stove problem, a menu item of "Report a problem"; 20 characters.
    "noStart": N_("Will not start"),
    # Translators: a kind of stove problem, a menu item of "Report a problem"; 20 characters.
    "smoke": N_("Smoke or bad smell"),
    # Translators: a kind of stove problem, a menu item of "Report a problem"; 20 characters.
    "broken": N_("Broken part"),
    # Translators: a kind of stove problem, a menu item of "Report a problem"; 20 characters.
    "meter": N_("Meter or display"),
    # Translators: a kind of stove problem, a menu item of "Report a problem"; 20 characters.
    "other": N_("Other problem"),
}
assert tuple(PROBLEM_WORDS) == PROBLEM_KINDS


class Content:
    """The screens of one language. One instance per language is made at start."""

    def __init__(
        self,
        service_name: str = "twinhub",
        support_contact: str = "",
        language: str = ENGLISH,
        zone: tzinfo | None = None,
    ) -> None:
        self.service_name = service_name
        self.support_contact = support_contact
        self.code = language if language in LANGUAGES else ENGLISH
        self.zone = zone  # where the customer's clock is, for "last cooked" times
        self._catalogue: gettext.NullTranslations = translations(self.code)
        # Messages without values of their own, translated and filled once: every screen
        # is built from them on every request, and a catalogue never changes once loaded.
        self._fixed: dict[str, str] = {}

    # -- translation ----------------------------------------------------------------------
    def _(self, message: str, **values: object) -> str:
        """`message` in this language, with its {placeholders} filled."""
        if values:
            return self._catalogue.gettext(message).format(**FIXED, **values)
        text = self._fixed.get(message)
        if text is None:
            text = self._fixed[message] = self._catalogue.gettext(message).format(**FIXED)
        return text

    def _n(self, singular: str, plural: str, n: int, **values: object) -> str:
        return self._catalogue.ngettext(singular, plural, n).format(**FIXED, n=n, **values)

    def notice(self, notice: NoticeText) -> str:
        """A notice (a msgid from Notice, or a Plural) in this language."""
        if isinstance(notice, Plural):
            return self._n(notice.singular, notice.plural, notice.n)
        return self._(notice)

    def _word(self, word: str, words: dict[str, str]) -> str:
        """A registry word (a status) translated when known, else as the registry says it."""
        known = words.get(word)
        return self._(known) if known else word

    # -- pieces ---------------------------------------------------------------------------
    @property
    def footer(self) -> str:
        # Translators: the key "0" on every screen that can go back; 12 characters at most.
        back = self._("Back")
        return f"0. {back}\n{self.exit_only}"

    @property
    def exit_only(self) -> str:
        # Translators: the key "*" on every screen, ends the session; 12 characters at most.
        return "*. " + self._("Exit")

    def _more(self, page: int, pages: int) -> str:
        # Translators: the key "9" on a list with another page; 12 characters at most.
        return f"{MORE}. " + self._("More") + "\n" if page + 1 < pages else ""

    def _confirm(self) -> str:
        # Translators: the item that sends a report or a problem; 16 characters at most.
        return self._("Confirm")

    @staticmethod
    def _items(*items: str) -> str:
        return "\n".join(f"{number}. {item}" for number, item in enumerate(items, start=1))

    def _menu(self, title: str, *items: str, back: bool = True) -> str:
        closing = self.footer if back else self.exit_only
        return f"{title}\n{self._items(*items)}\n{closing}"

    def _page(self, title: str, body: str) -> str:
        return f"{title}\n{body}\n{self.footer}"

    # -- closing messages (END) ------------------------------------------------------------
    @property
    def invalid_request(self) -> str:
        # Translators: END screen for a malformed request; 80 characters at most.
        return self._("Invalid input. Please try again.")

    @property
    def unavailable(self) -> str:
        # Translators: END screen during an outage; 80 characters at most.
        return self._("Service temporarily unavailable. Please try again later.")

    @property
    def expired(self) -> str:
        # Translators: END screen after a long pause; 80 characters at most.
        return self._("Your session has expired. Please dial again.")

    @property
    def ended(self) -> str:
        # Translators: END screen for a request after the end; 80 characters at most.
        return self._("This session has ended. Please dial again.")

    @property
    def logged_out(self) -> str:
        # Translators: END screen after "Log Out"; 80 characters at most.
        return self._("You have logged out. Goodbye.")

    @property
    def rate_limited(self) -> str:
        # Translators: END screen when a gateway sends too much; 80 characters at most.
        return self._("Too many requests. Please try again later.")

    @property
    def goodbye(self) -> str:
        # Translators: the last screen after "*"; {service} is the programme's name.
        return self._("Thank you for using {service}. Goodbye.", service=self.service_name)

    def _call(self) -> str:
        if not self.support_contact:
            return ""
        # Translators: added after a lock-out message when a support number is set.
        return " " + self._("Call {contact}.", contact=self.support_contact)

    def locked(self, attempts: int, seconds: int = 0) -> str:
        if seconds:
            # Translators: {n} wrong PINs; {duration} as "2 minutes". 120 characters.
            text = self._n(
                "Your account is locked for {duration} after {n} wrong PIN. Try later.",
                "Your account is locked for {duration} after {n} wrong PINs. Try later.",
                attempts,
                duration=self._duration(seconds),
            )
        else:
            # Translators: END screen; {n} wrong PINs. 140 characters at most.
            text = self._n(
                "Your account is locked after {n} wrong PIN. Try later.",
                "Your account is locked after {n} wrong PINs. Try later.",
                attempts,
            )
        return text + self._call()

    def phone_locked(self, seconds: int) -> str:
        # Translators: {duration} as "2 minutes". 120 characters at most.
        text = self._(
            "Too many wrong PINs from this phone. Try again in {duration}.",
            duration=self._duration(seconds),
        )
        return text + self._call()

    def _duration(self, seconds: int) -> str:
        """'45 seconds', '2 minutes', '1 hour': a lock-out's length in a few characters."""
        if seconds < 60:
            # Translators: a lock-out length, put into the lock-out messages; 12 characters.
            return self._n("{n} second", "{n} seconds", seconds)
        minutes = (seconds + 59) // 60
        if minutes < 60:
            # Translators: a lock-out length, put into the lock-out messages; 12 characters.
            return self._n("{n} minute", "{n} minutes", minutes)
        hours = (minutes + 59) // 60
        # Translators: a lock-out length, put into the lock-out messages; 12 characters.
        return self._n("{n} hour", "{n} hours", hours)

    # -- menus (CON) -----------------------------------------------------------------------
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

    # -- language ---------------------------------------------------------------------------
    @property
    def language(self) -> str:
        """Every served language under its own name, numbered in the order of LANGUAGES."""
        return self._menu(self._("Language"), *LANGUAGES.values())

    # -- stoves, reports, claims, credits --------------------------------------------------
    @property
    def no_stoves(self) -> str:
        # Translators: under "My Stoves" when the customer has none; 30 characters at most.
        none = self._("No stoves yet.")
        return self._page(self._("My Stoves"), none)

    @property
    def no_claims(self) -> str:
        # Translators: under "My Claims" when there are none; 30 characters at most.
        none = self._("No claims yet.")
        return self._page(self._("My Claims"), none)

    @property
    def stove_gone(self) -> str:
        # Translators: the stove chosen earlier is no longer the customer's. 30 characters.
        return self._("Stove not found.") + "\n" + self.footer

    def stove_state(self, stove: StoveView) -> str:
        """The short status a stove's list row shows: its own, then its project's."""
        if stove.project is None:
            # Translators: a stove's project state in the stove list; 12 characters at most.
            project = self._("no project")
        elif stove.project_verified:
            # Translators: a stove's project state in the stove list; 12 characters at most.
            project = self._("verified")
        else:
            # Translators: a stove's project state in the stove list; 12 characters at most.
            project = self._("unverified")
        return f"{self._word(stove.status, STATUS_WORDS)}, {project}"

    def stoves(self, shown: Sequence[StoveView], page: int, pages: int) -> str:
        """One page of the customer's stoves, numbered from 1 on every page."""
        if not shown:
            return self.no_stoves
        rows = self._stove_rows(shown, state=True)
        title = _list_title(self._("My Stoves"), page, pages)
        return f"{title}\n{rows}\n{self._more(page, pages)}{self.footer}"

    def _stove_rows(self, shown: Sequence[StoveView], state: bool) -> str:
        rows = []
        for number, stove in enumerate(shown, start=1):
            prefix = f"{number}. "
            suffix = f" ({self.stove_state(stove)})" if state else ""
            width = max(LIST_ROW - len(prefix) - len(suffix), MIN_NAME)
            # A long status (some languages) may cut the row's end: the page must fit.
            rows.append(fit(f"{prefix}{fit(stove.name, width)}{suffix}", LIST_ROW))
        return "\n".join(rows)

    def stove_details(self, stove: StoveView) -> str:
        if stove.project is None:
            project = self._("no project")
        elif stove.project_verified:
            # Translators: a stove's project state on its own screen; 24 characters at most.
            project = self._("project verified")
        else:
            # Translators: a stove's project state on its own screen; 24 characters at most.
            project = self._("project not verified")
        serial = ""
        if stove.serial and stove.serial != stove.name:
            # Translators: the stove's serial number (16 characters) on its screen.
            serial = self._("Serial: {value}", value=fit(stove.serial, SERIAL_WIDTH)) + "\n"
        status = self._word(stove.status, STATUS_WORDS)
        # Translators: stove menu item and title; 20 characters at most.
        cooking = self._("Report cooking")
        # Translators: stove menu item and title; 20 characters at most.
        fuel = self._("Report fuel")
        return (
            f"{fit(stove.name, NAME_WIDTH)}\n{status}, {project}\n{serial}"
            f"{self._items(cooking, fuel)}\n{self.footer}"
        )

    def report_quantity(self, stove: StoveView, kind: str) -> str:
        if kind == COOKING:
            title = self._("Report cooking")
            # Translators: question of a cooking report; 40 characters at most.
            question = self._("How many meals were cooked?")
        else:
            title = self._("Report fuel")
            # Translators: question of a fuel report; 40 characters at most.
            question = self._("How many kg of fuel were bought?")
        # Translators: the range of the number to type ({low} is 1, {high} 1000).
        bounds = self._("Enter {low} to {high}")
        return f"{title}\n{fit(stove.name, NAME_WIDTH)}\n{question}\n{bounds}\n{self.footer}"

    def report_confirm(self, stove: StoveView, kind: str, quantity: int) -> str:
        name = fit(stove.name, NAME_WIDTH)
        if kind == COOKING:
            # Translators: confirmation; {stove} is a name of 24 characters. 60 characters.
            question = self._n(
                "Report {n} meal for {stove}?",
                "Report {n} meals for {stove}?",
                quantity,
                stove=name,
            )
        else:
            # Translators: confirmation; {stove} is a name of 24 characters. 60 characters.
            question = self._("Report {n} kg of fuel for {stove}?", n=quantity, stove=name)
        return f"{question}\n1. {self._confirm()}\n{self.footer}"

    def report_result(self, outcome: str, claim: str = "") -> str:
        """`outcome` is "sent" (then `claim` is its short id) or why the report was refused:
        notVerified, noCollection, inactive, gone, periodClaimed, outOfRange, refused."""
        # Translators: why a report is refused (any other reason); 40 characters at most.
        refused = N_("Report not accepted. Try again later.")
        words = {
            # Translators: a report was accepted; {claim} is a 6-character id. 60 characters.
            "sent": N_("Report sent. Claim {claim} is pending."),
            # Translators: why a report is refused; 40 characters at most.
            "notVerified": N_("Project not verified yet."),
            # Translators: why a report is refused; 40 characters at most.
            "noCollection": N_("No open collection."),
            # Translators: why a report is refused; 40 characters at most.
            "inactive": N_("This stove is not active."),
            "gone": N_("Stove not found."),
            # Translators: the stove's report for last month was already sent (by phone or
            # by the programme); 60 characters at most.
            "periodClaimed": N_("This stove's report for last month was sent already."),
            # Translators: a reported number is outside what the programme allows; 60 at most.
            "outOfRange": N_("Report not accepted: the number is outside the allowed range."),
        }.get(outcome, refused)
        return self._(words, claim=claim) + "\n" + self.footer

    def claims(self, shown: Sequence[ClaimLine], page: int, pages: int) -> str:
        """One page of the customer's claims, newest first: short id, date, status."""
        if not shown:
            return self.no_claims
        rows = [
            fit(
                f"{short_id(c.id)} {c.submitted_at:%d/%m/%y} {self._word(c.status, STATUS_WORDS)}",
                LIST_ROW,
            )
            for c in shown
        ]
        title = _list_title(self._("My Claims"), page, pages)
        return f"{title}\n" + "\n".join(rows) + f"\n{self._more(page, pages)}{self.footer}"

    def credits(self, balances: Sequence[tuple[str, str]]) -> str:
        title = self._("My Credits")
        if not balances:
            # Translators: under "My Credits" when there are none; 30 characters at most.
            return self._page(title, self._("No credits yet."))
        shown = list(balances[:MAX_TOKENS])
        rows = [f"{fit(token, TOKEN_WIDTH)}: {amount}" for token, amount in shown]
        if len(balances) > MAX_TOKENS:
            more = len(balances) - MAX_TOKENS + 1
            # Translators: last row of a credit list cut short; 20 characters at most.
            rows[-1] = self._n("and {n} more", "and {n} more", more)
        return self._page(title, "\n".join(rows))

    # -- my stove: its state, and reporting a problem -------------------------------------
    def _when(self, moment: datetime) -> str:
        """'23/11 08:15' this year, '23/11/2025' before: short, and read the same way in
        every language of the menus (day first)."""
        local = moment.astimezone(self.zone) if self.zone else moment
        now = datetime.now(local.tzinfo)
        return f"{local:%d/%m %H:%M}" if local.year == now.year else f"{local:%d/%m/%Y}"

    def stove_pick(self, shown: Sequence[StoveView], page: int, pages: int) -> str:
        """The customer's stoves to pick one for Stove Status (several stoves only)."""
        title = _list_title(self._("Stove Status"), page, pages)
        rows = self._stove_rows(shown, state=False)
        return f"{title}\n{rows}\n{self._more(page, pages)}{self.footer}"

    @property
    def no_stove_status(self) -> str:
        return self._page(self._("Stove Status"), self._("No stoves yet."))

    def stove_status(self, stove: StoveView, health: StoveHealth) -> str:
        if health.online:
            # Translators: Stove Status line: the stove sent data just now. 40 characters.
            online = self._("Online now")
        elif health.last_seen is not None:
            # Translators: Stove Status line; {when} is "23/11 08:15" or "23/11/2025". 40 chars.
            online = self._("Offline. Seen {when}", when=self._when(health.last_seen))
        else:
            # Translators: Stove Status line: the stove never sent data. 40 characters.
            online = self._("No data from stove yet")
        if health.last_cooked is not None:
            # Translators: Stove Status line; {when} is "23/11 08:15" or "23/11/2025". 40 chars.
            cooked = self._("Last cooked {when}", when=self._when(health.last_cooked))
        else:
            # Translators: Stove Status line: no cooking recorded. 40 characters.
            cooked = self._("No cooking recorded")
        # Translators: Stove Status line; {n} cooking sessions this calendar month and
        # {kwh} their energy, as "3.4". 40 characters at most.
        month = self._n(
            "Cooked {n} time this month, {kwh} kWh",
            "Cooked {n} times this month, {kwh} kWh",
            health.month_sessions,
            kwh=f"{health.month_kwh:.1f}",
        )
        # Translators: Stove Status item and title; opens the list of problems. 20 chars.
        report = self._("Report a problem")
        name = fit(stove.name, NAME_WIDTH)
        return f"{name}\n{online}\n{cooked}\n{month}\n1. {report}\n{self.footer}"

    @property
    def problem_kinds(self) -> str:
        words = [self._(PROBLEM_WORDS[kind]) for kind in PROBLEM_KINDS]
        return self._menu(self._("Report a problem"), *words)

    def problem_confirm(self, stove: StoveView, kind: str) -> str:
        # Translators: confirmation; {problem} is a problem kind, {stove} a name of 24.
        question = self._(
            "Report {problem} for {stove}?",
            problem=self._(PROBLEM_WORDS[kind]),
            stove=fit(stove.name, NAME_WIDTH),
        )
        return f"{question}\n1. {self._confirm()}\n{self.footer}"

    def problem_sent(self, reference: str) -> str:
        # Translators: after a problem report; {ref} is 8 characters. 90 characters at most.
        words = self._("Problem reported. Ref {ref}. An agent will contact you.", ref=reference)
        return f"{words}\n{self.footer}"


class Notice:
    """One-line messages put above a re-shown screen after a wrong answer: msgids, which
    the screen's Content translates (Content.notice). 45 characters at most each."""

    # Translators: a notice line above a screen; 45 characters at most.
    invalid_choice = N_("Invalid choice.")
    # Translators: a notice line above a screen; 45 characters at most.
    bad_name = N_("Enter 2 to 40 letters.")
    # Translators: a notice line above a screen; 45 characters at most.
    pin_mismatch = N_("PINs did not match. Try again.")
    # Translators: a notice line above a screen; 45 characters at most.
    same_pin = N_("New PIN must differ from the old one.")
    # Translators: a notice line above a screen; 45 characters at most.
    pin_changed = N_("PIN changed.")
    # Translators: a notice line above a screen; 45 characters at most.
    bad_customer_id = N_("Check the customer ID and try again.")
    # Translators: a notice line above a screen; 45 characters at most.
    unknown_customer = N_("Customer ID not found.")
    # Translators: a notice line above a screen; 45 characters at most.
    wrong_id_or_pin = N_("Wrong customer ID or PIN.")
    # Translators: a notice line above a screen; 45 characters at most.
    no_phone_account = N_("No account for this phone.")
    # Translators: a notice line above a screen; 45 characters at most.
    phone_registered = N_("This phone has an account. Log in.")
    # Translators: a notice line above a screen; 45 characters at most.
    pin_digits = N_("PIN must be {digits} digits.")
    # Translators: a notice line above a screen; 45 characters at most.
    pin_too_easy = N_("PIN too easy. Avoid repeats and sequences.")
    # Translators: a notice line above a screen; 45 characters at most.
    quantity_digits = N_("Enter digits only, e.g. 5.")
    # Translators: a notice line above a screen; 45 characters at most.
    quantity_range = N_("Enter a number from {low} to {high}.")
    # Translators: shown above the menu after a new language is chosen, in that language.
    language_set = N_("Language changed.")

    @staticmethod
    def wrong_pin(attempts_left: int) -> Plural:
        # Translators: a notice line above the PIN screen; 45 characters at most.
        return Plural(
            "Wrong PIN. {n} attempt left.", "Wrong PIN. {n} attempts left.", attempts_left
        )


def all_contents(
    service_name: str, support_contact: str, zone: tzinfo | None = None
) -> dict[str, Content]:
    """One Content per served language, made once at start."""
    return {code: Content(service_name, support_contact, code, zone) for code in LANGUAGES}
