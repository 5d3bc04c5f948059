"""customers: USSD accounts with encrypted PINs and lockout counters

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "customers",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("customer_id", sa.String(length=16), nullable=False),
        sa.Column("phone_number", sa.String(length=16), nullable=False),
        sa.Column("full_name", sa.String(length=80), nullable=False),
        sa.Column("pin_ciphertext", sa.LargeBinary(), nullable=False),
        sa.Column("failed_pin_attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("locked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_login_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_customers")),
        sa.UniqueConstraint("customer_id", name=op.f("uq_customers_customer_id")),
        sa.UniqueConstraint("phone_number", name=op.f("uq_customers_phone_number")),
    )


def downgrade() -> None:
    op.drop_table("customers")
