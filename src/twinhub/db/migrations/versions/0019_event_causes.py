"""events: the causation and correlation ids of each event; claims: their submission's
event id, so that a webhook delivery can be traced back through the credit and the claim

Nullable columns: events written before keep no cause (each starts a chain of its own,
as far as anyone can tell), and claims submitted before name no submission event.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-27
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("events", sa.Column("causation_id", sa.String(40), nullable=True))
    op.add_column("events", sa.Column("correlation_id", sa.String(40), nullable=True))
    op.add_column("claims", sa.Column("submitted_event", sa.String(40), nullable=True))


def downgrade() -> None:
    op.drop_column("claims", "submitted_event")  # SQLite 3.35+: ALTER TABLE DROP COLUMN
    op.drop_column("events", "correlation_id")
    op.drop_column("events", "causation_id")
