"""claims: indexes for lists filtered by status

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-21
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_claims_collection_status_seq", "claims", ["collection_id", "status", "seq"])
    op.create_index("ix_claims_status_seq", "claims", ["status", "seq"])


def downgrade() -> None:
    op.drop_index("ix_claims_status_seq", table_name="claims")
    op.drop_index("ix_claims_collection_status_seq", table_name="claims")
