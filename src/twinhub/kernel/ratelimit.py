"""Per-client request limits (the `limits` library), in memory or shared through Redis.

A sliding-window counter keeps O(1) state per client and has no burst at window edges. When
the counter store fails the request is let through and the failure logged: an outage of the
limiter must not take the gateway down with it.

Without Redis the counters live in this process, and the library's in-memory storage (async
wrappers, string keys per window, a timer task for expiry) cost about as much as a whole
USSD reply: `MemoryCounter` keeps the same sliding-window arithmetic in a dictionary.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from limits import RateLimitItem
from limits.aio.storage import MemoryStorage, RedisStorage, Storage
from limits.aio.strategies import SlidingWindowCounterRateLimiter

from twinhub.logging import get_logger, scrub

log = get_logger(__name__)


class MemoryCounter:
    """The `limits` sliding-window counter (a current window's count plus the previous
    window's, weighted by how much of it still overlaps the last `expiry` seconds) for the
    clients of one process."""

    def __init__(self, item: RateLimitItem, clock: Callable[[], float] = time.time) -> None:
        self._limit = item.amount
        self._expiry = float(item.get_expiry())
        self._clock = clock
        self._windows: dict[str, list[int]] = {}  # client: [window number, current, previous]
        self._sweep_at = 0.0  # the end of the window of the last sweep
        self._window = -1  # that window's number, and its start:
        self._window_start = math.inf

    def hit(self, client: str, cost: int = 1) -> int | None:
        """None when allowed (and counted, `cost` times); else the seconds until it would
        pass."""
        now = self._clock()
        if self._window_start <= now < self._sweep_at:
            # Within the window of the last sweep (so no sweep is due), a client of this
            # window whose two counts and `cost` fit the limit passes whatever the previous
            # count's weight (at most 1): what the arithmetic below answers, without it.
            state = self._windows.get(client)
            if (
                state is not None
                and state[0] == self._window
                and state[1] + state[2] + cost <= self._limit
            ):
                state[1] += cost
                return None
        return self._hit(now, client, cost)

    def _hit(self, now: float, client: str, cost: int) -> int | None:
        expiry = self._expiry
        window = int(now // expiry)
        if now >= self._sweep_at:  # forget clients idle for two windows, once a window
            self._windows = {c: w for c, w in self._windows.items() if w[0] >= window - 1}
            self._sweep_at = (window + 1) * expiry
            self._window, self._window_start = window, window * expiry
        state = self._windows.get(client)
        if state is None:
            state = self._windows[client] = [window, 0, 0]
        elif state[0] != window:
            state[2] = state[1] if state[0] == window - 1 else 0
            state[0], state[1] = window, 0
        _, current, previous = state
        into = now - window * expiry
        if math.floor(previous * (expiry - into) / expiry + current) + cost <= self._limit:
            state[1] = current + cost
            return None
        if current + cost <= self._limit and previous:
            wait = expiry * (1 - (self._limit - current - cost + 1) / previous) - into
        else:  # not before the next window, where this one's count still weighs
            wait = expiry - into + max(0.0, expiry * (1 - self._limit / max(current, 1)))
        return max(1, math.ceil(wait))

    def clear(self) -> None:
        self._windows.clear()


class RateLimiter:
    def __init__(self, item: RateLimitItem, storage: Storage, namespace: str) -> None:
        self._item = item
        self._storage = storage
        self._limiter = SlidingWindowCounterRateLimiter(storage)
        self._namespace = namespace
        self._memory = MemoryCounter(item) if isinstance(storage, MemoryStorage) else None

    @property
    def memory(self) -> MemoryCounter | None:
        """The in-process counter (no Redis): its `hit` answers without awaiting."""
        return self._memory

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

    async def hit(self, client: str, cost: int = 1) -> int | None:
        """None when allowed; else the seconds after which the client may try again.
        `cost` counts several requests at once (MQTT messages handled as one group)."""
        if self._memory is not None:
            return self._memory.hit(client, cost)
        try:
            if await self._limiter.hit(self._item, self._namespace, client, cost=cost):
                return None
            stats = await self._limiter.get_window_stats(self._item, self._namespace, client)
        except Exception as error:  # the limiter's store is down: fail open, loudly
            log.warning("rate limiter unavailable", error=scrub(str(error)))
            return None
        return max(1, math.ceil(stats.reset_time - time.time()))

    async def reset(self) -> None:
        if self._memory is not None:
            self._memory.clear()
        await self._storage.reset()
