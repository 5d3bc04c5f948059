"""The OpenAPI document served at /swagger/, built from the same route table that serves
requests (prefix and aliases included), so it can never list a route that is not served.

Parameters: each path variable, then every scalar field of the request message reachable
through singular message fields, dotted (`pagination.limit`). Schemas of request and
response messages follow the JSON the gateway writes (64-bit integers as strings, enums by
name, messages nullable).
"""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from twinhub import __version__
from twinhub.chain.gateway.render import LEGACY_DEC_FIELDS
from twinhub.chain.gateway.routes import RouteTable

# 64-bit integers travel as decimal strings; the patterns say which strings fit (transcode).
UINT64, INT64 = r"^[0-9]{1,19}$", r"^-?[0-9]{1,18}$"
_SCALARS: dict[int, dict[str, Any]] = {
    FieldDescriptor.TYPE_STRING: {"type": "string"},
    FieldDescriptor.TYPE_BYTES: {
        "type": "string",
        "format": "byte",
        "nullable": True,
    },  # empty: null
    FieldDescriptor.TYPE_BOOL: {"type": "boolean"},
    FieldDescriptor.TYPE_DOUBLE: {"type": "number", "format": "double"},
    FieldDescriptor.TYPE_FLOAT: {"type": "number", "format": "float"},
    FieldDescriptor.TYPE_INT32: {"type": "integer", "format": "int32"},
    FieldDescriptor.TYPE_SINT32: {"type": "integer", "format": "int32"},
    FieldDescriptor.TYPE_SFIXED32: {"type": "integer", "format": "int32"},
    FieldDescriptor.TYPE_UINT32: {"type": "integer", "format": "int64", "minimum": 0},
    FieldDescriptor.TYPE_FIXED32: {"type": "integer", "format": "int64", "minimum": 0},
    FieldDescriptor.TYPE_INT64: {"type": "string", "format": "int64", "pattern": INT64},
    FieldDescriptor.TYPE_SINT64: {"type": "string", "format": "int64", "pattern": INT64},
    FieldDescriptor.TYPE_SFIXED64: {"type": "string", "format": "int64", "pattern": INT64},
    FieldDescriptor.TYPE_UINT64: {"type": "string", "format": "uint64", "pattern": UINT64},
    FieldDescriptor.TYPE_FIXED64: {"type": "string", "format": "uint64", "pattern": UINT64},
}
_WELL_KNOWN: dict[str, dict[str, Any]] = {
    "google.protobuf.Timestamp": {"type": "string", "format": "date-time"},
    "google.protobuf.Duration": {"type": "string", "example": "3600s"},
    "google.protobuf.Any": {"type": "object"},
    "google.protobuf.Struct": {"type": "object"},
    "google.protobuf.Value": {},
    "google.protobuf.ListValue": {"type": "array", "items": {}},
    "google.protobuf.Empty": {"type": "object"},
    "google.protobuf.FieldMask": {"type": "string"},
}
ERROR_SCHEMA = {
    "type": "object",
    "required": ["code", "message", "details"],
    "properties": {
        "code": {"type": "integer", "description": "gRPC status code"},
        "message": {"type": "string"},
        "details": {"type": "array", "items": {"type": "object"}},
    },
}
ERROR_STATUSES = {
    "400": "invalid argument (an unparsable parameter)",
    "401": "no credentials (gated deployment)",
    "403": "credentials not accepted",
    "404": "not found",
    "429": "rate limited",
    "501": "method disabled or not implemented by the node",
    "503": "the node is unavailable",
    "504": "the node did not answer in time",
}


def openapi_document(table: RouteTable, gated: bool) -> dict[str, Any]:
    """OpenAPI 3.0 for every route in `table`."""
    schemas: dict[str, Any] = {"Status": ERROR_SCHEMA}
    paths: dict[str, Any] = {}
    seen_ids: set[str] = set()
    for route in table:
        if route.verb != "get":
            continue
        method = route.method
        request = method.request_descriptor
        bound = set(route.variables)
        parameters = [
            {
                "name": name,
                "in": "path",
                "required": True,
                "schema": _field_schema(_path_field(request, name), schemas),
                "description": "percent-encode a '/' unless this is the path's last variable",
            }
            for name in route.variables
        ]
        parameters += [
            {"name": name, "in": "query", "required": False, "schema": schema}
            for name, schema in _query_parameters(request, "", bound, set())
        ]
        operation_id = f"{method.service.replace('.', '_')}_{method.name}"
        if operation_id in seen_ids:
            operation_id += "_" + str(len(seen_ids))
        seen_ids.add(operation_id)
        response_name = method.response_type.DESCRIPTOR.full_name
        _message_schema(method.response_type.DESCRIPTOR, schemas)
        operation: dict[str, Any] = {
            "operationId": operation_id,
            "tags": [method.service],
            "summary": f"{method.full_name}" + (" (legacy alias)" if route.alias else ""),
            "deprecated": route.alias,
            "parameters": parameters,
            "responses": {
                "200": {
                    "description": response_name,
                    "headers": {
                        "x-cosmos-block-height": {
                            "description": "ledger height the answer was read at",
                            "schema": {"type": "string"},
                        }
                    },
                    "content": {
                        "application/json": {
                            "schema": {"$ref": f"#/components/schemas/{response_name}"}
                        }
                    },
                },
                **{
                    status: {
                        "description": text,
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Status"}}
                        },
                    }
                    for status, text in ERROR_STATUSES.items()
                },
            },
        }
        paths.setdefault(route.template, {})["get"] = operation
    document: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": {
            "title": "twinhub chain REST gateway",
            "version": __version__,
            "description": "Cosmos-style GET routes onto the node's gRPC query services. "
            "Errors: {code, message, details}.",
        },
        "paths": paths,
        "components": {"schemas": schemas},
    }
    if gated:
        document["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{"bearer": []}]
    return document


def _path_field(descriptor: Descriptor, dotted: str) -> FieldDescriptor | None:
    field = None
    for part in dotted.split("."):
        field = descriptor.fields_by_name.get(part)
        if field is None:
            return None
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            descriptor = field.message_type
    return field


def _query_parameters(
    descriptor: Descriptor, prefix: str, bound: set[str], trail: set[str]
) -> list[tuple[str, dict[str, Any]]]:
    """(dotted name, schema) of each scalar field a query string can set."""
    found: list[tuple[str, dict[str, Any]]] = []
    for field in descriptor.fields:
        name = prefix + field.name
        if name in bound:
            continue
        repeated = field.is_repeated
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            sub = field.message_type
            if sub.GetOptions().map_entry or repeated:
                continue
            if sub.full_name in _WELL_KNOWN or sub.full_name.endswith("Value"):
                found.append((name, _field_schema(field, {})))
            elif sub.full_name not in trail:
                found += _query_parameters(sub, name + ".", bound, trail | {sub.full_name})
            continue
        schema = _scalar_schema(field)
        found.append((name, {"type": "array", "items": schema} if repeated else schema))
    return found


def _scalar_schema(field: FieldDescriptor) -> dict[str, Any]:
    if field.type == FieldDescriptor.TYPE_ENUM:
        return {"type": "string", "enum": [v.name for v in field.enum_type.values]}
    schema = dict(_SCALARS.get(field.type, {"type": "string"}))
    if field.name in LEGACY_DEC_FIELDS.get(field.containing_type.full_name, ()):
        schema["format"] = "decimal"
    return schema


def _field_schema(field: FieldDescriptor | None, schemas: dict[str, Any]) -> dict[str, Any]:
    if field is None:
        return {"type": "string"}
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        sub = field.message_type
        if sub.GetOptions().map_entry:
            value = sub.fields_by_name["value"]
            item = _field_schema(value, schemas)
            return {"type": "object", "additionalProperties": item}
        if sub.full_name in _WELL_KNOWN:
            schema: dict[str, Any] = dict(_WELL_KNOWN[sub.full_name])
        else:
            _message_schema(sub, schemas)
            schema = {"$ref": f"#/components/schemas/{sub.full_name}"}
        if field.is_repeated:
            return {"type": "array", "items": schema}
        return {"allOf": [schema], "nullable": True} if "$ref" in schema else schema
    schema = _scalar_schema(field)
    if field.is_repeated:
        return {"type": "array", "items": schema}
    return schema


def _message_schema(descriptor: Descriptor, schemas: dict[str, Any]) -> None:
    if descriptor.full_name in schemas:
        return
    schemas[descriptor.full_name] = {}  # placeholder: breaks cycles
    schemas[descriptor.full_name] = {
        "type": "object",
        "properties": {f.name: _field_schema(f, schemas) for f in descriptor.fields},
    }
