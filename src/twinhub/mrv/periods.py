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
from dataclasses import dataclass
from datetime import date
from typing import Any

import orjson

from twinhub.mrv.methodology import Methodology, MethodologyError, to_smallest_unit
from twinhub.mrv.plausibility import Finding, StoveDay
from twinhub.mrv.rules import ACTIVE, takes_part

REVIEW_KINDS = ("tampered", "cloned", "broken")  # findings that keep a stove out of a period


@dataclass(frozen=True)
class StovePeriod:
    """What the oracle knows of one stove for the period."""

    stove: str
    serial: str | None
    verified: bool
    enrolled: bool
    household_size: int | None
    stove_efficiency: float | None
    unit: str  # "kWh" for electric stoves, "kg" for fuel stoves
    days: Sequence[StoveDay]
    status: str | None = ACTIVE  # the domain's status; None: the stove is not a domain


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


def inputs_digest(days: Iterable[StoveDay]) -> str:
    """SHA-256 of the daily figures a computation used, in a fixed order and shape."""
    rows = sorted(
        [d.stove, d.day.isoformat(), d.sessions, round(d.energy, 6), d.meter_delta] for d in days
    )
    return hashlib.sha256(orjson.dumps(rows)).hexdigest()


def digest_of_digests(digests: Iterable[str]) -> str:
    """The period's inputs digest: SHA-256 over the stoves' own digests in stove order (one
    pass, rather than sorting every stove-day of the project again)."""
    return hashlib.sha256("\n".join(digests).encode()).hexdigest()


def _exclusion(
    stove: StovePeriod,
    spec: PeriodSpec,
    methodology: Methodology,
    findings: list[Finding],
    credited: Mapping[str, str],
) -> str | None:
    """Why the stove earns nothing this period, or None. The first reason found is given;
    the order puts registry facts before data quality before suspicion."""
    rules = methodology.parameter_values()
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
    if stove.stove_efficiency is None or not 0 < stove.stove_efficiency <= 1:
        return "the stove type's tested efficiency is not recorded"
    if not stove.days:
        return "no telemetry in the period"
    outside = [d for d in stove.days if not spec.start <= d.day <= spec.end]
    if outside:
        return f"telemetry dated {outside[0].day.isoformat()} lies outside the period"
    active = sum(1 for d in stove.days if d.sessions)
    least = int(rules.get("min_active_days", 0))
    if active < least:
        return f"cooked on {active} days, fewer than the methodology's minimum of {least}"
    most = rules.get("max_sessions_per_day")
    for d in stove.days:
        if most is not None and d.sessions > most:
            return f"{d.sessions} sessions on {d.day.isoformat()}, more than {most:g} a day"
    limit = rules.get("max_kwh_per_session" if stove.unit == "kWh" else "max_fuel_kg_per_session")
    for d in stove.days:
        if limit is not None and d.sessions and d.energy / d.sessions > limit:
            return (
                f"{d.energy / d.sessions:.2f} {stove.unit} a session on {d.day.isoformat()}, "
                f"more than {limit:g}"
            )
    for finding in findings:
        if finding.stove == stove.stove and finding.kind in REVIEW_KINDS:
            return f"flagged for review ({finding.kind}): {finding.explanation}"
    return None


def compute_period(
    spec: PeriodSpec,
    methodology: Methodology,
    stoves: Sequence[StovePeriod],
    findings: list[Finding],
    credited: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The monitoring report: per-stove usage and reductions, exclusions with reasons,
    totals, credits and digests of the inputs. `credited` names stoves an approved claim
    credited for an overlapping period already (stove -> what holds it: "claim <id>",
    "monitoring period <id> of <project>"): they are excluded."""
    included: list[dict[str, Any]] = []
    excluded: list[dict[str, Any]] = []
    total = 0.0
    for stove in sorted(stoves, key=lambda s: s.stove):
        usage = {
            "days": len(stove.days),
            "activeDays": sum(1 for d in stove.days if d.sessions),
            "sessions": sum(d.sessions for d in stove.days),
            "quantity": round(sum(d.energy for d in stove.days), 6),
            "unit": stove.unit,
        }
        base = {
            "stove": stove.stove,
            "serial": stove.serial,
            "usage": usage,
            "inputsDigest": inputs_digest(stove.days),
        }
        reason = _exclusion(stove, spec, methodology, findings, credited or {})
        if reason is None:
            quantity = usage["quantity"]
            inputs = {
                "energy_kwh": quantity if stove.unit == "kWh" else 0.0,
                "fuel_kg": quantity if stove.unit == "kg" else 0.0,
                "stove_efficiency": stove.stove_efficiency,
                "household_size": stove.household_size,
                "days": spec.days,
            }
            try:
                evaluation = methodology.evaluate(inputs)
            except MethodologyError as error:
                reason = f"the methodology could not be applied: {error}"
            else:
                values = {step.name: step.value for step in evaluation.steps}
                included.append(
                    {
                        **base,
                        "inputs": evaluation.inputs,
                        "values": values,
                        "reductions": evaluation.result,
                    }
                )
                total += evaluation.result
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
        "stoves": included,
        "exclusions": excluded,
        "totals": {
            "stoves": len(stoves),
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
    report["reportDigest"] = report_digest(report)
    return report


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
    for key in ("project", "period", "inputsDigest", "credits", "totals"):
        if stored.get(key) != recomputed.get(key):
            differences.append(
                f"{key}: report says {stored.get(key)!r}, data gives {recomputed.get(key)!r}"
            )
    if stored.get("methodology", {}).get("digest") != recomputed["methodology"]["digest"]:
        differences.append("the methodology differs from the one the report names")
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
    "household_size",
    "stove_efficiency",
    "BE",
    "PE",
    "LE",
    "reductions",
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
    for row, included in sorted(rows, key=lambda pair: pair[0]["stove"]):
        usage, values, inputs = row["usage"], row.get("values", {}), row.get("inputs", {})
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
                inputs.get("household_size", ""),
                inputs.get("stove_efficiency", ""),
                values.get("BE", ""),
                values.get("PE", ""),
                values.get("LE", ""),
                row.get("reductions", ""),
                row["inputsDigest"],
            ]
        )
    return out.getvalue()
