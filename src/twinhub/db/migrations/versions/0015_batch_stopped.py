"""governance: a batch execution that stopped says so (when and why), so people can tell a
batch still executing from one waiting for someone to execute it again

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable columns: every existing proposal stays valid (none has stopped, as far as
    # anyone recorded).
    op.add_column(
        "proposals", sa.Column("batch_stopped_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column("proposals", sa.Column("batch_stopped_reason", sa.String(300), nullable=True))


def downgrade() -> None:
    op.drop_column("proposals", "batch_stopped_reason")  # SQLite 3.35+: ALTER TABLE DROP COLUMN
    op.drop_column("proposals", "batch_stopped_at")
