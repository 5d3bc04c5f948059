"""A chunk of stoves' day rollups made into their days at once: what `rollups._days` and
`meter.register_rise` find stove by stove, found by a few array operations over every
stove-day of the chunk (a monitoring period of 10,000 stoves is 300,000 of them).

Only what arrays can decide exactly is decided here. A stove whose register days are all
plain (no reset declared, never below the day before's highest reading, within the
register's range and the methodology's daily rate, finite, in strictly ascending day
order) rises each day by the day's highest reading less the one before (the first day: its
highest less its lowest), with no events: the day-by-day rules give exactly that for such
a register, and numpy's float64 difference is Python's. Any other stove, every stove under
1.0.0's sessions measure, is left (None) to the day-by-day code, which stays the reference
(given the same rows the driver's tuples gave it: `day_rows`);
tests/unit/test_rollup_columns.py checks the two agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from functools import lru_cache, partial
from itertools import repeat
from typing import Any, NamedTuple

import numpy as np

from twinhub.mrv.day_columns import ChunkDays, DaySource
from twinhub.mrv.plausibility import StoveDay

# A chunk's stoves: per stove its unit, its days, its register events and where its days lie
# among the chunk's columns (None: their days are not all dates); None: read day by day
# (rollups._days).
Figured = tuple[str, list[StoveDay], tuple[str, ...], DaySource | None] | None
_make_day = partial(tuple.__new__, StoveDay)  # a named tuple made in C (rollups._days)


@lru_cache(maxsize=4096)
def day_of(text: str) -> date:
    """A day from its text as the driver gives it (a period's thirty, many times): its ISO
    text, or a time's whose first ten characters are the day (SQLite's bucket text)."""
    return date.fromisoformat(text[:10])


class RollupColumns(NamedTuple):
    """A chunk of stoves' day rollups as columns, as the database layer decodes them
    (db.dialects.pivot_wide): the scopes (stoves) with days, in order; where each one's
    days start (the total last); each day's text (day_of) or date; and per rollup column of
    DayRow's layout after the day (rollups.DAY_COLUMNS) its float64 values and whether the
    day's row has that field."""

    scopes: list[str]
    starts: list[int]
    days: Sequence[Any]
    values: list[np.ndarray]
    present: list[np.ndarray]


def day_rows(columns: RollupColumns, counts: Sequence[bool]) -> list[list[tuple[Any, ...]]]:
    """Each scope's days as DayRow tuples (the day, then each column's value: an int where
    `counts` says the column is a count, None where the row has no such field): what the
    day-by-day code reads."""
    made: list[list[Any]] = []
    for values, present, count in zip(columns.values, columns.present, counts, strict=True):
        with np.errstate(invalid="ignore"):
            found = (values.astype(np.int64) if count else values).tolist()
        for index in np.flatnonzero(~present).tolist():
            found[index] = None
        made.append(found)
    rows = list(zip(columns.days, *made, strict=True))
    edges = columns.starts
    return [rows[edges[n] : edges[n + 1]] for n in range(len(columns.scopes))]


def chunk_days(
    columns: RollupColumns,
    declared: Sequence[str | None],
    tops: Sequence[float | None],
    max_per_day: float | None,
) -> list[Figured]:
    """Each scope's unit, days and register events from its rollups, for stoves whose unit
    is `declared` (kg by their fuelType, else None: their telemetry decides, as
    rollups._unit), with register range `tops` (None: no registerMax), under the meter
    measure with the methodology's daily rate `max_per_day`; None for a scope the arrays
    leave to the day-by-day code."""
    scopes, edges, when, values, present = columns
    found: list[Figured] = [None] * len(scopes)
    if not len(when) or len(values) != len(StoveDay._fields) - 1:
        return found
    sessions, energy, fuel, count, low, high, resets = values
    has_sessions, has_energy, has_fuel, has_count, has_low, has_high, has_resets = present
    kinds = set(map(type, when))
    if kinds == {str}:
        days: list[Any] = list(map(day_of, when))
    elif all(issubclass(kind, date) for kind in kinds):
        days = list(when)
    else:
        days = [day if type(day) is not str else day_of(day) for day in when]
    starts = np.array(edges, dtype=np.int64)
    sizes = np.diff(starts)
    group = np.repeat(np.arange(len(scopes)), sizes)
    bad = np.zeros(len(scopes), dtype=bool)
    # Days out of order (or twice): the reference sorts and keys by day.
    ordinal = np.fromiter(map(date.toordinal, days), dtype=np.int64, count=len(days))
    later = np.ones(len(days), dtype=bool)
    later[1:] = ordinal[1:] > ordinal[:-1]
    later[starts[:-1][sizes > 0]] = True
    bad[group[~later]] = True
    with np.errstate(invalid="ignore"):  # a count read as an int as the driver's rows read it
        on = has_count & (count.astype(np.int64) != 0)  # a register reading that day
        at = np.flatnonzero(on)
        owner = group[at]
        lows, highs = low[at], high[at]
        first = np.ones(len(at), dtype=bool)
        first[1:] = owner[1:] != owner[:-1]
        before = np.empty(len(at))
        before[1:] = highs[:-1]
        rise = np.where(first, highs - lows, highs - before)
        plain = (
            has_low[at]
            & has_high[at]
            & np.isfinite(lows)
            & np.isfinite(highs)
            & (~has_resets[at] | (resets[at].astype(np.int64) == 0))
            & (first | (lows >= before))
        )
        if max_per_day is not None:
            plain &= rise <= max_per_day
        top = np.array([np.nan if value is None else value for value in tops])[owner]
        plain &= np.isnan(top) | (highs <= top)
        counted_array = np.where(has_sessions, sessions.astype(np.int64), 0)
        counted = counted_array.tolist()
    bad[owner[~plain]] = True
    rises = np.full(len(days), np.nan)
    rises[at] = rise
    deltas: list[Any] = rises.tolist()
    for index in np.flatnonzero(~on).tolist():
        deltas[index] = None
    any_energy, any_fuel = _per_group(has_energy, starts), _per_group(has_fuel, starts)
    units = [
        unit if unit is not None else "kg" if fuel_seen and not energy_seen else "kWh"
        for unit, fuel_seen, energy_seen in zip(declared, any_fuel, any_energy, strict=True)
    ]
    # The figures as rollups._days writes them: a missing count 0, a missing or -0.0
    # quantity 0.0 (a NaN stays: `nan or 0.0` is nan), the fuel for a stove in kg.
    mass = np.repeat(np.array([unit == "kg" for unit in units], dtype=bool), sizes)
    chosen = np.where(mass, np.where(has_fuel, fuel, 0.0), np.where(has_energy, energy, 0.0))
    chosen += 0.0
    figures = chosen.tolist()
    chunk = (
        ChunkDays(days, counted, deltas, ordinal, counted_array, chosen, rises, on)
        if kinds <= {str, date}  # what the rules' columns take (DayColumns.of)
        else None
    )
    for n, (did, unit) in enumerate(zip(scopes, units, strict=True)):
        first_day, end = edges[n], edges[n + 1]
        if bad[n] or first_day == end:
            continue
        size = end - first_day
        made = list(
            map(
                _make_day,
                zip(
                    repeat(did, size),
                    days[first_day:end],
                    counted[first_day:end],
                    figures[first_day:end],
                    repeat(0.0, size),
                    repeat(0, size),
                    repeat(0, size),
                    deltas[first_day:end],
                    strict=True,
                ),
            )
        )
        source = DaySource(chunk, made, first_day, end, did) if chunk is not None else None
        found[n] = (unit, made, (), source)
    return found


def _per_group(per_day: np.ndarray, starts: np.ndarray) -> list[bool]:
    """Per group, whether any of its days holds."""
    running = np.zeros(len(per_day) + 1, dtype=np.int64)
    np.cumsum(per_day, out=running[1:])
    return ((running[starts[1:]] - running[starts[:-1]]) > 0).tolist()
