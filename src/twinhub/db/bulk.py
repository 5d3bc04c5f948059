"""Many rows into one table in one statement, on PostgreSQL as one execution; several
tables' rows and a last statement in one round trip there. Each database's way is its
dialect's (twinhub.db.dialects: PostgreSQL's `unnest` arrays and WITH clauses; SQLite's
`executemany`, in process, as it is).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table
from sqlalchemy.ext.asyncio import AsyncConnection

from twinhub.db.dialects import dialect_of


async def insert_rows(
    connection: AsyncConnection, table: Table, rows: list[dict[str, Any]]
) -> None:
    """Insert `rows` (dicts with the same keys, as for an `executemany` INSERT) into `table`."""
    await dialect_of(connection).insert_rows(connection, table, rows)


async def insert_together(
    connection: AsyncConnection,
    parts: list[tuple[Table, list[dict[str, Any]]]],
    then: tuple[str, tuple[Any, ...]],
) -> None:
    """Each part's rows into its table, in order, then `then` (a statement whose arguments
    are written {0}, {1}, ...). On PostgreSQL all of it is one statement; elsewhere, or
    where a part's rows cannot go as arrays, one statement each, in order."""
    parts = [(table, rows) for table, rows in parts if rows]
    await dialect_of(connection).insert_together(connection, parts, then)
