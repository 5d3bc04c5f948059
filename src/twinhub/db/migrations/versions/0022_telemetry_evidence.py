"""telemetry evidence: each reading's receipt time and the signed message it came in,
devices' Ed25519 keys, quarantined readings, and evidence holds that outlive retention

Readings stored before keep no receipt time (NULL: not known). A receipt keeps a signed
batch or MQTT message exactly as it arrived with its signatures, so a reading's signature
can be checked again later. Quarantined readings (before the device's enrolment, or too far
from their receipt time) live apart from the readings: no partition, rollup or credit is
ever made of them.

Revision ID: 0022
Revises: 0019
Create Date: 2026-11-27
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0022"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _big_id() -> sa.types.TypeEngine:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    # On PostgreSQL the partitioned table passes the columns to every partition.
    op.add_column(
        "telemetry_readings", sa.Column("received_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column("telemetry_readings", sa.Column("receipt_id", sa.BigInteger(), nullable=True))
    op.create_table(
        "telemetry_receipts",
        sa.Column("id", _big_id(), autoincrement=True, nullable=False),
        sa.Column("device_id", sa.Integer(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("first_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("signatures", _json(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_telemetry_receipts")),
    )
    op.create_index(
        "ix_telemetry_receipts_device_last", "telemetry_receipts", ["device_id", "last_time"]
    )
    op.create_table(
        "device_keys",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("domain_did", sa.String(length=200), nullable=False),
        sa.Column("public_key", sa.String(length=100), nullable=False),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["domain_did"], ["domains.did"], name=op.f("fk_device_keys_domain_did_domains")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_device_keys")),
    )
    op.create_index(op.f("ix_device_keys_domain_did"), "device_keys", ["domain_did"])
    op.create_index(
        "uq_device_keys_current",
        "device_keys",
        ["domain_did"],
        unique=True,
        postgresql_where=sa.text("revoked_at IS NULL"),
        sqlite_where=sa.text("revoked_at IS NULL"),
    )
    op.create_table(
        "telemetry_quarantine",
        sa.Column("id", _big_id(), autoincrement=True, nullable=False),
        sa.Column("device_did", sa.String(length=200), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("values", _json(), nullable=False),
        sa.Column("reason", sa.String(length=200), nullable=False),
        sa.Column("source", sa.String(length=8), nullable=False),
        sa.Column("receipt_id", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_telemetry_quarantine")),
        sa.UniqueConstraint("device_did", "seq", name=op.f("uq_telemetry_quarantine_device_did")),
    )
    op.create_table(
        "evidence_holds",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("holder", sa.String(length=200), nullable=False),
        sa.Column("device_did", sa.String(length=200), nullable=False),
        sa.Column("start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("end", sa.DateTime(timezone=True), nullable=False),
        sa.Column("keep_until", sa.Date(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_evidence_holds")),
        sa.UniqueConstraint("holder", "device_did", name=op.f("uq_evidence_holds_holder")),
    )
    op.create_index(op.f("ix_evidence_holds_device_did"), "evidence_holds", ["device_did"])


def downgrade() -> None:
    op.drop_index(op.f("ix_evidence_holds_device_did"), table_name="evidence_holds")
    op.drop_table("evidence_holds")
    op.drop_table("telemetry_quarantine")
    op.drop_index("uq_device_keys_current", table_name="device_keys")
    op.drop_index(op.f("ix_device_keys_domain_did"), table_name="device_keys")
    op.drop_table("device_keys")
    op.drop_index("ix_telemetry_receipts_device_last", table_name="telemetry_receipts")
    op.drop_table("telemetry_receipts")
    op.drop_column("telemetry_readings", "receipt_id")
    op.drop_column("telemetry_readings", "received_at")
