"""webhook subscriptions: whose eyes they deliver for (everything, or what their creator
may see), and their state (a receiver failing too long is disabled until re-enabled)

Revision ID: 0026
Revises: 0023
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("webhook_subscriptions") as batch:
        # Until now only admins subscribed, and an admin sees everything.
        batch.add_column(
            sa.Column("sees_everything", sa.Boolean(), nullable=False, server_default=sa.true())
        )
        batch.add_column(sa.Column("state", sa.String(16), nullable=False, server_default="active"))
        batch.add_column(sa.Column("failing_since", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("disabled_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("webhook_subscriptions") as batch:
        batch.drop_column("disabled_at")
        batch.drop_column("failing_since")
        batch.drop_column("state")
        batch.drop_column("sees_everything")
