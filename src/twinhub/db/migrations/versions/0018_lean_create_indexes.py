"""domains: parent and owner indexed only where set; relationships: no index of the source alone

Every create wrote an index entry for its parent and its owner even when it had neither
(most devices), and a relationship wrote its source into two indexes: its own and the
unique (source, type, target) one, whose first column already serves every read by
source. The reads by parent and by owner always ask for a value, which implies NOT NULL,
so the partial indexes serve them as before. A create writes up to three index entries
fewer (of about twenty across its rows).

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PARTIAL = (
    ("ix_domains_parent_did", "parent_did"),
    ("ix_domains_owner_customer_id", "owner_customer_id"),
)


def upgrade() -> None:
    op.drop_index("ix_relationships_source_did", table_name="relationships")
    for name, column in _PARTIAL:
        op.drop_index(name, table_name="domains")
        where = sa.text(f"{column} IS NOT NULL")
        op.create_index(name, "domains", [column], postgresql_where=where, sqlite_where=where)


def downgrade() -> None:
    for name, column in _PARTIAL:
        op.drop_index(name, table_name="domains")
        op.create_index(name, "domains", [column])
    op.create_index("ix_relationships_source_did", "relationships", ["source_did"])
