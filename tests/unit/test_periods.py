"""Monitoring periods: per-stove reductions from daily telemetry (the worked examples of
docs/methodology.md), exclusions with reasons, credits, and a report that recomputes."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import date, timedelta
from typing import Any

import pytest

from twinhub.kernel.errors import Invalid, Problems
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
from twinhub.mrv.project_document import check_project_document
from twinhub.mrv.rollups import stove_period

SPEC = PeriodSpec("did:ixo:entity/project", date(2026, 10, 1), date(2026, 10, 30), "CARBON", 6)


def daily(
    stove: str, days: int, sessions: int, per_day: float, register: float | None = None
) -> list[StoveDay]:
    """`days` days from the period's start; the register rises by `register` a day (by
    what the sessions report, unless told otherwise)."""
    return [
        StoveDay(
            stove,
            SPEC.start + timedelta(days=i),
            sessions,
            per_day,
            40.0 * sessions,
            1,
            sessions - 1,
            per_day if register is None else register,
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
        stove("f-tampered", days=daily("f-tampered", 30, 2, 1.0, register=0.4)),
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
METER = {
    "model": "EM-1",
    "serial": "M-1",
    "accuracyClass": "1",
    "maxPermissibleError": 0.01,
    "calibratedOn": "2026-01-10",
    "calibrationDue": "2027-01-10",
    "certificate": "sha256:" + "c" * 64,
}
SAMPLED = {
    "householdSize": {
        "value": 4.6,
        "sampleSize": 97,
        "confidence": 0.9,
        "precision": 0.08,
        "surveyId": "s-1",
        "seed": "seed",
    }
}


def parameter(value: float, unit: str) -> dict[str, Any]:
    return {
        "value": value,
        "unit": unit,
        "source": "the worked examples' figure",
        "year": 2026,
        "evidence": None,
        "status": "checked",
    }


def project_document(**changes: Any) -> Any:
    document = {
        "methodology": {"id": "clean-cooking-mecd", "version": "2.1.0"},
        "country": "KE",
        "creditingPeriod": {"from": "2026-01-01", "to": "2032-12-31"},
        "baselineFuel": "charcoal",
        "leakage": "default",
        "parameters": {"fNRB": parameter(0.88, "fraction"), "EF_grid": parameter(0.5, "tCO2/MWh")},
        "monitoringPlan": {"measure": "meter", "reportingIntervalHours": 24},
        "stoveModels": {
            "ECO-1": {
                "case": 1,
                "fuel": "electricity",
                "efficiency": parameter(0.85, "fraction"),
                "testCertificate": "sha256:" + "a" * 64,
            },
            "EPC-6L": {
                "case": 2,
                "fuel": "electricity",
                "specificConsumption": parameter(1.2, "MJ/person/event"),
                "baselineSpecificConsumption": parameter(7.5, "MJ/person/event"),
                "testCertificate": "sha256:" + "b" * 64,
            },
            "PEL-1": {
                "case": 1,
                "fuel": "pellets",
                "efficiency": parameter(0.40, "fraction"),
                "testCertificate": "sha256:" + "d" * 64,
            },
        },
    }
    document.update(changes)
    problems = Problems()
    found = check_project_document(document, problems)
    assert found is not None, problems.items
    return found


def documented() -> list[StovePeriod]:
    """Stoves of a project with a design document: models and meters recorded."""
    return [
        stove("a-case1", stove_model="ECO-1", meter=METER),  # worked example 1
        stove("b-case2", stove_model="EPC-6L", meter=METER),  # worked example 2
        stove(
            "c-pellets",
            stove_model="PEL-1",
            meter=METER,
            household_size=4,
            unit="kg",
            days=daily("c-pellets", 20, 2, 1.0),
        ),  # worked example 3
        stove("d-no-meter", stove_model="ECO-1"),
        stove("e-no-model", meter=METER),
        stove("f-unknown-model", stove_model="XL-9", meter=METER),
        stove("g-bad-meter", stove_model="ECO-1", meter={**METER, "certificate": "none"}),
        stove("h-sparse", stove_model="ECO-1", meter=METER, days=daily("h-sparse", 12, 2, 1.0)),
        stove(
            "i-overdue",
            stove_model="ECO-1",
            meter={**METER, "calibrationDue": "2026-10-15"},
        ),
    ]


def test_each_stove_is_credited_by_the_methodology_or_excluded_with_its_reason() -> None:
    """No design document stored: the methodology's defaults (each stove a case 1 model with
    its registry efficiency; no meter record, so the default +/-5 % meter error; household
    sizes not sampled, so the 10 % sampling discount on the cap, which does not bind)."""
    report = compute_period(SPEC, builtin_methodology(), stoves(), FINDINGS)
    credited = {row["stove"]: row["reductions"] for row in report["stoves"]}
    assert credited == {
        # 28.5 kWh counted: 0.00043605 TJ displaced x 190.2236 = 0.0829470008 BE,
        # PE 0.0315 x 0.525 = 0.0165375, ER (0.0664095008) x 0.95
        "a-electric": pytest.approx(0.0630890257, abs=1e-10),
        # 19 kg counted: 0.2964 GJ; BE 0.0005928 TJ x 190.2236 = 0.11276455,
        # PE 0.021 t x 0.0156 x 9.46 = 0.003099096, ER (0.109665454) x 0.95
        "b-pellets": pytest.approx(0.1041821813, abs=1e-10),
        # the register rose 12 kWh against 30 from the sessions: the smaller counts;
        # 11.4 kWh: BE 0.00017442 TJ x 190.2236 = 0.0331788003, PE 0.006615
        "f-tampered": pytest.approx(0.0252356103, abs=1e-10),
    }
    flags = {row["stove"]: row["flags"] for row in report["stoves"]}
    assert any("the smaller (12) counts" in flag for flag in flags["f-tampered"])
    assert flags["a-electric"] == [
        "no meter record on the device: the methodology's default meter error"
    ]
    reasons = {row["stove"]: row["reason"] for row in report["exclusions"]}
    assert reasons == {
        "c-unverified": "the stove is not verified",
        "d-silent": "no telemetry in the period",
        "e-busy": "12 sessions on 2026-10-30, more than 8 a day",
        "g-idle": "cooked on 9 days, fewer than the methodology's minimum of 10",
        "h-no-household": "the household size is not recorded",
        "i-hungry": "3.50 kWh a session on 2026-10-01, more than 3",
        "j-late": "telemetry dated 2026-10-31 lies outside the period",
    }
    total = sum(credited.values())
    assert report["totals"]["reductions"] == pytest.approx(total, abs=1e-12)
    assert report["totals"] | {"reductions": 0} == {
        "stoves": 10,
        "included": 3,
        "excluded": 7,
        "reductions": 0,
        "unit": "tCO2e",
    }
    assert report["credits"] == {
        "token": "CARBON",
        "decimals": 6,
        "amount": to_smallest_unit(total, 6),
    }
    assert report["credits"]["amount"] == 192506  # 0.1925068173 t in millionths, rounded down
    assert report["methodology"]["parameters"]["fNRB"]["value"] == 0.88
    assert report["document"]["source"] == "methodology"
    assert report["document"]["placeholders"] == ["parameters.EF_grid", "parameters.fNRB"]
    assert report["fleet"] == {
        "enrolled": 10,
        "reporting": 9,
        "share": 0.9,
        "minimum": 0.9,
        "met": True,
    }
    assert report["reportDigest"] == report_digest(report)


def test_under_a_design_document_each_model_takes_its_case() -> None:
    report = compute_period(
        SPEC, builtin_methodology(), documented(), [], document=project_document(), sampled=SAMPLED
    )
    credited = {row["stove"]: row["reductions"] for row in report["stoves"]}
    assert credited == {
        "a-case1": pytest.approx(0.06798450078, abs=1e-12),  # worked example 1
        "b-case2": pytest.approx(0.1070183835, abs=1e-12),  # worked example 2
        "c-pellets": pytest.approx(0.10996060608, abs=1e-12),  # worked example 3
        # calibration due 2026-10-15: 15 days after it, so the +/-5 % overdue error
        "i-overdue": pytest.approx(0.0630890257, abs=1e-10),
    }
    rows = {row["stove"]: row for row in report["stoves"]}
    assert rows["b-case2"]["inputs"]["case"] == 2 and rows["b-case2"]["model"] == "EPC-6L"
    assert rows["b-case2"]["inputs"]["sc_baseline"] == 7.5
    assert (
        "15 day(s) of data after the meter's calibration was due" in rows["i-overdue"]["flags"][0]
    )
    reasons = {row["stove"]: row["reason"] for row in report["exclusions"]}
    assert reasons == {
        "d-no-meter": "the meter has no calibration record (properties.meter)",
        "e-no-model": "the stove names no model (properties.stoveModel) of the project's document",
        "f-unknown-model": "stove model 'XL-9' is not in the project's design document",
        "g-bad-meter": "the meter record is invalid: properties.meter.certificate: "
        "expected the calibration certificate's sha256:<hex>",
        "h-sparse": "the meter is missing on 18 of 30 days, more than the methodology's 50%",
    }
    assert report["document"]["source"] == "document"
    assert report["document"]["placeholders"] == []
    assert report["sampled"]["householdSize"]["sampleSize"] == 97


def test_the_document_sets_the_country_figures_and_must_fit_the_methodology() -> None:
    lower = project_document(
        parameters={"fNRB": parameter(0.5, "fraction"), "EF_grid": parameter(0.87, "tCO2/MWh")}
    )
    report = compute_period(
        SPEC, builtin_methodology(), documented()[:1], [], document=lower, sampled=SAMPLED
    )
    values = report["stoves"][0]["values"]
    assert values["EF_baseline_input"] == pytest.approx(127.44, abs=1e-9)
    assert values["PE"] == pytest.approx(0.027405, abs=1e-12)
    assert report["methodology"]["parameters"]["fNRB"]["value"] == 0.5
    wrong = project_document(
        parameters={"fNRB": parameter(50, "percent"), "EF_grid": parameter(0.5, "tCO2/MWh")}
    )
    with pytest.raises(Invalid) as refused:
        compute_period(SPEC, builtin_methodology(), documented()[:1], [], document=wrong)
    fields = {d.field: d.error for d in refused.value.details}
    assert fields == {
        "document.parameters.fNRB.unit": "the methodology counts fNRB in fraction, not percent"
    }


def test_a_fleet_below_its_reporting_share_scales_the_credits() -> None:
    silent = [stove(f"z-{i}", days=[]) for i in range(3)]
    report = compute_period(SPEC, builtin_methodology(), [stove("a-electric"), *silent], [])
    assert report["fleet"]["share"] == 0.25 and report["fleet"]["met"] is False
    assert report["stoves"][0]["values"]["fleet_factor"] == 0.25
    assert report["stoves"][0]["reductions"] == pytest.approx(0.0630890257 * 0.25, abs=1e-10)


def test_without_register_readings_an_electric_stove_has_no_measure() -> None:
    unread = stove("a-electric", days=daily("a-electric", 30, 2, 1.0, register=None))
    unread = replace(unread, days=[d._replace(meter_delta=None) for d in unread.days])
    report = compute_period(SPEC, builtin_methodology(), [unread], [])
    assert report["exclusions"][0]["reason"] == (
        "no meter register reading (meterKwh) in the period: the meter is the measure"
    )


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
    assert ",yes,," in electric and "0.063089025" in electric
    assert "no meter record on the device" in electric
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


def test_a_report_under_another_document_is_named() -> None:
    issued = compute_period(
        SPEC, builtin_methodology(), documented(), [], document=project_document(), sampled=SAMPLED
    )
    defaults = compute_period(SPEC, builtin_methodology(), documented(), [], sampled=SAMPLED)
    differences = compare_reports(issued, defaults)
    assert any(
        d.startswith("document: the report was computed under 'sha256:") for d in differences
    )
    older = {k: v for k, v in issued.items() if k not in ("document", "fleet")}
    older["reportDigest"] = report_digest(older)
    assert not any(d.startswith(("document", "fleet")) for d in compare_reports(older, issued))


def test_bad_sampled_parameters_are_refused_with_their_paths() -> None:
    bad = {"householdSize": {"value": "four", "sampleSize": 0, "confidence": 1.5, "precision": 0.1}}
    with pytest.raises(Invalid) as refused:
        compute_period(SPEC, builtin_methodology(), stoves()[:1], [], sampled=bad)
    assert {d.field for d in refused.value.details} == {
        "sampled.householdSize.value",
        "sampled.householdSize.sampleSize",
        "sampled.householdSize.confidence",
    }


def test_the_report_says_whose_household_size_a_survey_confirmed() -> None:
    """The stove's record names the survey answer that confirmed its size (written by the
    survey service); a record edited since, or none, leaves the size unconfirmed."""
    answer = {
        "householdSize": 5,
        "enrolled": 4,
        "surveyId": "sv_00000000000000aa",
        "sessionId": "ATUid_1",
        "question": "people",
        "answeredAt": "2026-10-03T08:00:00+00:00",
    }
    confirmed = stove_period(
        "a-confirmed",
        ({"householdSize": 5, "householdSizeConfirmation": answer}, True, "active"),
        True,
        {},
    )
    edited = stove_period(
        "b-edited",
        ({"householdSize": 6, "householdSizeConfirmation": answer}, True, "active"),
        True,
        {},
    )
    assert confirmed.household == answer and edited.household is None
    fleet = [
        stove("a-confirmed", household=confirmed.household),
        stove("b-edited"),
        stove("c-none", household_size=None),
    ]
    report = compute_period(SPEC, builtin_methodology(), fleet, [])
    assert report["households"] == {
        "confirmed": 1,
        "unconfirmed": 1,
        "notRecorded": 1,
        "confirmedBy": {"a-confirmed": answer},
    }
    rows = {line.split(",")[0]: line for line in report_csv(report).splitlines()[1:]}
    assert ",5,confirmed," in rows["a-confirmed"] and ",5,unconfirmed," in rows["b-edited"]
    again = compute_period(SPEC, builtin_methodology(), fleet, [])
    assert compare_reports(report, again) == []


def test_stove_use_and_fuel_stacking_are_monitoring_checks_not_parameters() -> None:
    """Under metered cooking the meter is the measure: the survey's household size enters
    the baseline cap, stove use and fuel stacking are reported with their sample and
    whether they met 90/10, and no figure moves with them."""

    def sampled(use: float, stacking: float) -> dict[str, Any]:
        base = {"sampleSize": 40, "confidence": 0.9, "surveyId": "sv_1", "seed": "s"}
        return {
            "householdSize": {**base, "value": 4.8, "precision": 0.06},
            "stoveUse": {**base, "value": use, "precision": 0.05},
            "fuelStacking": {**base, "value": stacking, "precision": 0.3},
        }

    one = compute_period(
        SPEC, builtin_methodology(), stoves(), FINDINGS, None, None, sampled(0.95, 0.4)
    )
    other = compute_period(
        SPEC, builtin_methodology(), stoves(), FINDINGS, None, None, sampled(0.5, 0.9)
    )
    assert set(one["sampled"]) == {"householdSize"}
    checks = one["monitoringChecks"]
    assert set(checks) == {"stoveUse", "fuelStacking"}
    assert checks["stoveUse"]["meetsTarget"] is True
    assert checks["fuelStacking"]["meetsTarget"] is False  # 30 % misses 90/10: reported
    assert "enters no formula" in checks["fuelStacking"]["use"]
    assert [row["reductions"] for row in one["stoves"]] == [
        row["reductions"] for row in other["stoves"]
    ]
    assert one["credits"] == other["credits"]
    assert (
        one["monitoringChecks"]["stoveUse"]["value"]
        != other["monitoringChecks"]["stoveUse"]["value"]
    )
