"""A chunk's days made by arrays (mrv.rollup_columns, through rollups.stove_periods) are the
day-by-day reference's (rollups.stove_period) to the last bit: every stove's unit, days,
register rises and events, over registers that rise plainly, fall, reset, roll over, jump
past the daily rate or read NaN, fields missing on some days, days out of order, fuel
stoves, stoves with no rollups; and the plain stoves are the ones the arrays decide."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from twinhub.mrv.day_columns import DayColumns, day_sums
from twinhub.mrv.meter import METER_READING, Reading
from twinhub.mrv.periods import assess_periods, inputs_digests
from twinhub.mrv.plausibility import PlausibilityRules, assess
from twinhub.mrv.rollup_columns import RollupColumns, chunk_days, day_of, day_rows
from twinhub.mrv.rollups import DAY_COLUMNS, stove_period, stove_periods

START = date(2026, 9, 1)
COUNTS = [aggregate == "count" for _, aggregate in DAY_COLUMNS]


def columns_of(rows: dict[str, list[tuple[Any, ...]]]) -> RollupColumns:
    """The columns db.dialects.pivot_wide gives for these DayRows (None: field absent)."""
    scopes = [scope for scope in sorted(rows) if rows[scope]]
    flat = [row for scope in scopes for row in rows[scope]]
    starts = [0]
    for scope in scopes:
        starts.append(starts[-1] + len(rows[scope]))
    values, present = [], []
    for c in range(len(DAY_COLUMNS)):
        cells = [row[c + 1] for row in flat]
        present.append(np.array([cell is not None for cell in cells], dtype=bool))
        values.append(np.array([np.nan if cell is None else cell for cell in cells], dtype=float))
    return RollupColumns(scopes, starts, [row[0] for row in flat], values, present)


def maybe(draw: st.DrawFn, value: Any, missing: float) -> Any:
    return None if draw(st.integers(1, 100)) <= missing * 100 else value


@st.composite
def stove_rows(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """One stove's DayRows: mostly a plain rising register, with the odd fault."""
    offsets = sorted(draw(st.sets(st.integers(0, 29), max_size=12)))
    if draw(st.integers(0, 9)) == 0 and offsets:  # out of order, or a day twice
        offsets.append(offsets[0])
    register = draw(st.floats(0, 99990))
    odd = draw(st.integers(0, 3)) == 0
    rows = []
    for offset in offsets:
        if odd and draw(st.integers(0, 3)) == 0:  # the register jumps between days
            register = draw(st.sampled_from([0.0, 5.0, 990.0, 2000.0, 99999.0]))
        low = register
        register += draw(st.floats(0, 30) if odd else st.floats(0, 3))
        if odd and draw(st.integers(0, 5)) == 0:
            low, register = draw(st.sampled_from([(low, -1.0), (float("nan"), register)]))
        if odd and draw(st.integers(0, 5)) == 0:
            register = register % 1000 if draw(st.booleans()) else register
        fuel = draw(st.booleans())
        rows.append(
            (
                (START + timedelta(days=offset)).isoformat(),
                maybe(draw, draw(st.integers(0, 30)), 0.2),
                None
                if fuel
                else maybe(draw, draw(st.sampled_from([0.0, -0.0, 1.5, 2.25, float("nan")])), 0.2),
                maybe(draw, draw(st.floats(0, 5)), 0.8) if fuel else None,
                maybe(draw, draw(st.integers(0, 3)), 0.1),
                low,
                register,
                maybe(draw, draw(st.integers(0, 1)) if odd else 0, 0.5),
            )
        )
    return rows


@st.composite
def stove_facts(draw: st.DrawFn) -> tuple[dict[str, Any], bool, str] | None:
    if draw(st.integers(0, 9)) == 0:
        return None
    properties: dict[str, Any] = {"householdSize": 4}
    top = draw(st.sampled_from([None, 99999.99, 1000.0, 0, "x"]))
    if top is not None:
        properties["meter"] = {"registerMax": top}
    fuel = draw(st.sampled_from([None, "electric", "LPG", "wood"]))
    if fuel is not None:
        properties["fuelType"] = fuel
    return properties, True, "active"


READINGS = [METER_READING, Reading(max_rise_per_day=30.0), Reading(measure="sessions")]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(stove_rows(), stove_facts()), min_size=1, max_size=8),
    st.sampled_from(READINGS),
)
def test_array_days_are_the_reference_days(
    stoves: list[tuple[list[tuple[Any, ...]], Any]], reading: Reading
) -> None:
    dids = [f"did:stove:{n}" for n in range(len(stoves))]
    rows = {did: days for did, (days, _) in zip(dids, stoves, strict=True)}
    facts = {did: found for did, (_, found) in zip(dids, stoves, strict=True) if found}
    enrolled = set(dids[::2])
    made = stove_periods(dids, facts, enrolled, columns_of(rows), reading)
    for did, period in zip(dids, made, strict=True):
        wanted = stove_period(did, facts.get(did), did in enrolled, rows[did], reading)
        assert repr(period) == repr(wanted)  # repr: a NaN figure equals itself


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(stove_rows(), stove_facts()), min_size=1, max_size=8),
    st.sampled_from(READINGS),
    st.randoms(use_true_random=False),
)
def test_the_chunks_columns_are_the_days_columns(
    stoves: list[tuple[list[tuple[Any, ...]], Any]], reading: Reading, rng: Any
) -> None:
    """The rules read a chunk's columns (the periods' `source`) where the arrays made the
    days: the columns, digests and findings are those of the days themselves, periods
    given in any order, twice, or with other days."""
    dids = [f"did:stove:{n}" for n in range(len(stoves))]
    rows = {did: days for did, (days, _) in zip(dids, stoves, strict=True)}
    facts = {did: found for did, (_, found) in zip(dids, stoves, strict=True) if found}
    made = stove_periods(dids, facts, set(dids), columns_of(rows), reading)
    rng.shuffle(made)
    if rng.random() < 0.2:
        made.append(made[0])  # a stove twice: read from its days
    groups = [p.days for p in made]
    sources = [p.source for p in made]
    joined, plain = DayColumns.of(groups, sources), DayColumns.of(groups)
    assert (joined is None) == (plain is None)
    if joined is not None and plain is not None:
        for name in ("starts", "ordinal", "sessions", "energy"):
            assert getattr(joined, name).tolist() == getattr(plain, name).tolist(), name
        for name in ("stoves", "dates", "counts", "deltas"):
            assert repr(list(getattr(joined, name))) == repr(list(getattr(plain, name))), name
        wanted_sums = repr([day_sums(days) for days in groups])
        assert repr(joined.sums()) == repr(plain.sums()) == wanted_sums
    assert inputs_digests(groups, sources) == inputs_digests(groups)
    rules = PlausibilityRules(min_days=2, stuck_days=2, frozen_days=2)
    wanted = assess((day for p in made for day in p.days), rules)
    assert repr(assess_periods(made, rules)) == repr(wanted)


def test_the_driver_rows_are_the_rows_the_columns_came_from() -> None:
    rows = {
        "did:a": [
            ("2026-09-01", 3, 1.5, None, 2, 10.0, 11.0, None),
            ("2026-09-02", None, None, None, None, None, None, 1),
        ],
        "did:b": [("2026-09-01", 0, None, 0.5, 0, 0.0, 0.0, 0)],
    }
    assert day_rows(columns_of(rows), COUNTS) == [rows["did:a"], rows["did:b"]]


def test_a_day_is_read_from_its_text_or_a_times() -> None:
    """SQLite gives a bucket's whole text (its first ten characters are the day)."""
    assert day_of("2026-09-01") == day_of("2026-09-01 00:00:00.000000") == date(2026, 9, 1)


def test_plain_registers_are_decided_by_the_arrays() -> None:
    rows = {
        f"did:{n}": [
            (
                (START + timedelta(days=d)).isoformat(),
                2,
                1.0,
                None,
                3,
                100.0 * n + d,
                100.0 * n + d + 1.0,
                0,
            )
            for d in range(30)
        ]
        for n in range(20)
    }
    rows["did:5"][7] = (*rows["did:5"][7][:7], 1)  # a declared reset: the reference reads it
    found = chunk_days(columns_of(rows), [None] * 20, [99999.99] * 20, 30.0)
    decided = [scope for scope, made in zip(sorted(rows), found, strict=True) if made is not None]
    assert decided == [scope for scope in sorted(rows) if scope != "did:5"]
    unit, days, events, source = found[0]
    assert (unit, events) == ("kWh", ())
    assert source is not None and source.days is days
    assert [day.meter_delta for day in days] == [1.0] + [1.0] * 29
