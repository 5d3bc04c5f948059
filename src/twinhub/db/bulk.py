"""Many rows into one table in one statement, on PostgreSQL as one execution.

An `executemany` INSERT of n rows costs PostgreSQL n executions of the statement (a bind,
an executor start and end each): for the ledger's group commit, where a batch writes a few
hundred rows across five or six tables, that was more of the server's CPU than writing the
rows. On PostgreSQL the rows go instead as one array per column to
`INSERT ... SELECT * FROM unnest(...)`: one statement text per table and column set
(prepared once per connection), one execution per batch, whatever its size. SQLite's
`executemany` runs in process and stays as it is.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from sqlalchemy import Table, insert
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection


async def insert_rows(
    connection: AsyncConnection, table: Table, rows: list[dict[str, Any]]
) -> None:
    """Insert `rows` (dicts with the same keys, as for an `executemany` INSERT) into `table`."""
    dialect = connection.dialect
    plan = _unnest_plan(table, tuple(rows[0]), dialect) if len(rows) > 1 else None
    if plan is None:
        await connection.execute(insert(table), rows)
        return
    sql, columns = plan
    arrays = []
    for name, process in columns:
        values = [row[name] for row in rows]
        arrays.append([process(value) for value in values] if process else values)
    await connection.exec_driver_sql(sql, tuple(arrays))


@lru_cache(maxsize=256)
def _unnest_plan(
    table: Table, keys: tuple[str, ...], dialect: Dialect
) -> tuple[str, list[tuple[str, Any]]] | None:
    """The statement and, per column, its bind processor; None where `executemany` must
    stay: not PostgreSQL, or a column left out that SQLAlchemy would fill in Python."""
    if dialect.name != "postgresql":
        return None
    for column in table.columns:
        if column.key not in keys and (column.default is not None or column.onupdate is not None):
            return None
    names, casts, columns = [], [], []
    for position, key in enumerate(keys, start=1):
        column = table.columns[key]
        names.append(dialect.identifier_preparer.quote(column.name))
        casts.append(f"${position}::{column.type.compile(dialect=dialect)}[]")
        columns.append((key, column.type.dialect_impl(dialect).bind_processor(dialect)))
    # Names and types come from the table's metadata, never from a request.
    target = f"{dialect.identifier_preparer.format_table(table)} ({', '.join(names)})"
    sql = f"INSERT INTO {target} SELECT * FROM unnest({', '.join(casts)})"  # noqa: S608
    return sql, columns
