"""SQLite's telemetry writes (see twinhub.telemetry.dialects): the transaction holds the
database's write lock from its start (BEGIN IMMEDIATE), new readings go in with one INSERT
OR IGNORE (a staging table kept for batches that repeat stored seqs), and the rollup cells
are summed in Python (column-wise over a large batch: telemetry/columns.py) into wide rows
(telemetry/wide.py), added to the rows stored in Python and written by executemany. Times
are stored as the text SQLAlchemy writes."""

from __future__ import annotations

import functools
import math
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from itertools import accumulate, compress, groupby, repeat
from operator import attrgetter, floordiv, is_, sub
from typing import Any

import numpy as np
import orjson
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

from twinhub.mrv.telemetry_schema import Reading, dumps, dumps_each
from twinhub.telemetry.columns import INTERVAL_CODES, INTERVAL_NAMES, group_columns
from twinhub.telemetry.dialects import TelemetryDialect
from twinhub.telemetry.rows import (
    Batch,
    DeviceState,
    RollupPlan,
    RollupRecord,
)
from twinhub.telemetry.wide import (
    CELL,
    Block,
    add,
    blob,
    blocks_of,
    cells_of,
    fields_of,
    fields_text,
    merge_row,
    records_columns,
    scoped_columns,
)

_ADD_DEVICE = (
    "INSERT OR IGNORE INTO telemetry_devices (did, latest, readings, updated_at)"
    " VALUES (?, '{}', 0, ?)"
)
_LOCK_DEVICES = (
    "SELECT id, did, last_time, last_seq, latest, meter, readings FROM telemetry_devices"
    " WHERE did IN ({marks})"
)
_SAVE_DEVICE = (
    "UPDATE telemetry_devices SET last_time = ?, last_seq = ?, latest = ?, meter = ?,"
    " readings = ?, updated_at = ? WHERE id = ?"
)
_INSERT_EVENT = (
    "INSERT INTO events (event_id, type, subject, actor, data, ledger_height, occurred_at,"
    " causation_id, correlation_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_STAGE_READINGS = (
    "CREATE TEMP TABLE IF NOT EXISTS telemetry_stage (device_id INTEGER, seq INTEGER,"
    ' time TEXT, "values" TEXT, received_at TEXT, receipt_id INTEGER)'
)
_INSERT_RECEIPT = (
    "INSERT INTO telemetry_receipts (id, device_id, received_at, first_time, last_time,"
    " payload, signatures) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_QUARANTINE = (
    'INSERT OR IGNORE INTO telemetry_quarantine (device_did, seq, time, received_at, "values",'
    " reason, source, receipt_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_DROP_STORED = """
DELETE FROM temp.telemetry_stage
WHERE EXISTS (
    SELECT 1 FROM main.telemetry_readings r
    WHERE r.device_id = telemetry_stage.device_id AND r.seq = telemetry_stage.seq
)
RETURNING device_id, seq
"""
_INSERT_READING = (
    'INSERT OR IGNORE INTO telemetry_readings (device_id, seq, time, "values", received_at,'
    " receipt_id) VALUES (?, ?, ?, ?, ?, ?)"
)
_INSERT_STAGED = """
INSERT OR IGNORE INTO telemetry_readings (device_id, seq, time, "values", received_at, receipt_id)
SELECT device_id, seq, time, "values", received_at, receipt_id FROM temp.telemetry_stage
"""
# A group's wide rows (telemetry/wide.py): those stored already read (a range of the primary
# key per scope and interval, or the keys as a JSON array, each a search: `_stored`), merged
# in Python, written back. The transaction holds the write lock (BEGIN IMMEDIATE), so
# nothing changes between.
_STORED_ROLLUPS = """
SELECT r.scope, r."interval", r.bucket, r.fields, r.cells
FROM json_each(?) AS k CROSS JOIN telemetry_rollups AS r
WHERE r.scope = json_extract(k.value, '$[0]') AND r."interval" = json_extract(k.value, '$[1]')
  AND r.bucket = json_extract(k.value, '$[2]')
"""
_STORED_RANGE = (
    "SELECT bucket, fields, cells FROM telemetry_rollups WHERE scope = ?"
    ' AND "interval" = ? AND bucket BETWEEN ? AND ?'
)
_INSERT_FRESH = (
    'INSERT OR IGNORE INTO telemetry_rollups (scope, "interval", bucket, fields, cells)'
    " VALUES (?, ?, ?, ?, ?)"
)
_WRITE_ROLLUP = (
    'INSERT OR REPLACE INTO telemetry_rollups (scope, "interval", bucket, fields, cells)'
    " VALUES (?, ?, ?, ?, ?)"
)


class SQLiteTelemetry(TelemetryDialect):
    """See the module docstring."""

    @asynccontextmanager
    async def transaction(self, driver: Any) -> AsyncIterator[None]:
        # BEGIN IMMEDIATE: this transaction holds the database's write lock from its start
        # (a deferred one that read first could not write later).
        await driver.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            await driver.rollback()
            raise
        await driver.commit()

    async def join(self, connection: AsyncConnection, driver: Any) -> None:
        """aiosqlite runs the driver work in the session's transaction as it is."""

    async def ensure_partitions(
        self,
        sessions: async_sessionmaker[AsyncSession],
        times: Iterable[datetime],
        made: set[str],
    ) -> None:
        """No partitions: one table holds every month."""

    async def drop_partitions(
        self,
        sessions: async_sessionmaker[AsyncSession],
        before: datetime,
        made: set[str],
        kept: list[tuple[datetime, datetime]],
    ) -> int:
        return 0

    async def lock_devices(
        self, driver: Any, new: list[str], dids: list[str], now: datetime
    ) -> dict[str, DeviceState]:
        """The transaction holds the database's write lock already: the rows are read."""
        if new:
            stamp = sqlite_time(now)
            await driver.executemany(_ADD_DEVICE, [(did, stamp) for did in new])
        marks = ", ".join("?" * len(dids))
        cursor = await driver.execute(_LOCK_DEVICES.format(marks=marks), dids)
        states = {}
        for device, did, last, seq, latest, meter, readings in await cursor.fetchall():
            moment = datetime.fromisoformat(last).replace(tzinfo=UTC) if last else None
            states[did] = DeviceState(
                device, moment, seq, orjson.loads(latest) if latest else {}, meter, readings or 0
            )
        return states

    async def save_devices(self, driver: Any, states: list[DeviceState], now: datetime) -> None:
        await driver.executemany(
            _SAVE_DEVICE,
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

    async def insert_events(self, driver: Any, rows: list[dict[str, Any]]) -> None:
        records = [
            (
                r["event_id"],
                r["type"],
                r["subject"],
                r["actor"],
                r["data"],
                r["ledger_height"],
                sqlite_time(r["occurred_at"]),
                r["causation_id"],
                r["correlation_id"],
            )
            for r in rows
        ]
        await driver.executemany(_INSERT_EVENT, records)

    async def insert_readings(
        self, driver: Any, items: list[tuple[int, Reading, datetime, int | None]], staged: bool
    ) -> set[tuple[int, int]]:
        if not staged:
            await driver.execute(_STAGE_READINGS)
        if not items:
            return set()
        devices, readings, arrivals, receipts = zip(*items, strict=True)
        times = _remember(list(map(_TIME, readings)))
        received = {at: _stamp(at) for at in set(arrivals)}  # a group's few receipt times
        rows = list(
            zip(
                devices,
                map(_SEQ, readings),
                times,
                dumps_each(map(_VALUES, readings)),
                map(received.__getitem__, arrivals),
                receipts,
                strict=True,
            )
        )
        # Usually no seq was stored before: one INSERT OR IGNORE (the key is (device, seq))
        # then stores them all, and its count says so. When it stored fewer, which ones it
        # skipped is found the staged way below, after undoing it.
        await driver.execute("SAVEPOINT telemetry_insert")
        cursor = await driver.executemany(_INSERT_READING, rows)
        if cursor.rowcount != len(rows):
            await driver.execute("ROLLBACK TO telemetry_insert")
        await driver.execute("RELEASE telemetry_insert")
        if cursor.rowcount == len(rows):
            return set()
        await driver.execute("DELETE FROM temp.telemetry_stage")
        await driver.executemany("INSERT INTO temp.telemetry_stage VALUES (?, ?, ?, ?, ?, ?)", rows)
        cursor = await driver.execute(_DROP_STORED)
        skipped = await cursor.fetchall()
        await driver.execute(_INSERT_STAGED)
        return {(d, q) for d, q in skipped}

    async def receipt_ids(self, driver: Any, count: int) -> list[int]:
        """The transaction holds the write lock (BEGIN IMMEDIATE): the next ids are free."""
        cursor = await driver.execute("SELECT coalesce(max(id), 0) FROM telemetry_receipts")
        (highest,) = await cursor.fetchone()
        return list(range(highest + 1, highest + 1 + count))

    async def insert_receipts(self, driver: Any, rows: list[tuple[Any, ...]]) -> None:
        """Times as insert_readings formatted them (_stamp): a device's messages of a group
        share their receipt time, and a message's first and last time are its readings'."""
        await driver.executemany(
            _INSERT_RECEIPT,
            [(*r[:2], _stamp(r[2]), _stamp(r[3]), _stamp(r[4]), r[5], dumps(r[6])) for r in rows],
        )

    async def insert_quarantine(self, driver: Any, rows: list[tuple[Any, ...]]) -> None:
        await driver.executemany(
            _INSERT_QUARANTINE,
            [(r[0], r[1], sqlite_time(r[2]), sqlite_time(r[3]), dumps(r[4]), *r[5:]) for r in rows],
        )

    def plan(
        self,
        plan: RollupPlan,
        planned: set[int],
        device: int,
        batch: Batch,
        inserted: list[Reading],
    ) -> None:
        """The batch's cells, summed here column-wise, for the device and its scopes."""
        part = len(plan.parts)
        plan.parts.append((inserted, batch.numeric, batch.counted))  # summed in roll_up
        for scope in dict.fromkeys((batch.did, *batch.scopes)):
            plan.scopes.append((part, scope))

    async def roll_up(self, driver: Any, plan: RollupPlan) -> None:
        """The group's cells as wide rows, one per scope and (interval, bucket), added to
        the rows stored (in no particular order: SQLite's one writer at a time holds the
        whole database, so no lock order is needed)."""
        await upsert_blocks(
            driver,
            blocks_of(scoped_columns(group_columns(plan.parts), plan.scopes)),
            plan.stored_until,
        )

    async def add_rollups(self, driver: Any, records: list[RollupRecord]) -> None:
        await upsert_blocks(driver, blocks_of(records_columns(records).items()))


async def upsert_blocks(
    driver: Any, blocks: list[Block], stored_until: Mapping[str, datetime | None] | None = None
) -> None:
    """Wide rows added to those stored under their keys (new keys inserted): the stored
    rows read (`_stored`), those of the same fields added column-wise (numpy), the rest
    row by row (wide.merge_row), all written back by one executemany. Keys stay integers
    (scope, interval code, epoch second) through the merge; text is made only to bind.

    `stored_until` (a device's newest reading before this group, by scope): a device's rows
    of buckets that begin after it hold nothing stored (a device that only appends: live
    traffic), so they are inserted without a read. The database checks that (INSERT OR
    IGNORE must insert every one of them); when some key was stored after all (rollups
    added apart from readings), that insert is undone and every row takes the read."""
    if not blocks:
        return
    if stored_until:
        fresh, blocks = _split_fresh(blocks, stored_until)
        if fresh:
            rows = _rows(fresh)
            await driver.execute("SAVEPOINT telemetry_rollups")
            cursor = await driver.executemany(_INSERT_FRESH, rows)
            if cursor.rowcount != len(rows):
                await driver.execute("ROLLBACK TO telemetry_rollups")
                blocks = [*blocks, *fresh]
            await driver.execute("RELEASE telemetry_rollups")
        if not blocks:
            return
    stored = await _stored(driver, blocks)
    out: list[tuple[Any, ...]] = []
    for block in blocks:
        if stored:
            block = _merged(block, stored, out)
        if block.scope:
            out += _rows([block])
    await driver.executemany(_WRITE_ROLLUP, out)


def _merged(
    block: Block, stored: dict[tuple[str, int, int], tuple[str, bytes]], out: list[tuple[Any, ...]]
) -> Block:
    """The block with the stored rows of its keys added: those of the same fields in the
    block (column-wise), the others merged row by row into `out` and left out of it."""
    found = list(map(stored.get, zip(block.scope, block.interval, block.stamp, strict=True)))
    held_at = [n for n, held in enumerate(found) if held is not None]
    if not held_at:
        return block
    text = fields_text(block.fields)
    same = [n for n in held_at if found[n][0] == text]  # type: ignore[index]
    cells = block.cells.copy()
    if same:
        held = np.frombuffer(b"".join([found[n][1] for n in same]), "<f8")  # type: ignore[index]
        cells[same] = add(held.reshape(len(same), len(block.fields), CELL), cells[same])
    other = [n for n in held_at if found[n][0] != text]  # type: ignore[index]
    if not other:
        return Block(block.fields, block.scope, block.interval, block.stamp, cells)
    for n in other:
        held_fields, held_cells = found[n]  # type: ignore[misc]
        names, merged = merge_row(
            fields_of(held_fields), cells_of(held_cells), block.fields, cells[n]
        )
        out.append(
            (
                block.scope[n],
                INTERVAL_NAMES[block.interval[n]],
                _sqlite_bucket(block.stamp[n]),
                fields_text(names),
                blob(merged),
            )
        )
    keep = np.ones(len(block.scope), bool)
    keep[other] = False
    kept = keep.tolist()
    return Block(
        block.fields,
        list(compress(block.scope, kept)),
        list(compress(block.interval, kept)),
        list(compress(block.stamp, kept)),
        cells[keep],
    )


def _rows(blocks: list[Block]) -> list[tuple[Any, ...]]:
    """The blocks' rows as SQLite binds them: scope, interval's name, bucket's text, the
    field names' text and the cells' blob."""
    rows: list[tuple[Any, ...]] = []
    for block in blocks:
        size = len(block.fields) * CELL * 8
        flat = np.ascontiguousarray(block.cells, dtype="<f8").reshape(len(block.scope), -1)
        rows += zip(
            block.scope,
            map(INTERVAL_NAMES.__getitem__, block.interval),
            map(_sqlite_bucket, block.stamp),
            repeat(fields_text(block.fields)),
            flat.view(f"V{size}").ravel().tolist(),  # each row's bytes
        )
    return rows


def _split_fresh(
    blocks: list[Block], stored_until: Mapping[str, datetime | None]
) -> tuple[list[Block], list[Block]]:
    """The blocks' rows whose scope is a device and whose bucket begins after its newest
    stored reading (fresh), and the others."""
    limits = {
        scope: -math.inf if last is None else math.floor(last.timestamp())
        for scope, last in stored_until.items()
    }
    fresh: list[Block] = []
    rest: list[Block] = []
    for block in blocks:
        mine = {scope: limits.get(scope, math.inf) for scope in set(block.scope)}
        if all(limit == math.inf for limit in mine.values()):
            rest.append(block)
            continue
        count = len(block.scope)
        limit = np.fromiter(map(mine.__getitem__, block.scope), np.float64, count)
        new = np.asarray(block.stamp, dtype=np.float64) > limit
        if new.all():
            fresh.append(block)
        elif not new.any():
            rest.append(block)
        else:
            for chosen, into in ((new, fresh), (~new, rest)):
                kept = chosen.tolist()
                into.append(
                    Block(
                        block.fields,
                        list(compress(block.scope, kept)),
                        list(compress(block.interval, kept)),
                        list(compress(block.stamp, kept)),
                        block.cells[chosen],
                    )
                )
    return fresh, rest


# A bucket's length in seconds, at least (a month: 28 days), to tell a dense run of keys.
_SPAN = {0: 86_400, 1: 3_600, 2: 28 * 86_400}


async def _stored(
    driver: Any, blocks: list[Block]
) -> dict[tuple[str, int, int], tuple[str, bytes]]:
    """The stored rows of the blocks' keys, by (scope, interval code, epoch second). A
    scope's keys of one interval that run on with few gaps (a batch's hours, days, months:
    the usual case) are read as one range of the primary key, whatever rows between them
    it holds; the others by key (json_each of their keys, each a search). Both ways cost
    SQLite less than a search a key alone."""
    runs: dict[tuple[str, int], list[int]] = {}  # (scope, interval) -> [low, high, count]
    for block in blocks:
        # A block's rows come scope by scope, each scope's in (interval, bucket) order:
        # each run of one (scope, interval) is a range of the primary key.
        sizes = [
            len(list(run)) for _, run in groupby(zip(block.interval, block.scope, strict=True))
        ]
        lasts = list(accumulate(sizes, initial=-1))[1:]
        firsts = [last - size + 1 for last, size in zip(lasts, sizes, strict=True)]
        stamps = block.stamp
        for first, last in zip(firsts, lasts, strict=True):
            key = (block.scope[first], block.interval[first])
            low, high = int(stamps[first]), int(stamps[last])
            run = runs.get(key)
            if run is None:
                runs[key] = [low, high, last - first + 1]
            else:
                run[0], run[1], run[2] = (
                    min(run[0], low),
                    max(run[1], high),
                    run[2] + last - first + 1,
                )
    sparse = {
        key
        for key, (low, high, count) in runs.items()
        if (high - low) // _SPAN[key[1]] > 2 * count + 16
    }
    stored: dict[tuple[str, int, int], tuple[str, bytes]] = {}
    for (scope, kind), (low, high, _) in runs.items():
        if (scope, kind) in sparse:
            continue
        cursor = await driver.execute(
            _STORED_RANGE, (scope, INTERVAL_NAMES[kind], _sqlite_bucket(low), _sqlite_bucket(high))
        )
        for bucket, fields, cells in await cursor.fetchall():
            stored[(scope, kind, _bucket_stamp(bucket))] = (fields, cells)
    if sparse:
        keys = [
            [scope, INTERVAL_NAMES[kind], _sqlite_bucket(stamp)]
            for block in blocks
            for scope, kind, stamp in zip(block.scope, block.interval, block.stamp, strict=True)
            if (scope, kind) in sparse
        ]
        cursor = await driver.execute(_STORED_ROLLUPS, (orjson.dumps(keys),))
        for scope, name, bucket, fields, cells in await cursor.fetchall():
            stored[(scope, INTERVAL_CODES[name], _bucket_stamp(bucket))] = (fields, cells)
    return stored


def sqlite_time(moment: datetime) -> str:
    """A UtcDateTime as SQLAlchemy writes it on SQLite (`2026-01-02 03:04:05.000006`, UTC):
    the same text, so keys and comparisons match what the ORM wrote. Checked readings are
    in UTC already: their text is the aware one without its `+00:00` (one call)."""
    if moment.tzinfo is UTC:
        return moment.isoformat(" ", "microseconds")[:-6]
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


def sqlite_times(moments: list[datetime]) -> list[str]:
    """sqlite_time of each of the moments, column-wise when all are in UTC (a batch's
    checked readings): their epoch microseconds (exact integer arithmetic, C-level maps)
    formatted by numpy, the date's T made a space; datetime.isoformat one at a time cost
    about a microsecond a reading."""
    if len(moments) < _COLUMN_TIMES or not all(map(is_, map(_ZONE, moments), repeat(UTC))):
        return list(map(sqlite_time, moments))
    micros = np.fromiter(
        map(floordiv, map(sub, moments, repeat(_EPOCH)), repeat(_MICROSECOND)),
        np.int64,
        len(moments),
    )
    text = np.datetime_as_string(micros.astype("datetime64[us]"), unit="us")
    if len(moments):
        text.view(np.uint32).reshape(len(moments), -1)[:, 10] = ord(" ")  # UCS-4 codes
    return text.tolist()  # type: ignore[no-any-return]


_COLUMN_TIMES = 8  # from this many, numpy's formatting costs less (1: 5.1 µs against 1.6)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_ZONE, _TIME = attrgetter("tzinfo"), attrgetter("time")
_SEQ, _VALUES = attrgetter("seq"), attrgetter("values")
_STAMPS: dict[datetime, str] = {}  # recent times' text (_stamp)
_STAMPS_KEPT = 20_000  # a few groups; a cleared one only formats again


def _stamp(moment: datetime) -> str:
    """sqlite_time, remembered: a group's readings share their receipt time, and their
    receipts name the readings' times again (an MQTT message of one reading: its time is
    the receipt's first and last). A datetime keeps its hash, so the second look-up is a
    dict hit; equal instants have one UTC text, whatever their zone."""
    text = _STAMPS.get(moment)
    if text is None:
        if len(_STAMPS) >= _STAMPS_KEPT:
            _STAMPS.clear()
        text = _STAMPS[moment] = sqlite_time(moment)
    return text


def _remember(moments: list[datetime]) -> list[str]:
    """The moments' text (sqlite_times), kept for _stamp: a receipt names its readings'
    first and last time again (an MQTT message of one reading: its own)."""
    texts = sqlite_times(moments)
    if len(_STAMPS) + len(moments) > _STAMPS_KEPT:
        _STAMPS.clear()
    _STAMPS.update(zip(moments, texts, strict=True))
    return texts


@functools.lru_cache(maxsize=65_536)
def _bucket_stamp(text: str) -> int:
    """A stored bucket's text (_sqlite_bucket's) as its epoch second; cached likewise."""
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


@functools.lru_cache(maxsize=65_536)
def _sqlite_bucket(stamp: int) -> str:
    """A bucket's epoch second as SQLite's text; cached, since the batches of a project's
    devices keep naming the same recent hours."""
    return sqlite_time(datetime.fromtimestamp(stamp, UTC))
