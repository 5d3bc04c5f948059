"""telemetry: one rollup row per (scope, interval, bucket), its fields' cells in one

The rollups kept one row per (scope, interval, bucket, field): ingestion upserted three to
four rows a reading and a monitoring period pivoted three to five rows into each
stove-day, and both were bound by that row count (bench/results/2026-11-28.md, "Session
18, rollups"). Now a row holds every field of its bucket: `fields`, the names sorted, and
`cells`, each field's (count, sum, min, max) as float64 in that order (telemetry/wide.py).
SQLite: the names joined by \\x1f and a little-endian blob, the table WITHOUT ROWID (as
0030 left it); PostgreSQL: text[] and float8[] (fillfactor 70, as 0017 left it). The rows
are copied into the new table in batches of keys (and split back on downgrade), figures
exact both ways (no float goes through text).

Revision ID: 0031
Revises: 0030
Create Date: 2026-11-28
"""

import struct
from collections.abc import Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0031"
down_revision: str | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BATCH = 20_000  # rows read at a time
_SEPARATOR = "\x1f"
_KEY = ("scope", "interval", "bucket")


def upgrade() -> None:
    bind = op.get_bind()
    postgres = bind.dialect.name == "postgresql"
    _create(
        "telemetry_rollups_moved",
        [
            sa.Column(
                "fields", postgresql.ARRAY(sa.Text()) if postgres else sa.Text(), nullable=False
            ),
            sa.Column(
                "cells",
                postgresql.ARRAY(sa.Float(precision=53)) if postgres else sa.LargeBinary(),
                nullable=False,
            ),
        ],
        _KEY,
    )
    insert = sa.text(
        'INSERT INTO telemetry_rollups_moved (scope, "interval", bucket, fields, cells)'
        " VALUES (:scope, :interval, :bucket, :fields, :cells)"
    )
    for rows in _batches(bind, 'scope, "interval", bucket, field, count, sum, min, max', 4):
        wide: dict[tuple[Any, ...], dict[str, tuple[float, ...]]] = {}
        for scope, interval, bucket, name, count, total, low, high in rows:
            wide.setdefault((scope, interval, bucket), {})[name] = (
                float(count),
                total,
                low,
                high,
            )
        records = []
        for (scope, interval, bucket), cells in wide.items():
            names = sorted(cells)
            values = [v for name in names for v in cells[name]]
            records.append(
                {
                    "scope": scope,
                    "interval": interval,
                    "bucket": bucket,
                    "fields": names if postgres else _SEPARATOR.join(names),
                    "cells": values if postgres else struct.pack(f"<{len(values)}d", *values),
                }
            )
        if records:
            bind.execute(insert, records)
    _replace()


def downgrade() -> None:
    bind = op.get_bind()
    _create(
        "telemetry_rollups_moved",
        [
            sa.Column("field", sa.String(length=64), nullable=False),
            sa.Column("count", sa.BigInteger(), nullable=False),
            sa.Column("sum", sa.Float(), nullable=False),
            sa.Column("min", sa.Float(), nullable=False),
            sa.Column("max", sa.Float(), nullable=False),
        ],
        (*_KEY, "field"),
    )
    insert = sa.text(
        'INSERT INTO telemetry_rollups_moved (scope, "interval", bucket, field, count, sum,'
        " min, max) VALUES (:scope, :interval, :bucket, :field, :count, :sum, :min, :max)"
    )
    for rows in _batches(bind, 'scope, "interval", bucket, fields, cells', 3):
        records = []
        for scope, interval, bucket, fields, cells in rows:
            names = fields.split(_SEPARATOR) if isinstance(fields, str) else list(fields)
            values = (
                struct.unpack(f"<{len(cells) // 8}d", cells)
                if isinstance(cells, bytes | memoryview)
                else list(cells)
            )
            for n, name in enumerate(names):
                count, total, low, high = values[4 * n : 4 * n + 4]
                records.append(
                    {
                        "scope": scope,
                        "interval": interval,
                        "bucket": bucket,
                        "field": name,
                        "count": int(count),
                        "sum": total,
                        "min": low,
                        "max": high,
                    }
                )
        if records:
            bind.execute(insert, records)
    _replace()


def _create(name: str, columns: list[sa.Column[Any]], key: Sequence[str]) -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.create_table(
        name,
        sa.Column("scope", sa.String(length=200), nullable=False),
        sa.Column("interval", sa.String(length=8), nullable=False),
        sa.Column("bucket", sa.DateTime(timezone=True), nullable=False),
        *columns,
        # PostgreSQL's constraint names are its indexes' (one schema-wide name): renamed after.
        sa.PrimaryKeyConstraint(
            *key, name=op.f("pk_telemetry_rollups_moved" if postgres else "pk_telemetry_rollups")
        ),
        sqlite_with_rowid=False,
        **({"postgresql_with": {"fillfactor": 70}} if postgres else {}),
    )


def _batches(bind: Any, columns: str, width: int) -> Iterator[list[Any]]:
    """The old table's rows in key order, a batch at a time; a batch never splits the rows
    of one (scope, interval, bucket) (keyset: each batch starts past the last whole key)."""
    after: tuple[Any, ...] | None = None
    while True:
        where = ' WHERE (scope, "interval", bucket) > (:s, :i, :b)' if after else ""
        rows = bind.execute(
            sa.text(
                f"SELECT {columns} FROM telemetry_rollups{where}"  # noqa: S608 (constant text)
                f' ORDER BY scope, "interval", bucket LIMIT {_BATCH}'
            ),
            dict(zip(("s", "i", "b"), after, strict=True)) if after else {},
        ).all()
        if not rows:
            return
        if len(rows) == _BATCH and width == 4:  # the last key's rows may go on: next time
            last = tuple(rows[-1][:3])
            whole = [row for row in rows if tuple(row[:3]) != last]
            if whole:
                rows = whole
        yield rows
        after = tuple(rows[-1][:3])


def _replace() -> None:
    """The new table takes the old one's name, and its key's name."""
    op.drop_table("telemetry_rollups")
    op.rename_table("telemetry_rollups_moved", "telemetry_rollups")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "ALTER TABLE telemetry_rollups RENAME CONSTRAINT pk_telemetry_rollups_moved"
            " TO pk_telemetry_rollups"
        )
