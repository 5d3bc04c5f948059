"""telemetry: SQLite keeps the rollups in their primary key's B-tree (WITHOUT ROWID)

A rowid table keeps its primary key (scope, interval, bucket, field) as a second B-tree:
every rollup read is a search of that index and then of the table by rowid, and every
upsert writes both. Kept WITHOUT ROWID, a row lives in the key's own B-tree: one search a
read and one write an upsert, and a file about 40 % smaller. The monitoring period reads
three to five of these rows per stove-day and ingestion upserts one per (scope, interval,
bucket, field): both are bound by it (bench/results/2026-11-28.md, "Session 18, rollups").
SQLite cannot change this in place: the table is copied into a new one (both ways).
PostgreSQL has no such choice (its heap and index are always apart): nothing to do there.

Revision ID: 0030
Revises: 0028
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0030"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = 'scope, "interval", bucket, field, count, sum, min, max'


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild(with_rowid=False)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild(with_rowid=True)


def _rebuild(with_rowid: bool) -> None:
    """telemetry_rollups copied into a table of the same columns and key, with or without
    its rowid, which then takes its name."""
    op.create_table(
        "telemetry_rollups_rebuilt",
        sa.Column("scope", sa.String(length=200), nullable=False),
        sa.Column("interval", sa.String(length=8), nullable=False),
        sa.Column("bucket", sa.DateTime(timezone=True), nullable=False),
        sa.Column("field", sa.String(length=64), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("sum", sa.Float(), nullable=False),
        sa.Column("min", sa.Float(), nullable=False),
        sa.Column("max", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint(
            "scope", "interval", "bucket", "field", name=op.f("pk_telemetry_rollups")
        ),
        sqlite_with_rowid=with_rowid,
    )
    op.execute(
        f"INSERT INTO telemetry_rollups_rebuilt ({_COLUMNS})"  # noqa: S608 (constant text)
        f" SELECT {_COLUMNS} FROM telemetry_rollups"
        ' ORDER BY scope, "interval", bucket, field'  # in key order: pages filled in turn
    )
    op.drop_table("telemetry_rollups")
    op.rename_table("telemetry_rollups_rebuilt", "telemetry_rollups")
