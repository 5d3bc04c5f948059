"""JSON text read by `json_value` (orjson where it can) is what the json
module, SQLAlchemy's reader, makes of it: the same values of the same types."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinhub.kernel.json_text import json_value

values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(st.characters(codec="utf-8") | st.sampled_from(["\x00", "\u2028", "\ud800"])),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=25,
)


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types all the way down (NaN equal to NaN, -0.0 apart from 0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and str(a) == str(b))
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


@given(values)
@settings(max_examples=400, deadline=None)
def test_what_the_json_module_wrote_reads_back_alike(value: Any) -> None:
    stored = json.dumps(value)
    assert same(json_value(stored), json.loads(stored))


@pytest.mark.parametrize(
    "stored",
    [
        "123456789012345678901234",
        "-9223372036854775809",
        "18446744073709551616",
        '{"a": 1e400, "b": -1e400, "c": NaN}',
        '"\\ud800"',
        "-0",
        "-0.0",
        '{"a": 1, "a": 2}',
        "0.1234567890123456789",
        '  {"x": [1.5, true, null]} ',
    ],
)
def test_what_orjson_reads_otherwise_goes_to_the_json_module(stored: str) -> None:
    assert same(json_value(stored), json.loads(stored))
