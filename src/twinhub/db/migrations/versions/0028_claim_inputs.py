"""claims: what an approval with credits computed them from (the stove's facts and day
figures), so the evidence bundle of the period carrying the claim lets a verifier
recompute its figure

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Claims approved before this revision keep none: their bundles say so by name.
    op.add_column("claims", sa.Column("inputs", sa.Text(), nullable=True))  # JSON text


def downgrade() -> None:
    # In place (SQLite 3.35+), not by copying the table (see 0027).
    op.drop_column("claims", "inputs")
