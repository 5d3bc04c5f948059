"""Rollups as wide rows: one row per (scope, interval, bucket), every field's cell in it.

A row's `fields` are its field names in sorted order (code points: Python's sort, and
PostgreSQL's COLLATE "C"), and its `cells` each field's (count, sum, min, max) as float64,
in that order. SQLite keeps the names joined by SEPARATOR (text) and the cells as one
little-endian blob; PostgreSQL a text[] and a float8[] (so its upsert merges them in SQL).
No float goes through text (exact); a count is exact in a float64 below 2^53.

One row where there were one per field: ingestion upserts a half (two fields) to a sixth
(six) of the rows it did, and a monitoring period reads one row a stove-day instead of three
to five (bench/results/2026-11-28.md, "Session 18, rollups" and "Session 19, wide").
`blocks_of` turns a group's summed cells (telemetry/columns.CellColumns) into rows,
column-wise; `merge_row` adds two rows whose field lists differ (the rare case: rows of the
same fields are added column-wise by the caller); `decode` reads one row back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from twinhub.db.dialects import ROLLUP_FIELD_SEPARATOR
from twinhub.telemetry.columns import INTERVAL_CODES, CellColumns, merge_columns

SEPARATOR = ROLLUP_FIELD_SEPARATOR  # between a row's field names on SQLite
CELL = 4  # count, sum, min, max
Cell = tuple[int, float, float, float]


def fields_text(fields: Sequence[str]) -> str:
    return SEPARATOR.join(fields)


def fields_of(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """A row's field names, from SQLite's text or PostgreSQL's array."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        return tuple(value.split(SEPARATOR))
    return tuple(value)


def cells_of(value: bytes | Sequence[float] | None) -> NDArray[np.float64]:
    """A row's cells as a (fields, 4) array, from SQLite's blob or PostgreSQL's array."""
    if value is None:
        return np.empty((0, CELL))
    if isinstance(value, bytes | bytearray | memoryview):
        return np.frombuffer(value, "<f8").reshape(-1, CELL)
    return np.asarray(value, dtype=np.float64).reshape(-1, CELL)


def blob(cells: NDArray[np.float64]) -> bytes:
    """SQLite's cells: float64, little-endian."""
    return np.ascontiguousarray(cells, dtype="<f8").tobytes()


def decode(fields: Any, cells: Any) -> dict[str, Cell]:
    """{field: (count, sum, min, max)} of one row, the count an int."""
    names = fields_of(fields)
    values = cells_of(cells).tolist()
    return {
        name: (int(cell[0]), cell[1], cell[2], cell[3])
        for name, cell in zip(names, values, strict=True)
    }


def encode(cells: dict[str, Sequence[float]]) -> tuple[tuple[str, ...], NDArray[np.float64]]:
    """A row's (fields, cells) from {field: (count, sum, min, max)}."""
    names = tuple(sorted(cells))
    return names, np.array([cells[name] for name in names], dtype=np.float64).reshape(-1, CELL)


def merge_row(
    fields: tuple[str, ...],
    cells: NDArray[np.float64],
    more_fields: tuple[str, ...],
    more: NDArray[np.float64],
) -> tuple[tuple[str, ...], NDArray[np.float64]]:
    """Two rows of one key added up (the first's figures first, as an upsert adds the
    increment to what is stored)."""
    if fields == more_fields:
        return fields, add(cells[None], more[None])[0]
    held = {name: cells[n] for n, name in enumerate(fields)}
    for n, name in enumerate(more_fields):
        cell = held.get(name)
        held[name] = more[n] if cell is None else add(cell[None, None], more[n][None, None])[0, 0]
    names = tuple(sorted(held))
    return names, np.array([held[name] for name in names], dtype=np.float64)


def add(stored: NDArray[np.float64], more: NDArray[np.float64]) -> NDArray[np.float64]:
    """Rows of the same fields added column-wise: (rows, fields, 4) each."""
    out = np.empty_like(stored)
    out[..., 0] = stored[..., 0] + more[..., 0]
    out[..., 1] = stored[..., 1] + more[..., 1]
    out[..., 2] = np.minimum(stored[..., 2], more[..., 2])
    out[..., 3] = np.maximum(stored[..., 3], more[..., 3])
    return out


@dataclass
class Block:
    """Wide rows of one field list: each row's scope, interval code (INTERVAL_CODES),
    bucket epoch second, and its cells, (rows, fields, 4)."""

    fields: tuple[str, ...]
    scope: list[str]
    interval: list[int]
    stamp: list[int]
    cells: NDArray[np.float64]


_STAMP_OFFSET = 1 << 39  # any second of years 1-9999 fits in 2^39 either side of 1970


def blocks_of(scoped: Iterable[tuple[str, CellColumns]]) -> list[Block]:
    """Each scope's cells (one per interval, bucket and field) as wide rows, grouped by
    field list, rows in (scope, interval, bucket) order within a block. Column-wise: the
    cells are placed into a (buckets, fields, 4) array and each bucket's fields read as a
    bit mask, so no Python object is made per cell."""
    found: dict[tuple[str, ...], list[Block]] = {}
    for scope, columns in scoped:
        if not len(columns):
            continue
        names = sorted(set(columns.name))
        if len(names) > 62:  # more fields than a mask holds: cell by cell
            for block in _blocks_by_dict(scope, columns):
                found.setdefault(block.fields, []).append(block)
            continue
        rank = {name: n for n, name in enumerate(names)}
        codes = np.fromiter(map(rank.__getitem__, columns.name), np.int64, len(columns))
        keys = (np.asarray(columns.interval, dtype=np.int64) << 40) + (
            np.asarray(columns.stamp, dtype=np.int64) + _STAMP_OFFSET
        )
        unique, slot = np.unique(keys, return_inverse=True)
        values = np.zeros((len(unique), len(names), CELL))
        values[slot, codes, 0] = columns.count
        values[slot, codes, 1] = columns.total
        values[slot, codes, 2] = columns.low
        values[slot, codes, 3] = columns.high
        masks = np.zeros(len(unique), np.int64)
        np.bitwise_or.at(masks, slot, np.left_shift(1, codes))
        kinds = (unique >> 40).tolist()
        stamps = ((unique & ((1 << 40) - 1)) - _STAMP_OFFSET).tolist()
        patterns = np.unique(masks)
        for pattern in patterns.tolist():
            chosen = [n for n in range(len(names)) if pattern >> n & 1]
            fields = tuple(names[n] for n in chosen)
            if len(patterns) == 1:
                rows = list(range(len(unique)))
                cells = values if len(chosen) == len(names) else values[:, chosen]
            else:
                where = np.flatnonzero(masks == pattern)
                rows = where.tolist()
                cells = values[where][:, chosen]
            found.setdefault(fields, []).append(
                Block(
                    fields,
                    [scope] * len(rows),
                    [kinds[r] for r in rows],
                    [stamps[r] for r in rows],
                    cells,
                )
            )
    out = []
    for fields, blocks in found.items():
        if len(blocks) == 1:
            out.append(blocks[0])
            continue
        out.append(
            Block(
                fields,
                [s for b in blocks for s in b.scope],
                [i for b in blocks for i in b.interval],
                [t for b in blocks for t in b.stamp],
                np.concatenate([b.cells for b in blocks]),
            )
        )
    return out


def _blocks_by_dict(scope: str, columns: CellColumns) -> list[Block]:
    rows: dict[tuple[int, int], dict[str, list[float]]] = {}
    for kind, stamp, name, *cell in zip(
        columns.interval,
        columns.stamp,
        columns.name,
        columns.count,
        columns.total,
        columns.low,
        columns.high,
        strict=True,
    ):
        rows.setdefault((kind, stamp), {})[name] = cell
    out = []
    for (kind, stamp), cells in sorted(rows.items()):
        fields, values = encode(cells)
        out.append(Block(fields, [scope], [kind], [stamp], values[None]))
    return out


def records_columns(records: Iterable[Sequence[Any]]) -> dict[str, CellColumns]:
    """Narrow rollup records (scope, interval, bucket, field, count, sum, min, max), one per
    key, as each scope's cell columns (what blocks_of takes)."""
    out: dict[str, CellColumns] = {}
    for scope, interval, bucket, name, count, total, low, high in records:
        columns = out.get(scope)
        if columns is None:
            columns = out[scope] = CellColumns()
        columns.interval.append(INTERVAL_CODES[interval])
        columns.stamp.append(int(bucket.timestamp()))
        columns.name.append(name)
        columns.count.append(int(count))
        columns.total.append(float(total))
        columns.low.append(float(low))
        columns.high.append(float(high))
    return out


@lru_cache(maxsize=65_536)
def bucket_at(stamp: int) -> datetime:
    """A bucket's epoch second as a UTC datetime; cached, since a project's devices keep
    naming the same recent hours."""
    return datetime.fromtimestamp(stamp, UTC)


def scoped_columns(
    parts: list[CellColumns], scopes: list[tuple[int, str]]
) -> list[tuple[str, CellColumns]]:
    """Each scope's cells: a scope fed by one batch takes its columns as they are; one fed
    by several adds their cells up first (in batch order, as rows.merge_cells does), so
    each key is written once."""
    fed: dict[str, list[int]] = {}
    for part, scope in scopes:
        fed.setdefault(scope, []).append(part)
    return [
        (scope, parts[mine[0]] if len(mine) == 1 else merge_columns([parts[n] for n in mine]))
        for scope, mine in fed.items()
    ]
