"""Publish/subscribe of telemetry events, for the server-sent event streams.

Each subscriber has a bounded queue; a subscriber too slow to keep up loses events (counted
in `dropped`) rather than growing memory or slowing ingestion.

Why Redis: `twinhub serve --workers N` runs N processes, and a reading (HTTP or MQTT) is
stored by whichever process received it, while a browser's stream is held by one process,
perhaps another. With `REDIS_URL` set, the hub also sends every event on one Redis pub/sub
channel, `{REDIS_KEY_PREFIX}telemetry:live` (so platforms or test runs with other prefixes
never see each other's events), and a relay hands the channel's messages to this process's
subscribers. Without Redis the hub is what it always was: in-process only.

Exactly once, by origin: an event is handed to this process's subscribers at once, and sent
on the channel tagged with this hub's random origin id; the relay skips messages of its own
origin. (Rather than publishing only through Redis: local streams then never depend on
Redis, a Redis outage loses only other processes' events, and a local event takes no round
trip.)

One channel subscription per process: opened when the process first has a subscriber (a
process that never serves a stream, such as the USSD gateway or a one-shot command, never
subscribes) and kept until the hub stops, so browsers coming and going cause no subscribe
and unsubscribe traffic. Every subscribed worker receives every event (one per stored batch,
not per reading); events for topics nobody here watches are dropped after a dict lookup.

Ingestion never waits on Redis: `publish` stays synchronous and puts the event in a bounded
outbox that one task sends, in order. When Redis fails, the task logs a warning (without the
URL's credentials), counts the events it could not send in `relay_dropped` (and drops, also
counted, those published while it backs off: a stale live event is worse than none), and
tries again with exponential back-off; the relay resubscribes likewise. Events published by
other processes while this one's subscription was down are lost (pub/sub keeps nothing), so
a gap is announced instead: when the relay subscribes again after losing Redis, and when a
publisher that dropped events can send again (a message on the channel), every subscriber
gets `RESYNC`, and the event streams answer it with a fresh `state` of their twin, so a
browser's view is current again (the readings in between are in the history, not replayed).

The platform starts the hub (`Platform.start`, whatever BACKGROUND_WORKERS_ENABLED says:
every registry process ingests HTTP readings and serves streams) and stops it before closing
Redis. `GET /v1/telemetry/rejections` shows the counters (`live`). A message on the channel
that is not a hub's is counted in `relay_dropped` and skipped.

Payloads are JSON (orjson). A value JSON has no type for is written as `str(value)`, what
the SSE frames (`sse_frame`, `json.dumps(..., default=str)`) write for it, so a stream
serves the same text whether its event came from this process or through Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.exceptions import RedisError

from twinhub.logging import get_logger, scrub

log = get_logger(__name__)

QUEUE_SIZE = 1000  # events a subscriber may have waiting
OUTBOX_SIZE = 10_000  # events waiting to be sent to Redis
BACKOFF_FIRST_SECONDS = 0.5
BACKOFF_MAX_SECONDS = 30.0
READY_WAIT_SECONDS = 3.0  # how long a first subscriber waits for the relay's subscription
_POLL_SECONDS = 1.0
# As json.dumps(default=str): datetimes, dates, times and dataclasses become str(value),
# other keys than strings become strings (orjson would write its own formats or refuse).
_DUMPS_OPTIONS = (
    orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_NON_STR_KEYS
)

Event = dict[str, Any]
RESYNC: Event = {"event": "resync"}  # events may have been missed: read the state again


def live_channel(key_prefix: str) -> str:
    """The Redis pub/sub channel of a platform's live telemetry events."""
    return f"{key_prefix}telemetry:live"


def encode(origin: str, topics: list[str], event: Event) -> bytes:
    """A channel message: origin, topics and event, as JSON."""
    return orjson.dumps({"o": origin, "t": topics, "e": event}, default=str, option=_DUMPS_OPTIONS)


def decode(data: bytes | str) -> tuple[str, list[str], Event] | None:
    """A channel message's origin, topics and event; None when it is not one."""
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(message, dict):
        return None
    origin, topics, event = message.get("o"), message.get("t"), message.get("e")
    if (
        not isinstance(origin, str)
        or not isinstance(topics, list)
        or not all(isinstance(topic, str) for topic in topics)
        or not isinstance(event, dict)
    ):
        return None
    return origin, topics, event


class LiveHub:
    """In-process subscribers by topic (a twin's or project's DID), relayed across
    processes through Redis when `redis` is given (see the module's docstring)."""

    def __init__(self, redis: Redis | None = None, channel: str | None = None) -> None:
        if (redis is None) != (channel is None):
            raise ValueError("a Redis-backed hub needs both redis and channel")
        self._subscribers: dict[str, set[asyncio.Queue[Event]]] = defaultdict(set)
        self.dropped = 0  # events a subscriber too slow lost
        self.relay_dropped = 0  # events not sent through Redis, or unreadable from it
        self._redis = redis
        self._channel = channel
        self.origin = secrets.token_hex(8)
        self._outbox: asyncio.Queue[tuple[list[str], Event]] | None = None
        self._publisher: asyncio.Task[None] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._publish_failing = False  # the publisher is backing off: publish drops
        self._listen_failing = False
        self._tried = asyncio.Event()  # the relay's first subscription attempt ended

    @property
    def relayed(self) -> bool:
        """Whether events travel between processes (Redis configured and the hub started)."""
        return self._outbox is not None

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        """Begin sending events to Redis (nothing without Redis); safe to call twice. The
        relay's subscription opens with the first subscriber."""
        if self._redis is None or self._outbox is not None:
            return
        self._outbox = asyncio.Queue(OUTBOX_SIZE)
        self._tried = asyncio.Event()  # made here: bound to the running loop
        self._publisher = asyncio.create_task(self._run_publisher(), name="telemetry-live-out")

    async def stop(self) -> None:
        """Stop sending and relaying; the hub is in-process only again until `start`."""
        tasks = [task for task in (self._publisher, self._listener) if task is not None]
        self._outbox = None
        self._publisher = self._listener = None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tried = asyncio.Event()
        self._publish_failing = self._listen_failing = False

    # -- publishing -----------------------------------------------------------------------
    def publish(self, topics: list[str], event: Event) -> None:
        """Hand `event` to every subscriber of any of `topics` (each gets it once), here and,
        with Redis, in every other process. Never waits."""
        self._deliver(topics, event)
        if self._outbox is None:
            return
        if self._publish_failing:
            self.relay_dropped += 1
            return
        try:
            self._outbox.put_nowait((topics, event))
        except asyncio.QueueFull:
            self.relay_dropped += 1

    def _deliver(self, topics: list[str], event: Event) -> None:
        seen: set[int] = set()
        for topic in topics:
            for queue in self._subscribers.get(topic, ()):
                if id(queue) in seen:
                    continue
                seen.add(id(queue))
                try:
                    queue.put_nowait(event)
                except asyncio.QueueFull:
                    self.dropped += 1

    async def _run_publisher(self) -> None:
        assert self._redis is not None and self._channel is not None and self._outbox is not None
        redis, channel, outbox = self._redis, self._channel, self._outbox
        backoff = BACKOFF_FIRST_SECONDS
        while True:
            topics, event = await outbox.get()
            try:
                payload = encode(self.origin, topics, event)
            except orjson.JSONEncodeError as error:
                self.relay_dropped += 1
                log.warning("live event not encodable", error=str(error))
                continue
            try:
                if backoff > BACKOFF_FIRST_SECONDS:  # others missed what was dropped
                    await redis.publish(channel, encode(self.origin, [], RESYNC))
                await redis.publish(channel, payload)
            except (RedisError, OSError) as error:
                lost = 1 + _empty(outbox)
                self.relay_dropped += lost
                log.warning(
                    "live telemetry events not sent to Redis; retrying",
                    error=f"{type(error).__name__}: {scrub(str(error))}",
                    dropped=lost,
                    retry_in_seconds=backoff,
                )
                self._publish_failing = True
                try:
                    await asyncio.sleep(backoff)
                finally:
                    self._publish_failing = False
                backoff = min(backoff * 2, BACKOFF_MAX_SECONDS)
            else:
                if backoff > BACKOFF_FIRST_SECONDS:
                    log.info("live telemetry events sent to Redis again")
                backoff = BACKOFF_FIRST_SECONDS

    # -- subscribing ----------------------------------------------------------------------
    @asynccontextmanager
    async def subscribe(self, topic: str) -> AsyncIterator[asyncio.Queue[Event]]:
        """A queue of `topic`'s events while the block runs. With Redis, the block begins
        once the process's relay is subscribed (or its first attempt failed, or a few
        seconds passed), so other processes' events published afterwards reach it."""
        queue: asyncio.Queue[Event] = asyncio.Queue(QUEUE_SIZE)
        self._subscribers[topic].add(queue)
        try:
            await self._listening()
            yield queue
        finally:
            self._subscribers[topic].discard(queue)
            if not self._subscribers[topic]:
                del self._subscribers[topic]

    async def _listening(self) -> None:
        if self._outbox is None:
            return
        if self._listener is None:
            self._listener = asyncio.create_task(self._run_listener(), name="telemetry-live-in")
        if not self._tried.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._tried.wait(), READY_WAIT_SECONDS)

    async def _run_listener(self) -> None:
        assert self._redis is not None and self._channel is not None
        backoff = BACKOFF_FIRST_SECONDS
        while True:
            pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self._channel)
                self._tried.set()
                if self._listen_failing:
                    log.info("live telemetry relay subscribed to Redis again")
                    self._deliver(list(self._subscribers), RESYNC)
                self._listen_failing = False
                backoff = BACKOFF_FIRST_SECONDS
                while True:
                    message = await pubsub.get_message(
                        ignore_subscribe_messages=True, timeout=_POLL_SECONDS
                    )
                    if message is not None and message.get("type") == "message":
                        self._relay(message["data"])
            except (RedisError, OSError) as error:
                self._tried.set()
                self._listen_failing = True
                log.warning(
                    "live telemetry relay lost Redis; retrying",
                    error=f"{type(error).__name__}: {scrub(str(error))}",
                    retry_in_seconds=backoff,
                )
            finally:
                with contextlib.suppress(RedisError, OSError):
                    await pubsub.aclose()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX_SECONDS)

    def _relay(self, data: bytes | str) -> None:
        decoded = decode(data)
        if decoded is None:
            self.relay_dropped += 1
            return
        origin, topics, event = decoded
        if origin == self.origin:  # this process's own events were delivered at publish
            return
        if not topics and event == RESYNC:  # another process's publisher dropped events
            topics = list(self._subscribers)
        self._deliver(topics, event)

    def subscribers(self, topic: str) -> int:
        return len(self._subscribers.get(topic, ()))

    def as_record(self) -> dict[str, Any]:
        """For operators: whether events cross processes, and the counts of lost ones."""
        return {
            "relayed": self.relayed,
            "dropped": self.dropped,
            "relayDropped": self.relay_dropped,
        }


def _empty(queue: asyncio.Queue[Any]) -> int:
    """Take everything out of `queue`; how many there were."""
    count = 0
    while True:
        try:
            queue.get_nowait()
        except asyncio.QueueEmpty:
            return count
        count += 1
