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
    await connection.exec_driver_sql(_unnest_insert(plan, 1), tuple(_arrays(plan, rows)))


async def insert_together(
    connection: AsyncConnection,
    parts: list[tuple[Table, list[dict[str, Any]]]],
    then: tuple[str, tuple[Any, ...]],
) -> None:
    """Each part's rows into its table, in order, then `then` (a statement whose arguments
    are written {0}, {1}, ...). On PostgreSQL all of it is one statement, each INSERT a WITH
    clause of the last: one round trip, where a statement each left the writer waiting for
    the database once per table. Elsewhere, or where a part's rows cannot go as arrays, one
    statement each, in order. (PostgreSQL checks foreign keys at the statement's end, so a
    part may refer to rows of an earlier one.)"""
    parts = [(table, rows) for table, rows in parts if rows]
    dialect = connection.dialect
    plans = [_unnest_plan(table, tuple(rows[0]), dialect) for table, rows in parts]
    sql, arguments = then
    if dialect.name != "postgresql" or any(plan is None for plan in plans):
        for table, rows in parts:
            await insert_rows(connection, table, rows)
        marks = [
            "?" if dialect.paramstyle == "qmark" else f"${n}" for n in range(1, 1 + len(arguments))
        ]
        await connection.exec_driver_sql(sql.format(*marks), arguments)
        return
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
def _unnest_plan(table: Table, keys: tuple[str, ...], dialect: Dialect) -> _Plan | None:
    """What `_unnest_insert` and `_arrays` need; None where `executemany` must stay: not
    PostgreSQL, or a column left out that SQLAlchemy would fill in Python."""
    if dialect.name != "postgresql":
        return None
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
