"""Monitoring periods: per-stove reductions from daily telemetry (the worked examples of
docs/methodology.md), exclusions with reasons, credits, and a report that recomputes."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import date, timedelta

import pytest

from twinhub.mrv.builtin import builtin_methodology
from twinhub.mrv.methodology import to_smallest_unit
from twinhub.mrv.periods import (
    PeriodSpec,
    StovePeriod,
    compare_reports,
    compute_period,
    report_csv,
    report_digest,
)
from twinhub.mrv.plausibility import Finding, StoveDay

SPEC = PeriodSpec("did:ixo:entity/project", date(2026, 10, 1), date(2026, 10, 30), "CARBON", 6)


def daily(stove: str, days: int, sessions: int, per_day: float) -> list[StoveDay]:
    return [
        StoveDay(
            stove,
            SPEC.start + timedelta(days=i),
            sessions,
            per_day,
            40.0 * sessions,
            1,
            sessions - 1,
            per_day,
        )
        for i in range(days)
    ]


def stove(name: str, **changes: object) -> StovePeriod:
    base = StovePeriod(name, f"SN-{name}", True, True, 5, 0.85, "kWh", daily(name, 30, 2, 1.0))
    return replace(base, **changes)


def stoves() -> list[StovePeriod]:
    return [
        stove("a-electric"),  # worked example 1: 30 kWh, household 5, efficiency 0.85
        stove(
            "b-pellets",
            household_size=4,
            stove_efficiency=0.40,
            unit="kg",
            days=daily("b-pellets", 20, 2, 1.0),
        ),  # worked example 2: 20 kg
        stove("c-unverified", verified=False),
        stove("d-silent", days=[]),
        stove(
            "e-busy",
            days=[
                *daily("e-busy", 29, 2, 1.0),
                StoveDay("e-busy", SPEC.end, 12, 2.0, 300, 6, 6, 2.0),
            ],
        ),
        stove("f-tampered"),
        stove("g-idle", days=daily("g-idle", 9, 2, 1.0)),
        stove("h-no-household", household_size=None),
        stove("i-hungry", days=daily("i-hungry", 30, 1, 3.5)),
        stove(
            "j-late",
            days=[
                *daily("j-late", 30, 2, 1.0),
                StoveDay("j-late", SPEC.end + timedelta(days=1), 2, 1, 80, 1, 1, 1),
            ],
        ),
    ]


FINDINGS = [Finding("f-tampered", "tampered", "its sessions report 2.5 times its meter")]


def test_each_stove_is_credited_by_the_methodology_or_excluded_with_its_reason() -> None:
    report = compute_period(SPEC, builtin_methodology(), stoves(), FINDINGS)
    credited = {row["stove"]: row["reductions"] for row in report["stoves"]}
    assert credited == {
        "a-electric": pytest.approx(0.06798450078, abs=1e-12),
        "b-pellets": pytest.approx(0.10996060608, abs=1e-12),
    }
    reasons = {row["stove"]: row["reason"] for row in report["exclusions"]}
    assert reasons == {
        "c-unverified": "the stove is not verified",
        "d-silent": "no telemetry in the period",
        "e-busy": "12 sessions on 2026-10-30, more than 8 a day",
        "f-tampered": "flagged for review (tampered): its sessions report 2.5 times its meter",
        "g-idle": "cooked on 9 days, fewer than the methodology's minimum of 10",
        "h-no-household": "the household size is not recorded",
        "i-hungry": "3.50 kWh a session on 2026-10-01, more than 3",
        "j-late": "telemetry dated 2026-10-31 lies outside the period",
    }
    total = 0.06798450078 + 0.10996060608
    assert report["totals"]["reductions"] == pytest.approx(total, abs=1e-12)
    assert report["totals"] | {"reductions": 0} == {
        "stoves": 10,
        "included": 2,
        "excluded": 8,
        "reductions": 0,
        "unit": "tCO2e",
    }
    assert report["credits"] == {
        "token": "CARBON",
        "decimals": 6,
        "amount": to_smallest_unit(total, 6),
    }
    assert report["credits"]["amount"] == 177945
    assert report["methodology"]["parameters"]["fNRB"]["value"] == 0.88
    assert report["reportDigest"] == report_digest(report)


def test_a_recomputation_from_the_same_data_agrees() -> None:
    first = compute_period(SPEC, builtin_methodology(), stoves(), FINDINGS)
    again = compute_period(SPEC, builtin_methodology(), list(reversed(stoves())), FINDINGS)
    assert compare_reports(first, again) == []
    assert first == again


def test_an_edited_report_or_changed_data_is_named() -> None:
    issued = compute_period(SPEC, builtin_methodology(), stoves(), FINDINGS)
    edited = copy.deepcopy(issued)
    edited["stoves"][0]["reductions"] = 0.5
    differences = compare_reports(edited, issued)
    assert differences[0] == "the report's digest does not match its content (it was edited)"
    assert any(d.startswith("a-electric: reductions 0.5 in the report") for d in differences)

    changed = stoves()
    changed[0] = replace(changed[0], days=daily("a-electric", 30, 2, 1.1))
    recomputed = compute_period(SPEC, builtin_methodology(), changed, FINDINGS)
    differences = compare_reports(issued, recomputed)
    assert any(d.startswith("inputsDigest:") for d in differences)
    assert any(d.startswith("a-electric: reductions") for d in differences)
    assert any(d.startswith("credits:") for d in differences)


def test_the_csv_has_a_row_for_every_stove() -> None:
    report = compute_period(SPEC, builtin_methodology(), stoves(), FINDINGS)
    lines = report_csv(report).splitlines()
    assert lines[0].startswith("stove,serial,included,reason")
    assert len(lines) == 11
    electric = next(line for line in lines if line.startswith("a-electric,"))
    assert ",yes,," in electric and "0.0679845007" in electric
    assert next(line for line in lines if line.startswith("c-unverified,")).count(",no,") == 1


def test_a_changed_figure_is_named_with_its_two_different_values() -> None:
    """An edited input whose stove total did not move (BE doubled, reductions as issued) is
    named by its own field, with the report's value and the data's, never the same number
    printed twice."""
    issued = compute_period(SPEC, builtin_methodology(), stoves(), FINDINGS)
    edited = copy.deepcopy(issued)
    row = edited["stoves"][0]
    row["values"]["BE"] *= 2
    differences = [d for d in compare_reports(edited, issued) if d.startswith(row["stove"])]
    original = issued["stoves"][0]["values"]["BE"]
    assert differences == [
        f"{row['stove']}: values.BE {row['values']['BE']!r} in the report, "
        f"{original!r} from the data"
    ]
    for difference in differences:
        mine, _, theirs = difference.partition(" in the report, ")
        assert mine.rsplit(" ", 1)[1] != theirs.split(" ", 1)[0]
