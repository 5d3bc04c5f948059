"""SQLite's ways (see twinhub.db.dialects): in process, one writer at a time, whose write
lock (BEGIN IMMEDIATE) is what PostgreSQL's row and advisory locks are elsewhere."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Table, func, insert, text
from sqlalchemy.dialects import sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.elements import ColumnElement

from twinhub.db.dialects import Dialect, one_by_one, pivot_columns


class SQLite(Dialect):
    name = "sqlite"
    joins_statements = False

    def insert(self, table: Any) -> Insert:
        return sqlite.insert(table)

    def utc_day(self, column: Any) -> ColumnElement[Any]:
        return func.date(column)

    def lock_migrations(self, connection: Connection) -> None:
        """Nothing: SQLite's own write lock serialises the migrations."""

    async def begin_write_batch(self, session: AsyncSession, deferred: bool) -> None:
        # Take SQLite's write lock now (as FOR UPDATE does on PostgreSQL), so the
        # savepoints below nest in this transaction and another process's writer
        # waits for the whole batch rather than interleaving.
        await session.execute(text("BEGIN IMMEDIATE"))

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
        await connection.execute(insert(table), rows)

    async def insert_together(
        self,
        connection: AsyncConnection,
        parts: list[tuple[Table, list[dict[str, Any]]]],
        then: tuple[str, tuple[Any, ...]],
    ) -> None:
        await one_by_one(self, connection, parts, then)

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

    async def day_rollups(
        self,
        raw: Any,
        scopes: list[str],
        columns: tuple[tuple[str, str], ...],
        low: datetime,
        high: datetime,
    ) -> list[tuple[Any, ...]]:
        # The bucket is SQLAlchemy's text of a UTC time (`2026-09-01 00:00:00.000000`): its
        # first ten characters are the day. The primary key (scope, interval, bucket,
        # field) gives the rows in (scope, bucket) order, grouped without a sort.
        fields = sorted({name for name, _ in columns})
        sql = (
            f"SELECT scope, substr(bucket, 1, 10), {pivot_columns(columns, lambda n: '?')} "  # noqa: S608 (placeholders only)
            f"FROM telemetry_rollups WHERE scope IN ({', '.join('?' * len(scopes))}) "
            f"AND interval = 'day' AND bucket >= ? AND bucket < ? "
            f"AND field IN ({', '.join('?' * len(fields))}) "
            "GROUP BY scope, bucket ORDER BY scope, bucket"
        )
        arguments = (
            *(name for name, _ in columns),
            *scopes,
            _text(low),
            _text(high),
            *fields,
        )
        return await raw.driver_connection.execute_fetchall(sql, arguments)  # type: ignore[no-any-return]


def _text(moment: datetime) -> str:
    """A UtcDateTime as SQLAlchemy keeps it on SQLite (naive UTC text, microseconds)."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
