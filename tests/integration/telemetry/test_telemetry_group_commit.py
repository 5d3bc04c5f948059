"""The telemetry group commit (both databases): callers that wait for the process's writer
go in together, as one transaction, yet each gets its own batches' results; a caller whose
batches fail fails alone; a caller that leaves before its turn has nothing written."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from tests.conftest import Registry
from tests.support.telemetry_world import build_farm
from twinhub.mrv.rollups import bucket_of
from twinhub.mrv.telemetry_schema import Reading
from twinhub.telemetry.rows import Batch, StoredBatch
from twinhub.telemetry.store import TelemetryStore


def _batch(did: str, project: str, seqs: range, start: datetime) -> Batch:
    readings = [Reading(s, start + timedelta(minutes=7 * s), {"energyKwh": s / 10}) for s in seqs]
    return Batch(did, readings, ["energyKwh"], None, [project])


async def test_waiting_callers_share_a_transaction_and_keep_their_own_results(
    registry: Registry,
) -> None:
    farm = await build_farm(registry)
    stoves = [await farm.stove() for _ in range(4)]
    store = registry.platform.telemetry.store
    start = bucket_of(datetime.now(UTC) - timedelta(days=3), "hour")
    await store.store_many([_batch(stoves[0], farm.project, range(1, 11), start)])

    # Eight callers at once: new seqs, seqs stored before, and one device in two callers
    # whose seqs overlap (whoever comes first stores them, the other counts duplicates).
    callers = [
        [_batch(stoves[0], farm.project, range(5, 16), start)],  # 5..10 stored before
        [_batch(stoves[1], farm.project, range(1, 21), start)],
        [_batch(stoves[2], farm.project, range(1, 6), start - timedelta(days=40))],  # late
        [_batch(stoves[3], farm.project, range(1, 4), start)],
        [_batch(stoves[1], farm.project, range(15, 26), start)],  # 15..20 in caller 1
        [_batch(stoves[2], farm.project, range(6, 9), start)],
        [
            _batch(stoves[3], farm.project, range(4, 6), start),
            _batch(stoves[0], farm.project, range(16, 18), start),
        ],
        [_batch(stoves[3], farm.project, range(1, 7), start)],  # 1..5 in callers 3 and 6
    ]
    before = store.transactions
    results = await asyncio.gather(*(store.store_many(caller) for caller in callers))
    assert store.transactions - before < len(callers)  # grouped: fewer transactions

    counts = [[(len(r.inserted), r.duplicates) for r in result] for result in results]
    assert counts == [
        [(5, 6)],
        [(20, 0)],
        [(5, 0)],
        [(3, 0)],
        [(5, 6)],
        [(3, 0)],
        [(2, 0), (2, 0)],
        [(1, 5)],
    ]
    # Each caller's readings are its own (not another caller's of the same device).
    assert [r.seq for r in results[4][0].inserted] == [21, 22, 23, 24, 25]
    assert [r.seq for r in results[7][0].inserted] == [6]

    stored = {did: await store.history(did, None, None, None, 1000) for did in stoves}
    assert [len(stored[did]) for did in stoves] == [17, 25, 8, 6]
    for did in stoves:  # the rollups sum exactly the stored readings, device and project
        months = await store.aggregates(did, "month", None, None)
        assert sum(c["energyKwh"]["count"] for c in months.values()) == len(stored[did])
        total = sum(c["energyKwh"]["sum"] for c in months.values())
        assert total == pytest.approx(sum(r.values["energyKwh"] for r in stored[did]))
    everything = [r for readings in stored.values() for r in readings]
    for interval in ("hour", "day", "month"):
        project = await store.aggregates(farm.project, interval, None, None)
        assert sum(c["energyKwh"]["count"] for c in project.values()) == len(everything)
        total = sum(c["energyKwh"]["sum"] for c in project.values())
        assert total == pytest.approx(sum(r.values["energyKwh"] for r in everything))


async def test_a_caller_whose_batches_fail_fails_alone(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group fails as a whole, then each caller is written on its own: only the
    caller with the failing batch gets the error, the others their results."""
    farm = await build_farm(registry)
    good, bad, other = await farm.stove(), await farm.stove(), await farm.stove()
    store = registry.platform.telemetry.store
    start = bucket_of(datetime.now(UTC) - timedelta(hours=5), "hour")
    real_write = TelemetryStore._write

    async def write(self: TelemetryStore, driver: Any, batches: list[Batch], events: Any) -> Any:
        if any(batch.did == bad for batch in batches):
            raise OperationalError("INSERT", {}, Exception("disk I/O error"))
        return await real_write(self, driver, batches, events)

    monkeypatch.setattr(TelemetryStore, "_write", write)
    results = await asyncio.gather(
        store.store_many([_batch(good, farm.project, range(1, 4), start)]),
        store.store_many([_batch(other, farm.project, range(1, 3), start)]),
        store.store_many([_batch(bad, farm.project, range(1, 3), start)]),
        store.store_many([_batch(good, farm.project, range(4, 6), start)]),
        return_exceptions=True,
    )
    assert isinstance(results[2], OperationalError)
    ok = [r for n, r in enumerate(results) if n != 2]
    assert all(isinstance(r, list) for r in ok)
    assert [len(r[0].inserted) for r in ok if isinstance(r, list)] == [3, 2, 2]
    assert [r.seq for r in await store.history(good, None, None, None, 10)] == [1, 2, 3, 4, 5]
    assert await store.history(bad, None, None, None, 10) == []
    months = await store.aggregates(farm.project, "month", None, None)
    assert sum(c["energyKwh"]["count"] for c in months.values()) == 7


async def test_a_caller_that_leaves_before_its_turn_has_nothing_written(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While one transaction is being written, a waiting caller is cancelled: its batches
    are not written; a caller cancelled while writing hands the rest to the next."""
    farm = await build_farm(registry)
    first, leaving, staying = await farm.stove(), await farm.stove(), await farm.stove()
    store = registry.platform.telemetry.store
    start = bucket_of(datetime.now(UTC) - timedelta(hours=5), "hour")
    release = asyncio.Event()
    real_write = TelemetryStore._write

    async def write(self: TelemetryStore, driver: Any, batches: list[Batch], events: Any) -> Any:
        if any(batch.did == first for batch in batches):
            await release.wait()  # the first transaction stays open until told
        return await real_write(self, driver, batches, events)

    monkeypatch.setattr(TelemetryStore, "_write", write)
    writing = asyncio.create_task(
        store.store_many([_batch(first, farm.project, range(1, 3), start)])
    )
    await asyncio.sleep(0.05)
    left = asyncio.create_task(
        store.store_many([_batch(leaving, farm.project, range(1, 3), start)])
    )
    stays = asyncio.create_task(
        store.store_many([_batch(staying, farm.project, range(1, 4), start)])
    )
    await asyncio.sleep(0.05)
    left.cancel()
    release.set()
    (stored_first,) = await writing
    (stored_staying,) = await stays
    with pytest.raises(asyncio.CancelledError):
        await left
    assert len(stored_first.inserted) == 2 and len(stored_staying.inserted) == 3
    assert await store.history(leaving, None, None, None, 10) == []

    # A caller that took others' batches into its transaction is cancelled mid-write:
    # the next caller to get the writer writes them.
    marker = await farm.stove()
    stuck = asyncio.Event()  # never set: a transaction with the marker's batch stays open
    release.clear()

    async def write_slowly(
        self: TelemetryStore, driver: Any, batches: list[Batch], events: Any
    ) -> Any:
        if any(batch.did == marker for batch in batches):
            await stuck.wait()
        return await write(self, driver, batches, events)

    monkeypatch.setattr(TelemetryStore, "_write", write_slowly)
    holder = asyncio.create_task(
        store.store_many([_batch(first, farm.project, range(3, 5), start)])
    )
    await asyncio.sleep(0.05)
    leader = asyncio.create_task(
        store.store_many([_batch(marker, farm.project, range(1, 3), start)])
    )
    waiting = [
        asyncio.create_task(store.store_many([_batch(d, farm.project, range(10, 12), start)]))
        for d in (leaving, staying)
    ]
    await asyncio.sleep(0.05)
    release.set()  # the holder commits; the leader takes its own and the two waiting
    await holder
    await asyncio.sleep(0.05)
    leader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leader
    after: list[list[StoredBatch]] = await asyncio.wait_for(asyncio.gather(*waiting), 30)
    assert [len(result[0].inserted) for result in after] == [2, 2]
    assert [r.seq for r in await store.history(first, None, None, None, 10)] == [1, 2, 3, 4]
    assert await store.history(marker, None, None, None, 10) == []
