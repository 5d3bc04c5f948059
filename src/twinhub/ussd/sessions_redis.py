"""USSD sessions in Redis, so that several gateway processes serve one session.

Keys (all under REDIS_KEY_PREFIX):
- `ussd:session:<id>`: the serialised record, expiring after ttl + retention;
- `ussd:active`: sorted set of active session ids scored by their expiry time;
- `ussd:lock:<id>`: the per-session lock: a random token, expiring by itself if its holder
  dies, released only by the holder of that token.

A request costs two round trips: one script takes the lock and returns the record, another
saves the record and releases the lock. (Lock, get, save and unlock as four commands
made the store the gateway's bottleneck.) All keys of a request are on one Redis node;
Redis Cluster is not supported.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from twinhub.ussd.sessions import ACTIVE, Session, SessionBusy

# KEYS: lock, session. ARGV: token, lock expiry (ms). -> {1, record or nothing} | {0}
_LOCK_AND_LOAD = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('GET', KEYS[2])}
end
return {0}
"""
# KEYS: session, index, lock. ARGV: record, keep (ms), active, expiry, now, id, token.
_SAVE_AND_UNLOCK = """
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if ARGV[3] == '1' then
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[6])
else
  redis.call('ZREM', KEYS[2], ARGV[6])
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[5])
if ARGV[7] ~= '' and redis.call('GET', KEYS[3]) == ARGV[7] then
  redis.call('DEL', KEYS[3])
end
return 1
"""
# KEYS: lock. ARGV: token.
_UNLOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


@dataclass
class _Held:
    """A lock this process holds, and the record that came with it."""

    token: str
    record: bytes | None
    loaded: bool = False
    released: bool = False


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
        self._lock_expiry_ms = int(lock_timeout * 4 * 1000)  # frees it if a holder dies
        self._clock = clock
        self._index = f"{prefix}ussd:active"
        self._lock_and_load = client.register_script(_LOCK_AND_LOAD)
        self._save_and_unlock = client.register_script(_SAVE_AND_UNLOCK)
        self._unlock = client.register_script(_UNLOCK)
        self._held: dict[str, _Held] = {}

    def _key(self, session_id: str) -> str:
        return f"{self._prefix}ussd:session:{session_id}"

    def _lock_key(self, session_id: str) -> str:
        return f"{self._prefix}ussd:lock:{session_id}"

    def lock(self, session_id: str) -> Any:
        return self._hold(session_id)

    @asynccontextmanager
    async def _hold(self, session_id: str) -> AsyncIterator[None]:
        token = secrets.token_hex(16)
        keys = [self._lock_key(session_id), self._key(session_id)]
        deadline = time.monotonic() + self._lock_timeout
        pause = 0.005
        while True:
            answer = await self._lock_and_load(keys=keys, args=[token, self._lock_expiry_ms])
            if answer[0] == 1:
                break
            if time.monotonic() >= deadline:
                raise SessionBusy(session_id)
            await asyncio.sleep(pause)  # another request of this session is being answered
            pause = min(pause * 2, 0.05)
        held = _Held(token, answer[1] if len(answer) > 1 else None)
        self._held[session_id] = held
        try:
            yield
        finally:
            if self._held.get(session_id) is held:
                del self._held[session_id]
            if not held.released:
                # On failure the lock would expire by itself; don't hide the first error.
                with contextlib.suppress(RedisError):
                    await self._unlock(keys=[self._lock_key(session_id)], args=[token])

    async def load(self, session_id: str) -> Session | None:
        held = self._held.get(session_id)
        if held is not None and not held.loaded:
            held.loaded = True
            return Session.loads(held.record) if held.record is not None else None
        blob = await self._client.get(self._key(session_id))
        return Session.loads(blob) if blob is not None else None

    async def save(self, session: Session) -> None:
        """Store the record; when this request holds the session's lock, release it too."""
        held = self._held.get(session.session_id)
        token = held.token if held is not None and not held.released else ""
        now = self._clock()
        await self._save_and_unlock(
            keys=[self._key(session.session_id), self._index, self._lock_key(session.session_id)],
            args=[
                session.dumps(),
                self._keep_ms,
                "1" if session.status == ACTIVE else "0",
                now + self.ttl,
                now,
                session.session_id,
                token,
            ],
        )
        if held is not None and token:
            held.released = True

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
