"""The fast JCS canonicalisation (security/jcs.py) writes exactly what the reference
implementation (the rfc8785 package) writes, for any JSON value, and refuses what it
refuses: a credential signed by one verifies with the other."""

from __future__ import annotations

import struct
from typing import Any

import orjson
import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from twinhub.security.jcs import CanonicalizationError, _prepared, canonical, number

floats = st.floats(allow_nan=False, allow_infinity=False)
keys = st.text(max_size=8) | st.sampled_from(["a", "b", "\ue000", "\U0001f600", "A", "é"])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | floats | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=20,
)


@given(json_values)
@settings(max_examples=300, deadline=None)
def test_any_json_value_is_canonicalised_as_the_reference_does(value: Any) -> None:
    assert canonical(value) == rfc8785.dumps(value)


any_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(st.characters(codec="utf-8") | st.sampled_from(["\x00", "\x1f", "\x7f", "\u2028"])),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=30,
)


@given(any_values)
@settings(max_examples=300, deadline=None)
def test_what_either_refuses_the_other_refuses(value: Any) -> None:
    # Big integers, NaN and infinities anywhere in a document: both refuse, or both write
    # the same bytes.
    try:
        expected = rfc8785.dumps(value)
    except CanonicalizationError:
        with pytest.raises(CanonicalizationError):
            canonical(value)
    else:
        assert canonical(value) == expected


@given(floats)
@settings(max_examples=500, deadline=None)
def test_numbers_are_written_as_ecmascript_does(value: float) -> None:
    assert number(value) == rfc8785.dumps(value)


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (1.0, b"1"),
        (-0.0, b"0"),
        (1e-6, b"0.000001"),
        (1e-7, b"1e-7"),
        (2.5e-6, b"0.0000025"),
        (1e20, b"100000000000000000000"),
        (1e21, b"1e+21"),
        (123.456, b"123.456"),
        (-1.5e300, b"-1.5e+300"),
        (5e-324, b"5e-324"),
    ],
)
def test_known_numbers(value: float, written: bytes) -> None:
    assert number(value) == written


def test_keys_beyond_the_basic_plane_are_ordered_by_utf16_code_units() -> None:
    # U+E000 sorts after U+1F600 by UTF-16 code units (0xE000 > 0xD83D), before it by
    # code points: the fast path hands such objects to the reference.
    value = {"\ue000": 1, "\U0001f600": 2}
    assert canonical(value) == rfc8785.dumps(value)
    assert canonical(value).index("\U0001f600".encode()) < canonical(value).index("\ue000".encode())


@pytest.mark.parametrize("value", [2**53, -(2**53), float("nan"), float("inf"), {1: "a"}])
def test_what_jcs_cannot_write_is_refused_as_the_reference_refuses(value: Any) -> None:
    with pytest.raises(CanonicalizationError):
        rfc8785.dumps(value)
    with pytest.raises(CanonicalizationError):
        canonical(value)


@given(st.floats(min_value=1e-5, max_value=1e16, exclude_max=True) | st.floats(-1e16, -1e-5))
@settings(max_examples=500, deadline=None)
def test_fractions_left_to_orjson_are_written_as_ecmascript_does(value: float) -> None:
    # The fast path hands these to orjson untouched (security/jcs.py): its text must be JCS.
    if not value.is_integer():
        assert orjson.dumps(value) == rfc8785.dumps(value) == number(value)


# RFC 8785, appendix B: IEEE 754 doubles (as their bits) and their JCS text.
RFC_8785_NUMBERS = [
    ("0000000000000000", b"0"),
    ("8000000000000000", b"0"),
    ("0000000000000001", b"5e-324"),
    ("8000000000000001", b"-5e-324"),
    ("7fefffffffffffff", b"1.7976931348623157e+308"),
    ("ffefffffffffffff", b"-1.7976931348623157e+308"),
    ("4340000000000000", b"9007199254740992"),
    ("c340000000000000", b"-9007199254740992"),
    ("4430000000000000", b"295147905179352830000"),
    ("44b52d02c7e14af5", b"9.999999999999997e+22"),
    ("44b52d02c7e14af6", b"1e+23"),
    ("44b52d02c7e14af7", b"1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", b"999999999999999700000"),
    ("444b1ae4d6e2ef4f", b"999999999999999900000"),
    ("444b1ae4d6e2ef50", b"1e+21"),
    ("3eb0c6f7a0b5ed8c", b"9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", b"0.000001"),
    ("41b3de4355555553", b"333333333.3333332"),
    ("41b3de4355555554", b"333333333.33333325"),
    ("41b3de4355555555", b"333333333.3333333"),
    ("41b3de4355555556", b"333333333.3333334"),
    ("41b3de4355555557", b"333333333.33333343"),
    ("becbf647612f3696", b"-0.0000033333333333333333"),
    ("43143ff3c1cb0959", b"1424953923781206.2"),
]


@pytest.mark.parametrize(("bits", "written"), RFC_8785_NUMBERS)
def test_the_rfc_s_numbers(bits: str, written: bytes) -> None:
    (value,) = struct.unpack(">d", bytes.fromhex(bits))
    assert canonical(value) == written
    assert canonical([value]) == b"[" + written + b"]"


@pytest.mark.parametrize("bits", ["7fffffffffffffff", "7ff0000000000000"])
def test_the_rfc_s_non_numbers_are_refused(bits: str) -> None:
    (value,) = struct.unpack(">d", bytes.fromhex(bits))
    with pytest.raises(CanonicalizationError):
        canonical({"n": value})


def test_the_rfc_s_sample_object() -> None:
    # RFC 8785, section 3.2.2 (numbers, a string's escapes, literals; keys sorted).
    value = {
        "numbers": [333333333.33333329, 1e30, 4.50, 2e-3, 0.000000000000000000000000001],
        "string": "\u20ac$\u000f\u000aA'\u0042\u0022\u005c\\\"/",
        "literals": [None, True, False],
    }
    assert (
        canonical(value)
        == (
            '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
            '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
        ).encode()
    )


def test_the_rfc_s_sorting_example() -> None:
    # RFC 8785, section 3.2.3: keys ordered by their UTF-16 code units.
    value = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    keys = list(orjson.loads(canonical(value)))
    assert keys == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


def test_a_document_without_such_floats_is_not_copied() -> None:
    # The walk hands orjson the caller's own objects when nothing needs rendering.
    document = {"a": [1, "x", 0.5, {"b": None}], "c": True}
    assert _prepared(document) is document
    changed = {"a": [1.0], "b": "x"}
    assert _prepared(changed) is not changed and changed == {"a": [1.0], "b": "x"}
