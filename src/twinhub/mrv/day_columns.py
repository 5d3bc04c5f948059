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
from functools import lru_cache
from itertools import chain
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:  # mrv.plausibility imports this module
    from twinhub.mrv.plausibility import StoveDay

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
class ChunkDays:
    """A chunk's stove-days as columns, as mrv.rollup_columns makes the chunk's StoveDays
    from them: per day its date, sessions and register rise as the StoveDays hold them,
    and its ordinal day, sessions and energy as arrays. Kept with the periods made from
    them (`DaySource`), so the rules read the columns rather than transposing the
    StoveDays back into them."""

    dates: Sequence[date]
    counts: list[int]
    deltas: list[float | None]
    ordinal: np.ndarray
    sessions: np.ndarray
    energy: np.ndarray
    rise: np.ndarray  # the register's rise, NaN where `deltas` holds None
    metered: np.ndarray  # where `deltas` holds a rise


class DaySource(NamedTuple):
    """Where one stove's days lie among its chunk's columns: `days` (the list of StoveDays
    made from them, by identity: a period given other days has no source) are the
    columns' `first` to `end` days, of stove `stove`."""

    chunk: ChunkDays
    days: Sequence[StoveDay]
    first: int
    end: int
    stove: str


@dataclass(frozen=True)
class DayColumns:
    """Stove-days in groups (a group: one stove's days, in their order), as columns: where
    each group starts (`starts`, with the total as its last entry), and per day its
    ordinal day, sessions and energy as arrays, and its stove, date, sessions and register
    rise as the StoveDays hold them (what a digest writes)."""

    starts: np.ndarray
    ordinal: np.ndarray
    sessions: np.ndarray
    energy: np.ndarray
    stoves: Sequence[str]
    dates: Sequence[date]
    counts: Sequence[int]
    deltas: Sequence[float | None]
    rise: np.ndarray | None = None  # `deltas` as an array (NaN for None), when made
    metered: np.ndarray | None = None  # where `deltas` is not None, when made

    @classmethod
    def of(
        cls,
        groups: Iterable[Sequence[StoveDay]],
        sources: Sequence[DaySource | None] | None = None,
    ) -> DayColumns | None:
        """The columns of the groups' days; None when a figure is not a plain number (an
        int count, a finite float energy): the day-by-day code then decides alone.
        `sources` (one a group): where each group's days were made from a chunk's columns;
        when every group with days has its source, the columns are gathered from the
        chunks' (`_joined`), no StoveDay read."""
        groups = list(groups)
        if sources is not None:
            made, joined = _joined(groups, sources)
            if made:
                return joined
        sizes = np.fromiter(map(len, groups), dtype=np.int64, count=len(groups))
        starts = np.zeros(len(groups) + 1, dtype=np.int64)
        np.cumsum(sizes, out=starts[1:])
        days = list(chain.from_iterable(groups))
        if not days:
            whole = np.zeros(0, dtype=np.int64)
            return cls(starts, whole, whole, np.zeros(0), [], [], [], [])
        stoves, when, sessions, energy, *_, deltas = zip(*days, strict=True)
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
        return cls(starts, ordinal, counts, figures, stoves, when, sessions, deltas)

    def group_of_day(self) -> np.ndarray:
        """Each day's group number."""
        return np.repeat(np.arange(len(self.starts) - 1), np.diff(self.starts))

    def groups_where(self, per_day: np.ndarray) -> np.ndarray:
        """The groups with at least one day where `per_day` holds."""
        return np.unique(self.group_of_day()[per_day])

    def ascending(self) -> np.ndarray:
        """Per group, whether its days are in strictly ascending day order."""
        later = np.ones(len(self.ordinal), dtype=bool)
        later[1:] = self.ordinal[1:] > self.ordinal[:-1]
        later[self.starts[:-1][np.diff(self.starts) > 0]] = True  # a group's first day
        fine = np.ones(len(self.starts) - 1, dtype=bool)
        fine[self.groups_where(~later)] = False
        return fine

    def sums(self) -> list[DaySums] | None:
        """`day_sums` of each group, by array operations: a sum of floats taken in the
        days' order (numpy's cumulative sum over the groups padded to one width: a
        reduction would add pairwise), a count or an extreme at once. None when a rise is
        not a float (an int sums to an int) or the padding would outgrow the days."""
        sizes = np.diff(self.starts)
        groups, total = len(sizes), len(self.ordinal)
        width = int(sizes.max()) if groups else 0
        if groups * (width + 1) > 4 * total + 4096:
            return None
        rise, metered = self.rise, self.metered
        if rise is None or metered is None:
            if not set(map(type, self.deltas)) <= {float, type(None)}:
                return None
            metered = np.fromiter(
                (delta is not None for delta in self.deltas), dtype=bool, count=total
            )
            rise = np.array([np.nan if d is None else d for d in self.deltas], dtype=np.float64)
        if total and np.abs(self.sessions).max() >= 2**40:  # a sum of them could overflow
            return None
        group = self.group_of_day()
        place = np.arange(total) - self.starts[:-1][group] + 1  # after a leading 0.0

        def in_order(values: np.ndarray) -> np.ndarray:
            """Per group, 0 + its values in the days' order, as Python's sum() adds."""
            padded = np.zeros((groups, width + 1))
            padded[group, place] = values
            return np.cumsum(padded, axis=1)[:, -1]

        def per_group(values: np.ndarray) -> np.ndarray:
            running = np.zeros(total + 1, dtype=np.int64)
            np.cumsum(values, out=running[1:])
            return running[self.starts[1:]] - running[self.starts[:-1]]

        with np.errstate(all="ignore"):
            positive = rise > 0
            risen = in_order(np.where(positive, rise, 0.0)).tolist()
            any_rise = per_group(positive).tolist()
            energy = in_order(self.energy).tolist()
            metered_energy = in_order(np.where(metered, self.energy, 0.0)).tolist()
            odd = per_group(metered & ~(rise >= 0)).tolist()  # a fall, or NaN
            still = per_group(metered & (rise == 0)).tolist()
            shares = np.where(self.sessions != 0, self.energy / self.sessions, -np.inf)
        active = per_group(self.sessions != 0).tolist()
        sessions = per_group(self.sessions).tolist()
        read = per_group(metered).tolist()
        full = self.starts[:-1][sizes > 0]
        most = np.zeros(groups, dtype=np.int64)
        first = np.zeros(groups, dtype=np.int64)
        last = np.zeros(groups, dtype=np.int64)
        share = np.full(groups, -np.inf)
        if len(full):
            most[sizes > 0] = np.maximum.reduceat(self.sessions, full)
            first[sizes > 0] = np.minimum.reduceat(self.ordinal, full)
            last[sizes > 0] = np.maximum.reduceat(self.ordinal, full)
            share[sizes > 0] = np.maximum.reduceat(shares, full)
            _zero_signs_as_max_finds(share, shares, group)
        found: list[DaySums] = []
        for n, size in enumerate(sizes.tolist()):
            if not size:
                found.append(NO_DAYS)
                continue
            found.append(
                DaySums(
                    size,
                    _day(int(first[n])),
                    _day(int(last[n])),
                    active[n],
                    int(most[n]),
                    sessions[n],
                    energy[n],
                    float(share[n]) if active[n] else None,
                    read[n],
                    risen[n] if any_rise[n] else 0,
                    metered_energy[n] if read[n] else 0,
                    bool(odd[n]),
                    bool(still[n]),
                )
            )
        return found


def _zero_signs_as_max_finds(share: np.ndarray, shares: np.ndarray, group: np.ndarray) -> None:
    """Where a group's largest share is a zero, the zero Python's max() keeps: the group's
    first (max replaces only on strictly greater), whose sign numpy's reduction may not
    keep (0.0 and -0.0 are equal, but not alike in a report)."""
    zeros = np.flatnonzero(shares == 0)
    if not len(zeros):
        return
    groups, first = np.unique(group[zeros], return_index=True)  # zeros are in day order
    at_zero = share[groups] == 0
    share[groups[at_zero]] = shares[zeros[first][at_zero]]


def _joined(
    groups: list[Sequence[StoveDay]], sources: Sequence[DaySource | None]
) -> tuple[bool, DayColumns | None]:
    """Whether every group with days was made from a chunk's columns (its source's days
    are the group), and then `DayColumns.of` the groups gathered from them: a slice of
    each chunk's lists a group, one numpy gather an array."""
    chunks: dict[int, tuple[ChunkDays, int]] = {}
    total = 0
    firsts: list[int] = []
    sizes: list[int] = []
    stoves: list[str] = []
    dates: list[date] = []
    counts: list[int] = []
    deltas: list[float | None] = []
    for days, source in zip(groups, sources, strict=True):
        if not days:
            firsts.append(0)
            sizes.append(0)
            continue
        if source is None or source.days is not days or len(days) != source.end - source.first:
            return False, None
        chunk, first, end = source.chunk, source.first, source.end
        found = chunks.get(id(chunk))
        if found is None:
            found = chunks[id(chunk)] = (chunk, total)
            total += len(chunk.ordinal)
        firsts.append(found[1] + first)
        sizes.append(end - first)
        stoves += [source.stove] * (end - first)
        dates += chunk.dates[first:end]
        counts += chunk.counts[first:end]
        deltas += chunk.deltas[first:end]
    starts = np.zeros(len(groups) + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    if not chunks:
        whole = np.zeros(0, dtype=np.int64)
        return True, DayColumns(starts, whole, whole, np.zeros(0), [], [], [], [])
    at = np.repeat(np.array(firsts, dtype=np.int64) - starts[:-1], sizes) + np.arange(starts[-1])
    parts = [chunk for chunk, _ in chunks.values()]
    energy = np.concatenate([chunk.energy for chunk in parts])[at]
    if not np.isfinite(energy).all():  # as `of` decides
        return True, None
    return True, DayColumns(
        starts,
        np.concatenate([chunk.ordinal for chunk in parts])[at],
        np.concatenate([chunk.sessions for chunk in parts])[at],
        energy,
        stoves,
        dates,
        counts,
        deltas,
        np.concatenate([chunk.rise for chunk in parts])[at],
        np.concatenate([chunk.metered for chunk in parts])[at],
    )


class DaySums(NamedTuple):
    """What a period's rules read of one stove's days at once (mrv.periods): how many days,
    the first and last, the days with sessions, the most sessions a day, the sessions, the
    energy (summed in the days' order, from 0: Python's sum()), the most energy a session
    on a day with sessions (a NaN share left out; None: no such day), the days with a
    register rise, the positive rises and the energy of the days with a rise, summed as
    the energy (0 when none), and whether a rise is below 0 or NaN, or 0."""

    days: int
    first: date | None
    last: date | None
    active: int
    most: int
    sessions: int
    energy: float | int
    per_session: float | None
    read: int
    register: float | int
    metered_energy: float | int
    odd_rise: bool
    zero_rise: bool


NO_DAYS = DaySums(0, None, None, 0, 0, 0, 0, None, 0, 0, 0, False, False)
_day = lru_cache(maxsize=4096)(date.fromordinal)  # a period's thirty days, many times


def day_sums(days: Sequence[StoveDay]) -> DaySums:
    """One stove's DaySums from its days, one by one: the reference of DayColumns.sums."""
    if not days:
        return NO_DAYS
    _, dates, counts, energies, _, _, _, deltas = zip(*days, strict=True)
    shares = [e / c for c, e in zip(counts, energies, strict=True) if c]
    shares = [share for share in shares if share == share]  # not NaN
    shown = [delta for delta in deltas if delta is not None]
    return DaySums(
        len(days),
        min(dates),
        max(dates),
        sum(map(bool, counts)),
        max(counts),
        sum(counts),
        sum(energies),
        max(shares) if shares else None,
        len(deltas) - deltas.count(None),
        sum([delta for delta in shown if delta > 0]),
        sum([day.energy for day in days if day.meter_delta is not None]),
        any(not delta >= 0 for delta in shown),
        any(delta == 0 for delta in shown),
    )
