"""support: a stove problem is resolved by someone, with a note (the support queue can be
worked: open -> resolved)

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ALTER TABLE on both databases (nullable columns: existing rows stay valid).
    op.add_column("stove_problems", sa.Column("resolved_by", sa.String(200), nullable=True))
    op.add_column("stove_problems", sa.Column("resolution_note", sa.String(500), nullable=True))
    # Before 0014 a problem could only be open ('closed' was named but never written).
    op.execute("UPDATE stove_problems SET status = 'resolved' WHERE status = 'closed'")
    # Two reports racing could open the same problem twice; keep the first open, resolve the
    # others as duplicates, then let a partial unique index hold the rule.
    op.execute(
        "UPDATE stove_problems SET status = 'resolved', resolved_by = 'migration 0014', "
        "resolution_note = 'duplicate of an earlier open report', closed_at = reported_at "
        "WHERE status = 'open' AND EXISTS (SELECT 1 FROM stove_problems AS first "
        "WHERE first.stove_did = stove_problems.stove_did AND first.kind = stove_problems.kind "
        "AND first.status = 'open' AND first.id < stove_problems.id)"
    )
    op.create_index(
        "uq_stove_problems_open",
        "stove_problems",
        ["stove_did", "kind"],
        unique=True,
        postgresql_where=sa.text("status = 'open'"),
        sqlite_where=sa.text("status = 'open'"),
    )


def downgrade() -> None:
    op.drop_index("uq_stove_problems_open", table_name="stove_problems")
    # Resolved problems stay out of the open queue, as the status 0012's code knew.
    op.execute("UPDATE stove_problems SET status = 'closed' WHERE status = 'resolved'")
    op.drop_column("stove_problems", "resolution_note")  # SQLite 3.35+: ALTER TABLE DROP COLUMN
    op.drop_column("stove_problems", "resolved_by")
