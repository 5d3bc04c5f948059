"""Response message → Cosmos JSON.

protobuf's json_format does most of it: field names as declared in the proto
(`preserving_proto_field_name`), every field even when default
(`always_print_fields_with_no_presence`), 64-bit integers as strings, enums by name,
timestamps in RFC 3339 UTC, bytes in base64. Two Cosmos conventions it lacks are added by
walking the descriptor: an unset message field is `null` (json_format leaves it out), so
are empty bytes (`"next_key": null` on the last page, as Cosmos writes a nil slice), and a
LegacyDec string, an 18-place fixed-point integer on the gRPC wire, is decimal text
(`"100000000000000000"` → `"0.100000000000000000"`), as the chain's own gateway shows it.
"""

from __future__ import annotations

from typing import Any

import orjson
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

# Messages whose JSON is not an object of their fields: never walked into.
WELL_KNOWN = frozenset(
    {
        "google.protobuf.Any",
        "google.protobuf.Timestamp",
        "google.protobuf.Duration",
        "google.protobuf.FieldMask",
        "google.protobuf.Struct",
        "google.protobuf.Value",
        "google.protobuf.ListValue",
        "google.protobuf.Empty",
        *(
            f"google.protobuf.{kind}Value"
            for kind in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool")
        ),
        "google.protobuf.StringValue",
        "google.protobuf.BytesValue",
    }
)

# LegacyDec fields (cosmos.Dec scalars upstream, whose options the twinhub protos leave
# out): full message name → field names.
LEGACY_DEC_FIELDS: dict[str, frozenset[str]] = {
    "ixo.claims.v1beta1.Params": frozenset({"network_fee_percentage", "node_fee_percentage"}),
    "ixo.claims.v1beta1.AdjudicationDid": frozenset({"reward_percentage"}),
}
DEC_PLACES = 18

# What to do per field when walking JSON: (json key, kind, sub-descriptor).
_NULLABLE, _BYTES, _REPEATED, _MAP, _DEC, _DEC_REPEATED = range(6)
_Plan = tuple[tuple[str, int, Descriptor | None], ...]
_plans: dict[str, _Plan] = {}


def render(message: Message) -> bytes:
    """The JSON body of a successful answer."""
    return orjson.dumps(to_json(message))


def to_json(message: Message) -> dict[str, Any]:
    data = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    _complete(message.DESCRIPTOR, data)
    return data


def _plan(descriptor: Descriptor) -> _Plan:
    """The fields of `descriptor` that need the walk, computed once per message type."""
    plan = _plans.get(descriptor.full_name)
    if plan is not None:
        return plan
    steps: list[tuple[str, int, Descriptor | None]] = []
    decimals = LEGACY_DEC_FIELDS.get(descriptor.full_name, frozenset())
    for field in descriptor.fields:
        repeated = field.is_repeated
        if field.name in decimals and field.type == FieldDescriptor.TYPE_STRING:
            steps.append((field.name, _DEC_REPEATED if repeated else _DEC, None))
            continue
        if field.type == FieldDescriptor.TYPE_BYTES and not repeated:
            steps.append((field.name, _BYTES, None))
            continue
        if field.type != FieldDescriptor.TYPE_MESSAGE:
            continue
        sub = field.message_type
        if sub.GetOptions().map_entry:
            value = sub.fields_by_name["value"]
            if value.type == FieldDescriptor.TYPE_MESSAGE and _walkable(value.message_type):
                steps.append((field.name, _MAP, value.message_type))
        elif repeated:
            if _walkable(sub):
                steps.append((field.name, _REPEATED, sub))
        elif field.containing_oneof is None:
            steps.append((field.name, _NULLABLE, sub if _walkable(sub) else None))
    plan = tuple(steps)
    _plans[descriptor.full_name] = plan
    return plan


def _walkable(descriptor: Descriptor) -> bool:
    """Whether values of this type are objects of their own fields (so may hold nulls);
    its plan is looked up lazily, which keeps self-referencing types finite."""
    return descriptor.full_name not in WELL_KNOWN


def _complete(descriptor: Descriptor, data: dict[str, Any]) -> None:
    for key, kind, sub in _plan(descriptor):
        if kind == _NULLABLE:
            value = data.get(key)
            if value is None:
                data[key] = None
            elif sub is not None:
                _complete(sub, value)
        elif kind == _BYTES:
            if not data.get(key):
                data[key] = None
        elif kind == _REPEATED:
            for item in data.get(key, ()):
                _complete(sub, item)  # type: ignore[arg-type]
        elif kind == _MAP:
            for item in data.get(key, {}).values():
                _complete(sub, item)  # type: ignore[arg-type]
        elif kind == _DEC:
            if key in data:
                data[key] = legacy_dec(data[key])
        elif kind == _DEC_REPEATED:
            data[key] = [legacy_dec(v) for v in data.get(key, ())]


def legacy_dec(wire: str) -> str:
    """`"100000000000000000"` → `"0.100000000000000000"`; text that is not a scaled integer
    (already decimal, or empty) is left as it is."""
    digits = wire.lstrip("-")
    if not digits.isdigit():
        return wire
    sign = "-" if wire.startswith("-") else ""
    digits = digits.rjust(DEC_PLACES + 1, "0")
    return f"{sign}{digits[:-DEC_PLACES]}.{digits[-DEC_PLACES:]}"
