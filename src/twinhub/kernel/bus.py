"""The in-process message bus: committed events handed to the handlers that want them.

The events table stays the outbox and the source of truth: an event exists once the
transaction that recorded it commits, and every worker keeps its own durable state (a
claim stays pending until the oracle decides it, a delivery pending until it is sent), so
a worker that restarts picks up whatever it had not handled with one scan. The bus only
makes the normal path quick: once a transaction commits, the handlers registered for its
events run at once instead of waiting for a worker's next poll, which survives as crash
recovery (and as the path between processes, which share the database but not the bus).

One bus is built per platform (the composition root), which registers every handler in
one table. Nothing here is global: the after-commit hook is a listener on the bus's own
`Session` subclass (`session_class`), never on SQLAlchemy's `Session` itself.

Handlers are plain callables that hand work to their worker (set a wake-up, queue an id)
and return: they run in the committing task, right after its commit, so they must not
block or write. A handler that raises is logged; the others still run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson
from sqlalchemy import event as sa_event
from sqlalchemy.orm import Session

from twinhub.logging import get_logger

log = get_logger(__name__)
# In a session's info: the signals to send once its transaction commits (`mark`).
_AFTER_COMMIT = "twinhub.bus.after_commit"
# Signals: things that happened that are not events of the catalogue.
EVENTS_WRITTEN = "events.written"  # a commit wrote events not numbered yet
DELIVERIES_MADE = "webhook.deliveries_made"  # a commit made webhook deliveries
API_KEYS_REVOKED = "api_keys.revoked"  # a commit revoked an API key (every process hears it)
SIGNALS = (EVENTS_WRITTEN, DELIVERIES_MADE, API_KEYS_REVOKED)
# Signals every process must hear at once: relayed between processes (kernel/relay.py).
SHARED_SIGNALS = (API_KEYS_REVOKED,)


@dataclass(frozen=True)
class Cause:
    """What a write's events follow from: the event that caused them (causation) and the
    first event of the chain they belong to (correlation). An event with no cause starts
    a chain: its correlation id is its own id."""

    event_id: str
    correlation_id: str

    @classmethod
    def root(cls, event_id: str) -> Cause:
        """The cause that is a chain's first event."""
        return cls(event_id, event_id)

    def then(self, event_id: str) -> Cause:
        """`event_id`, of this chain, as the cause of what follows it."""
        return Cause(event_id, self.correlation_id)


@dataclass(frozen=True)
class Message:
    """A committed, numbered event as handlers receive it: a past-tense record (its type
    is one of the event catalogue's) with the ids that trace it to its causes."""

    id: str
    type: str
    subject: str
    actor: str
    position: int | None
    raw: str  # the event's data, JSON, exactly as stored
    causation_id: str | None = None
    correlation_id: str | None = None

    @cached_property
    def data(self) -> dict[str, Any]:
        parsed: dict[str, Any] = orjson.loads(self.raw)
        return parsed

    @classmethod
    def of_row(cls, row: Mapping[str, Any]) -> Message:
        """From an events row as written (`events.store.event_row`'s keys)."""
        return cls(
            row["event_id"],
            row["type"],
            row["subject"],
            row["actor"],
            row.get("position"),
            row["data"],
            row.get("causation_id"),
            row.get("correlation_id"),
        )

    @classmethod
    def signal(cls, topic: str) -> Message:
        """What a signal's handlers receive: only the topic means anything."""
        return cls("", topic, "", "", None, "{}")


Handler = Callable[[Message], None]


class Bus:
    """Handlers by topic (an event type or a signal), run after the commit that made them
    due. `known` is the set of topics one may subscribe to (the event catalogue and the
    signals), so a misspelt type fails at start, not silently."""

    def __init__(self, known: Iterable[str] = ()) -> None:
        self._known = frozenset(known) | frozenset(SIGNALS)
        self._handlers: dict[str, list[Handler]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session_class: type[Session] | None = None

    def on(self, topic: str, handler: Handler) -> None:
        if topic not in self._known:
            raise ValueError(f"no event type or signal {topic!r} to subscribe to")
        self._handlers.setdefault(topic, []).append(handler)

    def wants(self, topic: str) -> bool:
        return topic in self._handlers

    def bind_loop(self) -> None:
        """Handlers run on the loop the platform started on, whichever thread commits."""
        self._loop = asyncio.get_running_loop()

    # -- publishing ------------------------------------------------------------------------
    def publish_rows(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Hand committed events rows to their handlers (only rows of a wanted type are
        turned into messages)."""
        for row in rows:
            if row["type"] in self._handlers:
                self.publish(Message.of_row(row))

    def publish(self, message: Message) -> None:
        for handler in self._handlers.get(message.type, ()):
            self._call(handler, message)

    def signal(self, topic: str) -> None:
        if topic in self._handlers:
            self.publish(Message.signal(topic))

    def _call(self, handler: Handler, message: Message) -> None:
        loop = self._loop
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        if loop is not None and current is not loop:
            if not loop.is_closed():  # committed on another loop's thread (tests)
                loop.call_soon_threadsafe(self._run, handler, message)
            return
        self._run(handler, message)

    @staticmethod
    def _run(handler: Handler, message: Message) -> None:
        try:
            handler(message)
        except Exception:  # one handler's fault keeps no other from running
            log.exception("bus handler failed", topic=message.type)

    # -- the after-commit hook --------------------------------------------------------------
    def session_class(self) -> type[Session]:
        """The `Session` subclass the platform's sessions are made of: its listeners send
        the signals a transaction `mark`ed once it commits, and forget them if it rolls
        back. One class per bus, so no listener is left on SQLAlchemy's own classes."""
        if self._session_class is None:
            bus = self

            class BusSession(Session):
                """A session whose commits this bus hears of."""

            def after_commit(session: Session) -> None:
                for topic in session.info.pop(_AFTER_COMMIT, ()):
                    bus.signal(topic)

            def after_rollback(session: Session) -> None:
                session.info.pop(_AFTER_COMMIT, None)

            sa_event.listen(BusSession, "after_commit", after_commit)
            sa_event.listen(BusSession, "after_rollback", after_rollback)
            self._session_class = BusSession
        return self._session_class


def mark(session: Any, topic: str) -> None:
    """Send `topic` once `session`'s transaction commits (an AsyncSession or a Session)."""
    info = getattr(session, "sync_session", session).info
    topics: set[str] = info.setdefault(_AFTER_COMMIT, set())
    topics.add(topic)


def unmark(session: Any, topic: str) -> None:
    """No longer send `topic` at the commit (its work was done in the transaction)."""
    info = getattr(session, "sync_session", session).info
    info.get(_AFTER_COMMIT, set()).discard(topic)
