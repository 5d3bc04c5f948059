"""collection members and agent deposits (ixo's MemberBudget and AgentDepositBalance)

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23
"""

import json
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    members = op.create_table(
        "collection_members",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("collection_id", sa.Integer(), nullable=False),
        sa.Column("member", sa.String(length=200), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("period_seconds", sa.BigInteger(), nullable=False),
        sa.Column("spend_limit", sa.BigInteger(), nullable=True),
        sa.Column("spent", sa.BigInteger(), nullable=False),
        sa.Column("period_reset_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("joined_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["collection_id"],
            ["claim_collections.id"],
            name=op.f("fk_collection_members_collection_id_claim_collections"),
        ),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_collection_members")),
        sa.UniqueConstraint(
            "collection_id", "member", name=op.f("uq_collection_members_collection_id")
        ),
    )
    op.create_index(
        "ix_collection_members_collection_seq", "collection_members", ["collection_id", "seq"]
    )
    op.create_table(
        "agent_deposits",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("collection_id", sa.Integer(), nullable=False),
        sa.Column("agent", sa.String(length=200), nullable=False),
        sa.Column("denom", sa.String(length=64), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("withdrawable_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["collection_id"],
            ["claim_collections.id"],
            name=op.f("fk_agent_deposits_collection_id_claim_collections"),
        ),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_agent_deposits")),
        sa.UniqueConstraint(
            "collection_id", "agent", "denom", name=op.f("uq_agent_deposits_collection_id")
        ),
    )
    _backfill(members)


def _backfill(members: sa.Table) -> None:
    """Members of the collections that exist already: their evaluators, then the agents of
    their claims in submission order, as the running platform would have added them."""
    bind = op.get_bind()
    now = datetime.now(UTC)
    rows: list[dict[str, object]] = []
    seen: set[tuple[int, str]] = set()

    def add(collection_id: int, member: str, role: str) -> None:
        if (collection_id, member) not in seen:
            seen.add((collection_id, member))
            rows.append(
                {
                    "collection_id": collection_id,
                    "member": member,
                    "role": role,
                    "period_seconds": 0,
                    "spent": 0,
                    "joined_at": now,
                }
            )

    collections = sa.table(
        "claim_collections", sa.column("id", sa.Integer), sa.column("evaluators", sa.JSON)
    )
    for collection_id, evaluators in bind.execute(
        sa.select(collections.c.id, collections.c.evaluators).order_by(collections.c.id)
    ):
        if isinstance(evaluators, str):
            evaluators = json.loads(evaluators)
        for evaluator in evaluators or []:
            add(collection_id, evaluator, "evaluator")
    claims = sa.table(
        "claims",
        sa.column("collection_id", sa.Integer),
        sa.column("agent", sa.String),
        sa.column("seq", sa.BigInteger),
    )
    for collection_id, agent in bind.execute(
        sa.select(claims.c.collection_id, claims.c.agent).order_by(claims.c.seq)
    ):
        add(collection_id, agent, "agent")
    if rows:
        op.bulk_insert(members, rows)


def downgrade() -> None:
    op.drop_table("agent_deposits")
    op.drop_index("ix_collection_members_collection_seq", table_name="collection_members")
    op.drop_table("collection_members")
