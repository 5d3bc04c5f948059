"""The oracle: a running service that evaluates submitted claims by itself.

It looks for pending claims whose protocol carries a methodology, takes a lease on each
(a row of `oracle_decisions`, so several oracle processes never evaluate one claim twice
and a restarted oracle picks up a lease that ran out), and decides:

- approved: the telemetry corroborates the claim, the stove is plausible, the stove-period
  was not credited before; the approval records what the methodology computes (minted
  when the registry issues the project's period that carries the claim:
  services.claim_issuance), through the same verified-only path as a person's approval;
- rejected: the claim says more than the telemetry recorded, or the stove-period was
  credited already (double counting);
- flagged: anything the oracle cannot decide with confidence (no telemetry, gaps, a
  formula that fails, an unverified stove, learned-plausibility findings, a crash). It
  never approves by default.

Every decision is signed with the platform's issuer key and stored with its reasons, the
digest of the telemetry it used and the methodology's id, version and digest. The decision
row and the claim's evaluation (and its credential and held stove-days) commit in one
ledger write
the oracle opens itself (`ClaimEvaluations.evaluate_within`): a crash between them leaves
neither, and the lease runs out for another try.

How it learns of a claim: the platform's bus hands it each claim.submitted event once the
submission commits (`claim_submitted`, registered in platform.HANDLERS), and it evaluates
that claim at once. The claims table stays the source of truth: at start, and every
ORACLE_POLL_SECONDS after, it looks for pending claims nobody decided (submitted while no
oracle ran, in another process, or left by a crash).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import orjson
from sqlalchemy import and_, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import Claim, ClaimCollection, Domain, OracleDecision
from twinhub.kernel.bus import Message
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import NotFound, ServiceError
from twinhub.kernel.principals import Principal
from twinhub.logging import get_logger
from twinhub.mrv.claims import ClaimComputation, NotComputable, methodology_of
from twinhub.mrv.plausibility import assess
from twinhub.mrv.rules import takes_part
from twinhub.security.signing import Issuer
from twinhub.services.claim_credits import active_evaluator, compute_claim
from twinhub.services.claims import (
    APPROVED,
    FLAGGED,
    PENDING,
    REJECTED,
    ClaimService,
    EvaluationRequest,
    double_counted,
)
from twinhub.services.credentials import rfc3339
from twinhub.services.mrv_inputs import stove_periods
from twinhub.services.protocols import ProtocolService

log = get_logger(__name__)
LEASED, DECIDED, SKIPPED = "leased", "decided", "skipped"
DECISION_TYPE = "OracleDecision"
REVIEW_KINDS = ("tampered", "cloned", "broken")


@dataclass
class Decision:
    outcome: str
    reasons: list[str] = field(default_factory=list)
    oracle: str | None = None
    computation: ClaimComputation | None = None
    inputs_digest: str | None = None
    methodology: dict[str, str] | None = None


def decision_view(row: OracleDecision) -> dict[str, Any]:
    return {
        "claim": row.claim_id,
        "state": row.state,
        "oracle": row.oracle,
        "outcome": row.outcome,
        "reasons": row.reasons,
        "inputsDigest": row.inputs_digest,
        "methodology": row.methodology,
        "amount": row.amount,
        "attempts": row.attempts,
        "decidedAt": row.decided_at.isoformat() if row.decided_at else None,
        "signed": orjson.loads(row.document) if row.document else None,
    }


class OracleService:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        claims: ClaimService,
        protocols: ProtocolService,
        issuer: Issuer,
        poll_seconds: float = 1.0,
        lease_seconds: float = 60.0,
        max_attempts: int = 3,
        batch: int = 50,
    ) -> None:
        self._sessions = sessions
        self._claims = claims
        self._protocols = protocols
        self._issuer = issuer
        self.poll_seconds = poll_seconds
        self.lease = timedelta(seconds=lease_seconds)
        self.max_attempts = max_attempts
        self.batch = batch
        self.owner = f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.decided = 0
        # Claims the bus told of, waiting for the loop (only while it runs: `run`).
        self._submitted: list[str] = []
        self._wake: asyncio.Event | None = None

    # -- the loop ------------------------------------------------------------------------
    def claim_submitted(self, message: Message) -> None:
        """Bus handler (claim.submitted, after its commit): evaluate the claim now. In a
        process whose oracle does not run, nothing: the running one's scan finds it. A
        claim about no stove is left to the scan too: no telemetry can corroborate it (the
        oracle only ever flags it), and a monitoring period's own claim, evaluated by its
        service right after it is submitted, is one."""
        if self._wake is None:
            return
        claim = message.data.get("claim") or {}
        if isinstance(claim.get("id"), str) and claim.get("asset") is not None:
            self._submitted.append(claim["id"])
            self._wake.set()

    async def run(self) -> None:
        """Evaluate claims until cancelled: those the bus hands over as they are submitted,
        and every pending one a scan finds (at start, then each `poll_seconds`: crash
        recovery). A failed round is logged and retried."""
        log.info("oracle started", owner=self.owner)
        loop = asyncio.get_running_loop()
        wake = self._wake = asyncio.Event()
        scan_at = loop.time()  # at start: whatever was left undecided
        try:
            while True:
                wake.clear()
                submitted, self._submitted = self._submitted, []
                try:
                    if loop.time() >= scan_at:
                        done = await self.run_once()
                        if done < self.batch:
                            scan_at = loop.time() + self.poll_seconds
                    await self.run_claims(submitted)  # (a scan may have decided them)
                except asyncio.CancelledError:
                    raise
                except Exception as error:  # the database went away, ...: try again later
                    log.warning("oracle round failed", error=repr(error))
                    scan_at = loop.time() + self.poll_seconds
                if self._submitted or loop.time() >= scan_at:
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), scan_at - loop.time())
        finally:
            self._wake = None
            self._submitted = []

    async def run_claims(self, claim_ids: list[str]) -> int:
        """Lease and decide these claims (those another oracle holds, or decided already,
        are left); how many were decided."""
        done = 0
        wanted = sorted(set(claim_ids))
        for offset in range(0, len(wanted), self.batch):
            for claim_id in await self._waiting(wanted[offset : offset + self.batch]):
                attempts = await self._take(claim_id)
                if attempts is None:
                    continue
                await self.decide(claim_id, attempts)
                done += 1
        return done

    async def run_once(self) -> int:
        """Lease and decide what is waiting now; how many claims were decided."""
        done = 0
        for claim_id in await self._waiting():
            attempts = await self._take(claim_id)
            if attempts is None:
                continue  # another oracle holds it
            await self.decide(claim_id, attempts)
            done += 1
        return done

    async def _waiting(self, among: list[str] | None = None) -> list[str]:
        """Pending claims no oracle decides now (of `among` only, when given)."""
        now = utcnow()
        query = (
            select(Claim.id)
            .outerjoin(OracleDecision, OracleDecision.claim_id == Claim.id)
            .where(
                Claim.status == PENDING,
                or_(
                    OracleDecision.id.is_(None),
                    and_(OracleDecision.state == LEASED, OracleDecision.lease_until < now),
                ),
            )
            .order_by(Claim.seq)
            .limit(self.batch)
        )
        if among is not None:
            query = query.where(Claim.id.in_(among))
        async with self._sessions() as session:
            return list(await session.scalars(query))

    async def _take(self, claim_id: str) -> int | None:
        """A lease on the claim (its attempt number), or None when another oracle has it."""
        now = utcnow()
        try:
            async with self._sessions.begin() as session:
                session.add(
                    OracleDecision(
                        claim_id=claim_id,
                        state=LEASED,
                        owner=self.owner,
                        lease_until=now + self.lease,
                        attempts=1,
                        reasons=[],
                        created_at=now,
                    )
                )
            return 1
        except IntegrityError:
            pass
        async with self._sessions.begin() as session:
            taken = await session.execute(
                update(OracleDecision)
                .where(
                    OracleDecision.claim_id == claim_id,
                    OracleDecision.state == LEASED,
                    OracleDecision.lease_until < now,
                )
                .values(
                    owner=self.owner,
                    lease_until=now + self.lease,
                    attempts=OracleDecision.attempts + 1,
                )
                .returning(OracleDecision.attempts)
            )
            attempts = taken.scalar()
        return int(attempts) if attempts is not None else None

    # -- one claim -----------------------------------------------------------------------
    async def decide(self, claim_id: str, attempts: int = 1) -> dict[str, Any] | None:
        """Assess the leased claim, then record the decision and apply it to the claim."""
        if attempts > self.max_attempts:
            decision = Decision(
                FLAGGED,
                [
                    f"the oracle stopped {attempts - 1} times while evaluating this claim; "
                    "a person should look at it"
                ],
            )
        else:
            try:
                decision = await self.assess(claim_id)
            except Exception as error:  # a fault of ours: flag, never approve by default
                log.exception("oracle assessment failed", claim=claim_id)
                decision = Decision(FLAGGED, [f"the oracle failed: {type(error).__name__}"])
        if decision.outcome == SKIPPED:
            await self._finish(claim_id, decision, SKIPPED)
            return None
        if decision.oracle is None:
            decision.oracle = await self._oracle_for(claim_id)
        if decision.oracle is None:
            await self._finish(claim_id, decision, DECIDED)
            return None
        principal = Principal(decision.oracle, frozenset({"writer"}))
        reason = "; ".join(decision.reasons)[:1000] or None
        request = EvaluationRequest(
            claim_id,
            decision.outcome,
            reason,
            oracle=decision.oracle,
            computation=decision.computation,
        )
        try:
            # The evaluation and the signed decision in one ledger write of the oracle's.
            async with self._claims.evaluations.write() as write:
                reply = await self._claims.evaluations.evaluate_within(write, request, principal)
                await self._record(write.session, claim_id, decision, DECIDED)
        except ServiceError as error:  # e.g. the project lost its verification meanwhile
            decision.reasons.append(f"not applied to the claim: {error.message}")
            await self._finish(claim_id, decision, DECIDED)
            return None
        self.decided += 1
        return reply

    async def _finish(self, claim_id: str, decision: Decision, state: str) -> None:
        async with self._sessions.begin() as session:
            await self._record(session, claim_id, decision, state)

    async def _record(
        self, session: AsyncSession, claim_id: str, decision: Decision, state: str
    ) -> None:
        """Sign the decision and store it on the claim's decision row."""
        row = await session.scalar(
            select(OracleDecision).where(OracleDecision.claim_id == claim_id).with_for_update()
        )
        if row is None:  # decided without a lease (a direct call): make the row
            row = OracleDecision(claim_id=claim_id, attempts=1, reasons=[], created_at=utcnow())
            session.add(row)
        now = utcnow()
        computation = decision.computation
        document = {
            "type": DECISION_TYPE,
            "claim": claim_id,
            "oracle": decision.oracle,
            "outcome": decision.outcome if state == DECIDED else None,
            "reasons": decision.reasons,
            "inputsDigest": decision.inputs_digest,
            "methodology": decision.methodology,
            "calculation": computation.calculation() if computation else None,
            "decidedAt": rfc3339(now),
            "issuer": self._issuer.did,
        }
        row.state, row.owner, row.lease_until = state, None, None
        row.oracle = decision.oracle
        row.outcome = decision.outcome if state == DECIDED else None
        row.reasons = decision.reasons
        row.inputs_digest = decision.inputs_digest
        row.methodology = decision.methodology
        row.amount = computation.amount if computation and decision.outcome == APPROVED else None
        row.document = orjson.dumps(self._issuer.sign(document, rfc3339(now))).decode()
        row.decided_at = now

    async def assess(self, claim_id: str) -> Decision:
        """The decision and every reason for it; writes nothing."""
        now = utcnow()
        async with self._sessions() as session:
            claim = await session.get(Claim, claim_id)
            if claim is None:
                raise NotFound(f"No claim {claim_id!r}.")
            collection = await session.get(ClaimCollection, claim.collection_id)
            assert collection is not None
            protocol = await self._protocols.get(collection.protocol_did)
            document = protocol.effective_methodology
            if document is None or protocol.effective_token_class is None:
                return Decision(SKIPPED, ["the protocol has no methodology: left for a person"])
            oracle = await active_evaluator(session, collection)
            decision = Decision(FLAGGED, oracle=oracle, methodology=protocol.methodology_summary())
            if oracle is None:
                decision.reasons.append("the collection has no active evaluator oracle")
                return decision
            stove = await session.get(Domain, claim.asset_did) if claim.asset_did else None
            if stove is not None and not takes_part(stove.verified, stove.status):
                decision.reasons.append(
                    f"the stove {stove.did} is not verified (only verified domains take part "
                    "in credit issuance)"
                )
                return decision
            try:
                computation = await compute_claim(
                    session,
                    claim,
                    document,
                    protocol.effective_token_class,
                    collection.project_did,
                    now,
                )
            except NotComputable as error:
                decision.reasons.append(error.reason)
                return decision
            decision.inputs_digest = computation.inputs_digest
            methodology = methodology_of(document)
            tolerance = float(methodology.rule_values().get("corroboration_tolerance", 0.2))
            rejects, flags = self._corroborate(claim.data, computation, tolerance)
            rejects += await double_counted(session, claim, computation)
            (period,) = await stove_periods(
                session,
                [computation.stove["stove"]],
                computation.start,
                computation.end,
                methodology.measure,
            )
            for finding in assess(period.days):
                if finding.kind in REVIEW_KINDS:
                    flags.append(f"looks {finding.kind}: {finding.explanation}")
        if rejects:
            decision.outcome, decision.reasons = REJECTED, rejects + flags
        elif flags:
            decision.outcome, decision.reasons = FLAGGED, flags
        else:
            decision.outcome = APPROVED
            decision.computation = computation
            decision.reasons = [
                f"telemetry corroborates the claim: {computation.sessions} cooking sessions, "
                f"{computation.quantity:g} {computation.unit} from {computation.start} to "
                f"{computation.end}; {computation.stove['reductions']:.6f} tCO2e"
            ]
        return decision

    async def _oracle_for(self, claim_id: str) -> str | None:
        async with self._sessions() as session:
            claim = await session.get(Claim, claim_id)
            collection = await session.get(ClaimCollection, claim.collection_id) if claim else None
            return await active_evaluator(session, collection) if collection else None

    @staticmethod
    def _corroborate(
        data: dict[str, Any], computation: ClaimComputation, tolerance: float
    ) -> tuple[list[str], list[str]]:
        """What the claim says against what the telemetry recorded: more than the tolerance
        above is rejected (an over-claim), more than it below is flagged."""
        rejects: list[str] = []
        flags: list[str] = []
        checks = [("mealsCooked", "meals", computation.sessions, "cooking sessions")]
        if computation.unit == "kg":
            checks.append(("fuelKg", "kg of fuel", computation.quantity, "kg metered"))
        for name, what, measured, measured_what in checks:
            said = data.get(name)
            if isinstance(said, bool) or not isinstance(said, int | float):
                continue
            if said > measured * (1 + tolerance):
                rejects.append(
                    f"the claim says {said:g} {what}; the telemetry recorded {measured:g} "
                    f"{measured_what} (more than {tolerance:.0%} over)"
                )
            elif said < measured * (1 - tolerance):
                flags.append(
                    f"the claim says {said:g} {what}; the telemetry recorded {measured:g} "
                    f"{measured_what} (more than {tolerance:.0%} under)"
                )
        return rejects, flags

    async def decision(self, claim_id: str) -> dict[str, Any]:
        async with self._sessions() as session:
            row = await session.scalar(
                select(OracleDecision).where(OracleDecision.claim_id == claim_id)
            )
        if row is None:
            raise NotFound(f"The oracle has not decided claim {claim_id!r}.")
        return decision_view(row)
