"""Pure rules: splitting accumulated text, PIN encryption and strength, customer IDs."""

from __future__ import annotations

import hashlib
import hmac
import secrets

import pytest
from hypothesis import given
from hypothesis import strategies as st

from twinhub.security.pins import PinCipher, pin_problem
from twinhub.services.customer_ids import is_valid_customer_id, new_customer_id
from twinhub.services.customers import clean_full_name
from twinhub.ussd.inputs import new_inputs, split_inputs


@pytest.mark.parametrize(
    ("text", "answers"),
    [
        ("1", ["1"]),
        ("1*2*0", ["1", "2", "0"]),
        ("*", ["*"]),
        ("1**", ["1", "*"]),
        ("2*Amina Otieno*58213", ["2", "Amina Otieno", "58213"]),
        ("1*", ["1", ""]),
    ],
)
def test_split_inputs(text: str, answers: list[str]) -> None:
    assert split_inputs(text) == answers


@pytest.mark.parametrize(
    ("previous", "text", "fresh"),
    [
        (None, "", []),
        (None, "1*2", ["1", "2"]),
        ("", "1", ["1"]),
        ("", "*", ["*"]),
        ("1", "1*2", ["2"]),
        ("1", "1**", ["*"]),
        ("1*2", "1*2*0*3", ["0", "3"]),  # a request the gateway lost: both answers apply
        ("1*2", "3", ["3"]),  # a gateway that sends only the latest input
        ("1*2", "9*9*4", ["4"]),
    ],
)
def test_new_inputs(previous: str | None, text: str, fresh: list[str]) -> None:
    assert new_inputs(previous, text) == fresh


@given(st.lists(st.sampled_from(["0", "1", "2", "Amina", "58213", "*"]), max_size=8))
def test_typed_answers_round_trip(answers: list[str]) -> None:
    """What the user typed, joined the way the gateway joins it, splits back the same."""
    text = ""
    for answer in answers:
        text = answer if text == "" and not answers.index(answer) else f"{text}*{answer}"
    if answers and answers[0] == "*":
        return  # covered by the table above: a leading exit is the whole session
    assert split_inputs(text) == answers if answers else [""]


def test_pin_cipher_round_trip_and_binding() -> None:
    cipher = PinCipher(secrets.token_bytes(32))
    first = cipher.encrypt("58213", "customer-pin:1")
    second = cipher.encrypt("58213", "customer-pin:1")
    assert first != second  # a random nonce each time
    assert b"58213" not in first
    assert cipher.matches(first, "58213", "customer-pin:1")
    assert not cipher.matches(first, "58214", "customer-pin:1")
    assert not cipher.matches(first, "58213", "customer-pin:2")  # bound to its owner
    tampered = first[:-1] + bytes([first[-1] ^ 1])
    assert not cipher.matches(tampered, "58213", "customer-pin:1")
    other_key = PinCipher(secrets.token_bytes(32))
    assert not other_key.matches(first, "58213", "customer-pin:1")
    with pytest.raises(ValueError, match="32 bytes"):
        PinCipher(b"short")


def test_text_digests_are_hmac_sha256_under_the_derived_key() -> None:
    """The digests kept in session records (the last USSD text) stay what they were when
    each was computed with hmac.digest: records saved before still match after a restart."""
    key = secrets.token_bytes(32)
    cipher = PinCipher(key)
    derived = hmac.digest(key, b"twinhub digest v1", hashlib.sha256)
    for text, context in [("", "s-1"), ("1*2*58213", "s-1"), ("1*2*58213", "s-2"), ("é*", "x")]:
        expected = hmac.digest(derived, f"{context}\x00{text}".encode(), hashlib.sha256)
        assert cipher.digest(text, context) == expected[:16].hex()
        assert cipher.digest(text, context) == cipher.digest(text, context)  # no state kept
    assert cipher.digest("1", "s-1") != PinCipher(secrets.token_bytes(32)).digest("1", "s-1")


@pytest.mark.parametrize(
    ("pin", "acceptable"),
    [
        ("58213", True),
        ("73920", True),
        ("11111", False),
        ("12345", False),
        ("54321", False),
        ("11222", False),
        ("1234", False),
        ("١٢٣٤٥", False),  # Arabic-Indic digits are digits to Python, not to a keypad
    ],
)
def test_pin_strength(pin: str, acceptable: bool) -> None:
    assert (pin_problem(pin) is None) is acceptable


def test_pin_may_not_be_the_end_of_the_phone_number() -> None:
    assert pin_problem("45678", "+254712345678") is not None
    assert pin_problem("58213", "+254712345678") is None


def test_customer_ids_carry_a_check_digit() -> None:
    for _ in range(200):
        customer_id = new_customer_id()
        assert is_valid_customer_id(customer_id)
        assert customer_id[0] != "0"
        typo = customer_id[:3] + str((int(customer_id[3]) + 1) % 10) + customer_id[4:]
        assert not is_valid_customer_id(typo)


@pytest.mark.parametrize(
    ("raw", "clean"),
    [("  amina   otieno ", "amina otieno"), ("Jo", "Jo"), ("A1", None), ("-Jo", None)],
)
def test_clean_full_name(raw: str, clean: str | None) -> None:
    assert clean_full_name(raw) == clean
