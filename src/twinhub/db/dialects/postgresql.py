"""PostgreSQL's ways (see twinhub.db.dialects): a server a round trip away, so a write's
statements go together where they can, and row and advisory locks let several processes
write at once.

Bulk inserts: an `executemany` INSERT of n rows costs PostgreSQL n executions of the
statement (a bind, an executor start and end each): for the ledger's group commit, where a
batch writes a few hundred rows across five or six tables, that was more of the server's
CPU than writing the rows. So the rows go as one array per column to
`INSERT ... SELECT * FROM unnest(...)`: one statement text per table and column set
(prepared once per connection), one execution per batch, whatever its size.
"""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    Connection,
    Date,
    Float,
    Table,
    Text,
    bindparam,
    case,
    cast,
    func,
    insert,
    null,
    text,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect as SqlDialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeEngine

from twinhub.db.dialects import (
    DAY_DIGEST_FORM,
    KEEP_DAYS,
    KEPT_DAYS,
    RAW_READINGS,
    READING_COUNTS,
    STOVE_FACTS,
    SUBMISSION_FACTS,
    DayRollups,
    DaySpan,
    Dialect,
    SubmissionAsks,
    causes,
    one_by_one,
    pivot_wide,
)

# One text whatever the batch's size (prepared once per connection).
_SUBMISSION_FACTS = SUBMISSION_FACTS.format(
    json="controller::text",
    assets="= ANY($1::text[])",
    linked="= ANY($1::text[])",
    project="$2::text",
    claimed="= ANY($3::text[])",
    periods="= ANY($4::text[])",
    ids="= ANY($5::text[])",
    collection="$6::integer",
    agents="= ANY($7::text[])",
)
_MIGRATION_LOCK = 0x7477696E  # "twin": any constant shared by every twinhub process
# One text whatever the batch's size (prepared once per connection), each key an index
# search. An OR term per pair, as on SQLite, was a new statement for every batch size, and
# a plan that scanned the table tested every term on every row: 5.7 ms a batch at 3,000
# domains. (The batch plans it for the table as it is: Ledger._open, docs/ledger.md.)
_HOLDERS = (
    "SELECT did, class_did, serial FROM domains WHERE did = ANY($1::text[]) UNION ALL "
    "SELECT d.did, d.class_did, d.serial "
    "FROM unnest($2::text[], $3::text[]) AS k(class_did, serial) "
    "JOIN domains d ON d.class_did = k.class_did AND d.serial = k.serial"
)


_HOLD_SPANS = (  # the spans as one array per field, each span's days a series
    "INSERT INTO credited_days (device, day, stove_did, project_did, period_id, claim_id, "
    "created_at) "
    "SELECT s.device, g.day::date, s.stove, s.project, NULL, s.claim, :now "
    "FROM unnest(CAST(:devices AS text[]), CAST(:stoves AS text[]), CAST(:projects AS text[]), "
    "CAST(:claims AS text[]), CAST(:firsts AS date[]), CAST(:lasts AS date[])) "
    "AS s(device, stove, project, claim, first, last) "
    "CROSS JOIN LATERAL generate_series(s.first, s.last, interval '1 day') AS g(day)"
)
# SQLSTATE classes (the first two characters) by what they mean for the caller
# (db/failures.py): PostgreSQL's appendix "PostgreSQL Error Codes".
_FAILURE_BY_CLASS = {
    "22": "data",  # data exception: out of range, invalid text (a NUL), a bad date
    "23": "conflict",  # integrity constraint violation (a row no partition takes, too)
    "40": "busy",  # transaction rollback: serialization failure, deadlock
    "55": "busy",  # object not in prerequisite state: a lock not available
    "08": "unreachable",  # connection exception
    "53": "unreachable",  # insufficient resources: too many connections, disk full
    "57": "unreachable",  # operator intervention: shutdown, statement timeout
    "58": "unreachable",  # system error (I/O)
    "XX": "unreachable",  # internal error, data corrupted
}


def _sqlstate(error: BaseException) -> str | None:
    for cause in causes(error):
        state = getattr(cause, "sqlstate", None)
        if isinstance(state, str) and len(state) == 5:
            return state
    return None


class PostgreSQL(Dialect):
    name = "postgresql"
    joins_statements = True
    write_is_snapshot = False
    seq_is_key = False

    def insert(self, table: Any) -> Insert:
        return postgresql.insert(table)

    def utc_day(self, column: Any) -> ColumnElement[Any]:
        return cast(func.timezone("UTC", column), Date)

    def json_number(self, column: Any, path: tuple[str, ...]) -> ColumnElement[Any]:
        return case(
            (func.jsonb_typeof(column[path]) == "number", column[path].as_float()),
            else_=null(),
        )

    def lock_migrations(self, connection: Connection) -> None:
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})

    async def begin_write_batch(self, session: AsyncSession, deferred: bool) -> None:
        if deferred:
            # A batch opened by a create: plan its statements for the tables as they
            # are now. A plan kept per connection (PostgreSQL's generic plan after five
            # executions) was made when the table was small and scans it whole ever
            # after, until an ANALYZE, which a young registry growing fast has not had:
            # the holder check of a batch of creates, a sequential scan, took 2.6 ms at
            # 2,000 domains and grew with the table. Not for other batches: planning
            # every statement anew cost claim approvals a sixth of their rate.
            await session.execute(text("SET LOCAL plan_cache_mode = force_custom_plan"))

    async def begin_snapshot(self, session: AsyncSession) -> None:
        # READ COMMITTED takes a snapshot per statement; REPEATABLE READ one for the whole
        # transaction, at its first statement after this.
        await session.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"))

    async def advisory_lock(self, session: AsyncSession, key: int) -> None:
        await session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})

    async def exclusive(
        self,
        session: AsyncSession,
        key: int,
        wait: bool,
        worth: Callable[[], Awaitable[bool]],
    ) -> bool:
        if wait:
            await session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
            return True
        locked = await session.scalar(text("SELECT pg_try_advisory_xact_lock(:key)"), {"key": key})
        return bool(locked)  # false: another process holds it right now

    def for_claiming(self, query: Any) -> Any:
        return query.with_for_update(skip_locked=True)

    async def insert_rows(
        self, connection: AsyncConnection, table: Table, rows: list[dict[str, Any]]
    ) -> None:
        plan = _unnest_plan(table, tuple(rows[0]), connection.dialect) if len(rows) > 1 else None
        if plan is None:
            await connection.execute(insert(table), rows)
            return
        await connection.exec_driver_sql(_unnest_insert(plan, 1), tuple(_arrays(plan, rows)))

    async def hold_day_spans(
        self, session: AsyncSession, table: Table, spans: list[DaySpan], now: datetime
    ) -> None:
        """The spans as one array per field; generate_series makes each span's days."""
        devices, stoves, projects, claims, firsts, lasts = map(list, zip(*spans, strict=True))
        statement = text(_HOLD_SPANS).bindparams(bindparam("now", type_=table.c.created_at.type))
        await session.execute(
            statement,
            {
                "devices": devices,
                "stoves": stoves,
                "projects": projects,
                "claims": claims,
                "firsts": firsts,
                "lasts": lasts,
                "now": now,
            },
        )

    async def insert_together(
        self,
        connection: AsyncConnection,
        parts: list[tuple[Table, list[dict[str, Any]]]],
        then: tuple[str, tuple[Any, ...]],
    ) -> None:
        """All of it one statement, each INSERT a WITH clause of the last: one round trip,
        where a statement each left the writer waiting for the database once per table.
        (PostgreSQL checks foreign keys at the statement's end, so a part may refer to rows
        of an earlier one.) One statement each where a part's rows cannot go as arrays."""
        dialect = connection.dialect
        plans = [_unnest_plan(table, tuple(rows[0]), dialect) for table, rows in parts]
        if any(plan is None for plan in plans):
            await one_by_one(self, connection, parts, then)
            return
        sql, arguments = then
        clauses, values, position = [], [], 1
        for n, ((_, rows), plan) in enumerate(zip(parts, plans, strict=True)):
            assert plan is not None
            clauses.append(f"p{n} AS ({_unnest_insert(plan, position)})")
            values += _arrays(plan, rows)
            position += len(plan[2])
        marks = [f"${position + n}" for n in range(len(arguments))]
        statement = sql.format(*marks)
        if clauses:
            statement = f"WITH {', '.join(clauses)} {statement}"
        await connection.exec_driver_sql(statement, (*values, *arguments))

    def failure_of(self, error: BaseException) -> str | None:
        """By the SQLSTATE asyncpg carries: its own client-side refusals of a value (an
        integer past int32, a string with NUL) come as class 22 too. Any other state is
        the registry's own fault (a statement that does not parse: class 42)."""
        state = _sqlstate(error)
        if state is None:
            import asyncpg

            # asyncpg's own InterfaceError without a state: the connection closed or lost.
            lost = any(isinstance(cause, asyncpg.InterfaceError) for cause in causes(error))
            return "unreachable" if lost else None
        return _FAILURE_BY_CLASS.get(state[:2], "fault")

    def rollup_columns(self) -> tuple[TypeEngine[Any], TypeEngine[Any]]:
        # Arrays, so the upsert adds a stored row and a new one in SQL (telemetry/dialects).
        return postgresql.ARRAY(Text()), postgresql.ARRAY(Float(precision=53))

    def bind_rollup(self, fields: tuple[str, ...] | None, cells: bytes | None) -> Any:
        if fields is not None:
            return list(fields)
        if cells is None:
            return None
        return list(struct.unpack(f"<{len(cells) // 8}d", cells))

    def driver_errors(self) -> tuple[type[BaseException], ...]:
        import asyncpg

        return (asyncpg.PostgresError, asyncpg.InterfaceError)

    async def holders(
        self, raw: Any, dids: list[str], pairs: list[tuple[str, str]]
    ) -> list[tuple[Any, ...]]:
        return await raw.driver_connection.fetch(  # type: ignore[no-any-return]
            _HOLDERS,
            dids,
            [protocol for protocol, _ in pairs],
            [serial for _, serial in pairs],
        )

    async def submission_facts(self, raw: Any, asks: SubmissionAsks) -> list[tuple[Any, ...]]:
        assets, claimed, periods, ids, agents = asks.lists()
        return await raw.driver_connection.fetch(  # type: ignore[no-any-return]
            _SUBMISSION_FACTS, assets, asks.project, claimed, periods, ids, asks.collection, agents
        )

    async def day_rollups(
        self,
        raw: Any,
        scopes: list[str],
        columns: tuple[tuple[str, str], ...],
        low: datetime,
        high: datetime,
    ) -> DayRollups:
        sql = (  # one wide row a scope and day (0031), the pivot in Python (pivot_wide)
            "SELECT scope, to_char(bucket AT TIME ZONE 'UTC', 'YYYY-MM-DD'), "
            "array_to_string(fields, E'\\x1f'), array_send(cells) FROM telemetry_rollups "
            "WHERE scope = ANY($1::text[]) AND interval = 'day' AND bucket >= $2 "
            "AND bucket < $3 ORDER BY scope, bucket"
        )
        found = await raw.driver_connection.fetch(sql, scopes, low, high)
        return pivot_wide(found, columns, sent=True)

    async def stove_facts(self, raw: Any, dids: list[str]) -> list[tuple[Any, ...]]:
        sql = STOVE_FACTS.format("= ANY($1::text[])")
        return await raw.driver_connection.fetch(sql, dids)  # type: ignore[no-any-return]

    async def kept_days(
        self, raw: Any, dids: list[str], low: datetime, high: datetime, start: date, end: date
    ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        driver = raw.driver_connection
        counts = await driver.fetch(
            READING_COUNTS.format(dids="= ANY($1::text[])", low="$2", high="$3"), dids, low, high
        )
        sql = KEPT_DAYS.format(
            days="k.days::text",
            dids="= ANY($1::text[])",
            start="$2",
            end="$3",
            form=DAY_DIGEST_FORM,
        )
        kept = await driver.fetch(sql, dids, start.replace(day=1), end.replace(day=1))
        return counts, kept  # records index and unpack as tuples do

    async def keep_days(self, raw: Any, rows: list[tuple[int, date, str]]) -> None:
        source = (
            "SELECT device_id, month, $4::integer, days::jsonb"
            " FROM unnest($1::integer[], $2::date[], $3::text[]) AS u(device_id, month, days)"
        )
        # jsonb's || merges two objects, the right one's keys winning.
        sql = KEEP_DAYS.format(source, "telemetry_day_digests.days || excluded.days")
        columns = [list(column) for column in zip(*rows, strict=True)]
        await raw.driver_connection.execute(sql, *columns, DAY_DIGEST_FORM)

    async def raw_readings(
        self, raw: Any, dids: list[str], low: datetime, high: datetime
    ) -> list[tuple[Any, ...]]:
        sql = RAW_READINGS.format(
            values='r."values"::text', dids="= ANY($1::text[])", low="$2", high="$3"
        )
        found = await raw.driver_connection.fetch(sql, dids, low, high)
        return [
            (
                did,
                seq,
                time.astimezone(UTC).isoformat(),
                values,
                None if received is None else received.astimezone(UTC).isoformat(),
                receipt,
            )
            for did, seq, time, values, received, receipt in found
        ]


def _arrays(plan: _Plan, rows: list[dict[str, Any]]) -> list[list[Any]]:
    """One array per column: the rows' values, through the column's bind processor."""
    arrays = []
    for name, process in plan[2]:
        values = [row[name] for row in rows]
        arrays.append([process(value) for value in values] if process else values)
    return arrays


def _unnest_insert(plan: _Plan, first: int) -> str:
    """INSERT ... SELECT * FROM unnest($first::type[], ...)."""
    target, casts, _ = plan
    arrays = ", ".join(f"${first + n}::{cast}[]" for n, cast in enumerate(casts))
    return f"INSERT INTO {target} SELECT * FROM unnest({arrays})"  # noqa: S608 (metadata only)


# The table and its columns, each column's SQL type, and per column its bind processor.
_Plan = tuple[str, list[str], list[tuple[str, Any]]]


@lru_cache(maxsize=256)
def _unnest_plan(table: Table, keys: tuple[str, ...], dialect: SqlDialect) -> _Plan | None:
    """What `_unnest_insert` and `_arrays` need; None where `executemany` must stay: a
    column left out that SQLAlchemy would fill in Python."""
    for column in table.columns:
        if column.key not in keys and (column.default is not None or column.onupdate is not None):
            return None
    names, casts, columns = [], [], []
    for key in keys:
        column = table.columns[key]
        names.append(dialect.identifier_preparer.quote(column.name))
        casts.append(column.type.compile(dialect=dialect))
        columns.append((key, column.type.dialect_impl(dialect).bind_processor(dialect)))
    # Names and types come from the table's metadata, never from a request.
    target = f"{dialect.identifier_preparer.format_table(table)} ({', '.join(names)})"
    return target, casts, columns
