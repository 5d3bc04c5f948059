"""The telemetry write path on the driver's connection (issue 12, item 9), on both backends:
concurrent writers of one device never store a seq twice, a write that rolls back leaves
nothing behind (device row, staging table, cached ids), the device state saved without the
ORM reads back through it, and a device token's revocation reaches a process that cached
its lookup within the documented bound."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from tests.conftest import Registry
from tests.integration.registry.test_registry_rules import error_of
from tests.support.telemetry_world import at, build_farm
from twinhub.db.models import TelemetryDevice, TelemetryReading
from twinhub.mrv.rollups import bucket_of
from twinhub.mrv.telemetry_schema import Reading
from twinhub.services.device_tokens import CACHE_SECONDS, DeviceTokenService
from twinhub.telemetry.dialects.sqlite import sqlite_time
from twinhub.telemetry.rows import Batch
from twinhub.telemetry.store import READINGS, TelemetryStore


def _store_like(registry: Registry) -> TelemetryStore:
    """Another process's store: same database, none of this one's locks or caches."""
    platform = registry.platform
    return TelemetryStore(
        platform.sessionmaker,
        platform.settings.telemetry.offline_after_seconds,
    )


async def test_concurrent_writers_of_one_device_store_each_seq_once(registry: Registry) -> None:
    """Four stores (as four processes would) write overlapping seqs of one device at once:
    every seq is stored, counted and rolled up exactly once, whoever wins it."""
    farm = await build_farm(registry)
    stove = await farm.stove()
    hour = bucket_of(datetime.now(UTC) - timedelta(hours=2), "hour")
    stores = [_store_like(registry) for _ in range(4)]

    def batch(seqs: range) -> Batch:
        readings = [Reading(s, hour + timedelta(seconds=s), {"energyKwh": 1.0}) for s in seqs]
        return Batch(stove, readings, ["energyKwh"], None, [farm.project])

    # Writer n sends seqs 10n .. 10n+29: each seq but the first and last ten is sent twice
    # or three times, by different writers.
    groups = [[batch(range(10 * n, 10 * n + 30))] for n in range(4)]
    results = await asyncio.gather(*(s.store_many(g) for s, g in zip(stores, groups, strict=True)))
    inserted = [r.seq for (result,) in results for r in result.inserted]
    assert sorted(inserted) == list(range(60))  # each of the 60 seqs stored by one writer
    assert sum(result.duplicates for (result,) in results) == 4 * 30 - 60

    async with registry.platform.sessionmaker() as session:
        device = await session.scalar(select(TelemetryDevice).where(TelemetryDevice.did == stove))
        assert device is not None
        stored = await session.scalar(
            select(func.count()).select_from(READINGS).where(READINGS.c.device_id == device.id)
        )
    assert stored == 60 and device.readings == 60
    assert device.last_seq == 59 and device.last_time == hour + timedelta(seconds=59)
    cells = await registry.platform.telemetry.store.aggregates(stove, "hour", None, None)
    assert cells[hour]["energyKwh"]["count"] == 60
    project = await registry.platform.telemetry.store.aggregates(farm.project, "day", None, None)
    assert sum(cell["energyKwh"]["count"] for cell in project.values()) == 60


async def test_a_write_that_rolls_back_leaves_no_device_row_nor_staging_state(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A device's first write fails at its last step, on connections that never staged
    readings: its new device row goes with it, and the next write (which must make the row
    and the staging table again, not trust that they exist) stores everything."""
    farm = await build_farm(registry)
    stove = await farm.stove()
    await registry.platform.engine.dispose()  # fresh connections: no staging table yet
    store = _store_like(registry)
    moment = datetime.now(UTC) - timedelta(minutes=5)
    batch = Batch(stove, [Reading(1, moment, {"energyKwh": 2.0})], ["energyKwh"], None, [])

    async def failing(*_: Any) -> None:
        raise RuntimeError("the rollups fail")

    async def counts() -> tuple[Any, Any]:
        async with registry.platform.sessionmaker() as session:
            rows = await session.scalar(
                select(func.count())
                .select_from(TelemetryDevice)
                .where(TelemetryDevice.did == stove)
            )
            readings = await session.scalar(select(func.count()).select_from(TelemetryReading))
        return rows, readings

    before = await counts()  # the database may hold other tests' readings
    monkeypatch.setattr(store, "_roll_up", failing)
    with pytest.raises(RuntimeError):
        await store.store_many([batch])
    assert await counts() == before and before[0] == 0
    monkeypatch.undo()
    (stored,) = await store.store_many([batch])
    assert [r.seq for r in stored.inserted] == [1]
    assert stored.state["readings"] == 1 and stored.state["lastTime"] == moment
    state = (await registry.client.get(f"/v1/domains/{stove}/state")).json()
    assert state["readings"] == 1 and state["latest"]["energyKwh"]["value"] == 2.0


async def test_state_saved_by_the_write_path_reads_back_and_advances(registry: Registry) -> None:
    """Latest values, meter and last reading as the ORM reads them back, and a late batch
    changing only what is newer than the state holds."""
    farm = await build_farm(registry)
    stove = await farm.stove()
    now = datetime.now(UTC)
    sent = await farm.send(
        stove,
        [
            {"seq": 1, "time": at(now, -2), "values": {"meterKwh": 5.0, "batteryPct": 80}},
            {"seq": 2, "time": at(now, -1), "values": {"meterKwh": 6.5}},
        ],
    )
    assert sent.json()["accepted"] == 2
    late = await farm.send(
        stove, [{"seq": 3, "time": at(now, -3), "values": {"meterKwh": 1.0, "batteryPct": 50}}]
    )
    assert late.json()["accepted"] == 1
    state = (await farm.registry.client.get(f"/v1/domains/{stove}/state")).json()
    assert state["lastSeq"] == 2 and state["readings"] == 3 and state["meterTotal"] == 6.5
    assert state["latest"]["batteryPct"]["value"] == 80  # seq 3 is older than seq 1
    assert state["lastSeen"] == (now + timedelta(hours=-1)).astimezone(UTC).isoformat()


def test_sqlite_time_is_the_text_sqlalchemy_writes() -> None:
    from sqlalchemy.dialects import sqlite

    process = READINGS.c.time.type._cached_bind_processor(sqlite.dialect())
    assert process is not None
    for moment in (
        datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
        datetime(2026, 11, 23, 22, 0, tzinfo=UTC),
        datetime(999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2026, 6, 1, 12, 30, tzinfo=UTC).astimezone(),  # another zone: as UTC
    ):
        assert sqlite_time(moment) == process(moment)


async def test_a_revoked_token_is_refused_everywhere_within_the_cache_bound(
    registry: Registry,
) -> None:
    """The process that revokes a token refuses it at once; another process that looked
    it up in the last CACHE_SECONDS may accept it until its lookup is that old, never
    later (a clock the test moves stands in for the time passing)."""
    farm = await build_farm(registry)
    stove = await farm.stove()
    token = farm.tokens[stove]
    clock = [1000.0]
    other = DeviceTokenService(registry.platform.sessionmaker, clock=lambda: clock[0])
    assert (await other.authenticate(token)) is not None  # looked up and cached there

    listed = await registry.client.get(f"/v1/domains/{stove}/device-tokens")
    token_id = listed.json()["items"][0]["id"]
    revoked = await registry.client.delete(f"/v1/domains/{stove}/device-tokens/{token_id}")
    assert revoked.status_code == 200, revoked.text
    now = datetime.now(UTC)
    refused = await farm.send(stove, [{"seq": 1, "time": at(now, -1), "values": {"fuelKg": 1}}])
    error_of(refused, 401)  # the revoking process: at once

    clock[0] += CACHE_SECONDS - 0.1
    assert (await other.authenticate(token)) is not None  # within the bound: still cached
    assert (await other.by_id(token_id)) is None  # never looked up there: refused
    clock[0] += 0.2
    assert (await other.authenticate(token)) is None  # past the bound: refused
    assert (await other.authenticate(token + "x")) is None  # a wrong secret, always


async def test_a_group_of_token_ids_is_looked_up_at_once_with_the_same_cache_bound(
    registry: Registry,
) -> None:
    """An MQTT group's token ids (`by_ids`): each answers as `by_id` would (unknown and
    over-long ids: None), and a revoked one is refused once its lookup is CACHE_SECONDS
    old, never later."""
    farm = await build_farm(registry)
    stoves = [await farm.stove(), await farm.stove()]
    ids = []
    for stove in stoves:
        listed = await registry.client.get(f"/v1/domains/{stove}/device-tokens")
        ids.append(listed.json()["items"][0]["id"])
    clock = [1000.0]
    other = DeviceTokenService(registry.platform.sessionmaker, clock=lambda: clock[0])
    found = await other.by_ids({*ids, "unknown", "x" * 17})
    assert [found[i].domain if found[i] else None for i in ids] == stoves
    assert found["unknown"] is None and found["x" * 17] is None
    assert await other.by_id(ids[0]) == found[ids[0]]

    revoked = await registry.client.delete(f"/v1/domains/{stoves[1]}/device-tokens/{ids[1]}")
    assert revoked.status_code == 200, revoked.text
    clock[0] += CACHE_SECONDS - 0.1
    assert (await other.by_ids({ids[1]}))[ids[1]] is not None  # within the bound: cached
    clock[0] += 0.2
    again = await other.by_ids(set(ids))
    assert again[ids[1]] is None and again[ids[0]] == found[ids[0]]  # looked up again
