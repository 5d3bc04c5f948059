"""`insert_rows` writes exactly what an `executemany` INSERT writes (PostgreSQL through one
`unnest` statement, SQLite as before): every column type the ledger's tables use, NULLs,
JSON documents, the row order of serial ids, and a column SQLAlchemy fills in Python.
`insert_together` writes what `insert_rows` writes, table after table, and then its last
statement: on PostgreSQL all in one statement, a child table's rows beside their parents'."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    event,
    insert,
    select,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from twinhub.db.bulk import insert_rows, insert_together
from twinhub.db.models import JsonDocument


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


async def test_tables_together_and_a_last_statement(engine: AsyncEngine) -> None:
    metadata = MetaData()
    ours, reference = twin_tables(metadata, "ours"), twin_tables(metadata, "reference")
    parents = Table("parents", metadata, Column("did", String(200), primary_key=True))
    children = Table(
        "children",
        metadata,
        Column("parent", String(200), ForeignKey("parents.did"), nullable=False),
        Column("name", String(20), nullable=False),
    )
    head = Table(
        "head",
        metadata,
        Column("id", Integer, primary_key=True),
        Column("height", BigInteger, nullable=False),
        Column("tx_hash", String(64), nullable=False),
    )
    batch = rows(23)
    family = [{"did": f"did:ixo:entity/p{n}"} for n in range(5)]
    kids = [{"parent": f"did:ixo:entity/p{n % 5}", "name": f"kid {n}"} for n in range(9)]
    sent: list[str] = []

    def seen(_c: Any, _cursor: Any, statement: str, _p: Any, _x: Any, _many: bool) -> None:
        sent.append(statement)

    async with engine.begin() as connection:
        await connection.run_sync(metadata.create_all)
        await connection.execute(insert(head), [{"id": 1, "height": 0, "tx_hash": ""}])
        event.listen(engine.sync_engine, "before_cursor_execute", seen)
        await insert_together(
            connection,
            [(parents, family), (children, kids), (ours, batch), (reference, [])],
            then=("UPDATE head SET height = {0}, tx_hash = {1} WHERE id = 1", (2**40, "ab")),
        )
        event.remove(engine.sync_engine, "before_cursor_execute", seen)
        await connection.execute(insert(reference), batch)
    async with engine.connect() as connection:
        got = (await connection.execute(select(ours).order_by(ours.c.id))).all()
        want = (await connection.execute(select(reference).order_by(reference.c.id))).all()
        kept = (await connection.execute(select(children.c.parent, children.c.name))).all()
        ended = (await connection.execute(select(head.c.height, head.c.tx_hash))).all()
    assert got == want and len(got) == 23
    assert sorted(kept) == sorted((kid["parent"], kid["name"]) for kid in kids)
    assert ended == [(2**40, "ab")]
    if engine.dialect.name == "postgresql":
        [statement] = sent  # one round trip for every table and the last statement
        assert statement.startswith("WITH") and statement.count("unnest") == 3
    else:
        assert len(sent) == 4  # a statement per table with rows, then the last one


async def test_together_refuses_an_orphan_and_writes_nothing(engine: AsyncEngine) -> None:
    """A row breaking a foreign key fails the whole statement: no part is left written."""
    metadata = MetaData()
    parents = Table("parents", metadata, Column("did", String(200), primary_key=True))
    children = Table(
        "children",
        metadata,
        Column("parent", String(200), ForeignKey("parents.did"), nullable=False),
    )
    async with engine.begin() as connection:
        await connection.run_sync(metadata.create_all)
        if engine.dialect.name == "sqlite":
            await connection.exec_driver_sql("PRAGMA foreign_keys=ON")
    with pytest.raises(IntegrityError):
        async with engine.begin() as connection:
            if engine.dialect.name == "sqlite":
                await connection.exec_driver_sql("PRAGMA foreign_keys=ON")
            await insert_together(
                connection,
                [(parents, [{"did": "a"}, {"did": "b"}]), (children, [{"parent": "c"}] * 2)],
                then=("SELECT {0}::int", (1,)),
            )
    async with engine.connect() as connection:
        assert (await connection.execute(select(parents))).all() == []
