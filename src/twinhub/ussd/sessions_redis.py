"""USSD sessions in Redis, so that several gateway processes serve one session.

Keys (all under REDIS_KEY_PREFIX):
- `ussd:session:<id>`: the serialised record, expiring after ttl + retention;
- `ussd:active`: sorted set of active session ids scored by their expiry time;
- `ussd:lock:<id>`: the per-session lock (redis-py's Lock: token-checked release, auto-expiry).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import LockError

from twinhub.ussd.sessions import ACTIVE, Session, SessionBusy


class RedisSessionStore:
    def __init__(
        self,
        client: Redis,
        prefix: str,
        ttl: float,
        retention: float,
        lock_timeout: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ttl = ttl
        self._client = client
        self._prefix = prefix
        self._keep_ms = int((ttl + retention) * 1000)
        self._lock_timeout = lock_timeout
        self._clock = clock
        self._index = f"{prefix}ussd:active"

    def _key(self, session_id: str) -> str:
        return f"{self._prefix}ussd:session:{session_id}"

    def lock(self, session_id: str) -> Any:
        return self._hold(session_id)

    @asynccontextmanager
    async def _hold(self, session_id: str) -> AsyncIterator[None]:
        lock = self._client.lock(
            f"{self._prefix}ussd:lock:{session_id}",
            timeout=self._lock_timeout * 4,  # frees the session if a holder process dies
            blocking_timeout=self._lock_timeout,
        )
        if not await lock.acquire():
            raise SessionBusy(session_id)
        try:
            yield
        finally:
            # LockError: it expired while held, and the next holder already owns it.
            with contextlib.suppress(LockError):
                await lock.release()

    async def load(self, session_id: str) -> Session | None:
        blob = await self._client.get(self._key(session_id))
        return Session.loads(blob) if blob is not None else None

    async def save(self, session: Session) -> None:
        now = self._clock()
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.set(self._key(session.session_id), session.dumps(), px=self._keep_ms)
            if session.status == ACTIVE:
                pipe.zadd(self._index, {session.session_id: now + self.ttl})
            else:
                pipe.zrem(self._index, session.session_id)
            # Sessions abandoned without END leave the index here, not only when an operator
            # lists them, so the index stays as small as the set of live sessions.
            pipe.zremrangebyscore(self._index, "-inf", now)
            await pipe.execute()

    async def active_ids(self) -> list[str]:
        now = self._clock()
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.zremrangebyscore(self._index, "-inf", now)
            pipe.zrange(self._index, 0, -1)
            _, members = await pipe.execute()
        return [m.decode() if isinstance(m, bytes) else m for m in members]

    async def ping(self) -> bool:
        return bool(await self._client.ping())

    async def close(self) -> None:
        """The client belongs to the platform, which closes it."""
