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
