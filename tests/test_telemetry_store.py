"""The store's group commit (what MQTT uses): several batches, some of one device, with
repeated seqs, in one transaction; each reading counted, stored and rolled up once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.conftest import Registry
from tests.telemetry_world import build_farm
from twinhub.telemetry.schema import Reading
from twinhub.telemetry.store import Batch, bucket_of, merge_rollups


async def test_a_group_with_one_device_twice_stores_each_seq_once(registry: Registry) -> None:
    farm = await build_farm(registry)
    a, b = await farm.stove(), await farm.stove()
    store = registry.platform.telemetry.store
    hour = bucket_of(datetime.now(UTC) - timedelta(hours=3), "hour")

    def batch(did: str, seqs: list[int]) -> Batch:
        readings = [Reading(s, hour + timedelta(minutes=s), {"energyKwh": float(s)}) for s in seqs]
        return Batch(did, readings, ["energyKwh"], None, [farm.project])

    first = await store.store_many([batch(a, [1, 2]), batch(b, [1]), batch(a, [2, 3])])
    assert [len(r.inserted) for r in first] == [2, 1, 1]
    assert [r.duplicates for r in first] == [0, 0, 1]
    again = await store.store_many([batch(a, [1, 2, 3, 4]), batch(a, [4])])
    assert [len(r.inserted) for r in again] == [1, 0]
    cells = await store.aggregates(a, "hour", None, None)
    assert cells[hour]["energyKwh"] == {"count": 4, "sum": 10.0, "min": 1.0, "max": 4.0}
    project = await store.aggregates(farm.project, "hour", None, None)
    assert project[hour]["energyKwh"]["count"] == 5 and project[hour]["energyKwh"]["sum"] == 11.0


def test_merged_rollups_keep_one_row_per_key() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    row = {"scope": "s", "interval": "day", "bucket": start, "field": "f"}
    merged = merge_rollups(
        [
            {**row, "count": 1, "sum": 2.0, "min": 2.0, "max": 2.0},
            {**row, "count": 2, "sum": 1.0, "min": -1.0, "max": 2.0},
        ]
    )
    assert merged == [{**row, "count": 3, "sum": 3.0, "min": -1.0, "max": 2.0}]
