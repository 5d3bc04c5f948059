"""TelemetryService: what HTTP and MQTT ingestion, state, history and aggregates share.

Interfaces authenticate the device (services/device_tokens.py) and hand the parsed body
here; every reading is checked against the twin's protocol, stored once per seq, rolled up
and published to the live streams. Telemetry never goes through the ledger.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from twinhub.db.models import TelemetryQuarantine
from twinhub.kernel.bounds import integer_problem
from twinhub.kernel.errors import (
    Conflict,
    FieldProblem,
    Forbidden,
    Invalid,
    NotFound,
    ServiceError,
    TooLarge,
)
from twinhub.kernel.identifiers import is_did
from twinhub.kernel.ratelimit import RateLimiter
from twinhub.logging import get_logger
from twinhub.mrv.rollups import INTERVALS
from twinhub.mrv.telemetry_schema import (
    READING_ORDER,
    Reading,
    Rejection,
    TelemetrySchema,
    check_readings,
    parse_schema,
    parse_time,
    split_by_clock,
)
from twinhub.security.device_signatures import HMAC_SCHEME, SCHEME, verify_batch
from twinhub.services.device_tokens import DeviceCredential
from twinhub.services.domains import DomainService
from twinhub.services.evidence import quarantine_record, reading_record, receipts_by_id
from twinhub.services.protocols import ProtocolService
from twinhub.settings import TelemetrySettings, setting_name
from twinhub.telemetry.live import LiveHub
from twinhub.telemetry.rows import Batch, Origin, Quarantined
from twinhub.telemetry.store import TelemetryStore

log = get_logger(__name__)
_INFO_SECONDS = 30.0  # how long a twin's protocol and project/organisation are cached
# Readings are checked against no fixed latest time: the clock rule quarantines those ahead
# of their receipt (mrv.telemetry_schema.clock_problem) instead of rejecting them.
_NO_LATER_THAN = datetime.max.replace(tzinfo=UTC)


class Throttled(ServiceError):
    """One device sent more than TELEMETRY_RATE_LIMIT allows."""

    code = "rate_limited"

    def __init__(self, retry_after: int) -> None:
        super().__init__(
            "Too many telemetry requests from this device (the limit per device is "
            f"{setting_name('telemetry', 'rate_limit')}); retry in {retry_after} s."
        )
        self.retry_after = retry_after


class BadSignature(Forbidden):
    """A batch from a device with an enrolled key, unsigned or not signed by that key."""

    code = "bad_signature"


@dataclass(slots=True)  # one per MQTT message: a frozen dataclass's init costs three times as much
class Arrival:
    """A batch as it arrived: its bytes and what signed them (an MQTT message's HMAC under
    its device token, a device's Ed25519 signature). Not changed once made."""

    payload: bytes
    device_signature: str | None = None
    hmac: dict[str, str] | None = None  # {"deviceToken": token id, "value": hex}


@dataclass(frozen=True)
class TwinInfo:
    schema: TelemetrySchema
    scopes: list[str]  # projects and organisations whose rollups the twin's readings feed
    expires: float
    enrolled: datetime | None = None  # the twin's validFrom: no reading is older
    device_key: str | None = None  # its device's Ed25519 public key (multibase), if enrolled


@dataclass(slots=True)  # one per MQTT message: a frozen dataclass's init costs four times as much
class Prepared:
    """A checked batch, ready to store. Not changed once made."""

    did: str
    info: TwinInfo
    valid: list[Reading]
    rejected: list[Rejection]
    source: str = "http"
    origins: list[Origin] = field(default_factory=list)  # each valid reading's
    quarantined: list[Quarantined] = field(default_factory=list)


def merge_by_device(prepared: list[Prepared]) -> list[Prepared]:
    """One batch per device out of many messages (MQTT: a message is often one reading), so
    a group updates each device's state, rollup cells and live stream once. A message with
    rejections stays apart: its telemetry.rejected event is its own."""
    readings: dict[str, list[Reading]] = {}
    origins: dict[str, list[Origin]] = {}
    held: dict[str, list[Quarantined]] = {}
    first: dict[str, Prepared] = {}
    apart: list[Prepared] = []
    for one in prepared:
        if one.rejected:
            apart.append(one)
            continue
        if one.did not in first:
            first[one.did] = one
            readings[one.did], origins[one.did], held[one.did] = [], [], []
        readings[one.did].extend(one.valid)
        origins[one.did].extend(one.origins)
        held[one.did].extend(one.quarantined)
    merged = [
        Prepared(did, one.info, readings[did], [], one.source, origins[did], held[did])
        for did, one in first.items()
    ]
    return merged + apart


@dataclass
class IngestResult:
    accepted: int
    duplicates: int
    rejected: list[Rejection] = field(default_factory=list)
    quarantined: list[Quarantined] = field(default_factory=list)

    def as_record(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "duplicates": self.duplicates,
            "rejected": len(self.rejected),
            "rejections": [
                {"index": r.index, "seq": r.seq, **r.as_detail()} for r in self.rejected
            ],
            "quarantined": len(self.quarantined),
            "quarantines": [
                {"seq": q.reading.seq, "time": q.reading.time.isoformat(), "reason": q.reason}
                for q in self.quarantined
            ],
        }


REASONS_IN_EVENT = 5


def rejection_data(source: str, readings: int, rejected: list[Rejection]) -> dict[str, Any]:
    """A telemetry.rejected event's data: counts and the first few reasons (one event per
    batch or message, never one per reading)."""
    return {
        "source": source,
        "readings": readings,
        "rejected": len(rejected),
        "reasons": [
            {"index": r.index, "seq": r.seq, **r.as_detail()} for r in rejected[:REASONS_IN_EVENT]
        ],
    }


def _refused(source: str, message: str, details: list[FieldProblem]) -> dict[str, Any]:
    """A telemetry.rejected event's data for a batch refused whole (bad envelope)."""
    return {
        "source": source,
        "readings": None,
        "rejected": None,
        "reasons": [{"field": d.field, "error": d.error} for d in details[:REASONS_IN_EVENT]]
        or [{"field": "", "error": message}],
    }


def encode_cursor(moment: datetime, seq: int) -> str:
    return base64.urlsafe_b64encode(f"{moment.isoformat()}|{seq}".encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, int]:
    try:
        moment, _, seq = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        parsed, number = parse_time(moment), int(seq)
        if parsed is None or integer_problem(number) is not None:  # seq is a BIGINT
            raise ValueError
        return parsed, number
    except (ValueError, UnicodeDecodeError):
        raise Invalid(
            "The cursor is not one this API gave out.", [FieldProblem("cursor", "malformed")]
        ) from None


def batch_readings(body: Any, limit: int) -> list[Any]:
    """The readings of a batch's envelope `{"readings": [...]}`, at most `limit` of them."""
    if not isinstance(body, dict) or not isinstance(body.get("readings"), list):
        raise Invalid(
            "Expected {'readings': [{seq, time, values}, ...]}.",
            [FieldProblem("readings", "expected a list of readings")],
        )
    if len(body) > 1:  # "readings" and more
        unknown = sorted(set(body) - {"readings"})
        raise Invalid(
            "The batch has unknown fields.", [FieldProblem(n, "unknown field") for n in unknown]
        )
    readings: list[Any] = body["readings"]
    if not readings:
        raise Invalid("The batch is empty.", [FieldProblem("readings", "at least one")])
    if len(readings) > limit:
        raise TooLarge(
            f"A batch holds at most {limit} readings "
            f"({setting_name('telemetry', 'batch_size')}); this one has {len(readings)}.",
            [FieldProblem("readings", f"at most {limit}")],
        )
    return readings


def by_clock(
    valid: list[Reading], info: TwinInfo, received: datetime, settings: TelemetrySettings
) -> tuple[list[Reading], list[tuple[Reading, str]]]:
    """The readings whose time can be trusted, and the others with their reasons
    (mrv.telemetry_schema.split_by_clock under the deployment's skew settings)."""
    past = settings.past_skew_days
    return split_by_clock(
        valid,
        received,
        info.enrolled,
        timedelta(seconds=settings.future_skew_seconds),
        timedelta(days=past) if past > 0 else None,
    )


def online(last: datetime | None, offline_after_seconds: float) -> bool:
    """Whether a device whose last reading is `last` counts as online now."""
    if last is None:
        return False
    return (datetime.now(UTC) - last).total_seconds() < offline_after_seconds


class TelemetryService:
    def __init__(
        self,
        store: TelemetryStore,
        settings: TelemetrySettings,
        protocols: ProtocolService,
        domains: DomainService,
        limiter: RateLimiter,
        live: LiveHub | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self._protocols = protocols
        self._domains = domains
        self._limiter = limiter
        self.live = live if live is not None else LiveHub()
        self._info: dict[str, TwinInfo] = {}
        self._scoped: dict[str, set[str]] = {}  # a scope: the cached twins whose scopes name it
        self._schemas: dict[str, tuple[Any, TelemetrySchema]] = {}  # protocol: (view, parsed)
        self._locks: dict[str, asyncio.Lock] = {}
        self.rejections: deque[dict[str, Any]] = deque(maxlen=500)
        self.counters: dict[str, int] = {
            "accepted": 0,
            "duplicates": 0,
            "rejected": 0,
            "quarantined": 0,
        }

    def collector(self) -> Collector:
        """Prometheus counters of this process's ingestion: readings accepted, duplicates,
        rejected and quarantined (untrustworthy time), by outcome."""
        counters = self.counters

        class TelemetryMetrics(Collector):
            def collect(self) -> Iterator[Metric]:
                family = CounterMetricFamily(
                    "twinhub_telemetry_readings",
                    "Readings received by this process, by outcome.",
                    labels=["outcome"],
                )
                for outcome, value in counters.items():
                    family.add_metric([outcome], value)
                yield family

        return TelemetryMetrics()

    # -- ingestion -----------------------------------------------------------------------
    async def ingest(
        self,
        did: str,
        credential: DeviceCredential,
        body: Any,
        source: str = "http",
        arrival: Arrival | None = None,
    ) -> IngestResult:
        """Check and store a batch `{"readings": [...]}` sent by `credential`'s device."""
        prepared = await self.prepare(did, credential, body, source, arrival=arrival)
        return (await self.commit([prepared]))[0]

    async def prepare(
        self,
        did: str,
        credential: DeviceCredential,
        body: Any,
        source: str,
        admitted: bool = False,
        arrival: Arrival | None = None,
    ) -> Prepared:
        """Authorise, rate-limit (unless `admitted` counted it already) and check a batch;
        raise a ServiceError when none of it can be stored (the reasons are listed).
        `arrival`: the bytes as received and their signatures (None: unsigned HTTP)."""
        if credential.domain != did:
            self.reject(source, did, "a token of another device")
            raise Forbidden("This device token writes only its own twin's telemetry.")
        retry_after = None if admitted else await self._limiter.hit(did)
        if retry_after is not None:
            self.reject(source, did, "rate limited")
            raise Throttled(retry_after)
        return await self._checked(did, await self._twin(did), body, source, arrival)

    async def prepare_many(
        self,
        did: str,
        credential: DeviceCredential,
        bodies: list[Any],
        source: str,
        arrivals: list[Arrival] | None = None,
    ) -> list[Prepared | ServiceError]:
        """`prepare` for several messages of one device at once (MQTT: a group's messages
        of one device): authorised once, rate-limited in one hit, the twin looked up once,
        all their readings checked in one pass; each message is still kept or refused alone
        (its ServiceError in its place). A refusal of them all (another device's token, a
        deactivated twin) is raised."""
        if credential.domain != did:
            for _ in bodies:
                self.reject(source, did, "a token of another device")
            raise Forbidden("This device token writes only its own twin's telemetry.")
        each = arrivals or [None] * len(bodies)
        results: list[Prepared | ServiceError] = []
        if not await self.admit(did, len(bodies)):  # over the limit: each counted on its own
            for body, arrival in zip(bodies, each, strict=True):
                try:
                    one = await self.prepare(did, credential, body, source, False, arrival)
                    results.append(one)
                except ServiceError as error:
                    results.append(error)
            return results
        info = await self._twin(did)
        received = datetime.now(UTC)
        places: list[Prepared | ServiceError | None] = []  # each body's, in order
        opened: list[tuple[int, list[Any], Origin]] = []  # (its place, readings, origin)
        for body, arrival in zip(bodies, each, strict=True):
            try:  # _opened's work, without a coroutine per message
                raw = batch_readings(body, self.settings.batch_size)
                origin = self._origin(did, info, body, source, arrival, received)
            except (Invalid, TooLarge, BadSignature) as error:
                await self._record_rejection(did, _refused(source, error.message, error.details))
                places.append(error)
                continue
            opened.append((len(places), raw, origin))
            places.append(None)
        # Every message's readings checked in one pass (a message is often one reading),
        # then each message's share of the verdicts taken back by position.
        items = [item for _, raw, _ in opened for item in raw]
        valid, rejected = check_readings(items, info.schema, _NO_LATER_THAN)
        if not rejected and not by_clock(valid, info, received, self.settings)[1]:
            # The common case, every reading valid and its time trusted (the clock rule
            # judges each reading alone, so none of a message's is held either): each
            # message is what _sorted would make of it, made here without its steps.
            start = 0
            for place, raw, origin in opened:
                count = len(raw)
                kept = valid[start : start + count]
                places[place] = Prepared(did, info, kept, [], source, [origin] * count, [])
                start += count
            return [one for one in places if one is not None]
        by_index: dict[int, Rejection] = {r.index: r for r in rejected}
        start = taken = 0
        for place, raw, origin in opened:
            mine: list[Rejection] = []
            count = len(raw)
            if by_index:
                for index in range(start, start + count):
                    rejection = by_index.get(index)
                    if rejection is not None:
                        mine.append(replace(rejection, index=index - start))
            kept = valid[taken : taken + count - len(mine)]
            taken += len(kept)
            start += count
            try:
                places[place] = await self._sorted(
                    did, info, count, kept, mine, source, origin, received
                )
            except ServiceError as error:
                places[place] = error
        return [one for one in places if one is not None]  # every place is filled

    async def _checked(
        self, did: str, info: TwinInfo, body: Any, source: str, arrival: Arrival | None
    ) -> Prepared:
        """A batch's envelope, signature and readings checked: the valid readings with
        their origin, those whose time cannot be trusted quarantined with their reason, the
        rest rejected; a ServiceError (recorded) when none of it can be stored."""
        received = datetime.now(UTC)
        raw, origin = await self._opened(did, info, body, source, arrival, received)
        valid, rejected = check_readings(raw, info.schema, _NO_LATER_THAN)
        return await self._sorted(did, info, len(raw), valid, rejected, source, origin, received)

    async def _opened(
        self,
        did: str,
        info: TwinInfo,
        body: Any,
        source: str,
        arrival: Arrival | None,
        received: datetime,
    ) -> tuple[list[Any], Origin]:
        """A batch's readings as sent and their origin, once its envelope and signature
        hold; a refusal is recorded and raised."""
        try:
            readings = batch_readings(body, self.settings.batch_size)
            return readings, self._origin(did, info, body, source, arrival, received)
        except (Invalid, TooLarge, BadSignature) as error:
            await self._record_rejection(did, _refused(source, error.message, error.details))
            raise

    async def _sorted(
        self,
        did: str,
        info: TwinInfo,
        sent: int,
        valid: list[Reading],
        rejected: list[Rejection],
        source: str,
        origin: Origin,
        received: datetime,
    ) -> Prepared:
        """A batch's checked readings (`sent` of them) as Prepared: the rejections counted,
        the valid ones whose time cannot be trusted quarantined; a ServiceError (recorded)
        when none of them can be stored."""
        for rejection in rejected[:20]:
            self.reject(source, did, f"{rejection.as_detail()['field']}: {rejection.error}")
        self.counters["rejected"] += len(rejected)
        if not valid:
            await self._record_rejection(did, rejection_data(source, sent, rejected))
            raise Invalid(
                "No reading of the batch is valid.",
                [FieldProblem(r.as_detail()["field"], r.error) for r in rejected],
            )
        kept, held = by_clock(valid, info, received, self.settings)
        for reading, reason in held[:20]:
            self.reject(source, did, f"seq {reading.seq} quarantined: {reason}")
        return Prepared(
            did,
            info,
            kept,
            rejected,
            source,
            [origin] * len(kept),
            [Quarantined(reading, reason, origin, source) for reading, reason in held],
        )

    def _origin(
        self,
        did: str,
        info: TwinInfo,
        body: Any,
        source: str,
        arrival: Arrival | None,
        received: datetime,
    ) -> Origin:
        """Where the batch's readings come from; the batch as it arrived and its signatures
        when it came signed. A device with an enrolled key signs every batch (Ed25519 over
        the batch's JCS canonical form, security/device_signatures.py): a batch it did not
        sign, or whose signature does not verify, is refused whole."""
        if arrival is None:
            return Origin(received)
        signatures: list[dict[str, Any]] = []
        if arrival.hmac is not None:
            signatures.append({"type": HMAC_SCHEME, **arrival.hmac})
        where = "Device-Signature" if source == "http" else "device-signature"
        key = info.device_key
        if key is None and arrival.device_signature is not None:
            self.reject(source, did, "signed, but no key is enrolled")
            raise Invalid(
                f"{did} has no enrolled device key: its batches cannot be signed.",
                [FieldProblem(where, "no device key is enrolled for this twin")],
            )
        if key is not None:
            if arrival.device_signature is None:
                self.reject(source, did, "unsigned, but the device has a key")
                raise BadSignature(
                    f"{did} has an enrolled device key ({key}): every batch must carry its "
                    f"Ed25519 signature in {where}.",
                    [FieldProblem(where, "required: the device has an enrolled key")],
                )
            if not verify_batch(key, body, arrival.device_signature):
                self.reject(source, did, "bad device signature")
                raise BadSignature(
                    f"The batch's signature does not verify against {did}'s device key "
                    f"{key} (signed bytes: the batch's RFC 8785 canonical JSON).",
                    [FieldProblem(where, "does not verify")],
                )
            signatures.append({"type": SCHEME, "publicKey": key, "value": arrival.device_signature})
        if not signatures:
            return Origin(received)
        return Origin(received, arrival.payload.decode("utf-8", "replace"), signatures)

    async def admit(self, did: str, count: int) -> bool:
        """Whether `count` more messages of `did` are within its rate limit, counted in one
        hit (MQTT handles a device's messages of a group together); when not, nothing is
        counted and each message is then limited on its own."""
        return await self._limiter.hit(did, count) is None

    async def commit(self, prepared: list[Prepared]) -> list[IngestResult]:
        """Store prepared batches in one transaction; database errors propagate (the caller
        retries: nothing is half-stored)."""
        dids = sorted({p.did for p in prepared})
        if len(self._locks) > 100_000:
            self._locks = {}
        locks = [self._locks.setdefault(did, asyncio.Lock()) for did in dids]
        for lock in locks:
            await lock.acquire()
        try:
            stored = await self.store.store_many(
                [
                    Batch(
                        p.did,
                        p.valid,
                        p.info.schema.numeric,
                        p.info.schema.meter,
                        p.info.scopes,
                        p.info.schema.counted,
                        rejection_data(p.source, len(p.valid) + len(p.rejected), p.rejected)
                        if p.rejected
                        else None,
                        p.origins,
                        p.quarantined,
                    )
                    for p in prepared
                ]
            )
        finally:
            for lock in locks:
                lock.release()
        results = []
        for p, batch in zip(prepared, stored, strict=True):
            self.counters["accepted"] += len(batch.inserted)
            self.counters["duplicates"] += batch.duplicates
            self.counters["quarantined"] += len(p.quarantined)
            if batch.inserted:
                self._publish(p.did, p.info, batch.inserted, batch.state, batch.was_online_at)
            results.append(
                IngestResult(len(batch.inserted), batch.duplicates, p.rejected, p.quarantined)
            )
        return results

    async def _record_rejection(self, did: str, data: dict[str, Any]) -> None:
        """The outbox event of a batch refused whole; with the database away the refusal
        still answers (the operators' list keeps it), so a failure here is only logged."""
        try:
            await self.store.record_rejection(did, data)
        except (SQLAlchemyError, OSError) as error:
            log.warning("telemetry.rejected event not written", error=type(error).__name__)

    def reject(self, source: str, did: str, reason: str) -> None:
        """Remember a rejection for the operators' list (most recent first, bounded)."""
        self.rejections.appendleft(
            {"at": datetime.now(UTC).isoformat(), "source": source, "device": did, "reason": reason}
        )

    async def _twin(self, did: str) -> TwinInfo:
        """What ingestion checks a twin's batches against, read in one statement
        (`TelemetryStore.twin_facts`) and kept _INFO_SECONDS."""
        info = self._info.get(did)
        if info is not None and info.expires > time.monotonic():
            return info
        facts = await self.store.twin_facts(did) if is_did(did) else None
        if facts is None:
            raise NotFound(f"No domain {did}.")
        if facts.status != "active":
            raise Conflict(f"{did} is deactivated; it takes no telemetry.")
        schema = await self._schema(facts.class_did)
        scopes: list[str] = []
        for _, target in facts.edges:
            if target not in scopes:
                scopes.append(target)
        for scope in list(scopes):  # a project's organisation counts its assets too
            for _, target in facts.parent_edges.get(scope, ()):
                if target not in scopes:
                    scopes.append(target)
        info = TwinInfo(
            schema, scopes, time.monotonic() + _INFO_SECONDS, facts.valid_from, facts.device_key
        )
        if len(self._info) > 100_000:
            self._info.clear()
            self._scoped.clear()
        self._info[did] = info
        for scope in scopes:
            self._scoped.setdefault(scope, set()).add(did)
        return info

    async def _schema(self, protocol_did: str) -> TelemetrySchema:
        """A protocol's telemetry schema, parsed once per protocol view (protocols never
        change; a new view is parsed again)."""
        protocol = await self._protocols.get(protocol_did)
        kept = self._schemas.get(protocol_did)
        if kept is not None and kept[0] is protocol:
            return kept[1]
        declaration = protocol.effective_telemetry
        if not declaration:
            raise Conflict(f"The protocol {protocol.did} declares no telemetry.")
        schema = parse_schema(declaration)
        self._schemas[protocol_did] = (protocol, schema)
        return schema

    def forget(self, did: str) -> None:
        """Drop what this process cached of a twin, and of the twins whose scopes it is: its
        device key changed here, or the bus told of a committed domain.updated or
        domain.deactivated of it (platform.HANDLERS). Other processes see the change within
        _INFO_SECONDS, or at once when their own sequencer numbers the event."""
        self._info.pop(did, None)
        for dependent in self._scoped.pop(did, ()):
            self._info.pop(dependent, None)

    def _publish(
        self,
        did: str,
        info: TwinInfo,
        inserted: list[Reading],
        state: dict[str, Any],
        was: datetime | None,
    ) -> None:
        topics = [did, *info.scopes]
        newest = max(inserted, key=READING_ORDER)
        self.live.publish(
            topics,
            {
                "event": "readings",
                "device": did,
                "count": len(inserted),
                "latest": {"seq": newest.seq, "time": newest.time.isoformat(), **newest.values},
            },
        )
        after = self.settings.offline_after_seconds
        if not online(was, after) and online(state["lastTime"], after):
            self.live.publish(topics, {"event": "state", "device": did, "online": True})

    # -- reads ---------------------------------------------------------------------------
    async def state(self, did: str) -> dict[str, Any]:
        """Last seen, online or offline, latest value of each field, meter total."""
        record = await self._domains.get(did)  # NotFound for an unknown twin
        row = await self.store.device(did)
        meter = None
        try:
            protocol = await self._protocols.get(record["class"])
            if protocol.effective_telemetry:
                meter = parse_schema(protocol.effective_telemetry).meter
        except ServiceError:
            pass
        last = row.last_time if row else None
        return {
            "did": did,
            "lastSeen": last.isoformat() if last else None,
            "online": online(last, self.settings.offline_after_seconds),
            "offlineAfterSeconds": self.settings.offline_after_seconds,
            "lastSeq": row.last_seq if row else None,
            "latest": dict(row.latest) if row else {},
            "meterField": meter,
            "meterTotal": row.meter if row else None,
            "readings": row.readings if row else 0,
        }

    async def history(
        self,
        did: str,
        start: datetime | None,
        end: datetime | None,
        cursor: str | None,
        limit: int,
    ) -> dict[str, Any]:
        """A page of a twin's readings (the readings export): each with its time, receipt
        time, seq, values and receipt id; `receipts` holds the signed batches or messages
        the page's readings came in (bytes as received, signatures, what checks each)."""
        await self._domains.get(did)
        after = decode_cursor(cursor) if cursor else None
        rows = await self.store.history_rows(did, start, end, after, limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        next_cursor = encode_cursor(rows[-1][1], rows[-1][0]) if more and rows else None
        wanted = {row[4] for row in rows if row[4] is not None}
        receipts: dict[str, Any] = {}
        if wanted:
            async with self.store.sessions() as session:
                receipts = await receipts_by_id(session, wanted)
        return {
            "items": [reading_record(*row) for row in rows],
            "receipts": receipts,
            "nextCursor": next_cursor,
        }

    async def quarantined(self, did: str, limit: int) -> dict[str, Any]:
        """The twin's quarantined readings, newest receipt first, with their reasons."""
        await self._domains.get(did)
        async with self.store.sessions() as session:
            rows = await session.scalars(
                select(TelemetryQuarantine)
                .where(TelemetryQuarantine.device_did == did)
                .order_by(TelemetryQuarantine.received_at.desc(), TelemetryQuarantine.id.desc())
                .limit(limit)
            )
            return {"items": [quarantine_record(row) for row in rows]}

    async def aggregates(
        self, did: str, interval: str, start: datetime | None, end: datetime | None
    ) -> dict[str, Any]:
        """count/sum/min/max/mean per field and bucket, from the rollups (a device's own, or
        a project's/organisation's over its assets)."""
        if interval not in INTERVALS:
            raise Invalid(
                "Unknown interval.", [FieldProblem("interval", f"one of {', '.join(INTERVALS)}")]
            )
        await self._domains.get(did)
        cells = await self.store.aggregates(did, interval, start, end)
        buckets = []
        for bucket, fields in sorted(cells.items()):
            buckets.append(
                {
                    "start": bucket.isoformat(),
                    "fields": {
                        name: {**cell, "mean": cell["sum"] / cell["count"]}
                        for name, cell in fields.items()
                    },
                }
            )
        return {"did": did, "interval": interval, "buckets": buckets}

    async def prune(self) -> int:
        days = self.settings.retention_days
        if days <= 0:
            return 0
        return await self.store.prune(datetime.now(UTC) - timedelta(days=days))

    async def run_offline_watch(self) -> None:
        """Forever: publish `state` events (online false) for twins that just went quiet, so
        the event streams show a device dropping off, not only coming back."""
        offline_after = timedelta(seconds=self.settings.offline_after_seconds)
        interval = min(max(offline_after.total_seconds() / 4, 0.2), 30.0)
        checked = datetime.now(UTC) - offline_after
        while True:
            await asyncio.sleep(interval)
            cutoff = datetime.now(UTC) - offline_after
            try:
                quiet = await self.store.went_quiet(checked, cutoff)
            except Exception as error:  # retried next round, never fatal
                log.warning("offline watch failed", error=type(error).__name__)
                continue
            checked = cutoff
            # One process reports each device (the store locks and marks its row); the
            # live hub relays the event to the others' streams when Redis is configured.
            for did in quiet:
                topics = [did, *await self._scopes_of(did)]
                self.live.publish(topics, {"event": "state", "device": did, "online": False})

    async def _scopes_of(self, did: str) -> list[str]:
        """The projects and organisations whose streams a twin's events also go to: as
        cached at its last ingestion here, else looked up (another process may have stored
        its readings); none when the lookup fails."""
        info = self._info.get(did)
        if info is not None:
            return info.scopes
        try:
            return (await self._twin(did)).scopes
        except ServiceError:  # deactivated, or its protocol's telemetry withdrawn
            return []
        except Exception as error:  # the twin's own stream still hears of it
            log.warning("offline twin's projects not found", error=type(error).__name__)
            return []

    async def run_pruner(self) -> None:
        """Forever: drop raw readings past the retention (rollups stay)."""
        while True:
            try:
                removed = await self.prune()
                if removed:
                    log.info("telemetry pruned", removed=removed)
            except Exception as error:
                log.warning("telemetry prune failed", error=type(error).__name__)
            await asyncio.sleep(self.settings.prune_interval_seconds)


def sse_frame(event: dict[str, Any]) -> bytes:
    """One server-sent event."""
    kind = event.get("event", "message")
    return f"event: {kind}\ndata: {json.dumps(event, default=str)}\n\n".encode()
