"""The ledger: an append-only transaction log with a height and a hash chain.

Every registry write appends a transaction in the same database transaction as the rows it
changes, so the two can never disagree. Each transaction's hash covers its height, the hash
before it, its kind, subject, actor, time and payload (canonical JSON), so editing,
removing or reordering any stored transaction breaks the chain, and `verify` finds where.

Writes are group-committed (docs/ledger.md has the design and why it stays tamper-evident):
the writes that queue up while one runs share one database transaction, each inside a
SAVEPOINT of its own, and commit together once nobody waits any more (or `max_batch` writes
are in). A write that fails rolls back its savepoint alone; its neighbours still commit.
`write()` returns only after the shared commit, so a caller never sees a write that could
still be lost. Heights are handed out in the order the writes ran, under the same lock:
in-process an asyncio lock, across processes the database's (PostgreSQL: the `ledger_head`
row `FOR UPDATE`; SQLite: `BEGIN IMMEDIATE`, its single writer lock), each held for one
batch. The BEGIN, the head row's read and update, and the COMMIT (PostgreSQL's WAL flush)
are paid once per batch instead of once per write.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Table, bindparam, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.bulk import insert_rows, insert_together
from twinhub.db.dialects import dialect_of
from twinhub.db.models import Event, LedgerHead, LedgerTransaction
from twinhub.events.sequencer import Sequencer
from twinhub.events.store import EVENT_ROWS, events_numbered, record_ledger_events
from twinhub.kernel.bus import Cause
from twinhub.kernel.clock import utcnow
from twinhub.kernel.uncancelled import holding_shared

GENESIS_HASH = "0" * 64
HEAD_ROW = 1
_TRANSACTIONS = LedgerTransaction.__table__
_EVENTS = Event.__table__
_HEAD_UPDATE = "UPDATE ledger_head SET height = {0}, tx_hash = {1} WHERE id = 1"  # HEAD_ROW
# A batch's own statements, built once: building and caching a statement's key cost a
# small batch (a claim submission's) about as much as running it.
_HEAD_LOCKED = (
    select(LedgerHead.height, LedgerHead.tx_hash).where(LedgerHead.id == HEAD_ROW).with_for_update()
)
_HEAD_TABLE = LedgerHead.__table__
_HEAD_SET = (
    update(_HEAD_TABLE)
    .where(_HEAD_TABLE.c.id == HEAD_ROW)
    .values(height=bindparam("height"), tx_hash=bindparam("tx_hash"))
)
_MAX_OF: dict[Any, Any] = {}  # a creation-order column's `SELECT max(column)` (next_seq)
_COUNTS_UPDATE: dict[tuple[Table, tuple[str, ...], tuple[str, ...]], Any] = {}  # _write_counts'


def canonical_json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def transaction_hash(
    height: int, prev_hash: str, kind: str, subject: str, actor: str, at: datetime, payload: str
) -> str:
    stamp = at.astimezone(UTC).isoformat(timespec="microseconds")
    material = orjson.dumps([height, prev_hash, kind, subject, actor, stamp, payload])
    return hashlib.sha256(material).hexdigest()


@dataclass(frozen=True)
class Transaction:
    height: int
    tx_hash: str
    prev_hash: str
    kind: str
    subject: str
    actor: str
    payload: dict[str, Any]
    created_at: datetime


def _transaction(row: LedgerTransaction) -> Transaction:
    return Transaction(
        height=row.height,
        tx_hash=row.tx_hash,
        prev_hash=row.prev_hash,
        kind=row.kind,
        subject=row.subject,
        actor=row.actor,
        payload=orjson.loads(row.payload),
        created_at=row.created_at,
    )


@dataclass
class Head:
    """The chain's end as the open batch sees it; written to `ledger_head` once per batch."""

    height: int
    tx_hash: str


class LedgerWrite:
    """One atomic registry write: change rows through `session`, record them with `append`."""

    def __init__(
        self,
        session: AsyncSession,
        head: Head,
        sequences: dict[Any, int] | None = None,
        pending: dict[Hashable, str] | None = None,
        batch: _Batch | None = None,
        ahead: dict[str, Counter[Hashable]] | None = None,
    ) -> None:
        self.session = session
        self._batch = batch
        self._ahead = {} if ahead is None else ahead
        self._head = head
        self._sequences = {} if sequences is None else sequences
        self.appended: list[Transaction] = []
        self.events: dict[str, str] = {}  # the last append's events: id by type
        # Rows inserted by the batch's commit, in one statement per table, if this write
        # succeeds: a transaction's row and its events need no ORM object or round trip.
        self.ledger_rows: list[dict[str, Any]] = []
        self.event_rows: list[dict[str, Any]] = []
        # A deferred write's rows (Ledger.write(deferred=True)), by table, and the unique
        # keys they take; the batch writes them with its own rows if this write succeeds.
        self.deferred_rows: dict[Table, list[dict[str, Any]]] = {}
        self.taken: dict[Hashable, str] = {}
        self._pending: dict[Hashable, str] = {} if pending is None else pending
        # A deferred write's counter updates (`add`), by table and primary key.
        self.deferred_counts: dict[tuple[Table, Hashable], _Count] = {}

    def defer(self, table: Table, row: dict[str, Any]) -> None:
        """Insert `row` (column names as keys) at the batch's commit, with the batch's other
        rows of `table` in one statement; only in a deferred write, which must have checked
        that the row cannot fail (it is not visible to statements before the commit)."""
        self.deferred_rows.setdefault(table, []).append(row)

    def add(
        self, table: Table, key: Hashable, counts: dict[str, int], values: dict[str, Any]
    ) -> None:
        """At the batch's commit, add `counts` to the columns of `table`'s row whose primary
        key is `key` and set it `values`, in one statement per table with the batch's other
        such updates; only in a deferred write (`added` tells what is not yet written)."""
        count = self.deferred_counts.setdefault((table, key), _Count())
        count.add(counts, values)

    def added(self, table: Table, key: Hashable, column: str) -> int:
        """What the batch's earlier writes and this one added to `column` of the row
        `key` of `table` and have not yet written (`add`)."""
        mine = self.deferred_counts.get((table, key))
        theirs = self._batch.counts.get((table, key)) if self._batch is not None else None
        return sum(each.counts.get(column, 0) for each in (mine, theirs) if each is not None)

    def holder(self, key: Hashable) -> str | None:
        """Who took a unique `key` (say, a serial number) in a row not yet written: an
        earlier write of this batch, or this one (`take`)."""
        return self.taken.get(key) or self._pending.get(key)

    def take(self, key: Hashable, holder: str) -> None:
        """Note that a deferred row of this write takes the unique `key`."""
        self.taken[key] = holder

    async def ahead(
        self,
        name: str,
        item: Hashable,
        fetch: Callable[[AsyncSession, list[Hashable]], Awaitable[dict[Hashable, Any]]],
    ) -> Any:
        """`fetch(session, items)[item]`, asked once per batch for the items of `name` that
        writers queued with (`Ledger.ahead`): one statement instead of one per write.

        The answers are of the tables as the batch found them, which nothing changes
        meanwhile but the batch's own writes: the batch holds the database's write lock,
        deferred rows reach the tables only at the commit (`holder`/`take` tell of them),
        and once an ordinary write runs in the batch nothing more is kept (each write asks
        again, as without this)."""
        batch = self._batch
        if batch is None or batch.ahead is None:
            return (await fetch(self.session, [item]))[item]
        known = batch.ahead.setdefault(name, {})
        if item in known:
            return known[item]
        queued = self._ahead.get(name, ())
        items = [item, *(each for each in queued if each != item and each not in known)]
        known.update(await fetch(self.session, items))
        return known[item]

    async def next_seq(self, column: Any) -> int:
        """The next value of a creation-order column (`Domain.seq`, ...): `max + 1` read
        once per batch, then counted on. The batch holds the database's write lock, so no
        other process inserts meanwhile; a write rolled back leaves a gap, which ordering
        and cursors do not mind."""
        if column not in self._sequences:
            statement = _MAX_OF.get(column)
            if statement is None:
                statement = _MAX_OF[column] = select(func.max(column))
            self._sequences[column] = (await self.session.scalar(statement)) or 0
        self._sequences[column] += 1
        return self._sequences[column]

    async def append(
        self,
        kind: str,
        subject: str,
        actor: str,
        payload: dict[str, Any],
        *,
        cause: Cause | None = None,
        event_id: str | None = None,
    ) -> Transaction:
        """Append a transaction and record the events it means, caused by `cause` (none:
        they start a chain); `event_id` names its first event. The events' ids by type are
        in `events` until the next append (a later one names them as its cause)."""
        height = self._head.height + 1
        prev_hash = self._head.tx_hash or GENESIS_HASH
        at = utcnow()
        body = canonical_json(payload)
        tx_hash = transaction_hash(height, prev_hash, kind, subject, actor, at, body)
        self.ledger_rows.append(
            {
                "height": height,
                "tx_hash": tx_hash,
                "prev_hash": prev_hash,
                "kind": kind,
                "subject": subject,
                "actor": actor,
                "payload": body,
                "created_at": at,
            }
        )
        self._head.height, self._head.tx_hash = height, tx_hash
        transaction = Transaction(height, tx_hash, prev_hash, kind, subject, actor, payload, at)
        # The outbox: the same transaction.
        self.events = record_ledger_events(self.session, transaction, cause, event_id)
        self.appended.append(transaction)
        return transaction


@dataclass
class _Count:
    """A row's deferred counter update: what to add to which columns, what to set."""

    counts: dict[str, int] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)

    def add(self, counts: dict[str, int], values: dict[str, Any]) -> None:
        for column, amount in counts.items():
            self.counts[column] = self.counts.get(column, 0) + amount
        self.values.update(values)


async def _write_counts(connection: Any, counts: dict[tuple[Table, Hashable], _Count]) -> None:
    """The deferred counter updates, one statement per table and set of columns."""
    grouped: dict[tuple[Table, tuple[str, ...], tuple[str, ...]], list[dict[str, Any]]] = {}
    for (table, key), count in counts.items():
        shape = (table, tuple(sorted(count.counts)), tuple(sorted(count.values)))
        grouped.setdefault(shape, []).append(
            {"k_": key}
            | {f"a_{name}": amount for name, amount in count.counts.items()}
            | {f"v_{name}": value for name, value in count.values.items()}
        )
    for shape, params in grouped.items():
        statement = _COUNTS_UPDATE.get(shape)
        if statement is None:
            table, added, values = shape
            (primary,) = table.primary_key.columns
            changes: dict[str, Any] = {
                name: table.c[name] + bindparam(f"a_{name}") for name in added
            }
            changes |= {name: bindparam(f"v_{name}", type_=table.c[name].type) for name in values}
            statement = update(table).where(primary == bindparam("k_")).values(changes)
            _COUNTS_UPDATE[shape] = statement
        await connection.execute(statement, params)


@dataclass(frozen=True)
class VerifyReport:
    ok: bool
    checked: int
    height: int
    problem: str | None = None
    bad_height: int | None = None
    head_hash: str | None = None  # of the last transaction: what an operator publishes


class _Batch:
    """One database transaction shared by consecutive writes, and its commit's outcome."""

    def __init__(self, session: AsyncSession, head: Head) -> None:
        self.session = session
        self.head = head
        self.sequences: dict[Any, int] = {}  # LedgerWrite.next_seq's counters
        self.ledger_rows: list[dict[str, Any]] = []  # of the writes that succeeded, in order
        self.event_rows: list[dict[str, Any]] = []
        self.deferred_rows: dict[Table, list[dict[str, Any]]] = {}  # not yet written
        self.pending: dict[Hashable, str] = {}  # unique keys the deferred rows take
        self.counts: dict[tuple[Table, Hashable], _Count] = {}  # counter updates not yet written
        # LedgerWrite.ahead's answers by name and item; None once an ordinary write ran.
        self.ahead: dict[str, dict[Hashable, Any]] | None = {}
        self.writes = 0  # writes whose savepoint was released into this batch
        self.committed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # Retrieved here so a failed commit nobody awaits (its writers all failed or were
        # cancelled) is not reported as "exception never retrieved".
        self.committed.add_done_callback(lambda done: done.cancelled() or done.exception())


class Ledger:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        max_batch: int = 256,
        sequencer: Sequencer | None = None,
    ) -> None:
        self._sessions = sessions
        self._turn = asyncio.Lock()  # one write body at a time in this process
        self._queued = 0  # writes waiting for their turn: the batch stays open while > 0
        self._batch: _Batch | None = None
        self._closer: asyncio.Future[None] | None = None
        self._dialect = dialect_of(sessions)
        self.max_batch = max_batch
        # Batches committed with writes in them, and those writes: their ratio is the mean
        # batch size, how much concurrent writes share each commit (`collector`).
        self.commits = 0
        self.committed_writes = 0
        self._ahead: dict[str, Counter[Hashable]] = {}  # `ahead`: what queued writers ask
        # Numbers each batch's events in the batch's transaction (the platform's sequencer);
        # without it they are left for a sequencer's pass.
        self.sequencer = sequencer

    @contextmanager
    def ahead(self, name: str, item: Hashable) -> Iterator[None]:
        """Tell the ledger that a write about to queue will ask `LedgerWrite.ahead` about
        `item`: the first write of a batch to ask asks for every item queued by then."""
        queued = self._ahead.setdefault(name, Counter())
        queued[item] += 1
        try:
            yield
        finally:
            queued[item] -= 1
            if queued[item] <= 0:
                del queued[item]

    @asynccontextmanager
    async def write(self, deferred: bool = False) -> AsyncIterator[LedgerWrite]:
        """Rows changed and transactions appended inside commit together, or not at all;
        on return they are committed (with whichever writes shared the batch).

        A `deferred` write changes nothing through the session: it only reads, then hands
        its rows to `LedgerWrite.defer` and appends. Those rows are written at the batch's
        commit (or before the next ordinary write of the batch), in one statement per table
        with the other deferred writes' rows, so the write needs no SAVEPOINT and no
        statement of its own: failing, it discards what it deferred and appended. It must
        check beforehand whatever could make its rows fail (unique keys: `holder`/`take`
        see the rows not yet written), since a row failing at the commit fails the batch.
        It may also add to counters of rows that exist (`LedgerWrite.add`), written with
        its rows."""
        self._queued += 1
        try:
            await self._turn.acquire()
        except BaseException:
            self._queued -= 1
            if self._batch is not None and not self._queued:
                # The batch stayed open for this write, which will never run: close it.
                self._closer = asyncio.ensure_future(self._close_when_idle())
            raise
        self._queued -= 1
        joined: _Batch | None = None
        # Not cancelled from here on (a request's deadline): the batch's connection is shared
        # with the writes that join it, and once in, the write's outcome is the batch's.
        with holding_shared():
            try:
                batch = self._batch or await self._open(deferred)
                self._batch = batch
                if not deferred:
                    batch.ahead = None  # it may change what the answers were about
                    if batch.deferred_rows or batch.counts:
                        await self._write_deferred(batch)  # an ordinary write sees every row
                write = LedgerWrite(
                    batch.session, batch.head, batch.sequences, batch.pending, batch, self._ahead
                )
                # record_event puts this write's events with its own rows (events.store).
                batch.session.sync_session.info[EVENT_ROWS] = write.event_rows
                if deferred:
                    before = Head(batch.head.height, batch.head.tx_hash)
                    try:
                        yield write
                    except BaseException:
                        # Nothing reached the database: forget the heights this write took.
                        batch.head.height, batch.head.tx_hash = before.height, before.tx_hash
                        raise
                    for table, rows in write.deferred_rows.items():
                        batch.deferred_rows.setdefault(table, []).extend(rows)
                    batch.pending.update(write.taken)
                    for key, count in write.deferred_counts.items():
                        batch.counts.setdefault(key, _Count()).add(count.counts, count.values)
                elif batch.writes == 0:
                    # Alone in its transaction so far: no savepoint needed, since failing
                    # discards the whole (otherwise empty) batch. A write nobody queues behind
                    # costs what it did before group commit.
                    try:
                        yield write
                        await batch.session.flush()  # a broken row fails here, not in the commit
                    except BaseException:
                        self._batch = None
                        batch.committed.cancel()
                        await asyncio.shield(batch.session.close())  # rolls back
                        raise
                else:
                    before = Head(batch.head.height, batch.head.tx_hash)
                    try:
                        async with batch.session.begin_nested():
                            yield write
                    except BaseException:
                        # The savepoint is rolled back; so are the heights this write took.
                        batch.head.height, batch.head.tx_hash = before.height, before.tx_hash
                        batch.session.expunge_all()
                        raise
                # Each write starts with an empty identity map, as with a session of its own:
                # no write sees another's objects, only the rows they flushed.
                batch.session.expunge_all()
                batch.ledger_rows += write.ledger_rows
                batch.event_rows += write.event_rows
                batch.writes += 1
                joined = batch
            finally:
                if self._batch is not None:
                    self._batch.session.sync_session.info.pop(EVENT_ROWS, None)
                await self._maybe_close()
                self._turn.release()
            assert joined is not None
            await asyncio.shield(joined.committed)  # by now its outcome is the batch's

    async def _close_when_idle(self) -> None:
        async with self._turn:
            await self._maybe_close()

    async def _open(self, deferred: bool = False) -> _Batch:
        session = self._sessions()
        try:
            await session.begin()
            # SQLite's write lock, or PostgreSQL's planning for a batch of creates.
            await self._dialect.begin_write_batch(session, deferred)
            row = (await session.execute(_HEAD_LOCKED)).one_or_none()
        except BaseException:
            await session.close()
            raise
        if row is None:
            await session.close()
            raise RuntimeError("the ledger head row is missing; run `twinhub migrate`")
        return _Batch(session, Head(row.height, row.tx_hash))

    async def _maybe_close(self) -> None:
        """Commit the open batch unless another write is queued to join it (and it is not
        full). Runs under the turn lock, so the next batch starts after this one's commit."""
        batch = self._batch
        if batch is None or (self._queued and batch.writes < self.max_batch):
            return
        self._batch = None
        try:
            if batch.writes:
                if self._dialect.joins_statements:
                    deliveries = await self._write_joined(batch)
                else:
                    deliveries = await self._write_each(batch)
                await batch.session.commit()
                self.commits += 1
                self.committed_writes += batch.writes
                if deliveries >= 0 and self.sequencer is not None:
                    await self.sequencer.numbered(batch.event_rows, deliveries)
            else:
                await batch.session.rollback()
        except BaseException as error:
            batch.committed.set_exception(error)
            raise
        else:
            batch.committed.set_result(None)
        finally:
            await asyncio.shield(batch.session.close())

    async def _write_each(self, batch: _Batch) -> int:
        """The batch's rows, a statement each (SQLite: in process, a statement costs no
        wait); the deliveries made for its events, -1 if they were left for the sequencer."""
        await self._write_deferred(batch, closing=True)
        if batch.ledger_rows:
            await insert_rows(await batch.session.connection(), _TRANSACTIONS, batch.ledger_rows)
        deliveries = -1
        if batch.event_rows and self.sequencer is not None:
            deliveries = await self.sequencer.number_with(batch.session, batch.event_rows)
            events_numbered(batch.session)
        elif batch.event_rows:
            await insert_rows(await batch.session.connection(), _EVENTS, batch.event_rows)
        head = {"height": batch.head.height, "tx_hash": batch.head.tx_hash}
        await batch.session.execute(_HEAD_SET, head)
        return deliveries

    async def _write_joined(self, batch: _Batch) -> int:
        """`_write_each` in as few round trips as PostgreSQL allows, since the writers
        all wait for them: the sequencer's lock and top position, then the deferred rows, the
        transactions, the events (without webhook subscriptions) and the new head in one
        statement (`insert_together`)."""
        parts = [*batch.deferred_rows.items(), (_TRANSACTIONS, batch.ledger_rows)]
        if batch.counts:
            await _write_counts(await batch.session.connection(), batch.counts)
        batch.deferred_rows, batch.pending, batch.counts = {}, {}, {}
        deliveries, subscriptions = -1, []
        if batch.event_rows and self.sequencer is not None:
            subscriptions = await self.sequencer.position(batch.session, batch.event_rows)
            events_numbered(batch.session)
            deliveries = 0
        if batch.event_rows and not subscriptions:
            parts.append((_EVENTS, batch.event_rows))
        head = (batch.head.height, batch.head.tx_hash)
        await insert_together(await batch.session.connection(), parts, then=(_HEAD_UPDATE, head))
        if subscriptions:
            assert self.sequencer is not None
            deliveries = await self.sequencer.insert_delivered(
                batch.session, batch.event_rows, subscriptions
            )
        return deliveries

    async def _write_deferred(self, batch: _Batch, closing: bool = False) -> None:
        """The deferred writes' rows, one statement per table in the order first deferred
        (parents before children). Their writers checked them; if one fails all the same,
        the whole batch fails (so nobody is told of a write that was not made)."""
        try:
            connection = await batch.session.connection()
            for table, rows in batch.deferred_rows.items():
                await insert_rows(connection, table, rows)
            if batch.counts:
                await _write_counts(connection, batch.counts)
        except BaseException as error:
            if not closing:  # _maybe_close reports its own failure
                self._batch = None
                batch.committed.set_exception(error)
                await asyncio.shield(batch.session.close())  # rolls back
            raise
        batch.deferred_rows = {}
        batch.pending = {}
        batch.counts = {}

    def collector(self) -> Collector:
        """Prometheus counters of this process's group commits: writes committed per
        commit is the mean batch size (1 when writes never overlap)."""
        ledger = self

        class LedgerMetrics(Collector):
            def collect(self) -> Iterator[Metric]:
                yield CounterMetricFamily(
                    "twinhub_ledger_commits",
                    "Ledger batches committed with at least one write (group commit).",
                    value=ledger.commits,
                )
                yield CounterMetricFamily(
                    "twinhub_ledger_writes_committed",
                    "Ledger writes committed in those batches.",
                    value=ledger.committed_writes,
                )

        return LedgerMetrics()

    async def height(self) -> int:
        async with self._sessions() as session:
            head = await session.get(LedgerHead, HEAD_ROW)
            return head.height if head else 0

    async def history(
        self, subject: str, after: int = 0, limit: int | None = None
    ) -> list[Transaction]:
        """Transactions about `subject` above height `after`, oldest first (`limit` of them)."""
        query = (
            select(LedgerTransaction)
            .where(LedgerTransaction.subject == subject, LedgerTransaction.height > after)
            .order_by(LedgerTransaction.height)
        )
        if limit is not None:
            query = query.limit(limit)
        async with self._sessions() as session:
            return [_transaction(row) for row in await session.scalars(query)]

    async def transaction(self, height: int) -> Transaction | None:
        async with self._sessions() as session:
            row = await session.get(LedgerTransaction, height)
            return _transaction(row) if row else None

    async def verify(
        self, batch: int = 2000, progress: Callable[[int, int], None] | None = None
    ) -> VerifyReport:
        """Walk the whole chain; report the first transaction that does not fit."""
        async with self._sessions() as session:
            head = await session.get(LedgerHead, HEAD_ROW)
            total = await session.scalar(select(func.count()).select_from(LedgerTransaction))
        head_height = head.height if head else 0
        expected_prev, expected_height, checked = GENESIS_HASH, 1, 0
        while True:
            async with self._sessions() as session:
                rows = list(
                    await session.scalars(
                        select(LedgerTransaction)
                        .where(LedgerTransaction.height >= expected_height)
                        .order_by(LedgerTransaction.height)
                        .limit(batch)
                    )
                )
            if not rows:
                break
            for row in rows:
                problem = _problem(row, expected_height, expected_prev)
                if problem:
                    return VerifyReport(False, checked, head_height, problem, expected_height)
                expected_prev, expected_height = row.tx_hash, row.height + 1
                checked += 1
            if progress:
                progress(checked, total or 0)
        if head is None or head.height != checked or (checked and head.tx_hash != expected_prev):
            return VerifyReport(
                False,
                checked,
                head_height,
                "the head does not match the last transaction",
                checked + 1,
            )
        return VerifyReport(True, checked, head_height, head_hash=expected_prev)


def _problem(row: LedgerTransaction, height: int, prev_hash: str) -> str | None:
    if row.height != height:
        return f"transaction {height} is missing (found {row.height} next)"
    if row.prev_hash != prev_hash:
        return f"transaction {height} does not point at the hash of transaction {height - 1}"
    recomputed = transaction_hash(
        row.height, row.prev_hash, row.kind, row.subject, row.actor, row.created_at, row.payload
    )
    if recomputed != row.tx_hash:
        return f"transaction {height} was altered: its content does not match its hash"
    return None
