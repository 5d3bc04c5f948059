"""credits: movements by token and kind, so that the node's token queries (each token's
retirements and transfers) read an index range instead of scanning every mint

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-26
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_credit_movements_token_kind", "credit_movements", ["token", "kind", "id"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_credit_movements_token_kind", table_name="credit_movements")
