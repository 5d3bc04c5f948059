"""JSON text read as the json module reads it (SQLAlchemy's JSON type, what a column holds
was written from), by orjson wherever the two read it alike: a period reads a million
readings' values, and orjson is several times faster.

They differ on NaN and infinities and lone surrogates (orjson refuses them) and on an
integer past 64 bits (orjson makes a float of it): text with any of these goes to the json
module. tests/unit/test_json_text.py holds the two equal."""

from __future__ import annotations

import json
from typing import Any

import orjson

# Each digit as a 0 and anything else as a space, so a run of digits is found by a plain
# search (a regular expression over a stove-day's text took several microseconds).
_DIGITS = bytes(48 if 48 <= byte <= 57 else 32 for byte in range(256))
_LONG_NUMBER = b"0" * 19  # digits orjson may read otherwise: an integer past 64 bits


def json_value(text: str | bytes) -> Any:
    """The value `text` holds, as `json.loads` reads it."""
    data = text.encode() if isinstance(text, str) else text
    if _LONG_NUMBER not in data.translate(_DIGITS):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data)
