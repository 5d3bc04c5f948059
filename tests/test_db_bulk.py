"""`insert_rows` writes exactly what an `executemany` INSERT writes (PostgreSQL through one
`unnest` statement, SQLite as before): every column type the ledger's tables use, NULLs,
JSON documents, the row order of serial ids, and a column SQLAlchemy fills in Python."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    event,
    insert,
    select,
)
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from tests.conftest import Backend, fresh_postgres_database
from twinhub.db.bulk import insert_rows
from twinhub.db.models import JsonDocument
from twinhub.settings import normalise_database_url


def twin_tables(metadata: MetaData, name: str) -> Table:
    return Table(
        name,
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("did", String(200), nullable=False),
        Column("seq", BigInteger, nullable=False),
        Column("verified", Boolean, nullable=False),
        Column("document", JsonDocument, nullable=False),
        Column("note", Text, nullable=True),
        Column("at", DateTime(timezone=True), nullable=True),
    )


def rows(count: int) -> list[dict[str, Any]]:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        {
            "did": f"did:ixo:entity/b{n}",
            "seq": 2**40 + n,
            "verified": n % 2 == 0,
            "document": {"n": n, "list": [1, "two", None], "nested": {"ü": "ʼ\u2028"}},
            "note": None if n % 3 == 0 else f"note 'quoted' {n}",
            "at": None if n % 4 == 0 else start + timedelta(microseconds=n * 1001),
        }
        for n in range(count)
    ]


@pytest.fixture
async def engine(backend: Backend, tmp_path: Any) -> AsyncIterator[AsyncEngine]:
    if backend.database == "postgresql":
        async with fresh_postgres_database("bulk") as url:
            made = create_async_engine(normalise_database_url(url))
            yield made
            await made.dispose()
    else:
        made = create_async_engine(normalise_database_url(f"sqlite:///{tmp_path / 'bulk.db'}"))
        yield made
        await made.dispose()


async def test_the_same_rows_as_executemany(engine: AsyncEngine) -> None:
    metadata = MetaData()
    ours, reference = twin_tables(metadata, "ours"), twin_tables(metadata, "reference")
    batch = rows(37)
    sent: list[tuple[str, bool]] = []

    def seen(_c: Any, _cursor: Any, statement: str, _p: Any, _x: Any, many: bool) -> None:
        sent.append((statement, many))

    async with engine.begin() as connection:
        await connection.run_sync(metadata.create_all)
        event.listen(engine.sync_engine, "before_cursor_execute", seen)
        await insert_rows(connection, ours, batch)
        event.remove(engine.sync_engine, "before_cursor_execute", seen)
        await connection.execute(insert(reference), batch)
        await insert_rows(connection, ours, rows(1))  # one row: the plain statement
        await connection.execute(insert(reference), rows(1))
    async with engine.connect() as connection:
        got = (await connection.execute(select(ours).order_by(ours.c.id))).all()
        want = (await connection.execute(select(reference).order_by(reference.c.id))).all()
    assert got == want and len(got) == 38
    assert [row.did for row in got[:37]] == [row["did"] for row in batch]  # ids in row order
    [(statement, many)] = sent  # one statement, whatever the row count
    if engine.dialect.name == "postgresql":
        assert "unnest" in statement and not many
    else:
        assert many


async def test_a_column_filled_in_python_keeps_executemany(engine: AsyncEngine) -> None:
    metadata = MetaData()
    table = Table(
        "defaults",
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("name", String(20), nullable=False),
        Column("kind", String(20), nullable=False, default="stove"),
    )
    async with engine.begin() as connection:
        await connection.run_sync(metadata.create_all)
        await insert_rows(connection, table, [{"name": "a"}, {"name": "b"}])
        got = (await connection.execute(select(table.c.name, table.c.kind))).all()
    assert sorted(got) == [("a", "stove"), ("b", "stove")]
