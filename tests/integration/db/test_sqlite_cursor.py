"""The one-hand-off SQLite cursor (db/sqlite_cursor.py) answers as the adapter's own did:
rows, row counts, last row ids, column descriptions, executemany, errors as SQLAlchemy's,
streaming results; and twinhub's SQLite engine uses it."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from twinhub.db.engine import create_engine
from twinhub.db.sqlite_cursor import OneHopCursor, one_hop_dbapi
from twinhub.settings import Settings


async def _both(tmp_path: Path) -> tuple[AsyncEngine, AsyncEngine]:
    """The same schema in two files: one through the one-hop cursor, one through
    SQLAlchemy's own aiosqlite adapter."""
    engines = (
        create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'one.db'}", module=one_hop_dbapi()),
        create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'own.db'}"),
    )
    for engine in engines:
        async with engine.begin() as connection:
            await connection.execute(
                text("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE, n REAL)")
            )
    return engines


async def _session(engine: AsyncEngine) -> list[object]:
    """What a program sees of a run of statements (their results, counts, ids, errors)."""
    seen: list[object] = []
    async with engine.begin() as connection:
        inserted = await connection.execute(
            text("INSERT INTO t (name, n) VALUES (:name, :n)"), {"name": "a", "n": 1.5}
        )
        seen += [inserted.rowcount, inserted.lastrowid]
        many = await connection.execute(
            text("INSERT INTO t (name, n) VALUES (:name, :n)"),
            [{"name": f"m{i}", "n": i / 3} for i in range(50)],
        )
        seen.append(many.rowcount)
        updated = await connection.execute(text("UPDATE t SET n = n * 2 WHERE n > 5"))
        seen.append(updated.rowcount)
        rows = await connection.execute(text("SELECT id, name, n FROM t ORDER BY id"))
        seen += [list(rows.keys()), [tuple(row) for row in rows]]
        empty = await connection.execute(text("SELECT name FROM t WHERE id < 0"))
        seen.append(empty.all())
        seen.append(await connection.scalar(text("SELECT count(*) FROM t")))
        streamed = await connection.stream(text("SELECT name FROM t ORDER BY id"))
        seen.append([row[0] async for row in streamed])
    async with engine.connect() as connection:
        with pytest.raises(IntegrityError):
            await connection.execute(text("INSERT INTO t (name) VALUES ('a')"))
        await connection.rollback()
        with pytest.raises(OperationalError):
            await connection.execute(text("SELECT nothing FROM nowhere"))
        await connection.rollback()
        # The connection still works after errors.
        seen.append(await connection.scalar(text("SELECT name FROM t WHERE id = 1")))
    return seen


async def test_the_one_hop_cursor_answers_as_the_adapter_did(tmp_path: Path) -> None:
    one, own = await _both(tmp_path)
    try:
        assert await _session(one) == await _session(own)
    finally:
        await one.dispose()
        await own.dispose()


async def test_twinhub_sqlite_engine_uses_it(tmp_path: Path) -> None:
    engine = create_engine(Settings(environment="development", data_dir=tmp_path).storage)
    try:
        async with engine.connect() as connection:
            raw = await connection.get_raw_connection()
            assert isinstance(raw.dbapi_connection.cursor(), OneHopCursor)
            assert await connection.scalar(text("PRAGMA journal_mode")) == "wal"
    finally:
        await engine.dispose()
