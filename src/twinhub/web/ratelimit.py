"""Per-client request limits (the `limits` library), in memory or shared through Redis.

A sliding-window counter keeps O(1) state per client and has no burst at window edges. When
the counter store fails the request is let through and the failure logged: an outage of the
limiter must not take the gateway down with it.
"""

from __future__ import annotations

import math
import time

from limits import RateLimitItem
from limits.aio.storage import MemoryStorage, RedisStorage, Storage
from limits.aio.strategies import SlidingWindowCounterRateLimiter

from twinhub.logging import get_logger, scrub

log = get_logger(__name__)


class RateLimiter:
    def __init__(self, item: RateLimitItem, storage: Storage, namespace: str) -> None:
        self._item = item
        self._storage = storage
        self._limiter = SlidingWindowCounterRateLimiter(storage)
        self._namespace = namespace

    @classmethod
    def create(
        cls, item: RateLimitItem, redis_url: str | None, key_prefix: str, namespace: str
    ) -> RateLimiter:
        if redis_url:
            uri = "async+" + redis_url if not redis_url.startswith("async+") else redis_url
            storage: Storage = RedisStorage(
                uri, implementation="redispy", key_prefix=f"{key_prefix}limits"
            )
        else:
            storage = MemoryStorage()
        return cls(item, storage, namespace)

    async def hit(self, client: str) -> int | None:
        """None when allowed; else the seconds after which the client may try again."""
        try:
            if await self._limiter.hit(self._item, self._namespace, client):
                return None
            stats = await self._limiter.get_window_stats(self._item, self._namespace, client)
        except Exception as error:  # the limiter's store is down: fail open, loudly
            log.warning("rate limiter unavailable", error=scrub(str(error)))
            return None
        return max(1, math.ceil(stats.reset_time - time.time()))

    async def reset(self) -> None:
        await self._storage.reset()
