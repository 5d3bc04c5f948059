"""Session stores on their own: what they keep, and for how long."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from tests.conftest import REDIS_URL
from twinhub.ussd.sessions import ENDED, KeyedLocks, MemorySessionStore, Session, SessionBusy
from twinhub.ussd.sessions_redis import RedisSessionStore


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def session(session_id: str, status: str = "active") -> Session:
    return Session(session_id, "+254712345678", "*384#", "preMenu", status=status)


async def test_redis_index_forgets_abandoned_sessions_without_an_operator(
    redis_prefix: str,
) -> None:
    clock = Clock()
    client = Redis.from_url(REDIS_URL)
    prefix = f"{redis_prefix}stores:"
    store = RedisSessionStore(client, prefix, ttl=60, retention=0, lock_timeout=1, clock=clock)
    try:
        for number in range(50):
            await store.save(session(f"abandoned-{number}"))
        clock.now += 61  # all fifty expired, nobody listed them
        await store.save(session("fresh"))
        assert await client.zcard(f"{prefix}ussd:active") == 1
        await store.save(session("fresh", status=ENDED))
        assert await client.zcard(f"{prefix}ussd:active") == 0
        assert (await store.load("fresh")).status == ENDED  # the record itself remains
    finally:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()


async def test_memory_store_forgets_after_ttl_plus_retention() -> None:
    clock = Clock()
    store = MemorySessionStore(ttl=60, retention=30, max_sessions=100, lock_timeout=1, clock=clock)
    await store.save(session("old"))
    clock.now += 61
    assert await store.active_ids() == []
    assert await store.load("old") is not None  # expired but remembered: "dial again"
    clock.now += 30
    await store.save(session("new"))
    assert await store.load("old") is None
    assert len(store) == 1


async def test_keyed_locks_serialise_time_out_and_forget_every_key() -> None:
    """Holders of one key run one at a time, a waiter past its time gets SessionBusy, a
    cancelled waiter leaves nothing behind, and no key outlives its last holder."""
    locks = KeyedLocks()
    order: list[str] = []

    async def step(name: str, wait: float = 5.0) -> None:
        async with locks.hold("s", wait):
            order.append(f"{name} in")
            await asyncio.sleep(0.01)
            order.append(f"{name} out")

    await asyncio.gather(step("a"), step("b"), step("c"))
    assert order == ["a in", "a out", "b in", "b out", "c in", "c out"]
    assert len(locks) == 0
    async with locks.hold("s", 1):
        with pytest.raises(SessionBusy):
            async with locks.hold("s", 0.05):
                raise AssertionError("entered a held lock")
        waiter = asyncio.ensure_future(step("d"))
        await asyncio.sleep(0.01)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert len(locks) == 1  # only the holder
    assert len(locks) == 0
    with pytest.raises(RuntimeError):
        async with locks.hold("t", 1):
            raise RuntimeError("a failed step releases its session")
    assert len(locks) == 0
    async with locks.hold("t", 0.05):  # and the key can be held again at once
        pass
