"""Who takes part in a claim collection (ixo's collection members, with their budgets) and
what agents have deposited with it (ixo's agent deposit balances).

What makes an agent a member in twinhub: being named as one of the collection's
evaluators (role `evaluator`, from the moment the collection is opened), or submitting a
claim to it (role `agent`, from its first claim). A member is one row per collection and
DID; the first role it joined with is kept. Membership follows from writes the ledger
already records (the collection's creation, the claim's submission), so it needs no
ledger transaction of its own, and it is written in the same database transaction as
that write: a listener on the platform's own session class (`members_join`, attached by
the composition root; never on SQLAlchemy's `Session` itself) adds the rows when those
records are flushed, so the claims service does not need to know about members, and a
rolled-back write leaves no member behind. The insert ignores a row that exists, so
concurrent first claims of one agent cannot fail each other.

ixo's members carry a periodic spending budget for intents; twinhub has no intents, so
a member's budget is empty (period 0s, no limit, nothing spent). ixo's deposits back
dispute economics; twinhub's collections require none (`service_agent_deposit_required`
is empty), so an agent member's balance is zero unless a deposit has been recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import event, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session, UOWTransaction

from twinhub.db.dialects import dialect_of
from twinhub.db.models import AgentDeposit, Claim, ClaimCollection, CollectionMember
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import NotFound
from twinhub.services.ledger import LedgerWrite
from twinhub.services.paging import Window, WindowPage, fetch_window

EVALUATOR, AGENT = "evaluator", "agent"


@dataclass(frozen=True)
class Member:
    collection_id: int
    member: str
    role: str
    period_seconds: int
    spend_limit: int | None
    spent: int
    period_reset_at: datetime | None


@dataclass(frozen=True)
class DepositBalance:
    collection_id: int
    agent: str
    amounts: list[tuple[str, int]]  # (denom, amount), by denom
    withdrawable_at: datetime | None


def _member(row: CollectionMember) -> Member:
    return Member(
        row.collection_id,
        row.member,
        row.role,
        row.period_seconds,
        row.spend_limit,
        row.spent,
        row.period_reset_at,
    )


def _joins(session: Session) -> list[dict[str, Any]]:
    """The member rows that the objects being flushed imply."""
    now = utcnow()
    rows: list[dict[str, Any]] = []
    for obj in session.new:
        if isinstance(obj, ClaimCollection):
            rows.extend(
                {"collection_id": obj.id, "member": did, "role": EVALUATOR, "joined_at": now}
                for did in obj.evaluators or []
            )
        elif isinstance(obj, Claim):
            rows.append(
                {"collection_id": obj.collection_id, "member": obj.agent, "role": AGENT}
                | {"joined_at": now}
            )
    return rows


def members_join(session_class: type[Session]) -> None:
    """Sessions of `session_class` (the platform's) add the members their flushes imply."""
    if not event.contains(session_class, "after_flush", _add_members):
        event.listen(session_class, "after_flush", _add_members)


def _add_members(session: Session, flush: UOWTransaction) -> None:
    """Insert the members new collections and claims bring, in the same transaction."""
    rows = _joins(session)
    if not rows:
        return
    insert = dialect_of(session.get_bind()).insert
    for row in rows:  # one by one: a batch would stop at the first existing member
        statement = (
            insert(CollectionMember)
            .values(period_seconds=0, spent=0, **row)
            .on_conflict_do_nothing(index_elements=["collection_id", "member"])
        )
        session.execute(statement)


_MEMBERS = CollectionMember.__table__


def agent_joins(
    write: LedgerWrite, collection_id: int, agent: str, members: set[str], now: datetime
) -> None:
    """A claim made in a deferred ledger write (services.claims' batched submissions)
    flushes nothing, so `_add_members` does not see it: its agent joins here, a row
    deferred with the claim's, unless it is a member already (`members`, read under the
    ledger's turn with the batch's other facts, services.claims) or an earlier claim of
    the batch made it one."""
    key = ("collection_members", collection_id, agent)
    if agent in members or write.holder(key) is not None:
        return
    write.defer(
        _MEMBERS,
        {
            "collection_id": collection_id,
            "member": agent,
            "role": AGENT,
            "period_seconds": 0,
            "spend_limit": None,
            "spent": 0,
            "period_reset_at": None,
            "joined_at": now,
        },
    )
    write.take(key, agent)


class CollectionMemberService:
    """Reads of collection members and agent deposits (the chain node's claims queries)."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def _collection_exists(self, session: AsyncSession, collection_id: int) -> None:
        if await session.get(ClaimCollection, collection_id) is None:
            raise NotFound(f"No claim collection {collection_id}.")

    async def member(self, collection_id: int, did: str) -> Member:
        async with self._sessions() as session:
            row = await session.scalar(
                select(CollectionMember).where(
                    CollectionMember.collection_id == collection_id,
                    CollectionMember.member == did,
                )
            )
            if row is None:
                await self._collection_exists(session, collection_id)
                raise NotFound(f"{did} is not a member of claim collection {collection_id}.")
            return _member(row)

    async def members_window(self, collection_id: int, window: Window) -> WindowPage[Member]:
        """A Cosmos page of a collection's members, in the order they joined."""
        async with self._sessions() as session:
            await self._collection_exists(session, collection_id)
            query = select(CollectionMember).where(CollectionMember.collection_id == collection_id)
            page = await fetch_window(session, query, CollectionMember.seq, window)
        return WindowPage([_member(r) for r in page.items], page.next_key, page.total)

    async def deposit(self, collection_id: int, agent: str) -> DepositBalance:
        """An agent member's deposits (zero when it has made none)."""
        async with self._sessions() as session:
            is_agent = await session.scalar(
                select(CollectionMember.seq).where(
                    CollectionMember.collection_id == collection_id,
                    CollectionMember.member == agent,
                    CollectionMember.role == AGENT,
                )
            )
            if is_agent is None:
                await self._collection_exists(session, collection_id)
                raise NotFound(f"{agent} has no deposit with claim collection {collection_id}.")
            balances = await self._balances(session, collection_id, [agent])
        return balances[agent]

    async def deposits_window(
        self, collection_id: int, window: Window
    ) -> WindowPage[DepositBalance]:
        """A Cosmos page of the deposit balances of a collection's agent members."""
        async with self._sessions() as session:
            await self._collection_exists(session, collection_id)
            query = select(CollectionMember).where(
                CollectionMember.collection_id == collection_id, CollectionMember.role == AGENT
            )
            page = await fetch_window(session, query, CollectionMember.seq, window)
            agents = [row.member for row in page.items]
            balances = await self._balances(session, collection_id, agents)
        return WindowPage([balances[a] for a in agents], page.next_key, page.total)

    @staticmethod
    async def _balances(
        session: AsyncSession, collection_id: int, agents: list[str]
    ) -> dict[str, DepositBalance]:
        found: dict[str, list[AgentDeposit]] = {agent: [] for agent in agents}
        if agents:
            rows = await session.scalars(
                select(AgentDeposit)
                .where(AgentDeposit.collection_id == collection_id, AgentDeposit.agent.in_(agents))
                .order_by(AgentDeposit.denom)
            )
            for row in rows:
                found[row.agent].append(row)
        return {
            agent: DepositBalance(
                collection_id,
                agent,
                [(r.denom, r.amount) for r in rows if r.amount],
                max((r.withdrawable_at for r in rows if r.withdrawable_at), default=None),
            )
            for agent, rows in found.items()
        }
