"""Protocols: templates that say which properties, relationship roles and services a kind
of domain has. A protocol may extend a parent; the child wins where names collide.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import Protocol
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import Conflict, NotFound, Problems
from twinhub.kernel.identifiers import SLUG_PATTERN, is_did, mint, slugify
from twinhub.mrv.methodology import compile_methodology, digest_of
from twinhub.mrv.telemetry_schema import check_declaration
from twinhub.services.ledger import Ledger
from twinhub.services.paging import Page, decode_cursor, split_page
from twinhub.services.twin_classes import TWIN_CLASSES

PROPERTY_TYPES = (
    "string",
    "number",
    "integer",
    "boolean",
    "object",
    "array",
    "date-time",
    "geo-point",
)
# A place on Earth: {"lat", "lon"} in decimal degrees (WGS 84), and optionally the name of
# the region it is in (a district or province, for people reading a map).
GEO_KEYS = {"lat": (-90.0, 90.0), "lon": (-180.0, 180.0)}
GEO_NAMES = ("region", "village")  # optional names of a place: the lists' filters
GEO_REGION_MAX = 100
NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
NAME_RULE = "names start with a letter, then letters, digits or _ (at most 64)"
KIND_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9 _\-]{0,63}$")
SERVICE_ID = re.compile(r"^#[A-Za-z0-9][A-Za-z0-9_\-]{0,63}$")
URL_PATTERN = re.compile(r"^(https?|wss?|ipfs|grpcs?)://[^\s]{1,2000}$")
JSON_SAFE_INTEGER = 2**53 - 1
TOKEN_CLASS_PATTERN = re.compile(r"^[A-Z][A-Z0-9]{1,31}$")
# What a protocol may declare about a property's values, beside its type (`constraints`).
BOUND_KEYS = ("minimum", "maximum")  # number and integer properties
LENGTH_KEYS = ("minLength", "maxLength")  # string properties
CONSTRAINT_KEYS = (*BOUND_KEYS, "enum", *LENGTH_KEYS)
ENUM_TYPES = ("string", "number", "integer")
MAX_ENUM = 100
MAX_LENGTH_BOUND = 100_000


def value_problem(type_name: str, value: Any) -> str | None:
    """Why `value` is not of the protocol type `type_name`, or None when it is."""
    match type_name:
        case "string":
            ok = isinstance(value, str)
        case "number":
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        case "integer":
            ok = isinstance(value, int) and not isinstance(value, bool)
        case "boolean":
            ok = isinstance(value, bool)
        case "object":
            ok = isinstance(value, dict)
        case "array":
            ok = isinstance(value, list)
        case "date-time":
            return None if _is_timestamp(value) else "expected an ISO 8601 date-time string"
        case "geo-point":
            return geo_point_problem(value)
        case _:
            return f"unknown type {type_name!r}"
    return None if ok else f"expected {type_name}, got {_json_type(value)}"


def geo_point_problem(value: Any) -> str | None:
    """Why `value` is not a place {"lat": -90..90, "lon": -180..180, "region"?: name,
    "village"?: name}, or None when it is one."""
    if not isinstance(value, dict):
        return f"expected an object {{lat, lon}}, got {_json_type(value)}"
    unknown = sorted(set(value) - {*GEO_KEYS, *GEO_NAMES})
    if unknown:
        return f"unknown keys {', '.join(unknown)}: a place has lat, lon, region and village"
    for key, (low, high) in GEO_KEYS.items():
        number = value.get(key)
        if (
            isinstance(number, bool)
            or not isinstance(number, int | float)
            or not math.isfinite(number)
        ):
            return f"{key} must be a number of degrees from {low:g} to {high:g}"
        if not low <= number <= high:
            return f"{key} {number} is outside {low:g} to {high:g} degrees"
    for key in GEO_NAMES:
        name = value.get(key)
        if name is not None and (
            not isinstance(name, str) or not 1 <= len(name.strip()) <= GEO_REGION_MAX
        ):
            return f"{key} must be a name of 1 to {GEO_REGION_MAX} characters"
    return None


def check_values(
    values: dict[str, Any],
    protocol: ProtocolView,
    problems: Problems,
    partial: bool,
    where: str = "properties",
) -> None:
    """Every value of the protocol's declared type; every required one present (unless
    `partial`). Domain properties and claim data follow the same template rules."""
    declared = protocol.effective_properties
    for name, value in values.items():
        if name not in declared:
            problems.add(f"{where}.{name}", f"not a property of {protocol.did}")
            continue
        problem = value_problem(declared[name], value) or constraint_problem(
            protocol.effective_constraints.get(name), value
        )
        if problem:
            problems.add(f"{where}.{name}", problem)
    if not partial:
        for name in protocol.effective_required:
            if name not in values:
                problems.add(f"{where}.{name}", "required by the protocol")


def constraint_problem(rule: dict[str, Any] | None, value: Any) -> str | None:
    """Why a value of the right type breaks the protocol's declared range, allowed values
    or length, or None. `rule` was checked by `check_constraints` when the protocol was
    made, so each key fits the property's type."""
    if not rule:
        return None
    if "enum" in rule and value not in rule["enum"]:
        shown = ", ".join(orjson_text(item) for item in rule["enum"][:10])
        return f"expected one of {shown}{', ...' if len(rule['enum']) > 10 else ''}"
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in rule and value < rule["minimum"]:
            return f"expected at least {rule['minimum']}"
        if "maximum" in rule and value > rule["maximum"]:
            return f"expected at most {rule['maximum']}"
    if isinstance(value, str):
        if "minLength" in rule and len(value) < rule["minLength"]:
            return f"expected at least {rule['minLength']} characters"
        if "maxLength" in rule and len(value) > rule["maxLength"]:
            return f"expected at most {rule['maxLength']} characters"
    return None


def orjson_text(value: Any) -> str:
    """A value as JSON would show it (strings quoted), for error messages."""
    return f'"{value}"' if isinstance(value, str) else str(value)


def check_constraints(
    constraints: Any, types: dict[str, str], problems: Problems, where: str = "constraints"
) -> None:
    """Each declared rule names a property of a type it fits, with sane values: bounds are
    finite numbers with minimum <= maximum, an enum is a non-empty list of distinct values
    of the property's type, lengths are whole numbers with minLength <= maxLength."""
    if not isinstance(constraints, dict):
        problems.add(where, "expected an object of property name to rules")
        return
    for name, rule in constraints.items():
        at = f"{where}.{name}"
        type_name = types.get(name)
        if type_name is None:
            problems.add(at, f"{name!r} is not a property of this protocol")
            continue
        if not isinstance(rule, dict) or not rule:
            problems.add(at, f"expected an object with some of {', '.join(CONSTRAINT_KEYS)}")
            continue
        unknown = sorted(set(rule) - set(CONSTRAINT_KEYS))
        if unknown:
            problems.add(at, f"unknown rules: {', '.join(unknown)}")
        _check_bounds(rule, type_name, at, problems, BOUND_KEYS, ("number", "integer"))
        _check_bounds(rule, type_name, at, problems, LENGTH_KEYS, ("string",))
        if "enum" in rule:
            _check_enum(rule["enum"], type_name, f"{at}.enum", problems)


def _check_bounds(
    rule: dict[str, Any],
    type_name: str,
    at: str,
    problems: Problems,
    keys: tuple[str, str],
    types: tuple[str, ...],
) -> None:
    low_key, high_key = keys
    values: dict[str, float] = {}
    for key in keys:
        if key not in rule:
            continue
        value = rule[key]
        if type_name not in types:
            problems.add(f"{at}.{key}", f"only a {' or '.join(types)} property has {key}")
        elif key in LENGTH_KEYS and (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not 0 <= value <= MAX_LENGTH_BOUND
        ):
            problems.add(f"{at}.{key}", f"expected a whole number from 0 to {MAX_LENGTH_BOUND}")
        elif key in BOUND_KEYS and (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or abs(value) > JSON_SAFE_INTEGER
        ):
            problems.add(f"{at}.{key}", "expected a finite number")
        else:
            values[key] = value
    if low_key in values and high_key in values and values[low_key] > values[high_key]:
        problems.add(at, f"{low_key} {values[low_key]} is above {high_key} {values[high_key]}")


def _check_enum(values: Any, type_name: str, at: str, problems: Problems) -> None:
    if type_name not in ENUM_TYPES:
        problems.add(at, f"only a {', '.join(ENUM_TYPES)} property has an enum")
        return
    if not isinstance(values, list) or not 1 <= len(values) <= MAX_ENUM:
        problems.add(at, f"expected a list of 1 to {MAX_ENUM} allowed values")
        return
    for index, value in enumerate(values):
        problem = value_problem(type_name, value)
        if problem:
            problems.add(f"{at}[{index}]", problem)
        elif isinstance(value, str) and not 1 <= len(value) <= 200:
            problems.add(f"{at}[{index}]", "expected 1 to 200 characters")
    if len({orjson_text(v) for v in values}) != len(values):
        problems.add(at, "a value is listed twice")


def _is_timestamp(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array"}.get(
        type(value), "object"
    )


def check_services(services: list[Any], where: str, problems: Problems) -> None:
    seen: set[str] = set()
    for index, service in enumerate(services):
        name = f"{where}[{index}]"
        if not isinstance(service, dict):
            problems.add(name, "expected an object with id, type and endpoint")
            continue
        service_id, kind, endpoint = service.get("id"), service.get("type"), service.get("endpoint")
        if not isinstance(service_id, str) or not SERVICE_ID.match(service_id):
            problems.add(f"{name}.id", "expected a fragment such as '#ingest'")
        elif service_id in seen:
            problems.add(f"{name}.id", f"{service_id} appears twice")
        else:
            seen.add(service_id)
        if not isinstance(kind, str) or not 1 <= len(kind) <= 100:
            problems.add(f"{name}.type", "expected a service type of 1 to 100 characters")
        if not isinstance(endpoint, str) or not URL_PATTERN.match(endpoint):
            problems.add(f"{name}.endpoint", "expected an absolute URL")
        extra = set(service) - {"id", "type", "endpoint"}
        if extra:
            problems.add(name, f"unknown fields: {', '.join(sorted(extra))}")


@dataclass(frozen=True)
class ProtocolSpec:
    name: str
    slug: str | None = None
    entity_type: str | None = None
    twin_class: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    required: list[str] = field(default_factory=list)
    relationships: dict[str, str] = field(default_factory=dict)
    services: list[dict[str, str]] = field(default_factory=list)
    extends: str | None = None
    token_class: str | None = None
    telemetry: dict[str, Any] | None = None  # what devices report (twinhub.mrv.telemetry_schema)
    # property name -> {minimum, maximum, enum, minLength, maxLength} (check_constraints)
    constraints: dict[str, dict[str, Any]] | None = None
    methodology: dict[str, Any] | None = None  # how credits are computed (twinhub.mrv)


@dataclass(frozen=True)
class ProtocolView:
    """A protocol as stored, plus what it inherits (`effective_*`)."""

    did: str
    name: str
    entity_type: str | None
    twin_class: str | None
    extends: str | None
    properties: dict[str, str]
    required: list[str]
    relationships: dict[str, str]
    services: list[dict[str, str]]
    token_class: str | None
    effective_properties: dict[str, str]
    effective_required: list[str]
    effective_relationships: dict[str, str]
    effective_services: list[dict[str, str]]
    effective_twin_class: str | None
    effective_entity_type: str | None
    effective_token_class: str | None
    version: int
    created_at: datetime
    updated_at: datetime
    telemetry: dict[str, Any] | None = None
    effective_telemetry: dict[str, Any] | None = None
    constraints: dict[str, dict[str, Any]] | None = None
    effective_constraints: dict[str, dict[str, Any]] = field(default_factory=dict)
    methodology: dict[str, Any] | None = None
    effective_methodology: dict[str, Any] | None = None

    def methodology_summary(self) -> dict[str, str] | None:
        """What a credit names: the methodology's id, version and digest."""
        document = self.effective_methodology
        if document is None:
            return None
        return {
            "id": str(document.get("id")),
            "version": str(document.get("version")),
            "digest": digest_of(document),
        }

    def as_record(self) -> dict[str, Any]:
        return {
            "did": self.did,
            "type": "Protocol",
            "name": self.name,
            "entityType": self.entity_type,
            "twinClass": self.twin_class,
            "extends": self.extends,
            "properties": self.properties,
            "required": self.required,
            "relationships": self.relationships,
            "services": self.services,
            "tokenClass": self.token_class,
            "telemetry": self.telemetry,
            "constraints": self.constraints,
            "methodology": self.methodology,
            "version": self.version,
            "createdAt": self.created_at.isoformat(),
            "updatedAt": self.updated_at.isoformat(),
        }


class ProtocolService:
    def __init__(self, sessions: async_sessionmaker[AsyncSession], ledger: Ledger) -> None:
        self._sessions = sessions
        self._ledger = ledger
        # Protocols never change once registered (a new version is a new protocol), so a
        # resolved view can be kept for the life of the process, in every process.
        self._views: dict[str, ProtocolView] = {}

    async def create(self, spec: ProtocolSpec, actor: str) -> ProtocolView:
        slug = spec.slug if spec.slug is not None else slugify(spec.name)
        problems = Problems()
        if not spec.name or len(spec.name) > 200:
            problems.add("name", "expected a name of 1 to 200 characters")
        if not SLUG_PATTERN.match(slug):
            problems.add("id", "expected lower-case letters, digits and hyphens (1-64)")
        parent = await self._chain(spec.extends) if spec.extends else []
        if spec.extends and not parent:
            problems.add("extends", f"no protocol {spec.extends}")
        self._check_spec(spec, parent, problems)
        problems.raise_if_any("The protocol breaks the template rules.")
        did = mint("protocol", slug)
        now = utcnow()
        try:
            async with self._ledger.write() as write:
                seq = await write.next_seq(Protocol.seq)
                row = Protocol(
                    did=did,
                    name=spec.name,
                    entity_type=spec.entity_type,
                    twin_class=spec.twin_class,
                    parent_did=spec.extends,
                    properties=spec.properties,
                    required=spec.required,
                    relationships=spec.relationships,
                    services=spec.services,
                    token_class=spec.token_class,
                    telemetry=spec.telemetry,
                    constraints=spec.constraints,
                    methodology=spec.methodology,
                    seq=seq,
                    version=1,
                    created_at=now,
                    updated_at=now,
                )
                write.session.add(row)
                await write.session.flush()
                view = _view(row, parent)
                await write.append("protocol.create", did, actor, {"record": view.as_record()})
        except IntegrityError:
            raise Conflict(f"A protocol {did} exists already.") from None
        return view

    def _check_spec(self, spec: ProtocolSpec, parent: list[Protocol], problems: Problems) -> None:
        for name, type_name in spec.properties.items():
            if not NAME_PATTERN.match(name):
                problems.add(f"properties.{name}", NAME_RULE)
            if type_name not in PROPERTY_TYPES:
                problems.add(
                    f"properties.{name}", f"type must be one of {', '.join(PROPERTY_TYPES)}"
                )
        known = set(spec.properties)
        for ancestor in parent:
            known |= set(ancestor.properties)
        for index, name in enumerate(spec.required):
            if name not in known:
                problems.add(f"required[{index}]", f"{name!r} is not a property of this protocol")
        for role, kind in spec.relationships.items():
            if not NAME_PATTERN.match(role):
                problems.add(f"relationships.{role}", NAME_RULE)
            if not isinstance(kind, str) or not KIND_PATTERN.match(kind):
                problems.add(f"relationships.{role}", "expected an entity kind such as 'Oracle'")
        if spec.twin_class is not None and spec.twin_class not in TWIN_CLASSES:
            problems.add("twinClass", f"expected one of {', '.join(TWIN_CLASSES)}")
        if spec.entity_type is not None and not KIND_PATTERN.match(spec.entity_type):
            problems.add("entityType", "expected an entity type such as 'Device'")
        check_services(spec.services, "services", problems)
        if spec.token_class is not None and not TOKEN_CLASS_PATTERN.match(spec.token_class):
            problems.add("tokenClass", "expected 2 to 32 upper-case letters or digits, e.g. CARBON")
        if spec.telemetry is not None:
            check_declaration(spec.telemetry, problems)
        if spec.constraints is not None:
            types: dict[str, str] = {}
            for ancestor in reversed(parent):
                types.update(ancestor.properties)
            types.update(spec.properties)
            check_constraints(spec.constraints, types, problems)
        self._check_inherited_constraints(spec, parent, problems)
        if spec.methodology is not None:
            compile_methodology(spec.methodology, problems)

    @staticmethod
    def _check_inherited_constraints(
        spec: ProtocolSpec, parent: list[Protocol], problems: Problems
    ) -> None:
        """A child that retypes a property its ancestors constrain must restate the rule."""
        own = spec.constraints or {}
        for ancestor in parent:
            for name, rule in (ancestor.constraints or {}).items():
                if name in spec.properties and name not in own:
                    check_constraints(
                        {name: rule}, {name: spec.properties[name]}, problems, "properties"
                    )

    def get_now(self, did: str) -> ProtocolView | None:
        """The view `get` gives when it is loaded already (None otherwise)."""
        return self._views.get(did)

    async def get(self, did: str) -> ProtocolView:
        view = self._views.get(did)
        if view is not None:
            return view
        chain = await self._chain(did) if is_did(did) else []
        if not chain:
            raise NotFound(f"No protocol {did!r}.")
        view = self._views[did] = _view(chain[0], chain[1:])
        return view

    async def exists(self, did: str) -> bool:
        async with self._sessions() as session:
            return await session.get(Protocol, did) is not None

    async def list(self, cursor: str | None, limit: int) -> Page[ProtocolView]:
        after = decode_cursor(cursor, Protocol.seq)
        async with self._sessions() as session:
            rows = list(
                await session.scalars(
                    select(Protocol)
                    .where(Protocol.seq > after)
                    .order_by(Protocol.seq)
                    .limit(limit + 1)
                )
            )
            total = await session.scalar(select(func.count()).select_from(Protocol))
        rows, next_cursor = split_page(rows, limit, lambda row: row.seq)
        views = [await self.get(row.did) for row in rows]
        return Page(views, next_cursor, total)

    async def _chain(self, did: str | None) -> list[Protocol]:
        """The protocol and its ancestors, nearest first."""
        chain: list[Protocol] = []
        async with self._sessions() as session:
            while did and len(chain) < 16:
                row = await session.get(Protocol, did)
                if row is None:
                    break
                chain.append(row)
                did = row.parent_did
        return chain


def _view(row: Protocol, ancestors: list[Protocol]) -> ProtocolView:
    lineage = [*reversed(ancestors), row]  # oldest first, so later entries win
    properties: dict[str, str] = {}
    relationships: dict[str, str] = {}
    services: dict[str, dict[str, str]] = {}
    required: list[str] = []
    twin_class = entity_type = token_class = None
    telemetry: dict[str, Any] | None = None
    constraints: dict[str, dict[str, Any]] = {}
    for protocol in lineage:
        telemetry = protocol.telemetry or telemetry
        constraints.update(protocol.constraints or {})
    methodology: dict[str, Any] | None = None
    for protocol in lineage:
        telemetry = protocol.telemetry or telemetry
        methodology = protocol.methodology or methodology
        properties.update(protocol.properties)
        relationships.update(protocol.relationships)
        services.update({service["id"]: service for service in protocol.services})
        required += [name for name in protocol.required if name not in required]
        twin_class = protocol.twin_class or twin_class
        entity_type = protocol.entity_type or entity_type
        token_class = protocol.token_class or token_class
    return ProtocolView(
        did=row.did,
        name=row.name,
        entity_type=row.entity_type,
        twin_class=row.twin_class,
        extends=row.parent_did,
        properties=row.properties,
        required=row.required,
        relationships=row.relationships,
        services=row.services,
        token_class=row.token_class,
        effective_properties=properties,
        effective_required=required,
        effective_relationships=relationships,
        effective_services=list(services.values()),
        effective_twin_class=twin_class,
        effective_entity_type=entity_type,
        effective_token_class=token_class,
        version=row.version,
        created_at=row.created_at,
        updated_at=row.updated_at,
        telemetry=row.telemetry,
        effective_telemetry=telemetry,
        constraints=row.constraints,
        effective_constraints=constraints,
        methodology=row.methodology,
        effective_methodology=methodology,
    )
