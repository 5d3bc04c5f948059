"""HTTP → request message: path variables and query parameters fill the request's fields.

A query parameter names a field by its proto name or its JSON name, dotted through nested
messages (`pagination.limit=5`, `pagination.count_total=true`). Parameters that name no
field are ignored, as the Cosmos gateway does; a value that does not parse as its field's
type is INVALID_ARGUMENT (HTTP 400). Bytes are base64, standard or URL-safe, padded or not;
a `+` that the query string turned into a space is read back as `+`.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

import grpc
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message

from twinhub.chain.gateway.errors import GatewayError

_INTEGER = re.compile(r"^[+-]?[0-9]+$")
_TRUE = frozenset({"1", "t", "true"})
_FALSE = frozenset({"0", "f", "false"})
_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}
_WRAPPERS = frozenset(
    f"google.protobuf.{name}Value"
    for name in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")
)
MAX_ECHO = 64  # how much of a bad value an error message repeats


def build_request(
    request_type: type[Message], path_values: dict[str, str], query_string: bytes
) -> Message:
    """The request message for one HTTP request; GatewayError (400) on unparsable input."""
    request = request_type()
    for path, value in path_values.items():
        _assign(request, path.split("."), value, path, from_path=True)
    if query_string:
        try:
            pairs = parse_qsl(
                query_string.decode("latin-1"),
                keep_blank_values=True,
                encoding="utf-8",
                errors="strict",
            )
        except (UnicodeDecodeError, ValueError):
            raise _invalid("the query string is not valid UTF-8 after percent-decoding") from None
        for name, value in pairs:
            if name in path_values:
                continue  # the path has the last word on fields it binds
            _assign(request, name.split("."), value, name, from_path=False)
    return request


def _assign(message: Message, parts: list[str], value: str, name: str, from_path: bool) -> None:
    """Set the field that the dotted `parts` name; unknown names are ignored (query only)."""
    for index, part in enumerate(parts):
        field = _field(message.DESCRIPTOR, part)
        if field is None:
            if from_path:  # the template names a field the message lacks: a broken rule
                raise GatewayError(grpc.StatusCode.INTERNAL, "the route does not fit its method")
            return
        last = index == len(parts) - 1
        if field.type == FieldDescriptor.TYPE_MESSAGE and not _is_map(field):
            if last:
                _assign_well_known(message, field, value, name)
                return
            if field.is_repeated:
                return  # no way to address one element of a list from a query string
            message = getattr(message, field.name)
            continue
        if not last or _is_map(field):
            return  # a scalar (or map) cannot hold a sub-field
        converted = convert(field, value, name)
        if field.is_repeated:
            getattr(message, field.name).append(converted)
        else:
            setattr(message, field.name, converted)


def _field(descriptor: Descriptor, name: str) -> FieldDescriptor | None:
    found = descriptor.fields_by_name.get(name)
    if found is not None:
        return found
    return next((f for f in descriptor.fields if f.json_name == name), None)


def _is_map(field: FieldDescriptor) -> bool:
    return field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type.GetOptions().map_entry


def _assign_well_known(message: Message, field: FieldDescriptor, value: str, name: str) -> None:
    """Timestamps, durations and wrappers have a one-string form; other messages do not."""
    full_name = field.message_type.full_name
    target = getattr(message, field.name)
    if field.is_repeated:
        target = target.add()
    try:
        if full_name in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
            target.FromJsonString(value)
            return
    except ValueError:
        raise _bad(
            name, value, "an RFC 3339 time" if "Time" in full_name else "a duration like 1.5s"
        ) from None
    if full_name in _WRAPPERS:
        target.value = convert(field.message_type.fields_by_name["value"], value, name)
        return
    raise _invalid(f"{name} is a message; give its fields instead (e.g. {name}.<field>=...)")


def convert(field: FieldDescriptor, value: str, name: str) -> Any:
    """One text value as the field's Python value, or GatewayError (400)."""
    converter = _CONVERTERS.get(field.type)
    if converter is None:  # pragma: no cover - every scalar type is listed
        raise _invalid(f"{name} cannot be set from a query string")
    return converter(field, value, name)


def _to_string(field: FieldDescriptor, value: str, name: str) -> str:
    return value


def _to_integer(field: FieldDescriptor, value: str, name: str) -> int:
    low, high = _RANGES[field.type]
    if not _INTEGER.match(value):
        raise _bad(name, value, "an integer" if low < 0 else "an unsigned integer")
    number = int(value)
    if not low <= number <= high:
        raise _bad(name, value, f"an integer from {low} to {high}")
    return number


def _to_float(field: FieldDescriptor, value: str, name: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise _bad(name, value, "a number") from None
    if field.type == FieldDescriptor.TYPE_FLOAT and math.isfinite(number) and abs(number) > 3.4e38:
        raise _bad(name, value, "a 32-bit float")
    return number


def _to_bool(field: FieldDescriptor, value: str, name: str) -> bool:
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise _bad(name, value, "true or false")


def _to_bytes(field: FieldDescriptor, value: str, name: str) -> bytes:
    text = value.replace(" ", "+").strip()
    padded = text + "=" * (-len(text) % 4)
    try:
        if "-" in text or "_" in text:
            return base64.urlsafe_b64decode(padded.encode("ascii"))
        return base64.b64decode(padded.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise _bad(name, value, "base64") from None


def _to_enum(field: FieldDescriptor, value: str, name: str) -> int:
    enum: EnumDescriptor = field.enum_type
    named = enum.values_by_name.get(value)
    if named is not None:
        return named.number
    if _INTEGER.match(value) and int(value) in enum.values_by_number:
        return int(value)
    raise _bad(name, value, "one of " + ", ".join(v.name for v in enum.values))


_Converter = Callable[[FieldDescriptor, str, str], Any]
_CONVERTERS: dict[int, _Converter] = {
    FieldDescriptor.TYPE_STRING: _to_string,
    FieldDescriptor.TYPE_BYTES: _to_bytes,
    FieldDescriptor.TYPE_BOOL: _to_bool,
    FieldDescriptor.TYPE_ENUM: _to_enum,
    FieldDescriptor.TYPE_DOUBLE: _to_float,
    FieldDescriptor.TYPE_FLOAT: _to_float,
    **dict.fromkeys(_RANGES, _to_integer),
}


def _bad(name: str, value: str, expected: str) -> GatewayError:
    shown = value if len(value) <= MAX_ECHO else value[:MAX_ECHO] + "…"
    return _invalid(f"{name}: expected {expected}, got {shown!r}")


def _invalid(message: str) -> GatewayError:
    return GatewayError(grpc.StatusCode.INVALID_ARGUMENT, message)
