"""The verification workflow (issue 29): step credentials in `credentials` (no claim; a
kind, a project, a period, a digest), monitoring periods with a state, a proponent, the
frozen inputs and the verifier's findings, project documents, attachments by content hash,
and the registry-wide table of credited stove-days.

Monitoring periods made before this revision minted at once: they are `issued`.

Revision ID: 0021
Revises: 0020, 0022
Create Date: 2026-11-27
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | tuple[str, ...] | None = ("0020", "0022")  # merged here; the lead re-chains
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("credentials", schema=None) as batch_op:
        batch_op.alter_column("claim_id", existing_type=sa.String(100), nullable=True)
        batch_op.add_column(sa.Column("kind", sa.String(80), nullable=True))
        batch_op.add_column(sa.Column("project_did", sa.String(200), nullable=True))
        batch_op.add_column(sa.Column("period_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("digest", sa.String(80), nullable=True))
        batch_op.create_index("ix_credentials_project_did", ["project_did"], unique=False)
        batch_op.create_index("ix_credentials_period_id", ["period_id"], unique=False)
    with op.batch_alter_table("monitoring_periods", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("state", sa.String(16), nullable=False, server_default="issued")
        )
        batch_op.add_column(sa.Column("proponent", sa.String(200), nullable=True))
        batch_op.add_column(sa.Column("inputs", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("findings", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "project_documents",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("project_did", sa.String(200), nullable=False),
        sa.Column("digest", sa.String(80), nullable=False),
        sa.Column("document", sa.Text(), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_project_documents"),
        sa.UniqueConstraint("project_did", "digest", name="uq_project_documents_project_did"),
    )
    op.create_index(
        "ix_project_documents_project_did", "project_documents", ["project_did"], unique=False
    )
    op.create_table(
        "attachments",
        sa.Column("digest", sa.String(80), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("media_type", sa.String(100), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("digest", name="pk_attachments"),
    )
    op.create_table(
        "credited_days",
        sa.Column("device", sa.String(200), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("stove_did", sa.String(200), nullable=False),
        sa.Column("project_did", sa.String(200), nullable=False),
        sa.Column("period_id", sa.Integer(), nullable=True),
        sa.Column("claim_id", sa.String(100), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("device", "day", name="pk_credited_days"),
    )
    op.create_index("ix_credited_days_period_id", "credited_days", ["period_id"], unique=False)
    op.create_index("ix_credited_days_claim_id", "credited_days", ["claim_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_credited_days_claim_id", table_name="credited_days")
    op.drop_index("ix_credited_days_period_id", table_name="credited_days")
    op.drop_table("credited_days")
    op.drop_table("attachments")
    op.drop_index("ix_project_documents_project_did", table_name="project_documents")
    op.drop_table("project_documents")
    with op.batch_alter_table("monitoring_periods", schema=None) as batch_op:
        batch_op.drop_column("updated_at")
        batch_op.drop_column("findings")
        batch_op.drop_column("inputs")
        batch_op.drop_column("proponent")
        batch_op.drop_column("state")
    # Step credentials speak for no claim: the older schema cannot hold them.
    op.execute("DELETE FROM credentials WHERE claim_id IS NULL")
    with op.batch_alter_table("credentials", schema=None) as batch_op:
        batch_op.drop_index("ix_credentials_period_id")
        batch_op.drop_index("ix_credentials_project_did")
        batch_op.drop_column("digest")
        batch_op.drop_column("period_id")
        batch_op.drop_column("project_did")
        batch_op.drop_column("kind")
        batch_op.alter_column("claim_id", existing_type=sa.String(100), nullable=False)
