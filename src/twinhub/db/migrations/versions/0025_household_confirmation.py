"""stoves record which survey answer confirmed their household size

The built-in stove protocol declares `householdSizeConfirmation` (an object: the survey,
the USSD session, when, and the size recorded before), which a survey's answer writes
beside `householdSize` in a ledger write; a period reports each stove's household size as
confirmed or as enrolled.

Revision ID: 0025
Revises: 0023
Create Date: 2026-11-28
"""

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STOVE_PROTOCOL = "did:ixo:protocol/clean-cooking"
PROPERTY, KIND = "householdSizeConfirmation", "object"


def _load(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _stove(adding: bool) -> None:
    bind = op.get_bind()
    row = bind.execute(
        sa.text("SELECT properties FROM protocols WHERE did = :did"), {"did": STOVE_PROTOCOL}
    ).first()
    if row is None:
        return
    properties = dict(_load(row[0]) or {})
    if adding:
        properties.setdefault(PROPERTY, KIND)
    else:
        properties.pop(PROPERTY, None)
    bind.execute(
        sa.text("UPDATE protocols SET properties = :p WHERE did = :did"),
        {"p": json.dumps(properties), "did": STOVE_PROTOCOL},
    )


def upgrade() -> None:
    _stove(adding=True)


def downgrade() -> None:
    _stove(adding=False)
