"""telemetry: each stove-day's digest kept once a draft (or the daily pass) has made it,
one row a device and month, so a monitoring period's draft reads a few rows a stove
instead of its readings

Revision ID: 0033
Revises: 0032
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0033"
down_revision: str | None = "0032"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "telemetry_day_digests",
        sa.Column("device_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("month", sa.Date(), nullable=False),
        sa.Column("form", sa.Integer(), nullable=False),
        sa.Column(
            "days",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("device_id", "month", name=op.f("pk_telemetry_day_digests")),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("telemetry_day_digests")
