"""Webhook subscriptions as the registry manages them: create (the secret shown once),
list, read, delete, the delivery log, replays, and re-enabling a disabled one. No HTTP
here; the routes render.

A subscription delivers for its creator's eyes (db.visibility): an admin's or the registry
role's gets every event; an organisation's (a writer key) only the events its keys may
read. Its creator (and admins) manage it; the registry role reads every one."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import Event, WebhookAttempt, WebhookDelivery, WebhookSubscription
from twinhub.db.visibility import Viewer, event_visible, owned_webhook, viewer_of
from twinhub.events.dispatcher import ACTIVE, DELIVERED, FAILED, PENDING
from twinhub.events.store import check_types
from twinhub.events.webhooks import RefusedUrl, SecretBox, new_secret, resolve
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import Conflict, FieldProblem, Forbidden, Invalid, NotFound
from twinhub.kernel.principals import Principal
from twinhub.settings import WebhookSettings

STATUSES = (PENDING, DELIVERED, FAILED)
MAX_REPLAY = 10_000
_SUBSCRIBERS = frozenset({"admin", "writer", "registry"})


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def subscription_view(row: WebhookSubscription) -> dict[str, Any]:
    return {
        "id": row.webhook_id,
        "url": row.url,
        "events": row.event_types,
        "description": row.description,
        "createdBy": row.created_by,
        "createdAt": _iso(row.created_at),
        "state": row.state,
        "failingSince": _iso(row.failing_since),
        "disabledAt": _iso(row.disabled_at),
    }


def subscriber_of(row: WebhookSubscription) -> Viewer:
    """Whose eyes the subscription delivers for."""
    return Viewer(row.created_by, everything=row.sees_everything)


def delivery_view(
    row: WebhookDelivery, event: Event, attempts: list[WebhookAttempt]
) -> dict[str, Any]:
    return {
        "id": row.id,
        "event": {"id": event.event_id, "type": event.type, "position": event.position},
        "status": row.status,
        "attempts": row.attempts,
        "nextAttemptAt": _iso(row.next_attempt_at) if row.status == PENDING else None,
        "lastAttemptAt": _iso(row.last_attempt_at),
        "lastStatusCode": row.last_status_code,
        "lastError": row.last_error,
        "deliveredAt": _iso(row.delivered_at),
        "createdAt": _iso(row.created_at),
        "log": [
            {
                "at": _iso(a.attempted_at),
                "statusCode": a.status_code,
                "error": a.error,
                "durationMs": a.duration_ms,
                "response": a.response_excerpt,
            }
            for a in attempts
        ],
    }


class WebhookService:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        box: SecretBox,
        policy: WebhookSettings,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._sessions = sessions
        self._box = box
        self._policy = policy
        self.clock = clock

    async def create(
        self, url: str, events: list[str] | None, description: str, actor: Principal
    ) -> dict[str, Any]:
        """A new subscription; the answer carries its signing secret, this once only."""
        if not actor.roles & _SUBSCRIBERS:
            raise Forbidden("This needs the writer, registry or admin role.")
        types = check_types(sorted(set(events or [])))
        try:
            await resolve(url, self._policy)
        except RefusedUrl as refused:
            problem = [FieldProblem("url", str(refused))]
            raise Invalid("The webhook URL is refused.", problem) from None
        webhook_id = "wh_" + secrets.token_hex(8)
        secret = new_secret()
        row = WebhookSubscription(
            webhook_id=webhook_id,
            url=url,
            event_types=types,
            secret_ciphertext=self._box.seal(secret, webhook_id),
            description=description,
            created_by=actor.did,
            created_at=self.clock(),
            sees_everything=viewer_of(actor).everything,
            state=ACTIVE,
        )
        async with self._sessions.begin() as session:
            session.add(row)
        return {**subscription_view(row), "secret": secret}

    async def list(self, actor: Principal) -> list[dict[str, Any]]:
        """The live subscriptions the actor may read."""
        async with self._sessions() as session:
            rows = await session.scalars(
                select(WebhookSubscription)
                .where(WebhookSubscription.deleted_at.is_(None), owned_webhook(viewer_of(actor)))
                .order_by(WebhookSubscription.id)
            )
            return [subscription_view(row) for row in rows]

    async def get(self, webhook_id: str, actor: Principal) -> dict[str, Any]:
        async with self._sessions() as session:
            row = await self._row(session, webhook_id, actor)
            if row.deleted_at is not None:
                raise NotFound(f"The webhook {webhook_id} is deleted.")
            counts = dict(
                (
                    await session.execute(
                        select(WebhookDelivery.status, func.count())
                        .where(WebhookDelivery.subscription_id == row.id)
                        .group_by(WebhookDelivery.status)
                    )
                ).all()
            )
        return {**subscription_view(row), "deliveries": {s: counts.get(s, 0) for s in STATUSES}}

    async def delete(self, webhook_id: str, actor: Principal) -> None:
        """No more deliveries; its log stays readable by id until then removed with it."""
        async with self._sessions.begin() as session:
            row = await self._row(session, webhook_id, actor, change=True)
            row.deleted_at = self.clock()
            await session.execute(
                update(WebhookDelivery)
                .where(
                    WebhookDelivery.subscription_id == row.id,
                    WebhookDelivery.status == PENDING,
                )
                .values(status=FAILED, next_attempt_at=None, last_error="subscription deleted")
            )

    async def deliveries(
        self, webhook_id: str, actor: Principal, status: str | None, after: int, limit: int
    ) -> tuple[list[dict[str, Any]], int | None]:
        """The delivery log, newest first: each delivery with every attempt."""
        if status is not None and status not in STATUSES:
            raise Invalid("Unknown delivery status.", [FieldProblem("status", ", ".join(STATUSES))])
        async with self._sessions() as session:
            row = await self._row(session, webhook_id, actor)
            query = (
                select(WebhookDelivery, Event)
                .join(Event, Event.id == WebhookDelivery.event_pk)
                .where(WebhookDelivery.subscription_id == row.id)
                .order_by(WebhookDelivery.id.desc())
                .limit(limit + 1)
            )
            if after:
                query = query.where(WebhookDelivery.id < after)
            if status:
                query = query.where(WebhookDelivery.status == status)
            pairs = (await session.execute(query)).all()
            more = len(pairs) > limit
            pairs = pairs[:limit]
            attempts: dict[int, list[WebhookAttempt]] = {}
            if pairs:
                for attempt in await session.scalars(
                    select(WebhookAttempt)
                    .where(WebhookAttempt.delivery_id.in_([d.id for d, _ in pairs]))
                    .order_by(WebhookAttempt.id)
                ):
                    attempts.setdefault(attempt.delivery_id, []).append(attempt)
        views = [delivery_view(d, e, attempts.get(d.id, [])) for d, e in pairs]
        return views, (pairs[-1][0].id if more else None)

    async def retry(self, webhook_id: str, delivery_id: int, actor: Principal) -> dict[str, Any]:
        """Send a delivery again now (failed or delivered), with a fresh retry horizon."""
        async with self._sessions.begin() as session:
            subscription = await self._row(session, webhook_id, actor, change=True)
            if subscription.deleted_at is not None:
                raise NotFound(f"The webhook {webhook_id} is deleted.")
            row = await session.get(WebhookDelivery, delivery_id, with_for_update=True)
            if row is None or row.subscription_id != subscription.id:
                raise NotFound(f"No delivery {delivery_id} of webhook {webhook_id}.")
            now = self.clock()
            row.status, row.next_attempt_at, row.window_started_at = PENDING, now, now
            event = await session.get(Event, row.event_pk)
            assert event is not None
            view = delivery_view(row, event, [])
        return view

    async def replay(self, webhook_id: str, after: int, actor: Principal) -> int:
        """Queue again every event after position `after` that the subscription wants
        (at most MAX_REPLAY of them, of those its creator may see); how many."""
        async with self._sessions.begin() as session:
            subscription = await self._row(session, webhook_id, actor, change=True)
            if subscription.deleted_at is not None:
                raise NotFound(f"The webhook {webhook_id} is deleted.")
            query = (
                select(Event.id)
                .where(
                    Event.position.is_not(None),
                    Event.position > after,
                    event_visible(subscriber_of(subscription)),
                )
                .order_by(Event.position)
                .limit(MAX_REPLAY)
            )
            if subscription.event_types:
                query = query.where(Event.type.in_(subscription.event_types))
            wanted = list(await session.scalars(query))
            if not wanted:
                return 0
            now = self.clock()
            existing = set(
                await session.scalars(
                    select(WebhookDelivery.event_pk).where(
                        WebhookDelivery.subscription_id == subscription.id,
                        WebhookDelivery.event_pk.in_(wanted),
                    )
                )
            )
            await session.execute(
                update(WebhookDelivery)
                .where(
                    WebhookDelivery.subscription_id == subscription.id,
                    WebhookDelivery.event_pk.in_(existing),
                )
                .values(status=PENDING, next_attempt_at=now, window_started_at=now)
            )
            missing = [pk for pk in wanted if pk not in existing]
            if missing:
                await session.execute(
                    WebhookDelivery.__table__.insert(),
                    [
                        {
                            "subscription_id": subscription.id,
                            "event_pk": pk,
                            "status": PENDING,
                            "attempts": 0,
                            "next_attempt_at": now,
                            "window_started_at": now,
                            "created_at": now,
                        }
                        for pk in missing
                    ],
                )
        return len(wanted)

    async def enable(self, webhook_id: str, actor: Principal) -> dict[str, Any]:
        """A disabled subscription gets deliveries again, from the next event on (what it
        missed: `replay`); enabling an active one changes nothing."""
        async with self._sessions.begin() as session:
            row = await self._row(session, webhook_id, actor, change=True)
            if row.deleted_at is not None:
                raise Conflict(f"The webhook {webhook_id} is deleted.")
            row.state, row.failing_since, row.disabled_at = ACTIVE, None, None
            return subscription_view(row)

    @staticmethod
    async def _row(
        session: AsyncSession, webhook_id: str, actor: Principal, change: bool = False
    ) -> WebhookSubscription:
        """The subscription, if `actor` may read it (`change`: change it, which is for its
        creator and admins); NotFound otherwise, as for one that does not exist."""
        query = select(WebhookSubscription).where(
            WebhookSubscription.webhook_id == webhook_id,
            WebhookSubscription.created_by == actor.did
            if change and not actor.is_admin
            else owned_webhook(viewer_of(actor)),
        )
        if change:
            query = query.with_for_update()
        row = await session.scalar(query)
        if row is None:
            raise NotFound(f"No webhook {webhook_id}.")
        return row
