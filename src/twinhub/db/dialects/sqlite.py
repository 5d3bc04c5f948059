"""SQLite's ways (see twinhub.db.dialects): in process, one writer at a time, whose write
lock (BEGIN IMMEDIATE) is what PostgreSQL's row and advisory locks are elsewhere."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime
from functools import cache
from typing import Any

import orjson
from sqlalchemy import (
    Connection,
    LargeBinary,
    Table,
    Text,
    bindparam,
    case,
    func,
    insert,
    null,
    text,
)
from sqlalchemy.dialects import sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.elements import ColumnElement, TextClause
from sqlalchemy.types import TypeEngine

from twinhub.db.dialects import (
    DAY_DIGEST_FORM,
    KEEP_DAYS,
    KEPT_DAYS,
    RAW_READINGS,
    READING_COUNTS,
    ROLLUP_FIELD_SEPARATOR,
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

_HOLD_SPANS = (  # the spans: a JSON array of [device, stove, project, claim, first, last]
    "INSERT INTO credited_days (device, day, stove_did, project_did, period_id, claim_id, "
    "created_at) WITH RECURSIVE s AS (SELECT "
    "json_extract(value, '$[0]') AS device, json_extract(value, '$[1]') AS stove, "
    "json_extract(value, '$[2]') AS project, json_extract(value, '$[3]') AS claim, "
    "json_extract(value, '$[4]') AS first, json_extract(value, '$[5]') AS last "
    "FROM json_each(:spans)), d(device, stove, project, claim, day, last) AS ("
    "SELECT device, stove, project, claim, first, last FROM s UNION ALL "
    "SELECT device, stove, project, claim, date(day, '+1 day'), last FROM d WHERE day < last) "
    "SELECT device, day, stove, project, NULL, claim, :now FROM d"
)
_BEGIN_IMMEDIATE = text("BEGIN IMMEDIATE")


@cache
def _hold_spans(created_at: TypeEngine[Any]) -> TextClause:
    """`_HOLD_SPANS` as a statement, built once (every batch of approvals runs it)."""
    return text(_HOLD_SPANS).bindparams(bindparam("now", type_=created_at))


@cache
def _insert(table: Table) -> Insert:
    """A table's plain INSERT, built once (a ledger batch runs a few)."""
    return insert(table)


# SQLite's primary result codes (https://sqlite.org/rescode.html) by what they mean for
# the caller (db/failures.py); any other code is the registry's own fault (SQLITE_ERROR: a
# statement that does not parse, a missing table).
_FAILURE_BY_CODE = {
    5: "unreachable",  # SQLITE_BUSY: another writer holds the file past the busy timeout
    6: "unreachable",  # SQLITE_LOCKED
    7: "unreachable",  # SQLITE_NOMEM
    8: "unreachable",  # SQLITE_READONLY
    9: "unreachable",  # SQLITE_INTERRUPT: the statement's deadline (db/engine.py)
    10: "unreachable",  # SQLITE_IOERR
    11: "unreachable",  # SQLITE_CORRUPT
    13: "unreachable",  # SQLITE_FULL
    14: "unreachable",  # SQLITE_CANTOPEN
    15: "unreachable",  # SQLITE_PROTOCOL
    26: "unreachable",  # SQLITE_NOTADB
    18: "data",  # SQLITE_TOOBIG
    20: "data",  # SQLITE_MISMATCH
    25: "data",  # SQLITE_RANGE
    19: "conflict",  # SQLITE_CONSTRAINT
}


_BEGIN_IMMEDIATE = text("BEGIN IMMEDIATE")  # built once: every write batch begins with it


class SQLite(Dialect):
    name = "sqlite"
    joins_statements = False
    write_is_snapshot = True
    seq_is_key = True

    def insert(self, table: Any) -> Insert:
        return sqlite.insert(table)

    def utc_day(self, column: Any) -> ColumnElement[Any]:
        return func.date(column)

    def json_number(self, column: Any, path: tuple[str, ...]) -> ColumnElement[Any]:
        where = "$" + "".join(f".{key}" for key in path)
        return case(
            (func.json_type(column, where).in_(("real", "integer")), column[path].as_float()),
            else_=null(),
        )

    def lock_migrations(self, connection: Connection) -> None:
        """Nothing: SQLite's own write lock serialises the migrations."""

    async def begin_write_batch(self, session: AsyncSession, deferred: bool) -> None:
        # Take SQLite's write lock now (as FOR UPDATE does on PostgreSQL), so the
        # savepoints below nest in this transaction and another process's writer
        # waits for the whole batch rather than interleaving.
        await session.execute(_BEGIN_IMMEDIATE)

    async def begin_snapshot(self, session: AsyncSession) -> None:
        # sqlite3 opens no transaction for a read: each SELECT would see the newest commit.
        # A deferred BEGIN holds the state its first read sees (WAL) until the session ends.
        await session.execute(text("BEGIN"))

    async def advisory_lock(self, session: AsyncSession, key: int) -> None:
        """Nothing: the caller's write lock excludes every other writer already."""

    async def exclusive(
        self,
        session: AsyncSession,
        key: int,
        wait: bool,
        worth: Callable[[], Awaitable[bool]],
    ) -> bool:
        # The reads after this must be of the transaction that writes, under the writer
        # lock (sqlite3 would begin it only at the first write: a read before it could see
        # another process's old state). Looked for first, so that a pass with nothing to
        # do never takes the lock.
        if not await worth():
            return False
        await session.execute(text("BEGIN IMMEDIATE"))
        return True

    def for_claiming(self, query: Any) -> Any:
        return query  # one writer at a time: nobody else claims meanwhile

    async def insert_rows(
        self, connection: AsyncConnection, table: Table, rows: list[dict[str, Any]]
    ) -> None:
        # `executemany` runs in process: it stays as it is.
        await connection.execute(_insert(table), rows)

    async def hold_day_spans(
        self, session: AsyncSession, table: Table, spans: list[DaySpan], now: datetime
    ) -> None:
        """The spans as one JSON text; a recursive WITH makes each span's days (stored as
        SQLite's Date keeps them: ISO text)."""
        rows = [(*span[:4], span[4].isoformat(), span[5].isoformat()) for span in spans]
        statement = _hold_spans(table.c.created_at.type)
        await session.execute(statement, {"spans": orjson.dumps(rows).decode(), "now": now})

    async def insert_together(
        self,
        connection: AsyncConnection,
        parts: list[tuple[Table, list[dict[str, Any]]]],
        then: tuple[str, tuple[Any, ...]],
    ) -> None:
        await one_by_one(self, connection, parts, then)

    def failure_of(self, error: BaseException) -> str | None:
        """By sqlite3's result code; a Python integer past 64 bits (which sqlite3 refuses
        with OverflowError while binding it) is the request's value."""
        for cause in causes(error):
            if isinstance(cause, OverflowError):
                return "data"
            if isinstance(cause, sqlite3.Error):
                code = getattr(cause, "sqlite_errorcode", None)
                if isinstance(code, int):
                    return _FAILURE_BY_CODE.get(code & 0xFF, "fault")
                if isinstance(cause, sqlite3.DataError):
                    return "data"
                if isinstance(cause, sqlite3.IntegrityError):
                    return "conflict"
                return "unreachable" if isinstance(cause, sqlite3.OperationalError) else "fault"
        return None

    def rollup_columns(self) -> tuple[TypeEngine[Any], TypeEngine[Any]]:
        return Text(), LargeBinary()  # the names joined, the cells as a blob

    def bind_rollup(self, fields: tuple[str, ...] | None, cells: bytes | None) -> Any:
        return ROLLUP_FIELD_SEPARATOR.join(fields) if fields is not None else cells

    def driver_errors(self) -> tuple[type[BaseException], ...]:
        return (sqlite3.Error,)

    async def holders(
        self, raw: Any, dids: list[str], pairs: list[tuple[str, str]]
    ) -> list[tuple[Any, ...]]:
        # did IN (...) OR (class_did = ? AND serial = ?) OR ...: each term an index
        # search (SQLite's MULTI-INDEX OR).
        terms = ["(class_did = ? AND serial = ?)"] * len(pairs)
        sql = " OR ".join([f"did IN ({', '.join('?' * len(dids))})", *terms])
        return await raw.driver_connection.execute_fetchall(  # type: ignore[no-any-return]
            f"SELECT did, class_did, serial FROM domains WHERE {sql}",  # noqa: S608 (placeholders only)
            (*dids, *(value for pair in pairs for value in pair)),
        )

    async def submission_facts(self, raw: Any, asks: SubmissionAsks) -> list[tuple[Any, ...]]:
        assets, claimed, periods, ids, agents = asks.lists()

        def listed(values: list[str]) -> str:
            return f"IN ({', '.join('?' * len(values))})"

        sql = SUBMISSION_FACTS.format(
            json="controller",
            assets=listed(assets),
            linked=listed(assets),
            project="?",
            claimed=listed(claimed),
            periods=listed(periods),
            ids=listed(ids),
            collection="?",
            agents=listed(agents),
        )
        params = (*assets, *assets, asks.project, *claimed, *periods, *ids, asks.collection)
        return await raw.driver_connection.execute_fetchall(sql, (*params, *agents))  # type: ignore[no-any-return]

    async def day_rollups(
        self,
        raw: Any,
        scopes: list[str],
        columns: tuple[tuple[str, str], ...],
        low: datetime,
        high: datetime,
    ) -> DayRollups:
        # The bucket is SQLAlchemy's text of a UTC time (`2026-09-01 00:00:00.000000`): its
        # first ten characters are the day, taken by mrv.rollup_columns.day_of once a
        # distinct text (substr here was a third of the statement's CPU, a call a row).
        # One wide row a scope and day (0031), in the primary key's (scope, interval,
        # bucket) order: no sort, no pivot in SQL.
        sql = (
            "SELECT scope, bucket, fields, cells FROM telemetry_rollups "  # noqa: S608 (placeholders only)
            f"WHERE scope IN ({', '.join('?' * len(scopes))}) "
            "AND interval = 'day' AND bucket >= ? AND bucket < ? ORDER BY scope, bucket"
        )
        found = await raw.driver_connection.execute_fetchall(
            sql, (*scopes, _text(low), _text(high))
        )
        return pivot_wide(found, columns)

    async def stove_facts(self, raw: Any, dids: list[str]) -> list[tuple[Any, ...]]:
        sql = STOVE_FACTS.format(f"IN ({', '.join('?' * len(dids))})")
        return await raw.driver_connection.execute_fetchall(sql, dids)  # type: ignore[no-any-return]

    async def kept_days(
        self, raw: Any, dids: list[str], low: datetime, high: datetime, start: date, end: date
    ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        among = f"IN ({', '.join('?' * len(dids))})"
        driver = raw.driver_connection
        counts = await driver.execute_fetchall(
            READING_COUNTS.format(dids=among, low="?", high="?"), (*dids, _text(low), _text(high))
        )
        kept = await driver.execute_fetchall(
            KEPT_DAYS.format(days="k.days", dids=among, start="?", end="?", form=DAY_DIGEST_FORM),
            (*dids, start.replace(day=1).isoformat(), end.replace(day=1).isoformat()),
        )
        return counts, kept

    async def keep_days(self, raw: Any, rows: list[tuple[int, date, str]]) -> None:
        # A date as SQLAlchemy keeps it on SQLite: its ISO text. json_patch merges objects.
        sql = KEEP_DAYS.format(
            "VALUES (?, ?, ?, ?)", "json_patch(telemetry_day_digests.days, excluded.days)"
        )
        await raw.driver_connection.executemany(
            sql,
            [(device, month.isoformat(), DAY_DIGEST_FORM, days) for device, month, days in rows],
        )

    async def raw_readings(
        self, raw: Any, dids: list[str], low: datetime, high: datetime
    ) -> list[tuple[Any, ...]]:
        sql = RAW_READINGS.format(
            values='r."values"', dids=f"IN ({', '.join('?' * len(dids))})", low="?", high="?"
        )
        found = await raw.driver_connection.execute_fetchall(sql, (*dids, _text(low), _text(high)))
        received_iso: dict[str | None, str | None] = {None: None}  # a batch's readings share it
        rows = []
        for did, seq, time, values, received, receipt in found:
            if received not in received_iso:
                received_iso[received] = _iso(received)
            rows.append((did, seq, _iso(time), values, received_iso[received], receipt))
        return rows


# SQLAlchemy's text of a UTC time on SQLite (`_text`), which `_iso` rewrites as
# `datetime.isoformat` would write the time read back (microseconds only when not zero).
_STORED_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}")
_READ_TIME = sqlite.DATETIME().result_processor(sqlite.dialect(), None)


def _iso(stored: str) -> str:
    """A stored UtcDateTime's text as ISO 8601 in UTC, without making a datetime: what
    `UtcDateTime` reads back, `.isoformat()`. Text of another shape is read as SQLAlchemy
    reads it. tests/integration/telemetry/test_raw_readings.py holds the two equal."""
    if _STORED_TIME.fullmatch(stored) is None:
        moment = _READ_TIME(stored) if _READ_TIME is not None else datetime.fromisoformat(stored)
        return moment.replace(tzinfo=UTC).isoformat()
    micro = stored[20:]
    return f"{stored[:10]}T{stored[11:19]}{'' if micro == '000000' else '.' + micro}+00:00"


def _text(moment: datetime) -> str:
    """A UtcDateTime as SQLAlchemy keeps it on SQLite (naive UTC text, microseconds)."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
