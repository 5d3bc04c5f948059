"""RFC 8785 (JCS) canonical JSON, at the speed of orjson.

Every credential is signed over the canonical form of its document, and the `rfc8785`
package, written in Python, took about a third of a bulk approval's time. orjson with
sorted keys already writes JCS for JSON's strings, integers, booleans, null, arrays and
objects (compact, UTF-8, the same escapes), and a fraction from 1e-5 to 1e16 as JCS does
(ECMAScript's Number-to-String: the shortest round-trip digits, no exponent). The other
floats it writes differently (`1.0`, `1e-6`, `1e+20` where JCS writes `1`, `0.000001`,
`100000000000000000000`), so those are rendered here and handed to orjson as ready
fragments. A document is walked, not copied, unless
such a float is in it.

Whatever this fast path does not cover exactly goes to the `rfc8785` package, which then
also raises its errors: integers beyond ±(2^53 - 1), non-finite numbers, types other than
JSON's, strings orjson refuses (lone surrogates), and object keys holding a character
beyond the Basic Multilingual Plane (JCS orders keys by UTF-16 code units, orjson by code
points: the two orders differ only there). tests/unit/test_jcs.py checks both paths agree.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

import orjson
import rfc8785

CanonicalizationError = rfc8785.CanonicalizationError
_SAFE_INTEGER = 2**53 - 1


class _Slow(Exception):
    """The value needs the reference implementation."""


def canonical(value: Any) -> bytes:
    """The JCS (RFC 8785) bytes of `value`."""
    try:
        return orjson.dumps(_prepared(value), option=orjson.OPT_SORT_KEYS)
    except (_Slow, orjson.JSONEncodeError):
        return rfc8785.dumps(value)


# What `digest` writes, and so the one form a document may cite another by (an attachment,
# a certificate, a previous step).
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def digest(value: Any) -> str:
    """`sha256:<hex>` of the JCS bytes of `value`: how one document cites another."""
    return "sha256:" + hashlib.sha256(canonical(value)).hexdigest()


# JSON text read and written back by orjson with sorted keys is JCS but for a few numbers
# and an order of keys, found in what orjson wrote (by C-level searches: a stove-day's
# readings are checked in about a microsecond, where a regular expression took ten):
# - an integral float, `12.0` (JCS: `12`): rewritten where it stands as a number, outside
#   any string (told by the quotes before it, in text without a backslash);
# - a float written with an exponent (`1e-7`, `1e+16`), and `-0.0`;
# - an integer of 16 digits or more (JCS refuses one past 2^53);
# - a character beyond the Basic Multilingual Plane (JCS orders keys by UTF-16 code units).
# Whatever is found, or only seems to be (`"2e5"` inside a string), takes the exact way.
_SHAPES = bytes(
    48 if chr(byte).isdigit() and byte < 128 else 101 if byte in b"eE" else 32
    for byte in range(256)
)  # each digit a 0, each e an e, anything else a space
_EXPONENT, _LONG_INTEGER = b"0e", b"0" * 16
_BEYOND_BMP = re.compile(rb"[\xf0-\xf4]")  # the first byte of a 4-byte UTF-8 character
_NUMBER_END = frozenset(b",]}")


def canonical_text(text: bytes) -> bytes:
    """The JCS bytes of the JSON value `text` holds, as `canonical(json.loads(text))`, but
    by orjson alone where its reading and writing is JCS (checked on what it wrote, above):
    no Python call a value, for text read by the million (a period's raw readings). Text
    orjson reads otherwise than the json module (NaN, an integer past 64 bits, a lone
    surrogate) also takes the exact way, and is refused there as `canonical` refuses it."""
    try:
        written: bytes | None = orjson.dumps(orjson.loads(text), option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        written = None
    if written is not None and b".0" in written:
        written = _integral_floats_rewritten(written)
    if (
        written is None
        or _EXPONENT in (shapes := written.translate(_SHAPES))
        or _LONG_INTEGER in shapes
        or (not written.isascii() and _BEYOND_BMP.search(written) is not None)
    ):
        return canonical(json.loads(text))
    return written


def _integral_floats_rewritten(written: bytes) -> bytes | None:
    """orjson's text with each integral float (`12.0`, `0.0`) as JCS writes it (`12`, `0`);
    None where that cannot be told surely (a backslash, `-0.0`, `1.0e5`)."""
    if b"\\" in written:
        return None
    parts, kept, at = [], 0, written.find(b".0")
    while at != -1:
        end = at + 2
        follows = written[end] if end < len(written) else None
        fraction = follows is not None and 48 <= follows <= 57  # 1.05
        if not fraction and not written.count(b'"', 0, at) % 2:  # outside any string
            if follows is not None and follows not in _NUMBER_END:
                return None  # not a number orjson writes
            first = at
            while first and 48 <= written[first - 1] <= 57:
                first -= 1
            if first == at or (written[first:at] == b"0" and first and written[first - 1] == 45):
                return None  # no digits before the point, or -0.0 (JCS: 0)
            parts.append(written[kept:at])
            kept = end
        at = written.find(b".0", end)
    parts.append(written[kept:])
    return b"".join(parts)


def _prepared(value: Any) -> Any:
    """`value` with every number orjson would write differently from JCS replaced by its
    JCS rendering (an orjson fragment); the same object where nothing needs replacing, so
    a document of strings and plain fractions is walked, not copied."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        if -_SAFE_INTEGER <= value <= _SAFE_INTEGER:
            return value
        raise _Slow
    if kind is float:
        # orjson writes a fraction from 1e-5 to 1e16 exactly as ECMAScript does (the
        # shortest round-trip digits, no exponent); the rest (1.0, 1e-7, 1e21) differ.
        if 1e-5 <= abs(value) < 1e16 and not value.is_integer():
            return value
        return orjson.Fragment(number(value))
    if kind is dict:
        copy = None
        for key, item in value.items():
            if type(key) is not str or (not key.isascii() and max(key) > "\uffff"):
                raise _Slow
            if type(item) is str:
                continue
            ready = _prepared(item)
            if ready is not item:
                if copy is None:
                    copy = dict(value)
                copy[key] = ready
        return value if copy is None else copy
    if kind is list:
        items = None
        for index, item in enumerate(value):
            if type(item) is str:
                continue
            ready = _prepared(item)
            if ready is not item:
                if items is None:
                    items = list(value)
                items[index] = ready
        return value if items is None else items
    raise _Slow


def number(value: float) -> bytes:
    """ECMAScript's Number-to-String of a finite float, as JCS writes numbers: the
    shortest digits that read back as the same float (what Python's repr finds), placed
    without an exponent from 1e-6 up to 1e21."""
    if not math.isfinite(value):
        raise _Slow
    if value == 0:
        return b"0"  # and -0.0
    text = repr(abs(value))
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + int(exponent or 0)  # digits before the decimal point
    significant = digits.lstrip("0")
    point -= len(digits) - len(significant)
    significant = significant.rstrip("0")
    count = len(significant)
    if count <= point <= 21:
        rendered = significant + "0" * (point - count)
    elif 0 < point <= 21:
        rendered = significant[:point] + "." + significant[point:]
    elif -6 < point <= 0:
        rendered = "0." + "0" * -point + significant
    else:
        power = point - 1
        head = significant[0] + ("." + significant[1:] if count > 1 else "")
        rendered = f"{head}e{'+' if power >= 0 else '-'}{abs(power)}"
    return (("-" if value < 0 else "") + rendered).encode()
