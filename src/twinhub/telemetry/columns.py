"""A batch's rollup cells computed column-wise (numpy), for the write path.

`batch_columns` gives the same cells as `rows.add_cells` (hour, day and month of each
numeric field, and each counted enum value), as columns rather than a dict of cells: the
store hands them to the database as arrays (PostgreSQL) or rows (SQLite) without building
a Python object per cell. A large batch is summed with numpy over the whole batch (the
readings' times and each field's values taken out once, grouped by hour with
np.unique/np.bincount); a small one through add_cells, which costs less below
COLUMN_READINGS readings than numpy's fixed cost per call. A group commit's batches
(MQTT: many devices' few readings) are summed together in one numpy pass
(`group_columns`), each batch's cells still its own, and a scope fed by several batches
gets their cells added up column-wise (`merge_columns`). Either way the figures are those
of add_cells bit for bit: the sums are taken in the same order (readings in batch order
into hours, hours in order of first appearance into days, days likewise into months), and
tests/integration/telemetry/test_telemetry_columns.py checks the two against each other on
generated batches.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter
from typing import Any

import numpy as np
from numpy.typing import NDArray

from twinhub.mrv.rollups import counted_field
from twinhub.mrv.telemetry_schema import Reading
from twinhub.telemetry.rows import FIELD_LENGTH, Cells, add_cells

_time = attrgetter("time")

COLUMN_READINGS = 128  # from this many readings on, a batch is summed with numpy (the break-even)
INTERVAL_CODES = {"day": 0, "hour": 1, "month": 2}  # in the names' sort order
INTERVAL_NAMES = ("day", "hour", "month")
Part = tuple[Sequence[Reading], Sequence[str], Sequence[str]]  # readings, numeric, counted


@dataclass
class CellColumns:
    """Rollup cells as columns, one entry per (interval, bucket, field): the interval's
    code (INTERVAL_CODES), the bucket's epoch second, the field's name, and the cell's
    count, sum, min and max."""

    interval: list[int] = field(default_factory=list)
    stamp: list[int] = field(default_factory=list)
    name: list[str] = field(default_factory=list)
    count: list[int] = field(default_factory=list)
    total: list[float] = field(default_factory=list)
    low: list[float] = field(default_factory=list)
    high: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.stamp)

    def extend(self, more: CellColumns) -> None:
        self.interval += more.interval
        self.stamp += more.stamp
        self.name += more.name
        self.count += more.count
        self.total += more.total
        self.low += more.low
        self.high += more.high

    def as_cells(self) -> Cells:
        """The same cells as add_cells' dict (what the tests compare)."""
        return {
            (INTERVAL_NAMES[i], s, f): [n, t, lo, hi]
            for i, s, f, n, t, lo, hi in zip(
                self.interval,
                self.stamp,
                self.name,
                self.count,
                self.total,
                self.low,
                self.high,
                strict=True,
            )
        }


def batch_columns(
    readings: Sequence[Reading], numeric: Sequence[str], counted: Sequence[str]
) -> CellColumns:
    """The rollup cells of a batch's readings (see the module docstring)."""
    if len(readings) < COLUMN_READINGS:
        return cells_as_columns(_python_cells(readings, numeric, counted))
    return _numpy_columns(readings, numeric, counted)


def _python_cells(
    readings: Sequence[Reading], numeric: Sequence[str], counted: Sequence[str]
) -> Cells:
    cells: Cells = {}
    add_cells(cells, readings, numeric, counted)
    return cells


def cells_as_columns(cells: Cells) -> CellColumns:
    out = CellColumns()
    codes = INTERVAL_CODES
    for (interval, stamp, name), (count, total, low, high) in cells.items():
        out.interval.append(codes[interval])
        out.stamp.append(stamp)
        out.name.append(name)
        out.count.append(int(count))
        out.total.append(total)
        out.low.append(low)
        out.high.append(high)
    return out


def group_columns(parts: Sequence[Part]) -> list[CellColumns]:
    """Each part's (a batch's readings, numeric and counted fields) cells, as batch_columns
    gives them, the group's parts summed together in one numpy pass once they hold
    COLUMN_READINGS readings (MQTT's groups: many devices' few readings each, where a
    pass per part would pay numpy's fixed cost, or add_cells' per reading, for each)."""
    if len(parts) == 1 or sum(len(readings) for readings, _, _ in parts) < COLUMN_READINGS:
        return [batch_columns(*part) for part in parts]
    return _numpy_parts(parts)


def _numpy_columns(
    readings: Sequence[Reading], numeric: Sequence[str], counted: Sequence[str]
) -> CellColumns:
    return _numpy_parts([(readings, numeric, counted)])[0]


def _numpy_parts(parts: Sequence[Part]) -> list[CellColumns]:
    """The parts' readings taken out once for all of them; every cell keyed by its part
    too (_PART_SHIFT), so each part's cells are its own, summed in its readings' order."""
    readings = [r for part, _, _ in parts for r in part]
    sizes = [len(part) for part, _, _ in parts]
    size = len(readings)
    # int(timestamp()) as add_cells takes it (truncated toward zero), then the hour.
    seconds = np.trunc(
        np.fromiter(map(datetime.timestamp, map(_time, readings)), np.float64, size)
    ).astype(np.int64)
    hours = seconds - seconds % 3600
    owner = np.repeat(np.arange(len(parts), dtype=np.int64), sizes)
    values = [r.values for r in readings]
    out = [CellColumns() for _ in parts]
    nan = float("nan")
    sent = set().union(*values)  # the fields some reading holds: the others have no cells
    numeric = dict.fromkeys(name for _, names, _ in parts for name in names if name in sent)
    for name in numeric:
        column = np.array([v.get(name, nan) for v in values], dtype=np.float64)
        present = ~np.isnan(column)  # a checked numeric value is finite: NaN is "absent"
        declared = [name in names for _, names, _ in parts]
        if not all(declared):  # a part whose protocol does not roll it up
            present &= np.repeat(np.array(declared), sizes)
        if present.all():
            _add_field(out, name, owner, hours, column)
        elif present.any():
            _add_field(out, name, owner[present], hours[present], column[present])
    counted = dict.fromkeys(name for _, _, names in parts for name in names if name in sent)
    for name in counted:
        kinds: dict[str, list[int]] = {}
        start = 0
        for (_, _, names), count in zip(parts, sizes, strict=True):
            if name in names:
                for index in range(start, start + count):
                    value = values[index].get(name)
                    if isinstance(value, str):
                        kinds.setdefault(value, []).append(index)
            start += count
        for value, where in kinds.items():
            label = counted_field(name, value)
            if len(label) > FIELD_LENGTH:
                continue
            at = np.array(where, dtype=np.intp)
            _add_field(out, label, owner[at], hours[at], np.ones(len(where), np.float64))
    return out


def merge_columns(parts: Sequence[CellColumns]) -> CellColumns:
    """The cells of several parts added up, one per (interval, bucket, field), in part
    order as rows.merge_cells adds them (a scope fed by several batches of a group),
    column-wise: no Python object per cell."""
    every = [name for part in parts for name in part.name]
    codes = {name: n for n, name in enumerate(dict.fromkeys(every))}  # first seen, first
    names = np.fromiter(map(codes.__getitem__, every), np.int64, len(every))

    def joined(column: str, kind: type) -> NDArray[Any]:
        return np.concatenate([np.asarray(getattr(part, column), dtype=kind) for part in parts])

    kinds, stamps = joined("interval", np.int64), joined("stamp", np.int64)
    keys = ((names * 3 + kinds) << _PART_SHIFT) + (stamps + _PART_OFFSET)
    unique, n, total, low, high = _group(
        keys,
        joined("count", np.int64),
        joined("total", np.float64),
        joined("low", np.float64),
        joined("high", np.float64),
    )
    spelled = list(codes)
    kind_name = unique >> _PART_SHIFT
    out = CellColumns()
    out.interval = (kind_name % 3).tolist()
    out.stamp = ((unique & _STAMP_MASK) - _PART_OFFSET).tolist()
    out.name = [spelled[code] for code in (kind_name // 3).tolist()]
    out.count = n.tolist()
    out.total = total.tolist()
    out.low = low.tolist()
    out.high = high.tolist()
    return out


# A cell's key: its part's index above _PART_SHIFT bits, its bucket's epoch second below
# (offset by _PART_OFFSET: any second of years 1-9999 fits in 2^39 either side of 1970).
_PART_SHIFT = 40
_PART_OFFSET = 1 << 39
_STAMP_MASK = (1 << _PART_SHIFT) - 1


def _add_field(
    out: list[CellColumns],
    name: str,
    owner: NDArray[np.int64],
    hours: NDArray[np.int64],
    values: NDArray[np.float64],
) -> None:
    """One field's hour, day and month cells of each part, summed in add_cells' order."""
    base = owner << _PART_SHIFT
    hour_keys, hour_n, hour_sum, hour_min, hour_max = _group(
        base + (hours + _PART_OFFSET), np.ones(len(hours), np.int64), values, values, values
    )
    hour_parts = hour_keys >> _PART_SHIFT
    hour_stamps = (hour_keys & _STAMP_MASK) - _PART_OFFSET
    day_stamps = hour_stamps - hour_stamps % 86400
    day_keys, day_n, day_sum, day_min, day_max = _group(
        (hour_parts << _PART_SHIFT) + (day_stamps + _PART_OFFSET),
        hour_n,
        hour_sum,
        hour_min,
        hour_max,
    )
    day_parts = day_keys >> _PART_SHIFT
    day_stamps = (day_keys & _STAMP_MASK) - _PART_OFFSET
    month_stamps = (
        day_stamps.astype("datetime64[s]").astype("datetime64[M]").astype("datetime64[s]")
    ).astype(np.int64)
    month_keys, month_n, month_sum, month_min, month_max = _group(
        (day_parts << _PART_SHIFT) + (month_stamps + _PART_OFFSET),
        day_n,
        day_sum,
        day_min,
        day_max,
    )
    for code, keys, n, total, low, high in (
        (1, hour_keys, hour_n, hour_sum, hour_min, hour_max),
        (0, day_keys, day_n, day_sum, day_min, day_max),
        (2, month_keys, month_n, month_sum, month_min, month_max),
    ):
        # The keys come in order of first appearance, the parts' readings one part after
        # another: each part's cells are one run.
        owners = keys >> _PART_SHIFT
        stamps = ((keys & _STAMP_MASK) - _PART_OFFSET).tolist()
        counts, totals, lows, highs = n.tolist(), total.tolist(), low.tolist(), high.tolist()
        cuts = [0, *(np.flatnonzero(np.diff(owners)) + 1).tolist(), len(keys)]
        for begin, end in itertools.pairwise(cuts):
            if begin == end:
                continue
            cells = out[int(owners[begin])]
            cells.interval += [code] * (end - begin)
            cells.stamp += stamps[begin:end]
            cells.name += [name] * (end - begin)
            cells.count += counts[begin:end]
            cells.total += totals[begin:end]
            cells.low += lows[begin:end]
            cells.high += highs[begin:end]


def _group(
    keys: NDArray[np.int64],
    counts: NDArray[np.int64],
    sums: NDArray[np.float64],
    lows: NDArray[np.float64],
    highs: NDArray[np.float64],
) -> tuple[Any, Any, Any, Any, Any]:
    """Cells added up by key, the keys in order of first appearance (as a dict fills), each
    sum taken in the order of the parts (np.bincount adds them one after another)."""
    unique, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    slot = rank[inverse]
    width = len(unique)
    n = np.bincount(slot, weights=counts, minlength=width).astype(np.int64)
    total = np.bincount(slot, weights=sums, minlength=width)
    low = np.full(width, np.inf)
    np.minimum.at(low, slot, lows)
    high = np.full(width, -np.inf)
    np.maximum.at(high, slot, highs)
    return unique[order], n, total, low, high
