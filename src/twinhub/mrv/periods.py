"""A monitoring period: each stove's emission reductions from its telemetry, the stoves left
out and why, the totals and the credits, as one report an auditor can recompute.

Pure: the caller gathers each stove's daily rollups and registry facts; this module decides
and computes. `twinhub oracle verify-report` gathers the same inputs again from the stored
telemetry and calls `compare_reports` on the two, so a report is checked by the same code
path that made it, from the data rather than from the report's own numbers.
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from functools import lru_cache
from typing import Any

import orjson

from twinhub.kernel.collector import collector_paused
from twinhub.kernel.errors import Problems
from twinhub.mrv.day_columns import DayColumns, DaySource, DaySums, day_sums, python_round
from twinhub.mrv.meter import check_meter
from twinhub.mrv.methodology import Methodology, MethodologyError, to_smallest_unit
from twinhub.mrv.plausibility import (
    Finding,
    PlausibilityRules,
    StoveDay,
    assess,
    assess_stoves,
)
from twinhub.mrv.project_document import (
    ProjectDocument,
    default_document,
    document_overrides,
)
from twinhub.mrv.rules import ACTIVE, takes_part
from twinhub.mrv.sampling import CHECK, ROLES, check_sampled

# Findings that keep a stove out of a period. A stove whose sessions disagree with its
# register ("tampered") is not among them: the register is the measure and the smaller of
# the two is credited (the corroboration rule below), with the disagreement reported.
REVIEW_KINDS = ("cloned", "broken")
FUEL_UNITS = {"electricity": "kWh"}  # every other project fuel is metered in kg
SAMPLED_HOUSEHOLD = "householdSize"  # the sampled parameter the baseline cap reads


@dataclass(frozen=True)
class StovePeriod:
    """What the oracle knows of one stove for the period."""

    stove: str
    serial: str | None
    verified: bool
    enrolled: bool
    household_size: int | None
    stove_efficiency: float | None  # the registry's figure: used only with no stove model
    unit: str  # "kWh" for electric stoves, "kg" for fuel stoves
    days: Sequence[StoveDay]
    status: str | None = ACTIVE  # the domain's status; None: the stove is not a domain
    stove_model: str | None = None  # properties.stoveModel: a model of the project document
    fuel: str | None = None  # the project fuel its fuelType names (mrv.rollups.FUEL_TYPES)
    meter: Any = None  # properties.meter as stored (checked here: mrv.meter.check_meter)
    register_events: tuple[str, ...] = ()  # resets, rollovers, falls (mrv.meter)
    # The survey answer that confirmed household_size (survey, session, when, the size it
    # replaced); None: the size is as recorded at enrolment, unconfirmed.
    household: dict[str, Any] | None = None
    # Which readings the days were read from: per ISO day, the runs of sequence numbers
    # (mrv.period_inputs.seen_ranges) seen in the same snapshot as the figures. Evidence
    # only (the bundle's readings are chosen by it); no rule reads it. None: not kept.
    seen: Mapping[str, list[list[int]]] | None = None
    # Where `days` were made from a chunk's columns (mrv.rollup_columns), for the rules to
    # read those (DayColumns.of) rather than the days; None: read the days. Not a figure.
    source: DaySource | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class PeriodSpec:
    project: str
    start: date
    end: date  # inclusive
    token: str
    decimals: int

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1


@dataclass(frozen=True)
class Fleet:
    """Data completeness across the project: enrolled devices and those that reported."""

    enrolled: int
    reporting: int
    minimum: float

    @property
    def share(self) -> float:
        return self.reporting / self.enrolled if self.enrolled else 1.0

    def as_record(self) -> dict[str, Any]:
        return {
            "enrolled": self.enrolled,
            "reporting": self.reporting,
            "share": self.share,
            "minimum": self.minimum,
            "met": self.share >= self.minimum,
        }


@dataclass(frozen=True)
class StoveInputs:
    """One stove's methodology inputs, and the flags raised while reading them."""

    values: dict[str, Any]
    usage: dict[str, Any]
    flags: list[str]
    model: str | None


def inputs_digest(days: Iterable[StoveDay]) -> str:
    """SHA-256 of the daily figures a computation used, in a fixed order and shape."""
    rows = sorted(
        [stove, _iso(day), sessions, round(energy, 6), delta]
        for stove, day, sessions, energy, _, _, _, delta in days
    )
    return hashlib.sha256(orjson.dumps(rows)).hexdigest()


def inputs_digests(
    groups: Sequence[Sequence[StoveDay]], sources: Sequence[DaySource | None] | None = None
) -> list[str]:
    """`inputs_digest` of each stove's days, over the columns of them all (`sources`: where
    each group's days were made from a chunk's columns, DayColumns.of): the energy
    rounded at once (mrv.day_columns.python_round), each stove's rows zipped from the
    columns, and sorted only when its days are not in day order already."""
    return _digests(groups, DayColumns.of(groups, sources))


def _digests(groups: Sequence[Sequence[StoveDay]], columns: DayColumns | None) -> list[str]:
    """`inputs_digests` of the groups, `columns` being DayColumns.of them."""
    if columns is None:  # a figure that is not a plain number: stove by stove
        return [inputs_digest(days) for days in groups]
    stoves, days, sessions, deltas = columns.stoves, columns.dates, columns.counts, columns.deltas
    energy = python_round(columns.energy, 6).tolist()
    iso = list(map(_iso, days))
    ordered = columns.ascending().tolist()
    edges = columns.starts.tolist()
    found = []
    for first, last, fine in zip(edges, edges[1:], ordered, strict=False):
        rows = list(
            zip(
                stoves[first:last],
                iso[first:last],
                sessions[first:last],
                energy[first:last],
                deltas[first:last],
                strict=True,
            )
        )
        found.append(hashlib.sha256(orjson.dumps(rows if fine else sorted(rows))).hexdigest())
    return found


def assess_periods(
    stoves: Sequence[StovePeriod], rules: PlausibilityRules | None = None
) -> list[Finding]:
    """`assess` (mrv.plausibility) of the stoves' days, the same findings: when every
    stove with days is another stove and has its days from a chunk's columns (their
    `source`: each stove's own days, in strictly ascending day order), over those columns
    (DayColumns.of), no StoveDay regrouped or transposed."""
    with_days = [s for s in stoves if s.days]
    sources = [s.source for s in with_days]
    names = {s.stove for s in with_days}
    if len(names) == len(with_days) and all(
        source is not None and source.days is s.days and source.stove == s.stove
        for s, source in zip(with_days, sources, strict=True)
    ):
        groups = [s.days for s in with_days]
        columns = DayColumns.of(groups, sources)
        return assess_stoves(
            dict(zip([s.stove for s in with_days], groups, strict=True)), columns, rules
        )
    return assess((day for s in stoves for day in s.days), rules)


def _digests_and_sums(stoves: Sequence[StovePeriod]) -> tuple[list[str], list[DaySums]]:
    """Each stove's inputs digest and its days' sums, over the columns of their days
    (DayColumns.of, from the chunks they were made from where they were); stove by stove
    where the columns cannot be made."""
    groups = [s.days for s in stoves]
    columns = DayColumns.of(groups, [s.source for s in stoves])
    sums = columns.sums() if columns is not None else None
    return _digests(groups, columns), sums or [day_sums(days) for days in groups]


def _by_stove(findings: Iterable[Finding]) -> dict[str, list[Finding]]:
    """The findings of each stove, in their order."""
    found: dict[str, list[Finding]] = {}
    for finding in findings:
        found.setdefault(finding.stove, []).append(finding)
    return found


_iso = lru_cache(maxsize=4096)(date.isoformat)  # a period's thirty days, 300,000 times


def digest_of_digests(digests: Iterable[str]) -> str:
    """The period's inputs digest: SHA-256 over the stoves' own digests in stove order (one
    pass, rather than sorting every stove-day of the project again)."""
    return hashlib.sha256("\n".join(digests).encode()).hexdigest()


def _exclusion(
    stove: StovePeriod,
    sums: DaySums,
    spec: PeriodSpec,
    rules: Mapping[str, float],
    findings: Sequence[Finding],
    credited: Mapping[str, str],
    sessions_measure: bool = False,
) -> str | None:
    """Why the stove earns nothing this period, or None. The first reason found is given;
    the order puts registry facts before data quality before suspicion. Under the sessions
    measure (1.0.0) as that version decided: the registry's efficiency is required, and a
    stove whose sessions disagree with its register is out ("tampered"). `sums`: its days'
    (day_sums), `findings`: its own."""
    if stove.stove in credited:
        return (
            f"credited already by {credited[stove.stove]} for an overlapping period "
            "(double counting)"
        )
    if not takes_part(stove.verified, stove.status):
        return "the stove is not verified"
    if not stove.enrolled:
        return "the stove has no enrolled device"
    if stove.household_size is None or stove.household_size < 1:
        return "the household size is not recorded"
    if sessions_measure and (stove.stove_efficiency is None or not 0 < stove.stove_efficiency <= 1):
        return "the stove type's tested efficiency is not recorded"
    if not stove.days or sums.first is None or sums.last is None:
        return "no telemetry in the period"
    # Each rule reads the days' sums (DaySums), and only a stove that breaks it is searched
    # day by day for the first day that does.
    if sums.first < spec.start or sums.last > spec.end:
        outside = [d for d in stove.days if not spec.start <= d.day <= spec.end]
        return f"telemetry dated {outside[0].day.isoformat()} lies outside the period"
    active = sums.active
    least = int(rules.get("min_active_days", 0))
    if active < least:
        return f"cooked on {active} days, fewer than the methodology's minimum of {least}"
    most = rules.get("max_sessions_per_day")
    for d in stove.days if most is not None and sums.most > most else ():
        if d.sessions > most:
            return f"{d.sessions} sessions on {d.day.isoformat()}, more than {most:g} a day"
    limit = rules.get("max_kwh_per_session" if stove.unit == "kWh" else "max_fuel_kg_per_session")
    if limit is not None and sums.per_session is not None and sums.per_session > limit:
        for d in stove.days:
            if d.sessions and d.energy / d.sessions > limit:
                return (
                    f"{d.energy / d.sessions:.2f} {stove.unit} a session on "
                    f"{d.day.isoformat()}, more than {limit:g}"
                )
    kinds = (*REVIEW_KINDS, "tampered") if sessions_measure else REVIEW_KINDS
    for finding in findings:
        if finding.kind in kinds:
            return f"flagged for review ({finding.kind}): {finding.explanation}"
    return None


def _model(stove: StovePeriod, document: ProjectDocument) -> dict[str, Any] | str:
    """The stove's case and tested figures from its model in the document, or why not.
    Under the methodology's defaults (no document stored) a stove is a case 1 model with
    its registry efficiency and the fuel its fuelType names."""
    if document.defaults:
        if stove.stove_efficiency is None or not 0 < stove.stove_efficiency <= 1:
            return "the stove type's tested efficiency is not recorded"
        fuel = stove.fuel or ("electricity" if stove.unit == "kWh" else "pellets")
        return {"case": 1, "project_fuel": fuel, "stove_efficiency": stove.stove_efficiency}
    if stove.stove_model is None:
        return "the stove names no model (properties.stoveModel) of the project's document"
    model = document.stove_models.get(stove.stove_model)
    if model is None:
        return f"stove model {stove.stove_model!r} is not in the project's design document"
    unit = FUEL_UNITS.get(model.fuel, "kg")
    if unit != stove.unit:
        return f"model {model.name} burns {model.fuel} ({unit}) but the stove reports {stove.unit}"
    found: dict[str, Any] = {"case": model.case, "project_fuel": model.fuel}
    if model.case == 1 and model.efficiency is not None:
        found["stove_efficiency"] = model.efficiency.value
    if model.case == 2 and model.specific_consumption and model.baseline_specific_consumption:
        found["sc_project"] = model.specific_consumption.value
        found["sc_baseline"] = model.baseline_specific_consumption.value
    return found


def _meter(
    stove: StovePeriod,
    sums: DaySums,
    spec: PeriodSpec,
    document: ProjectDocument,
    flags: list[str],
) -> dict[str, Any] | str:
    """The meter's error inputs from its record, or why the stove cannot be credited."""
    if stove.meter is None:
        if not document.defaults:
            return "the meter has no calibration record (properties.meter)"
        flags.append("no meter record on the device: the methodology's default meter error")
        return {"meter_recorded": 0, "meter_overdue": 0, "meter_error": 0.0}
    problems = Problems()
    record = check_meter(stove.meter, problems)
    if record is None:
        first = problems.items[0]
        return f"the meter record is invalid: {first.field}: {first.error}"
    due = record.calibration_due
    late = [d for d in stove.days if d.day > due] if sums.last and sums.last > due else []
    if late:
        flags.append(
            f"{len(late)} day(s) of data after the meter's calibration was due "
            f"({record.calibration_due.isoformat()}): the methodology's overdue meter error"
        )
    return {
        "meter_recorded": 1,
        "meter_overdue": 1 if late else 0,
        "meter_error": record.max_permissible_error,
    }


def _measure(
    stove: StovePeriod,
    sums: DaySums,
    spec: PeriodSpec,
    rules: Mapping[str, float],
    flags: list[str],
) -> dict[str, Any] | str:
    """The quantity credited: the register's rise over the period, corroborated by the
    sessions (beyond the tolerance the smaller counts); a fuel stove's metered fuel. Days
    without register readings are missing data. `sums`: the stove's days' (day_sums)."""
    sessions = round(sums.energy, 6)
    usage: dict[str, Any] = {
        "days": sums.days,
        "activeDays": sums.active,
        "sessions": sums.sessions,
        "sessionsQuantity": sessions,
        "unit": stove.unit,
    }
    if stove.unit != "kWh":
        read = sums.days
        usage |= {"register": None, "missingDays": spec.days - read, "quantity": sessions}
    else:
        read = sums.read
        if not read:
            return "no meter register reading (meterKwh) in the period: the meter is the measure"
        register = round(sums.register, 6)
        quantity = register
        tolerance = rules.get("corroboration_tolerance", 0.2)
        if abs(sessions - register) > tolerance * max(register, 1e-9):
            quantity = min(sessions, register)
            flags.append(
                f"the sessions report {sessions:g} kWh and the register rose {register:g} kWh: "
                f"they differ by more than {tolerance:.0%}, the smaller ({quantity:g}) counts"
            )
        flags.extend(stove.register_events)
        usage |= {"register": register, "missingDays": spec.days - read, "quantity": quantity}
    missing = usage["missingDays"] / spec.days
    if missing > rules.get("max_missing_share", 1.0):
        return (
            f"the meter is missing on {usage['missingDays']} of {spec.days} days, more than "
            f"the methodology's {rules['max_missing_share']:.0%}"
        )
    return usage


def _sample(
    sampled: Mapping[str, Any] | None, parameters: Mapping[str, float]
) -> tuple[dict[str, float], dict[str, Any], dict[str, Any]]:
    """The household-size sample's confidence and precision (0, 0 when not sampled: the
    90/10 rule then applies its discount); what the report says of the sampled parameters
    a formula reads; and of the monitoring checks (stove use, fuel stacking: sampled, used
    by no formula, mrv.sampling.ROLES), each with whether it met the methodology's target.
    Bad sampled parameters raise Invalid with their paths."""
    problems = Problems()
    found = check_sampled(sampled, problems)
    problems.raise_if_any("The sampled parameters are invalid.")
    confidence = float(parameters.get("sampling_confidence", 0.9))
    precision = float(parameters.get("sampling_precision", 0.1))
    record: dict[str, Any] = {}
    checks: dict[str, Any] = {}
    for name, entry in sorted(found.items()):
        if ROLES.get(name) == CHECK:
            checks[name] = {
                **entry.as_record(),
                "meetsTarget": entry.meets(confidence, precision),
                "use": "monitoring check: enters no formula (the meter is the measure)",
            }
        else:
            record[name] = entry.as_record()
    household = found.get(SAMPLED_HOUSEHOLD)
    if household is None:
        return {"sample_confidence": 0.0, "sample_precision": 0.0}, record, checks
    return (
        {"sample_confidence": household.confidence, "sample_precision": household.precision},
        record,
        checks,
    )


def _stove_inputs(
    stove: StovePeriod,
    sums: DaySums,
    spec: PeriodSpec,
    document: ProjectDocument,
    rules: Mapping[str, float],
    common: Mapping[str, Any],
) -> StoveInputs | str:
    """Everything the methodology reads of one stove, or why it cannot be credited."""
    flags: list[str] = []
    model = _model(stove, document)
    if isinstance(model, str):
        return model
    meter = _meter(stove, sums, spec, document, flags)
    if isinstance(meter, str):
        return meter
    usage = _measure(stove, sums, spec, rules, flags)
    if isinstance(usage, str):
        return usage
    quantity = usage["quantity"]
    values = {
        "case": 1,
        "stove_efficiency": 0.0,
        "sc_baseline": 0.0,
        "sc_project": 0.0,
        **model,
        **meter,
        **common,
        "energy_kwh": quantity if stove.unit == "kWh" else 0.0,
        "fuel_kg": quantity if stove.unit == "kg" else 0.0,
        "household_size": stove.household_size,
        "days": spec.days,
    }
    return StoveInputs(values, usage, flags, stove.stove_model)


def fleet_of(stoves: Sequence[StovePeriod], minimum: float) -> Fleet:
    """The fleet rule's figures: enrolled devices, and those of them with data."""
    enrolled = [s for s in stoves if s.enrolled]
    return Fleet(len(enrolled), sum(1 for s in enrolled if s.days), minimum)


@dataclass(frozen=True)
class Setting:
    """What every stove of a computation shares: the design document (the methodology's
    defaults when none), its overrides of the parameters, the rules and the parameters."""

    document: ProjectDocument
    overrides: dict[str, Any]
    rules: Mapping[str, float]
    parameters: dict[str, Any]


def setting_of(methodology: Methodology, document: ProjectDocument | None) -> Setting:
    """The setting a period or a claim computes under. A document that does not fit the
    methodology raises Invalid with the paths."""
    document = document or default_document(methodology)
    problems = Problems()
    overrides = document_overrides(methodology, document, problems)
    problems.raise_if_any("The project's design document does not fit its methodology.")
    return Setting(
        document,
        overrides,
        methodology.rule_values(),
        {**methodology.parameter_values(), **overrides},
    )


def stove_rows(
    spec: PeriodSpec,
    methodology: Methodology,
    setting: Setting,
    stoves: Sequence[StovePeriod],
    commons: Sequence[Mapping[str, Any]],
    findings: list[Finding],
    credited: Mapping[str, str],
) -> list[tuple[dict[str, Any], bool]]:
    """Each stove's report row, in the order given, and whether it is credited (else the
    row says why not): each stove's inputs first (`commons`: what the formulas read beside
    the stove's own figures, a mapping per stove), then the methodology once over all of
    them (its formulas as array operations: Methodology.evaluate_many). A period's stoves
    share one common mapping; claims computed together each have their own (a claim is a
    one-stove period: its fleet is its stove)."""
    staged: list[tuple[StovePeriod, DaySums, dict[str, Any], str | None, StoveInputs | None]] = []
    digests, sums = _digests_and_sums(stoves)
    flagged = _by_stove(findings)
    for stove, digest, summed, common in zip(stoves, digests, sums, commons, strict=True):
        base: dict[str, Any] = {
            "stove": stove.stove,
            "serial": stove.serial,
            "usage": None,  # the measure's when credited, the sessions' when excluded
            "inputsDigest": digest,
        }
        reason = _exclusion(
            stove, summed, spec, setting.rules, flagged.get(stove.stove, ()), credited
        )
        found: StoveInputs | str | None = None
        if reason is None:
            found = _stove_inputs(stove, summed, spec, setting.document, setting.rules, common)
            if isinstance(found, str):
                reason, found = found, None
            else:
                base["usage"] = found.usage
        staged.append((stove, summed, base, reason, found))
    outcomes = iter(
        methodology.evaluate_many(
            [f.values for *_, f in staged if f is not None], setting.overrides
        )
    )
    rows: list[tuple[dict[str, Any], bool]] = []
    for stove, summed, base, reason, found in staged:
        if found is not None:
            outcome = next(outcomes)
            if isinstance(outcome, MethodologyError):
                reason = f"the methodology could not be applied: {outcome}"
            else:
                row = {
                    **base,
                    "model": found.model,
                    "inputs": outcome.inputs,
                    "values": outcome.values,
                    "flags": found.flags,
                    "reductions": outcome.result,
                }
                rows.append((row, True))
                continue
        rows.append(
            (
                {**base, "usage": base["usage"] or _plain_usage(stove, summed), "reason": reason},
                False,
            )
        )
    return rows


def fleet_in(setting: Setting, stoves: Sequence[StovePeriod]) -> Fleet:
    """The fleet rule's figures of `stoves` under the setting's minimum share."""
    return fleet_of(stoves, float(setting.parameters.get("min_fleet_reporting_share", 0.0)))


def common_of(setting: Setting, fleet: Fleet, sample: Mapping[str, float]) -> dict[str, Any]:
    """What the formulas read of the period beside each stove's figures: the baseline fuel,
    the fleet's reporting share and the sample's figures."""
    return {"baseline_fuel": setting.document.baseline_fuel, "fleet_share": fleet.share, **sample}


@collector_paused()  # many small objects, none in a cycle (kernel.collector)
def one_stove_rows(
    spec: PeriodSpec,
    methodology: Methodology,
    stoves: Sequence[StovePeriod],
    document: ProjectDocument | None = None,
) -> list[tuple[dict[str, Any], bool]]:
    """Each stove as a monitoring period of its own (a claim: no findings, nothing credited,
    its fleet itself), computed together: the row `compute_period` gives each one alone,
    in the order given, with the stoves' digests and the methodology's formulas taken over
    them all at once. Not for a methodology whose measure is the sessions' sum."""
    setting = setting_of(methodology, document)
    sample = _sample(None, setting.parameters)[0]
    commons = [common_of(setting, fleet_in(setting, [stove]), sample) for stove in stoves]
    return stove_rows(spec, methodology, setting, stoves, commons, [], {})


@collector_paused()  # many small objects, none in a cycle (kernel.collector)
def compute_period(
    spec: PeriodSpec,
    methodology: Methodology,
    stoves: Sequence[StovePeriod],
    findings: list[Finding],
    credited: Mapping[str, str] | None = None,
    document: ProjectDocument | None = None,
    sampled: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The monitoring report: per-stove usage and reductions, exclusions with reasons,
    totals, credits and digests of the inputs. `credited` names stoves an approved claim
    credited for an overlapping period already (stove -> what holds it: "claim <id>",
    "monitoring period <id> of <project>"): they are excluded.
    `document` is the project's design document (None: the methodology's defaults, and
    the report says so); `sampled` the sampled parameters of the project's surveys.
    A document that does not fit the methodology raises Invalid with the paths.
    A methodology whose measure is the sessions' sum (1.0.0) is computed as it was issued
    (`sessions_report`), so its reports recompute."""
    if methodology.measure == "sessions":
        return sessions_report(spec, methodology, stoves, findings, credited or {})
    setting = setting_of(methodology, document)
    document, parameters = setting.document, setting.parameters
    fleet = fleet_in(setting, stoves)
    sample, sampled_record, checks = _sample(sampled, parameters)
    common = common_of(setting, fleet, sample)
    ordered = sorted(stoves, key=lambda s: s.stove)
    included: list[dict[str, Any]] = []
    excluded: list[dict[str, Any]] = []
    total = 0.0
    for row, credited_row in stove_rows(
        spec, methodology, setting, ordered, [common] * len(ordered), findings, credited or {}
    ):
        if credited_row:
            included.append(row)
            total += row["reductions"]
        else:
            excluded.append(row)
    report: dict[str, Any] = {
        "project": spec.project,
        "period": {"from": spec.start.isoformat(), "to": spec.end.isoformat(), "days": spec.days},
        "methodology": {
            "id": methodology.id,
            "version": methodology.version,
            "digest": methodology.digest,
            "reference": methodology.reference,
            "parameters": {
                name: {"value": parameters[name], "unit": p.unit, "source": p.source}
                for name, p in methodology.parameters.items()
            },
            "rules": {
                name: {"value": p.value, "unit": p.unit, "source": p.source}
                for name, p in methodology.rules.items()
            },
            "measure": methodology.measure,
            "result": methodology.result,
            "resultUnit": methodology.result_unit,
        },
        "document": document.summary(),
        "fleet": fleet.as_record(),
        "sampled": sampled_record,
        "monitoringChecks": checks,
        "households": households_record(stoves),
        **_outcome(spec, methodology, len(stoves), included, excluded, total),
    }
    report["reportDigest"] = report_digest(report)
    return report


def households_record(stoves: Sequence[StovePeriod]) -> dict[str, Any]:
    """Whose household size a survey answer confirmed (services.surveys writes the answer
    into the stove's record, the enrolment value kept in its history) and whose is as
    typed at enrolment: counts, and each confirmed stove's survey, session and when."""
    confirmed = {s.stove: s.household for s in sorted(stoves, key=lambda s: s.stove) if s.household}
    recorded = sum(1 for s in stoves if s.household_size is not None)
    return {
        "confirmed": len(confirmed),
        "unconfirmed": recorded - len(confirmed),
        "notRecorded": len(stoves) - recorded,
        "confirmedBy": confirmed,
    }


def sessions_report(
    spec: PeriodSpec,
    methodology: Methodology,
    stoves: Sequence[StovePeriod],
    findings: list[Finding],
    credited: Mapping[str, str],
) -> dict[str, Any]:
    """A period under a methodology whose measure is the sessions' sum (1.0.0), computed
    and shaped as that version issued it: the sessions' energy or fuel credited, the
    registry's efficiency and household size its only other inputs, no document, fleet or
    samples. Kept so a report issued under 1.0.0 still recomputes to the last unit."""
    rules = methodology.rule_values()
    staged: list[tuple[dict[str, Any], str | None, dict[str, Any] | None]] = []
    ordered = sorted(stoves, key=lambda s: s.stove)
    digests, sums = _digests_and_sums(ordered)
    flagged = _by_stove(findings)
    for stove, digest, summed in zip(ordered, digests, sums, strict=True):
        base = {
            "stove": stove.stove,
            "serial": stove.serial,
            "usage": _plain_usage(stove, summed),
            "inputsDigest": digest,
        }
        reason = _exclusion(
            stove, summed, spec, rules, flagged.get(stove.stove, ()), credited, True
        )
        values = None
        if reason is None:
            quantity = base["usage"]["quantity"]
            values = {
                "energy_kwh": quantity if stove.unit == "kWh" else 0.0,
                "fuel_kg": quantity if stove.unit == "kg" else 0.0,
                "stove_efficiency": stove.stove_efficiency,
                "household_size": stove.household_size,
                "days": spec.days,
            }
        staged.append((base, reason, values))
    outcomes = iter(methodology.evaluate_many([v for _, _, v in staged if v is not None]))
    included: list[dict[str, Any]] = []
    excluded: list[dict[str, Any]] = []
    total = 0.0
    for base, reason, values in staged:
        if values is not None:
            outcome = next(outcomes)
            if isinstance(outcome, MethodologyError):
                reason = f"the methodology could not be applied: {outcome}"
            else:
                included.append(
                    {
                        **base,
                        "inputs": outcome.inputs,
                        "values": outcome.values,
                        "reductions": outcome.result,
                    }
                )
                total += outcome.result
                continue
        excluded.append({**base, "reason": reason})
    report: dict[str, Any] = {
        "project": spec.project,
        "period": {"from": spec.start.isoformat(), "to": spec.end.isoformat(), "days": spec.days},
        "methodology": {
            "id": methodology.id,
            "version": methodology.version,
            "digest": methodology.digest,
            "reference": methodology.reference,
            "parameters": {
                name: {"value": p.value, "unit": p.unit, "source": p.source}
                for name, p in methodology.parameters.items()
            },
            "result": methodology.result,
            "resultUnit": methodology.result_unit,
        },
        **_outcome(spec, methodology, len(stoves), included, excluded, total),
    }
    report["reportDigest"] = report_digest(report)
    return report


def _outcome(
    spec: PeriodSpec,
    methodology: Methodology,
    stoves: int,
    included: list[dict[str, Any]],
    excluded: list[dict[str, Any]],
    total: float,
) -> dict[str, Any]:
    """A report's closing sections, the same under every version: the stoves credited and
    left out, the totals, the credits (rounded down) and the digest of the inputs."""
    return {
        "stoves": included,
        "exclusions": excluded,
        "totals": {
            "stoves": stoves,
            "included": len(included),
            "excluded": len(excluded),
            "reductions": total,
            "unit": methodology.result_unit,
        },
        "credits": {
            "token": spec.token,
            "decimals": spec.decimals,
            "amount": to_smallest_unit(total, spec.decimals),
        },
        "inputsDigest": digest_of_digests(
            row["inputsDigest"] for row in sorted(included + excluded, key=lambda r: r["stove"])
        ),
    }


def _plain_usage(stove: StovePeriod, sums: DaySums) -> dict[str, Any]:
    """Usage as the sessions report it (`sums`: the stove's days'): what an excluded
    stove's row shows."""
    return {
        "days": sums.days,
        "activeDays": sums.active,
        "sessions": sums.sessions,
        "quantity": round(sums.energy, 6),
        "unit": stove.unit,
    }


def report_digest(report: dict[str, Any]) -> str:
    """SHA-256 of the report's canonical JSON, without its own digest."""
    body = {key: value for key, value in report.items() if key != "reportDigest"}
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


def compare_reports(stored: dict[str, Any], recomputed: dict[str, Any]) -> list[str]:
    """Every difference between a report as issued and as recomputed from the data, named
    so an auditor can find it; empty when they agree."""
    differences: list[str] = []
    if stored.get("reportDigest") != report_digest(stored):
        differences.append("the report's digest does not match its content (it was edited)")
    for key in ("project", "period", "inputsDigest", "credits", "totals", "fleet", "claims"):
        if key == "fleet" and key not in stored:
            continue  # a report made before the fleet rule
        if stored.get(key) != recomputed.get(key):
            differences.append(
                f"{key}: report says {stored.get(key)!r}, data gives {recomputed.get(key)!r}"
            )
    if stored.get("methodology", {}).get("digest") != recomputed["methodology"]["digest"]:
        differences.append("the methodology differs from the one the report names")
    theirs_document = stored.get("document", {}).get("digest")
    ours_document = recomputed.get("document", {}).get("digest")
    if "document" in stored and theirs_document != ours_document:
        differences.append(
            f"document: the report was computed under {theirs_document!r}, "
            f"the data under {ours_document!r}"
        )
    theirs = {row["stove"]: row for row in stored.get("stoves", [])}
    ours = {row["stove"]: row for row in recomputed["stoves"]}
    for stove in sorted(set(theirs) | set(ours)):
        a, b = theirs.get(stove), ours.get(stove)
        if a is None or b is None:
            where = "the data" if a is None else "the report"
            differences.append(f"{stove}: credited only according to {where}")
        elif a != b:
            differences.extend(
                f"{stove}: {path} {mine!r} in the report, {theirs!r} from the data"
                for path, mine, theirs in leaf_differences(a, b)
            )
    theirs_out = {row["stove"]: row.get("reason") for row in stored.get("exclusions", [])}
    ours_out = {row["stove"]: row["reason"] for row in recomputed["exclusions"]}
    for stove in sorted((set(theirs_out) & set(ours_out)) - set(theirs) - set(ours)):
        if theirs_out[stove] != ours_out[stove]:
            differences.append(
                f"{stove}: excluded for {theirs_out[stove]!r} in the report, "
                f"{ours_out[stove]!r} from the data"
            )
    return differences


def leaf_differences(a: Any, b: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(dotted path, value in `a`, value in `b`) of each leaf where two JSON values differ,
    so a difference names the figure that moved, not a total that may not have (a field
    only one side has shows as None on the other)."""
    if isinstance(a, dict) and isinstance(b, dict):
        found: list[tuple[str, Any, Any]] = []
        for key in sorted(set(a) | set(b), key=str):
            where = f"{path}.{key}" if path else str(key)
            found.extend(leaf_differences(a.get(key), b.get(key), where))
        return found
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        found = []
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            found.extend(leaf_differences(x, y, f"{path}[{index}]"))
        return found
    return [] if a == b else [(path or "value", a, b)]


CSV_COLUMNS = [
    "stove",
    "serial",
    "included",
    "reason",
    "days",
    "active_days",
    "sessions",
    "quantity",
    "unit",
    "register_rise",
    "sessions_quantity",
    "missing_days",
    "model",
    "case",
    "project_fuel",
    "household_size",
    "household_size_survey",
    "stove_efficiency",
    "meter_adjustment",
    "household_discount",
    "fleet_factor",
    "BE",
    "PE",
    "LE",
    "reductions",
    "flags",
    "inputs_digest",
]


def report_csv(report: dict[str, Any]) -> str:
    """One row a stove, included or not, for a spreadsheet."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    rows = [(row, True) for row in report["stoves"]] + [
        (row, False) for row in report["exclusions"]
    ]
    households = report.get("households")  # absent from a report made before surveys
    confirmed = households["confirmedBy"] if households else {}
    for row, included in sorted(rows, key=lambda pair: pair[0]["stove"]):
        usage, values, inputs = row["usage"], row.get("values", {}), row.get("inputs", {})
        register = usage.get("register")
        writer.writerow(
            [
                row["stove"],
                row.get("serial") or "",
                "yes" if included else "no",
                row.get("reason", ""),
                usage["days"],
                usage["activeDays"],
                usage["sessions"],
                usage["quantity"],
                usage["unit"],
                "" if register is None else register,
                usage.get("sessionsQuantity", ""),
                usage.get("missingDays", ""),
                row.get("model") or "",
                inputs.get("case", ""),
                inputs.get("project_fuel", ""),
                inputs.get("household_size", ""),
                ("confirmed" if row["stove"] in confirmed else "unconfirmed") if households else "",
                inputs.get("stove_efficiency", ""),
                values.get("meter_adjustment", ""),
                values.get("household_discount", ""),
                values.get("fleet_factor", ""),
                values.get("BE", ""),
                values.get("PE", ""),
                values.get("LE", ""),
                row.get("reductions", ""),
                "; ".join(row.get("flags", [])),
                row["inputsDigest"],
            ]
        )
    return out.getvalue()
