"""stoves name their model and carry their meter's record: the clean-cooking stove protocol
of an existing deployment gains `stoveModel` (a model of the project's design document)
and `meter` (the meter's calibration record) as properties

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-27
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STOVE_PROTOCOL = "did:ixo:protocol/clean-cooking"
ADDED = {"stoveModel": "string", "meter": "object"}


def _change(add: bool) -> None:
    bind = op.get_bind()
    row = bind.execute(
        sa.text("SELECT properties FROM protocols WHERE did = :did"), {"did": STOVE_PROTOCOL}
    ).first()
    if row is None:  # a new database: the built-in protocol is created with them
        return
    properties = row[0] if isinstance(row[0], dict) else json.loads(row[0])
    for name, kind in ADDED.items():
        if add:
            properties.setdefault(name, kind)
        else:
            properties.pop(name, None)
    bind.execute(
        sa.text("UPDATE protocols SET properties = :p WHERE did = :did"),
        {"p": json.dumps(properties), "did": STOVE_PROTOCOL},
    )


def upgrade() -> None:
    _change(add=True)


def downgrade() -> None:
    _change(add=False)
