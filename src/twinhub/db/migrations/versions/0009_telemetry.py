"""telemetry: device tokens, devices' live state, raw readings (partitioned by month on
PostgreSQL), rollups, and the protocols' telemetry declarations

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23
"""

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen: the stove protocol's telemetry declaration as this revision wrote it.
STOVE_TELEMETRY: dict[str, Any] = {
    "fields": {
        "session": {
            "type": "string",
            "enum": ["start", "end"],
            "description": "A cooking session starts or ends at this reading's time.",
        },
        "energyKwh": {
            "type": "number",
            "unit": "kWh",
            "min": 0,
            "max": 20,
            "description": "Energy used since the previous reading.",
        },
        "fuelKg": {
            "type": "number",
            "unit": "kg",
            "min": 0,
            "max": 20,
            "description": "Fuel (pellets) burnt since the previous reading.",
        },
        "meterKwh": {
            "type": "number",
            "unit": "kWh",
            "min": 0,
            "max": 1000000,
            "cumulative": True,
            "description": "The stove's cumulative energy meter.",
        },
        "temperatureC": {"type": "number", "unit": "°C", "min": -40, "max": 700},
        "batteryPct": {"type": "number", "unit": "%", "min": 0, "max": 100},
        "faultCode": {
            "type": "string",
            "enum": ["none", "overheat", "sensor", "meter", "power", "fan"],
        },
    }
}


STOVE = "did:ixo:protocol/clean-cooking"


def _json() -> sa.types.TypeEngine:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.add_column("protocols", sa.Column("telemetry", _json(), nullable=True))
    # The built-in stove protocol of an existing deployment learns what its stoves report.
    op.get_bind().execute(
        sa.text("UPDATE protocols SET telemetry = :t WHERE did = :did AND telemetry IS NULL"),
        {"t": json.dumps(STOVE_TELEMETRY), "did": STOVE},
    )
    op.create_table(
        "device_tokens",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("token_id", sa.String(length=16), nullable=False),
        sa.Column("domain_did", sa.String(length=200), nullable=False),
        sa.Column("secret_sha256", sa.String(length=64), nullable=False),
        sa.Column("label", sa.String(length=100), nullable=False),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["domain_did"], ["domains.did"], name=op.f("fk_device_tokens_domain_did_domains")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_device_tokens")),
        sa.UniqueConstraint("token_id", name=op.f("uq_device_tokens_token_id")),
    )
    op.create_index(op.f("ix_device_tokens_domain_did"), "device_tokens", ["domain_did"])
    op.create_table(
        "telemetry_devices",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("did", sa.String(length=200), nullable=False),
        sa.Column("last_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_seq", sa.BigInteger(), nullable=True),
        sa.Column("latest", _json(), nullable=False),
        sa.Column("meter", sa.Float(), nullable=True),
        sa.Column("readings", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["did"], ["domains.did"], name=op.f("fk_telemetry_devices_did_domains")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_telemetry_devices")),
        sa.UniqueConstraint("did", name=op.f("uq_telemetry_devices_did")),
    )
    if postgres:
        # Native range partitioning by month; partitions are made ahead by the store as
        # readings need them. The key must contain the partition column.
        op.execute(
            """
            CREATE TABLE telemetry_readings (
                device_id integer NOT NULL,
                seq bigint NOT NULL,
                time timestamptz NOT NULL,
                "values" jsonb NOT NULL,
                CONSTRAINT pk_telemetry_readings PRIMARY KEY (device_id, time, seq)
            ) PARTITION BY RANGE (time)
            """
        )
        op.execute(
            "CREATE INDEX ix_telemetry_readings_device_seq ON telemetry_readings (device_id, seq)"
        )
    else:
        op.create_table(
            "telemetry_readings",
            sa.Column("device_id", sa.Integer(), nullable=False),
            sa.Column("seq", sa.BigInteger(), nullable=False),
            sa.Column("time", sa.DateTime(timezone=True), nullable=False),
            sa.Column("values", _json(), nullable=False),
            sa.PrimaryKeyConstraint("device_id", "seq", name=op.f("pk_telemetry_readings")),
        )
        op.create_index(
            "ix_telemetry_readings_device_time", "telemetry_readings", ["device_id", "time", "seq"]
        )
    op.create_table(
        "telemetry_rollups",
        sa.Column("scope", sa.String(length=200), nullable=False),
        sa.Column("interval", sa.String(length=8), nullable=False),
        sa.Column("bucket", sa.DateTime(timezone=True), nullable=False),
        sa.Column("field", sa.String(length=64), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("sum", sa.Float(), nullable=False),
        sa.Column("min", sa.Float(), nullable=False),
        sa.Column("max", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint(
            "scope", "interval", "bucket", "field", name=op.f("pk_telemetry_rollups")
        ),
    )


def downgrade() -> None:
    op.drop_table("telemetry_rollups")
    op.drop_table("telemetry_readings")  # on PostgreSQL its partitions go with it
    op.drop_table("telemetry_devices")
    op.drop_index(op.f("ix_device_tokens_domain_did"), table_name="device_tokens")
    op.drop_table("device_tokens")
    op.drop_column("protocols", "telemetry")
