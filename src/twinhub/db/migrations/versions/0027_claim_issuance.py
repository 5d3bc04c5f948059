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
    # Claims approved before this revision were minted at their approval: issued already,
    # when their mint was. Exactly the claims a mint names: not every approved claim with
    # credits, since a database brought down past this revision and up again holds claims
    # approved since, awaiting issuance, that no mint names (`twinhub ledger verify` checks
    # that a claim is issued exactly when a mint names it).
    op.execute(
        "UPDATE claims SET issued_at = minted.at FROM ("
        "SELECT claim_id, MIN(created_at) AS at FROM credit_movements "
        "WHERE kind = 'mint' AND claim_id IS NOT NULL GROUP BY claim_id"
        ") AS minted WHERE claims.id = minted.claim_id"
    )


def downgrade() -> None:
    # Not in a batch: SQLite (3.35+) drops the columns in place, where a batch would copy
    # the table and drop it, which the rows referencing claims (credentials) refuse.
    op.drop_index("ix_claims_period_id", table_name="claims")
    op.drop_column("claims", "issued_at")
    op.drop_column("claims", "period_id")
