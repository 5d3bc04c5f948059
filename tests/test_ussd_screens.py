"""Every screen, with the longest notice it can carry, fits the 182-character USSD limit."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from twinhub.security.pins import pin_problem
from twinhub.services.customers import CustomerView
from twinhub.ussd.menu import Reply, State, state_attribute
from twinhub.ussd.screens import MAX_SCREEN, Content, Notice

LONGEST_NAME = "W" * 40
CONTENT = Content(service_name="x" * 20, support_contact="+" + "9" * 39)
NOTICES = [
    value for name, value in vars(Notice).items() if isinstance(value, str) and name[0] != "_"
]
NOTICES += [Notice.wrong_pin(10), pin_problem("11111") or "", pin_problem("1") or ""]
LONGEST_NOTICE = max(NOTICES, key=len)


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
    ]
    return screens


@pytest.mark.parametrize(("state", "text"), fixed_screens(), ids=lambda v: str(v)[:20])
def test_screen_with_longest_notice_fits(state: str, text: str) -> None:
    rendered = Reply(False, f"{LONGEST_NOTICE}\n{text}").render()
    assert len(rendered) <= MAX_SCREEN, (state, len(rendered))


def test_every_state_has_a_screen() -> None:
    named = {name for name, _ in fixed_screens()}
    assert named == {state.value for state in State}


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
