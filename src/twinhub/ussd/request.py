"""Reading and validating one USSD session request (seed part B, rules 1 to 5).

Accepts the JSON body of the seed and the form-encoded body Africa's Talking sends, with the
same field names. Anything else, or any field out of bounds, is simply invalid: the caller
answers `END Invalid input. Please try again.` and touches no state.
"""

from __future__ import annotations

import functools
import operator
import re
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import unquote_plus

import orjson
from pydantic import ConfigDict, StrictStr, StringConstraints, TypeAdapter, ValidationError
from starlette.types import Message, Receive

NO_CONTROL = r"^[^\x00-\x1f\x7f-\x9f]*$"  # C0, DEL and C1 control characters
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # a text that NO_CONTROL refuses has one
E164 = r"^\+[1-9][0-9]{6,14}$"
SERVICE_CODE = r"^\*[0-9]+(\*[0-9]+)*#$"
MAX_TEXT, MAX_SESSION_ID = 182, 100


@dataclass(frozen=True, slots=True)
class UssdRequest:
    """A validated request. A plain dataclass rather than a pydantic model: a model's
    `__getattr__` hook made each of the engine's dozen field reads a slow lookup."""

    __pydantic_config__ = ConfigDict(extra="ignore")

    sessionId: Annotated[
        StrictStr, StringConstraints(min_length=1, max_length=MAX_SESSION_ID, pattern=NO_CONTROL)
    ]
    serviceCode: Annotated[StrictStr, StringConstraints(pattern=SERVICE_CODE)]
    phoneNumber: Annotated[StrictStr, StringConstraints(pattern=E164)]
    text: Annotated[StrictStr, StringConstraints(max_length=MAX_TEXT, pattern=NO_CONTROL)]


# The core validator itself: TypeAdapter.validate_python is a Python wrapper around it.
_validate = validate_request = TypeAdapter(UssdRequest).validator.validate_python


class InvalidRequest(Exception):
    """The body is not a valid session request; the message says why (for logs only)."""


def parse_ussd_request(content_type: str, body: bytes) -> UssdRequest:
    """The session request in `body`, sent with the `Content-Type` header `content_type`."""
    media_type = content_type.split(";")[0].strip().lower()
    if media_type == "application/json" or media_type.endswith("+json"):
        fields = _json_fields(body)
    elif media_type == "application/x-www-form-urlencoded":
        fields = form_fields(body)
    else:
        raise InvalidRequest(f"unsupported content type {media_type!r}")
    try:
        return _validate(fields)
    except ValidationError as error:
        names = ", ".join(str(e["loc"][0]) for e in error.errors() if e["loc"])
        raise InvalidRequest(f"invalid fields: {names}") from None


async def receive_rest(receive: Receive, message: Message, max_bytes: int) -> bytes:
    """The whole body of a plain ASGI request from its first message on, refused past
    `max_bytes` (the caller has refused a larger Content-Length already); a client gone
    mid-body is invalid too."""
    chunks: list[bytes] = []
    size = 0
    while True:
        if message["type"] != "http.request":
            raise InvalidRequest("client disconnected")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            raise InvalidRequest("body too large")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        message = await receive()


def _json_fields(body: bytes) -> dict[str, Any]:
    try:
        fields = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise InvalidRequest("malformed JSON") from None
    if not isinstance(fields, dict):
        raise InvalidRequest("JSON body is not an object")
    return fields


def _unquote_ascii(value: str) -> str:
    """`unquote_plus(value)`, without its regular expression and byte conversions when
    every escape is of an ASCII character (a gateway's `+`, `*` and `#`); anything else
    is left to unquote_plus."""
    parts = value.replace("+", " ").split("%")
    decoded = [parts[0]]
    for part in parts[1:]:
        char = _ASCII_ESCAPES.get(part[:2])
        if char is None:
            return unquote_plus(value)
        decoded.append(char)
        decoded.append(part[2:])
    return "".join(decoded)


# Every spelling of an escaped ASCII character (%2a and %2A, %7f and %7F, ...).
_ASCII_ESCAPES = {
    f"{high}{low}": chr(code)
    for code in range(128)
    for high in {f"{code >> 4:x}", f"{code >> 4:X}"}
    for low in {f"{code & 15:x}", f"{code & 15:X}"}
}
# A gateway sends the same few escaped values again and again (the service code, the menu
# paths, a phone's number for each step of its session): decoded once, looked up after.
_unquote_plus = functools.lru_cache(maxsize=4096)(_unquote_ascii)
_split_pair = operator.methodcaller("split", "=", 1)


def form_fields(body: bytes) -> dict[str, Any]:
    """`parse_qsl(..., keep_blank_values=True, strict_parsing=True)` for the few short
    fields a gateway sends, without its per-field regular expressions and quoting calls
    for values that hold no escapes (nearly all of them). A body of distinct names, none
    escaped, each with `=`, is split in C (`dict` of the pairs); any other is read pair by
    pair below, which also says what is wrong with it."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest("malformed form body") from None
    if not text:
        return {}
    pairs = text.split("&")
    try:
        fields: dict[str, Any] = dict(map(_split_pair, pairs))
    except ValueError:  # a pair without "="
        return _pairs(pairs)
    if len(fields) != len(pairs):  # a name given twice
        return _pairs(pairs)
    names = "".join(fields)
    if "%" in names or "+" in names:
        return _pairs(pairs)
    for name, value in fields.items():
        if "%" in value or "+" in value:
            fields[name] = _unquote_plus(value)
    return fields


def _pairs(pairs: list[str]) -> dict[str, Any]:
    """The fields of a form body's `&`-separated pairs, read one by one."""
    fields: dict[str, Any] = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals:
            raise InvalidRequest("malformed form body")
        if "%" in name or "+" in name:
            name = _unquote_plus(name)
        if "%" in value or "+" in value:
            value = _unquote_plus(value)
        if name in fields:
            raise InvalidRequest(f"field {name!r} given twice")
        fields[name] = value
    return fields
