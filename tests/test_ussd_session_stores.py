"""Session stores on their own: what they keep, and for how long."""

from __future__ import annotations

from redis.asyncio import Redis

from tests.conftest import REDIS_URL
from twinhub.ussd.sessions import ENDED, MemorySessionStore, Session
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
