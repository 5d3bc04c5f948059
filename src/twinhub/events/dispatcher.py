"""Delivering events to webhook receivers in the background, so that no receiver, slow,
dead or hostile, ever slows the platform.

Deliveries due now are claimed in a short transaction (`FOR UPDATE SKIP LOCKED` on
PostgreSQL, so several processes share the work without sending one twice at a time) and
leased: their next attempt is pushed past the request deadline, so a process that dies
mid-request leaves them to be retried (at-least-once). Each attempt runs as its own task
under two bounds: a process-wide number in flight and a smaller one per subscription, so
one slow receiver cannot take every slot. Every attempt has a whole-request deadline, reads
at most WEBHOOK_MAX_RESPONSE_BYTES of the answer, follows no redirect, and connects only to
an address the URL policy has just checked. A failure is retried with exponential back-off
and jitter until the retry horizon has passed, then marked failed (replayable by hand).
A subscription whose receiver has answered no attempt with a 2xx for WEBHOOK_DISABLE_AFTER
seconds is disabled (a `webhook.disabled` event): its pending deliveries fail and no new
ones are made until it is enabled again.

Time comes from an injected clock, so tests can live through a day of retries in steps
(`run_once`) without sleeping.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import random
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

import httpx
import orjson
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub import __version__
from twinhub.db.dialects import dialect_of
from twinhub.db.models import Event, WebhookAttempt, WebhookDelivery, WebhookSubscription
from twinhub.events.store import record_event
from twinhub.events.webhooks import RefusedUrl, SecretBox, resolve, sign
from twinhub.kernel.clock import utcnow
from twinhub.logging import get_logger
from twinhub.settings import WebhookSettings

log = get_logger(__name__)
PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"
ACTIVE, DISABLED = "active", "disabled"  # a subscription's states
SYSTEM_ACTOR = "did:ixo:org/twinhub"  # who disables a failing subscription
EXCERPT_CHARS = 500
LEASE_MARGIN_SECONDS = 30.0


@dataclass(frozen=True)
class Job:
    delivery: int
    subscription: int
    webhook_id: str
    url: str
    secret: bytes
    event_id: str
    body: bytes


@dataclass(frozen=True)
class Outcome:
    status_code: int | None
    error: str | None
    duration_ms: float
    excerpt: str | None
    retry_after: float | None = None

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def event_body(row: Event) -> bytes:
    """What a receiver gets: the same bytes on every attempt (Standard Webhooks shape)."""
    return orjson.dumps(
        {
            "id": row.event_id,
            "type": row.type,
            "timestamp": row.occurred_at.isoformat().replace("+00:00", "Z"),
            "position": row.position,
            "subject": row.subject,
            "actor": row.actor,
            "data": orjson.loads(row.data),
        }
    )


async def stop_between_steps(task: asyncio.Task[None], grace: float = 10.0) -> None:
    """Wait for a loop that was asked to stop; cancel it only if it overstays `grace`."""
    done, _ = await asyncio.wait({task}, timeout=grace)
    if not done:
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The verifying TLS context every dispatcher's client uses: the one httpx builds for
    `trust_env=False` (certifi's roots). Loading the roots costs ~30 ms of CPU, paid once per
    process instead of once per platform start; nothing changes the context after this."""
    return httpx.create_ssl_context(trust_env=False)


class Dispatcher:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        box: SecretBox,
        policy: WebhookSettings,
        clock: Callable[[], datetime] = utcnow,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._sessions = sessions
        self._box = box
        self.policy = policy
        self.clock = clock
        self._jitter = jitter
        self._dialect = dialect_of(sessions)
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(policy.timeout),
            follow_redirects=False,  # a 3xx is a failure, as Standard Webhooks advises
            trust_env=False,  # no proxy from the environment between the check and the call
            verify=_tls_context(),
            limits=httpx.Limits(max_connections=policy.concurrency, max_keepalive_connections=8),
            headers={"user-agent": f"twinhub-webhooks/{__version__}"},
        )
        self._in_flight: dict[int, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._sends: set[asyncio.Task[Outcome]] = set()
        self.outcomes: collections.Counter[str] = collections.Counter()  # for /metrics
        self._stopping = False

    # -- the background loop ----------------------------------------------------------------
    def wake(self) -> None:
        self._wake.set()

    def start(self) -> None:
        if self._loop_task is None:
            self._loop_task = asyncio.create_task(self._run(), name="webhook-dispatcher")

    async def stop(self) -> None:
        """Stop between database steps: requests in flight are abandoned (their lease
        expires and they are sent again), never a transaction half done."""
        self._stopping = True
        self._wake.set()
        if self._loop_task is not None:
            await stop_between_steps(self._loop_task)
            self._loop_task = None
        for send in list(self._sends):
            send.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._client.aclose()

    async def _run(self) -> None:
        while not self._stopping:
            self._wake.clear()
            try:
                await self.run_once(wait=False)
            except Exception as error:  # the database may be away; try again next tick
                log.warning("webhook dispatch failed", error=f"{type(error).__name__}: {error}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.policy.poll_interval)

    # -- one step ---------------------------------------------------------------------------
    async def run_once(self, wait: bool = True) -> int:
        """Claim the deliveries due now that fit the free slots and attempt each; with
        `wait`, return once every attempt is recorded. How many were claimed."""
        jobs = await self._claim()
        tasks = []
        for job in jobs:
            self._in_flight[job.subscription] = self._in_flight.get(job.subscription, 0) + 1
            task = asyncio.create_task(self._attempt(job), name=f"webhook-{job.delivery}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            tasks.append(task)
        if wait and tasks:
            await asyncio.gather(*tasks)
        return len(jobs)

    async def _claim(self) -> list[Job]:
        free = self.policy.concurrency - sum(self._in_flight.values())
        if free <= 0:
            return []
        now = self.clock()
        lease_until = now + timedelta(seconds=self.policy.timeout + LEASE_MARGIN_SECONDS)
        due = (WebhookDelivery.status == PENDING, WebhookDelivery.next_attempt_at <= now)
        jobs: list[Job] = []
        async with self._sessions.begin() as session:
            subscriptions = list(
                await session.scalars(
                    select(WebhookDelivery.subscription_id)
                    .join(WebhookSubscription)
                    .where(
                        *due,
                        WebhookSubscription.deleted_at.is_(None),
                        WebhookSubscription.state == ACTIVE,
                    )
                    .distinct()
                    .limit(1000)
                )
            )
            random.shuffle(subscriptions)  # no subscription always first
            claimed: list[WebhookDelivery] = []
            for subscription in subscriptions:
                room = self.policy.concurrency_per_endpoint - self._in_flight.get(subscription, 0)
                room = min(room, free - len(claimed))
                if room <= 0:
                    continue
                query = (
                    select(WebhookDelivery)
                    .where(WebhookDelivery.subscription_id == subscription, *due)
                    .order_by(WebhookDelivery.next_attempt_at, WebhookDelivery.id)
                    .limit(room)
                )
                query = self._dialect.for_claiming(query)  # skip rows others claim
                claimed.extend(await session.scalars(query))
            for row in claimed:
                row.next_attempt_at = lease_until
            jobs = await self._jobs(session, claimed)
        return jobs

    async def _jobs(self, session: AsyncSession, rows: list[WebhookDelivery]) -> list[Job]:
        if not rows:
            return []
        events = {
            e.id: e
            for e in await session.scalars(
                select(Event).where(Event.id.in_({r.event_pk for r in rows}))
            )
        }
        subscriptions = {
            s.id: s
            for s in await session.scalars(
                select(WebhookSubscription).where(
                    WebhookSubscription.id.in_({r.subscription_id for r in rows})
                )
            )
        }
        jobs = []
        for row in rows:
            subscription, event = subscriptions[row.subscription_id], events[row.event_pk]
            jobs.append(
                Job(
                    row.id,
                    subscription.id,
                    subscription.webhook_id,
                    subscription.url,
                    subscription.secret_ciphertext,
                    event.event_id,
                    event_body(event),
                )
            )
        return jobs

    async def _attempt(self, job: Job) -> None:
        send = asyncio.create_task(self._send(job))
        self._sends.add(send)
        try:
            try:
                outcome = await send
            except asyncio.CancelledError:
                return  # stopping: not recorded; the lease runs out and it is sent again
            finally:
                self._sends.discard(send)
            await self._record(job, outcome)
        except Exception as error:  # recording failed: the lease expires and it is retried
            log.warning(
                "webhook attempt not recorded",
                webhook=job.webhook_id,
                delivery=job.delivery,
                error=f"{type(error).__name__}: {error}",
            )
        finally:
            self._in_flight[job.subscription] -= 1
            if not self._in_flight[job.subscription]:
                del self._in_flight[job.subscription]
            self._wake.set()  # a slot is free

    async def _send(self, job: Job) -> Outcome:
        """One HTTP attempt under the whole-request deadline; never raises."""
        timestamp = int(self.clock().timestamp())
        try:
            secret = self._box.open(job.secret, job.webhook_id)
        except ValueError:
            problem = "the signing secret does not open (was PIN_ENCRYPTION_KEY changed?)"
            return Outcome(None, problem, 0.0, None)
        headers = {
            "content-type": "application/json",
            "webhook-id": job.event_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": sign(secret, job.event_id, timestamp, job.body),
        }
        started = time.perf_counter()
        status: int | None = None
        excerpt: str | None = None
        retry_after: float | None = None
        error: str | None = None
        try:
            async with asyncio.timeout(self.policy.timeout):
                target = await resolve(job.url, self.policy)  # again: DNS may have changed
                url = httpx.URL(job.url)
                headers["host"] = url.netloc.decode("ascii")
                extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
                async with self._client.stream(
                    "POST",
                    url.copy_with(host=target.address),
                    content=job.body,
                    headers=headers,
                    extensions=extensions,
                ) as response:
                    status = response.status_code
                    retry_after = _retry_after(response.headers.get("retry-after"), self.clock())
                    body, cut = await _read_capped(response, self.policy.max_response_bytes)
                    excerpt = body[:EXCERPT_CHARS].decode("utf-8", "replace") or None
                    if cut:
                        error = f"response cut off at {self.policy.max_response_bytes} bytes"
        except TimeoutError:
            error = f"no complete answer within {self.policy.timeout:g} s"
        except RefusedUrl as refused:
            error = f"refused by the URL policy: {refused}"
        except httpx.HTTPError as failure:
            error = f"{type(failure).__name__}: {failure}".rstrip(": ")
        duration = (time.perf_counter() - started) * 1000
        return Outcome(status, error, round(duration, 3), excerpt, retry_after)

    async def _record(self, job: Job, outcome: Outcome) -> None:
        now = self.clock()
        async with self._sessions.begin() as session:
            row = await session.get(WebhookDelivery, job.delivery, with_for_update=True)
            if row is None or row.status != PENDING:
                return
            row.attempts += 1
            row.last_attempt_at = now
            row.last_status_code = outcome.status_code
            row.last_error = outcome.error
            session.add(
                WebhookAttempt(
                    delivery_id=row.id,
                    attempted_at=now,
                    status_code=outcome.status_code,
                    error=outcome.error,
                    duration_ms=outcome.duration_ms,
                    response_excerpt=outcome.excerpt,
                )
            )
            if outcome.ok:
                row.status, row.delivered_at, row.next_attempt_at = DELIVERED, now, None
            elif outcome.status_code == 410:  # Gone: the receiver asks for no more
                row.status, row.next_attempt_at = FAILED, None
            else:
                row.next_attempt_at = self.next_attempt(row, now, outcome.retry_after)
                if row.next_attempt_at is None:
                    row.status = FAILED
            await self._health(session, job, outcome, now)
        self.outcomes[_outcome_label(outcome)] += 1
        if outcome.ok:
            log.info("webhook delivered", webhook=job.webhook_id, event_id=job.event_id)
        else:
            log.info(
                "webhook attempt failed",
                webhook=job.webhook_id,
                event_id=job.event_id,
                status=outcome.status_code,
                error=outcome.error,
            )

    async def _health(
        self, session: AsyncSession, job: Job, outcome: Outcome, now: datetime
    ) -> None:
        """Keep when the receiver began failing (cleared by a 2xx); disable the subscription
        once that is WEBHOOK_DISABLE_AFTER seconds ago. Statements that change nothing in
        the common case (a healthy receiver), so attempts do not queue on its row."""
        subscription = WebhookSubscription.__table__.c
        mine = (subscription.id == job.subscription, subscription.state == ACTIVE)
        if outcome.ok:
            await session.execute(
                update(WebhookSubscription)
                .where(*mine, subscription.failing_since.is_not(None))
                .values(failing_since=None)
            )
            return
        await session.execute(
            update(WebhookSubscription)
            .where(*mine, subscription.failing_since.is_(None))
            .values(failing_since=now)
        )
        since = now - timedelta(seconds=self.policy.disable_after)
        disabled = (
            await session.execute(
                update(WebhookSubscription)
                .where(*mine, subscription.failing_since <= since)
                .values(state=DISABLED, disabled_at=now)
                .returning(subscription.failing_since, subscription.url)
            )
        ).first()
        if disabled is None:
            return
        await session.execute(
            update(WebhookDelivery)
            .where(
                WebhookDelivery.subscription_id == job.subscription,
                WebhookDelivery.status == PENDING,
            )
            .values(status=FAILED, next_attempt_at=None, last_error="subscription disabled")
        )
        failing_since, url = disabled
        record_event(
            session,
            "webhook.disabled",
            job.webhook_id,
            SYSTEM_ACTOR,
            {
                "webhook": job.webhook_id,
                "url": url,
                "failingSince": failing_since.isoformat().replace("+00:00", "Z"),
                "lastError": outcome.error
                or (f"HTTP {outcome.status_code}" if outcome.status_code else None),
            },
            occurred_at=now,
        )
        log.warning(
            "webhook disabled",
            webhook=job.webhook_id,
            failing_since=failing_since.isoformat(),
        )

    def in_flight(self) -> int:
        return sum(self._in_flight.values())

    def next_attempt(
        self, row: WebhookDelivery, now: datetime, retry_after: float | None = None
    ) -> datetime | None:
        """Exponential back-off with jitter (half to all of the doubled delay), never past
        the horizon; None once the horizon has passed (the delivery has failed)."""
        deadline = row.window_started_at + timedelta(seconds=self.policy.retry_horizon)
        if now >= deadline:
            return None
        exponent = min(row.attempts - 1, 40)
        delay = min(self.policy.retry_base * 2**exponent, self.policy.retry_max_delay)
        delay *= 0.5 + self._jitter() / 2
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.policy.retry_max_delay))
        return min(now + timedelta(seconds=delay), deadline)


def _outcome_label(outcome: Outcome) -> str:
    if outcome.ok:
        return "delivered"
    if outcome.status_code is not None:
        return f"http_{outcome.status_code // 100}xx"
    if outcome.error and outcome.error.startswith("refused"):
        return "refused"
    if outcome.error and outcome.error.startswith("no complete answer"):
        return "timeout"
    return "error"


async def _read_capped(response: httpx.Response, cap: int) -> tuple[bytes, bool]:
    """At most `cap` bytes of the body, and whether there was more (then it is dropped)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_raw():
        if size + len(chunk) > cap:
            chunks.append(chunk[: cap - size])
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False


def _retry_after(value: str | None, now: datetime) -> float | None:
    if not value:
        return None
    if value.strip().isdigit():
        return float(value.strip())
    try:
        return max((parsedate_to_datetime(value) - now).total_seconds(), 0.0)
    except (TypeError, ValueError):
        return None
