"""The fast JCS canonicalisation (security/jcs.py) writes exactly what the reference
implementation (the rfc8785 package) writes, for any JSON value, and refuses what it
refuses: a credential signed by one verifies with the other."""

from __future__ import annotations

from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from twinhub.security.jcs import CanonicalizationError, canonical, number

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
