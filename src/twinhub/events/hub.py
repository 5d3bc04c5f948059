"""Events and webhooks wired together for one Platform: the store, the sequencer, the
webhook service and the dispatcher, and the background tasks that run them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime, timedelta

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.visibility import Viewer
from twinhub.events.dispatcher import Dispatcher, stop_between_steps
from twinhub.events.sequencer import Sequencer
from twinhub.events.store import EventStore, StoredEvent
from twinhub.events.subscriptions import WebhookService
from twinhub.events.webhooks import SecretBox
from twinhub.kernel.bus import Bus, Message
from twinhub.kernel.clock import utcnow
from twinhub.logging import get_logger
from twinhub.settings import EventsSettings, WebhookSettings

log = get_logger(__name__)
# After a commit wakes it, the sequencer waits this long so that a burst of writes is
# numbered in one transaction rather than one each (half the write rate on SQLite otherwise).
LINGER_SECONDS = 0.05


class EventsHub:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        settings: EventsSettings,
        webhooks: WebhookSettings,
        platform_key: bytes,
        clock: Callable[[], datetime] = utcnow,
        bus: Bus | None = None,
        *,
        background: bool = True,
    ) -> None:
        self._settings = settings
        self._background = background  # BACKGROUND_WORKERS_ENABLED
        box = SecretBox(platform_key)
        self.store = EventStore(sessions)
        # The bus tells the sequencer of events committed and the dispatcher of deliveries
        # made (platform.HANDLERS); the sequencer tells it of what it numbered.
        self.sequencer = Sequencer(sessions, clock=clock, bus=bus)
        self.webhooks = WebhookService(sessions, box, webhooks, clock=clock)
        self.dispatcher = Dispatcher(sessions, box, webhooks, clock=clock)
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()  # wakes the pruner's long wait at stop
        self._stopping = False
        self._closed = False  # streams end when the platform stops
        self._task: asyncio.Task[None] | None = None
        self._pruner: asyncio.Task[None] | None = None
        self.clock = clock

    def collector(self) -> Collector:
        """Prometheus metrics of this process's webhook attempts, for a /metrics registry."""
        dispatcher = self.dispatcher

        class WebhookMetrics(Collector):
            def collect(self) -> Iterator[Metric]:
                attempts = CounterMetricFamily(
                    "twinhub_webhook_attempts",
                    "Webhook delivery attempts by outcome.",
                    labels=["outcome"],
                )
                for outcome, count in sorted(dispatcher.outcomes.items()):
                    attempts.add_metric([outcome], count)
                yield attempts
                yield GaugeMetricFamily(
                    "twinhub_webhook_in_flight",
                    "Webhook attempts in flight.",
                    value=dispatcher.in_flight(),
                )

        return WebhookMetrics()

    def events_written(self, _: Message) -> None:
        """Events were committed unnumbered (bus signal EVENTS_WRITTEN): number them."""
        self._wake.set()

    def deliveries_made(self, _: Message) -> None:
        """Webhook deliveries were committed (bus signal DELIVERIES_MADE): send them."""
        self.dispatcher.wake()

    def set_clock(self, clock: Callable[[], datetime]) -> None:
        """Tests live through hours of retries on a clock they move by hand."""
        self.sequencer.clock = self.webhooks.clock = self.dispatcher.clock = clock
        self.clock = clock

    async def start(self) -> None:
        """Number events and deliver webhooks in the background (unless turned off)."""
        self._closed = False
        if not self._background or self._task is not None:
            return
        self._stop.clear()
        self._task = asyncio.create_task(self._sequence_forever(), name="event-sequencer")
        self._pruner = asyncio.create_task(self._prune_forever(), name="event-prune")
        self.dispatcher.start()

    async def stop(self) -> None:
        self._closed = True
        if self._task is not None:
            # Never cancelled mid-transaction: a cancelled SQLite write can leave its
            # connection holding the database's write lock. The loop ends between steps.
            self._stopping = True
            self._wake.set()
            self._stop.set()
            await stop_between_steps(self._task)
            self._task = None
            if self._pruner is not None:
                await stop_between_steps(self._pruner)
                self._pruner = None
            self._stopping = False
        await self.dispatcher.stop()

    async def _sequence_forever(self) -> None:
        interval = self._settings.sequencer_interval_seconds
        while not self._stopping:
            self._wake.clear()
            try:
                if await self.sequencer.run_once() >= self.sequencer.batch:
                    continue  # a full batch: there may be more waiting
            except Exception as error:  # the database may be away; try again next tick
                log.warning("event sequencing failed", error=f"{type(error).__name__}: {error}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), interval)
            if self._wake.is_set():
                await asyncio.sleep(LINGER_SECONDS)

    async def prune(self) -> int:
        """Remove the events past EVENTS_RETENTION_DAYS that no delivery needs; how many."""
        days = self._settings.retention_days
        if days <= 0:
            return 0
        return await self.store.prune(self.clock() - timedelta(days=days))

    async def _prune_forever(self) -> None:
        """Beside the sequencer, for as long as it runs; stops between transactions."""
        interval = self._settings.prune_interval_seconds
        while not self._stopping:
            try:
                removed = await self.prune()
                if removed:
                    log.info("events pruned", removed=removed)
            except Exception as error:  # the database may be away; try again next time
                log.warning("event prune failed", error=type(error).__name__)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), interval)

    async def follow(
        self,
        after: int,
        types: list[str] | None,
        heartbeat: float,
        viewer: Viewer,
        batch: int = 100,
    ) -> AsyncIterator[StoredEvent | None]:
        """Events `viewer` may see after `after`, then each new one as it is numbered, for
        ever; None when nothing came for `heartbeat` seconds (the stream sends a comment to
        keep alive)."""
        position = after
        loop = asyncio.get_running_loop()
        quiet_since = loop.time()
        while not self._closed:
            events = await self.store.after(position, batch, types, viewer)
            for event in events:
                position = event.position
                yield event
            if events:
                quiet_since = loop.time()
                continue
            if loop.time() - quiet_since >= heartbeat:
                quiet_since = loop.time()
                yield None
            wait = min(heartbeat, self._settings.sequencer_interval_seconds * 2)
            await self.sequencer.wait_for_more(wait)
