"""Learned plausibility on simulated households: a tampered meter and a cloned stove are
flagged with an explanation, normal households are not."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from datetime import date, timedelta
from itertools import combinations
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from twinhub.mrv.day_columns import DayColumns, day_sums
from twinhub.mrv.plausibility import (
    MAX_BUCKET,
    PlausibilityRules,
    Profile,
    StoveDay,
    _frozen_findings,
    _register_findings,
    assess,
    profile,
    run_length,
    shared_days,
)

START = date(2026, 10, 1)


def household(stove: str, rng: random.Random, days: int = 30) -> list[StoveDay]:
    """Morning and evening meals, more on weekends, a day off now and then; the register
    follows the sessions within a couple of per cent."""
    rate = rng.uniform(1.6, 2.8)
    per_session = rng.uniform(0.3, 0.6)
    out = []
    for offset in range(days):
        day = START + timedelta(days=offset)
        weekend = day.weekday() >= 5
        sessions = 0 if rng.random() < 0.05 else max(0, round(rng.gauss(rate + weekend, 0.7)))
        energy = sum(per_session * rng.lognormvariate(0, 0.25) for _ in range(sessions))
        morning = sum(1 for _ in range(sessions) if rng.random() < 0.45)
        out.append(
            StoveDay(
                stove=stove,
                day=day,
                sessions=sessions,
                energy=round(energy, 4),
                cooking_minutes=sum(rng.gauss(42, 8) for _ in range(sessions)),
                morning_sessions=morning,
                evening_sessions=sessions - morning,
                meter_delta=round(energy * rng.gauss(1.0, 0.01), 4),
            )
        )
    return out


def programme(size: int = 200, seed: int = 7) -> dict[str, list[StoveDay]]:
    rng = random.Random(seed)
    return {f"stove-{n:03d}": household(f"stove-{n:03d}", rng) for n in range(size)}


def kinds(findings: list, stove: str) -> set[str]:
    return {f.kind for f in findings if f.stove == stove}


def test_a_tampered_meter_and_a_cloned_stove_are_flagged_and_normal_households_are_not() -> None:
    stoves = programme()
    # Tampered: the sessions are inflated 2.5x, the cumulative register still tells the truth.
    stoves["stove-010"] = [d._replace(energy=round(d.energy * 2.5, 4)) for d in stoves["stove-010"]]
    # Cloned: a second stove id replays stove-020's days, to be paid twice.
    stoves["stove-clone"] = [d._replace(stove="stove-clone") for d in stoves["stove-020"]]
    findings = assess(d for days in stoves.values() for d in days)

    tampered = [f for f in findings if f.stove == "stove-010" and f.kind == "tampered"]
    assert tampered, findings
    assert "more than its cumulative meter" in tampered[0].explanation

    clone = [f for f in findings if f.stove == "stove-clone" and f.kind == "cloned"]
    assert clone and "stove-020" in clone[0].explanation
    assert "cloned" in kinds(findings, "stove-020")  # both are sent for review

    planted = {"stove-010", "stove-020", "stove-clone"}
    serious = [f for f in findings if f.stove not in planted and f.kind != "unusual"]
    assert serious == []
    assert kinds(findings, "stove-007") == set()
    unusual = {f.stove for f in findings if f.stove not in planted}
    assert len(unusual) <= 2, [f.explanation for f in findings if f.stove in unusual]


def test_a_broken_register_is_explained() -> None:
    rng = random.Random(3)
    days = household("stove-x", rng)
    stuck = [
        d._replace(meter_delta=0.0) if 5 <= i < 9 and d.sessions else d for i, d in enumerate(days)
    ]
    stuck = [d._replace(sessions=max(d.sessions, 1)) for d in stuck]
    backwards = [d._replace(meter_delta=-1.5) if i == 12 else d for i, d in enumerate(stuck)]
    findings = assess(backwards)
    explanations = [f.explanation for f in findings if f.kind == "broken"]
    assert any("went backwards on 2026-10-13" in e for e in explanations), findings
    assert any("the meter did not move" in e for e in explanations), findings


def test_a_frozen_series_is_flagged() -> None:
    days = [
        StoveDay("stove-f", START + timedelta(days=i), 2, 0.9, 80, 1, 1, 0.9) for i in range(12)
    ]
    findings = assess(days)
    assert [f.kind for f in findings] == ["broken"]
    assert "exactly the same energy (0.9) on 12 days" in findings[0].explanation


def test_too_little_data_is_not_judged() -> None:
    days = household("stove-short", random.Random(1), days=4)
    inflated = [d._replace(energy=d.energy * 3) for d in days]
    assert [f for f in assess(inflated) if f.kind != "broken"] == []


def test_thresholds_are_settings() -> None:
    stoves = programme(size=40, seed=11)
    stoves["stove-005"] = [d._replace(energy=round(d.energy * 1.3, 4)) for d in stoves["stove-005"]]
    every = [d for days in stoves.values() for d in days]
    assert "tampered" in kinds(assess(every), "stove-005")
    lenient = PlausibilityRules(meter_tolerance=0.5)
    assert "tampered" not in kinds(assess(every, lenient), "stove-005")


def _shared_days_one_by_one(
    by_stove: dict[str, list[StoveDay]], least: float = 1
) -> list[tuple[tuple[str, str], int]]:
    """The pairs of shared days as the rule counted them before arrays: tuples in a
    Counter, in the order first met (the reference the array count must equal)."""
    buckets: dict[tuple[date, int, float], list[str]] = defaultdict(list)
    for stove, days in by_stove.items():
        for d in days:
            if d.sessions:
                buckets[(d.day, d.sessions, round(d.energy, 3))].append(stove)
    shared: Counter[tuple[str, str]] = Counter()
    for stoves in buckets.values():
        if 1 < len(stoves) <= MAX_BUCKET:
            shared.update(combinations(sorted(set(stoves)), 2))
    return [(pair, same) for pair, same in shared.items() if same >= least]


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([f"s{n:02d}" for n in range(60)]),
            st.integers(0, 6),
            st.integers(0, 3),
            st.sampled_from([0.5, 0.5004, 0.5006, 1.0, 1.25, 0.0]),
        ),
        max_size=400,
    )
)
def test_shared_days_are_counted_as_one_by_one_in_the_same_order(
    readings: list[tuple[str, int, int, float]],
) -> None:
    """Buckets large and small (over MAX_BUCKET too), a stove's day repeated, days with no
    session: the same pairs, counts and order."""
    by_stove: dict[str, list[StoveDay]] = defaultdict(list)
    for stove, offset, sessions, energy in readings:
        day = START + timedelta(days=offset)
        by_stove[stove].append(StoveDay(stove, day, sessions, energy, 0.0, 0, 0))
    assert shared_days(by_stove) == _shared_days_one_by_one(by_stove)
    assert shared_days(by_stove, 2.5) == _shared_days_one_by_one(by_stove, 2.5)


def test_a_bucket_of_more_than_fifty_stove_days_is_a_common_value() -> None:
    day = [StoveDay(f"s{n:02d}", START, 2, 1.0, 0.0, 0, 0) for n in range(MAX_BUCKET + 1)]
    by_stove = {d.stove: [d] for d in day}
    assert shared_days(by_stove) == []
    del by_stove["s50"]
    assert len(shared_days(by_stove)) == MAX_BUCKET * (MAX_BUCKET - 1) // 2


def _profile_day_by_day(stove: str, days: list[StoveDay]) -> Profile:
    """The profile as it was computed before columns (the reference)."""
    sessions = sum(d.sessions for d in days)
    per_session = sessions or 1
    return Profile(
        stove=stove,
        days=len(days),
        active_days=sum(1 for d in days if d.sessions),
        sessions_per_day=sessions / max(len(days), 1),
        energy_per_session=sum(d.energy for d in days) / per_session,
        minutes_per_session=sum(d.cooking_minutes for d in days) / per_session,
        morning_share=sum(d.morning_sessions for d in days) / per_session,
        evening_share=sum(d.evening_sessions for d in days) / per_session,
    )


def _register_day_by_day(days: list[StoveDay], rules: PlausibilityRules) -> tuple[Any, ...]:
    """What the register rule read before columns: the days that went back, the longest
    stuck run, and the sessions' and the register's sums."""
    metered = [d for d in days if d.meter_delta is not None]
    backwards = [d for d in metered if d.meter_delta is not None and d.meter_delta < 0]
    stuck = run_length(d.sessions > 0 and d.meter_delta == 0 for d in metered)
    reported = sum(d.energy for d in metered)
    register = sum(d.meter_delta or 0.0 for d in metered if (d.meter_delta or 0.0) > 0)
    return backwards, stuck, reported, register


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 9),
            st.sampled_from([0.0, 0.5, 0.50001, 1.2, 3.0]),
            st.one_of(st.none(), st.sampled_from([0.0, -0.0, -0.3, 0.5, 1.2, float("nan")])),
            st.floats(0, 300),
        ),
        max_size=40,
    )
)
def test_the_rules_over_columns_read_what_they_read_day_by_day(
    figures: list[tuple[int, float, float | None, float]],
) -> None:
    """Profiles, the register rule and the frozen rule over columns give the findings and
    figures the day-by-day reading gave, NaN, -0.0 and missing registers included."""
    days = [
        StoveDay("s", START + timedelta(days=n), sessions, energy, minutes, 1, 1, delta)
        for n, (sessions, energy, delta, minutes) in enumerate(figures)
    ]
    rules = PlausibilityRules(min_days=1, stuck_days=2, frozen_days=3)
    assert repr(profile("s", days)) == repr(_profile_day_by_day("s", days))
    backwards, stuck, reported, register = _register_day_by_day(days, rules)
    columns = DayColumns.of([days])
    made = columns.sums() if columns is not None else None
    for sums in (day_sums(days), *(made or [])):  # one by one, and over the columns
        assert repr(sums) == repr(day_sums(days))
        found = {f.explanation: f for f in _register_findings("s", days, sums, rules)}
        assert any("backwards" in e for e in found) == bool(backwards)
        assert any("did not move" in e for e in found) == (stuck >= rules.stuck_days)
        tampered = [f for f in found.values() if f.kind == "tampered"]
        assert bool(tampered) == (
            len([d for d in days if d.meter_delta is not None]) >= rules.min_days
            and register > 0
            and abs(reported - register) > rules.meter_tolerance * register
        )
        if tampered:
            assert tampered[0].evidence == {
                "reported": round(reported, 6),
                "meter": round(register, 6),
            }
    values = [round(d.energy, 4) for d in days]
    longest = run_length(
        value > 0 and index > 0 and value == values[index - 1] for index, value in enumerate(values)
    )
    assert bool(_frozen_findings("s", days, rules)) == (longest + 1 >= rules.frozen_days)
