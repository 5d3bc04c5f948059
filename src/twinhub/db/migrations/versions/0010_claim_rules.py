"""claim rules: protocols' value constraints, one counted claim per stove and reporting
period, serial numbers unique per protocol, batch verification proposals

Existing rows are kept. Where an existing deployment already holds duplicates, the FIRST
(oldest) claim of a stove-period and the FIRST stove with a serial number keep the key; the
later ones are left out of the unique index (their `period` / `serial` stays NULL) and are
listed in the migration's log, so an operator can correct them. A later write of such a
stove's properties is held to the rule (409 while the serial is still taken).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-23
"""

import json
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen: the built-in protocols' constraints as this revision wrote them.
CLAIM_CONSTRAINTS: dict[str, Any] = {
    "reportType": {"enum": ["cooking", "fuel", "monitoring-period"]},
    "mealsCooked": {"minimum": 0, "maximum": 1000},
    "fuelKg": {"minimum": 0, "maximum": 1000},
    "fuelType": {"minLength": 1, "maxLength": 64},
    "channel": {"enum": ["ussd", "api", "app", "sms", "web"]},
}
STOVE_CONSTRAINTS: dict[str, Any] = {
    "efficiency": {"minimum": 0, "maximum": 1},
    "fuelType": {"minLength": 1, "maxLength": 64},
}

log = logging.getLogger("alembic.runtime.migration")
COUNTED = "status NOT IN ('rejected', 'invalidated')"
CLAIM_PROTOCOL = "did:ixo:protocol/clean-cooking-claim"
BUILTIN_CONSTRAINTS = {
    CLAIM_PROTOCOL: CLAIM_CONSTRAINTS,
    "did:ixo:protocol/clean-cooking": STOVE_CONSTRAINTS,
    "did:ixo:protocol/device": {"serialNumber": {"minLength": 1, "maxLength": 64}},
}


def _json() -> sa.types.TypeEngine:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _loaded(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _month(data: dict[str, Any], submitted: Any) -> str:
    start = data.get("periodStart")
    if isinstance(start, str):
        try:
            moment = datetime.fromisoformat(start.replace("Z", "+00:00"))
        except ValueError:
            moment = None
        if moment is not None:
            moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
            return f"{moment.astimezone(UTC):%Y-%m}"
    if isinstance(submitted, str):
        submitted = datetime.fromisoformat(submitted)
    return f"{submitted:%Y-%m}"


def _backfill_serials(bind: sa.Connection) -> None:
    rows = bind.execute(sa.text("SELECT did, class_did, properties FROM domains ORDER BY seq"))
    owner: dict[tuple[str, str], str] = {}
    updates: list[dict[str, str]] = []
    for did, class_did, properties in rows:
        serial = (_loaded(properties) or {}).get("serialNumber")
        if not isinstance(serial, str) or not serial:
            continue
        first = owner.setdefault((class_did, serial), did)
        if first == did:
            updates.append({"did": did, "serial": serial})
        else:
            log.warning("serial %r of %s is %s's already; left unindexed", serial, did, first)
    if updates:
        bind.execute(sa.text("UPDATE domains SET serial = :serial WHERE did = :did"), updates)


def _backfill_periods(bind: sa.Connection) -> None:
    rows = bind.execute(
        sa.text(
            "SELECT c.id, c.asset_did, c.data, c.submitted_at FROM claims c "
            "JOIN claim_collections k ON k.id = c.collection_id "
            "WHERE k.protocol_did = :protocol AND c.asset_did IS NOT NULL "
            "AND c.status NOT IN ('rejected', 'invalidated') "
            "ORDER BY c.seq"
        ),
        {"protocol": CLAIM_PROTOCOL},
    )
    owner: dict[tuple[str, str], str] = {}
    updates: list[dict[str, str]] = []
    for claim_id, asset, data, submitted in rows:
        period = _month(_loaded(data) or {}, submitted)
        first = owner.setdefault((asset, period), claim_id)
        if first == claim_id:
            updates.append({"id": claim_id, "period": period})
        else:
            log.warning(
                "claim %s repeats %s's %s of %s; left uncounted", claim_id, first, period, asset
            )
    if updates:
        bind.execute(sa.text("UPDATE claims SET period = :period WHERE id = :id"), updates)


def upgrade() -> None:
    bind = op.get_bind()
    op.add_column("protocols", sa.Column("constraints", _json(), nullable=True))
    for did, constraints in BUILTIN_CONSTRAINTS.items():
        bind.execute(
            sa.text(
                "UPDATE protocols SET constraints = :c WHERE did = :did AND constraints IS NULL"
            ),
            {"c": json.dumps(constraints), "did": did},
        )
    op.add_column("claims", sa.Column("period", sa.String(length=16), nullable=True))
    _backfill_periods(bind)
    op.create_index(
        "uq_claims_asset_period",
        "claims",
        ["asset_did", "period"],
        unique=True,
        postgresql_where=sa.text(COUNTED),
        sqlite_where=sa.text(COUNTED),
    )
    op.add_column("domains", sa.Column("serial", sa.String(length=200), nullable=True))
    _backfill_serials(bind)
    op.create_index("uq_domains_class_serial", "domains", ["class_did", "serial"], unique=True)
    op.add_column("proposals", sa.Column("items_total", sa.Integer(), nullable=True))
    op.add_column("proposals", sa.Column("items_done", sa.Integer(), nullable=True))
    op.create_table(
        "proposal_items",
        sa.Column("proposal_id", sa.Integer(), nullable=False),
        sa.Column("domain_did", sa.String(length=200), nullable=False),
        sa.Column("done", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["proposal_id"], ["proposals.id"], name=op.f("fk_proposal_items_proposal_id_proposals")
        ),
        sa.PrimaryKeyConstraint("proposal_id", "domain_did", name=op.f("pk_proposal_items")),
    )
    op.create_index(
        "ix_proposal_items_pending", "proposal_items", ["proposal_id", "done", "domain_did"]
    )


def downgrade() -> None:
    op.drop_index("ix_proposal_items_pending", table_name="proposal_items")
    op.drop_table("proposal_items")
    op.drop_column("proposals", "items_done")
    op.drop_column("proposals", "items_total")
    op.drop_index("uq_domains_class_serial", table_name="domains")
    op.drop_column("domains", "serial")
    op.drop_index("uq_claims_asset_period", table_name="claims")
    op.drop_column("claims", "period")
    op.drop_column("protocols", "constraints")
