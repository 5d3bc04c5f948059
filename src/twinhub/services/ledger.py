"""The ledger: an append-only transaction log with a height and a hash chain.

Every registry write appends a transaction in the same database transaction as the rows it
changes, so the two can never disagree. Each transaction's hash covers its height, the hash
before it, its kind, subject, actor, time and payload (canonical JSON), so editing,
removing or reordering any stored transaction breaks the chain, and `verify` finds where.

Appends are serialised: PostgreSQL locks the single `ledger_head` row (across processes);
SQLite, which has one writer anyway, takes a process-wide asyncio lock.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import LedgerHead, LedgerTransaction, utcnow
from twinhub.events.store import record_ledger_events

GENESIS_HASH = "0" * 64
HEAD_ROW = 1


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


class LedgerWrite:
    """One atomic registry write: change rows through `session`, record them with `append`."""

    def __init__(self, session: AsyncSession, head: LedgerHead) -> None:
        self.session = session
        self._head = head
        self.appended: list[Transaction] = []

    async def append(
        self, kind: str, subject: str, actor: str, payload: dict[str, Any]
    ) -> Transaction:
        height = self._head.height + 1
        prev_hash = self._head.tx_hash or GENESIS_HASH
        at = utcnow()
        body = canonical_json(payload)
        tx_hash = transaction_hash(height, prev_hash, kind, subject, actor, at, body)
        self.session.add(
            LedgerTransaction(
                height=height,
                tx_hash=tx_hash,
                prev_hash=prev_hash,
                kind=kind,
                subject=subject,
                actor=actor,
                payload=body,
                created_at=at,
            )
        )
        self._head.height, self._head.tx_hash = height, tx_hash
        transaction = Transaction(height, tx_hash, prev_hash, kind, subject, actor, payload, at)
        record_ledger_events(self.session, transaction)  # the outbox: same transaction
        self.appended.append(transaction)
        return transaction


@dataclass(frozen=True)
class VerifyReport:
    ok: bool
    checked: int
    height: int
    problem: str | None = None
    bad_height: int | None = None


class Ledger:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions
        self._local_writer = asyncio.Lock()
        self._serialise_locally = sessions.kw["bind"].dialect.name == "sqlite"

    @asynccontextmanager
    async def write(self) -> AsyncIterator[LedgerWrite]:
        """Rows changed and transactions appended inside commit together, or not at all."""
        if self._serialise_locally:
            async with self._local_writer, self._write() as write:
                yield write
        else:
            async with self._write() as write:
                yield write

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[LedgerWrite]:
        async with self._sessions.begin() as session:
            head = await session.get(LedgerHead, HEAD_ROW, with_for_update=True)
            if head is None:
                raise RuntimeError("the ledger head row is missing; run `twinhub migrate`")
            yield LedgerWrite(session, head)

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
        return VerifyReport(True, checked, head_height)


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
