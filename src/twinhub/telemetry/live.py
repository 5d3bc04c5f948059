"""In-process publish/subscribe of telemetry events, for the server-sent event streams.

Each subscriber has a bounded queue; a subscriber too slow to keep up loses events (counted)
rather than growing memory or slowing ingestion.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

QUEUE_SIZE = 1000


class LiveHub:
    def __init__(self) -> None:
        self._subscribers: dict[str, set[asyncio.Queue[dict[str, Any]]]] = defaultdict(set)
        self.dropped = 0

    def publish(self, topics: list[str], event: dict[str, Any]) -> None:
        """Hand `event` to every subscriber of any of `topics` (each gets it once)."""
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

    @asynccontextmanager
    async def subscribe(self, topic: str) -> AsyncIterator[asyncio.Queue[dict[str, Any]]]:
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(QUEUE_SIZE)
        self._subscribers[topic].add(queue)
        try:
            yield queue
        finally:
            self._subscribers[topic].discard(queue)
            if not self._subscribers[topic]:
                del self._subscribers[topic]

    def subscribers(self, topic: str) -> int:
        return len(self._subscribers.get(topic, ()))
