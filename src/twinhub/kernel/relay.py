"""Bus signals every process must hear, carried between processes through Redis pub/sub.

The bus is in-process (kernel/bus.py): work between processes goes through the database
and each worker's poll. A few signals cannot wait for a poll: a revoked API key must stop
working in every worker's key cache at once, not when the cache entry expires. With Redis
(several workers need it), such a signal, once sent on a process's bus, is published on one
channel; every other process sends it again on its own bus. Without Redis there is one
worker, whose bus already heard it.

A relayed signal is a hint, never the record: a process that missed it (Redis away, a
moment before its subscription) still meets the truth in the database when its cache
entry expires.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from collections.abc import Iterable

from redis.asyncio import Redis
from redis.exceptions import RedisError

from twinhub.kernel.bus import Bus, Message
from twinhub.logging import get_logger, scrub

log = get_logger(__name__)
_POLL_SECONDS = 1.0
_BACKOFF_MAX_SECONDS = 10.0
_READY_WAIT_SECONDS = 2.0


class Relay:
    """Publishes this process's `topics` signals on `channel` and sends other processes'
    on this process's bus."""

    def __init__(self, bus: Bus, redis: Redis, channel: str, topics: Iterable[str]) -> None:
        self._bus = bus
        self._redis = redis
        self._channel = channel
        self._topics = frozenset(topics)
        self.origin = secrets.token_hex(8)
        self._incoming = False  # sending another process's signal: not published again
        self._pending: set[asyncio.Task[object]] = set()
        self._listener: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()
        for topic in self._topics:
            bus.on(topic, self._outgoing)

    async def start(self) -> None:
        """Listen to the other processes (waiting briefly until subscribed)."""
        if self._listener is None:
            self._listener = asyncio.create_task(self._listen(), name="bus-relay")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._subscribed.wait(), _READY_WAIT_SECONDS)

    async def stop(self) -> None:
        """Finish publishing what this process sent (a command's revocation reaches the
        servers before the command exits), then stop listening."""
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        if self._listener is not None:
            self._listener.cancel()
            await asyncio.gather(self._listener, return_exceptions=True)
            self._listener = None

    def _outgoing(self, message: Message) -> None:
        if self._incoming:
            return
        payload = json.dumps({"origin": self.origin, "topic": message.type})
        task: asyncio.Task[object] = asyncio.ensure_future(self._publish(payload))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _publish(self, payload: str) -> object:
        try:
            return await self._redis.publish(self._channel, payload)
        except (RedisError, OSError) as error:
            log.warning("bus relay could not publish", error=scrub(str(error)))
            return None

    async def _listen(self) -> None:
        backoff = 0.5
        while True:
            pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self._channel)
                self._subscribed.set()
                backoff = 0.5
                while True:
                    message = await pubsub.get_message(
                        ignore_subscribe_messages=True, timeout=_POLL_SECONDS
                    )
                    if message is not None and message.get("type") == "message":
                        self._received(message["data"])
            except (RedisError, OSError) as error:
                self._subscribed.set()
                log.warning("bus relay lost Redis; retrying", error=scrub(str(error)))
            finally:
                with contextlib.suppress(RedisError, OSError):
                    await pubsub.aclose()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _BACKOFF_MAX_SECONDS)

    def _received(self, data: bytes | str) -> None:
        try:
            decoded = json.loads(data)
            origin, topic = str(decoded["origin"]), str(decoded["topic"])
        except (ValueError, KeyError, TypeError):
            return
        if origin == self.origin or topic not in self._topics:
            return
        self._incoming = True
        try:
            self._bus.signal(topic)
        finally:
            self._incoming = False
