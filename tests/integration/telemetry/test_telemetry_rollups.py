"""On PostgreSQL the database computes the rollups of the readings a group stores (one
INSERT ... SELECT ... GROUP BY; SQLite sums cells in Python): either way they must equal
what the Python reference (rollup_rows) makes of the same readings, bucket for bucket:
months, days and hours in UTC whatever offset a reading was sent with, counted enum values,
readings a group repeats, scopes fed by several devices."""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from tests.conftest import Registry
from tests.support.telemetry_world import build_farm
from twinhub.mrv.rollups import INTERVALS, bucket_of
from twinhub.mrv.telemetry_schema import STOVE_TELEMETRY, Reading, check_readings, parse_schema
from twinhub.telemetry.rows import Batch, Cells, add_cells, rollup_rows

SCHEMA = parse_schema(STOVE_TELEMETRY)
INDIA = timezone(timedelta(hours=5, minutes=30))
LIMA = timezone(timedelta(hours=-5))


def readings(start_seq: int) -> list[Reading]:
    """Readings on both sides of month, day and hour boundaries (in UTC and in the offsets
    they were sent with), with enum values to count and a seq the batch repeats."""
    moments = [
        datetime(2026, 1, 31, 23, 59, 59, 999_999, tzinfo=UTC),
        datetime(2026, 2, 1, 0, 0, tzinfo=UTC),
        datetime(2026, 2, 1, 4, 59, tzinfo=INDIA),  # 2026-01-31 23:29 UTC: January
        datetime(2026, 2, 28, 20, 0, tzinfo=LIMA),  # 2026-03-01 01:00 UTC: March
        datetime(2025, 12, 31, 23, 30, tzinfo=UTC),  # another year
        datetime(2026, 2, 1, 0, 30, tzinfo=UTC),
    ]
    values: list[dict[str, Any]] = [
        {"energyKwh": 0.1, "session": "start", "meterKwh": 10},
        {"energyKwh": 0.25, "faultCode": "none", "temperatureC": -3.5},
        {"energyKwh": 1e-9, "session": "end", "batteryPct": 100},
        {"fuelKg": 2, "session": "start", "faultCode": "overheat"},
        {"energyKwh": 19.999999999999996, "meterKwh": 999_999.125},
        {"session": "start"},
    ]
    out = [
        Reading(start_seq + n, moment.astimezone(UTC), value)
        for n, (moment, value) in enumerate(zip(moments, values, strict=True))
    ]
    return [*out, out[1]._replace(values={"energyKwh": 7.0})]  # a repeated seq


def merged(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    cells: dict[tuple[Any, ...], dict[str, Any]] = defaultdict(
        lambda: {"count": 0, "sum": 0.0, "min": None, "max": None}
    )
    for row in rows:
        cell = cells[(row["scope"], row["interval"], row["bucket"], row["field"])]
        cell["count"] += row["count"]
        cell["sum"] += row["sum"]
        cell["min"] = row["min"] if cell["min"] is None else min(cell["min"], row["min"])
        cell["max"] = row["max"] if cell["max"] is None else max(cell["max"], row["max"])
    return dict(cells)


async def test_rollups_computed_in_the_database_equal_the_python_reference(
    registry: Registry,
) -> None:
    farm = await build_farm(registry)
    a, b = await farm.stove(), await farm.stove()
    store = registry.platform.telemetry.store
    scopes = [farm.project, farm.organisation]

    def batch(did: str, items: list[Reading]) -> Batch:
        return Batch(did, items, SCHEMA.numeric, SCHEMA.meter, scopes, SCHEMA.counted)

    first_a, first_b = readings(1), readings(1)
    # One group: two devices feeding the same scopes, device a twice (its second batch
    # repeats two of its seqs and adds one), then a group that repeats stored seqs.
    extra = Reading(100, datetime(2026, 2, 1, 0, 15, tzinfo=UTC), {"energyKwh": 3.0})
    results = await store.store_many(
        [batch(a, first_a), batch(b, first_b), batch(a, [first_a[0], first_a[1], extra])]
    )
    assert [len(r.inserted) for r in results] == [6, 6, 1]
    assert [r.duplicates for r in results] == [1, 1, 2]
    late = Reading(101, datetime(2026, 3, 31, 23, 0, tzinfo=UTC), {"energyKwh": 5.5})
    again = await store.store_many([batch(a, [first_a[2], late])])
    assert [len(r.inserted) for r in again] == [1]

    stored = {a: [*first_a[:6], extra, late], b: first_b[:6]}
    actual = await stored_equal_reference(store, stored, scopes)
    # Spot checks of the buckets the offsets decide.
    january = datetime(2026, 1, 1, tzinfo=UTC)
    march = datetime(2026, 3, 1, tzinfo=UTC)
    assert actual[(a, "month", january, "session=end")]["count"] == 1
    assert actual[(farm.project, "month", march, "session=start")]["count"] == 2
    assert actual[(farm.organisation, "month", march, "energyKwh")]["sum"] == 5.5


async def stored_equal_reference(
    store: Any, stored: dict[str, list[Reading]], scopes: list[str]
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Assert that the rollups read back for the devices of `stored` and `scopes` are what
    the Python reference makes of the readings stored; return them by (scope, interval,
    bucket, field)."""
    expected = merged(
        [
            row
            for did, items in stored.items()
            for row in rollup_rows(items, SCHEMA.numeric, [did, *scopes], SCHEMA.counted)
        ]
    )
    actual: dict[tuple[Any, ...], dict[str, Any]] = {}
    for scope in (*stored, *scopes):
        for interval in INTERVALS:
            cells = await store.aggregates(scope, interval, None, None)
            for bucket, fields in cells.items():
                for name, cell in fields.items():
                    actual[(scope, interval, bucket, name)] = cell
    assert sorted(actual) == sorted(expected)
    for key, cell in expected.items():
        got = actual[key]
        assert (got["count"], got["min"], got["max"]) == (
            cell["count"],
            cell["min"],
            cell["max"],
        ), key
        assert got["sum"] == pytest.approx(cell["sum"], rel=1e-12), key
    return actual


async def test_a_later_group_adds_to_stored_rows_of_the_same_fields(registry: Registry) -> None:
    """A group whose buckets a stored row holds with the same fields adds cell by cell (on
    PostgreSQL an array spelled out for rows of up to six fields, unnest beyond): rows of
    one, two and seven fields, each bucket's minimum lowered and maximum raised by the
    second group, in separate transactions."""
    farm = await build_farm(registry)
    did = await farm.stove()
    store = registry.platform.telemetry.store
    scopes = [farm.project, farm.organisation]
    hour = datetime(2026, 4, 2, 10, tzinfo=UTC)
    shapes: list[dict[str, Any]] = [
        {"energyKwh": 1.0},
        {"energyKwh": 0.5, "meterKwh": 100.25},
        {
            "energyKwh": 2.0,
            "fuelKg": 1.5,
            "meterKwh": 101.0,
            "temperatureC": 200.0,
            "batteryPct": 30.0,
            "session": "start",
            "faultCode": "none",
        },
    ]

    def group(seq: int, scale: float) -> list[Reading]:
        return [
            Reading(
                seq + n,
                hour + timedelta(hours=n, minutes=seq % 50),
                {k: v * scale if isinstance(v, float) else v for k, v in values.items()},
            )
            for n, values in enumerate(shapes)
        ]

    first, second, third = group(1, 1.0), group(10, 0.25), group(20, 3.0)
    for items in (first, second, third):
        batch = Batch(did, items, SCHEMA.numeric, SCHEMA.meter, scopes, SCHEMA.counted)
        assert [len(r.inserted) for r in await store.store_many([batch])] == [3]
    actual = await stored_equal_reference(store, {did: [*first, *second, *third]}, scopes)
    assert actual[(did, "hour", hour, "energyKwh")] == {
        "count": 3,
        "sum": 4.25,
        "min": 0.25,
        "max": 3.0,
    }
    assert actual[(farm.project, "day", hour.replace(hour=0), "session=start")]["count"] == 3


def test_the_batch_check_agrees_with_the_check_of_each_reading() -> None:
    """check_readings inlines the common case; every verdict and reason must be
    check_reading's."""
    from twinhub.mrv.telemetry_schema import check_reading

    latest = datetime(2026, 6, 1, tzinfo=UTC)
    items: list[Any] = [
        {"seq": 1, "time": "2026-05-01T10:00:00Z", "values": {"energyKwh": 1.5}},
        {"seq": 2, "time": "2026-05-01t10:00:00z", "values": {"energyKwh": 1}},
        {"seq": 3, "time": "2026-05-01T10:00:00+05:30", "values": {"session": "start"}},
        {"seq": 4, "time": "2026-05-01T10:00:00", "values": {"energyKwh": 1.5}},
        {"seq": 5, "time": "2026-07-01T10:00:00Z", "values": {"energyKwh": 1.5}},
        {"seq": 6, "time": "2026-05-01T10:00:00Z", "values": {"energyKwh": 21}},
        {"seq": 7, "time": "2026-05-01T10:00:00Z", "values": {"energyKwh": float("nan")}},
        {"seq": 8, "time": "2026-05-01T10:00:00Z", "values": {"energyKwh": True}},
        {"seq": 9, "time": "2026-05-01T10:00:00Z", "values": {"colour": "red"}},
        {"seq": 10, "time": "2026-05-01T10:00:00Z", "values": {}},
        {"seq": True, "time": "2026-05-01T10:00:00Z", "values": {"energyKwh": 1}},
        {"seq": -1, "time": "2026-05-01T10:00:00Z", "values": {"energyKwh": 1}},
        {"seq": 11, "time": "2026-05-01 10:00:00Z", "values": {"energyKwh": 1}},
        {"seq": 12, "time": 5, "values": {"energyKwh": 1}},
        {"seq": 13, "values": {"energyKwh": 1}},
        {"seq": 14, "time": "2026-05-01T10:00:00Z", "values": {"energyKwh": 1}, "x": 1},
        {"seq": 15, "time": "2026-05-01T10:00:00Z", "values": {"session": "middle"}},
        {"seq": 16, "time": "2026-05-01T10:00:00Z", "values": {"meterKwh": float("inf")}},
        {"seq": 17, "time": "2026-05-01T10:00:00Z", "values": {"faultCode": 3}},
        ["not", "an", "object"],
    ]
    valid, rejected = check_readings(items, SCHEMA, latest)
    one_by_one = [check_reading(n, item, SCHEMA, latest) for n, item in enumerate(items)]
    assert valid == [r for r in one_by_one if isinstance(r, Reading)]
    assert rejected == [r for r in one_by_one if not isinstance(r, Reading)]
    assert [r.seq for r in valid] == [1, 2, 3]


def test_the_hour_first_cells_equal_a_reading_by_reading_sum() -> None:
    """add_cells sums hours from readings, then days from hours and months from days; the
    result must be what adding every reading to its hour, day and month gives (several
    readings an hour, hours across day, month and year ends, counted enum values, fields
    missing from some readings, integers)."""
    rng = random.Random(12)
    start = datetime(2025, 12, 30, 20, tzinfo=UTC)
    items = []
    for seq in range(3000):
        moment = start + timedelta(minutes=rng.randrange(0, 60 * 24 * 70))
        values: dict[str, Any] = {}
        if rng.random() < 0.8:
            values["energyKwh"] = rng.choice([rng.random() * 3, rng.randrange(5)])
        if rng.random() < 0.5:
            values["meterKwh"] = rng.random() * 1000
        if rng.random() < 0.3:
            values["session"] = rng.choice(["start", "end"])
        items.append(Reading(seq, moment, values))
    numeric, counted = ["energyKwh", "meterKwh"], ["session"]
    cells: Cells = {}
    add_cells(cells, items[:1700], numeric, counted)  # two calls: the second adds to cells
    add_cells(cells, items[1700:], numeric, counted)

    expected: dict[tuple[str, int, str], list[float]] = {}
    for reading in items:
        for name, value in reading.values.items():
            field = f"{name}={value}" if name in counted else name
            amount = 1.0 if name in counted else float(value)
            for interval in INTERVALS:
                stamp = int(bucket_of(reading.time, interval).timestamp())
                expected.setdefault((interval, stamp, field), []).append(amount)
    assert sorted(cells) == sorted(expected)
    for key, values in expected.items():
        count, total, low, high = cells[key]
        assert (count, low, high) == (len(values), min(values), max(values)), key
        assert total == pytest.approx(sum(values), rel=1e-12), key
