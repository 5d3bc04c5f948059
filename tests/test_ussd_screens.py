"""Every screen, with the longest notice it can carry, fits the 182-character USSD limit."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from twinhub.security.pins import pin_problem
from twinhub.services.customers import CustomerView
from twinhub.services.stoves import COOKING, FUEL, ClaimLine, StoveView
from twinhub.ussd.menu import Reply, State, state_attribute
from twinhub.ussd.screens import (
    CLAIMS_PER_PAGE,
    MAX_SCREEN,
    MAX_TOKENS,
    STOVES_PER_PAGE,
    Content,
    Notice,
)

LONGEST_NAME = "W" * 40
CONTENT = Content(service_name="x" * 20, support_contact="+" + "9" * 39)
NOTICES = [
    value for name, value in vars(Notice).items() if isinstance(value, str) and name[0] != "_"
]
NOTICES += [Notice.wrong_pin(10), pin_problem("11111") or "", pin_problem("1") or ""]
LONGEST_NOTICE = max(NOTICES, key=len)
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


def fixed_screens() -> list[tuple[str, str]]:
    customer = CustomerView(
        customer_id="99999999",
        phone_number="+" + "9" * 15,
        full_name=LONGEST_NAME,
        created_at=datetime.now(UTC),
        locked=False,
    )
    screens = [(state.value, getattr(CONTENT, state_attribute(state), None)) for state in State]
    screens = [(name, text) for name, text in screens if isinstance(text, str)]
    screens += [
        ("preMenu", CONTENT.welcome()),
        ("accountCreated", CONTENT.account_created("99999999")),
        ("mainMenu", CONTENT.main_menu(LONGEST_NAME)),
        ("accountDetails", CONTENT.account_details(customer)),
        *[("stoveDetails", CONTENT.stove_details(stove)) for stove in WORST_STOVES],
        *[
            (state.value, render(stove, kind))
            for stove in WORST_STOVES
            for kind in (COOKING, FUEL)
            for state, render in (
                (State.report_quantity, CONTENT.report_quantity),
                (State.report_confirm, lambda s, k: CONTENT.report_confirm(s, k, 1000)),
            )
        ],
        *[
            ("reportResult", CONTENT.report_result(outcome, "c" * 6))
            for outcome in ("sent", "notVerified", "noCollection", "inactive", "gone", "refused")
        ],
    ]
    return screens


def list_screens() -> list[tuple[str, str]]:
    """Full pages with the widest page titles; a list re-shows only under "Invalid choice"."""
    tokens = [("T" * 40, 2**53)] * (MAX_TOKENS + 3)
    screens = [("credits", CONTENT.credits(tokens[:n])) for n in range(len(tokens) + 1)]
    for page, pages in ((0, 1), (8, 99), (98, 99), (998, 1000), (99_998, 99_999)):
        stoves = (WORST_STOVES * STOVES_PER_PAGE)[:STOVES_PER_PAGE]
        screens.append(("stoves", CONTENT.stoves(stoves, page, pages)))
        screens.append(("claims", CONTENT.claims([WORST_CLAIM] * CLAIMS_PER_PAGE, page, pages)))
    screens += [("stoves", CONTENT.stoves([], 0, 1)), ("claims", CONTENT.claims([], 0, 1))]
    return screens


@pytest.mark.parametrize(("state", "text"), fixed_screens(), ids=lambda v: str(v)[:20])
def test_screen_with_longest_notice_fits(state: str, text: str) -> None:
    rendered = Reply(False, f"{LONGEST_NOTICE}\n{text}").render()
    assert len(rendered) <= MAX_SCREEN, (state, len(rendered))


@pytest.mark.parametrize(("state", "text"), list_screens(), ids=lambda v: str(v)[:20])
def test_list_page_with_its_notice_fits(state: str, text: str) -> None:
    rendered = Reply(False, f"{Notice.invalid_choice}\n{text}").render()
    assert len(rendered) <= MAX_SCREEN, (state, len(rendered))


def test_every_state_has_a_screen() -> None:
    named = {name for name, _ in fixed_screens() + list_screens()}
    assert named == {state.value for state in State}


def test_screens_stay_on_their_lines() -> None:
    """Registry text cannot add lines to a screen or push its menu off it."""
    stove = StoveView("did:ixo:entity/x", "Jiko\nA12\t*", "active", "did:ixo:entity/p", True)
    assert CONTENT.stoves([stove], 0, 1).splitlines()[1] == "1. Jiko A12 * (active, verified)"
    assert CONTENT.stove_details(stove).startswith("Jiko A12 *\nactive, project verified\n1.")


@pytest.mark.parametrize(
    "message",
    [
        CONTENT.goodbye,
        CONTENT.locked(10),
        CONTENT.invalid_request,
        CONTENT.unavailable,
        CONTENT.expired,
        CONTENT.ended,
        CONTENT.logged_out,
    ],
)
def test_closing_messages_fit(message: str) -> None:
    assert len(Reply(True, message).render()) <= MAX_SCREEN


def test_seed_closing_texts_are_exact() -> None:
    content = Content()
    assert Reply(True, content.invalid_request).render() == "END Invalid input. Please try again."
    assert (
        Reply(True, content.unavailable).render()
        == "END Service temporarily unavailable. Please try again later."
    )
