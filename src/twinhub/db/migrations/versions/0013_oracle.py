"""oracle: methodologies on protocols, token decimals, the oracle's signed decisions (with
their leases) and monitoring periods

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-23
"""

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen: the built-in clean-cooking methodology document as this revision wrote it.
CLEAN_COOKING_METHODOLOGY: dict[str, Any] = {
    "id": "clean-cooking-mecd",
    "version": "1.0.0",
    "title": "Emission reductions of metered clean cooking (electric and fuel stoves)",
    "reference": "Modelled on Gold Standard's methodology for Metered & Measured Energy Cooking "
    "Devices (MECD), case 1 (project devices whose efficiency a water boiling test "
    "measures). Values below are defaults gathered from public sources; check each "
    "against the Gold Standard text and the project's approved design document "
    "before crediting.",
    "parameters": {
        "fNRB": {
            "value": 0.88,
            "unit": "fraction",
            "source": "Fraction of non-renewable biomass for Zambia, UNFCCC "
            "standardized baseline ASB0002-2017 (the value in ixo's "
            "public SDK fixtures for this programme)",
        },
        "EF_CO2_baseline": {
            "value": 165.22,
            "unit": "tCO2/TJ",
            "source": "CO2 emission factor of the displaced fuel "
            "(charcoal), as used by published MECD "
            "calculators; compare IPCC 2006 Guidelines vol. "
            "2 table 2.5",
        },
        "EF_nonCO2_baseline": {
            "value": 44.83,
            "unit": "tCO2e/TJ",
            "source": "Non-CO2 (CH4, N2O) emission factor of the "
            "displaced fuel (charcoal), as used by "
            "published MECD calculators; compare IPCC "
            "2006 Guidelines vol. 2 table 2.5",
        },
        "NCV_baseline": {
            "value": 29.5,
            "unit": "TJ/Gg",
            "source": "Net calorific value of the displaced fuel "
            "(charcoal), IPCC 2006 Guidelines vol. 2 table 1.2 "
            "default",
        },
        "eta_baseline": {
            "value": 0.2,
            "unit": "fraction",
            "source": "Efficiency of the baseline charcoal stove, MECD "
            "default as used by published calculators",
        },
        "NCV_project_fuel": {
            "value": 15.6,
            "unit": "TJ/Gg",
            "source": "Net calorific value of the project fuel "
            "(biomass pellets), IPCC 2006 Guidelines vol. "
            "2 table 1.2 default for wood",
        },
        "EF_project_fuel": {
            "value": 9.46,
            "unit": "tCO2e/TJ",
            "source": "Non-CO2 emission factor of burning renewable "
            "biomass pellets (their CO2 is not counted), "
            "IPCC 2006 Guidelines vol. 2 table 2.5 default "
            "for wood",
        },
        "EF_grid": {
            "value": 0.5,
            "unit": "tCO2/MWh",
            "source": "Grid emission factor; 0.5 is the worked check's value: "
            "set the host country's combined-margin factor (UNFCCC "
            "tool 07) before crediting",
        },
        "TDL": {
            "value": 0.05,
            "unit": "fraction",
            "source": "Technical transmission and distribution losses of the "
            "grid, MECD default as used by published calculators",
        },
        "leakage_fraction": {
            "value": 0.05,
            "unit": "fraction",
            "source": "Leakage as a share of (BE - PE), the MECD default option",
        },
        "cap_kwh_per_person_day": {
            "value": 1.0,
            "unit": "kWh/person/day",
            "source": "Cap on metered electricity counted in the baseline, MECD default",
        },
        "cap_fuel_GJ_per_person_day": {
            "value": 0.0045,
            "unit": "GJ/person/day",
            "source": "Cap on metered fuel energy counted in the baseline, MECD default",
        },
        "min_active_days": {
            "value": 10,
            "unit": "days",
            "source": "Usage threshold (programme rule): a stove with "
            "fewer cooking days in a period is excluded for "
            "missing data",
        },
        "max_sessions_per_day": {
            "value": 8,
            "unit": "sessions/day",
            "source": "Usage threshold (programme rule): more is implausible for one household",
        },
        "max_kwh_per_session": {
            "value": 3.0,
            "unit": "kWh/session",
            "source": "Usage threshold (programme rule): a 1 kW cooker used for three hours",
        },
        "max_fuel_kg_per_session": {
            "value": 3.0,
            "unit": "kg/session",
            "source": "Usage threshold (programme rule): a full pellet hopper",
        },
        "corroboration_tolerance": {
            "value": 0.2,
            "unit": "fraction",
            "source": "Usage threshold (programme rule): a "
            "claim agrees with telemetry when "
            "within this share",
        },
    },
    "inputs": {
        "energy_kwh": {
            "type": "double",
            "unit": "kWh",
            "description": "Electricity the stove's meter recorded in the period",
        },
        "fuel_kg": {
            "type": "double",
            "unit": "kg",
            "description": "Project fuel the stove's meter recorded in the period",
        },
        "stove_efficiency": {
            "type": "double",
            "unit": "fraction",
            "description": "Tested thermal efficiency of the project "
            "stove type (water boiling test), from the "
            "registry",
        },
        "household_size": {
            "type": "int",
            "unit": "persons",
            "description": "People in the household, from the registry",
        },
        "days": {"type": "int", "unit": "days", "description": "Days in the monitoring period"},
    },
    "formulas": [
        {
            "name": "EF_baseline",
            "unit": "tCO2e/TJ",
            "expression": "(EF_CO2_baseline * fNRB + EF_nonCO2_baseline) / eta_baseline",
            "description": "Baseline emissions per TJ of useful energy delivered by the "
            "displaced stove",
        },
        {
            "name": "person_days",
            "unit": "person-days",
            "expression": "double(household_size) * double(days)",
            "description": "Household size times days in the period",
        },
        {
            "name": "baseline_kwh",
            "unit": "kWh",
            "expression": "energy_kwh < cap_kwh_per_person_day * person_days ? energy_kwh "
            ": cap_kwh_per_person_day * person_days",
            "description": "Metered electricity counted in the baseline, capped per person per day",
        },
        {
            "name": "fuel_GJ",
            "unit": "GJ",
            "expression": "fuel_kg / 1000.0 * NCV_project_fuel",
            "description": "Energy content of the metered project fuel (t x GJ/t)",
        },
        {
            "name": "baseline_fuel_GJ",
            "unit": "GJ",
            "expression": "fuel_GJ < cap_fuel_GJ_per_person_day * person_days ? fuel_GJ : "
            "cap_fuel_GJ_per_person_day * person_days",
            "description": "Project fuel energy counted in the baseline, capped per person per day",
        },
        {
            "name": "useful_energy_TJ",
            "unit": "TJ",
            "expression": "(baseline_kwh / 1000.0 * 0.0036 + baseline_fuel_GJ / 1000.0) * "
            "stove_efficiency",
            "description": "Useful cooking energy the project stove delivered (MWh x "
            "0.0036 TJ/MWh, GJ / 1000), times its efficiency",
        },
        {
            "name": "BE",
            "unit": "tCO2e",
            "expression": "useful_energy_TJ * EF_baseline",
            "description": "Baseline emissions: what the displaced stove would have "
            "emitted for the same useful energy",
        },
        {
            "name": "PE",
            "unit": "tCO2e",
            "expression": "energy_kwh / 1000.0 * EF_grid * (1.0 + TDL) + fuel_GJ / 1000.0 "
            "* EF_project_fuel",
            "description": "Project emissions from the raw metered values (no cap)",
        },
        {
            "name": "LE",
            "unit": "tCO2e",
            "expression": "BE > PE ? leakage_fraction * (BE - PE) : 0.0",
            "description": "Leakage",
        },
        {
            "name": "ER",
            "unit": "tCO2e",
            "expression": "BE - PE - LE > 0.0 ? BE - PE - LE : 0.0",
            "description": "Emission reductions; a negative result counts as zero",
        },
    ],
    "result": "ER",
}


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
        {"m": json.dumps(CLEAN_COOKING_METHODOLOGY), "did": CLAIM_PROTOCOL},
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
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("oracle", sa.String(length=200), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        sa.Column("reasons", _json(), nullable=False),
        sa.Column("inputs_digest", sa.String(length=64), nullable=True),
        sa.Column("methodology", _json(), nullable=True),
        sa.Column("amount", sa.BigInteger(), nullable=True),
        sa.Column("document", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
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
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
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
