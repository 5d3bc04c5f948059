"""Writing events inside the transaction of the change they describe, and reading them in
the order the sequencer gave them.

An event is a row added to the writer's own session: it commits with the change or not at
all (a transactional outbox), so a crash can neither lose nor invent one. Rows are written
without a position; readers see only numbered rows (see `sequencer`).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import and_, delete, exists, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import Event, WebhookAttempt, WebhookDelivery, WebhookSubscription
from twinhub.db.visibility import Viewer, event_visible
from twinhub.events.types import CATALOGUE, EventRecord, LedgerEntry, events_for_transaction
from twinhub.kernel.bus import EVENTS_WRITTEN, Cause, mark, unmark
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import FieldProblem, Invalid

# In a session's info while a ledger write runs: the list its events go to (services.ledger).
EVENT_ROWS = "twinhub.events.pending_rows"
PRUNE_BATCH = 1000  # events removed per transaction: short locks, however large the backlog
# Deliveries that still need their event: pending (being retried) or failed (replayable by
# hand), of a subscription that still exists.
_NEEDED = ("pending", "failed")


def _live_and_needed() -> tuple[Any, Any]:
    """A delivery that still needs its event (see _NEEDED)."""
    live = select(WebhookSubscription.id).where(WebhookSubscription.deleted_at.is_(None))
    return WebhookDelivery.status.in_(_NEEDED), WebhookDelivery.subscription_id.in_(live)


def new_event_id() -> str:
    """Stable for ever: receivers de-duplicate by it (it is the `webhook-id`)."""
    return "evt_" + secrets.token_hex(12)


def record_event(
    session: AsyncSession,
    type: str,
    subject: str,
    actor: str,
    data: dict[str, Any],
    *,
    ledger_height: int | None = None,
    occurred_at: datetime | None = None,
    cause: Cause | None = None,
    event_id: str | None = None,
) -> str:
    """Add an event to `session`'s transaction; it exists once that commits. Its id.

    Inside a ledger write the row joins the write's pending rows (EVENT_ROWS in the
    session's info), which the ledger inserts in one statement per group commit, only if
    the write succeeded; elsewhere it is added to the session, and its commit tells the
    platform's bus (kernel.bus.EVENTS_WRITTEN: the sequencer numbers it)."""
    row = event_row(type, subject, actor, data, ledger_height, occurred_at, cause, event_id)
    info = getattr(session, "sync_session", session).info
    pending: list[dict[str, Any]] | None = info.get(EVENT_ROWS)
    if pending is not None:
        pending.append(row)
    else:
        session.add(Event(**row))
    mark(session, EVENTS_WRITTEN)
    return str(row["event_id"])


def event_row(
    type: str,
    subject: str,
    actor: str,
    data: dict[str, Any],
    ledger_height: int | None = None,
    occurred_at: datetime | None = None,
    cause: Cause | None = None,
    event_id: str | None = None,
) -> dict[str, Any]:
    """An unnumbered events row (what record_event adds), for writers that insert it
    themselves in their own transaction (telemetry's raw-driver writes); they signal the
    bus's EVENTS_WRITTEN once it commits. Without a `cause` the event starts a chain of
    its own (its correlation id is its own id)."""
    if type not in CATALOGUE:
        raise ValueError(f"unknown event type {type!r}; add it to events.types.CATALOGUE")
    event_id = event_id or new_event_id()
    return {
        "event_id": event_id,
        "position": None,
        "type": type,
        "subject": subject,
        "actor": actor,
        "data": orjson.dumps(data).decode(),
        "ledger_height": ledger_height,
        "occurred_at": occurred_at or utcnow(),
        "causation_id": cause.event_id if cause else None,
        "correlation_id": cause.correlation_id if cause else event_id,
    }


def record_ledger_events(
    session: AsyncSession,
    transaction: LedgerEntry,
    cause: Cause | None = None,
    first_id: str | None = None,
) -> dict[str, str]:
    """The events a ledger transaction means, in the same transaction (LedgerWrite.append),
    all caused by `cause`; `first_id`, when given, is the first one's id (a writer that
    keeps it, as a claim keeps its submission's). Their ids by type."""
    occurred_at = getattr(transaction, "created_at", None)
    ids: dict[str, str] = {}
    for record in events_for_transaction(transaction):
        ids[record.type] = record_event(
            session,
            record.type,
            record.subject,
            record.actor,
            record.data,
            ledger_height=transaction.height,
            occurred_at=occurred_at,
            cause=cause,
            event_id=None if ids else first_id,
        )
    return ids


def events_numbered(session: AsyncSession) -> None:
    """The events `session` wrote are numbered in its own transaction (the ledger's batch):
    its commit need not wake the sequencer."""
    unmark(session, EVENTS_WRITTEN)


@dataclass(frozen=True)
class StoredEvent:
    id: str
    position: int
    type: str
    subject: str
    actor: str
    occurred_at: datetime
    data: dict[str, Any]
    # What caused it and the chain it belongs to (kernel.bus.Cause); not in its JSON,
    # which readers and webhook receivers get unchanged.
    causation_id: str | None = None
    correlation_id: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "position": self.position,
            "type": self.type,
            "subject": self.subject,
            "actor": self.actor,
            "timestamp": self.occurred_at.isoformat().replace("+00:00", "Z"),
            "data": self.data,
        }


def stored(row: Event) -> StoredEvent:
    assert row.position is not None
    return StoredEvent(
        row.event_id,
        row.position,
        row.type,
        row.subject,
        row.actor,
        row.occurred_at,
        orjson.loads(row.data),
        row.causation_id,
        row.correlation_id,
    )


def check_types(types: list[str]) -> list[str]:
    """The event types asked for, each one of the catalogue (Invalid otherwise)."""
    unknown = [t for t in types if t not in CATALOGUE]
    if unknown:
        raise Invalid(
            "Unknown event type.",
            [FieldProblem("type", f"{t!r} is not in the catalogue") for t in unknown],
        )
    return types


class EventStore:
    """Reads: pages of numbered events after a position, optionally of some types, of
    those the viewer may see (db.visibility: filtered in the query, so a page is whole)."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def after(
        self, position: int, limit: int, types: list[str] | None, viewer: Viewer
    ) -> list[StoredEvent]:
        query = (
            select(Event)
            .where(Event.position.is_not(None), Event.position > position, event_visible(viewer))
            .order_by(Event.position)
            .limit(limit)
        )
        if types:
            query = query.where(Event.type.in_(types))
        async with self._sessions() as session:
            return [stored(row) for row in await session.scalars(query)]

    async def trace(self, event_id: str, limit: int = 50) -> list[StoredEvent]:
        """The numbered event `event_id` and what caused it, back to the first event of
        its chain (each one's `causation_id`): a webhook delivery's event traced through
        the credit and the claim. Empty if the event is unknown (or pruned)."""
        chain: list[StoredEvent] = []
        wanted: str | None = event_id
        async with self._sessions() as session:
            while wanted is not None and len(chain) < limit:
                row = await session.scalar(
                    select(Event).where(Event.event_id == wanted, Event.position.is_not(None))
                )
                if row is None:
                    break
                chain.append(stored(row))
                wanted = row.causation_id
        return chain

    async def all_records(self) -> list[EventRecord]:
        """Every event, numbered or not, oldest first (operators' checks and tests)."""
        async with self._sessions() as session:
            rows = await session.scalars(select(Event).order_by(Event.id))
            return [EventRecord(r.type, r.subject, r.actor, orjson.loads(r.data)) for r in rows]

    async def prune(self, before: datetime, batch: int = PRUNE_BATCH) -> int:
        """Remove events that occurred before `before`, in batches; how many. An event is
        kept while it has no position yet (its deliveries are not made yet) or while a
        delivery of a live subscription needs it; its finished deliveries (and their
        attempt logs) go with it."""
        needed = exists(
            select(WebhookDelivery.id).where(
                WebhookDelivery.event_pk == Event.id, *_live_and_needed()
            )
        )
        expired = (Event.position.is_not(None), Event.occurred_at < before, ~needed)
        removed = 0
        while True:
            async with self._sessions.begin() as session:
                ids = list(
                    await session.scalars(
                        select(Event.id).where(*expired).order_by(Event.id).limit(batch)
                    )
                )
                if not ids:
                    return removed
                finished = (WebhookDelivery.event_pk.in_(ids), ~and_(*_live_and_needed()))
                deliveries = select(WebhookDelivery.id).where(*finished)
                await session.execute(
                    delete(WebhookAttempt).where(WebhookAttempt.delivery_id.in_(deliveries))
                )
                await session.execute(delete(WebhookDelivery).where(*finished))
                # Checked again: a delivery replayed since the select keeps its event (and
                # the foreign key refuses the whole batch, tried again next time).
                result = await session.execute(
                    delete(Event).where(Event.id.in_(ids), *expired).returning(Event.id)
                )
                removed += len(result.all())
            if len(ids) < batch:
                return removed
