"""Domain verification by governance: groups vote on proposals; only execution verifies.

How ixo does it (DESIGN.md): a verification proposal is a DAO proposal of a compliance
group. Only members propose; members vote yes, no or abstain, once, with their weights.
A group decides by one of three thresholds:
- absolute count: passes when the yes weight reaches `threshold`;
- absolute percentage: passes when the yes weight reaches `threshold` x the total weight;
- threshold with quorum: once the voting period ends, passes when the weight that voted
  reaches `quorum` x total and yes reaches `threshold` x (yes + no); before the end it
  passes only when no remaining votes could change that.
A proposal is open, then passed as soon as it can no longer fail, or rejected as soon as it
can no longer pass (or when its period ends unpassed). Executing a passed proposal sets
(or, for a revocation, clears) the domain's verified flag through the ledger; nothing else
can. The total weight is fixed when the proposal is made.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import func, insert, literal, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import (
    Domain,
    GovernanceGroup,
    GroupMember,
    LedgerTransaction,
    Proposal,
    ProposalItem,
    Relationship,
    Vote,
)
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import (
    Conflict,
    FieldProblem,
    Forbidden,
    Invalid,
    NotFound,
    Problems,
    ServiceError,
)
from twinhub.kernel.identifiers import SLUG_PATTERN, is_did, mint, slugify
from twinhub.kernel.principals import Principal
from twinhub.logging import get_logger
from twinhub.services.builtin_protocols import SYSTEM_ACTOR
from twinhub.services.domains import ACTIVE, DomainService, stored_record
from twinhub.services.ledger import Ledger

ABSOLUTE_COUNT, ABSOLUTE_PERCENTAGE, THRESHOLD_QUORUM = (
    "absolute_count",
    "absolute_percentage",
    "threshold_quorum",
)
THRESHOLD_KINDS = (ABSOLUTE_COUNT, ABSOLUTE_PERCENTAGE, THRESHOLD_QUORUM)
OPEN, PASSED, REJECTED, EXECUTED = "open", "passed", "rejected", "executed"
OPTIONS = ("yes", "no", "abstain")
VERIFY, REVOKE = "verify", "revoke"
VERIFY_BATCH = "verify-batch"  # one proposal verifies many assets (stoves) of a project
MAX_MEMBERS = 1000
MAX_BATCH_LIST = 10_000  # DIDs named one by one; a filter selects any number
SYSTEM_PRINCIPAL = Principal(SYSTEM_ACTOR, frozenset({"admin"}))
log = get_logger(__name__)


@dataclass(frozen=True)
class Tally:
    yes: int
    no: int
    abstain: int
    total: int

    @property
    def remaining(self) -> int:
        return self.total - self.yes - self.no - self.abstain


def decide(kind: str, threshold: float, quorum: float | None, tally: Tally, ended: bool) -> str:
    """open, passed or rejected: the whole voting rule, free of storage."""
    if kind == ABSOLUTE_COUNT:
        needed = threshold
        if tally.yes >= needed:
            return PASSED
        return REJECTED if ended or tally.yes + tally.remaining < needed else OPEN
    if kind == ABSOLUTE_PERCENTAGE:
        needed = threshold * tally.total
        if tally.yes >= needed - 1e-9:
            return PASSED
        return REJECTED if ended or tally.yes + tally.remaining < needed - 1e-9 else OPEN
    assert kind == THRESHOLD_QUORUM and quorum is not None
    voted = tally.yes + tally.no + tally.abstain
    if ended:
        quorum_met = voted >= quorum * tally.total - 1e-9
        threshold_met = tally.yes > 0 and tally.yes >= threshold * (tally.yes + tally.no) - 1e-9
        return PASSED if quorum_met and threshold_met else REJECTED
    # Early: the outcome must hold however the remaining weight votes.
    worst_yes, worst_no = tally.yes, tally.no + tally.remaining
    holds = tally.yes > 0 and worst_yes >= threshold * (worst_yes + worst_no) - 1e-9
    if holds and voted >= quorum * tally.total - 1e-9:
        return PASSED
    best_yes = tally.yes + tally.remaining
    if best_yes == 0 or best_yes < threshold * (best_yes + tally.no) - 1e-9:
        return REJECTED
    return OPEN


@dataclass(frozen=True)
class GroupSpec:
    name: str
    members: dict[str, int]
    threshold_kind: str
    threshold: float
    quorum: float | None
    voting_period_seconds: int
    slug: str | None = None
    is_default: bool = False


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _threshold(group: GovernanceGroup) -> dict[str, Any]:
    return {"kind": group.threshold_kind, "value": group.threshold, "quorum": group.quorum}


@dataclass(frozen=True)
class BatchSelection:
    """Which assets of a project a batch proposal verifies: the unverified active ones
    linked to it (its `project` relationship or as children), of one protocol if named,
    and only those listed if `domains` is given."""

    project: str
    protocol: str | None = None
    domains: list[str] | None = None

    def describe(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "protocol": self.protocol,
            "listed": len(self.domains) if self.domains is not None else None,
        }


class GovernanceService:
    """Groups, proposals, votes and execution.

    A batch proposal larger than one chunk executes in the background: the execute request
    verifies the first chunk and hands the rest to a runner (`batches`, see BatchRunners),
    which verifies chunk after chunk until every item is done.

    Two runners of one proposal in two processes need no lease of their own: each chunk is
    one ledger write, and ledger writes are serialised across processes by the ledger's
    lock (PostgreSQL: the `ledger_head` row FOR UPDATE; SQLite: BEGIN IMMEDIATE), taken
    before the chunk reads anything, with the proposal row also read FOR UPDATE. So one
    chunk runs at a time and sees the previous one committed: it picks only items still
    `done = false`, counts `items_done` from the committed value, and verifies only a
    domain not verified yet. A second runner costs a few empty reads, never a second
    verification or a wrong count."""

    batch_chunk = 1000  # domains verified per ledger write while a batch executes

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        ledger: Ledger,
        domains: DomainService,
        clock: Any = utcnow,
        batch_chunk: int | None = None,
        batch_retries: int = 3,
        batch_retry_seconds: float = 1.0,
    ) -> None:
        self._sessions = sessions
        self._ledger = ledger
        self._domains = domains
        self._now = clock
        if batch_chunk is not None:
            self.batch_chunk = batch_chunk
        self.batches = BatchRunners(
            sessions,
            # Looked up on each call, so that a test may wrap the service's chunk.
            lambda pid, actor: self._execute_batch_chunk(pid, actor, first=False, authorized=True),
            clock,
            batch_retries,
            batch_retry_seconds,
        )

    # -- groups ----------------------------------------------------------------------------
    async def create_group(self, spec: GroupSpec, actor: Principal) -> dict[str, Any]:
        if not actor.is_admin:
            raise Forbidden("Only an admin may create governance groups.")
        slug = spec.slug if spec.slug is not None else slugify(spec.name)
        problems = Problems()
        if not spec.name or len(spec.name) > 200:
            problems.add("name", "expected a name of 1 to 200 characters")
        if not SLUG_PATTERN.match(slug):
            problems.add("id", "expected lower-case letters, digits and hyphens (1-64)")
        if not 1 <= len(spec.members) <= MAX_MEMBERS:
            problems.add("members", f"expected 1 to {MAX_MEMBERS} members")
        for member, weight in spec.members.items():
            if not is_did(member):
                problems.add(f"members.{member}", "expected a DID")
            if not isinstance(weight, int) or isinstance(weight, bool) or weight < 1:
                problems.add(f"members.{member}", "weights are whole numbers of at least 1")
        total = sum(w for w in spec.members.values() if isinstance(w, int))
        self._check_threshold(spec, total, problems)
        if not 1 <= spec.voting_period_seconds <= 366 * 86400:
            problems.add("votingPeriodSeconds", "expected 1 second to a year")
        problems.raise_if_any("The governance group is invalid.")
        did = mint("group", slug)
        try:
            async with self._ledger.write() as write:
                if spec.is_default:
                    await write.session.execute(update(GovernanceGroup).values(is_default=False))
                write.session.add(
                    GovernanceGroup(
                        did=did,
                        name=spec.name,
                        threshold_kind=spec.threshold_kind,
                        threshold=spec.threshold,
                        quorum=spec.quorum,
                        voting_period_seconds=spec.voting_period_seconds,
                        is_default=spec.is_default,
                        created_at=self._now(),
                    )
                )
                write.session.add_all(
                    GroupMember(group_did=did, member=m, weight=w) for m, w in spec.members.items()
                )
                await write.session.flush()
                record = await self._group_record(write.session, did)
                await write.append("group.create", did, actor.did, {"record": record})
        except IntegrityError:
            raise Conflict(f"A group {did} exists already.") from None
        return record

    async def ensure_default_group(self, spec: GroupSpec) -> bool:
        """Create `spec` as the default group unless a default group exists; True if made."""
        async with self._sessions() as session:
            if await session.scalar(
                select(GovernanceGroup.did).where(GovernanceGroup.is_default.is_(True))
            ):
                return False
        try:
            await self.create_group(spec, Principal(SYSTEM_ACTOR, frozenset({"admin"})))
        except Conflict:
            return False  # another replica made it a moment ago
        return True

    @staticmethod
    def _check_threshold(spec: GroupSpec, total: int, problems: Problems) -> None:
        kind, value = spec.threshold_kind, spec.threshold
        if kind not in THRESHOLD_KINDS:
            problems.add("threshold.kind", f"expected one of {', '.join(THRESHOLD_KINDS)}")
            return
        if kind == ABSOLUTE_COUNT:
            if value != int(value) or not 1 <= value <= total:
                problems.add("threshold.value", "a whole weight from 1 to the members' total")
        elif not 0 < value <= 1:
            problems.add("threshold.value", "a fraction above 0 and at most 1")
        if kind == THRESHOLD_QUORUM:
            if spec.quorum is None or not 0 < spec.quorum <= 1:
                problems.add("threshold.quorum", "a fraction above 0 and at most 1")
        elif spec.quorum is not None:
            problems.add("threshold.quorum", f"only {THRESHOLD_QUORUM} has a quorum")

    async def _group_record(self, session: AsyncSession, did: str) -> dict[str, Any]:
        group = await session.get(GovernanceGroup, did)
        if group is None:
            raise NotFound(f"No governance group {did!r}.")
        members = await session.scalars(
            select(GroupMember).where(GroupMember.group_did == did).order_by(GroupMember.member)
        )
        return {
            "did": group.did,
            "name": group.name,
            "members": [{"did": m.member, "weight": m.weight} for m in members],
            "threshold": _threshold(group),
            "votingPeriodSeconds": group.voting_period_seconds,
            "default": group.is_default,
            "createdAt": _iso(group.created_at),
        }

    async def group(self, did: str) -> dict[str, Any]:
        if not is_did(did):
            raise NotFound(f"No governance group {did!r}.")
        async with self._sessions() as session:
            return await self._group_record(session, did)

    async def _default_group(self, session: AsyncSession) -> str:
        did = await session.scalar(
            select(GovernanceGroup.did).where(GovernanceGroup.is_default.is_(True))
        )
        if did is None:
            raise Invalid(
                "No group given and no default compliance group is configured.",
                [],
            )
        return did

    # -- proposals -------------------------------------------------------------------------
    async def propose(
        self,
        domain_did: str,
        action: str,
        evidence: dict[str, Any],
        group_did: str | None,
        actor: Principal,
    ) -> dict[str, Any]:
        if action not in (VERIFY, REVOKE):
            raise Invalid("The action is verify or revoke.", [])
        record = await self._domains.get(domain_did)  # NotFound for an unknown domain
        if record["status"] != ACTIVE:
            raise Conflict(f"{domain_did} is deactivated; it cannot be verified.")
        now = self._now()
        async with self._ledger.write() as write:
            session = write.session
            group, total = await self._proposing_group(session, group_did, actor)
            group_did = group.did
            proposal = Proposal(
                group_did=group_did,
                domain_did=domain_did,
                action=action,
                package={"record": record, "evidence": evidence},
                proposer=actor.did,
                status=OPEN,
                total_weight=total,
                created_at=now,
                expires_at=now + timedelta(seconds=group.voting_period_seconds),
            )
            session.add(proposal)
            await session.flush()
            view = await self._view(session, proposal, group)
            await write.append("proposal.create", domain_did, actor.did, {"proposal": view})
        return view

    async def _proposing_group(
        self, session: AsyncSession, group_did: str | None, actor: Principal
    ) -> tuple[GovernanceGroup, int]:
        """The deciding group (the default one if none is named), which `actor` must be a
        member of, and its total weight, fixed for the proposal."""
        group_did = group_did or await self._default_group(session)
        group = await session.get(GovernanceGroup, group_did)
        if group is None:
            raise NotFound(f"No governance group {group_did!r}.")
        if await self._weight(session, group_did, actor.did) is None:
            raise Forbidden(f"Only members of {group_did} may propose.")
        total = await session.scalar(
            select(func.sum(GroupMember.weight)).where(GroupMember.group_did == group_did)
        )
        return group, int(total or 0)

    async def propose_batch(
        self,
        selection: BatchSelection,
        evidence: dict[str, Any],
        group_did: str | None,
        actor: Principal,
    ) -> dict[str, Any]:
        """One proposal to verify many stoves: the set is fixed now (each DID a row of
        `proposal_items`, its count and digest in the voted package), so voters decide on
        exactly what execution verifies."""
        problems = Problems()
        if selection.domains is not None:
            if not 1 <= len(selection.domains) <= MAX_BATCH_LIST:
                problems.add("domains", f"expected 1 to {MAX_BATCH_LIST} DIDs, or a filter")
            elif len(set(selection.domains)) != len(selection.domains):
                problems.add("domains", "a DID is listed twice")
        if selection.protocol is not None and not is_did(selection.protocol):
            problems.add("protocol", "expected a protocol DID")
        problems.raise_if_any("The batch proposal is invalid.")
        record = await self._domains.get(selection.project)  # NotFound for an unknown one
        if record["status"] != ACTIVE:
            raise Conflict(f"{selection.project} is deactivated; its stoves cannot be verified.")
        now = self._now()
        async with self._ledger.write() as write:
            session = write.session
            group, total = await self._proposing_group(session, group_did, actor)
            group_did = group.did
            proposal = Proposal(
                group_did=group_did,
                domain_did=selection.project,
                action=VERIFY_BATCH,
                package={},
                proposer=actor.did,
                status=OPEN,
                total_weight=total,
                created_at=now,
                expires_at=now + timedelta(seconds=group.voting_period_seconds),
            )
            session.add(proposal)
            await session.flush()
            chosen = _batch_query(selection)
            if selection.domains is not None:
                found = set(await session.scalars(select(chosen.c.did)))
                missing = [did for did in selection.domains if did not in found]
                if missing:
                    shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
                    raise Invalid(
                        f"{len(missing)} listed domains are not unverified active assets of "
                        f"{selection.project}: {shown}",
                        [FieldProblem("domains", shown)],
                    )
            await session.execute(
                insert(ProposalItem).from_select(
                    ["proposal_id", "domain_did", "done"],
                    select(literal(proposal.id), chosen.c.did, literal(False)),
                )
            )
            dids = list(
                await session.scalars(
                    select(ProposalItem.domain_did)
                    .where(ProposalItem.proposal_id == proposal.id)
                    .order_by(ProposalItem.domain_did)
                )
            )
            if not dids:
                raise Invalid(
                    f"No unverified active asset of {selection.project} matches.",
                    [FieldProblem("domains", "nothing to verify")],
                )
            proposal.items_total, proposal.items_done = len(dids), 0
            proposal.package = {
                "record": record,
                "evidence": evidence,
                "batch": {
                    **selection.describe(),
                    "count": len(dids),
                    "sha256": hashlib.sha256("\n".join(dids).encode()).hexdigest(),
                },
            }
            view = await self._view(session, proposal, group)
            await write.append("proposal.create", selection.project, actor.did, {"proposal": view})
        return view

    async def proposal_items(
        self, proposal_id: int, after: str | None, limit: int
    ) -> tuple[list[dict[str, Any]], str | None]:
        """A batch proposal's domains in DID order, `limit` at a time (what voters check)."""
        async with self._sessions() as session:
            if await session.get(Proposal, proposal_id) is None:
                raise NotFound(f"No proposal {proposal_id}.")
            query = select(ProposalItem).where(ProposalItem.proposal_id == proposal_id)
            if after:
                query = query.where(ProposalItem.domain_did > after)
            rows = list(
                await session.scalars(query.order_by(ProposalItem.domain_did).limit(limit + 1))
            )
        more = len(rows) > limit
        rows = rows[:limit]
        items = [{"domain": row.domain_did, "done": row.done} for row in rows]
        return items, (rows[-1].domain_did if more and rows else None)

    async def _execute_batch_chunk(
        self, proposal_id: int, actor: Principal, first: bool, authorized: bool = False
    ) -> dict[str, Any] | None:
        """Verify the next chunk of a passed batch proposal in one ledger write: each
        domain's verification a `domain.verify` transaction like any other. Returns the
        proposal's view once every item is done, else None (call again). `authorized`:
        the actor's right to execute was checked when the runner was handed the batch."""
        async with self._ledger.write() as write:
            session = write.session
            proposal, group = await self._proposal(session, proposal_id, lock=True)
            if not first and proposal.status == EXECUTED:
                return await self._view(session, proposal, group)
            await self._settle(session, proposal, group)
            if (
                not authorized
                and not actor.is_admin
                and await self._weight(session, group.did, actor.did) is None
            ):
                raise Forbidden(f"Only members of {group.did} or an admin may execute.")
            if proposal.status != PASSED:
                raise Conflict(
                    f"Proposal {proposal_id} is {proposal.status}; only a passed one executes."
                )
            chunk = self.batch_chunk
            # One more than a chunk: whether any remain after this one (a batch of exactly
            # one chunk is executed by it, with no empty chunk after).
            dids = list(
                await session.scalars(
                    select(ProposalItem.domain_did)
                    .where(ProposalItem.proposal_id == proposal_id, ProposalItem.done.is_(False))
                    .order_by(ProposalItem.domain_did)
                    .limit(chunk + 1)
                )
            )
            last = len(dids) <= chunk
            dids = dids[:chunk]
            now = self._now()
            if dids:
                await self._verify_chunk(write, dids, actor, proposal_id, now)
                await session.execute(
                    update(ProposalItem)
                    .where(
                        ProposalItem.proposal_id == proposal_id,
                        ProposalItem.domain_did.in_(dids),
                    )
                    .values(done=True)
                )
                proposal.items_done = (proposal.items_done or 0) + len(dids)
                proposal.batch_stopped_at = proposal.batch_stopped_reason = None
            if last:
                proposal.status, proposal.executed_at = EXECUTED, now
                return await self._view(session, proposal, group)
        return None

    @staticmethod
    async def _verify_chunk(
        write: Any, dids: list[str], actor: Principal, proposal_id: int, now: datetime
    ) -> None:
        """Bulk: one read of the rows and one of their edges, then a new version of each
        active unverified domain, recorded in the ledger as a single proposal would."""
        session = write.session
        rows = list(
            await session.scalars(
                select(Domain).where(Domain.did.in_(dids)).order_by(Domain.did).with_for_update()
            )
        )
        changed = [row for row in rows if row.status == ACTIVE and not row.verified]
        for row in changed:
            row.verified = True
            row.version += 1
            row.updated_at = now
        if not changed:
            return
        await session.flush()
        edges: dict[str, list[Relationship]] = {}
        for edge in await session.scalars(
            select(Relationship).where(Relationship.source_did.in_([r.did for r in changed]))
        ):
            edges.setdefault(edge.source_did, []).append(edge)
        for row in changed:
            record = stored_record(row, edges.get(row.did, []))
            await write.append(
                "domain.verify", row.did, actor.did, {"record": record, "proposal": proposal_id}
            )

    async def vote(self, proposal_id: int, option: str, actor: Principal) -> dict[str, Any]:
        if option not in OPTIONS:
            raise Invalid("A vote is yes, no or abstain.", [])
        async with self._ledger.write() as write:
            session = write.session
            proposal, group = await self._proposal(session, proposal_id, lock=True)
            await self._settle(session, proposal, group)
            if proposal.status != OPEN:
                raise Conflict(f"Proposal {proposal_id} is {proposal.status}; voting is closed.")
            weight = await self._weight(session, group.did, actor.did)
            if weight is None:
                raise Forbidden(f"Only members of {group.did} may vote.")
            try:
                async with session.begin_nested():
                    session.add(
                        Vote(
                            proposal_id=proposal_id,
                            voter=actor.did,
                            option=option,
                            weight=weight,
                            created_at=self._now(),
                        )
                    )
            except IntegrityError:
                raise Conflict(
                    f"{actor.did} has voted on proposal {proposal_id} already."
                ) from None
            await self._settle(session, proposal, group)
            view = await self._view(session, proposal, group)
            await write.append(
                "proposal.vote",
                proposal.domain_did,
                actor.did,
                {"proposal": proposal_id, "option": option, "weight": weight},
            )
        return view

    async def execute(self, proposal_id: int, actor: Principal) -> dict[str, Any]:
        """Apply a passed proposal: the one way a domain becomes (or stops being) verified.

        A batch proposal runs in chunks, each committed with its progress. Here the first
        chunk runs; a batch of one chunk is then executed, a larger one is handed to a
        background runner and its view returned still `passed`, with `progress` (poll the
        proposal until it is `executed`). Executing while a runner of this process works
        on it returns the current view and starts nothing; executing again after an
        interruption (a runner that gave up, a process that stopped) carries on where it
        stopped."""
        async with self._sessions() as session:
            action = await session.scalar(select(Proposal.action).where(Proposal.id == proposal_id))
        if action == VERIFY_BATCH:
            if self.batches.running(proposal_id):
                return await self._running_view(proposal_id, actor)
            view = await self._execute_batch_chunk(proposal_id, actor, first=True)
            if view is not None:
                return view
            self.batches.start(proposal_id, actor)
            return await self.proposal(proposal_id)
        async with self._ledger.write() as write:
            session = write.session
            proposal, group = await self._proposal(session, proposal_id, lock=True)
            await self._settle(session, proposal, group)
            if not actor.is_admin and await self._weight(session, group.did, actor.did) is None:
                raise Forbidden(f"Only members of {group.did} or an admin may execute.")
            if proposal.status != PASSED:
                raise Conflict(
                    f"Proposal {proposal_id} is {proposal.status}; only a passed one executes."
                )
            domain = await session.get(Domain, proposal.domain_did, with_for_update=True)
            assert domain is not None
            if domain.status != ACTIVE:
                raise Conflict(f"{domain.did} is deactivated; its verification cannot change.")
            domain.verified = proposal.action == VERIFY
            proposal.status = EXECUTED
            proposal.executed_at = self._now()
            await self._domains.record_change(
                write, domain, actor, f"domain.{proposal.action}", {"proposal": proposal_id}
            )
            view = await self._view(session, proposal, group)
        return view

    async def execute_all(self, proposal_id: int, actor: Principal) -> dict[str, Any]:
        """Execute a proposal to its end in the caller's task (tools and benchmarks, which
        have no request deadline): a batch chunk after chunk, no background runner."""
        first = True
        while True:
            view = await self._execute_batch_chunk(proposal_id, actor, first)
            if view is not None:
                return view
            first = False

    async def _running_view(self, proposal_id: int, actor: Principal) -> dict[str, Any]:
        async with self._sessions() as session:
            proposal, group = await self._proposal(session, proposal_id, lock=False)
            if not actor.is_admin and await self._weight(session, group.did, actor.did) is None:
                raise Forbidden(f"Only members of {group.did} or an admin may execute.")
            return await self._view(session, proposal, group)

    async def proposal(self, proposal_id: int) -> dict[str, Any]:
        async with self._ledger.write() as write:  # settling an expired one is a write
            proposal, group = await self._proposal(write.session, proposal_id, lock=True)
            await self._settle(write.session, proposal, group)
            return await self._view(write.session, proposal, group)

    async def proposals_of(self, domain_did: str) -> list[dict[str, Any]]:
        await self._domains.get(domain_did)
        async with self._ledger.write() as write:  # one write settles every expired one
            ids = list(
                await write.session.scalars(
                    select(Proposal.id)
                    .where(Proposal.domain_did == domain_did)
                    .order_by(Proposal.id)
                )
            )
            views = []
            for proposal_id in ids:
                proposal, group = await self._proposal(write.session, proposal_id, lock=True)
                await self._settle(write.session, proposal, group)
                views.append(await self._view(write.session, proposal, group))
        return views

    # -- internals -------------------------------------------------------------------------
    async def _proposal(
        self, session: AsyncSession, proposal_id: int, lock: bool
    ) -> tuple[Proposal, GovernanceGroup]:
        proposal = await session.get(Proposal, proposal_id, with_for_update=lock)
        if proposal is None:
            raise NotFound(f"No proposal {proposal_id}.")
        group = await session.get(GovernanceGroup, proposal.group_did)
        assert group is not None
        return proposal, group

    @staticmethod
    async def _weight(session: AsyncSession, group_did: str, member: str) -> int | None:
        return await session.scalar(
            select(GroupMember.weight).where(
                GroupMember.group_did == group_did, GroupMember.member == member
            )
        )

    async def _tally(self, session: AsyncSession, proposal: Proposal) -> Tally:
        rows = await session.execute(
            select(Vote.option, func.sum(Vote.weight))
            .where(Vote.proposal_id == proposal.id)
            .group_by(Vote.option)
        )
        sums = {option: int(weight or 0) for option, weight in rows}
        return Tally(
            sums.get("yes", 0), sums.get("no", 0), sums.get("abstain", 0), proposal.total_weight
        )

    async def _settle(
        self, session: AsyncSession, proposal: Proposal, group: GovernanceGroup
    ) -> None:
        """Move an open proposal to passed or rejected when its votes or its clock say so."""
        if proposal.status != OPEN:
            return
        ended = self._now() >= proposal.expires_at
        outcome = decide(
            group.threshold_kind,
            group.threshold,
            group.quorum,
            await self._tally(session, proposal),
            ended,
        )
        if outcome != OPEN:
            proposal.status = outcome
            proposal.decided_at = self._now()

    async def _view(
        self, session: AsyncSession, proposal: Proposal, group: GovernanceGroup
    ) -> dict[str, Any]:
        tally = await self._tally(session, proposal)
        votes = await session.scalars(
            select(Vote).where(Vote.proposal_id == proposal.id).order_by(Vote.id)
        )
        return {
            "id": proposal.id,
            "group": group.did,
            "domain": proposal.domain_did,
            "action": proposal.action,
            "status": proposal.status,
            "proposer": proposal.proposer,
            "package": proposal.package,
            "tally": {
                "yes": tally.yes,
                "no": tally.no,
                "abstain": tally.abstain,
                "remaining": tally.remaining,
                "total": tally.total,
            },
            "threshold": _threshold(group),
            "votes": [
                {"voter": v.voter, "option": v.option, "weight": v.weight, "at": _iso(v.created_at)}
                for v in votes
            ],
            "createdAt": _iso(proposal.created_at),
            "expiresAt": _iso(proposal.expires_at),
            "decidedAt": _iso(proposal.decided_at),
            "executedAt": _iso(proposal.executed_at),
            **(
                {
                    "progress": {
                        "done": proposal.items_done,
                        "total": proposal.items_total,
                        "stopped": (
                            {
                                "at": _iso(proposal.batch_stopped_at),
                                "reason": proposal.batch_stopped_reason,
                            }
                            if proposal.batch_stopped_at is not None
                            else None
                        ),
                    }
                }
                if proposal.items_total is not None
                else {}
            ),
        }


def _batch_query(selection: BatchSelection) -> Any:
    """The DIDs a batch proposal takes: active, unverified assets of the project."""
    linked = select(Relationship.source_did).where(
        Relationship.type == "project", Relationship.target_did == selection.project
    )
    query = select(Domain.did).where(
        Domain.status == ACTIVE,
        Domain.verified.is_(False),
        or_(Domain.parent_did == selection.project, Domain.did.in_(linked)),
    )
    if selection.protocol is not None:
        query = query.where(Domain.class_did == selection.protocol)
    if selection.domains is not None:
        query = query.where(Domain.did.in_(selection.domains))
    return query.subquery()


def votes_needed(total: int, fraction: float) -> int:
    """The smallest whole weight reaching `fraction` of `total` (for docs and clients)."""
    return math.ceil(fraction * total - 1e-9)


Chunk = Callable[[int, Principal], Awaitable[dict[str, Any] | None]]


class BatchRunners:
    """Background execution of batch proposals: one runner per proposal, an asyncio task of
    this process (`_runners`), verifying chunk after chunk until every item is done.
    `resume` (platform start, with the background workers) starts a runner for every passed
    batch left unfinished, so a crash mid-batch carries on by itself; `stop` cancels them
    (a cancelled chunk rolls back whole). See GovernanceService for why two runners of one
    proposal in two processes need no lease."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        chunk: Chunk,
        clock: Any = utcnow,
        retries: int = 3,
        retry_seconds: float = 1.0,
    ) -> None:
        self._sessions = sessions
        self._chunk = chunk  # the next chunk of a proposal; its view once all are done
        self._now = clock
        self.retries = retries  # a failing chunk's retries before giving up
        self.retry_seconds = retry_seconds  # first back-off, then doubled
        self._runners: dict[int, asyncio.Task[None]] = {}

    def running(self, proposal_id: int) -> bool:
        """Whether a runner of this process is executing the batch proposal."""
        runner = self._runners.get(proposal_id)
        return runner is not None and not runner.done()

    def start(self, proposal_id: int, actor: Principal) -> None:
        """A runner for the proposal unless one runs already (no await between the check
        and the registration: two requests of this process never start two)."""
        if self.running(proposal_id):
            return
        runner = asyncio.create_task(
            self._run_batch(proposal_id, actor), name=f"governance-batch-{proposal_id}"
        )
        self._runners[proposal_id] = runner
        runner.add_done_callback(lambda done: self._forget(proposal_id, done))

    def _forget(self, proposal_id: int, runner: asyncio.Task[None]) -> None:
        if self._runners.get(proposal_id) is runner:
            del self._runners[proposal_id]

    async def _run_batch(self, proposal_id: int, actor: Principal) -> None:
        """Verify the proposal's remaining chunks. A chunk that fails is retried
        `retries` times with doubling back-off, then the batch is left, passed and
        part-done, for a manual execute (a logged warning says so)."""
        failures = 0
        while True:
            try:
                view = await self._chunk(proposal_id, actor)
            except ServiceError as problem:  # no longer executable: retrying cannot help
                log.warning(
                    "batch execution stopped",
                    proposal=proposal_id,
                    problem=type(problem).__name__,
                    message=problem.message,
                )
                await self._record_stop(proposal_id, problem.message)
                return
            except Exception as error:
                failures += 1
                if failures > self.retries:
                    log.warning(
                        "batch execution gave up; execute the proposal again to resume",
                        proposal=proposal_id,
                        attempts=failures,
                        error=type(error).__name__,
                    )
                    await self._record_stop(
                        proposal_id,
                        f"gave up after {failures} failed attempts ({type(error).__name__}); "
                        "execute the proposal again to resume",
                    )
                    return
                delay = self.retry_seconds * 2 ** (failures - 1)
                log.warning(
                    "batch chunk failed; retrying",
                    proposal=proposal_id,
                    attempt=failures,
                    delay=delay,
                    error=type(error).__name__,
                )
                await asyncio.sleep(delay)
                continue
            failures = 0
            if view is not None:
                log.info("batch executed", proposal=proposal_id, items=view["progress"]["total"])
                return

    async def _record_stop(self, proposal_id: int, reason: str) -> None:
        """Keep why the runner stopped on the proposal, for every process's view (the
        console tells "executing" from "stopped, execute again"). Best effort: the
        database may be what failed, and the warning is logged already."""
        try:
            async with self._sessions() as session, session.begin():
                await session.execute(
                    update(Proposal)
                    .where(Proposal.id == proposal_id, Proposal.status == PASSED)
                    .values(batch_stopped_at=self._now(), batch_stopped_reason=reason[:300])
                )
        except Exception as error:
            log.warning("batch stop not recorded", proposal=proposal_id, error=type(error).__name__)

    async def resume(self) -> int:
        """Start a runner for every passed batch proposal left part-done (a process that
        stopped mid-batch); how many. Each carries on as the member who executed it."""
        async with self._sessions() as session:
            ids = list(
                await session.scalars(
                    select(Proposal.id)
                    .where(
                        Proposal.action == VERIFY_BATCH,
                        Proposal.status == PASSED,
                        Proposal.items_done < Proposal.items_total,
                        Proposal.items_done > 0,
                    )
                    .order_by(Proposal.id)
                )
            )
            actors = {pid: await self._executor_of(session, pid) for pid in ids}
        for proposal_id in ids:
            self.start(proposal_id, actors[proposal_id])
        if ids:
            log.info("resuming batch executions", proposals=len(ids))
        return len(ids)

    @staticmethod
    async def _executor_of(session: AsyncSession, proposal_id: int) -> Principal:
        """Who started executing the batch: the actor of a `domain.verify` transaction of
        it (the first chunk ran in their request); the platform itself if none is found."""
        done = (
            select(ProposalItem.domain_did)
            .where(ProposalItem.proposal_id == proposal_id, ProposalItem.done.is_(True))
            .limit(50)
        )
        rows = await session.execute(
            select(LedgerTransaction.actor, LedgerTransaction.payload)
            .where(
                LedgerTransaction.kind == "domain.verify",
                LedgerTransaction.subject.in_(done.scalar_subquery()),
            )
            .order_by(LedgerTransaction.height.desc())
            .limit(50)
        )
        for actor, payload in rows:
            if orjson.loads(payload).get("proposal") == proposal_id:
                return Principal(actor, frozenset())
        return SYSTEM_PRINCIPAL

    async def stop(self) -> None:
        """Cancel this process's runners (platform stop); each chunk rolls back whole, and
        the next start (or execute) carries on from the last committed one."""
        runners = list(self._runners.values())
        for runner in runners:
            runner.cancel()
        await asyncio.gather(*runners, return_exceptions=True)
        self._runners.clear()
