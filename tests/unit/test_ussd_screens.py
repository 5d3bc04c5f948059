"""Every screen in every language, with the longest notice it can carry, fits the
182-character USSD limit and keeps to the GSM-7 alphabet (see ussd/screens/).

This file renders each screen from its Content with the worst inputs the registry may hand
it; tests/integration/ussd/test_ussd_languages.py walks the real flows over HTTP in every language.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from twinhub.services.customers import CustomerView
from twinhub.services.stove_care import PROBLEM_KINDS, StoveHealth
from twinhub.services.stoves import (
    COOKING,
    FUEL,
    REJECTION_REASONS,
    ClaimLine,
    StoveView,
    rejection_reason,
)
from twinhub.ussd.i18n import LANGUAGES
from twinhub.ussd.menu import Reply, State
from twinhub.ussd.navigation import FIXED_SCREENS
from twinhub.ussd.screens import (
    CLAIMS_PER_PAGE,
    MAX_SCREEN,
    MAX_TOKENS,
    STOVES_PER_PAGE,
    Content,
    Notice,
    Plural,
    all_contents,
)
from twinhub.ussd.screens.words import MONTHS, REJECTION_WORDS

# GSM 03.38 default alphabet (without the escape to the extension table): a reply made
# of these characters goes as GSM-7, 182 to a USSD screen.
GSM7 = frozenset(
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
LONGEST_NAME = "W" * 40
CONTENTS = all_contents("x" * 20, "+" + "9" * 39)
NOTICES: list[str | Plural] = [
    value for name, value in vars(Notice).items() if isinstance(value, str) and name[0] != "_"
]
NOTICES += [Notice.wrong_pin(10), Notice.wrong_pin(1)]
# The main menu shows only these notices (a wrong key, a PIN changed, a language chosen).
MAIN_MENU_NOTICES = [Notice.invalid_choice, Notice.pin_changed, Notice.language_set]
# The notices each screen can show above itself (menu.py); all others: "Invalid choice.".
PIN_TYPED = [Notice.pin_digits, Notice.wrong_pin(10), Notice.wrong_pin(1), Notice.wrong_id_or_pin]
NOTICES_OF: dict[str, list[str | Plural]] = {
    State.pre_menu.value: [Notice.invalid_choice, Notice.language_set],
    State.account_menu.value: [Notice.invalid_choice, Notice.phone_registered],
    State.create_name.value: [Notice.bad_name],
    State.create_pin.value: [Notice.pin_digits, Notice.pin_too_easy, Notice.pin_mismatch],
    State.create_pin_confirm.value: [],
    State.login_id.value: [Notice.no_phone_account, Notice.bad_customer_id],
    State.login_pin.value: PIN_TYPED,
    State.change_pin_current.value: PIN_TYPED,
    State.change_pin_new.value: [
        Notice.pin_digits,
        Notice.pin_too_easy,
        Notice.same_pin,
        Notice.pin_mismatch,
    ],
    State.change_pin_confirm.value: [],
    State.report_quantity.value: [Notice.quantity_digits, Notice.quantity_range],
    # A survey's household size: its own range, the widest the settings allow.
    State.survey_people.value: [Notice.quantity_digits, Notice.out_of_range(999, 999)],
}
# The longest of everything the registry may hand a screen: names, serials, statuses.
WORST_STOVES = [
    StoveView(
        did="did:ixo:entity/" + "x" * 16,
        name="W" * 200,
        status="deactivated",
        project=project,
        project_verified=False,
        serial="S" * 200,
    )
    for project in ("did:ixo:entity/" + "p" * 16, None)
]
WORST_CLAIM = ClaimLine(
    id="c" * 100,
    status="invalidated",
    report_type=COOKING,
    asset=None,
    submitted_at=datetime(2099, 12, 31, tzinfo=UTC),
)
REJECTED_CLAIMS = [
    ClaimLine("r" * 32, "rejected", COOKING, None, datetime(2099, 12, 31, tzinfo=UTC), reason)
    for reason in REJECTION_REASONS
]
# The longest month's name of every language (September, mostly).
LONG_MONTH = date(2099, 9, 1)
LATE = datetime(2099, 12, 31, 23, 59, tzinfo=UTC)
WORST_HEALTH = [
    StoveHealth(False, LATE, LATE, 9999, 99_999.9),  # four sessions an hour all month
    StoveHealth(True, LATE, None, 1, 0.0),
    StoveHealth(False, None, None, 0, 0.0),
]


def longest_notice(content: Content, notices: list[str | Plural]) -> str:
    return max((content.notice(notice) for notice in notices), key=len, default="")


def fixed_screens(content: Content) -> list[tuple[str, str]]:
    customer = CustomerView(
        customer_id="99999999",
        phone_number="+" + "9" * 15,
        full_name=LONGEST_NAME,
        created_at=datetime.now(UTC),
        locked=False,
    )
    screens = [(state.value, render(content)) for state, render in FIXED_SCREENS.items()]
    screens += [
        ("language", content.welcome.language),
        ("languageSignedIn", content.welcome.language),
        ("accountCreated", content.account.account_created("99999999")),
        ("accountDetails", content.account.account_details(customer)),
        *[("stoveDetails", content.stoves.stove_details(stove)) for stove in WORST_STOVES],
        *[
            (state.value, render(stove, kind))
            for stove in WORST_STOVES
            for kind in (COOKING, FUEL)
            for state, render in (
                (State.report_quantity, content.stoves.report_quantity),
                (
                    State.report_confirm,
                    lambda s, k: content.stoves.report_confirm(s, k, 1000, LONG_MONTH),
                ),
            )
        ],
        *[
            ("reportResult", content.stoves.report_result(outcome, "c" * 6, LONG_MONTH))
            for outcome in (
                "sent",
                "notVerified",
                "noCollection",
                "inactive",
                "gone",
                "periodClaimed",
                "outOfRange",
                "refused",
            )
        ],
        *[
            ("stoveStatus", content.status.stove_status(stove, health))
            for stove in WORST_STOVES
            for health in WORST_HEALTH
        ],
        *[
            ("problemConfirm", content.status.problem_confirm(stove, kind))
            for stove in WORST_STOVES
            for kind in PROBLEM_KINDS
        ],
        ("problemSent", content.status.problem_sent("f" * 8)),
        ("surveyPeople", content.survey.people(LONGEST_NAME, 999, 999)),
        ("surveyInUse", content.survey.in_use(LONGEST_NAME)),
        ("surveyFuel", content.survey.other_fuel(LONGEST_NAME)),
        ("problemKind", content.status.problem_kinds),
        ("stoveStatus", content.stoves.stove_gone),
    ]
    return screens


def list_screens(content: Content) -> list[tuple[str, str]]:
    """Full pages with the widest page titles; a list re-shows only under "Invalid choice"."""
    tokens = [("T" * 40, 2**53)] * (MAX_TOKENS + 3)
    screens = [("credits", content.claims.credits(tokens[:n])) for n in range(len(tokens) + 1)]
    for page, pages in ((0, 1), (8, 99), (98, 99), (998, 1000), (99_998, 99_999)):
        stoves = (WORST_STOVES * STOVES_PER_PAGE)[:STOVES_PER_PAGE]
        screens.append(("stoves", content.stoves.stoves(stoves, page, pages)))
        screens.append(("stovePick", content.status.stove_pick(stoves, page, pages)))
        screens.append(
            ("claims", content.claims.claims([WORST_CLAIM] * CLAIMS_PER_PAGE, page, pages))
        )
        for first in range(len(REJECTED_CLAIMS)):  # every reason, a page full of them
            claims = (REJECTED_CLAIMS * 2)[first : first + CLAIMS_PER_PAGE]
            screens.append(("claims", content.claims.claims(claims, page, pages)))
    screens += [
        ("stoves", content.stoves.stoves([], 0, 1)),
        ("claims", content.claims.claims([], 0, 1)),
        ("stovePick", content.status.no_stove_status),
    ]
    return screens


def closing_messages(content: Content) -> list[str]:
    return [
        content.closing.goodbye,
        content.closing.locked(10),
        content.closing.locked(1),
        *[content.closing.locked(10, seconds) for seconds in (1, 59, 3599, 86_400 * 30)],
        *[content.closing.phone_locked(seconds) for seconds in (1, 59, 3599, 86_400 * 30)],
        content.closing.invalid_request,
        content.closing.unavailable,
        content.closing.expired,
        content.closing.ended,
        content.closing.logged_out,
        content.closing.rate_limited,
    ]


CASES = [
    (code, state, text)
    for code, content in CONTENTS.items()
    for state, text in fixed_screens(content)
]
LIST_CASES = [
    (code, state, text)
    for code, content in CONTENTS.items()
    for state, text in list_screens(content)
]


@pytest.mark.parametrize(("code", "state", "text"), CASES, ids=lambda v: str(v)[:20])
def test_screen_with_longest_notice_fits(code: str, state: str, text: str) -> None:
    content = CONTENTS[code]
    notice = longest_notice(content, NOTICES_OF.get(state, [Notice.invalid_choice]))
    rendered = Reply(False, f"{notice}\n{text}" if notice else text).render()
    assert len(rendered) <= MAX_SCREEN, (code, state, len(rendered), rendered)
    assert set(rendered) <= GSM7, (code, state, set(rendered) - GSM7)


@pytest.mark.parametrize("code", LANGUAGES)
def test_main_menu_with_longest_name_and_notice_fits(code: str) -> None:
    content = CONTENTS[code]
    text = content.account.main_menu(LONGEST_NAME)
    rendered = Reply(False, f"{longest_notice(content, MAIN_MENU_NOTICES)}\n{text}").render()
    assert len(rendered) <= MAX_SCREEN, (code, len(rendered), rendered)


@pytest.mark.parametrize(("code", "state", "text"), LIST_CASES, ids=lambda v: str(v)[:20])
def test_list_page_with_its_notice_fits(code: str, state: str, text: str) -> None:
    notice = CONTENTS[code].notice(Notice.invalid_choice)
    rendered = Reply(False, f"{notice}\n{text}").render()
    assert len(rendered) <= MAX_SCREEN, (code, state, len(rendered), rendered)
    assert set(rendered) <= GSM7, (code, state, set(rendered) - GSM7)


def test_every_notice_is_shown_somewhere() -> None:
    shown = {str(n) for notices in NOTICES_OF.values() for n in notices}
    shown |= {str(n) for n in MAIN_MENU_NOTICES}
    assert {str(n) for n in NOTICES} - shown == {Notice.unknown_customer}


@pytest.mark.parametrize("code", LANGUAGES)
def test_every_state_has_a_screen(code: str) -> None:
    content = CONTENTS[code]
    named = {name for name, _ in fixed_screens(content) + list_screens(content)}
    named.add(State.main_menu.value)  # its own test above
    assert named == {state.value for state in State}


@pytest.mark.parametrize("code", LANGUAGES)
def test_closing_messages_fit(code: str) -> None:
    for message in closing_messages(CONTENTS[code]):
        rendered = Reply(True, message).render()
        assert len(rendered) <= MAX_SCREEN, (code, len(rendered), rendered)
        assert set(rendered) <= GSM7, (code, set(rendered) - GSM7)


def test_screens_stay_on_their_lines() -> None:
    """Registry text cannot add lines to a screen or push its menu off it."""
    content = Content()
    stove = StoveView("did:ixo:entity/x", "Jiko\nA12\t*", "active", "did:ixo:entity/p", True)
    assert (
        content.stoves.stoves([stove], 0, 1).splitlines()[1] == "1. Jiko A12 * (active, verified)"
    )
    assert content.stoves.stove_details(stove).startswith(
        "Jiko A12 *\nactive, project verified\n1."
    )


def test_seed_closing_texts_are_exact() -> None:
    content = Content()
    assert (
        Reply(True, content.closing.invalid_request).render()
        == "END Invalid input. Please try again."
    )
    assert (
        Reply(True, content.closing.unavailable).render()
        == "END Service temporarily unavailable. Please try again later."
    )


def test_languages_really_differ() -> None:
    """Each catalogue is loaded and translates: no language silently shows English."""
    welcomes = {code: content.welcome.welcome() for code, content in CONTENTS.items()}
    assert len(set(welcomes.values())) == len(LANGUAGES)
    assert welcomes["sw"].startswith("Karibu ")
    assert welcomes["fr"].startswith("Bienvenue ")
    assert CONTENTS["fr"].notice(Notice.wrong_pin(2)) == "PIN incorrect. 2 essais restants."
    assert CONTENTS["fr"].notice(Notice.wrong_pin(1)) == "PIN incorrect. 1 essai restant."


# Stoves a household may well hold several of: names alike but for a number, names the same
# (told apart by their serial numbers), long names of several words.
ALIKE = [
    [
        StoveView(f"did:ixo:entity/s{n}", f"Induction Njira {n}", "active", "p", True)
        for n in (1, 2, 3)
    ],
    [
        StoveView(f"did:ixo:entity/j{n}", "Jiko Bora", "active", "p", True, f"JK-2026-{n:05d}")
        for n in (17, 18, 117)
    ],
    [
        StoveView(f"did:ixo:entity/x{n}", name, "deactivated", None, False)
        for n, name in enumerate(
            (
                "Improved Induction Cooker Model 2024 Unit 12",
                "Improved Induction Cooker Model 2024 Unit 13",
                "Kitchen stove of the Mwale family",
            )
        )
    ],
]


def stove_labels(screen: str) -> list[str]:
    """The text after the number of each stove row: "1. Jiko #017 (active)"."""
    return [line.split(". ", 1)[1] for line in screen.splitlines() if line[:1] in "123"]


@pytest.mark.parametrize("code", LANGUAGES)
def test_stove_lists_read_well_in_every_language(code: str) -> None:
    """Names are shortened by whole words, two stoves never read the same on one page, and
    the page fits with its notice."""
    content = CONTENTS[code]
    notice = content.notice(Notice.invalid_choice)
    for stoves in ALIKE:
        words_of = {word for stove in stoves for word in stove.name.split()}
        for page, pages in ((0, 1), (98, 99), (99_998, 99_999)):
            for screen in (
                content.stoves.stoves(stoves, page, pages),
                content.status.stove_pick(stoves, page, pages),
            ):
                rendered = Reply(False, f"{notice}\n{screen}").render()
                assert len(rendered) <= MAX_SCREEN, (code, len(rendered), rendered)
                labels = stove_labels(screen)
                assert len(labels) == len(stoves) and len(set(labels)) == len(labels), screen
                for label in labels:
                    name = label.split(" (")[0]  # without the state
                    for word in name.split():  # whole words of the name, or a tag
                        assert word in words_of or word.startswith("#"), (code, word, screen)
                    # A row's state is whole: never cut in a word.
                    if " (" in label:
                        state = label.split(" (", 1)[1]
                        assert state.endswith(")"), (code, label)


@pytest.mark.parametrize("code", LANGUAGES)
def test_confirmations_say_what_and_which_month(code: str) -> None:
    content = CONTENTS[code]
    names = [content.stoves.month(date(2026, month, 1)) for month in range(1, 13)]
    assert len(set(names)) == 12  # twelve months, in this language's words
    if code != "en":
        assert names != [str(m) for m in MONTHS]
    stove = ALIKE[0][0]
    for month, name in enumerate(names, start=1):
        day = date(2026, month, 1)
        for kind, quantity in ((COOKING, 7), (FUEL, 12)):
            confirm = content.stoves.report_confirm(stove, kind, quantity, day)
            assert name in confirm and str(quantity) in confirm and stove.name in confirm
        sent = content.stoves.report_result("sent", "abc123", day)
        assert name in sent and "abc123" in sent
        assert name in content.stoves.report_result("periodClaimed", "", day)


@pytest.mark.parametrize("code", LANGUAGES)
def test_a_rejected_claim_says_why(code: str) -> None:
    content = CONTENTS[code]
    screen = content.claims.claims(REJECTED_CLAIMS[:CLAIMS_PER_PAGE], 0, 1)
    for claim, row in zip(REJECTED_CLAIMS[:CLAIMS_PER_PAGE], screen.splitlines()[1:], strict=False):
        assert row.endswith(content.claims._(REJECTION_WORDS[claim.reason])), (code, row)
    said = {content.claims._(REJECTION_WORDS[reason]) for reason in REJECTION_REASONS}
    assert len(said) == len(REJECTION_REASONS)  # each reason in words of its own


def test_an_evaluators_reason_reads_as_a_few_words() -> None:
    """The evaluators' own words (the oracle's corroboration and double-counting checks,
    services.claims; a person's) become the codes the screens translate."""
    assert (
        rejection_reason(
            "the claim says 90 meals; the telemetry recorded 30 cooking sessions "
            "(more than 20% over)"
        )
        == "tooMany"
    )
    assert (
        rejection_reason(
            "the stove-period 2026-10-01..2026-10-31 was credited already by claim abc "
            "(double counting)"
        )
        == "counted"
    )
    assert rejection_reason("no meter readings for the period") == "noData"
    assert rejection_reason("Household moved away") == "other"
    assert rejection_reason(None) == "other"
