"""The claims benchmark gives every claim a (stove, calendar month) of its own
(bench/claims.py MonthSlots), because the claim protocol counts one claim per stove and
month: seeded claims from last month back, wrk submissions in an older range that never
meets the seeds', and a run that cannot fit fails before it starts."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from bench.claims import MonthSlots, OutOfMonths, month_index, month_period


def test_a_month_period_covers_one_whole_calendar_month() -> None:
    assert month_period(month_index(2026, 10)) == {
        "periodStart": "2026-10-01T00:00:00Z",
        "periodEnd": "2026-11-01T00:00:00Z",
    }
    assert month_period(month_index(2025, 12)) == {
        "periodStart": "2025-12-01T00:00:00Z",
        "periodEnd": "2026-01-01T00:00:00Z",
    }
    assert month_period(month_index(1000, 1))["periodStart"] == "1000-01-01T00:00:00Z"


def test_seeds_start_last_month_on_each_stove_in_turn_then_go_back() -> None:
    slots = MonthSlots.before(datetime(2026, 11, 23, 16, 0, tzinfo=UTC), assets=3)
    last = month_index(2026, 10)
    assert [slots.seed(n) for n in range(7)] == [
        (0, last),
        (1, last),
        (2, last),
        (0, last - 1),
        (1, last - 1),
        (2, last - 1),
        (0, last - 2),
    ]
    # January: last month is December of the year before
    january = MonthSlots.before(datetime(2027, 1, 1, tzinfo=UTC), assets=1)
    assert month_period(january.seed(0)[1])["periodStart"] == "2026-12-01T00:00:00Z"


def test_no_two_claims_share_a_stove_month() -> None:
    slots = MonthSlots.before(datetime(2026, 11, 23, tzinfo=UTC), assets=7)
    seeds = [slots.seed(n) for n in range(slots.seed_capacity)]
    submissions = [slots.submission(i) for i in range(5000)]
    assert len(set(seeds)) == len(seeds)
    assert len(set(submissions)) == len(submissions)
    assert not set(seeds) & set(submissions)
    assert max(m for _, m in submissions) < min(m for _, m in seeds)
    assert min(m for _, m in seeds) == month_index(1900, 1)


def test_the_lua_scripts_slot_formula_matches() -> None:
    """claims_writes.lua: slot = base + (n - 1) * threads + (thread - 1), stove on line
    slot % #assets + 1, month floor(slot / #assets) months before BENCH_MONTH_TOP."""
    slots = MonthSlots.before(datetime(2026, 11, 23, tzinfo=UTC), assets=5)
    threads, base, seen = 3, 40, set()
    for thread in range(1, threads + 1):
        for n in range(1, 20):
            slot = base + (n - 1) * threads + (thread - 1)
            lua = (slot % 5, slots.submission_top - slot // 5)
            assert lua == slots.submission(slot)
            seen.add(lua)
    assert len(seen) == threads * 19


def test_a_run_that_does_not_fit_fails_early_with_what_to_change() -> None:
    slots = MonthSlots.before(datetime(2026, 11, 23, tzinfo=UTC), assets=10)
    slots.check_seeds(slots.seed_capacity - 2)  # + the smoke test's two
    with pytest.raises(OutOfMonths, match="--assets"):
        slots.check_seeds(slots.seed_capacity)
    with pytest.raises(OutOfMonths):
        slots.seed(slots.seed_capacity)
    with pytest.raises(OutOfMonths):
        slots.submission(slots.submission_capacity)
