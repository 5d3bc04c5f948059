"""The register's rate rule of methodology 2.1.0 (mrv/meter.py, `max_register_kwh_per_day`):
a fall of the register is a rollover only near the register's top, with a rise across the
wrap the meter could make in the time between the readings; any other fall with no reset
declared is a gap in the data, never a credit. 2.0.0 read any fall of a meter with
`registerMax` as a wrap, and its figures stay as they were issued.

The worked example is docs/methodology.md's "The register's rate rule (2.1.0)"."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twinhub.kernel.errors import Problems
from twinhub.mrv.builtin import builtin_document, builtin_methodology
from twinhub.mrv.claims import methodology_of
from twinhub.mrv.meter import RegisterDay, register_rise
from twinhub.mrv.methodology import Methodology, compile_methodology
from twinhub.mrv.period_inputs import day_cells, figures_from_readings
from twinhub.mrv.periods import PeriodSpec, compute_period
from twinhub.mrv.plausibility import assess
from twinhub.mrv.rollups import stove_period

TOP = 99_999.99
RATE = 24.0
START = date(2026, 10, 1)
SPEC = PeriodSpec("did:ixo:entity/project", START, date(2026, 10, 30), "CARBON", 6)
METER = {
    "model": "EM-1",
    "serial": "M-1",
    "accuracyClass": "1",
    "maxPermissibleError": 0.01,
    "calibratedOn": "2026-01-10",
    "calibrationDue": "2027-01-10",
    "certificate": "sha256:" + "c" * 64,
    "registerMax": TOP,
}
SAMPLED = {  # the household size confirmed at 90/10 (no discount), as the worked examples
    "householdSize": {
        "value": 5.0,
        "sampleSize": 97,
        "confidence": 0.9,
        "precision": 0.08,
        "surveyId": "s-1",
        "seed": "seed",
    }
}


def on(offset: int) -> date:
    return START + timedelta(days=offset)


def two_point_0() -> Methodology:
    """2.0.0 as it was issued (shipped beside 2.1.0, found by its digest)."""
    return methodology_of(builtin_document("clean-cooking-mecd-2.0.0"))


def test_2_1_0_declares_the_rate_and_2_0_0_does_not() -> None:
    current, issued = builtin_methodology(), two_point_0()
    assert current.version == "2.1.0" and current.reading == ("meter", RATE)
    rule = current.rules["max_register_kwh_per_day"]
    assert (rule.value, rule.unit) == (RATE, "kWh/day") and "rollover" in rule.source
    assert issued.version == "2.0.0" and issued.reading == ("meter", None)


def test_a_rate_that_would_count_nothing_is_refused_with_its_path() -> None:
    document = builtin_methodology().document
    rules = {**document["rules"]}
    rules["max_register_kwh_per_day"] = {**rules["max_register_kwh_per_day"], "value": 0}
    problems = Problems()
    assert compile_methodology({**document, "rules": rules}, problems) is None
    assert [p.field for p in problems.items] == ["methodology.rules.max_register_kwh_per_day.value"]
    rules["max_register_kwh_per_day"] = {"value": 24, "unit": "kWh", "source": "test"}
    problems = Problems()
    assert compile_methodology({**document, "rules": rules}, problems) is None
    assert [p.field for p in problems.items] == ["methodology.rules.max_register_kwh_per_day.unit"]


def test_a_fall_far_from_the_top_is_a_gap_not_a_rollover() -> None:
    days = [
        RegisterDay(on(0), 4990.0, 5000.0),
        RegisterDay(on(1), 3000.0, 3002.0),  # fell 2,000 kWh, no reset declared
        RegisterDay(on(2), 3003.0, 3005.0),
    ]
    issued = register_rise(days, TOP)  # 2.0.0: read as a wrap of about 98,000 kWh
    assert issued.deltas[on(1)] == pytest.approx(TOP - 5000.0 + 3002.0)
    assert "rolled over" in issued.events[0]
    rise = register_rise(days, TOP, RATE)
    assert on(1) not in rise.deltas  # a gap: a missing day, no rise read for it
    assert rise.deltas == {on(0): 10.0, on(2): 3.0}  # read on from the day's highest, 3002
    assert rise.total == 13.0
    (event,) = rise.events
    assert event.startswith("register fell from 5000 to 3000 kWh on 2026-10-02 with no reset")
    assert "a rollover would be a rise of 98001.99 kWh" in event
    assert "more than the methodology's 24 kWh a day allows (48)" in event
    assert "a gap in the data" in event


def test_a_fall_with_no_range_is_a_gap_not_a_broken_meter() -> None:
    days = [RegisterDay(on(0), 50.0, 60.0), RegisterDay(on(1), 5.0, 8.0)]
    rise = register_rise(days, None, RATE)
    assert rise.deltas == {on(0): 10.0}  # no negative rise: the stove is not excluded
    assert "no registerMax to roll over: a gap in the data" in rise.events[0]


def test_a_reading_below_zero_is_never_a_rollover() -> None:
    days = [RegisterDay(on(0), 99990.0, 99999.0), RegisterDay(on(1), -5.0, 2.0)]
    rise = register_rise(days, TOP, RATE)
    assert rise.deltas == {on(0): 9.0}
    assert "with no reset declared and a reading below zero: a gap" in rise.events[0]


def test_a_rollover_near_the_top_is_credited() -> None:
    after = register_rise(
        [RegisterDay(on(0), 99990.0, 99998.0), RegisterDay(on(1), 1.0, 3.0)], TOP, RATE
    )
    assert after.deltas[on(1)] == pytest.approx(TOP - 99998.0 + 3.0)
    assert after.events == ("register rolled over at 99999.99 kWh on 2026-10-02",)
    both = register_rise(  # readings on both sides of the wrap, then the next day from zero
        [
            RegisterDay(on(0), 99990.0, 99998.0),
            RegisterDay(on(1), 1.0, 99999.5),
            RegisterDay(on(2), 2.0, 3.0),
        ],
        TOP,
        RATE,
    )
    assert both.deltas[on(1)] == pytest.approx(TOP - 99998.0)
    assert both.deltas[on(2)] == 3.0


def test_a_wrap_across_silent_days_is_judged_on_the_days_it_spans() -> None:
    """From 99,950 to 40 is a rise of 89.99 kWh: plausible over four days (96), not two (48)."""
    slow = register_rise(
        [RegisterDay(on(0), 99950.0, 99950.0), RegisterDay(on(3), 40.0, 40.0)], TOP, RATE
    )
    assert slow.deltas[on(3)] == pytest.approx(89.99)
    fast = register_rise(
        [RegisterDay(on(0), 99950.0, 99950.0), RegisterDay(on(1), 40.0, 40.0)], TOP, RATE
    )
    assert on(1) not in fast.deltas and "allows (48)" in fast.events[0]


def test_a_rise_faster_than_the_rate_is_a_gap() -> None:
    days = [
        RegisterDay(on(0), 10.0, 11.0),
        RegisterDay(on(1), 5000.0, 5001.0),
        RegisterDay(on(2), 5002.0, 5003.0),
    ]
    rise = register_rise(days, TOP, RATE)
    assert rise.deltas == {on(0): 1.0, on(2): 2.0}
    assert rise.events[0].startswith("register rose 4990 kWh by 2026-10-02, more than")
    beyond = register_rise(
        [RegisterDay(on(0), 99990.0, 99999.0), RegisterDay(on(1), 99999.5, 100001.0)], TOP, RATE
    )
    assert beyond.deltas == {on(0): 9.0}
    assert "register read 100001 kWh on 2026-10-02, beyond its range (99999.99)" in beyond.events[0]
    first = register_rise([RegisterDay(on(0), 10.0, 100.0)], None, RATE)
    assert first.deltas == {} and "register rose 90 kWh" in first.events[0]


def test_a_declared_reset_counts_again_from_zero() -> None:
    days = [
        RegisterDay(on(0), 500.0, 510.0),
        RegisterDay(on(1), 0.5, 2.0, resets=1),  # every reading after the reset
        RegisterDay(on(2), 3.0, 4.0),
    ]
    rise = register_rise(days, TOP, RATE)
    assert rise.deltas == {on(0): 10.0, on(1): 2.0, on(2): 2.0}
    assert rise.events == ("register reset on 2026-10-02 (declared): counted again from zero",)


def _worked_readings() -> list[dict[str, Any]]:
    """docs/methodology.md's worked example: one register reading at the end of each day,
    two sessions a day of 1.55 and 1.45 kWh on alternate days, 90 kWh in all (the sessions
    overstate the register)."""
    register = [99980.0 + i for i in range(14)]  # Oct 1-14: 99,980 -> 99,993
    register += [2.0 + i for i in range(6)]  # Oct 15-20: wrapped, 2 -> 7
    register += [3.0 + i for i in range(10)]  # Oct 21-30: fell to 3, no reset; 3 -> 12
    readings = []
    for offset, value in enumerate(register):
        moment = datetime(2026, 10, 1, 8, tzinfo=UTC) + timedelta(days=offset)
        for session in range(2):
            readings.append(
                {
                    "seq": 3 * offset + session,
                    "time": (moment + timedelta(hours=session)).isoformat(),
                    "values": {"session": "start", "energyKwh": 1.45 if offset % 2 else 1.55},
                }
            )
        readings.append(
            {
                "seq": 3 * offset + 2,
                "time": (moment + timedelta(hours=12)).isoformat(),
                "values": {"meterKwh": value},
            }
        )
    return readings


def _worked_period(methodology: Methodology) -> dict[str, Any]:
    facts = ({"householdSize": 5, "efficiency": 0.85, "meter": METER}, True, "active")
    stove = stove_period(
        "did:ixo:entity/s", facts, True, day_cells(_worked_readings()), methodology.reading
    )
    findings = assess(stove.days)
    return compute_period(SPEC, methodology, [stove], findings, sampled=SAMPLED)


def test_the_worked_example_of_the_docs() -> None:
    report = _worked_period(builtin_methodology())
    (row,) = report["stoves"]
    usage = row["usage"]
    assert usage["register"] == 35.99  # 13 + 8.99 (the wrap) + 5 + 9
    assert usage["missingDays"] == 1  # Oct 21: the fall is a gap
    assert usage["sessionsQuantity"] == 90.0 and usage["quantity"] == 35.99
    flags = row["flags"]
    assert any(
        flag.startswith("the sessions report 90 kWh and the register rose 35.99") for flag in flags
    )
    assert "register rolled over at 99999.99 kWh on 2026-10-15" in flags
    assert any(
        flag.startswith("register fell from 7 to 3 kWh on 2026-10-21 with no reset declared")
        and "a rollover would be a rise of 99995.99 kWh" in flag
        for flag in flags
    )
    values = row["values"]
    assert values["BE"] == pytest.approx(0.1047460546692, abs=1e-12)
    assert values["PE"] == pytest.approx(0.01889475, abs=1e-12)
    assert values["LE"] == pytest.approx(0.00429256523346, abs=1e-12)
    assert row["reductions"] == pytest.approx(0.08155873943574, abs=1e-12)
    assert report["credits"]["amount"] == 81558


def test_the_docs_state_the_figures_the_code_computes() -> None:
    """The worked example in docs/methodology.md says what the two tests around this compute."""
    docs = (Path(__file__).parents[2] / "docs" / "methodology.md").read_text()
    section = docs[docs.index("### The register's rate rule (2.1.0)") :]
    for figure in (
        "wrap = 99,999.99 − 99,993.00 + 2.00 = 8.99 kWh ≤ 24 × 2 = 48",
        "99,999.99 − 7.00 + 3.00 = 99,995.99 kWh > 48",
        "register = 13 + 8.99 + 5 + 9 = **35.99 kWh**",
        "**0.1047460546692** t",
        "**0.01889475** t",
        "**0.00429256523346** t",
        "ER = **0.08155873943574 tCO2e**: 81,558 credits",
        "0.95 × (0.2619378972 − 0.04725) = **0.20395350234 tCO2e**",
    ):
        assert figure in section, figure


def test_the_same_data_under_2_0_0_computes_as_it_was_issued() -> None:
    """2.0.0 read the fall as a wrap of 99,995.99 kWh; the sessions, the smaller, counted: 90
    kWh, 2.5 times what the register recorded. Kept so its reports recompute unchanged."""
    report = _worked_period(two_point_0())
    assert report["methodology"]["version"] == "2.0.0"
    (row,) = report["stoves"]
    assert row["usage"]["register"] == pytest.approx(100031.98)
    assert row["usage"]["quantity"] == 90.0 and row["usage"]["missingDays"] == 0
    # as issued: the range to six digits (2.1.0 writes it to the watt-hour)
    assert "register rolled over at 100000 kWh on 2026-10-21" in row["flags"]
    assert row["reductions"] == pytest.approx(0.20395350234, abs=1e-12)


# A stove's register, day by day: a step is a rise, a silent day, a fall, a declared reset
# or a wrap past the top.
steps = st.lists(
    st.tuples(
        st.sampled_from(["rise", "rise", "rise", "silent", "fall", "reset", "wrap", "jump"]),
        st.floats(min_value=0.0, max_value=30.0),
    ),
    min_size=12,
    max_size=30,
)


def _readings(plan: list[tuple[str, float]], first: float) -> list[dict[str, Any]]:
    readings, value = [], first
    for offset, (kind, amount) in enumerate(plan):
        if kind == "silent":
            continue
        event: dict[str, Any] = {}
        if kind == "rise":
            value = value + amount
        elif kind == "fall":
            value = max(value - 100.0 - amount, 0.0)
        elif kind == "reset":
            value, event = amount / 2, {"meterEvent": "reset"}
        elif kind == "wrap":
            value = (value + amount) % TOP
        else:
            value = value + 1000.0 * amount
        moment = datetime(2026, 10, 1, 9, tzinfo=UTC) + timedelta(days=offset)
        readings.append(
            {
                "seq": offset,
                "time": moment.isoformat(),
                "values": {
                    "session": "start",
                    "energyKwh": 1.0,
                    "meterKwh": round(value, 2),
                    **event,
                },
            }
        )
    return readings


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plans=st.lists(
        st.tuples(steps, st.sampled_from([0.0, 5000.0, 99990.0]), st.booleans()),
        min_size=16,
        max_size=20,
    )
)
def test_the_rule_is_one_whichever_path_reads_and_computes(
    plans: list[tuple[list[tuple[str, float]], float, bool]],
) -> None:
    """Rollups and raw readings read the register by the one rule; no credited rise beats
    the rate over the days it spans; and the period over the batch (its formulas as arrays)
    credits each stove what the stove alone (CEL, stove by stove) is credited."""
    methodology = builtin_methodology()
    stoves = []
    for index, (plan, first, ranged) in enumerate(plans):
        meter = {**METER, "registerMax": TOP if ranged else None}
        readings = _readings(plan, first)
        name = f"did:ixo:entity/s{index:02d}"
        facts = ({"householdSize": 5, "efficiency": 0.85, "meter": meter}, True, "active")
        stove = stove_period(name, facts, True, day_cells(readings), methodology.reading)
        assert list(stove.days) == figures_from_readings(
            name, "kWh", readings, meter, methodology.reading
        )
        # No credited rise beats the rate over the days since the previous register reading.
        read = sorted({date.fromisoformat(r["time"][:10]) for r in readings})
        for day in stove.days:
            if day.meter_delta is not None:
                before = [d for d in read if d < day.day]
                span = (day.day - before[-1]).days + 1 if before else 1
                assert day.meter_delta <= RATE * span + 1e-6
        stoves.append(stove)
    together = compute_period(SPEC, methodology, stoves, [], sampled=SAMPLED)
    alone = [compute_period(SPEC, methodology, [stove], [], sampled=SAMPLED) for stove in stoves]
    assert together["stoves"] == [row for report in alone for row in report["stoves"]]
    assert together["exclusions"] == [row for report in alone for row in report["exclusions"]]
