"""A batch's rollup cells computed column-wise (numpy), for the write path.

`batch_columns` gives the same cells as `rows.add_cells` (hour, day and month of each
numeric field, and each counted enum value), as columns rather than a dict of cells: the
store hands them to the database as arrays (PostgreSQL) or rows (SQLite) without building
a Python object per cell. A large batch is summed with numpy over the whole batch (the
readings' times and each field's values taken out once, grouped by hour with
np.unique/np.bincount); a small one through add_cells, which costs less below
COLUMN_READINGS readings than numpy's fixed cost per call. Either way the figures are those
of add_cells bit for bit: the sums are taken in the same order (readings in batch order
into hours, hours in order of first appearance into days, days likewise into months), and
tests/integration/telemetry/test_telemetry_columns.py checks the two against each other on
generated batches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from twinhub.mrv.rollups import counted_field
from twinhub.mrv.telemetry_schema import Reading
from twinhub.telemetry.rows import FIELD_LENGTH, Cells, add_cells

COLUMN_READINGS = 128  # from this many readings on, a batch is summed with numpy (the break-even)
INTERVAL_CODES = {"day": 0, "hour": 1, "month": 2}  # in the names' sort order
INTERVAL_NAMES = ("day", "hour", "month")


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


def _numpy_columns(
    readings: Sequence[Reading], numeric: Sequence[str], counted: Sequence[str]
) -> CellColumns:
    size = len(readings)
    # int(timestamp()) as add_cells takes it (truncated toward zero), then the hour.
    seconds = np.trunc(
        np.fromiter((r.time.timestamp() for r in readings), np.float64, size)
    ).astype(np.int64)
    hours = seconds - seconds % 3600
    values = [r.values for r in readings]
    out = CellColumns()
    nan = float("nan")
    for name in numeric:
        column = np.array([v.get(name, nan) for v in values], dtype=np.float64)
        present = ~np.isnan(column)  # a checked numeric value is finite: NaN is "absent"
        if present.all():
            _add_field(out, name, hours, column, column)
        elif present.any():
            _add_field(out, name, hours[present], column[present], column[present])
    for name in counted:
        raw = [v.get(name) for v in values]
        kinds: dict[str, list[int]] = {}
        for index, value in enumerate(raw):
            if isinstance(value, str):
                kinds.setdefault(value, []).append(index)
        for value, where in kinds.items():
            label = counted_field(name, value)
            if len(label) > FIELD_LENGTH:
                continue
            ones = np.ones(len(where), np.float64)
            _add_field(out, label, hours[np.array(where, dtype=np.intp)], ones, ones)
    return out


def _add_field(
    out: CellColumns,
    name: str,
    hours: NDArray[np.int64],
    values: NDArray[np.float64],
    extremes: NDArray[np.float64],
) -> None:
    """One field's hour, day and month cells, summed in add_cells' order."""
    hour_keys, hour_n, hour_sum, hour_min, hour_max = _group(
        hours, np.ones(len(hours), np.int64), values, extremes, extremes
    )
    days = hour_keys - hour_keys % 86400
    day_keys, day_n, day_sum, day_min, day_max = _group(days, hour_n, hour_sum, hour_min, hour_max)
    months = (
        day_keys.astype("datetime64[s]").astype("datetime64[M]").astype("datetime64[s]")
    ).astype(np.int64)
    month_keys, month_n, month_sum, month_min, month_max = _group(
        months, day_n, day_sum, day_min, day_max
    )
    for code, keys, n, total, low, high in (
        (1, hour_keys, hour_n, hour_sum, hour_min, hour_max),
        (0, day_keys, day_n, day_sum, day_min, day_max),
        (2, month_keys, month_n, month_sum, month_min, month_max),
    ):
        count = len(keys)
        out.interval += [code] * count
        out.stamp += keys.tolist()
        out.name += [name] * count
        out.count += n.tolist()
        out.total += total.tolist()
        out.low += low.tolist()
        out.high += high.tolist()


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
