"""Readings, rollups and devices' state in the database: one transaction per batch.

A batch's readings go in with `INSERT ... ON CONFLICT DO NOTHING` (the key holds the
device and its seq), after the seqs the device already used are looked up, so a reading
sent twice is stored once even when its time differs. The rows actually inserted feed
the rollups (hour, day, month; per device and per project/organisation) by upsert and the
device's live state, in the same transaction: either all of a batch counts or none.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, case, delete, or_, select, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError, IntegrityError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import TelemetryDevice, TelemetryReading, TelemetryRollup, utcnow
from twinhub.events.store import record_event
from twinhub.telemetry.schema import Reading

INTERVALS = ("hour", "day", "month")
READINGS = TelemetryReading.__table__
ROLLUPS = TelemetryRollup.__table__
FIELD_LENGTH = 64  # telemetry_rollups.field


def bucket_of(moment: datetime, interval: str) -> datetime:
    """The start of the hour, day or month (UTC) that holds `moment`."""
    moment = moment.astimezone(UTC)
    if interval == "hour":
        return moment.replace(minute=0, second=0, microsecond=0)
    if interval == "day":
        return moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


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


@dataclass(frozen=True)
class StoredBatch:
    inserted: list[Reading]
    duplicates: int
    state: dict[str, Any]
    was_online_at: datetime | None  # the device's last reading before this batch


def counted_field(name: str, value: str) -> str:
    """The rollup field that counts readings whose enum field `name` is `value`."""
    return f"{name}={value}"


def rollup_rows(
    readings: Iterable[Reading],
    numeric: Sequence[str],
    scopes: Sequence[str],
    counted: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The rollup increments of some readings, one row per (scope, interval, bucket, field),
    sorted so that concurrent batches lock rows in one order (no deadlocks).

    An enum field named in `counted` rolls up as one field per value (`session=start`,
    value 1 per reading), so a day's cooking sessions are read from the rollups.

    Buckets are found with integer arithmetic on the epoch seconds (hours and days are
    whole multiples in UTC); months through a per-day cache. This runs for every reading.
    """
    cells: dict[tuple[str, int, str], list[float]] = {}
    months: dict[int, int] = {}
    for reading in readings:
        second = int(reading.time.timestamp())
        hour = second - second % 3600
        day = second - second % 86400
        month = months.get(day)
        if month is None:
            start = datetime.fromtimestamp(day, UTC).replace(day=1)
            month = months[day] = int(start.timestamp())
        items: list[tuple[str, float]] = []
        for name in numeric:
            value = reading.values.get(name)
            if value is not None:
                items.append((name, float(value)))
        for name in counted:
            value = reading.values.get(name)
            if isinstance(value, str) and len(counted_field(name, value)) <= FIELD_LENGTH:
                items.append((counted_field(name, value), 1.0))
        for name, value in items:
            for key in (("hour", hour, name), ("day", day, name), ("month", month, name)):
                cell = cells.get(key)
                if cell is None:
                    cells[key] = [1, value, value, value]
                else:
                    cell[0] += 1
                    cell[1] += value
                    if value < cell[2]:
                        cell[2] = value
                    if value > cell[3]:
                        cell[3] = value
    moments = {stamp: datetime.fromtimestamp(stamp, UTC) for _, stamp, _ in cells}
    rows = [
        {
            "scope": scope,
            "interval": interval,
            "bucket": moments[stamp],
            "field": name,
            "count": int(cell[0]),
            "sum": cell[1],
            "min": cell[2],
            "max": cell[3],
        }
        for scope in scopes
        for (interval, stamp, name), cell in cells.items()
    ]
    rows.sort(key=lambda r: (r["scope"], r["interval"], r["bucket"], r["field"]))
    return rows


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
    ) -> None:
        self._sessions = sessions
        self.offline_after = timedelta(seconds=offline_after_seconds)
        self._device_ids: dict[str, int] = {}
        self._partitions: set[str] = set()
        self.postgres = postgres
        self._insert = postgresql.insert if self.postgres else sqlite.insert

    # -- devices -------------------------------------------------------------------------
    async def device_id(self, did: str) -> int:
        """The small integer the readings of `did` carry, made on its first reading."""
        found = self._device_ids.get(did)
        if found is not None:
            return found
        async with self._sessions.begin() as session:
            statement = (
                self._insert(TelemetryDevice)
                .values(did=did, latest={}, readings=0, updated_at=utcnow())
                .on_conflict_do_nothing()
            )
            await session.execute(statement)
            found = await session.scalar(
                select(TelemetryDevice.id).where(TelemetryDevice.did == did)
            )
        assert found is not None
        self._device_ids[did] = found
        return found

    async def device(self, did: str) -> TelemetryDevice | None:
        async with self._sessions() as session:
            return await session.scalar(select(TelemetryDevice).where(TelemetryDevice.did == did))

    # -- partitions (PostgreSQL) ---------------------------------------------------------
    async def ensure_partitions(self, times: Iterable[datetime]) -> None:
        """Monthly partitions for every month `times` touch, made once per process."""
        if not self.postgres:
            return
        months = {bucket_of(t, "month") for t in times}
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
        one commit for many readings. Devices are locked in id order (no deadlocks)."""
        ids = [await self.device_id(batch.did) for batch in batches]
        await self.ensure_partitions(r.time for batch in batches for r in batch.readings)
        order = sorted(range(len(batches)), key=lambda i: ids[i])
        results: dict[int, StoredBatch] = {}
        rollups: list[dict[str, Any]] = []
        async with self._sessions.begin() as session:
            rows = {
                row.id: row
                for row in await session.scalars(
                    select(TelemetryDevice)
                    .where(TelemetryDevice.id.in_(sorted(set(ids))))
                    .order_by(TelemetryDevice.id)
                    .with_for_update()
                )
            }
            wanted: dict[int, list[int]] = {}
            for i in order:  # a device may have several batches in the group
                wanted.setdefault(ids[i], []).extend(r.seq for r in batches[i].readings)
            used = await self._used_seqs(session, wanted)
            fresh: dict[int, list[Reading]] = {}
            for i in order:  # a seq the device used, or one the group repeats, is a duplicate
                taken = used.setdefault(ids[i], set())
                fresh[i] = []
                for reading in batches[i].readings:
                    if reading.seq not in taken:
                        taken.add(reading.seq)
                        fresh[i].append(reading)
            values = [
                {"device_id": ids[i], "seq": r.seq, "time": r.time, "values": r.values}
                for i in order
                for r in fresh[i]
            ]
            stored: set[tuple[int, int]] = set()
            if values:
                statement = (
                    self._insert(READINGS)
                    .on_conflict_do_nothing()
                    .returning(READINGS.c.device_id, READINGS.c.seq)
                )
                stored = {(d, q) for d, q in (await session.execute(statement, values)).all()}
            for i in order:
                batch, row = batches[i], rows[ids[i]]
                was = row.last_time
                inserted = [r for r in fresh[i] if (ids[i], r.seq) in stored]
                if inserted:
                    self._online_event(session, batch.did, was, inserted)
                    rollups += rollup_rows(
                        inserted, batch.numeric, [batch.did, *batch.scopes], batch.counted
                    )
                    self._advance_state(row, inserted, batch.meter)
                state = {
                    "lastTime": row.last_time,
                    "lastSeq": row.last_seq,
                    "latest": dict(row.latest),
                    "meter": row.meter,
                    "readings": row.readings,
                }
                results[i] = StoredBatch(inserted, len(batch.readings) - len(inserted), state, was)
                if batch.rejection is not None:
                    record_event(
                        session, "telemetry.rejected", batch.did, batch.did, batch.rejection
                    )
            await self._roll_up(session, merge_rollups(rollups))
        return [results[i] for i in range(len(batches))]

    def online(self, last: datetime | None, now: datetime | None = None) -> bool:
        """Whether a device whose newest reading is at `last` counts as online."""
        if last is None:
            return False
        return (now or datetime.now(UTC)) - last < self.offline_after

    def _online_event(
        self, session: AsyncSession, did: str, was: datetime | None, inserted: list[Reading]
    ) -> None:
        """device.online when these readings bring an offline (or new) device online."""
        newest = max(r.time for r in inserted)
        if self.online(was) or not self.online(newest):
            return
        record_event(
            session,
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

    async def _used_seqs(
        self, session: AsyncSession, wanted: dict[int, list[int]]
    ) -> dict[int, set[int]]:
        """Which of the wanted seqs each device has stored already (few queries for many
        devices: one per 100 devices or 5,000 seqs)."""
        used: dict[int, set[int]] = {}
        terms: list[Any] = []
        size = 0

        async def flush() -> None:
            nonlocal terms, size
            if terms:
                rows = await session.execute(
                    select(READINGS.c.device_id, READINGS.c.seq).where(or_(*terms))
                )
                for device_id, seq in rows:
                    used.setdefault(device_id, set()).add(seq)
            terms, size = [], 0

        for device_id, seqs in wanted.items():
            unique = sorted(set(seqs))
            for start in range(0, len(unique), 5000):
                chunk = unique[start : start + 5000]
                terms.append(and_(READINGS.c.device_id == device_id, READINGS.c.seq.in_(chunk)))
                size += len(chunk)
                if len(terms) >= 100 or size >= 5000:
                    await flush()
        await flush()
        return used

    async def _roll_up(self, session: AsyncSession, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        statement = self._insert(ROLLUPS)
        new = statement.excluded
        statement = statement.on_conflict_do_update(
            index_elements=["scope", "interval", "bucket", "field"],
            set_={
                "count": ROLLUPS.c.count + new["count"],
                "sum": ROLLUPS.c.sum + new["sum"],
                "min": case((new["min"] < ROLLUPS.c.min, new["min"]), else_=ROLLUPS.c.min),
                "max": case((new["max"] > ROLLUPS.c.max, new["max"]), else_=ROLLUPS.c.max),
            },
        )
        await session.execute(statement, rows)

    @staticmethod
    def _advance_state(row: TelemetryDevice, inserted: list[Reading], meter: str | None) -> None:
        """Latest value of each field by reading time (a late batch changes only what is
        newer than what the twin holds)."""
        latest: dict[str, Any] = dict(row.latest)
        for reading in inserted:
            stamp = reading.time.isoformat()
            for name, value in reading.values.items():
                held = latest.get(name)
                if held is None or (held["time"], held["seq"]) <= (stamp, reading.seq):
                    latest[name] = {"value": value, "time": stamp, "seq": reading.seq}
        newest = max(inserted, key=lambda r: (r.time, r.seq))
        if row.last_time is None or (newest.time, newest.seq) >= (row.last_time, row.last_seq or 0):
            row.last_time = newest.time
            row.last_seq = newest.seq
        row.latest = latest
        if meter and meter in latest:
            row.meter = float(latest[meter]["value"])
        row.readings = (row.readings or 0) + len(inserted)
        row.updated_at = utcnow()

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
        """Devices whose newest reading is in (after, upto]: those that just went offline.

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
            for row in rows:
                assert row.last_time is not None
                if row.updated_at >= row.last_time + self.offline_after:
                    continue  # reported already, or never online (a late upload)
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
            return [row.did for row in rows]

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


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None
