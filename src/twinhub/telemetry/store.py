"""Readings, rollups and devices' state in the database: one transaction per batch.

A group of batches (one HTTP batch, or many devices' MQTT messages) goes in as one bulk
write on the session's own driver connection: the readings go into a staging table
(PostgreSQL: COPY; SQLite: executemany), the seqs each device has stored already are left
out (so a reading sent twice is stored once even when its time differs; the few left out
come back), and the rest is inserted. The rollups (hour, day, month; per device and
per project/organisation) are summed in Python per batch from the readings inserted
(column-wise over a large batch: telemetry/columns.py, numpy) and upserted once per key per
group (PostgreSQL: the cells as arrays to one statement, which joins them to their scopes
and upserts in key order; SQLite: executemany). The device's live state and its events go
in the same transaction: either all of a group counts or none. rollup_rows is the Python
reference of the same sums (in telemetry/rows.py; the tests compare the two; the benchmark
seeds rollups with it). A process writes one transaction at a time: the callers waiting
meanwhile go in together as one group (store_many), so a project's rollup rows are
upserted once per group.
On SQLite new readings go in with one INSERT OR IGNORE, the staging table kept for batches
that repeat stored seqs.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import chain, repeat
from operator import attrgetter
from typing import Any, TypeVar

from sqlalchemy import and_, bindparam, delete, or_, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.driver import driver_error
from twinhub.db.models import (
    DeviceKey,
    Domain,
    Relationship,
    TelemetryDevice,
    TelemetryQuarantine,
    TelemetryReading,
    TelemetryReceipt,
    TelemetryRollup,
)
from twinhub.events.store import event_row, record_event
from twinhub.kernel.bus import EVENTS_WRITTEN, Bus
from twinhub.kernel.clock import utcnow
from twinhub.logging import get_logger
from twinhub.mrv.rollups import bucket_of
from twinhub.mrv.telemetry_schema import READING_ORDER, Reading
from twinhub.services.day_digests import forget_before
from twinhub.services.evidence import held_ranges, held_reading, held_receipt
from twinhub.telemetry.dialects import TelemetryDialect, telemetry_dialect
from twinhub.telemetry.rows import (
    Batch,
    DeviceState,
    Origin,
    RollupPlan,
    RollupRecord,
    StoredBatch,
    next_month,
)
from twinhub.telemetry.wide import decode

T = TypeVar("T")
log = get_logger(__name__)

SCOPE_ROLES = ("project", "owner", "operator")  # a twin's edges to what its readings feed
PARENT_SCOPE_ROLES = ("implementedBy", "owner")  # a scope's own (a project's organisation)


@dataclass(frozen=True, slots=True)
class TwinFacts:
    """A twin's row as ingestion reads it (`TelemetryStore.twin_facts`)."""

    status: str
    class_did: str
    valid_from: datetime | None
    device_key: str | None
    edges: list[tuple[str, str]]  # its scope edges (type, target), sorted
    parent_edges: dict[str, list[tuple[str, str]]]  # each target's own scope edges, sorted


def _twin_facts_statement() -> Any:
    edge = Relationship.__table__.alias("edge")
    parent = Relationship.__table__.alias("parent_edge")
    domain = Domain.__table__
    key = (
        select(DeviceKey.public_key)
        .where(DeviceKey.domain_did == domain.c.did, DeviceKey.revoked_at.is_(None))
        .scalar_subquery()
    )
    return (
        select(
            domain.c.status,
            domain.c.class_did,
            domain.c.valid_from,
            key,
            edge.c.type,
            edge.c.target_did,
            parent.c.type,
            parent.c.target_did,
        )
        .select_from(
            domain.outerjoin(
                edge, and_(edge.c.source_did == domain.c.did, edge.c.type.in_(SCOPE_ROLES))
            ).outerjoin(
                parent,
                and_(
                    parent.c.source_did == edge.c.target_did,
                    parent.c.type.in_(PARENT_SCOPE_ROLES),
                ),
            )
        )
        .where(domain.c.did == bindparam("did"))
    )


_TWIN_FACTS = _twin_facts_statement()
READINGS = TelemetryReading.__table__
ROLLUPS = TelemetryRollup.__table__
RECEIPTS = TelemetryReceipt.__table__
QUARANTINE = TelemetryQuarantine.__table__
_time = attrgetter("time")
_VALUES = attrgetter("values")
_SEQ = attrgetter("seq")
_RECEIVED_AT = attrgetter("received_at")  # an Origin's


GROUP_READINGS = 20_000  # the most readings one group commit writes


class _Waiting:
    """A caller's batches waiting for SQLite's writer, and the future of their results."""

    __slots__ = ("batches", "done", "readings")

    def __init__(self, batches: list[Batch]) -> None:
        self.batches = batches
        self.readings = sum(len(batch.readings) for batch in batches)
        self.done: asyncio.Future[list[StoredBatch]] = asyncio.get_running_loop().create_future()


def _consume(future: asyncio.Future[Any]) -> None:
    """Read a settled future's exception, so a caller that left is not logged as an error
    nobody retrieved."""
    if not future.cancelled():
        future.exception()


class TelemetryStore:
    """Also writes the devices' events (device.online, device.offline, telemetry.rejected)
    into the event outbox, in the transaction of the change that causes them."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        offline_after_seconds: float = 3600.0,
        bus: Bus | None = None,
    ) -> None:
        self._sessions = sessions
        self.sessions = sessions  # for reads beside the store's (the readings export)
        # Told when a raw-driver write commits events (the sequencer numbers them); without
        # one, they wait for the sequencer's next pass.
        self._bus = bus
        self.offline_after = timedelta(seconds=offline_after_seconds)
        self._device_ids: dict[str, int] = {}
        self._partitions: set[str] = set()
        # What SQLite and PostgreSQL do differently (telemetry/dialects), chosen once.
        self.dialect = telemetry_dialect(sessions)
        # One writing transaction at a time per process; what waits meanwhile goes in with
        # the next one (_Waiting). SQLite has one writer anyway (waiting here rather than in
        # busy_timeout, whose wait would count against the statement deadline); on
        # PostgreSQL, concurrent batches of one project would otherwise queue on the
        # project's rollup rows one transaction after another, and together they upsert
        # those rows once (bench/README.md, "Telemetry", session 10).
        self._writer = asyncio.Lock()
        self._waiting: list[_Waiting] = []
        self.transactions = 0  # write transactions begun (the benchmark reports batches per)
        self._engine = sessions.kw["bind"]
        # Driver connections that have the staging table (it lives as long as each one).
        self._staged: weakref.WeakSet[Any] = weakref.WeakSet()
        # Receipt ids taken from the database and not spent yet (dialect.receipt_id_block).
        self._receipt_ids: list[int] = []

    # -- devices -------------------------------------------------------------------------
    async def device(self, did: str) -> TelemetryDevice | None:
        async with self._sessions() as session:
            return await session.scalar(select(TelemetryDevice).where(TelemetryDevice.did == did))

    async def twin_facts(self, did: str) -> TwinFacts | None:
        """What ingestion needs of a twin, in one statement on one checkout: its status,
        protocol, validFrom, current device key and the edges its readings' scopes come
        from (its project/owner/operator edges, and each such target's implementedBy/owner
        edges). None when there is no such twin."""
        async with self._engine.connect() as connection:
            rows = (await connection.execute(_TWIN_FACTS, {"did": did})).all()
        if not rows:
            return None
        status, class_did, valid_from, key = rows[0][:4]
        edges = sorted({(row[4], row[5]) for row in rows if row[4] is not None})
        parents: dict[str, set[tuple[str, str]]] = {}
        for row in rows:
            if row[6] is not None:
                parents.setdefault(row[5], set()).add((row[6], row[7]))
        return TwinFacts(
            status,
            class_did,
            valid_from,
            key,
            edges,
            {target: sorted(found) for target, found in parents.items()},
        )

    # -- partitions (PostgreSQL) ---------------------------------------------------------
    async def ensure_partitions(self, times: Iterable[datetime]) -> None:
        """Monthly partitions for every month `times` touch, made once per process (none on
        SQLite)."""
        await self.dialect.ensure_partitions(self._sessions, times, self._partitions)

    # -- writes --------------------------------------------------------------------------
    async def store_batch(
        self,
        did: str,
        readings: list[Reading],
        numeric: Sequence[str],
        meter: str | None,
        scopes: Sequence[str],
    ) -> StoredBatch:
        """Insert the new readings, update rollups and state; one transaction."""
        return (await self.store_many([Batch(did, readings, numeric, meter, scopes)]))[0]

    async def store_many(self, batches: list[Batch]) -> list[StoredBatch]:
        """Several devices' batches in ONE transaction (MQTT coalesces messages this way):
        one commit for many readings. Devices are locked in id order (no deadlocks).

        Callers that arrive while a transaction is being written wait for the writer, and
        the first of them to get it writes everything waiting by then as one transaction
        (group commit, on both databases). Each caller still gets its own batches' results; a
        project's rollup rows are then upserted once for the group instead of once per
        request, and there is one commit. A group that fails is written again caller by
        caller, so one caller's failure is not another's."""
        waiting = _Waiting(batches)
        self._waiting.append(waiting)
        try:
            async with self._writer:  # the device rows a first reading makes are writes too
                if not waiting.done.done():
                    await self._write_waiting()
        except asyncio.CancelledError:
            if waiting in self._waiting:  # not taken: nothing of it is written
                self._waiting.remove(waiting)
            else:  # being written or written: its outcome is nobody's to read now
                waiting.done.add_done_callback(_consume)
            raise
        return waiting.done.result()

    async def _write_waiting(self) -> None:
        """Write the waiting callers' batches (up to GROUP_READINGS readings, in arrival
        order) in one transaction and settle each caller's future. Interrupted (the writing
        caller cancelled), what it took and did not settle goes back to the head of the
        queue for the next caller to get the writer."""
        taken: list[_Waiting] = []
        readings = 0
        while self._waiting and (
            not taken or readings + self._waiting[0].readings <= GROUP_READINGS
        ):
            one = self._waiting.pop(0)
            taken.append(one)
            readings += one.readings
        try:
            if len(taken) > 1:
                try:
                    results = await self._store_many([b for one in taken for b in one.batches])
                except Exception as error:  # each caller's batches again alone, below
                    log.warning(
                        "telemetry group failed; writing it caller by caller",
                        error=type(error).__name__,
                    )
                else:
                    start = 0
                    for one in taken:
                        one.done.set_result(results[start : start + len(one.batches)])
                        start += len(one.batches)
                    return
            for one in taken:
                try:
                    one.done.set_result(await self._store_many(one.batches))
                except Exception as error:
                    one.done.set_exception(error)
        finally:
            self._waiting[:0] = [one for one in taken if not one.done.done()]

    async def _store_many(self, batches: list[Batch]) -> list[StoredBatch]:
        self.transactions += 1
        await self.ensure_partitions(t for batch in batches for t in _months_of(batch.readings))
        events: list[dict[str, Any]] = []
        async with self._engine.connect() as connection:
            raw = await connection.get_raw_connection()
            driver = raw.driver_connection
            try:
                async with self.dialect.transaction(driver):
                    results, ids = await self._write(driver, batches, events)
            except Exception as error:
                raise driver_error(connection.dialect, raw, error) from error
            # Committed, so the staging table exists on this connection (one made in a
            # transaction that rolled back would not).
            self._staged.add(driver)
        if len(self._device_ids) > 1_000_000:
            self._device_ids.clear()
        self._device_ids.update(ids)  # committed: these rows exist
        if events and self._bus is not None:
            self._bus.signal(EVENTS_WRITTEN)
        return [results[i] for i in range(len(batches))]

    async def _write(
        self, driver: Any, batches: list[Batch], events: list[dict[str, Any]]
    ) -> tuple[dict[int, StoredBatch], dict[str, int]]:
        """The group's writes on the driver's connection, inside its transaction: device
        rows made if new and locked (id order), readings, device state, events, rollups.
        `events` gets the events rows written (the caller wakes the sequencer after the
        commit). The results by batch, and each device's id."""
        rows = await self._lock_devices(driver, sorted({batch.did for batch in batches}))
        ids = [rows[batch.did].id for batch in batches]
        order = sorted(range(len(batches)), key=lambda i: ids[i])
        rows_by_id = {row.id: row for row in rows.values()}
        # A seq the group repeats is a duplicate here; one the device used before, in
        # the INSERT (it skips them and returns what it stored).
        used: dict[int, set[int]] = {}
        fresh: dict[int, list[Reading]] = {}
        origins: dict[int, list[Origin]] = {}
        now = utcnow()
        for i in order:
            readings = batches[i].readings
            batch_origins = batches[i].origins or [Origin(now)] * len(readings)
            seqs = set(map(_SEQ, readings))
            if ids[i] not in used and len(seqs) == len(readings) == len(batch_origins):
                # The device's first batch of the group, no seq twice (the usual case):
                # every reading is fresh, without a step per reading.
                used[ids[i]] = seqs
                fresh[i], origins[i] = list(readings), list(batch_origins)
                continue
            taken = used.setdefault(ids[i], set())
            fresh[i] = []
            origins[i] = []
            for reading, origin in zip(readings, batch_origins, strict=True):
                if reading.seq not in taken:
                    taken.add(reading.seq)
                    fresh[i].append(reading)
                    origins[i].append(origin)
        receipts = await _receipt_ids(self.dialect, driver, batches, origins, self._receipt_ids)
        skipped = await self._insert_readings(
            driver,
            list(  # (device id, reading, receipt time, receipt id), by C-level maps
                chain.from_iterable(
                    zip(
                        repeat(ids[i]),
                        fresh[i],
                        map(_RECEIVED_AT, origins[i]),
                        map(receipts.get, map(id, origins[i])),
                    )
                    for i in order
                )
            ),
        )
        plan = RollupPlan()
        planned: set[int] = set()
        changed: dict[int, DeviceState] = {}
        results: dict[int, StoredBatch] = {}
        for i in order:
            batch, row, device = batches[i], rows_by_id[ids[i]], ids[i]
            was = row.last_time
            inserted = fresh[i]
            if skipped:
                inserted = [r for r in inserted if (device, r.seq) not in skipped]
            if inserted:
                online = self._online_event(batch.did, was, inserted)
                if online is not None:
                    events.append(online)
                plan.stored_until.setdefault(batch.did, was)  # before the group's first
                self.dialect.plan(plan, planned, device, batch, inserted)
                self._advance_state(row, inserted, batch.meter)
                changed[device] = row
            state = {
                "lastTime": row.last_time,
                "lastSeq": row.last_seq,
                "latest": dict(row.latest),
                "meter": row.meter,
                "readings": row.readings,
            }
            results[i] = StoredBatch(inserted, len(batch.readings) - len(inserted), state, was)
            if batch.rejection is not None:
                events.append(
                    event_row("telemetry.rejected", batch.did, batch.did, batch.rejection)
                )
        await self._save_devices(driver, [changed[d] for d in sorted(changed)])
        await self._insert_events(driver, events)
        await self._roll_up(driver, plan)
        await _keep_receipts(self.dialect, driver, batches, ids, results, receipts)
        return results, {did: row.id for did, row in rows.items()}

    async def _lock_devices(self, driver: Any, dids: list[str]) -> dict[str, DeviceState]:
        """The devices' rows by DID, made on a device's first reading and locked for this
        transaction (PostgreSQL: FOR UPDATE in id order; SQLite: the transaction holds the
        database's write lock already). New rows go in in DID order, so concurrent groups
        wait for each other's in one order too."""
        new = [did for did in dids if did not in self._device_ids]
        return await self.dialect.lock_devices(driver, new, dids, utcnow())

    async def _save_devices(self, driver: Any, states: list[DeviceState]) -> None:
        """The advanced state of the devices that stored readings, in id order."""
        if not states:
            return
        await self.dialect.save_devices(driver, states, utcnow())

    async def _insert_events(self, driver: Any, rows: list[dict[str, Any]]) -> None:
        """Outbox rows (events/store.py's event_row), in this transaction."""
        if not rows:
            return
        await self.dialect.insert_events(driver, rows)

    def online(self, last: datetime | None, now: datetime | None = None) -> bool:
        """Whether a device whose newest reading is at `last` counts as online."""
        if last is None:
            return False
        return (now or datetime.now(UTC)) - last < self.offline_after

    def _online_event(
        self, did: str, was: datetime | None, inserted: list[Reading]
    ) -> dict[str, Any] | None:
        """device.online's row when these readings bring an offline (or new) device
        online."""
        newest = max(map(_time, inserted))
        if self.online(was) or not self.online(newest):
            return None
        return event_row(
            "device.online",
            did,
            did,
            {"device": did, "lastSeen": newest.isoformat(), "offlineSince": _iso(was)},
        )

    async def record_rejection(self, did: str, data: dict[str, Any]) -> None:
        """telemetry.rejected for a batch none of which could be stored (its own transaction:
        there is no telemetry write to join)."""
        async with self._sessions.begin() as session:
            record_event(session, "telemetry.rejected", did, did, data)

    async def _insert_readings(
        self, driver: Any, items: list[tuple[int, Reading, datetime, int | None]]
    ) -> set[tuple[int, int]]:
        """Insert (device id, reading) pairs whose seqs are new within the group; the
        (device id, seq) pairs NOT stored because the device has stored that seq before
        (usually none, so nothing per reading comes back). Each goes with its receipt time
        and its receipt's id (None: unsigned). PostgreSQL: the readings are COPYed into
        a staging table, then one statement returns the device's used seqs (whatever their
        time: the key holds the time too, for the partitions) and inserts the rest.
        SQLite: one INSERT OR IGNORE, the staging table only for batches that repeat
        stored seqs."""
        return await self.dialect.insert_readings(driver, items, driver in self._staged)

    async def _roll_up(self, driver: Any, plan: RollupPlan) -> None:
        """Add the cells planned from the readings _insert_readings just stored
        (dialect.plan) to the rollups of their devices and scopes, in the caller's
        transaction: one upsert per key of the group. (PostgreSQL summing the staged
        readings' JSON itself cost it more than the cells summed here cost both:
        bench/README.md, "Where a reading's CPU goes".)"""
        await self.dialect.roll_up(driver, plan)

    async def add_rollups(self, session: AsyncSession, records: list[RollupRecord]) -> None:
        """Add rollup increments computed elsewhere (one record per key, in key order:
        concurrent transactions lock rows in one order), in the session's transaction; the
        benchmark seeds rollups this way."""
        if not records:
            return

        async def upsert(driver: Any) -> None:
            await self.dialect.add_rollups(driver, records)

        await self._raw(session, upsert)

    async def _raw(self, session: AsyncSession, work: Callable[[Any], Awaitable[T]]) -> T:
        """`work(driver connection)` (asyncpg or aiosqlite) in the session's transaction.
        The driver's errors come out as SQLAlchemy's, as from any other statement, so the
        API answers 503 and MQTT retries them alike. The dialect first makes sure the
        work joins the session's transaction (`join`: asyncpg's would otherwise run it in
        autocommit)."""
        connection = await session.connection()
        raw = await connection.get_raw_connection()
        driver = raw.driver_connection
        await self.dialect.join(connection, driver)
        try:
            return await work(driver)
        except Exception as error:
            raise driver_error(connection.dialect, raw, error) from error

    @staticmethod
    def _advance_state(row: DeviceState, inserted: list[Reading], meter: str | None) -> None:
        """Latest value of each field by reading time (a late batch changes only what is
        newer than what the twin holds). Each field's newest reading in the batch, the last
        of equals, is the batch's newest when that has the field (a batch's readings
        usually all have the same fields): one C-level pass for the batch, not a Python
        step per reading and field."""
        newest = max(reversed(inserted), key=READING_ORDER)  # of equals, the last
        newest_of: dict[str, Reading] = {  # in the order the fields first appear
            name: newest
            if name in newest.values
            else max((r for r in reversed(inserted) if name in r.values), key=READING_ORDER)
            for name in dict.fromkeys(chain.from_iterable(map(_VALUES, inserted)))
        }
        latest: dict[str, Any] = dict(row.latest)
        for name, reading in newest_of.items():
            stamp = reading.time.isoformat()
            held = latest.get(name)
            if held is None or (held["time"], held["seq"]) <= (stamp, reading.seq):
                latest[name] = {"value": reading.values[name], "time": stamp, "seq": reading.seq}
        if row.last_time is None or (newest.time, newest.seq) >= (row.last_time, row.last_seq or 0):
            row.last_time = newest.time
            row.last_seq = newest.seq
        row.latest = latest
        if meter and meter in latest:
            row.meter = float(latest[meter]["value"])
        row.readings = (row.readings or 0) + len(inserted)

    # -- reads ---------------------------------------------------------------------------
    async def history(
        self,
        did: str,
        start: datetime | None,
        end: datetime | None,
        after: tuple[datetime, int] | None,
        limit: int,
    ) -> list[Reading]:
        """Up to `limit` readings in time order, after the cursor position."""
        rows = await self.history_rows(did, start, end, after, limit)
        return [Reading(seq, moment, values) for seq, moment, values, _, _ in rows]

    async def history_rows(
        self,
        did: str,
        start: datetime | None,
        end: datetime | None,
        after: tuple[datetime, int] | None,
        limit: int,
    ) -> list[tuple[int, datetime, dict[str, Any], datetime | None, int | None]]:
        """`history` with each reading's receipt time and receipt id (the export)."""
        device_id = self._device_ids.get(did)
        async with self._sessions() as session:
            if device_id is None:
                device_id = await session.scalar(
                    select(TelemetryDevice.id).where(TelemetryDevice.did == did)
                )
                if device_id is None:
                    return []
                self._device_ids[did] = device_id
            conditions = [READINGS.c.device_id == device_id]
            if start is not None:
                conditions.append(READINGS.c.time >= start)
            if end is not None:
                conditions.append(READINGS.c.time < end)
            if after is not None:
                moment, seq = after
                conditions.append(
                    or_(
                        READINGS.c.time > moment,
                        and_(READINGS.c.time == moment, READINGS.c.seq > seq),
                    )
                )
            rows = await session.execute(
                select(
                    READINGS.c.seq,
                    READINGS.c.time,
                    READINGS.c["values"],
                    READINGS.c.received_at,
                    READINGS.c.receipt_id,
                )
                .where(*conditions)
                .order_by(READINGS.c.time, READINGS.c.seq)
                .limit(limit)
            )
            return [tuple(row) for row in rows]  # type: ignore[misc]

    async def aggregates(
        self, scope: str, interval: str, start: datetime | None, end: datetime | None
    ) -> dict[datetime, dict[str, dict[str, float]]]:
        """{bucket: {field: {count, sum, min, max}}} from the rollups alone."""
        conditions = [ROLLUPS.c.scope == scope, ROLLUPS.c.interval == interval]
        if start is not None:
            conditions.append(ROLLUPS.c.bucket >= bucket_of(start, interval))
        if end is not None:
            conditions.append(ROLLUPS.c.bucket < end)
        out: dict[datetime, dict[str, dict[str, float]]] = defaultdict(dict)
        async with self._sessions() as session:
            rows = await session.execute(
                select(ROLLUPS.c.bucket, ROLLUPS.c.fields, ROLLUPS.c.cells)
                .where(*conditions)
                .order_by(ROLLUPS.c.bucket)
            )
            for bucket, fields, cells in rows:
                for name, (count, total, low, high) in decode(fields, cells).items():
                    out[bucket][name] = {"count": count, "sum": total, "min": low, "max": high}
        return out

    async def went_quiet(self, after: datetime, upto: datetime) -> list[str]:
        """Devices whose newest reading is in (after, upto] that this call reports: those
        that just went offline, less any that another call (another process's watch, whose
        window overlaps) reported already, so the live streams hear of each once.

        Each gets one device.offline event, in this transaction. A device's `updated_at`
        marks it reported: ingestion sets it to the time of arrival, the watch to now, so a
        row already reported (by this or another process) has `updated_at` at least
        OFFLINE_AFTER past its last reading; the rows are locked, so two watches never both
        report one device."""
        now = utcnow()
        async with self._sessions.begin() as session:
            rows = list(
                await session.scalars(
                    select(TelemetryDevice)
                    .where(TelemetryDevice.last_time > after, TelemetryDevice.last_time <= upto)
                    .order_by(TelemetryDevice.id)
                    .with_for_update()
                )
            )
            reported: list[str] = []
            for row in rows:
                assert row.last_time is not None
                if row.updated_at >= row.last_time + self.offline_after:
                    continue  # reported already, or never online (a late upload)
                reported.append(row.did)
                row.updated_at = max(now, row.last_time + self.offline_after)
                record_event(
                    session,
                    "device.offline",
                    row.did,
                    row.did,
                    {
                        "device": row.did,
                        "lastSeen": row.last_time.isoformat(),
                        "offlineAfterSeconds": self.offline_after.total_seconds(),
                    },
                )
            return reported

    # -- retention -----------------------------------------------------------------------
    async def prune(self, before: datetime) -> int:
        """Drop raw readings older than `before` (whole partitions on PostgreSQL first),
        except those an evidence hold in force keeps (services/evidence.py): a partition
        holding one stays, and its other readings are deleted row by row. Receipts go with
        the last reading they carry; quarantined readings received before `before` go too.
        The digests kept of the days pruned (services/day_digests.py) go first, the day
        `before` falls in with them: no kept digest outlives a reading behind it."""
        today = utcnow().date()
        async with self._sessions.begin() as session:
            await forget_before(session, before.date() + timedelta(days=1))
        async with self._sessions() as session:
            kept = await held_ranges(session, today)
        dropped = await self.dialect.drop_partitions(self._sessions, before, self._partitions, kept)
        async with self._sessions.begin() as session:
            result = await session.execute(
                delete(READINGS).where(READINGS.c.time < before, ~held_reading(today))
            )
            await session.execute(
                delete(RECEIPTS).where(RECEIPTS.c.last_time < before, ~held_receipt(today))
            )
            await session.execute(delete(QUARANTINE).where(QUARANTINE.c.received_at < before))
        return dropped + (result.rowcount or 0)


async def _receipt_ids(
    dialect: TelemetryDialect,
    driver: Any,
    batches: list[Batch],
    origins: dict[int, list[Origin]],
    kept: list[int],
) -> dict[int, int]:
    """An id for each signed origin (by identity) of the group's new or quarantined
    readings, taken before the readings go in (they name it); from `kept`, the store's
    unspent ids, when the dialect takes them a block at a time."""
    signed: dict[int, Origin] = {}
    for i, batch in enumerate(batches):
        for origin in origins.get(i, ()):
            if origin.payload is not None:
                signed.setdefault(id(origin), origin)
        for held in batch.quarantined:
            if held.origin.payload is not None:
                signed.setdefault(id(held.origin), held.origin)
    if not signed:
        return {}
    count = len(signed)
    block = dialect.receipt_id_block
    if not block:
        numbers = await dialect.receipt_ids(driver, count)
    else:
        if len(kept) < count:
            kept += await dialect.receipt_ids(driver, max(block, count - len(kept)))
        numbers = kept[:count]
        del kept[:count]
    return dict(zip(signed, numbers, strict=True))


async def _keep_receipts(
    dialect: TelemetryDialect,
    driver: Any,
    batches: list[Batch],
    ids: list[int],
    results: dict[int, StoredBatch],
    receipts: dict[int, int],
) -> None:
    """The receipts that some stored or quarantined reading names (a message sent again
    stores none), then the quarantined readings, in this transaction."""
    kept: dict[int, tuple[int, Origin, list[datetime]]] = {}
    quarantined: list[tuple[Any, ...]] = []
    for i, batch in enumerate(batches):
        if receipts and batch.origins:
            inserted = {r.seq for r in results[i].inserted}
            for reading, origin in zip(batch.readings, batch.origins, strict=True):
                number = receipts.get(id(origin))
                if number is not None and reading.seq in inserted:
                    kept.setdefault(number, (ids[i], origin, []))[2].append(reading.time)
        for held in batch.quarantined:
            number = receipts.get(id(held.origin))
            if number is not None:
                kept.setdefault(number, (ids[i], held.origin, []))[2].append(held.reading.time)
            quarantined.append(
                (
                    batch.did,
                    held.reading.seq,
                    held.reading.time,
                    held.origin.received_at,
                    held.reading.values,
                    held.reason,
                    held.source,
                    number,
                )
            )
    if kept:
        await dialect.insert_receipts(
            driver,
            [
                (number, device, o.received_at, min(t), max(t), o.payload, o.signatures)
                for number, (device, o, t) in sorted(kept.items())
            ],
        )
    if quarantined:
        await dialect.insert_quarantine(driver, quarantined)


def _months_of(readings: list[Reading]) -> list[datetime]:
    """A time in each month from the batch's earliest reading to its latest (every
    reading's time when they are more than a year apart), so the partitions are found
    without a Python step per reading; a month in between that has no reading gets its
    (empty) partition a little early."""
    if not readings:
        return []
    first = min(readings, key=_time).time.astimezone(UTC)
    last = max(readings, key=_time).time.astimezone(UTC)
    span = (last.year - first.year) * 12 + last.month - first.month
    if span > 12:
        return [r.time for r in readings]
    month = first.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    months = [month]
    for _ in range(span):
        month = next_month(month)
        months.append(month)
    return months


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None
