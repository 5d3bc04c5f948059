"""Readings, rollups and devices' state in the database: one transaction per batch.

A group of batches (one HTTP batch, or many devices' MQTT messages) goes in as one bulk
write on the session's own driver connection: the readings go into a staging table
(PostgreSQL: COPY; SQLite: executemany), the seqs each device has stored already are
deleted from it (so a reading sent twice is stored once even when its time differs; the
few deleted come back), and the rest is inserted. The staging table then holds exactly the
inserted readings, and on PostgreSQL ONE statement rolls them up (hour, day, month; per
device and per project/organisation: INSERT ... SELECT ... GROUP BY ... ON CONFLICT DO
UPDATE), so no Python work is done per rollup row; SQLite, which runs in this process,
sums cells in Python (cheaper there). The device's live state and its events go in the same
transaction: either all of a group counts or none. rollup_rows is the Python reference of
the same sums (the tests compare the two; the benchmark seeds rollups with it). A process
writes one transaction at a time: the callers waiting meanwhile go in together as one
group (store_many), so a project's rollup rows are upserted once per group. On SQLite new
readings go in with one INSERT OR IGNORE, the staging table kept for batches that repeat
stored seqs.
"""

from __future__ import annotations

import asyncio
import functools
import weakref
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import Any, TypeVar

import orjson
from sqlalchemy import and_, delete, or_, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.driver import driver_error
from twinhub.db.models import TelemetryDevice, TelemetryReading, TelemetryRollup
from twinhub.events.store import event_row, record_event
from twinhub.kernel.bus import EVENTS_WRITTEN, Bus
from twinhub.kernel.clock import utcnow
from twinhub.logging import get_logger
from twinhub.mrv.rollups import bucket_of, counted_field
from twinhub.mrv.telemetry_schema import Reading, dumps

T = TypeVar("T")
log = get_logger(__name__)
READINGS = TelemetryReading.__table__
ROLLUPS = TelemetryRollup.__table__
FIELD_LENGTH = 64  # telemetry_rollups.field
_time = attrgetter("time")


# PostgreSQL bulk writes: staging tables private to the connection, emptied at commit.
_STAGE_READINGS = (
    "CREATE TEMP TABLE IF NOT EXISTS telemetry_stage (device_id integer, seq bigint,"
    ' time timestamptz, "values" jsonb) ON COMMIT DELETE ROWS'
)
# OFFSET 0 keeps the EXISTS a per-row probe of the (device_id, seq) index: turned into a
# semi-join (the staging table has no statistics) it hashed every stored reading instead.
_DROP_STORED = """
DELETE FROM telemetry_stage s
WHERE EXISTS (
    SELECT 1 FROM telemetry_readings r WHERE r.device_id = s.device_id AND r.seq = s.seq
    OFFSET 0
)
RETURNING s.device_id, s.seq
"""
_INSERT_STAGED = """
INSERT INTO telemetry_readings (device_id, seq, time, "values")
SELECT device_id, seq, time, "values" FROM telemetry_stage
ON CONFLICT DO NOTHING
"""
# The rollups of the staged readings (by then exactly the ones inserted), computed by the
# database: $3/$4/$5 name each device's rolled-up fields (numeric, or an enum field counted
# per value); $1/$2/$6 pair each device with its scopes and each scope's rank in Python's
# sort order. Hours are summed from the readings, days from the hours, months from the
# days (few rows past the first step), then per scope; the rows are upserted in key order
# (scope rank, interval, bucket, field: integers and a timestamp decide almost every
# comparison) so concurrent transactions lock rollup rows in one order (no deadlocks).
_ROLL_UP_STAGED = """
INSERT INTO telemetry_rollups AS t (scope, "interval", bucket, field, count, sum, min, max)
WITH v AS (
    SELECT s.device_id, date_trunc('hour', s.time, 'UTC') AS bucket,
           CASE WHEN f.counted THEN f.name || '=' || (s."values" ->> f.name)
                ELSE f.name END AS field,
           CASE WHEN f.counted THEN 1.0::float8
                ELSE (s."values" ->> f.name)::float8 END AS value
    FROM telemetry_stage s
    JOIN unnest($3::integer[], $4::text[], $5::boolean[]) AS f(device_id, name, counted)
      ON f.device_id = s.device_id
    WHERE jsonb_typeof(s."values" -> f.name)
          = CASE WHEN f.counted THEN 'string' ELSE 'number' END
), h AS (
    SELECT device_id, field, bucket, count(*)::integer AS n, sum(value) AS total,
           min(value) AS low, max(value) AS high
    FROM v WHERE length(field) <= 64 GROUP BY device_id, field, bucket
), d AS (
    SELECT device_id, field, date_trunc('day', bucket, 'UTC') AS bucket, sum(n)::integer AS n,
           sum(total) AS total, min(low) AS low, max(high) AS high
    FROM h GROUP BY device_id, field, 3
), mo AS (
    SELECT device_id, field, date_trunc('month', bucket, 'UTC') AS bucket,
           sum(n)::integer AS n, sum(total) AS total, min(low) AS low, max(high) AS high
    FROM d GROUP BY device_id, field, 3
), cells AS (
    SELECT 1 AS interval, * FROM h
    UNION ALL SELECT 0, * FROM d
    UNION ALL SELECT 2, * FROM mo
)
SELECT m.scope, (ARRAY['day', 'hour', 'month'])[c.interval + 1], c.bucket, c.field,
       sum(c.n), sum(c.total), min(c.low), max(c.high)
FROM cells c
JOIN unnest($1::integer[], $2::text[], $6::integer[]) AS m(device_id, scope, rank)
  ON m.device_id = c.device_id
GROUP BY m.rank, c.interval, c.bucket, c.field, m.scope
ORDER BY m.rank, c.interval, c.bucket, c.field COLLATE "C"
ON CONFLICT (scope, "interval", bucket, field) DO UPDATE SET
    count = t.count + excluded.count,
    sum = t.sum + excluded.sum,
    min = LEAST(t.min, excluded.min),
    max = GREATEST(t.max, excluded.max)
"""
_STAGE_ROLLUPS = (
    "CREATE TEMP TABLE IF NOT EXISTS telemetry_rollup_stage (scope varchar(200),"
    ' "interval" varchar(8), bucket timestamptz, field varchar(64), count bigint,'
    " sum double precision, min double precision, max double precision) ON COMMIT DELETE ROWS"
)
_UPSERT_STAGED_ROLLUPS = """
INSERT INTO telemetry_rollups AS t (scope, "interval", bucket, field, count, sum, min, max)
SELECT scope, "interval", bucket, field, count, sum, min, max FROM telemetry_rollup_stage
ORDER BY scope, "interval", bucket, field
ON CONFLICT (scope, "interval", bucket, field) DO UPDATE SET
    count = t.count + excluded.count,
    sum = t.sum + excluded.sum,
    min = LEAST(t.min, excluded.min),
    max = GREATEST(t.max, excluded.max)
"""
# The devices' rows of a group, locked in id order; their advanced state; its events.
_ADD_DEVICES = (
    "INSERT INTO telemetry_devices (did, latest, readings, updated_at)"
    " SELECT did, '{}'::jsonb, 0, $2 FROM unnest($1::varchar[]) AS did ORDER BY did"
    " ON CONFLICT (did) DO NOTHING"
)
_LOCK_DEVICES = (
    "SELECT id, did, last_time, last_seq, latest, meter, readings FROM telemetry_devices"
    " WHERE did = ANY($1::varchar[]) ORDER BY id FOR UPDATE"
)
_SAVE_DEVICE = (
    "UPDATE telemetry_devices SET last_time = $2, last_seq = $3, latest = $4, meter = $5,"
    " readings = $6, updated_at = $7 WHERE id = $1"
)
_INSERT_EVENT = (
    "INSERT INTO events (event_id, type, subject, actor, data, ledger_height, occurred_at,"
    " causation_id, correlation_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
)
_ADD_DEVICE_SQLITE = (
    "INSERT OR IGNORE INTO telemetry_devices (did, latest, readings, updated_at)"
    " VALUES (?, '{}', 0, ?)"
)
_LOCK_DEVICES_SQLITE = (
    "SELECT id, did, last_time, last_seq, latest, meter, readings FROM telemetry_devices"
    " WHERE did IN ({marks})"
)
_SAVE_DEVICE_SQLITE = (
    "UPDATE telemetry_devices SET last_time = ?, last_seq = ?, latest = ?, meter = ?,"
    " readings = ?, updated_at = ? WHERE id = ?"
)
_INSERT_EVENT_SQLITE = (
    "INSERT INTO events (event_id, type, subject, actor, data, ledger_height, occurred_at,"
    " causation_id, correlation_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_STAGE_READINGS_SQLITE = (
    "CREATE TEMP TABLE IF NOT EXISTS telemetry_stage (device_id INTEGER, seq INTEGER,"
    ' time TEXT, "values" TEXT)'
)
_DROP_STORED_SQLITE = """
DELETE FROM temp.telemetry_stage
WHERE EXISTS (
    SELECT 1 FROM main.telemetry_readings r
    WHERE r.device_id = telemetry_stage.device_id AND r.seq = telemetry_stage.seq
)
RETURNING device_id, seq
"""
_INSERT_READING_SQLITE = (
    'INSERT OR IGNORE INTO telemetry_readings (device_id, seq, time, "values") VALUES (?, ?, ?, ?)'
)
_INSERT_STAGED_SQLITE = """
INSERT OR IGNORE INTO telemetry_readings (device_id, seq, time, "values")
SELECT device_id, seq, time, "values" FROM temp.telemetry_stage
"""
_UPSERT_ROLLUP_SQLITE = """
INSERT INTO telemetry_rollups (scope, "interval", bucket, field, count, sum, min, max)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (scope, "interval", bucket, field) DO UPDATE SET
    count = telemetry_rollups.count + excluded.count,
    sum = telemetry_rollups.sum + excluded.sum,
    min = min(telemetry_rollups.min, excluded.min),
    max = max(telemetry_rollups.max, excluded.max)
"""


def next_month(moment: datetime) -> datetime:
    return (moment.replace(day=28) + timedelta(days=4)).replace(day=1)


@dataclass(frozen=True)
class Batch:
    """One device's valid readings, and what its protocol and links say to roll up."""

    did: str
    readings: list[Reading]
    numeric: Sequence[str]
    meter: str | None
    scopes: Sequence[str]
    counted: Sequence[str] = ()  # enum fields whose values are counted (`session=start`)
    rejection: dict[str, Any] | None = None  # a telemetry.rejected event's data, if any


@dataclass
class DeviceState:
    """A device's row as a write reads, advances and saves it (on the driver's connection,
    no ORM object)."""

    id: int
    last_time: datetime | None
    last_seq: int | None
    latest: dict[str, Any]
    meter: float | None
    readings: int


@dataclass(frozen=True)
class StoredBatch:
    inserted: list[Reading]
    duplicates: int
    state: dict[str, Any]
    was_online_at: datetime | None  # the device's last reading before this batch


@dataclass
class RollupPlan:
    """What a group's inserted readings roll up into, for the database to compute: each
    device's scopes (itself, its projects and organisations) and each device's fields
    (numeric ones, and enum fields whose values are counted: counted=True)."""

    scopes: list[tuple[int, str]]
    fields: list[tuple[int, str, bool]]
    cells: dict[str, list[Cells]]  # SQLite: each scope's cells, summed in Python

    def add(
        self, device: int, scopes: Iterable[str], numeric: Sequence[str], counted: Sequence[str]
    ) -> None:
        """One device's part (add each device once: a repeated pair would count twice)."""
        for scope in dict.fromkeys(scopes):
            self.scopes.append((device, scope))
        for name in numeric:
            self.fields.append((device, name, False))
        for name in counted:
            self.fields.append((device, name, True))


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


Cells = dict[tuple[str, int, str], list[float]]  # (interval, epoch s, field): count/sum/min/max
RollupRecord = tuple[str, str, datetime, str, int, float, float, float]


def add_cells(
    cells: Cells, readings: Iterable[Reading], numeric: Sequence[str], counted: Sequence[str]
) -> None:
    """Add some readings to rollup cells (hour, day and month of each numeric field).

    An enum field named in `counted` rolls up as one field per value (`session=start`,
    value 1 per reading), so a day's cooking sessions are read from the rollups.

    This runs for every reading, so a reading only adds to its hour's cell (per field, keyed
    by the hour's epoch second: integer arithmetic, no key tuple); days are then summed
    from the hours and months from the days, once per cell rather than once per reading.
    """
    hours: dict[str, dict[int, list[float]]] = {}
    fields = [(name, hours.setdefault(name, {})) for name in numeric]
    for reading in readings:
        second = int(reading.time.timestamp())
        hour = second - second % 3600
        values = reading.values
        for name, by_hour in fields:
            value = values.get(name)
            if value is None:
                continue
            value = float(value)
            cell = by_hour.get(hour)
            if cell is None:
                by_hour[hour] = [1, value, value, value]
            else:
                cell[0] += 1
                cell[1] += value
                if value < cell[2]:
                    cell[2] = value
                if value > cell[3]:
                    cell[3] = value
        for name in counted:
            value = values.get(name)
            if isinstance(value, str) and len(counted_field(name, value)) <= FIELD_LENGTH:
                by_hour = hours.setdefault(counted_field(name, value), {})
                cell = by_hour.get(hour)
                if cell is None:
                    by_hour[hour] = [1, 1.0, 1.0, 1.0]
                else:
                    cell[0] += 1
                    cell[1] += 1.0
    months: dict[int, int] = {}
    for name, by_hour in hours.items():
        days: dict[int, list[float]] = {}
        for hour, cell in by_hour.items():
            key = ("hour", hour, name)
            if key in cells:
                _add_cell(cells, key, cell)
            else:  # this cell is no one else's (the days below copy it)
                cells[key] = cell
            _add_cell(days, hour - hour % 86400, cell)
        by_month: dict[int, list[float]] = {}
        for day, cell in days.items():
            _add_cell(cells, ("day", day, name), cell)
            month = months.get(day)
            if month is None:
                start = datetime.fromtimestamp(day, UTC).replace(day=1)
                month = months[day] = int(start.timestamp())
            _add_cell(by_month, month, cell)
        for month, cell in by_month.items():
            _add_cell(cells, ("month", month, name), cell)


def _add_cell(cells: dict[Any, list[float]], key: Any, cell: list[float]) -> None:
    """Add count/sum/min/max `cell` to the cell at `key` (a copy when there is none)."""
    held = cells.get(key)
    if held is None:
        cells[key] = list(cell)
        return
    held[0] += cell[0]
    held[1] += cell[1]
    if cell[2] < held[2]:
        held[2] = cell[2]
    if cell[3] > held[3]:
        held[3] = cell[3]


def merge_cells(into: Cells, cells: Cells) -> None:
    """Add one set of cells to another (a scope fed by several batches of a group)."""
    for key, cell in cells.items():
        _add_cell(into, key, cell)


def _utc(stamp: int) -> datetime:
    return datetime.fromtimestamp(stamp, UTC)


def cell_records(
    scoped: dict[str, list[Cells]], bucket: Callable[[int], Any] = _utc, ordered: bool = True
) -> list[RollupRecord]:
    """Rollup increments, one per (scope, interval, bucket, field), sorted by that key so
    that concurrent transactions lock rollup rows in one order (no deadlocks).

    `scoped` gives each scope the cells of the batches that feed it; a scope fed by one
    batch shares that batch's cells with the device and its other scopes (no copies), and
    their keys are sorted once for all of them (`ordered=False`: not sorted, where no lock
    order matters). `bucket` turns a bucket's epoch second into what the record holds (a
    UTC datetime; SQLite's text), once per bucket."""
    moments: dict[int, Any] = {}
    orders: dict[int, list[tuple[str, int, str]]] = {}
    kept: list[Cells] = []  # holds merged cells alive, so no id() is reused meanwhile
    records: list[RollupRecord] = []
    for scope in sorted(scoped):
        parts = scoped[scope]
        cells = parts[0]
        if len(parts) > 1:
            cells = {key: list(cell) for key, cell in cells.items()}
            for more in parts[1:]:
                merge_cells(cells, more)
            kept.append(cells)
        keys = orders.get(id(cells))
        if keys is None:
            keys = orders[id(cells)] = sorted(cells) if ordered else list(cells)
        for key in keys:
            interval, stamp, name = key
            cell = cells[key]
            moment = moments.get(stamp)
            if moment is None:
                moment = moments[stamp] = bucket(stamp)
            records.append((scope, interval, moment, name, int(cell[0]), cell[1], cell[2], cell[3]))
    return records


def as_records(rows: Iterable[dict[str, Any]]) -> list[RollupRecord]:
    """Rollup rows (dicts, as rollup_rows gives them) as the records _roll_up takes."""
    return [
        (
            r["scope"],
            r["interval"],
            r["bucket"],
            r["field"],
            r["count"],
            r["sum"],
            r["min"],
            r["max"],
        )
        for r in rows
    ]


def rollup_rows(
    readings: Iterable[Reading],
    numeric: Sequence[str],
    scopes: Sequence[str],
    counted: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The rollup increments of some readings as rows, one per (scope, interval, bucket,
    field), in key order."""
    cells: Cells = {}
    add_cells(cells, readings, numeric, counted)
    keys = ("scope", "interval", "bucket", "field", "count", "sum", "min", "max")
    return [
        dict(zip(keys, record, strict=True))
        for record in cell_records({scope: [cells] for scope in scopes})
    ]


def merge_rollups(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per key (an upsert statement may touch a row once), in key order."""
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        key = (row["scope"], row["interval"], row["bucket"], row["field"])
        held = merged.get(key)
        if held is None:
            merged[key] = dict(row)
            continue
        held["count"] += row["count"]
        held["sum"] += row["sum"]
        held["min"] = min(held["min"], row["min"])
        held["max"] = max(held["max"], row["max"])
    return [merged[key] for key in sorted(merged)]


class TelemetryStore:
    """Also writes the devices' events (device.online, device.offline, telemetry.rejected)
    into the event outbox, in the transaction of the change that causes them."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        postgres: bool,
        offline_after_seconds: float = 3600.0,
        bus: Bus | None = None,
    ) -> None:
        self._sessions = sessions
        # Told when a raw-driver write commits events (the sequencer numbers them); without
        # one, they wait for the sequencer's next pass.
        self._bus = bus
        self.offline_after = timedelta(seconds=offline_after_seconds)
        self._device_ids: dict[str, int] = {}
        self._partitions: set[str] = set()
        self.postgres = postgres
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

    # -- devices -------------------------------------------------------------------------
    async def device(self, did: str) -> TelemetryDevice | None:
        async with self._sessions() as session:
            return await session.scalar(select(TelemetryDevice).where(TelemetryDevice.did == did))

    # -- partitions (PostgreSQL) ---------------------------------------------------------
    async def ensure_partitions(self, times: Iterable[datetime]) -> None:
        """Monthly partitions for every month `times` touch, made once per process."""
        if not self.postgres:
            return
        months = {
            datetime(t.year, t.month, 1, tzinfo=UTC)
            for t in (t if t.tzinfo is UTC else t.astimezone(UTC) for t in times)
        }
        for month in sorted(months):
            name = f"telemetry_readings_p{month:%Y%m}"
            if name in self._partitions:
                continue
            ddl = (
                f"CREATE TABLE IF NOT EXISTS {name} PARTITION OF telemetry_readings "
                f"FOR VALUES FROM ('{month.isoformat()}') TO ('{next_month(month).isoformat()}')"
            )
            try:
                async with self._sessions.begin() as session:
                    await session.execute(text(ddl))
            except (IntegrityError, ProgrammingError, DBAPIError) as error:
                # Another process made it a moment ago (a race IF NOT EXISTS does not cover).
                if "already exists" not in str(error):
                    raise
            self._partitions.add(name)

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
                if self.postgres:
                    async with driver.transaction():
                        results, ids = await self._write(driver, batches, events)
                else:
                    # BEGIN IMMEDIATE: this transaction holds the database's write lock from
                    # its start (a deferred one that read first could not write later).
                    await driver.execute("BEGIN IMMEDIATE")
                    try:
                        results, ids = await self._write(driver, batches, events)
                    except BaseException:
                        await driver.rollback()
                        raise
                    await driver.commit()
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
        for i in order:
            taken = used.setdefault(ids[i], set())
            fresh[i] = []
            for reading in batches[i].readings:
                if reading.seq not in taken:
                    taken.add(reading.seq)
                    fresh[i].append(reading)
        skipped = await self._insert_readings(
            driver, [(ids[i], r) for i in order for r in fresh[i]]
        )
        plan = RollupPlan([], [], {})
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
                if not self.postgres:
                    cells: Cells = {}
                    add_cells(cells, inserted, batch.numeric, batch.counted)
                    for scope in (batch.did, *batch.scopes):
                        plan.cells.setdefault(scope, []).append(cells)
                elif device not in planned:
                    planned.add(device)
                    plan.add(device, (batch.did, *batch.scopes), batch.numeric, batch.counted)
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
        return results, {did: row.id for did, row in rows.items()}

    async def _lock_devices(self, driver: Any, dids: list[str]) -> dict[str, DeviceState]:
        """The devices' rows by DID, made on a device's first reading and locked for this
        transaction (PostgreSQL: FOR UPDATE in id order; SQLite: the transaction holds the
        database's write lock already). New rows go in in DID order, so concurrent groups
        wait for each other's in one order too."""
        new = [did for did in dids if did not in self._device_ids]
        if self.postgres:
            if new:
                await driver.execute(_ADD_DEVICES, new, utcnow())
            found = await driver.fetch(_LOCK_DEVICES, dids)
            return {r[1]: DeviceState(r[0], r[2], r[3], r[4] or {}, r[5], r[6] or 0) for r in found}
        if new:
            stamp = sqlite_time(utcnow())
            await driver.executemany(_ADD_DEVICE_SQLITE, [(did, stamp) for did in new])
        marks = ", ".join("?" * len(dids))
        cursor = await driver.execute(_LOCK_DEVICES_SQLITE.format(marks=marks), dids)
        states = {}
        for device, did, last, seq, latest, meter, readings in await cursor.fetchall():
            moment = datetime.fromisoformat(last).replace(tzinfo=UTC) if last else None
            states[did] = DeviceState(
                device, moment, seq, orjson.loads(latest) if latest else {}, meter, readings or 0
            )
        return states

    async def _save_devices(self, driver: Any, states: list[DeviceState]) -> None:
        """The advanced state of the devices that stored readings, in id order."""
        if not states:
            return
        now = utcnow()
        if self.postgres:
            await driver.executemany(
                _SAVE_DEVICE,
                [
                    (s.id, s.last_time, s.last_seq, dumps(s.latest), s.meter, s.readings, now)
                    for s in states
                ],
            )
            return
        await driver.executemany(
            _SAVE_DEVICE_SQLITE,
            [
                (
                    sqlite_time(s.last_time) if s.last_time else None,
                    s.last_seq,
                    dumps(s.latest),
                    s.meter,
                    s.readings,
                    sqlite_time(now),
                    s.id,
                )
                for s in states
            ],
        )

    async def _insert_events(self, driver: Any, rows: list[dict[str, Any]]) -> None:
        """Outbox rows (events/store.py's event_row), in this transaction."""
        if not rows:
            return
        records = [
            (
                r["event_id"],
                r["type"],
                r["subject"],
                r["actor"],
                r["data"],
                r["ledger_height"],
                r["occurred_at"] if self.postgres else sqlite_time(r["occurred_at"]),
                r["causation_id"],
                r["correlation_id"],
            )
            for r in rows
        ]
        await driver.executemany(_INSERT_EVENT if self.postgres else _INSERT_EVENT_SQLITE, records)

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
        newest = max(r.time for r in inserted)
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
        self, driver: Any, items: list[tuple[int, Reading]]
    ) -> set[tuple[int, int]]:
        """Insert (device id, reading) pairs whose seqs are new within the group; the
        (device id, seq) pairs NOT stored because the device has stored that seq before
        (usually none, so nothing per reading comes back). The readings go into a staging
        table (PostgreSQL: COPY; SQLite: executemany), the device's used seqs are deleted
        from it (whatever their time: on PostgreSQL the key holds the time too, for the
        partitions) and the rest is inserted; the staging table then holds exactly the
        inserted readings, which _roll_up reads."""
        if self.postgres:
            if driver not in self._staged:
                await driver.execute(_STAGE_READINGS)
            if not items:
                return set()
            await driver.copy_records_to_table(
                "telemetry_stage",
                records=[(d, r.seq, r.time, dumps(r.values)) for d, r in items],
                columns=["device_id", "seq", "time", "values"],
            )
            skipped = await driver.fetch(_DROP_STORED)
            await driver.execute(_INSERT_STAGED)
            return {(d, q) for d, q in skipped}
        if driver not in self._staged:
            await driver.execute(_STAGE_READINGS_SQLITE)
        if not items:
            return set()
        rows = [(d, r.seq, sqlite_time(r.time), dumps(r.values)) for d, r in items]
        # Usually no seq was stored before: one INSERT OR IGNORE (the key is (device, seq))
        # then stores them all, and its count says so. When it stored fewer, which ones it
        # skipped is found the staged way below, after undoing it.
        await driver.execute("SAVEPOINT telemetry_insert")
        cursor = await driver.executemany(_INSERT_READING_SQLITE, rows)
        if cursor.rowcount != len(rows):
            await driver.execute("ROLLBACK TO telemetry_insert")
        await driver.execute("RELEASE telemetry_insert")
        if cursor.rowcount == len(rows):
            return set()
        await driver.execute("DELETE FROM temp.telemetry_stage")
        await driver.executemany("INSERT INTO temp.telemetry_stage VALUES (?, ?, ?, ?)", rows)
        cursor = await driver.execute(_DROP_STORED_SQLITE)
        skipped = await cursor.fetchall()
        await driver.execute(_INSERT_STAGED_SQLITE)
        return {(d, q) for d, q in skipped}

    async def _roll_up(self, driver: Any, plan: RollupPlan) -> None:
        """Add the staged readings (those _insert_readings just stored) to the rollups of
        their devices and scopes, in the caller's transaction. PostgreSQL: one INSERT ...
        SELECT ... GROUP BY ... ON CONFLICT, so nothing is done per reading or per rollup
        row in Python. SQLite runs in this process, where the same statement cost more
        than the Python sums (JSON taken apart per reading and field), so the cells
        summed per batch are upserted there."""
        if not self.postgres:
            await driver.executemany(_UPSERT_ROLLUP_SQLITE, sqlite_cell_rows(plan.cells))
            return
        if not plan.fields:
            return
        scope_ids, scopes = zip(*plan.scopes, strict=True)
        field_ids, names, counted = zip(*plan.fields, strict=True)
        rank = {scope: n for n, scope in enumerate(sorted(set(scopes)))}
        ranks = [rank[scope] for scope in scopes]
        await driver.execute(_ROLL_UP_STAGED, scope_ids, scopes, field_ids, names, counted, ranks)

    async def add_rollups(self, session: AsyncSession, records: list[RollupRecord]) -> None:
        """Add rollup increments computed elsewhere (one record per key, in key order:
        concurrent transactions lock rows in one order), in the session's transaction; the
        benchmark seeds rollups this way."""
        if not records:
            return
        if self.postgres:

            async def copy_upsert(driver: Any) -> None:
                await driver.execute(_STAGE_ROLLUPS)
                await driver.copy_records_to_table("telemetry_rollup_stage", records=records)
                await driver.execute(_UPSERT_STAGED_ROLLUPS)

            await self._raw(session, copy_upsert)
            return
        rows = [(*r[:2], sqlite_time(r[2]), *r[3:]) for r in records]

        async def upsert(driver: Any) -> None:
            await driver.executemany(_UPSERT_ROLLUP_SQLITE, rows)

        await self._raw(session, upsert)

    async def _raw(self, session: AsyncSession, work: Callable[[Any], Awaitable[T]]) -> T:
        """`work(driver connection)` (asyncpg or aiosqlite) in the session's transaction.
        The driver's errors come out as SQLAlchemy's, as from any other statement, so the
        API answers 503 and MQTT retries them alike.

        SQLAlchemy's asyncpg adapter sends BEGIN lazily, with the transaction's first
        statement: when that is this driver work, asyncpg would run it in autocommit (each
        statement committed alone, a staged temporary table emptied at once), so a
        statement through SQLAlchemy opens the transaction first."""
        connection = await session.connection()
        raw = await connection.get_raw_connection()
        driver = raw.driver_connection
        if self.postgres and not driver.is_in_transaction():
            await connection.exec_driver_sql("SELECT 1")
        try:
            return await work(driver)
        except Exception as error:
            raise driver_error(connection.dialect, raw, error) from error

    @staticmethod
    def _advance_state(row: DeviceState, inserted: list[Reading], meter: str | None) -> None:
        """Latest value of each field by reading time (a late batch changes only what is
        newer than what the twin holds)."""
        newest_of: dict[str, Reading] = {}  # each field's newest reading in the batch
        for reading in inserted:
            for name in reading.values:
                held = newest_of.get(name)
                if held is None or (held.time, held.seq) <= (reading.time, reading.seq):
                    newest_of[name] = reading
        latest: dict[str, Any] = dict(row.latest)
        for name, reading in newest_of.items():
            stamp = reading.time.isoformat()
            held = latest.get(name)
            if held is None or (held["time"], held["seq"]) <= (stamp, reading.seq):
                latest[name] = {"value": reading.values[name], "time": stamp, "seq": reading.seq}
        newest = max(inserted, key=lambda r: (r.time, r.seq))
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
                select(READINGS.c.seq, READINGS.c.time, READINGS.c["values"])
                .where(*conditions)
                .order_by(READINGS.c.time, READINGS.c.seq)
                .limit(limit)
            )
            return [Reading(seq, moment, values) for seq, moment, values in rows]

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
                select(
                    ROLLUPS.c.bucket,
                    ROLLUPS.c.field,
                    ROLLUPS.c.count,
                    ROLLUPS.c.sum,
                    ROLLUPS.c.min,
                    ROLLUPS.c.max,
                )
                .where(*conditions)
                .order_by(ROLLUPS.c.bucket, ROLLUPS.c.field)
            )
            for bucket, name, count, total, low, high in rows:
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
        """Drop raw readings older than `before` (whole partitions on PostgreSQL first)."""
        dropped = 0
        if self.postgres:
            async with self._sessions.begin() as session:
                names = await session.scalars(
                    text(
                        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                        " JOIN pg_class p ON p.oid = i.inhparent"
                        " WHERE p.relname = 'telemetry_readings'"
                    )
                )
                for name in list(names):
                    try:
                        month = datetime.strptime(name[-6:], "%Y%m").replace(tzinfo=UTC)
                    except ValueError:
                        continue
                    if next_month(month) <= before:
                        await session.execute(text(f"DROP TABLE {name}"))
                        self._partitions.discard(name)
                        dropped += 1
        async with self._sessions.begin() as session:
            result = await session.execute(delete(READINGS).where(READINGS.c.time < before))
        return dropped + (result.rowcount or 0)


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


def sqlite_time(moment: datetime) -> str:
    """A UtcDateTime as SQLAlchemy writes it on SQLite (`2026-01-02 03:04:05.000006`, UTC):
    the same text, so keys and comparisons match what the ORM wrote. Checked readings are
    in UTC already: their text is the aware one without its `+00:00` (one call)."""
    if moment.tzinfo is UTC:
        return moment.isoformat(" ", "microseconds")[:-6]
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


@functools.lru_cache(maxsize=65_536)
def _sqlite_bucket(stamp: int) -> str:
    """A bucket's epoch second as SQLite's text; cached, since the batches of a project's
    devices keep naming the same recent hours."""
    return sqlite_time(datetime.fromtimestamp(stamp, UTC))


def sqlite_cell_rows(scoped: dict[str, list[Cells]]) -> list[RollupRecord]:
    """cell_records with each bucket as SQLite's text, in no particular order: SQLite's
    one writer at a time holds the whole database, so no lock order is needed."""
    return cell_records(scoped, _sqlite_bucket, ordered=False)
