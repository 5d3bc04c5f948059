"""Numbering committed events, so that readers paging by position never skip one.

A cursor over an autoincrement id skips rows on PostgreSQL: ids are taken when a row is
inserted, but rows become visible when their transaction commits, so id 7 may appear after
a reader has passed id 8. Here rows are inserted with no position; one sequencer at a time
(a PostgreSQL advisory lock across processes; SQLite has a single writer) gives the rows it
can see, which are committed ones, the next positions. A late commit simply gets a later
position. In the same transaction each numbered event is fanned out to the webhook
subscriptions that want it, so every event is delivered once per subscription.

The ledger's own events (every domain, claim and credit write) are numbered by the ledger's
batch itself (`number_with`, in its transaction, under the same lock): the sequencer's pass
would otherwise write each of those rows a second time in a transaction of its own. What
the sequencer numbers is what other writers add (telemetry, customers).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, func, insert, select, update
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.bulk import insert_rows
from twinhub.db.dialects import dialect_of
from twinhub.db.models import Event, WebhookDelivery, WebhookSubscription
from twinhub.db.visibility import Viewer, event_visible
from twinhub.events.dispatcher import ACTIVE
from twinhub.kernel.bus import DELIVERIES_MADE, Bus
from twinhub.kernel.clock import utcnow
from twinhub.logging import get_logger

log = get_logger(__name__)
_PG_SEQUENCER_LOCK = 0x74776576  # "twev": shared by every twinhub process
PENDING = "pending"
_EVENTS = Event.__table__
# A Core UPDATE run as executemany: the ORM's bulk UPDATE by primary key spent more on its
# per-row bookkeeping than the statement (one numbering runs per ledger batch).
_NUMBER = (
    update(_EVENTS).where(_EVENTS.c.id == bindparam("pk")).values(position=bindparam("position"))
)

# What a pass numbers, with what the bus hands its handlers.
_UNNUMBERED = (
    select(
        Event.id,
        Event.event_id,
        Event.type,
        Event.subject,
        Event.actor,
        Event.data,
        Event.causation_id,
        Event.correlation_id,
    )
    .where(Event.position.is_(None))
    .order_by(Event.id)
    .limit(bindparam("limit"))
)
# Subscriptions that get new deliveries: not deleted, not disabled.
_LIVE = and_(WebhookSubscription.deleted_at.is_(None), WebhookSubscription.state == ACTIVE)
# What a fan-out needs of each: id, the types it wants, whose eyes it delivers for.
_SUBSCRIPTION = (
    WebhookSubscription.id,
    WebhookSubscription.event_types,
    WebhookSubscription.created_by,
    WebhookSubscription.sees_everything,
)
_TOP = select(func.max(Event.position).label("top")).subquery()
_ANY_UNNUMBERED = select(Event.id).where(Event.position.is_(None)).limit(1)
_TOP_AND_SUBSCRIPTIONS = select(_TOP.c.top, *_SUBSCRIPTION).select_from(
    _TOP.outerjoin(WebhookSubscription, _LIVE)
)


class Sequencer:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        batch: int = 1000,
        clock: Callable[[], datetime] = utcnow,
        bus: Bus | None = None,
    ) -> None:
        self._sessions = sessions
        self.batch = batch
        self.clock = clock
        self._dialect = dialect_of(sessions)
        self._sequenced = asyncio.Condition()
        # Told of each numbering once committed: the events, then DELIVERIES_MADE.
        self.bus = bus if bus is not None else Bus()

    async def run_once(self, wait: bool = False) -> int:
        """Number the committed, unnumbered events (at most one batch); how many. On
        PostgreSQL another process may be numbering: without `wait` this run then numbers
        nothing, with it it waits for that one's transaction and goes on after it."""
        try:
            rows, fanned_out = await self._number(wait)
        except (IntegrityError, DBAPIError) as error:  # another sequencer won (SQLite)
            log.warning("event sequencing deferred", error=type(error).__name__)
            return 0
        await self.numbered(rows, fanned_out)
        return len(rows)

    async def number_with(self, session: AsyncSession, rows: list[dict[str, Any]]) -> int:
        """Insert `rows`, unnumbered events of the caller's transaction, with the next
        positions, and fan them out; deliveries made. The numbering lock is held until that
        transaction ends (PostgreSQL; on SQLite the caller's write lock excludes every other
        numbering), so its commit makes the positions visible in order, as a pass of the
        sequencer's own would. Once it commits, the caller calls `numbered`."""
        subscriptions = await self.position(session, rows)
        if not subscriptions:
            await insert_rows(await session.connection(), _EVENTS, rows)
            return 0
        return await self.insert_delivered(session, rows, subscriptions)

    async def position(self, session: AsyncSession, rows: list[dict[str, Any]]) -> list[Any]:
        """`number_with`'s first half, for a caller that inserts `rows` itself when nobody
        subscribes: give them the next positions under the numbering lock; the live webhook
        subscriptions (`insert_delivered` inserts the rows when there are some)."""
        await self._dialect.advisory_lock(session, _PG_SEQUENCER_LOCK)
        # After the lock, in a statement of its own: it must see the last holder's commit.
        # The last position and the live subscriptions come in one statement (a row per
        # subscription, or one row of NULLs without any).
        found = (await session.execute(_TOP_AND_SUBSCRIPTIONS)).all()
        top = found[0][0] or 0
        for n, row in enumerate(rows, start=top + 1):
            row["position"] = n
        return [tuple(row[1:]) for row in found if row[1] is not None]

    async def insert_delivered(
        self, session: AsyncSession, rows: list[dict[str, Any]], subscriptions: list[Any]
    ) -> int:
        """Insert the positioned `rows` and their deliveries to `subscriptions`; how many."""
        ids = await session.scalars(
            insert(_EVENTS).returning(_EVENTS.c.id, sort_by_parameter_order=True), rows
        )
        return await self._deliver(
            session, subscriptions, zip(ids.all(), (row["type"] for row in rows), strict=True)
        )

    async def numbered(self, rows: Sequence[Mapping[str, Any]], deliveries: int) -> None:
        """Wake what waits for numbered events (streams), and tell the bus (its handlers:
        the oracle, webhook delivery), once `rows` (events rows: `events.store.event_row`'s
        keys) and their deliveries are committed (a pass, or a caller's `number_with`)."""
        if rows:
            async with self._sequenced:
                self._sequenced.notify_all()
            self.bus.publish_rows(rows)
        if deliveries:
            self.bus.signal(DELIVERIES_MADE)

    async def run_until_idle(self) -> int:
        """Number until nothing committed is left unnumbered (waiting for another process's
        numbering rather than taking its lock for "nothing left")."""
        total = 0
        while count := await self.run_once(wait=True):
            total += count
        return total

    async def _number(self, wait: bool = False) -> tuple[list[dict[str, Any]], int]:
        """(the events numbered, deliveries made for them)."""
        async with self._sessions.begin() as session:

            async def unnumbered() -> bool:
                return await session.scalar(_ANY_UNNUMBERED) is not None

            # PostgreSQL: the numbering lock, or nothing if another process numbers now
            # (without `wait`). SQLite: the reads below must be of the transaction that
            # numbers, under the writer lock (sqlite3 would begin it only at the UPDATE:
            # the top read before it could be another process's old top, and the UPDATE
            # then moved events a reader had passed), taken only if there is any to number.
            if not await self._dialect.exclusive(session, _PG_SEQUENCER_LOCK, wait, unnumbered):
                return [], 0
            rows = (await session.execute(_UNNUMBERED, {"limit": self.batch})).mappings().all()
            if not rows:
                return [], 0
            top = await session.scalar(select(func.max(Event.position))) or 0
            numbered = [{**row, "position": top + n} for n, row in enumerate(rows, start=1)]
            await session.execute(
                _NUMBER, [{"pk": row["id"], "position": row["position"]} for row in numbered]
            )
            subscriptions = await self._subscriptions(session)
            deliveries = await self._deliver(
                session, subscriptions, ((row["id"], row["type"]) for row in numbered)
            )
        return numbered, deliveries

    @staticmethod
    async def _subscriptions(session: AsyncSession) -> list[Any]:
        """(id, event types, creator, sees everything) of the live webhook subscriptions."""
        return list((await session.execute(select(*_SUBSCRIPTION).where(_LIVE))).all())

    async def _deliver(
        self, session: AsyncSession, subscriptions: list[Any], rows: Iterable[tuple[int, str]]
    ) -> int:
        """A delivery of each (event id, type) to each subscription that wants it and whose
        creator may see it (db.visibility, asked of the database: the rows are in it)."""
        if not subscriptions:
            return 0
        rows = list(rows)
        seen: dict[int, set[int]] = {}
        for subscription, _, creator, everything in subscriptions:
            if not everything:
                visible = select(Event.id).where(
                    Event.id.in_([pk for pk, _ in rows]),
                    event_visible(Viewer(creator, everything=False)),
                )
                seen[subscription] = set(await session.scalars(visible))
        now = self.clock()
        deliveries = [
            {
                "subscription_id": subscription,
                "event_pk": pk,
                "status": PENDING,
                "attempts": 0,
                "next_attempt_at": now,
                "window_started_at": now,
                "created_at": now,
            }
            for pk, type_ in rows
            for subscription, types, _, _ in subscriptions
            if (not types or type_ in types)
            and (subscription not in seen or pk in seen[subscription])
        ]
        if deliveries:
            await session.execute(WebhookDelivery.__table__.insert(), deliveries)
        return len(deliveries)

    async def wait_for_more(self, seconds: float) -> None:
        """Return when this process numbered events, or after `seconds` (other processes
        may have): what an event stream waits on."""
        async with self._sequenced:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._sequenced.wait(), seconds)
