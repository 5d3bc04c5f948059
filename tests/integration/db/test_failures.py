"""What a failed statement means (twinhub.db.failures, issue 31 §1), from real failures of
both databases: a value the database refuses is the request's (DATA), a constraint a
CONFLICT, a statement that does not parse the registry's FAULT, and only a database out of
reach is UNREACHABLE, the one failure that marks it down."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy import BigInteger, Column, DateTime, Integer, MetaData, Table, Text, select, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from tests.conftest import POSTGRES_URL, Backend, fresh_postgres_database
from twinhub.db.failures import Failure, classify
from twinhub.db.health import DatabaseMonitor
from twinhub.settings import normalise_database_url

metadata = MetaData()
ROWS = Table(
    "failure_rows",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("seq", BigInteger, nullable=False, unique=True),
    Column("name", Text, nullable=False),
    Column("at", DateTime(timezone=True), nullable=True),
)


@pytest.fixture
async def engine(backend: Backend, tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    async def made(url: str) -> AsyncEngine:
        engine = create_async_engine(normalise_database_url(url))
        async with engine.begin() as connection:
            await connection.run_sync(metadata.create_all)
            await connection.execute(ROWS.insert().values(id=1, seq=1, name="one"))
        return engine

    if backend.database == "postgresql":
        async with fresh_postgres_database("failures", empty=True) as url:
            engine = await made(url)
            yield engine
            await engine.dispose()
    else:
        engine = await made(f"sqlite:///{tmp_path / 'failures.db'}")
        yield engine
        await engine.dispose()


async def failure_of(engine: AsyncEngine, statement: Any) -> Failure | None:
    try:
        async with engine.begin() as connection:
            await connection.execute(statement)
    except Exception as error:
        return classify(error)
    raise AssertionError("the statement did not fail")


async def test_a_refused_value_is_the_requests_own(engine: AsyncEngine, backend: Backend) -> None:
    past_int32 = select(ROWS).where(ROWS.c.id > 2**40)
    past_int64 = select(ROWS).where(ROWS.c.seq > 2**70)
    if backend.database == "postgresql":  # SQLite holds a NUL and any 64-bit integer
        assert await failure_of(engine, past_int32) is Failure.DATA
        nul = ROWS.insert().values(id=2, seq=2, name="a\x00b")
        assert await failure_of(engine, nul) is Failure.DATA
        assert await failure_of(engine, text("SELECT 1 / 0")) is Failure.DATA
    assert await failure_of(engine, past_int64) is Failure.DATA


async def test_a_constraint_is_a_conflict_and_a_bad_statement_a_fault(
    engine: AsyncEngine,
) -> None:
    again = ROWS.insert().values(id=1, seq=1, name="again")
    assert await failure_of(engine, again) is Failure.CONFLICT
    assert await failure_of(engine, text("SELEKT 1")) is Failure.FAULT
    assert await failure_of(engine, text("SELECT * FROM no_such_table")) is Failure.FAULT


async def test_only_a_database_out_of_reach_marks_it_down(backend: Backend, tmp_path: Path) -> None:
    if backend.database == "postgresql":
        url = POSTGRES_URL.replace("127.0.0.1:5432", "127.0.0.1:1")  # nothing listens there
    else:
        url = f"sqlite:///{tmp_path / 'missing' / 'dir' / 'x.db'}"  # a folder that is not there
    engine = create_async_engine(normalise_database_url(url))
    monitor = DatabaseMonitor(engine, interval=60, timeout=3)
    try:
        try:
            async with engine.connect() as connection:
                await connection.execute(text("SELECT 1"))
        except Exception as error:
            assert monitor.failed(error) is Failure.UNREACHABLE
        else:
            raise AssertionError("connected to nothing")
        assert not monitor.healthy
    finally:
        await engine.dispose()
    working = DatabaseMonitor(engine, interval=60, timeout=3)
    assert working.failed(sqlite3.DataError("a value")) is Failure.DATA
    assert working.failed(asyncpg.exceptions.CharacterNotInRepertoireError("NUL")) is Failure.DATA
    assert working.failed(ValueError("not a database error")) is Failure.FAULT
    # asyncpg's own reports of a lost connection (the node's read model raises them raw).
    assert classify(asyncpg.InterfaceError("connection is closed")) is Failure.UNREACHABLE
    lost = asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed")
    assert classify(lost) is Failure.UNREACHABLE
    assert working.healthy  # none of those is an outage


def test_a_python_integer_past_64_bits_is_data_on_sqlite() -> None:
    connection = sqlite3.connect(":memory:")
    try:
        connection.execute("SELECT ?", (2**70,))
    except OverflowError as error:
        assert classify(error) is Failure.DATA
    else:
        raise AssertionError("sqlite3 bound it")
    finally:
        connection.close()
