"""hardening: time-limited PIN lock-outs per account, per account's own phone, per phone

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "pin_lockouts",
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("failed_attempts", sa.Integer(), nullable=False),
        sa.Column("lockouts", sa.Integer(), nullable=False),
        sa.Column("locked_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_pin_lockouts")),
    )
    op.create_index(op.f("ix_pin_lockouts_locked_until"), "pin_lockouts", ["locked_until"])


def downgrade() -> None:
    op.drop_index(op.f("ix_pin_lockouts_locked_until"), table_name="pin_lockouts")
    op.drop_table("pin_lockouts")
