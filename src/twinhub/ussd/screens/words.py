"""What every USSD screen is built from: the translation of its words, the pieces every menu
shares (items, "0. Back", "*. Exit", "9. More"), the widths rows are cut to.

Every user-facing sentence is an English msgid passed to `self._` (or `self._n` for a count),
translated through the gettext catalogues under `locale/` (see i18n.py); the comments starting
"Translators:" above a msgid travel into the catalogues and tell a translator where the words
show and how short they must be. Numbers of menu items ("1. ") and the "CON"/"END" prefix are
never in a msgid.

Translations keep to the GSM 03.38 default alphabet (GSM-7): a single character outside it
makes the aggregator send the whole screen as UCS-2, which halves what fits.
"""

from __future__ import annotations

import gettext
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date

from twinhub.security.pins import PIN_LENGTH
from twinhub.services.stove_care import PROBLEM_KINDS
from twinhub.services.stoves import MAX_QUANTITY, MIN_QUANTITY, REJECTION_REASONS, StoveView
from twinhub.ussd.i18n import ENGLISH, LANGUAGES, translations

MAX_SCREEN = 182  # characters of a whole reply, "CON " included
MORE = "9"  # the key that turns a list's page
# Lists have fixed page sizes so that a number typed after a notice picks the same row.
# Their rows are cut to LIST_ROW characters; with a title, "9. More" and the footer, a
# full page leaves room for the one notice a list screen carries ("Invalid choice.").
# A claim's row may say why it was rejected, so a page holds three.
STOVES_PER_PAGE, CLAIMS_PER_PAGE, MAX_TOKENS = 3, 3, 4
LIST_ROW = 34
CLAIM_ROW = 38  # a claim's row: id, date and state, a rejected one's with why
NAME_WIDTH = 24  # a stove's name on its own screens
# A list row keeps at least this much room for a stove's name: where the stove's whole state
# would leave less (a long translation), the row shows its status alone, and the stove's own
# screen the rest.
MIN_NAME = 12
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


@dataclass(frozen=True, slots=True)
class Filled:
    """A notice whose {placeholders} take values of the moment (a survey's own range)
    instead of the fixed ones: translated and filled at render time."""

    message: str
    values: tuple[tuple[str, object], ...]


NoticeText = str | Plural | Filled


def fit(text: str, width: int) -> str:
    """`text` on one line of at most `width` characters (names come from the registry),
    shortened by whole words: the first words that fit, and a last word holding a digit
    (the number that tells one stove from the next) kept. Only a first word longer than the
    width is cut by letters, marked with "."."""
    clean = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    if len(clean) <= width:
        return clean
    words = clean.split(" ")
    last = words[-1]
    keep_last = len(words) > 1 and any(c.isdigit() for c in last) and len(last) <= width // 2
    tail = f" {last}" if keep_last else ""
    room = width - len(tail)
    head = ""
    for word in words[:-1] if keep_last else words:
        longer = f"{head} {word}" if head else word
        if len(longer) > room:
            break
        head = longer
    if not head:  # one word longer than the room: letters are the only way to cut it
        head = words[0][: room - 1].rstrip() + "."
    return head + tail


def _tags(stoves: Sequence[StoveView]) -> list[str]:
    """Short tags telling `stoves` apart: the shortest tail of their serial numbers, else of
    their DIDs, that differs for each; else their order."""
    for source in (lambda s: s.serial or "", lambda s: s.did):
        for length in (3, 4, 6, 8):
            tags = [source(stove)[-length:] for stove in stoves]
            if all(tags) and len(set(tags)) == len(tags):
                return tags
    return [str(n) for n in range(1, len(stoves) + 1)]


def stove_labels(stoves: Sequence[StoveView], widths: Sequence[int]) -> list[str]:
    """The names of the stoves on one screen, each at most its width of `widths` and no two
    the same: stoves whose names read the same there carry a tag ("Jiko #012")."""
    labels = [fit(stove.name, width) for stove, width in zip(stoves, widths, strict=True)]
    same = [n for n, label in enumerate(labels) if labels.count(label) > 1]
    if same:
        tags = _tags([stoves[n] for n in same])
        for n, tag in zip(same, tags, strict=True):
            mark = f" #{tag}"
            labels[n] = fit(stoves[n].name, max(widths[n] - len(mark), 1)) + mark
    if len(set(labels)) < len(labels):  # a tagged name met an untagged one: number them all
        labels = [
            f"{fit(s.name, max(width - 3, 1))} #{n}"
            for n, (s, width) in enumerate(zip(stoves, widths, strict=True), start=1)
        ]
    return labels


def short_id(claim_id: str) -> str:
    return claim_id[:SHORT_ID]


def pages_of(count: int, per_page: int) -> int:
    """How many pages a list of `count` rows takes (an empty list still has its one page)."""
    return max(1, -(-count // per_page))


def list_title(title: str, page: int, pages: int) -> str:
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
# The months, as a report's confirmation names the month it covers.
MONTHS = (
    # Translators: a month, in "Report 5 meals in {month} for ...?"; 11 characters at most.
    N_("January"),
    # Translators: a month, in "Report 5 meals in {month} for ...?"; 11 characters at most.
    N_("February"),
    # Translators: a month, in "Report 5 meals in {month} for ...?"; 11 characters at most.
    N_("March"),
    # Translators: a month, in "Report 5 meals in {month} for ...?"; 11 characters at most.
    N_("April"),
    # Translators: a month, in "Report 5 meals in {month} for ...?"; 11 characters at most.
    N_("May"),
    # Translators: a month, in "Report 5 meals in {month} for ...?"; 11 characters at most.
    N_("June"),
    # Translators: a month, in "Report 5 meals in {month} for ...?"; 11 characters at most.
    N_("July"),
    # Translators: a month, in "Report 5 meals in {month} for ...?"; 11 characters at most.
    N_("August"),
    # Translators: a month, in "Report 5 meals in {month} for ...?"; 11 characters at most.
    N_("September"),
    # Translators: a month, in "Report 5 meals in {month} for ...?"; 11 characters at most.
    N_("October"),
    # Translators: a month, in "Report 5 meals in {month} for ...?"; 11 characters at most.
    N_("November"),
    # Translators: a month, in "Report 5 meals in {month} for ...?"; 11 characters at most.
    N_("December"),
)
# Why a claim was rejected, as the claims list says it in place of "rejected"
# (services.stoves.rejection_reason reads the evaluator's words into these codes).
REJECTION_WORDS = {
    # Translators: a rejected claim's row in the claims list: rejected because the report
    # said more than the stove's meter recorded. 22 characters at most.
    "tooMany": N_("rejected: too many"),
    # Translators: a rejected claim's row: the stove's month was counted already by another
    # claim or period. 22 characters at most.
    "counted": N_("rejected: repeated"),
    # Translators: a rejected claim's row: the stove's meter sent no data for the month.
    # 22 characters at most.
    "noData": N_("rejected: no data"),
    # Translators: a rejected claim's row, any other reason: the customer should call the
    # programme. 22 characters at most.
    "other": N_("rejected: call us"),
}
assert set(REJECTION_WORDS) == set(REJECTION_REASONS)
# Where an approved claim's credits are: the oracle's approval is a draft figure, the
# credits come with the registry's issuance of the project's monitoring period.
CREDIT_WORDS = {
    # Translators: an approved claim's row in the claims list whose credits the registry
    # has not issued yet (they come with the project's next verified period). 22 characters
    # at most.
    "awaiting issuance": N_("approved, not issued"),
    # Translators: an approved claim's row in the claims list whose credits were issued
    # (they are in "My Credits"). 22 characters at most.
    "issued": N_("credits issued"),
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


def stove_rows(shown: Sequence[StoveView], state: Callable[[StoveView, bool], str] | None) -> str:
    """Numbered rows of stoves' names, each followed by its state when `state` is given
    (`state(stove, whole)`: the whole state, or its shortest form). Every row fits LIST_ROW
    without a word cut: a state that would leave a long name less than MIN_NAME is
    shortened, and left out if even its shortest form would."""
    prefix_width = len(f"{len(shown)}. ")
    suffixes = []
    for stove in shown:
        needed = min(len(fit(stove.name, LIST_ROW)), MIN_NAME)
        suffix = ""
        for whole in (True, False) if state is not None else ():
            candidate = f" ({state(stove, whole)})"  # type: ignore[misc]
            if LIST_ROW - prefix_width - len(candidate) >= needed:
                suffix = candidate
                break
        suffixes.append(suffix)
    labels = stove_labels(shown, [LIST_ROW - prefix_width - len(s) for s in suffixes])
    return "\n".join(
        f"{number}. {label}{suffix}"
        for number, (label, suffix) in enumerate(zip(labels, suffixes, strict=True), start=1)
    )


class Wording:
    """One language's words and the pieces every screen shares; each menu's screens build
    on it. Its catalogue is read once per process (i18n.translations)."""

    def __init__(self, language: str = ENGLISH) -> None:
        self.code = language if language in LANGUAGES else ENGLISH
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
        if isinstance(notice, Filled):
            return self._catalogue.gettext(notice.message).format(
                **{**FIXED, **dict(notice.values)}
            )
        return self._(notice)

    def month(self, day: date) -> str:
        """The name of `day`'s month in this language."""
        return self._(MONTHS[day.month - 1])

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
