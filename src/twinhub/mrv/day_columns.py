"""A period's stove-days as columns: the figures the rules read of every day of every stove,
one numpy array a figure, so a rule over 300,000 stove-days is a few array operations.

The rules stay defined day by day (mrv.plausibility, mrv.periods); the columns only find
at once what the day-by-day code would find, and the figures they give are those of the
day-by-day code to the last bit: `python_round` is Python's round(), and a sum is taken in
the days' order, never pairwise. tests/unit/test_day_columns.py checks both against the
day-by-day code.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # mrv.plausibility imports this module
    from twinhub.mrv.plausibility import StoveDay

DAY_FIELDS = 8  # StoveDay's fields (mrv.plausibility)
TIE_WINDOW = 1e-6  # scaled values this close to a half are rounded by Python, one by one
EXACT_LIMIT = 2.0**52  # scaled values beyond this are rounded by Python too


def python_round(values: np.ndarray, digits: int) -> np.ndarray:
    """round(value, digits) of each value, as Python gives it. Python rounds the exact
    binary value to the nearest decimal of `digits` places (half to even) and gives the
    double nearest that decimal; numpy's rint(value * 10**digits) / 10**digits gives the
    same double whenever the product's own rounding cannot move it across a half (the
    quotient of two exact integers is correctly rounded), so only values near a half, and
    huge or non-finite ones, are rounded by Python itself."""
    values = np.asarray(values, dtype=np.float64)
    scale = 10.0**digits
    with np.errstate(all="ignore"):
        scaled = values * scale
        found = np.rint(scaled) / scale
        # The product is off the exact one by half a unit in its last place at most: a
        # window of a millionth and four such units around each half holds every doubt.
        window = TIE_WINDOW + np.abs(scaled) * 2.0**-50
        doubtful = ~(np.abs(scaled) < EXACT_LIMIT) | (
            np.abs(np.abs(scaled - np.floor(scaled)) - 0.5) <= window
        )
    for index in np.flatnonzero(doubtful).tolist():
        found[index] = round(float(values[index]), digits)
    return found


@dataclass(frozen=True)
class DayColumns:
    """Stove-days in groups (a group: one stove's days, in their order), as columns: where
    each group starts (`starts`, with the total as its last entry), and per day its
    ordinal day, sessions and energy as arrays; `fields` holds StoveDay's fields as
    tuples of the days' own values (what a digest writes)."""

    days: list[StoveDay]
    starts: np.ndarray
    ordinal: np.ndarray
    sessions: np.ndarray
    energy: np.ndarray
    fields: tuple[tuple[Any, ...], ...]

    @classmethod
    def of(cls, groups: Iterable[Sequence[StoveDay]]) -> DayColumns | None:
        """The columns of the groups' days; None when a figure is not a plain number (an
        int count, a finite float energy): the day-by-day code then decides alone."""
        groups = list(groups)
        sizes = np.fromiter(map(len, groups), dtype=np.int64, count=len(groups))
        starts = np.zeros(len(groups) + 1, dtype=np.int64)
        np.cumsum(sizes, out=starts[1:])
        days = list(chain.from_iterable(groups))
        if not days:
            whole = np.zeros(0, dtype=np.int64)
            return cls(days, starts, whole, whole, np.zeros(0), ((),) * DAY_FIELDS)
        fields = tuple(zip(*days, strict=True))
        _, when, sessions, energy, *_ = fields
        if not (set(map(type, when)) <= {date} and set(map(type, sessions)) <= {int}):
            return None
        if not set(map(type, energy)) <= {float}:  # round(an int) is an int: written "1"
            return None
        try:
            counts = np.array(sessions, dtype=np.int64)
        except OverflowError:
            return None
        figures = np.array(energy, dtype=np.float64)
        if not np.isfinite(figures).all():
            return None
        ordinal = np.fromiter(map(date.toordinal, when), dtype=np.int64, count=len(days))
        return cls(days, starts, ordinal, counts, figures, fields)

    def group_of_day(self) -> np.ndarray:
        """Each day's group number."""
        return np.repeat(np.arange(len(self.starts) - 1), np.diff(self.starts))

    def groups_where(self, per_day: np.ndarray) -> np.ndarray:
        """The groups with at least one day where `per_day` holds."""
        return np.unique(self.group_of_day()[per_day])

    def ascending(self) -> np.ndarray:
        """Per group, whether its days are in strictly ascending day order."""
        later = np.ones(len(self.days), dtype=bool)
        later[1:] = self.ordinal[1:] > self.ordinal[:-1]
        later[self.starts[:-1][np.diff(self.starts) > 0]] = True  # a group's first day
        fine = np.ones(len(self.starts) - 1, dtype=bool)
        fine[self.groups_where(~later)] = False
        return fine
