"""The domain registry: digital twins, their graph, their versions and their history.

Rules that live here:
- a domain names its protocol (its class); its properties are checked against the
  protocol's effective template, and the relationship roles the protocol declares must
  point at active domains of the declared kind;
- an Organisation always gets a membership-group sub-domain, created with it;
- every write bumps the version and appends the whole new record to the ledger, so
  history and any earlier state come from the ledger alone;
- a domain is deactivated, never deleted; `verified` is set only by governance;
- a stove belongs to a household through its `ownerCustomerId` property and nothing else:
  the value must name an existing customer; the domains row keeps a copy of it
  (`owner_customer_id`, indexed) and a change of it is recorded as `domain.owner`, with
  the previous and the new owner, so that events can say "assigned" or "moved";
- a meter's record (`properties.meter`, where the protocol declares it an object) is
  checked field by field when it is written (twinhub.mrv.meter.check_meter), so a bad
  calibration record is refused with its path rather than found at a period's computation.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import orjson
from sqlalchemy import delete, func, insert, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.dialects import dialect_of
from twinhub.db.driver import driver_error, session_driver
from twinhub.db.models import Customer, Domain, DomainController, Relationship
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import (
    Conflict,
    FieldProblem,
    Forbidden,
    Invalid,
    NotFound,
    NotVerified,
    Problems,
    StaleVersion,
)
from twinhub.kernel.identifiers import SLUG_PATTERN, is_did, mint
from twinhub.kernel.principals import Principal
from twinhub.mrv.meter import check_meter
from twinhub.mrv.rules import ACTIVE, takes_part
from twinhub.services.customer_ids import is_valid_customer_id
from twinhub.services.ledger import Ledger, LedgerWrite, Transaction
from twinhub.services.paging import (
    Page,
    Window,
    WindowPage,
    decode_cursor,
    fetch_window,
    split_page,
)
from twinhub.services.protocols import (
    KIND_PATTERN,
    NAME_PATTERN,
    NAME_RULE,
    ProtocolService,
    ProtocolView,
    check_services,
    check_values,
)
from twinhub.services.twin_classes import same_kind, twin_class

DEACTIVATED = "deactivated"  # ACTIVE is the rules' (mrv.rules), for the verified-only rule
SERIAL_PROPERTY = "serialNumber"
MEMBERSHIP_GROUP_PROTOCOL = "did:ixo:protocol/membership-group"
MEMBERSHIP_EDGE = "membershipGroup"
ORGANISATION_TYPES = {"organisation", "organization"}
MAX_GRAPH_DEPTH = 5
MAX_RELATED = 100
OWNER_PROPERTY = "ownerCustomerId"
_ROLE = re.compile(NAME_PATTERN.pattern)


@dataclass
class DomainSpec:
    type: str
    protocol: str
    metadata: dict[str, Any] = field(default_factory=dict)
    properties: dict[str, Any] = field(default_factory=dict)
    controller: list[str] = field(default_factory=list)
    services: list[dict[str, str]] = field(default_factory=list)
    credentials: list[dict[str, str]] = field(default_factory=list)
    relationships: dict[str, list[str]] = field(default_factory=dict)
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    local_id: str | None = None


@dataclass
class DomainPatch:
    """Fields a PATCH may change; None means 'leave as it is'."""

    metadata: dict[str, Any] | None = None
    properties: dict[str, Any] | None = None
    controller: list[str] | None = None
    services: list[dict[str, str]] | None = None
    credentials: list[dict[str, str]] | None = None
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    clear_valid_from: bool = False
    clear_valid_until: bool = False


@dataclass(frozen=True)
class DomainFilter:
    type: str | None = None
    protocol: str | None = None
    verified: bool | None = None
    controller: str | None = None
    status: str | None = None
    twin_class: str | None = None
    parent: str | None = None
    owner: str | None = None  # the household's customer ID (properties.ownerCustomerId)


METER_PROPERTY = "meter"


def check_meter_record(
    properties: dict[str, Any], protocol: ProtocolView, problems: Problems
) -> None:
    """The meter's record, when the properties carry one and the protocol declares it an
    object, checked as a monitoring period reads it; faults go into `problems`."""
    value = properties.get(METER_PROPERTY)
    if value is not None and protocol.effective_properties.get(METER_PROPERTY) == "object":
        check_meter(value, problems, f"properties.{METER_PROPERTY}")


def owner_of(properties: dict[str, Any]) -> str | None:
    """The customer ID a record's properties name as the household owning it."""
    value = properties.get(OWNER_PROPERTY)
    return value if isinstance(value, str) and value else None


def _utc(value: datetime | None) -> datetime | None:
    return value.astimezone(UTC) if value is not None else None


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


class Staged(SimpleNamespace):
    """A row a deferred write hands to its batch, read back by attribute as the ORM
    instance would be (`stored_record`, `_group_spec`): building that instance, only to
    read it back, was a twentieth of a create."""


def stored_record(row: Domain | Staged, edges: Iterable[Relationship | Staged]) -> dict[str, Any]:
    """The record as the domain itself holds it (what the ledger keeps per version)."""
    outgoing = sorted(((edge.type, edge.target_did) for edge in edges), key=lambda e: e)
    return {
        "did": row.did,
        "type": row.type,
        "class": row.class_did,
        "twinClass": row.twin_class,
        "controller": row.controller,
        "services": row.services,
        "verifiableCredential": row.credentials,
        "metadata": row.meta,
        "properties": row.properties,
        "relationships": [{"type": kind, "target": target} for kind, target in outgoing],
        "parent": row.parent_did,
        "validFrom": _iso(row.valid_from),
        "validUntil": _iso(row.valid_until),
        "status": row.status,
        "verified": row.verified,
        "version": row.version,
        "createdAt": _iso(row.created_at),
        "updatedAt": _iso(row.updated_at),
    }


def resolve_inheritance(record: dict[str, Any], protocol: ProtocolView) -> dict[str, Any]:
    """The record with what it inherits from its protocol; its own entries win."""
    own_ids = {service["id"] for service in record["services"]}
    inherited = [s for s in protocol.effective_services if s["id"] not in own_ids]
    resolved = dict(record)
    resolved["protocol"] = record["class"]
    resolved["services"] = [*record["services"], *inherited]
    resolved["inheritedServices"] = [service["id"] for service in inherited]
    membership = [r["target"] for r in record["relationships"] if r["type"] == MEMBERSHIP_EDGE]
    resolved["membershipGroup"] = membership[0] if membership else None
    return resolved


class DomainChecks:
    """What a domain's fields must be, each problem added to the request's Problems."""

    def __init__(
        self, protocols: ProtocolService, row_of: Callable[[str], Awaitable[Domain | None]]
    ) -> None:
        self._protocols = protocols
        self._row_of = row_of  # a domain's stored row, None when unknown

    async def protocol_or_problem(
        self, did: str, where: str, problems: Problems
    ) -> ProtocolView | None:
        if not is_did(did):
            problems.add(where, "expected a protocol DID such as did:ixo:protocol/clean-cooking")
            return None
        try:
            return await self._protocols.get(did)
        except NotFound:
            problems.add(where, f"no protocol {did}")
            return None

    def common(self, spec: DomainSpec, controller: list[str], problems: Problems) -> None:
        if not KIND_PATTERN.match(spec.type):
            problems.add("type", "expected an entity type such as Organisation, Project, Device")
        if spec.local_id is not None and not SLUG_PATTERN.match(spec.local_id):
            problems.add("id", "expected lower-case letters, digits and hyphens (1-64)")
        self.controller(controller, problems)
        check_services(spec.services, "services", problems)
        self.credentials(spec.credentials, problems)
        self.validity(spec.valid_from, spec.valid_until, problems)
        self.metadata(spec.metadata, problems)

    @staticmethod
    def metadata(metadata: dict[str, Any], problems: Problems) -> None:
        name = metadata.get("name")
        if name is not None and (not isinstance(name, str) or not 1 <= len(name) <= 200):
            problems.add("metadata.name", "expected a name of 1 to 200 characters")

    @staticmethod
    def controller(controller: list[str], problems: Problems) -> None:
        if not controller:
            problems.add("controller", "at least one controller DID is needed")
        for index, did in enumerate(controller):
            if not is_did(did):
                problems.add(f"controller[{index}]", "expected a DID such as did:ixo:org/operator")
        if len(set(controller)) != len(controller):
            problems.add("controller", "a controller appears twice")

    @staticmethod
    def credentials(credentials: list[dict[str, str]], problems: Problems) -> None:
        for index, credential in enumerate(credentials):
            where = f"verifiableCredential[{index}]"
            if not isinstance(credential, dict):
                problems.add(where, "expected an object with type and issuer")
                continue
            kind = credential.get("type")
            if not isinstance(kind, str) or not 1 <= len(kind) <= 100:
                problems.add(f"{where}.type", "expected a credential type")
            if not is_did(credential.get("issuer")):
                problems.add(f"{where}.issuer", "expected the issuer's DID")

    @staticmethod
    def validity(
        valid_from: datetime | None, valid_until: datetime | None, problems: Problems
    ) -> None:
        if valid_from and valid_until and valid_until <= valid_from:
            problems.add("validUntil", "must be after validFrom")

    async def relationships(
        self,
        relationships: dict[str, list[str]],
        protocol: ProtocolView | None,
        problems: Problems,
    ) -> list[tuple[str, str]]:
        targets: list[tuple[str, str]] = []
        declared = protocol.effective_relationships if protocol else {}
        for role, dids in relationships.items():
            if not _ROLE.match(role):
                problems.add(f"relationships.{role}", NAME_RULE)
                continue
            for index, did in enumerate(dids):
                where = f"relationships.{role}[{index}]"
                found = await self._row_of(did) if is_did(did) else None
                if found is None:
                    problems.add(where, f"no domain {did}")
                elif found.status != ACTIVE:
                    problems.add(where, f"{did} is deactivated")
                elif role in declared and not same_kind(found.type, declared[role]):
                    problems.add(where, f"the {role} must be a {declared[role]}, not {found.type}")
                elif (role, did) not in targets:  # naming one target twice means it once
                    targets.append((role, did))
        if len(targets) > MAX_RELATED:
            problems.add("relationships", f"at most {MAX_RELATED} relationships at once")
        return targets


class DomainService:
    history_batch = 500  # ledger transactions read at a time when looking for a version

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        ledger: Ledger,
        protocols: ProtocolService,
    ) -> None:
        self._sessions = sessions
        self._ledger = ledger
        self._protocols = protocols
        self._checks = DomainChecks(protocols, self._domain_row)

    # -- create ----------------------------------------------------------------------------
    async def create(self, spec: DomainSpec, actor: Principal) -> dict[str, Any]:
        problems = Problems()
        protocol = await self._checks.protocol_or_problem(spec.protocol, "class", problems)
        controller = spec.controller or [actor.did]
        self._checks.common(spec, controller, problems)
        if protocol is not None:
            check_values(spec.properties, protocol, problems, partial=False)
            check_meter_record(spec.properties, protocol, problems)
            expected = protocol.effective_entity_type
            type_ok = KIND_PATTERN.match(spec.type) is not None
            if expected and type_ok and not same_kind(spec.type, expected):
                problems.add("type", f"protocol {protocol.did} is for {expected} domains")
        targets = await self._checks.relationships(spec.relationships, protocol, problems)
        if OWNER_PROPERTY in spec.properties:
            async with self._sessions() as session:
                await _check_owner(session, spec.properties[OWNER_PROPERTY], problems)
        problems.raise_if_any("The domain breaks the registry's rules.")
        assert protocol is not None
        did = mint("entity", spec.local_id)
        if _deferrable(spec):
            return resolve_inheritance(
                await self._create_deferred(did, spec, protocol, controller, targets, actor),
                protocol,
            )
        try:
            async with self._ledger.write() as write:
                row = await self._insert(
                    write, did, spec.type, protocol, spec, controller, parent=None
                )
                edges = [await self._add_edge(write, did, kind, t) for kind, t in targets]
                if spec.type.strip().lower() in ORGANISATION_TYPES:
                    edges.append(await self._membership_group(write, row, actor))
                await write.session.flush()
                record = stored_record(row, edges)
                await write.append("domain.create", did, actor.did, {"record": record})
        except IntegrityError:
            async with self._sessions() as session:  # a racing twin took the serial?
                await self._serial_free(session, protocol.did, serial_of(spec.properties), did)
            raise Conflict(f"A domain {did} exists already.") from None
        return resolve_inheritance(record, protocol)

    async def _create_deferred(
        self,
        did: str,
        spec: DomainSpec,
        protocol: ProtocolView,
        controller: list[str],
        targets: list[tuple[str, str]],
        actor: Principal,
    ) -> dict[str, Any]:
        """The create as a deferred ledger write (Ledger.write): its rows are checked here,
        under the ledger's lock, and written with the batch's others at its commit."""
        # Queued creates are checked together: one statement per batch (_stage, holders_of).
        item = (did, protocol.did, serial_of(spec.properties))
        with self._ledger.ahead(HOLDERS, item):
            async with self._ledger.write(deferred=True) as write:
                row = await self._stage(write, did, spec.type, protocol, spec, controller, None)
                edges = [_stage_edge(write, did, kind, target) for kind, target in targets]
                if spec.type.strip().lower() in ORGANISATION_TYPES:
                    group_protocol = await self._protocols.get(MEMBERSHIP_GROUP_PROTOCOL)
                    group_spec = _group_spec(row, group_protocol)
                    group_did = mint("entity")
                    group = await self._stage(
                        write,
                        group_did,
                        "Group",
                        group_protocol,
                        group_spec,
                        row.controller,
                        did,
                        minted=True,
                    )
                    edges.append(_stage_edge(write, did, MEMBERSHIP_EDGE, group_did))
                    await write.append(
                        "domain.create", group_did, actor.did, {"record": stored_record(group, [])}
                    )
                record = stored_record(row, edges)
                await write.append("domain.create", did, actor.did, {"record": record})
        return record

    async def _stage(
        self,
        write: LedgerWrite,
        did: str,
        entity_type: str,
        protocol: ProtocolView,
        spec: DomainSpec,
        controller: list[str],
        parent: str | None,
        minted: bool = False,
    ) -> Staged:
        """`_insert` for a deferred write: the same row, checked against the table and the
        batch's rows not yet written, then handed to the batch. A DID `minted` here (80
        random bits) without a serial number is not looked for: the lookup was a round trip
        of its own in every batch with an organisation, with all its writers waiting."""
        serial = serial_of(spec.properties)
        serial_key = ("domains.serial", protocol.did, serial)
        holder = write.holder(serial_key) if serial is not None else None
        taken = False
        if holder is None and not (minted and serial is None):
            holder, taken = await write.ahead(HOLDERS, (did, protocol.did, serial), holders_of)
        if holder is not None:
            raise _serial_taken(serial, holder, protocol.did)
        if taken or write.holder(("domains.did", did)) is not None:
            raise Conflict(f"A domain {did} exists already.")
        now = utcnow()
        values = _row_values(did, entity_type, protocol, spec, controller, parent, serial, now)
        values["seq"] = await write.next_seq(Domain.seq)
        write.defer(DOMAINS, {COLUMN_NAMES.get(key, key): value for key, value in values.items()})
        for each in controller:
            write.defer(CONTROLLERS, {"domain_did": did, "controller": each})
        write.take(("domains.did", did), did)
        if serial is not None:
            write.take(serial_key, did)
        return Staged(**values)

    @staticmethod
    async def _serial_free(
        session: AsyncSession, protocol: str, serial: str | None, did: str
    ) -> None:
        """Serial numbers are unique per protocol: two stoves never share one (the unique
        index `uq_domains_class_serial` holds it when two writers race)."""
        if serial is None:
            return
        holder = await session.scalar(
            select(Domain.did).where(
                Domain.class_did == protocol, Domain.serial == serial, Domain.did != did
            )
        )
        if holder is not None:
            raise _serial_taken(serial, holder, protocol)

    async def _insert(
        self,
        write: LedgerWrite,
        did: str,
        entity_type: str,
        protocol: ProtocolView,
        spec: DomainSpec,
        controller: list[str],
        parent: str | None,
    ) -> Domain:
        serial = serial_of(spec.properties)
        await self._serial_free(write.session, protocol.did, serial, did)
        seq = await write.next_seq(Domain.seq)
        values = _row_values(did, entity_type, protocol, spec, controller, parent, serial, utcnow())
        values["seq"] = seq
        # Core INSERTs, not the ORM's unit of work: a new domain needs no identity map, and
        # this halves the CPU of a create. The returned row is transient, for reading only.
        await write.session.execute(insert(Domain), [values])
        if controller:
            await write.session.execute(
                insert(DomainController),
                [{"domain_did": did, "controller": c} for c in controller],
            )
        row = Domain(**values)
        return row

    async def _membership_group(
        self, write: LedgerWrite, organisation: Domain, actor: Principal
    ) -> Relationship:
        """Every organisation is a DAO whose members form a group sub-domain."""
        group_protocol = await self._protocols.get(MEMBERSHIP_GROUP_PROTOCOL)
        spec = _group_spec(organisation, group_protocol)
        group_did = mint("entity")
        group = await self._insert(
            write,
            group_did,
            "Group",
            group_protocol,
            spec,
            organisation.controller,
            parent=organisation.did,
        )
        edge = await self._add_edge(write, organisation.did, MEMBERSHIP_EDGE, group_did)
        await write.session.flush()
        await write.append(
            "domain.create", group_did, actor.did, {"record": stored_record(group, [])}
        )
        return edge

    async def _add_edge(
        self, write: LedgerWrite, source: str, kind: str, target: str
    ) -> Relationship:
        edge = Relationship(source_did=source, type=kind, target_did=target, created_at=utcnow())
        write.session.add(edge)
        return edge

    # -- reads -----------------------------------------------------------------------------
    async def _domain_row(self, did: str) -> Domain | None:
        if not is_did(did):
            return None
        async with self._sessions() as session:
            return await session.get(Domain, did)

    async def get(self, did: str, version: int | None = None) -> dict[str, Any]:
        """The current record, or the record as it was at `version` (from the ledger)."""
        if not is_did(did):
            raise NotFound(f"No domain {did!r}.")
        if version is None:
            async with self._sessions() as session:
                # One round trip: the domain joined to its outgoing edges (none: one row).
                rows = (
                    await session.execute(
                        select(Domain, Relationship)
                        .outerjoin(Relationship, Relationship.source_did == Domain.did)
                        .where(Domain.did == did)
                    )
                ).all()
                if not rows:
                    raise NotFound(f"No domain {did}.")
                edges = [edge for _, edge in rows if edge is not None]
                record = stored_record(rows[0][0], edges)
        else:
            record = await self._record_at(did, version)
        return resolve_inheritance(record, await self._protocols.get(record["class"]))

    async def _record_at(self, did: str, version: int) -> dict[str, Any]:
        """Version `version` from the ledger, read in batches: a stove's history also holds
        every claim about it, so it can be long."""
        after, batch = 0, self.history_batch
        while True:
            transactions = await self._ledger.history(did, after, batch)
            for transaction in transactions:
                record = transaction.payload.get("record")
                if record and record.get("version") == version:
                    return record
            if len(transactions) < batch:
                break
            after = transactions[-1].height
        if await self._domain_row(did) is None:
            raise NotFound(f"No domain {did}.")
        raise NotFound(f"Domain {did} has no version {version}.")

    async def history(self, did: str, cursor: str | None, limit: int) -> Page[Transaction]:
        """One page of the domain's ledger transactions, oldest first.

        Paged because an asset's history grows with every claim made about it."""
        after = decode_cursor(cursor)
        transactions = await self._ledger.history(did, after, limit + 1) if is_did(did) else []
        if not transactions and (after == 0 or await self._domain_row(did) is None):
            raise NotFound(f"No domain {did}.")
        return Page(*split_page(transactions, limit, lambda tx: tx.height))

    async def list(
        self, where: DomainFilter, cursor: str | None, limit: int, count: bool = False
    ) -> Page[dict[str, Any]]:
        after = decode_cursor(cursor, Domain.seq)
        for name, value in vars(where).items():
            if isinstance(value, str) and "\x00" in value:
                raise Invalid("Filters cannot contain NUL characters.", [FieldProblem(name, "NUL")])
        filters = _filter_conditions(where)
        query = (
            select(Domain).where(Domain.seq > after, *filters).order_by(Domain.seq).limit(limit + 1)
        )
        async with self._sessions() as session:
            rows = list(await session.scalars(query))
            rows, next_cursor = split_page(rows, limit, lambda row: row.seq)
            edges = await self._edges_of(session, [row.did for row in rows])
            total = None
            if count:
                counting = select(func.count()).select_from(Domain).where(*filters)
                total = await session.scalar(counting)
        protocols: dict[str, ProtocolView] = {}
        records = []
        for row in rows:
            if row.class_did not in protocols:
                protocols[row.class_did] = await self._protocols.get(row.class_did)
            record = stored_record(row, edges.get(row.did, []))
            records.append(resolve_inheritance(record, protocols[row.class_did]))
        return Page(records, next_cursor, total)

    async def window(self, where: DomainFilter, window: Window) -> WindowPage[dict[str, Any]]:
        """A Cosmos-style page of resolved records (the chain node's lists)."""
        query = select(Domain).where(*_filter_conditions(where))
        async with self._sessions() as session:
            page = await fetch_window(session, query, Domain.seq, window)
            edges = await self._edges_of(session, [row.did for row in page.items])
        records = []
        for row in page.items:
            record = stored_record(row, edges.get(row.did, []))
            records.append(resolve_inheritance(record, await self._protocols.get(row.class_did)))
        return WindowPage(records, page.next_key, page.total)

    async def types_of(self, dids: list[str]) -> dict[str, str]:
        """The entity type of each known DID (for rendering links to other domains)."""
        if not dids:
            return {}
        async with self._sessions() as session:
            rows = await session.execute(
                select(Domain.did, Domain.type).where(Domain.did.in_(dids))
            )
            return {did: kind for did, kind in rows}

    async def sequence(self) -> int:
        """How many domains were ever created (the newest sequence number)."""
        async with self._sessions() as session:
            return int(await session.scalar(select(func.max(Domain.seq))) or 0)

    @staticmethod
    async def _edges_of(session: AsyncSession, dids: list[str]) -> dict[str, list[Relationship]]:
        result: dict[str, list[Relationship]] = {}
        if dids:
            for edge in await session.scalars(
                select(Relationship).where(Relationship.source_did.in_(dids))
            ):
                result.setdefault(edge.source_did, []).append(edge)
        return result

    async def graph(self, did: str, depth: int) -> dict[str, Any]:
        """Nodes and edges within `depth` hops of `did`, following edges both ways."""
        if not 0 <= depth <= MAX_GRAPH_DEPTH:
            raise Invalid(
                f"depth must be between 0 and {MAX_GRAPH_DEPTH}.",
                [],
            )
        if await self._domain_row(did) is None:
            raise NotFound(f"No domain {did!r}.")
        async with self._sessions() as session:
            seen, frontier = {did}, {did}
            edges: dict[int, Relationship] = {}
            for _ in range(depth):
                found = await session.scalars(
                    select(Relationship).where(
                        or_(
                            Relationship.source_did.in_(frontier),
                            Relationship.target_did.in_(frontier),
                        )
                    )
                )
                frontier = set()
                for edge in found:
                    edges[edge.id] = edge
                    for end in (edge.source_did, edge.target_did):
                        if end not in seen:
                            seen.add(end)
                            frontier.add(end)
                if not frontier:
                    break
            rows = await session.scalars(select(Domain).where(Domain.did.in_(seen)))
            nodes = [
                {
                    "did": row.did,
                    "type": row.type,
                    "twinClass": row.twin_class,
                    "name": row.meta.get("name"),
                    "status": row.status,
                    "verified": row.verified,
                }
                for row in sorted(rows, key=lambda r: r.seq)
            ]
        return {
            "root": did,
            "depth": depth,
            "nodes": nodes,
            "edges": [
                {"source": e.source_did, "type": e.type, "target": e.target_did}
                for e in sorted(edges.values(), key=lambda e: e.id)
            ],
        }

    # -- changes ---------------------------------------------------------------------------
    async def update(
        self, did: str, patch: DomainPatch, actor: Principal, expected_version: int | None
    ) -> dict[str, Any]:
        try:
            return await self._update(did, patch, actor, expected_version)
        except IntegrityError:
            # Only the serial index can refuse an update: a racing writer took the serial.
            serial = serial_of(patch.properties or {})
            async with self._sessions() as session:
                row = await session.get(Domain, did)
                if row is not None:
                    await self._serial_free(session, row.class_did, serial, did)
            raise

    async def _update(
        self, did: str, patch: DomainPatch, actor: Principal, expected_version: int | None
    ) -> dict[str, Any]:
        async with self._ledger.write() as write:
            row = await self._changeable(write, did, actor, expected_version)
            protocol = await self._protocols.get(row.class_did)
            problems = Problems()
            owner_before = row.owner_customer_id
            if patch.properties is not None:
                merged = merge_patch(row.properties, patch.properties)
                check_values(merged, protocol, problems, partial=False)
                if METER_PROPERTY in patch.properties:  # a record stored before stays readable
                    check_meter_record(merged, protocol, problems)
                if patch.properties.get(OWNER_PROPERTY) is not None:
                    await _check_owner(write.session, merged[OWNER_PROPERTY], problems)
                row.properties = merged
                if serial_of(merged) != row.serial:
                    await self._serial_free(write.session, row.class_did, serial_of(merged), did)
                    row.serial = serial_of(merged)
                row.owner_customer_id = owner_of(merged)
            if patch.controller is not None:
                self._checks.controller(patch.controller, problems)
                if not problems.items:
                    await write.session.execute(
                        delete(DomainController).where(DomainController.domain_did == did)
                    )
                    write.session.add_all(
                        DomainController(domain_did=did, controller=c) for c in patch.controller
                    )
                    row.controller = patch.controller
            if patch.services is not None:
                check_services(patch.services, "services", problems)
                row.services = patch.services
            if patch.credentials is not None:
                self._checks.credentials(patch.credentials, problems)
                row.credentials = patch.credentials
            if patch.metadata is not None:
                row.meta = merge_patch(row.meta, patch.metadata)
                self._checks.metadata(row.meta, problems)
            if patch.valid_from is not None or patch.clear_valid_from:
                row.valid_from = patch.valid_from
            if patch.valid_until is not None or patch.clear_valid_until:
                row.valid_until = patch.valid_until
            self._checks.validity(row.valid_from, row.valid_until, problems)
            problems.raise_if_any("The change breaks the registry's rules.")
            if row.owner_customer_id != owner_before:
                moved = {"owner": {"from": owner_before, "to": row.owner_customer_id}}
                return await self._commit_change(
                    write, row, actor, "domain.owner", protocol, extra=moved
                )
            return await self._commit_change(write, row, actor, "domain.update", protocol)

    async def deactivate(
        self, did: str, actor: Principal, expected_version: int | None
    ) -> dict[str, Any]:
        async with self._ledger.write() as write:
            row = await self._changeable(write, did, actor, expected_version)
            row.status = DEACTIVATED
            protocol = await self._protocols.get(row.class_did)
            return await self._commit_change(write, row, actor, "domain.deactivate", protocol)

    async def relate(
        self, did: str, kind: str, target: str, actor: Principal, expected_version: int | None
    ) -> dict[str, Any]:
        """Add an edge did --kind--> target after creation (checked like at creation)."""
        protocol_did = (await self.get(did))["class"]
        protocol = await self._protocols.get(protocol_did)
        problems = Problems()
        targets = await self._checks.relationships({kind: [target]}, protocol, problems)
        problems.raise_if_any("The relationship breaks the registry's rules.")
        async with self._ledger.write() as write:
            row = await self._changeable(write, did, actor, expected_version)
            exists = await write.session.scalar(
                select(Relationship.id).where(
                    Relationship.source_did == did,
                    Relationship.type == kind,
                    Relationship.target_did == target,
                )
            )
            if exists is not None:
                raise Conflict(f"{did} already has a {kind} relationship to {target}.")
            for role, target_did in targets:
                await self._add_edge(write, did, role, target_did)
            return await self._commit_change(write, row, actor, "domain.relate", protocol)

    async def _changeable(
        self, write: LedgerWrite, did: str, actor: Principal, expected_version: int | None
    ) -> Domain:
        row = await write.session.get(Domain, did, with_for_update=True)
        if row is None:
            raise NotFound(f"No domain {did}.")
        if not (actor.is_admin or actor.did in row.controller):
            raise Forbidden(f"Only a controller of {did} or an admin may change it.")
        if expected_version is not None and expected_version != row.version:
            raise StaleVersion(
                f"{did} is at version {row.version}, not {expected_version}; "
                "read it again and re-apply the change."
            )
        if row.status != ACTIVE:
            raise Conflict(f"{did} is deactivated; its record can no longer change.")
        return row

    async def record_change(
        self,
        write: LedgerWrite,
        row: Domain,
        actor: Principal,
        kind: str,
        extra: dict[str, Any],
    ) -> dict[str, Any]:
        """A change another service made to `row` inside its own ledger write, recorded as a
        new version with `extra` (what caused it) beside the record: governance's verified
        flag (the proposal), a survey's confirmed household size (the answer's session)."""
        protocol = await self._protocols.get(row.class_did)
        return await self._commit_change(write, row, actor, kind, protocol, extra=extra)

    async def _commit_change(
        self,
        write: LedgerWrite,
        row: Domain,
        actor: Principal,
        kind: str,
        protocol: ProtocolView,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        row.version += 1
        row.updated_at = utcnow()
        await write.session.flush()
        edges = await write.session.scalars(
            select(Relationship).where(Relationship.source_did == row.did)
        )
        record = stored_record(row, edges)
        await write.append(kind, row.did, actor.did, {"record": record, **(extra or {})})
        return resolve_inheritance(record, protocol)


async def verified_project(
    session: AsyncSession, did: str, doing: str, *, purpose: str, lock: bool = False
) -> Domain:
    """The project named `did`, read (FOR UPDATE with `lock`, so a revocation executing now
    waits for the caller's write) and checked by `require_verified_project`."""
    project = await session.get(Domain, did, with_for_update=lock) if is_did(did) else None
    return require_verified_project(project, did, doing, purpose=purpose)


def require_verified_project(
    project: Domain | None, did: str, doing: str, *, purpose: str
) -> Domain:
    """`project`, refused unless it is an active Project verified by governance (rule:
    verified domains only). `doing` ends the refusal ("take claims"); `purpose` says what
    projects are for here ("claims are collected for projects")."""
    if project is None:
        raise NotFound(f"No domain {did}.")
    if not same_kind(project.type, "Project"):
        raise Invalid(
            f"{did} is a {project.type}; {purpose}.",
            [FieldProblem("project", "expected a Project domain")],
        )
    if not takes_part(project.verified, project.status):
        state = "deactivated" if project.status != ACTIVE else "not verified"
        raise NotVerified(
            f"{did} is {state}: only a project verified by governance may {doing} "
            "(rule: verified domains only)."
        )
    return project


DOMAINS = Domain.__table__
CONTROLLERS = DomainController.__table__
RELATIONSHIPS = Relationship.__table__
COLUMN_NAMES = {"meta": "metadata"}  # Domain's attributes named unlike their columns
MAX_SERIAL = 200  # domains.serial's length


def _row_values(
    did: str,
    entity_type: str,
    protocol: ProtocolView,
    spec: DomainSpec,
    controller: list[str],
    parent: str | None,
    serial: str | None,
    now: datetime,
) -> dict[str, Any]:
    """A new domain's row, by attribute name (all but `seq`)."""
    return {
        "did": did,
        "type": entity_type,
        "class_did": protocol.did,
        "twin_class": twin_class(entity_type, protocol.effective_twin_class),
        "parent_did": parent,
        "controller": controller,
        "services": spec.services,
        "credentials": spec.credentials,
        "meta": spec.metadata,
        "properties": spec.properties,
        # In UTC, as the table gives them back: the ledger's record and the row agree.
        "valid_from": _utc(spec.valid_from),
        "valid_until": _utc(spec.valid_until),
        "status": ACTIVE,
        "verified": False,
        "version": 1,
        "created_at": now,
        "updated_at": now,
        "serial": serial,
        "owner_customer_id": owner_of(spec.properties),
    }


def _group_spec(organisation: Domain | Staged, group_protocol: ProtocolView) -> DomainSpec:
    """The membership-group sub-domain every organisation gets."""
    name = organisation.meta.get("name") or organisation.did
    return DomainSpec(
        type="Group", protocol=group_protocol.did, metadata={"name": f"{name} members"}
    )


def _stage_edge(write: LedgerWrite, source: str, kind: str, target: str) -> Staged:
    """An edge for a deferred write; its target was checked to exist (and domains are never
    deleted), and a create names each (role, target) once, so the row cannot fail."""
    row = {"source_did": source, "type": kind, "target_did": target, "created_at": utcnow()}
    write.defer(RELATIONSHIPS, row)
    return Staged(**row)


def _deferrable(spec: DomainSpec) -> bool:
    """Whether a create's rows can only fail on a unique key, which `_stage` checks: no
    value the table would refuse (PostgreSQL refuses NUL in text, the serial's column has a
    length). Others take the ordinary write, whose SAVEPOINT fails that create alone."""
    serial = serial_of(spec.properties)
    if serial is not None and len(serial) > MAX_SERIAL:
        return False
    documents = (spec.properties, spec.metadata, spec.services, spec.credentials)
    try:
        return b"\\u0000" not in orjson.dumps(documents)
    except orjson.JSONEncodeError:  # an integer past 64 bits, say: as the ordinary write does
        return False


HOLDERS = "domains.holders"  # Ledger.ahead's name for creates' (did, protocol, serial)


# holders_of on PostgreSQL: the dids asked for, then each (protocol, serial) pair's holder
# (a domain may come twice: the caller reads sets).
async def holders_of(session: AsyncSession, items: list[Any]) -> dict[Any, tuple[str | None, bool]]:
    """For each (did, protocol, serial) item, in one statement: which other domain of the
    protocol has the serial (if any), and whether the did exists. Asked of the driver
    (aiosqlite or asyncpg) in the session's transaction: through the ORM the statement's
    building, compiling and result handling cost a tenth of a create."""
    dids = list(dict.fromkeys(did for did, _, _ in items))
    pairs = list(dict.fromkeys((p, serial) for _, p, serial in items if serial is not None))
    connection, raw = await session_driver(session)
    dialect = connection.dialect
    try:
        rows = await dialect_of(dialect).holders(raw, dids, pairs)
    except Exception as error:  # the driver's own error, told as SQLAlchemy tells it
        raise driver_error(dialect, raw, error) from error
    found = {did for did, _, _ in rows}
    holding = {(protocol, serial): did for did, protocol, serial in rows if serial is not None}
    answers: dict[Any, tuple[str | None, bool]] = {}
    for did, protocol, serial in items:
        holder = holding.get((protocol, serial)) if serial is not None else None
        answers[(did, protocol, serial)] = (holder if holder != did else None, did in found)
    return answers


def _serial_taken(serial: str | None, holder: str, protocol: str) -> SerialTaken:
    return SerialTaken(
        f"Serial number {serial!r} belongs to {holder} already; serial numbers are "
        f"unique among the domains of {protocol}.",
        [FieldProblem("properties.serialNumber", f"taken by {holder}")],
    )


def serial_of(properties: dict[str, Any]) -> str | None:
    """The serial number a domain's properties declare (kept in `domains.serial`)."""
    serial = properties.get(SERIAL_PROPERTY)
    return serial if isinstance(serial, str) and serial else None


class SerialTaken(Conflict):
    """Another domain of the same protocol has this serial number."""

    code = "serial_taken"


def merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """RFC 7396: objects merge recursively, null removes a key, anything else replaces."""
    merged = dict(target)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_patch(merged[key], value)
        elif isinstance(value, dict):
            merged[key] = merge_patch({}, value)  # nulls inside a new object mean nothing
        else:
            merged[key] = value
    return merged


def _filter_conditions(where: DomainFilter) -> list[Any]:
    conditions: list[Any] = []
    if where.type:
        conditions.append(Domain.type == where.type)
    if where.protocol:
        conditions.append(Domain.class_did == where.protocol)
    if where.verified is not None:
        conditions.append(Domain.verified.is_(where.verified))
    if where.status:
        conditions.append(Domain.status == where.status)
    if where.twin_class:
        conditions.append(Domain.twin_class == where.twin_class)
    if where.parent:
        conditions.append(Domain.parent_did == where.parent)
    if where.owner:
        conditions.append(Domain.owner_customer_id == where.owner)
    if where.controller:
        conditions.append(
            Domain.did.in_(
                select(DomainController.domain_did).where(
                    DomainController.controller == where.controller
                )
            )
        )
    return conditions


async def _check_owner(session: AsyncSession, value: Any, problems: Problems) -> None:
    """ownerCustomerId names a customer who exists (a typo would hand the stove, and the
    credits of its claims, to nobody)."""
    where = f"properties.{OWNER_PROPERTY}"
    if not isinstance(value, str) or not is_valid_customer_id(value):
        problems.add(where, "expected a customer ID (8 digits, as USSD shows it)")
        return
    found = await session.scalar(select(Customer.id).where(Customer.customer_id == value))
    if found is None:
        problems.add(where, f"no customer {value}")
