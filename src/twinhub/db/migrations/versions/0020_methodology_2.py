"""methodology 2.0.0 for the built-in claim protocol; stoves record their model and meter

The built-in clean-cooking claim protocol of an existing deployment still carries the
methodology 1.0.0 that revision 0013 wrote: it moves to 2.0.0 (case 1 and case 2 per stove
model, the meter register as the measure, the conservativeness rules), unless an operator
replaced it with another methodology. The built-in stove protocol declares `stoveModel`
and `meter` (the properties the methodology reads) and the telemetry field `meterEvent`
(a declared register reset). Reports issued before keep naming 1.0.0 and its digest.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-27
"""

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CLAIM_PROTOCOL = "did:ixo:protocol/clean-cooking-claim"
STOVE_PROTOCOL = "did:ixo:protocol/clean-cooking"
STOVE_PROPERTIES = {"stoveModel": "string", "meter": "object"}
METER_EVENT: dict[str, Any] = {
    "type": "string",
    "enum": ["reset"],
    "description": "The meter's register was reset to zero at this reading: the register "
    "counts again from zero (a declared reset, mrv/meter.py).",
}

# Frozen: the two methodology documents as this revision knows them.
CLEAN_COOKING_1_0_0: dict[str, Any] = {
    "id": "clean-cooking-mecd",
    "version": "1.0.0",
    "title": "Emission reductions of metered clean cooking (electric and fuel stoves)",
    "reference": "Modelled on Gold Standard's methodology for Metered & Measured Energy "
    "Cooking Devices (MECD), case 1 (project devices whose efficiency a water "
    "boiling test measures). Values below are defaults gathered from public "
    "sources; check each against the Gold Standard text and the project's "
    "approved design document before crediting.",
    "parameters": {
        "fNRB": {
            "value": 0.88,
            "unit": "fraction",
            "source": "Fraction of non-renewable biomass for Zambia, UNFCCC "
            "standardized baseline ASB0002-2017 (the value in "
            "ixo's public SDK fixtures for this programme)",
        },
        "EF_CO2_baseline": {
            "value": 165.22,
            "unit": "tCO2/TJ",
            "source": "CO2 emission factor of the displaced fuel "
            "(charcoal), as used by published MECD "
            "calculators; compare IPCC 2006 Guidelines "
            "vol. 2 table 2.5",
        },
        "EF_nonCO2_baseline": {
            "value": 44.83,
            "unit": "tCO2e/TJ",
            "source": "Non-CO2 (CH4, N2O) emission factor of "
            "the displaced fuel (charcoal), as used "
            "by published MECD calculators; compare "
            "IPCC 2006 Guidelines vol. 2 table 2.5",
        },
        "NCV_baseline": {
            "value": 29.5,
            "unit": "TJ/Gg",
            "source": "Net calorific value of the displaced fuel "
            "(charcoal), IPCC 2006 Guidelines vol. 2 "
            "table 1.2 default",
        },
        "eta_baseline": {
            "value": 0.2,
            "unit": "fraction",
            "source": "Efficiency of the baseline charcoal stove, "
            "MECD default as used by published "
            "calculators",
        },
        "NCV_project_fuel": {
            "value": 15.6,
            "unit": "TJ/Gg",
            "source": "Net calorific value of the project fuel "
            "(biomass pellets), IPCC 2006 Guidelines "
            "vol. 2 table 1.2 default for wood",
        },
        "EF_project_fuel": {
            "value": 9.46,
            "unit": "tCO2e/TJ",
            "source": "Non-CO2 emission factor of burning "
            "renewable biomass pellets (their CO2 is "
            "not counted), IPCC 2006 Guidelines vol. 2 "
            "table 2.5 default for wood",
        },
        "EF_grid": {
            "value": 0.5,
            "unit": "tCO2/MWh",
            "source": "Grid emission factor; 0.5 is the worked check's "
            "value: set the host country's combined-margin "
            "factor (UNFCCC tool 07) before crediting",
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
            "source": "Usage threshold (programme rule): a stove "
            "with fewer cooking days in a period is "
            "excluded for missing data",
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
            "source": "Usage threshold (programme rule): "
            "a claim agrees with telemetry "
            "when within this share",
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
            "description": "Tested thermal efficiency of the "
            "project stove type (water boiling "
            "test), from the registry",
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
            "description": "Baseline emissions per TJ of useful energy delivered by "
            "the displaced stove",
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
            "expression": "energy_kwh < cap_kwh_per_person_day * person_days ? "
            "energy_kwh : cap_kwh_per_person_day * person_days",
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
            "expression": "fuel_GJ < cap_fuel_GJ_per_person_day * person_days ? "
            "fuel_GJ : cap_fuel_GJ_per_person_day * person_days",
            "description": "Project fuel energy counted in the baseline, capped per person per day",
        },
        {
            "name": "useful_energy_TJ",
            "unit": "TJ",
            "expression": "(baseline_kwh / 1000.0 * 0.0036 + baseline_fuel_GJ / "
            "1000.0) * stove_efficiency",
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
            "expression": "energy_kwh / 1000.0 * EF_grid * (1.0 + TDL) + fuel_GJ / "
            "1000.0 * EF_project_fuel",
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
CLEAN_COOKING_2_0_0: dict[str, Any] = {
    "id": "clean-cooking-mecd",
    "version": "2.0.0",
    "title": "Emission reductions of metered clean cooking (electric and fuel stoves)",
    "reference": "Modelled on Gold Standard's methodology for Metered & Measured Energy "
    "Cooking Devices (MECD): case 1 (project devices whose efficiency a water "
    "boiling test measures) and case 2 (specific consumption of the baseline "
    "and project stoves from a cooking test), chosen per stove model by the "
    "project's design document; the meter register is the measure. Values "
    "below are defaults gathered from public sources, each naming its source; "
    "a project's design document and the country defaults table set the "
    "country's fNRB and grid factor. Check each against the Gold Standard text "
    "and the project's approved design document before crediting.",
    "parameters": {
        "fNRB": {
            "value": 0.88,
            "unit": "fraction",
            "source": "Placeholder default: fraction of non-renewable "
            "biomass for Zambia, UNFCCC standardized baseline "
            "ASB0002-2017, as cited in ixo's public SDK test "
            "setup for the SupaMoto programme. A project takes "
            "its country's value from its design document or the "
            "country defaults table "
            "(mrv/data/country_defaults.json); this default is "
            "reported as a placeholder",
        },
        "EF_grid": {
            "value": 0.5,
            "unit": "tCO2/MWh",
            "source": "Placeholder default: the worked check's grid "
            "emission factor. A project takes its host "
            "country's combined-margin factor (UNFCCC tool 07) "
            "from its design document or the country defaults "
            "table; this default is reported as a placeholder",
        },
        "TDL": {
            "value": 0.05,
            "unit": "fraction",
            "source": "Technical transmission and distribution losses of the "
            "grid, MECD default as used by published calculators "
            "(source not checked against the MECD text)",
        },
        "EF_CO2_wood": {
            "value": 112.0,
            "unit": "tCO2/TJ",
            "source": "CO2 emission factor of wood/wood waste, IPCC "
            "2006 Guidelines vol. 2 (Energy) ch. 2 table "
            "2.5, residential default (112,000 kg/TJ)",
        },
        "EF_nonCO2_wood": {
            "value": 9.46,
            "unit": "tCO2e/TJ",
            "source": "CH4 300 kg/TJ and N2O 4 kg/TJ of wood/wood "
            "waste, IPCC 2006 Guidelines vol. 2 "
            "(Energy) ch. 2 table 2.5, residential "
            "default, with IPCC AR5 100-year GWPs (CH4 "
            "28, N2O 265): 8.4 + 1.06",
        },
        "eta_baseline_wood": {
            "value": 0.1,
            "unit": "fraction",
            "source": "Efficiency of the baseline wood stove "
            "(three-stone fire), the default used by "
            "published MECD calculators (e.g. "
            "hashgraph/guardian MECD v2.0 test "
            "fixtures); not checked against the MECD "
            "text",
        },
        "EF_CO2_charcoal": {
            "value": 165.22,
            "unit": "tCO2/TJ",
            "source": "CO2 emission factor of charcoal as used "
            "by the third-party MECD calculators "
            "gathered for this project "
            "(docs/methodology.md); primary source not "
            "traced. These are NOT the IPCC 2006 vol. "
            "2 table 2.5 charcoal defaults (CO2 "
            "112,000 kg/TJ), which an earlier version "
            "cited; check against the MECD text before "
            "crediting",
        },
        "EF_nonCO2_charcoal": {
            "value": 44.83,
            "unit": "tCO2e/TJ",
            "source": "Non-CO2 emission factor of charcoal as "
            "used by the third-party MECD "
            "calculators gathered for this project "
            "(docs/methodology.md); primary source "
            "not traced. NOT the IPCC 2006 vol. 2 "
            "table 2.5 charcoal defaults (CH4 200, "
            "N2O 1 kg/TJ, 5.865 tCO2e/TJ with AR5 "
            "GWPs); check against the MECD text "
            "before crediting",
        },
        "eta_baseline_charcoal": {
            "value": 0.2,
            "unit": "fraction",
            "source": "Efficiency of the baseline charcoal "
            "stove, the default used by "
            "published MECD calculators (and "
            "ixo's SupaMoto carbon conversion "
            "document, "
            "Device_Charcoal_Efficiency 20 %); "
            "not checked against the MECD text",
        },
        "NCV_wood": {
            "value": 15.6,
            "unit": "TJ/Gg",
            "source": "Net calorific value of wood/wood waste, IPCC "
            "2006 Guidelines vol. 2 ch. 1 table 1.2 default",
        },
        "NCV_charcoal": {
            "value": 29.5,
            "unit": "TJ/Gg",
            "source": "Net calorific value of charcoal, IPCC 2006 "
            "Guidelines vol. 2 ch. 1 table 1.2 default",
        },
        "NCV_pellets": {
            "value": 15.6,
            "unit": "TJ/Gg",
            "source": "Net calorific value of biomass pellets taken "
            "as IPCC 2006 vol. 2 table 1.2's wood/wood "
            "waste default (pellets are drier, about 17 "
            "TJ/Gg: the wood value is the lower, "
            "conservative for the baseline)",
        },
        "NCV_lpg": {
            "value": 47.3,
            "unit": "TJ/Gg",
            "source": "Net calorific value of liquefied petroleum gas, "
            "IPCC 2006 Guidelines vol. 2 ch. 1 table 1.2 "
            "default",
        },
        "NCV_ethanol": {
            "value": 27.0,
            "unit": "TJ/Gg",
            "source": "Net calorific value of biogasoline (ethanol), "
            "IPCC 2006 Guidelines vol. 2 ch. 1 table 1.2 "
            "default",
        },
        "NCV_biogas": {
            "value": 50.4,
            "unit": "TJ/Gg",
            "source": "Net calorific value of other biogas, IPCC 2006 "
            "Guidelines vol. 2 ch. 1 table 1.2 default",
        },
        "EF_CO2_lpg": {
            "value": 63.1,
            "unit": "tCO2/TJ",
            "source": "CO2 emission factor of LPG, IPCC 2006 "
            "Guidelines vol. 2 (Energy) ch. 2 table 2.5, "
            "residential default (63,100 kg/TJ)",
        },
        "EF_nonCO2_lpg": {
            "value": 0.1665,
            "unit": "tCO2e/TJ",
            "source": "CH4 5 kg/TJ and N2O 0.1 kg/TJ of LPG, IPCC "
            "2006 Guidelines vol. 2 (Energy) ch. 2 table "
            "2.5, residential default, with IPCC AR5 "
            "100-year GWPs (CH4 28, N2O 265): 0.14 + "
            "0.0265",
        },
        "EF_nonCO2_ethanol": {
            "value": 0.439,
            "unit": "tCO2e/TJ",
            "source": "CH4 10 kg/TJ and N2O 0.6 kg/TJ of "
            "biogasoline, IPCC 2006 Guidelines vol. "
            "2 (Energy) ch. 2 table 2.5, residential "
            "default, with IPCC AR5 100-year GWPs "
            "(CH4 28, N2O 265): 0.28 + 0.159 (its "
            "CO2 is biogenic, not counted)",
        },
        "EF_nonCO2_biogas": {
            "value": 0.1665,
            "unit": "tCO2e/TJ",
            "source": "CH4 5 kg/TJ and N2O 0.1 kg/TJ of other "
            "biogas, IPCC 2006 Guidelines vol. 2 "
            "(Energy) ch. 2 table 2.5, residential "
            "default, with IPCC AR5 100-year GWPs "
            "(CH4 28, N2O 265) (its CO2 is biogenic, "
            "not counted)",
        },
        "fNRB_pellets": {
            "value": 0.0,
            "unit": "fraction",
            "source": "Non-renewable share of the biomass pellets "
            "are made from: 0 (renewable residues), the "
            "programme's assumption; a project whose "
            "pellets come from non-renewable wood fixes "
            "its own value in its design document",
        },
        "leakage_fraction": {
            "value": 0.05,
            "unit": "fraction",
            "source": "Leakage as a share of (BE - PE), the "
            "MECD default option as used by published "
            "calculators (MECD v2.0 as read by "
            "hashgraph/guardian's policy uses 2 %: 5 "
            "% is the more conservative)",
        },
        "cap_kwh_per_person_day": {
            "value": 1.0,
            "unit": "kWh/person/day",
            "source": "Cap on metered electricity counted "
            "in the baseline, MECD default as "
            "used by published calculators "
            "(guardian's MECD v2.0 fixtures: "
            "1.0 kWh/capita/day)",
        },
        "cap_fuel_GJ_per_person_day": {
            "value": 0.0045,
            "unit": "GJ/person/day",
            "source": "Cap on metered fuel energy "
            "counted in the baseline, MECD "
            "default as used by published "
            "calculators (not checked "
            "against the MECD text)",
        },
        "meter_error_threshold": {
            "value": 0.025,
            "unit": "fraction",
            "source": "A meter whose maximum permissible "
            "error is above this share has its "
            "readings adjusted by that error "
            "(MECD v2.0's meter-error adjustment "
            "as read by hashgraph/guardian's "
            "MECD v2.0 policy: meters worse than "
            "+/-2.5 %); not checked against the "
            "MECD text",
        },
        "meter_error_unrecorded": {
            "value": 0.05,
            "unit": "fraction",
            "source": "Programme rule (conservative): a "
            "meter with no calibration record "
            "on its device is taken to be "
            "accurate to +/-5 % at best; under "
            "a validated design document such a "
            "stove is excluded instead",
        },
        "meter_error_overdue": {
            "value": 0.05,
            "unit": "fraction",
            "source": "Programme rule (conservative): a "
            "meter used past its calibration due "
            "date is taken to be accurate to +/-5 "
            "% at best (its data is also flagged)",
        },
        "sampling_confidence": {
            "value": 0.9,
            "unit": "fraction",
            "source": "Sampled parameters must reach 90 % "
            "confidence (the 90/10 rule of Gold "
            "Standard's sampling requirements as "
            "MECD v2.0 applies them, per "
            "hashgraph/guardian's policy; not "
            "checked against the GS text)",
        },
        "sampling_precision": {
            "value": 0.1,
            "unit": "fraction",
            "source": "... with a relative precision of 10 % "
            "(90/10); a sample that misses it has "
            "the sampled figure lowered by its "
            "achieved precision (at least this "
            "share): the conservative end of its "
            "interval",
        },
        "min_fleet_reporting_share": {
            "value": 0.9,
            "unit": "fraction",
            "source": "Data completeness of the fleet: "
            "the share of enrolled devices "
            "that must report in the period "
            "(programme default; MECD v2.0 "
            "as read by hashgraph/guardian "
            "requires 95 % for continuous "
            "monitoring, a design document "
            "may set it); below it every "
            "stove's reductions are scaled "
            "by the share that reported",
        },
    },
    "rules": {
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
            "source": "Programme rule: the per-session "
            "figures corroborate the meter register "
            "when within this share of it; beyond "
            "it the smaller of the two is credited "
            "and the report says so (a claim's own "
            "figures are checked against the same "
            "share)",
        },
        "max_missing_share": {
            "value": 0.5,
            "unit": "fraction",
            "source": "Missing-data rule (programme rule, after the "
            "data-gap handling of hashgraph/guardian's "
            "MECD v2.0 policy): a stove whose meter "
            "register is missing on more than this share "
            "of the period's days is excluded; fewer "
            "missing days are credited only through the "
            "register's rise across them",
        },
        "creditLateData": {
            "value": 0,
            "unit": "flag",
            "source": "Programme rule: readings that arrive for the "
            "days of a submitted or issued monitoring period "
            "are reported as late and never change it; 0: no "
            "later period credits them either (1 would let a "
            "later period credit them)",
        },
    },
    "inputs": {
        "case": {
            "type": "int",
            "unit": "case",
            "description": "The stove model's methodology case: 1 (efficiency "
            "from a water boiling test) or 2 (specific "
            "consumption of the baseline and project stoves)",
        },
        "project_fuel": {
            "type": "string",
            "unit": "fuel",
            "description": "What the project stove uses: electricity, "
            "lpg, ethanol, pellets, biogas, charcoal or "
            "wood",
        },
        "baseline_fuel": {
            "type": "string",
            "unit": "fuel",
            "description": "The displaced fuel the project's design "
            "document names: wood or charcoal",
        },
        "energy_kwh": {
            "type": "double",
            "unit": "kWh",
            "description": "Electricity credited: the meter register's "
            "rise over the period (corroborated by the "
            "sessions)",
        },
        "fuel_kg": {
            "type": "double",
            "unit": "kg",
            "description": "Project fuel the stove's meter recorded in the period",
        },
        "stove_efficiency": {
            "type": "double",
            "unit": "fraction",
            "description": "Case 1: the stove model's tested thermal efficiency (0 for case 2)",
        },
        "sc_baseline": {
            "type": "double",
            "unit": "MJ/person/event",
            "description": "Case 2: specific consumption of the baseline stove (0 for case 1)",
        },
        "sc_project": {
            "type": "double",
            "unit": "MJ/person/event",
            "description": "Case 2: specific consumption of the project "
            "stove, in the baseline's unit (0 for case 1)",
        },
        "household_size": {
            "type": "int",
            "unit": "persons",
            "description": "People in the household, from the registry",
        },
        "days": {"type": "int", "unit": "days", "description": "Days in the monitoring period"},
        "meter_recorded": {
            "type": "int",
            "unit": "flag",
            "description": "1 when the device carries a meter record "
            "(model, accuracy, calibration), else 0",
        },
        "meter_overdue": {
            "type": "int",
            "unit": "flag",
            "description": "1 when the period has data from after the "
            "meter's calibration due date, else 0",
        },
        "meter_error": {
            "type": "double",
            "unit": "fraction",
            "description": "The meter's maximum permissible error from its record (0 when none)",
        },
        "sample_confidence": {
            "type": "double",
            "unit": "fraction",
            "description": "Confidence the household-size sample reached (0 when not sampled)",
        },
        "sample_precision": {
            "type": "double",
            "unit": "fraction",
            "description": "Relative precision the household-size "
            "sample reached at that confidence (0 "
            "when not sampled)",
        },
        "fleet_share": {
            "type": "double",
            "unit": "fraction",
            "description": "Share of the project's enrolled devices that reported in the period",
        },
    },
    "formulas": [
        {
            "name": "EF_baseline_input",
            "unit": "tCO2e/TJ",
            "expression": 'baseline_fuel == "wood" ? EF_CO2_wood * fNRB + '
            "EF_nonCO2_wood : EF_CO2_charcoal * fNRB + "
            "EF_nonCO2_charcoal",
            "description": "Baseline emissions per TJ of the displaced fuel burnt: "
            "only its non-renewable share's CO2 counts",
        },
        {
            "name": "eta_baseline",
            "unit": "fraction",
            "expression": 'baseline_fuel == "wood" ? eta_baseline_wood : eta_baseline_charcoal',
            "description": "Efficiency of the displaced stove",
        },
        {
            "name": "NCV_project",
            "unit": "TJ/Gg",
            "expression": 'project_fuel == "electricity" ? 0.0 : project_fuel == '
            '"lpg" ? NCV_lpg : project_fuel == "ethanol" ? NCV_ethanol '
            ': project_fuel == "pellets" ? NCV_pellets : project_fuel '
            '== "biogas" ? NCV_biogas : project_fuel == "charcoal" ? '
            'NCV_charcoal : project_fuel == "wood" ? NCV_wood : -1.0',
            "description": "Net calorific value of the project fuel (-1 for a fuel "
            "the methodology does not know: the evaluation then "
            "fails)",
        },
        {
            "name": "EF_project",
            "unit": "tCO2e/TJ",
            "expression": 'project_fuel == "electricity" ? 0.0 : project_fuel == '
            '"lpg" ? EF_CO2_lpg + EF_nonCO2_lpg : project_fuel == '
            '"ethanol" ? EF_nonCO2_ethanol : project_fuel == "pellets" '
            "? EF_CO2_wood * fNRB_pellets + EF_nonCO2_wood : "
            'project_fuel == "biogas" ? EF_nonCO2_biogas : project_fuel '
            '== "charcoal" ? EF_CO2_charcoal * fNRB + '
            'EF_nonCO2_charcoal : project_fuel == "wood" ? EF_CO2_wood '
            "* fNRB + EF_nonCO2_wood : -1.0",
            "description": "Project fuel emissions per TJ burnt: CO2 of fossil fuels, "
            "the non-renewable share's CO2 of biomass, and non-CO2 "
            "gases",
        },
        {
            "name": "meter_error_used",
            "unit": "fraction",
            "expression": "meter_recorded == 0 ? meter_error_unrecorded : "
            "(meter_overdue == 1 && meter_error < meter_error_overdue ? "
            "meter_error_overdue : meter_error)",
            "description": "The meter's error: its record's, or the methodology's "
            "when it has none or is past calibration",
        },
        {
            "name": "meter_adjustment",
            "unit": "fraction",
            "expression": "meter_error_used > meter_error_threshold ? meter_error_used : 0.0",
            "description": "Share by which the metered quantity is lowered for the "
            "baseline and raised for project emissions",
        },
        {
            "name": "household_discount",
            "unit": "fraction",
            "expression": "sample_confidence >= sampling_confidence && "
            "sample_precision <= sampling_precision ? 0.0 : "
            "(sample_precision > sampling_precision ? sample_precision "
            ": sampling_precision)",
            "description": "90/10 rule: 0 when the household-size sample met it, else "
            "its achieved precision (at least the required one)",
        },
        {
            "name": "person_days",
            "unit": "person-days",
            "expression": "double(household_size) * (1.0 - household_discount) * double(days)",
            "description": "Household size (lowered by the sampling discount) times "
            "days in the period",
        },
        {
            "name": "baseline_kwh",
            "unit": "kWh",
            "expression": "energy_kwh * (1.0 - meter_adjustment) < "
            "cap_kwh_per_person_day * person_days ? energy_kwh * (1.0 - "
            "meter_adjustment) : cap_kwh_per_person_day * person_days",
            "description": "Metered electricity counted in the baseline, lowered by "
            "the meter adjustment and capped per person per day",
        },
        {
            "name": "fuel_GJ",
            "unit": "GJ",
            "expression": "fuel_kg * (1.0 - meter_adjustment) / 1000.0 * NCV_project",
            "description": "Energy content of the metered project fuel counted in the "
            "baseline (t x GJ/t)",
        },
        {
            "name": "baseline_fuel_GJ",
            "unit": "GJ",
            "expression": "fuel_GJ < cap_fuel_GJ_per_person_day * person_days ? "
            "fuel_GJ : cap_fuel_GJ_per_person_day * person_days",
            "description": "Project fuel energy counted in the baseline, capped per person per day",
        },
        {
            "name": "project_energy_TJ",
            "unit": "TJ",
            "expression": "baseline_kwh / 1000.0 * 0.0036 + baseline_fuel_GJ / 1000.0",
            "description": "Energy the project stove used, as counted in the baseline "
            "(MWh x 0.0036 TJ/MWh, GJ / 1000)",
        },
        {
            "name": "displaced_fuel_TJ",
            "unit": "TJ",
            "expression": "case == 1 ? project_energy_TJ * stove_efficiency / "
            "eta_baseline : (case == 2 ? project_energy_TJ * "
            "sc_baseline / sc_project : -1.0)",
            "description": "Baseline fuel displaced. Case 1: useful energy (times the "
            "tested efficiency) over the baseline stove's efficiency. "
            "Case 2: project energy times the ratio of the baseline's "
            "to the project stove's specific consumption",
        },
        {
            "name": "BE",
            "unit": "tCO2e",
            "expression": "displaced_fuel_TJ < 0.0 || NCV_project < 0.0 ? 1.0 / 0.0 : "
            "displaced_fuel_TJ * EF_baseline_input",
            "description": "Baseline emissions: what the displaced fuel would have "
            "emitted (a case or fuel the methodology does not know "
            "fails the evaluation)",
        },
        {
            "name": "PE",
            "unit": "tCO2e",
            "expression": "energy_kwh * (1.0 + meter_adjustment) / 1000.0 * EF_grid * "
            "(1.0 + TDL) + fuel_kg * (1.0 + meter_adjustment) / 1000.0 "
            "* NCV_project / 1000.0 * EF_project",
            "description": "Project emissions from the raw metered values (no cap), "
            "raised by the meter adjustment",
        },
        {
            "name": "LE",
            "unit": "tCO2e",
            "expression": "BE > PE ? leakage_fraction * (BE - PE) : 0.0",
            "description": "Leakage",
        },
        {
            "name": "fleet_factor",
            "unit": "fraction",
            "expression": "fleet_share >= min_fleet_reporting_share ? 1.0 : fleet_share",
            "description": "Data completeness of the fleet: 1 when enough devices "
            "reported, else the share that did",
        },
        {
            "name": "ER",
            "unit": "tCO2e",
            "expression": "BE - PE - LE > 0.0 ? (BE - PE - LE) * fleet_factor : 0.0",
            "description": "Emission reductions; a negative result counts as zero",
        },
    ],
    "result": "ER",
}


def _load(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _swap_methodology(bind: Any, old: dict[str, Any], new: dict[str, Any]) -> None:
    """The claim protocol's methodology becomes `new` where it is still exactly `old`."""
    row = bind.execute(
        sa.text("SELECT methodology FROM protocols WHERE did = :did"), {"did": CLAIM_PROTOCOL}
    ).first()
    if row is not None and _load(row[0]) == old:
        bind.execute(
            sa.text("UPDATE protocols SET methodology = :m WHERE did = :did"),
            {"m": json.dumps(new), "did": CLAIM_PROTOCOL},
        )


def _stove(bind: Any, adding: bool) -> None:
    row = bind.execute(
        sa.text("SELECT properties, telemetry FROM protocols WHERE did = :did"),
        {"did": STOVE_PROTOCOL},
    ).first()
    if row is None:
        return
    properties, telemetry = dict(_load(row[0]) or {}), _load(row[1])
    for name, kind in STOVE_PROPERTIES.items():
        if adding:
            properties.setdefault(name, kind)
        else:
            properties.pop(name, None)
    if isinstance(telemetry, dict) and isinstance(telemetry.get("fields"), dict):
        fields = dict(telemetry["fields"])
        if adding:
            fields.setdefault("meterEvent", METER_EVENT)
        else:
            fields.pop("meterEvent", None)
        telemetry = {**telemetry, "fields": fields}
    bind.execute(
        sa.text("UPDATE protocols SET properties = :p, telemetry = :t WHERE did = :did"),
        {
            "p": json.dumps(properties),
            "t": None if telemetry is None else json.dumps(telemetry),
            "did": STOVE_PROTOCOL,
        },
    )


def upgrade() -> None:
    bind = op.get_bind()
    _swap_methodology(bind, CLEAN_COOKING_1_0_0, CLEAN_COOKING_2_0_0)
    _stove(bind, adding=True)


def downgrade() -> None:
    bind = op.get_bind()
    _swap_methodology(bind, CLEAN_COOKING_2_0_0, CLEAN_COOKING_1_0_0)
    _stove(bind, adding=False)
