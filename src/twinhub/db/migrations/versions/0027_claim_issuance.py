"""claims: an approved claim's credits come with issuance, carried by its project's next
monitoring period (the period that carries it, and when its credits were issued)

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("claims") as batch:
        batch.add_column(sa.Column("period_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("issued_at", sa.DateTime(timezone=True), nullable=True))
        batch.create_index("ix_claims_period_id", ["period_id"])
    # Claims approved before this revision were minted at their approval: issued already.
    op.execute(
        "UPDATE claims SET issued_at = evaluated_at "
        "WHERE status = 'approved' AND amount IS NOT NULL AND amount > 0"
    )


def downgrade() -> None:
    with op.batch_alter_table("claims") as batch:
        batch.drop_index("ix_claims_period_id")
        batch.drop_column("issued_at")
        batch.drop_column("period_id")
