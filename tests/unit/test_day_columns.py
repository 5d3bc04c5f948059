"""The period's columns give what the day-by-day code gives, to the last bit: Python's round,
each stove's inputs digest, the stoves with a repeated day; and odd figures (an int energy, a
NaN) leave the decision to the day-by-day code."""

from __future__ import annotations

import math
import random
from datetime import date, timedelta
from itertools import pairwise

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from twinhub.mrv.day_columns import DayColumns, day_sums, python_round
from twinhub.mrv.periods import inputs_digest, inputs_digests
from twinhub.mrv.plausibility import (
    PlausibilityRules,
    StoveDay,
    _frozen_findings,
    _repeating,
    assess,
)

START = date(2026, 9, 1)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=50),
    st.integers(0, 8),
)
def test_python_round_is_round(values: list[float], digits: int) -> None:
    found = python_round(np.array(values, dtype=np.float64), digits).tolist()
    for value, got in zip(values, found, strict=True):
        wanted = round(value, digits)
        assert (math.isnan(wanted) and math.isnan(got)) or repr(got) == repr(wanted), value


def test_python_round_near_halves_and_on_them() -> None:
    """Decimal halves (0.0005, 2.675, 1.0000005: below or above in binary) and the values
    next to them, where a product's rounding could tip numpy's way."""
    rng = random.Random(3)
    values = []
    for digits in (3, 4, 6):
        for _ in range(2000):
            half = (rng.randrange(0, 10 ** rng.choice([3, 7, 12])) + 0.5) / 10**digits
            values += [half, math.nextafter(half, 0), math.nextafter(half, 1)]
        found = python_round(np.array(values), digits).tolist()
        assert [repr(v) for v in found] == [repr(round(v, digits)) for v in values]


def _stove(name: str, rng: random.Random, days: int, shuffled: bool = False) -> list[StoveDay]:
    out = [
        StoveDay(
            name,
            START + timedelta(days=d),
            rng.randrange(0, 4),
            round(rng.uniform(0, 3), rng.choice([3, 7, 12])),
            0.0,
            0,
            0,
            rng.choice([None, rng.uniform(0, 3)]),
        )
        for d in range(days)
    ]
    if shuffled:
        rng.shuffle(out)
    return out


def test_each_stoves_digest_is_its_own_digest() -> None:
    """Days in order and out of it, stoves with no days, the same day twice."""
    rng = random.Random(5)
    groups = [_stove(f"s{n}", rng, rng.randrange(0, 12), shuffled=n % 3 == 0) for n in range(60)]
    groups.append([*groups[1], *groups[1]])
    assert inputs_digests(groups) == [inputs_digest(days) for days in groups]


def test_odd_figures_are_left_to_the_day_by_day_code() -> None:
    """An int energy is written as an int (round keeps it one); a NaN is not a number the
    columns may group: neither becomes columns, and the digests are still each stove's."""
    day = StoveDay("s", START, 1, 2, 0.0, 0, 0, None)
    assert DayColumns.of([[day]]) is None
    nan = day._replace(energy=float("nan"))
    assert DayColumns.of([[nan]]) is None
    assert inputs_digests([[day], [nan]]) == [inputs_digest([day]), inputs_digest([nan])]


def test_the_stoves_with_a_repeated_day_are_those_the_rule_searches() -> None:
    rng = random.Random(11)
    groups = [_stove(f"s{n:02d}", rng, 20) for n in range(40)]
    frozen = [d._replace(energy=1.25) for d in groups[7]]
    groups[7] = frozen
    groups[9][4] = groups[9][4]._replace(energy=groups[9][3].energy)  # one repeat
    found = set(_repeating(DayColumns.of(groups)).tolist())  # type: ignore[arg-type]
    wanted = {
        n
        for n, days in enumerate(groups)
        if any(round(a.energy, 4) == round(b.energy, 4) for a, b in pairwise(days))
    }
    assert found == wanted and {7, 9} <= found
    assert _frozen_findings("s07", frozen, PlausibilityRules())  # twenty days of 1.25
    flagged = {f.stove for f in assess(d for days in groups for d in days) if f.kind == "broken"}
    assert "s07" in flagged


def _odd_day(name: str, day: int, sessions: int, energy: float, delta: float | None) -> StoveDay:
    return StoveDay(name, START + timedelta(days=day), sessions, energy, 0.0, 0, 0, delta)


FIGURES = st.sampled_from([0.0, -0.0, 0.1, 0.2, 0.7, 1e-9, 3.3, 1e16, -2.5, 12.345678])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(
                st.integers(0, 40),
                st.integers(-2, 9),
                FIGURES | st.floats(-1e6, 1e6),
                st.none() | FIGURES | st.floats(allow_infinity=True, allow_nan=True),
            ),
            max_size=35,
        ),
        max_size=12,
    )
)
@example([[(0, 1, 0.0, None), (0, 1, -0.0, None)]])  # max() keeps the first zero
def test_the_columns_sums_are_each_stoves_sums(
    stoves: list[list[tuple[int, int, float, float | None]]],
) -> None:
    """Sums in the days' order to the last bit (Python's sum from 0, not pairwise), counts,
    extremes, the most energy a session, the register's positive rises (0 when none):
    days in any order, twice, negative, zero and NaN rises, stoves with no days."""
    groups = [[_odd_day(f"s{n}", *day) for day in days] for n, days in enumerate(stoves)]
    columns = DayColumns.of(groups)
    assert columns is not None
    found = columns.sums()
    assert found is not None
    assert repr(found) == repr([day_sums(days) for days in groups])


def test_a_sum_in_order_is_not_a_pairwise_sum() -> None:
    """The figures where numpy's pairwise sum and Python's sum() differ: the columns give
    Python's."""
    days = [_odd_day("s", d, 1, value, None) for d, value in enumerate([1e16, *[1.0] * 20])]
    found = DayColumns.of([days]).sums()  # type: ignore[union-attr]
    assert found is not None
    assert found[0].energy == sum(d.energy for d in days) != float(np.sum([d.energy for d in days]))
