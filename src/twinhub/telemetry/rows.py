"""The telemetry store's rows and rollup cells: what a group commit writes, as plain values.

Kept apart from the store so that the store and its per-database writers
(`telemetry/dialects`) both use them without importing each other. `rollup_rows` is the
Python reference of the rollup sums the databases compute (the tests compare the two).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from twinhub.mrv.rollups import counted_field
from twinhub.mrv.telemetry_schema import Reading

# The longest field name a rollup keeps (a counted enum's `name=value` longer than this is
# not rolled up: the narrow table's field column was varchar(64), and the rule stays).
FIELD_LENGTH = 64


def next_month(moment: datetime) -> datetime:
    return (moment.replace(day=28) + timedelta(days=4)).replace(day=1)


@dataclass(eq=False)  # one per message or HTTP batch, shared by its readings (by identity)
class Origin:
    """Where some readings came from: when twinhub received them and, when they came signed,
    the batch or message exactly as it arrived with its signatures (stored once, as a
    receipt the readings name)."""

    received_at: datetime
    payload: str | None = None  # None: an unsigned HTTP batch (no receipt)
    signatures: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Quarantined:
    """A reading kept out of the data, with its reason (mrv.telemetry_schema.clock_problem)."""

    reading: Reading
    reason: str
    origin: Origin
    source: str


@dataclass(frozen=True)
class Batch:
    """One device's valid readings, and what its protocol and links say to roll up."""

    did: str
    readings: list[Reading]
    numeric: Sequence[str]
    meter: str | None
    scopes: Sequence[str]
    counted: Sequence[str] = ()  # enum fields whose values are counted (`session=start`)
    rejection: dict[str, Any] | None = None  # a telemetry.rejected event's data, if any
    origins: Sequence[Origin] = ()  # each reading's, in order (empty: received now, unsigned)
    quarantined: Sequence[Quarantined] = ()


@dataclass
class DeviceState:
    """A device's row as a write reads, advances and saves it (on the driver's connection,
    no ORM object)."""

    id: int
    last_time: datetime | None
    last_seq: int | None
    latest: dict[str, Any]
    meter: float | None
    readings: int


@dataclass(frozen=True)
class StoredBatch:
    inserted: list[Reading]
    duplicates: int
    state: dict[str, Any]
    was_online_at: datetime | None  # the device's last reading before this batch


Cells = dict[tuple[str, int, str], list[float]]  # (interval, epoch s, field): count/sum/min/max
RollupRecord = tuple[str, str, datetime, str, int, float, float, float]


@dataclass
class RollupPlan:
    """What a group's inserted readings roll up into: each batch's cells, summed in Python
    (the databases upsert them). SQLite: `cells`, each scope's cells (a batch's shared by
    the device and its scopes). PostgreSQL: `parts`, each batch's cells as columns
    (telemetry/columns.CellColumns), and `scopes` pairing each part's index with the
    device and its scopes. `stored_until`: each device's newest reading time before the
    group (None: none), so SQLite inserts a device's rows of later buckets without reading
    them first (a device that only appends holds nothing there)."""

    cells: dict[str, list[Cells]] = field(default_factory=dict)
    parts: list[Any] = field(default_factory=list)
    scopes: list[tuple[int, str]] = field(default_factory=list)
    stored_until: dict[str, datetime | None] = field(default_factory=dict)


def add_cells(
    cells: Cells, readings: Iterable[Reading], numeric: Sequence[str], counted: Sequence[str]
) -> None:
    """Add some readings to rollup cells (hour, day and month of each numeric field).

    An enum field named in `counted` rolls up as one field per value (`session=start`,
    value 1 per reading), so a day's cooking sessions are read from the rollups.

    This runs for every reading, so a reading only adds to its hour's cell (per field, keyed
    by the hour's epoch second: integer arithmetic, no key tuple); days are then summed
    from the hours and months from the days, once per cell rather than once per reading.
    """
    hours: dict[str, dict[int, list[float]]] = {}
    fields = [(name, hours.setdefault(name, {})) for name in numeric]
    for reading in readings:
        second = int(reading.time.timestamp())
        hour = second - second % 3600
        values = reading.values
        for name, by_hour in fields:
            value = values.get(name)
            if value is None:
                continue
            value = float(value)
            cell = by_hour.get(hour)
            if cell is None:
                by_hour[hour] = [1, value, value, value]
            else:
                cell[0] += 1
                cell[1] += value
                if value < cell[2]:
                    cell[2] = value
                if value > cell[3]:
                    cell[3] = value
        for name in counted:
            value = values.get(name)
            if isinstance(value, str) and len(counted_field(name, value)) <= FIELD_LENGTH:
                by_hour = hours.setdefault(counted_field(name, value), {})
                cell = by_hour.get(hour)
                if cell is None:
                    by_hour[hour] = [1, 1.0, 1.0, 1.0]
                else:
                    cell[0] += 1
                    cell[1] += 1.0
    months: dict[int, int] = {}
    for name, by_hour in hours.items():
        days: dict[int, list[float]] = {}
        for hour, cell in by_hour.items():
            key = ("hour", hour, name)
            if key in cells:
                _add_cell(cells, key, cell)
            else:  # this cell is no one else's (the days below copy it)
                cells[key] = cell
            _add_cell(days, hour - hour % 86400, cell)
        by_month: dict[int, list[float]] = {}
        for day, cell in days.items():
            _add_cell(cells, ("day", day, name), cell)
            month = months.get(day)
            if month is None:
                start = datetime.fromtimestamp(day, UTC).replace(day=1)
                month = months[day] = int(start.timestamp())
            _add_cell(by_month, month, cell)
        for month, cell in by_month.items():
            _add_cell(cells, ("month", month, name), cell)


def _add_cell(cells: dict[Any, list[float]], key: Any, cell: list[float]) -> None:
    """Add count/sum/min/max `cell` to the cell at `key` (a copy when there is none)."""
    held = cells.get(key)
    if held is None:
        cells[key] = list(cell)
        return
    held[0] += cell[0]
    held[1] += cell[1]
    if cell[2] < held[2]:
        held[2] = cell[2]
    if cell[3] > held[3]:
        held[3] = cell[3]


def merge_cells(into: Cells, cells: Cells) -> None:
    """Add one set of cells to another (a scope fed by several batches of a group)."""
    for key, cell in cells.items():
        _add_cell(into, key, cell)


def _utc(stamp: int) -> datetime:
    return datetime.fromtimestamp(stamp, UTC)


def cell_records(
    scoped: dict[str, list[Cells]], bucket: Callable[[int], Any] = _utc, ordered: bool = True
) -> list[RollupRecord]:
    """Rollup increments, one per (scope, interval, bucket, field), sorted by that key so
    that concurrent transactions lock rollup rows in one order (no deadlocks).

    `scoped` gives each scope the cells of the batches that feed it; a scope fed by one
    batch shares that batch's cells with the device and its other scopes (no copies), and
    their keys are sorted once for all of them (`ordered=False`: not sorted, where no lock
    order matters). `bucket` turns a bucket's epoch second into what the record holds (a
    UTC datetime; SQLite's text), once per bucket."""
    moments: dict[int, Any] = {}
    orders: dict[int, list[tuple[str, int, str]]] = {}
    kept: list[Cells] = []  # holds merged cells alive, so no id() is reused meanwhile
    records: list[RollupRecord] = []
    for scope in sorted(scoped):
        parts = scoped[scope]
        cells = parts[0]
        if len(parts) > 1:
            cells = {key: list(cell) for key, cell in cells.items()}
            for more in parts[1:]:
                merge_cells(cells, more)
            kept.append(cells)
        keys = orders.get(id(cells))
        if keys is None:
            keys = orders[id(cells)] = sorted(cells) if ordered else list(cells)
        for key in keys:
            interval, stamp, name = key
            cell = cells[key]
            moment = moments.get(stamp)
            if moment is None:
                moment = moments[stamp] = bucket(stamp)
            records.append((scope, interval, moment, name, int(cell[0]), cell[1], cell[2], cell[3]))
    return records


def as_records(rows: Iterable[dict[str, Any]]) -> list[RollupRecord]:
    """Rollup rows (dicts, as rollup_rows gives them) as the records _roll_up takes."""
    return [
        (
            r["scope"],
            r["interval"],
            r["bucket"],
            r["field"],
            r["count"],
            r["sum"],
            r["min"],
            r["max"],
        )
        for r in rows
    ]


def rollup_rows(
    readings: Iterable[Reading],
    numeric: Sequence[str],
    scopes: Sequence[str],
    counted: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The rollup increments of some readings as rows, one per (scope, interval, bucket,
    field), in key order."""
    cells: Cells = {}
    add_cells(cells, readings, numeric, counted)
    keys = ("scope", "interval", "bucket", "field", "count", "sum", "min", "max")
    return [
        dict(zip(keys, record, strict=True))
        for record in cell_records({scope: [cells] for scope in scopes})
    ]


def merge_rollups(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per key (an upsert statement may touch a row once), in key order."""
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        key = (row["scope"], row["interval"], row["bucket"], row["field"])
        held = merged.get(key)
        if held is None:
            merged[key] = dict(row)
            continue
        held["count"] += row["count"]
        held["sum"] += row["sum"]
        held["min"] = min(held["min"], row["min"])
        held["max"] = max(held["max"], row["max"])
    return [merged[key] for key in sorted(merged)]
