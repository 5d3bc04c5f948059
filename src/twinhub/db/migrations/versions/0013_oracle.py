"""oracle: methodologies on protocols, token decimals, the oracle's signed decisions (with
their leases) and monitoring periods

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-23
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from twinhub.db.models import UtcDateTime
from twinhub.mrv.builtin import CLEAN_COOKING, builtin_document

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CLAIM_PROTOCOL = "did:ixo:protocol/clean-cooking-claim"
STOVE_PROTOCOL = "did:ixo:protocol/clean-cooking"


def _json() -> sa.types.TypeEngine:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    bind = op.get_bind()
    op.add_column("protocols", sa.Column("methodology", _json(), nullable=True))
    # The built-in claim protocol of an existing deployment computes its credits too.
    bind.execute(
        sa.text("UPDATE protocols SET methodology = :m WHERE did = :did AND methodology IS NULL"),
        {"m": json.dumps(builtin_document(CLEAN_COOKING)), "did": CLAIM_PROTOCOL},
    )
    # Stoves record the household size the methodology's baseline cap needs.
    row = bind.execute(
        sa.text("SELECT properties FROM protocols WHERE did = :did"), {"did": STOVE_PROTOCOL}
    ).first()
    if row is not None:
        properties = row[0] if isinstance(row[0], dict) else json.loads(row[0])
        if "householdSize" not in properties:
            properties["householdSize"] = "integer"
            bind.execute(
                sa.text("UPDATE protocols SET properties = :p WHERE did = :did"),
                {"p": json.dumps(properties), "did": STOVE_PROTOCOL},
            )
    # Tokens minted before this revision were counted in whole units: they keep 0 decimals.
    op.add_column(
        "credit_tokens",
        sa.Column("decimals", sa.Integer(), nullable=False, server_default="0"),
    )
    op.create_table(
        "oracle_decisions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("claim_id", sa.String(length=100), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("owner", sa.String(length=100), nullable=True),
        sa.Column("lease_until", UtcDateTime(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("oracle", sa.String(length=200), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        sa.Column("reasons", _json(), nullable=False),
        sa.Column("inputs_digest", sa.String(length=64), nullable=True),
        sa.Column("methodology", _json(), nullable=True),
        sa.Column("amount", sa.BigInteger(), nullable=True),
        sa.Column("document", sa.Text(), nullable=True),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("decided_at", UtcDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["claim_id"], ["claims.id"], name=op.f("fk_oracle_decisions_claim_id_claims")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_oracle_decisions")),
        sa.UniqueConstraint("claim_id", name=op.f("uq_oracle_decisions_claim_id")),
    )
    op.create_table(
        "monitoring_periods",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("project_did", sa.String(length=200), nullable=False),
        sa.Column("start", sa.Date(), nullable=False),
        sa.Column("end", sa.Date(), nullable=False),
        sa.Column("claim_id", sa.String(length=100), nullable=True),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("report_digest", sa.String(length=64), nullable=False),
        sa.Column("report", sa.Text(), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_monitoring_periods")),
        sa.UniqueConstraint(
            "project_did", "start", "end", name=op.f("uq_monitoring_periods_project_did")
        ),
    )


def downgrade() -> None:
    op.drop_table("monitoring_periods")
    op.drop_table("oracle_decisions")
    op.drop_column("credit_tokens", "decimals")
    op.drop_column("protocols", "methodology")
