"""USSD in households' languages: remembered menu languages per phone and per customer,
and the stove problems households report (the support queue)

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "ussd_languages",
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("language", sa.String(16), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_ussd_languages")),
    )
    op.create_table(
        "stove_problems",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("reference", sa.String(16), nullable=False),
        sa.Column("stove_did", sa.String(200), nullable=False),
        sa.Column("customer_id", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reported_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_stove_problems")),
        sa.UniqueConstraint("reference", name=op.f("uq_stove_problems_reference")),
    )
    for column in ("stove_did", "customer_id", "status"):
        op.create_index(op.f(f"ix_stove_problems_{column}"), "stove_problems", [column])


def downgrade() -> None:
    for column in ("stove_did", "customer_id", "status"):
        op.drop_index(op.f(f"ix_stove_problems_{column}"), table_name="stove_problems")
    op.drop_table("stove_problems")
    op.drop_table("ussd_languages")
