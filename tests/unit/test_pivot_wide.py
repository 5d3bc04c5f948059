"""db.dialects.pivot_wide reads wide day rollups as the narrow rows read before them: a day
whose row holds none of the asked fields is no day at all (a stove that sent only its
battery level that day), and the asked fields come out of rows of any field list."""

from __future__ import annotations

import numpy as np

from twinhub.db.dialects import ROLLUP_FIELD_SEPARATOR, pivot_wide


def row(scope: str, day: str, cells: dict[str, tuple[float, float, float, float]]) -> tuple:
    names = sorted(cells)
    blob = np.array([cells[name] for name in names], dtype="<f8").tobytes()
    return (scope, day, ROLLUP_FIELD_SEPARATOR.join(names), blob)


COLUMNS = (("energyKwh", "sum"), ("meterKwh", "max"), ("energyKwh", "count"))


def test_a_day_with_none_of_the_asked_fields_is_no_day() -> None:
    rows = [
        row("s1", "2026-10-28", {"batteryPct": (1, 70, 70, 70), "energyKwh": (2, 1.5, 0.5, 1)}),
        row("s1", "2026-10-29", {"batteryPct": (1, 99.5, 99.5, 99.5)}),
        row("s1", "2026-10-30", {"energyKwh": (1, 0.25, 0.25, 0.25), "meterKwh": (1, 9, 9, 9)}),
        row("s2", "2026-10-29", {"batteryPct": (1, 50, 50, 50)}),
        row("s3", "2026-10-29", {"meterKwh": (3, 30, 8, 12)}),
    ]
    got = pivot_wide(rows, COLUMNS)
    assert got.scopes == ["s1", "s3"]
    assert got.days == ["2026-10-28", "2026-10-30", "2026-10-29"]
    assert got.starts == [0, 2, 3]
    energy, meter, count = got.values
    assert energy.tolist()[:2] == [1.5, 0.25] and np.isnan(energy[2])
    assert np.isnan(meter[0]) and meter.tolist()[1:] == [9.0, 12.0]
    assert count.tolist()[:2] == [2.0, 1.0]
    assert [p.tolist() for p in got.present] == [
        [True, True, False],
        [False, True, True],
        [True, True, False],
    ]


def test_only_unasked_fields_give_nothing() -> None:
    rows = [row("s1", "2026-10-29", {"batteryPct": (1, 99.5, 99.5, 99.5)})]
    got = pivot_wide(rows, COLUMNS)
    assert got.scopes == [] and got.days == []
