"""a stove's household owner as an indexed column (a copy of properties.ownerCustomerId)

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-23
"""

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _owner(properties: Any) -> str | None:
    """properties.ownerCustomerId of a stored record (JSON text on SQLite, a dict on PG)."""
    if isinstance(properties, str):
        properties = json.loads(properties)
    value = properties.get("ownerCustomerId") if isinstance(properties, dict) else None
    return value if isinstance(value, str) and value else None


def upgrade() -> None:
    # Plain ALTER TABLE on both databases (no batch copy: SQLite would have to drop and
    # rebuild `domains`, which other tables reference).
    op.add_column("domains", sa.Column("owner_customer_id", sa.String(length=16), nullable=True))
    op.create_index(
        op.f("ix_domains_owner_customer_id"), "domains", ["owner_customer_id"], unique=False
    )
    # Stoves that already name their household in the property. Stoves whose household was
    # told by a customer DID as first controller (the way before 0011) are adopted through
    # the ledger when the platform starts (services/ownership.py), so the ledger stays the
    # evidence of every record's change.
    bind = op.get_bind()
    domains = sa.table(
        "domains",
        sa.column("did", sa.String),
        sa.column("properties", sa.JSON),
        sa.column("owner_customer_id", sa.String),
    )
    named = sa.cast(domains.c.properties, sa.Text).like("%ownerCustomerId%")
    rows = bind.execute(sa.select(domains.c.did, domains.c.properties).where(named)).all()
    for did, properties in rows:
        owner = _owner(properties)
        if owner is not None and len(owner) <= 16:
            bind.execute(
                domains.update().where(domains.c.did == did).values(owner_customer_id=owner)
            )


def downgrade() -> None:
    op.drop_index(op.f("ix_domains_owner_customer_id"), table_name="domains")
    op.drop_column("domains", "owner_customer_id")  # SQLite 3.35+: ALTER TABLE DROP COLUMN
