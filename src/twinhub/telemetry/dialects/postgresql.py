"""PostgreSQL's telemetry writes (see twinhub.telemetry.dialects): readings COPYed straight
into their table when no seq can be stored already, else into a staging table private to the
connection, the rollup cells (summed in Python, column-wise)
upserted by ONE statement from arrays, monthly partitions of the readings, the devices'
rows locked FOR UPDATE in id order."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, IntegrityError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

from twinhub.mrv.telemetry_schema import Reading, dumps
from twinhub.telemetry.columns import group_columns
from twinhub.telemetry.dialects import TelemetryDialect
from twinhub.telemetry.rows import (
    Batch,
    DeviceState,
    RollupPlan,
    RollupRecord,
    next_month,
)
from twinhub.telemetry.wide import (
    CELL,
    Block,
    blocks_of,
    fields_text,
    records_columns,
    scoped_columns,
)

# PostgreSQL bulk writes: staging tables private to the connection, emptied at commit.
_STAGE_WIDE = (
    "CREATE TEMP TABLE IF NOT EXISTS telemetry_wide_stage (scope integer, kind integer,"
    " stamp bigint, fields integer, cells float8[]) ON COMMIT DELETE ROWS"
)
_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags, no extension
_COPY_TRAILER = b"\xff\xff"
_STAGE_READINGS = (
    "CREATE TEMP TABLE IF NOT EXISTS telemetry_stage (device_id integer, seq bigint,"
    ' time timestamptz, "values" jsonb, received_at timestamptz, receipt_id bigint)'
    " ON COMMIT DELETE ROWS;" + _STAGE_WIDE
)
_STAGE_COLUMNS = ["device_id", "seq", "time", "values", "received_at", "receipt_id"]
_RECEIPT_IDS = (
    "SELECT nextval(pg_get_serial_sequence('telemetry_receipts', 'id')) FROM generate_series(1, $1)"
)
_RECEIPT_COLUMNS = [
    "id",
    "device_id",
    "received_at",
    "first_time",
    "last_time",
    "payload",
    "signatures",
]
_INSERT_QUARANTINE = (
    'INSERT INTO telemetry_quarantine (device_did, seq, time, received_at, "values", reason,'
    " source, receipt_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING"
)
# The staged readings whose (device, seq) the device stored before (whatever their time: the
# key holds the time too, for the partitions) are returned, the rest inserted: one statement,
# one round trip. OFFSET 0 keeps the EXISTS a per-row probe of the (device_id, seq) index:
# turned into a semi-join (the staging table has no statistics) it hashed every stored
# reading instead.
_INSERT_STAGED = """
WITH stored AS (
    SELECT s.device_id, s.seq FROM telemetry_stage s
    WHERE EXISTS (
        SELECT 1 FROM telemetry_readings r WHERE r.device_id = s.device_id AND r.seq = s.seq
        OFFSET 0
    )
), inserted AS (
    INSERT INTO telemetry_readings (device_id, seq, time, "values", received_at, receipt_id)
    SELECT s.device_id, s.seq, s.time, s."values", s.received_at, s.receipt_id
    FROM telemetry_stage s
    WHERE NOT EXISTS (SELECT 1 FROM stored d WHERE d.device_id = s.device_id AND d.seq = s.seq)
    ON CONFLICT DO NOTHING
)
SELECT device_id, seq FROM stored
"""
# Each device's highest stored seq, read after its row is locked (so no other transaction
# adds to it meanwhile, and this statement's snapshot sees what the last holder committed):
# a seq above it cannot have been stored. One index descent per device and partition.
_STORED_SEQS = (
    "SELECT d.id, (SELECT max(r.seq) FROM telemetry_readings r WHERE r.device_id = d.id)"
    " FROM unnest($1::integer[]) AS d(id)"
)
# The rollups of a group's inserted readings: each batch's cells summed in Python
# (telemetry/columns.py, column-wise over the batch), a scope fed by several batches added
# up there too, made wide rows (telemetry/wide.py: one per scope, interval and bucket) and
# COPYed in binary into telemetry_wide_stage (built column-wise with numpy: the scope, the
# interval and the field list by rank, $1 and $2 naming them, and the cells as float8[]: no
# float as text). One statement upserts them in key order (scope, interval, bucket: the
# ranks follow Python's sort, which is code point order), so concurrent transactions
# lock rollup rows in one order (no deadlocks), and adds a row to the one stored in SQL:
# cell by cell when their field lists agree (the usual case), else over the union of their
# fields in sorted order (COLLATE "C": code points, as Python sorts). The stored figures
# come first in each sum, as `t.sum + excluded.sum` did. Rows of up to _SPELLED_FIELDS fields
# whose field lists agree (nearly all) are added by an array spelled out cell by cell
# (_same_fields): a third cheaper in the backend than unnest and array_agg per row.
_SPELLED_FIELDS = 6
_UPSERT_WIDE_TEMPLATE = """
INSERT INTO telemetry_rollups AS t (scope, "interval", bucket, fields, cells)
SELECT ($1::text[])[s.scope + 1], (ARRAY['day', 'hour', 'month'])[s.kind + 1],
       to_timestamp(s.stamp), string_to_array(($2::text[])[s.fields + 1], E'\\x1f'), s.cells
FROM telemetry_wide_stage s
ORDER BY s.scope, s.kind, s.stamp
ON CONFLICT (scope, "interval", bucket) DO UPDATE SET
  fields = CASE WHEN t.fields = excluded.fields THEN t.fields ELSE (
    SELECT array_agg(u.f ORDER BY u.f COLLATE "C")
    FROM (SELECT DISTINCT unnest(t.fields || excluded.fields) AS f) u
  ) END,
  cells = CASE WHEN t.fields = excluded.fields THEN CASE cardinality(t.cells) {same} ELSE (
    SELECT array_agg(
      CASE WHEN c.k % 4 IN (1, 2) THEN c.a + c.b
           WHEN c.k % 4 = 3 THEN least(c.a, c.b) ELSE greatest(c.a, c.b) END ORDER BY c.k)
    FROM unnest(t.cells, excluded.cells) WITH ORDINALITY AS c(a, b, k)
  ) END ELSE (
    SELECT array_agg(
      CASE WHEN p.ia IS NULL THEN excluded.cells[4 * p.ib - 4 + j.j]
           WHEN p.ib IS NULL THEN t.cells[4 * p.ia - 4 + j.j]
           WHEN j.j <= 2 THEN t.cells[4 * p.ia - 4 + j.j] + excluded.cells[4 * p.ib - 4 + j.j]
           WHEN j.j = 3 THEN least(t.cells[4 * p.ia - 4 + j.j], excluded.cells[4 * p.ib - 4 + j.j])
           ELSE greatest(t.cells[4 * p.ia - 4 + j.j], excluded.cells[4 * p.ib - 4 + j.j]) END
      ORDER BY u.f COLLATE "C", j.j)
    FROM (SELECT DISTINCT unnest(t.fields || excluded.fields) AS f) u
    CROSS JOIN generate_series(1, 4) AS j(j)
    CROSS JOIN LATERAL (
      SELECT array_position(t.fields, u.f) AS ia, array_position(excluded.fields, u.f) AS ib
    ) p
  ) END
"""


def _same_fields(cells: int) -> str:
    """The sum of a stored row and a new one of the same `cells` cells, as one array
    expression: per field (count, sum, min, max), the counts and sums added, the least of
    the minimums and the greatest of the maximums."""
    spelled = []
    for i in range(1, cells + 1):
        a, b = f"t.cells[{i}]", f"excluded.cells[{i}]"
        kind = (i - 1) % CELL
        spelled.append(
            f"{a} + {b}" if kind < 2 else f"{'least' if kind == 2 else 'greatest'}({a}, {b})"
        )
    return "ARRAY[" + ", ".join(spelled) + "]"


_UPSERT_WIDE = _UPSERT_WIDE_TEMPLATE.replace(
    "{same}",
    " ".join(
        f"WHEN {CELL * n} THEN {_same_fields(CELL * n)}" for n in range(1, _SPELLED_FIELDS + 1)
    ),
)
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
# One statement for the group's devices (the rows are locked already): executemany ran the
# UPDATE once a device, a statement's overhead in the backend each (a group of MQTT
# messages names a few hundred devices).
_SAVE_DEVICES = (
    "UPDATE telemetry_devices AS d SET last_time = u.last_time, last_seq = u.last_seq,"
    " latest = u.latest::jsonb, meter = u.meter, readings = u.readings, updated_at = $7"
    " FROM unnest($1::integer[], $2::timestamptz[], $3::bigint[], $4::text[], $5::float8[],"
    " $6::bigint[]) AS u(id, last_time, last_seq, latest, meter, readings) WHERE d.id = u.id"
)
_INSERT_EVENT = (
    "INSERT INTO events (event_id, type, subject, actor, data, ledger_height, occurred_at,"
    " causation_id, correlation_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
)


class PostgreSQLTelemetry(TelemetryDialect):
    """See the module docstring."""

    # The sequence hands out each id once, transaction or not: a store takes a block and
    # spends it over its next groups (a round trip a group saved; ids of a block a process
    # does not spend are a gap, as a rolled-back nextval's are).
    receipt_id_block = 4096

    def transaction(self, driver: Any) -> AbstractAsyncContextManager[Any]:
        return driver.transaction()  # asyncpg's: commits on leaving, rolls back on error

    async def join(self, connection: AsyncConnection, driver: Any) -> None:
        # SQLAlchemy's asyncpg adapter sends BEGIN lazily, with the transaction's first
        # statement: were that the driver work, asyncpg would run it in autocommit (each
        # statement committed alone, a staged temporary table emptied at once).
        if not driver.is_in_transaction():
            await connection.exec_driver_sql("SELECT 1")

    async def ensure_partitions(
        self,
        sessions: async_sessionmaker[AsyncSession],
        times: Iterable[datetime],
        made: set[str],
    ) -> None:
        """Monthly partitions for every month `times` touch, made once per process."""
        months = {
            datetime(t.year, t.month, 1, tzinfo=UTC)
            for t in (t if t.tzinfo is UTC else t.astimezone(UTC) for t in times)
        }
        for month in sorted(months):
            name = f"telemetry_readings_p{month:%Y%m}"
            if name in made:
                continue
            ddl = (
                f"CREATE TABLE IF NOT EXISTS {name} PARTITION OF telemetry_readings "
                f"FOR VALUES FROM ('{month.isoformat()}') TO ('{next_month(month).isoformat()}')"
            )
            try:
                async with sessions.begin() as session:
                    await session.execute(text(ddl))
            except (IntegrityError, ProgrammingError, DBAPIError) as error:
                # Another process made it a moment ago (a race IF NOT EXISTS does not cover).
                if "already exists" not in str(error):
                    raise
            made.add(name)

    async def drop_partitions(
        self,
        sessions: async_sessionmaker[AsyncSession],
        before: datetime,
        made: set[str],
        kept: list[tuple[datetime, datetime]],
    ) -> int:
        dropped = 0
        async with sessions.begin() as session:
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
                end = next_month(month)
                if end <= before and not any(s < end and e > month for s, e in kept):
                    await session.execute(text(f"DROP TABLE {name}"))
                    made.discard(name)
                    dropped += 1
        return dropped

    async def lock_devices(
        self, driver: Any, new: list[str], dids: list[str], now: datetime
    ) -> dict[str, DeviceState]:
        if new:
            await driver.execute(_ADD_DEVICES, new, now)
        found = await driver.fetch(_LOCK_DEVICES, dids)
        return {r[1]: DeviceState(r[0], r[2], r[3], r[4] or {}, r[5], r[6] or 0) for r in found}

    async def save_devices(self, driver: Any, states: list[DeviceState], now: datetime) -> None:
        await driver.execute(
            _SAVE_DEVICES,
            [s.id for s in states],
            [s.last_time for s in states],
            [s.last_seq for s in states],
            [dumps(s.latest) for s in states],
            [s.meter for s in states],
            [s.readings for s in states],
            now,
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
                r["occurred_at"],
                r["causation_id"],
                r["correlation_id"],
            )
            for r in rows
        ]
        await driver.executemany(_INSERT_EVENT, records)

    async def insert_readings(
        self, driver: Any, items: list[tuple[int, Reading, datetime, int | None]], staged: bool
    ) -> set[tuple[int, int]]:
        """When every reading's seq is above its device's highest stored one (devices
        count up: the usual case), COPY straight into the readings (nothing can be stored
        already); else COPY into the staging table, then one statement: the device's used
        seqs returned, the rest inserted (_INSERT_STAGED). The direct COPY saves the
        backend the staging rows, a probe per reading and the INSERT ... SELECT."""
        if not staged:
            await driver.execute(_STAGE_READINGS)
        if not items:
            return set()
        records = [(d, r.seq, r.time, dumps(r.values), at, n) for d, r, at, n in items]
        highest = dict(await driver.fetch(_STORED_SEQS, sorted({item[0] for item in items})))
        if all(highest[d] is None or r.seq > highest[d] for d, r, _, _ in items):
            await driver.copy_records_to_table(
                "telemetry_readings", records=records, columns=_STAGE_COLUMNS
            )
            return set()
        await driver.copy_records_to_table(
            "telemetry_stage", records=records, columns=_STAGE_COLUMNS
        )
        return {(d, q) for d, q in await driver.fetch(_INSERT_STAGED)}

    async def receipt_ids(self, driver: Any, count: int) -> list[int]:
        return [row[0] for row in await driver.fetch(_RECEIPT_IDS, count)]

    async def insert_receipts(self, driver: Any, rows: list[tuple[Any, ...]]) -> None:
        """COPY (binary): a group's receipts, one a message, in one round trip (executemany
        bound and sent each row as a statement of its own)."""
        await driver.copy_records_to_table(
            "telemetry_receipts",
            records=[(*r[:6], dumps(r[6])) for r in rows],
            columns=_RECEIPT_COLUMNS,
        )

    async def insert_quarantine(self, driver: Any, rows: list[tuple[Any, ...]]) -> None:
        await driver.executemany(_INSERT_QUARANTINE, [(*r[:4], dumps(r[4]), *r[5:]) for r in rows])

    def plan(
        self,
        plan: RollupPlan,
        planned: set[int],
        device: int,
        batch: Batch,
        inserted: list[Reading],
    ) -> None:
        """The batch's cells, summed here column-wise; the database joins them to the
        device and its scopes."""
        part = len(plan.parts)
        plan.parts.append((inserted, batch.numeric, batch.counted))  # summed in roll_up
        for scope in dict.fromkeys((batch.did, *batch.scopes)):
            plan.scopes.append((part, scope))

    async def roll_up(self, driver: Any, plan: RollupPlan) -> None:
        """The group's wide rows COPYed, then one statement (see _UPSERT_WIDE)."""
        await _upsert_blocks(
            driver, blocks_of(scoped_columns(group_columns(plan.parts), plan.scopes))
        )

    async def add_rollups(self, driver: Any, records: list[RollupRecord]) -> None:
        await driver.execute(_STAGE_WIDE)
        await _upsert_blocks(driver, blocks_of(records_columns(records).items()))


async def _upsert_blocks(driver: Any, blocks: list[Block]) -> None:
    """The blocks' rows COPYed in binary (each block's rows of one size: a numpy record
    array, no Python object per cell), then one statement (see _UPSERT_WIDE)."""
    if not blocks:
        return
    scopes = sorted({scope for block in blocks for scope in block.scope})
    rank = {scope: n for n, scope in enumerate(scopes)}
    parts = [_COPY_HEADER]
    for number, block in enumerate(blocks):
        size = len(block.fields) * CELL
        rows = np.empty(len(block.scope), _copy_row(size))
        rows["count"] = 5
        for name, width in (("scope", 4), ("kind", 4), ("stamp", 8), ("fields", 4)):
            rows[f"{name}_size"] = width
        rows["scope"] = [rank[scope] for scope in block.scope]
        rows["kind"] = block.interval
        rows["stamp"] = block.stamp
        rows["fields"] = number
        rows["cells_size"] = 20 + 12 * size
        rows["ndim"], rows["flags"], rows["oid"] = 1, 0, 701  # float8
        rows["dim"], rows["lbound"] = size, 1
        rows["cells"]["size"] = 8
        rows["cells"]["value"] = block.cells.reshape(len(block.scope), size)
        parts.append(rows.tobytes())
    parts.append(_COPY_TRAILER)
    await driver.copy_to_table(
        "telemetry_wide_stage",
        source=memoryview(b"".join(parts)),  # a buffer, not bytes (asyncpg: a file's path)
        format="binary",
    )
    await driver.execute(_UPSERT_WIDE, scopes, [fields_text(block.fields) for block in blocks])


@lru_cache(maxsize=64)
def _copy_row(size: int) -> np.dtype[Any]:
    """A telemetry_wide_stage row in COPY's binary format whose cells hold `size` floats:
    the number of columns, then each column's length and big-endian value."""
    return np.dtype(
        [
            ("count", ">i2"),
            *(
                (
                    pair
                    for name, kind in (
                        ("scope", ">i4"),
                        ("kind", ">i4"),
                        ("stamp", ">i8"),
                        ("fields", ">i4"),
                    )
                    for pair in ((f"{name}_size", ">i4"), (name, kind))
                )
            ),
            ("cells_size", ">i4"),
            ("ndim", ">i4"),
            ("flags", ">i4"),
            ("oid", ">i4"),
            ("dim", ">i4"),
            ("lbound", ">i4"),
            ("cells", [("size", ">i4"), ("value", ">f8")], (size,)),
        ]
    )
