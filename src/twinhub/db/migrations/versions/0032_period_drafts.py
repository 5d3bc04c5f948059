"""monitoring periods: drafts made in the background, with their progress, so a programme
too large to draft within a request's deadline is drafted anyway and any worker answers
for it

Revision ID: 0032
Revises: 0031
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0032"
down_revision: str | None = "0031"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "period_drafts",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("project_did", sa.String(length=200), nullable=False),
        sa.Column("start", sa.Date(), nullable=False),
        sa.Column("end", sa.Date(), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("step", sa.String(length=32), nullable=False),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("period_id", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_period_drafts")),
    )
    op.create_index(
        op.f("ix_period_drafts_project_did"), "period_drafts", ["project_did"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_period_drafts_project_did"), table_name="period_drafts")
    op.drop_table("period_drafts")
