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
ledger write the oracle opens itself (`ClaimEvaluations.evaluate_many_within`): a crash
between them leaves neither, and the lease runs out for another try.

It decides in batches (up to ORACLE_BATCH claims): the leases in one statement, the
claims, their stoves, telemetry and what is credited already read in a handful of
statements for the batch (`assess_many`), then every evaluation and signed decision in one
ledger write, each claim decided exactly as it would be alone. A claim whose stove or
device an earlier claim of the batch is about to credit waits for a next round of the
batch, so its double counting is checked against that approval.

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
from datetime import date, timedelta
from typing import Any

import orjson
from sqlalchemy import and_, bindparam, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.dialects import dialect_of, read_snapshot
from twinhub.db.models import Claim, ClaimCollection, Domain, OracleDecision
from twinhub.kernel.bus import Message
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import NotFound
from twinhub.kernel.principals import Principal
from twinhub.logging import get_logger
from twinhub.mrv.claims import ClaimComputation, ClaimJob, NotComputable, methodology_of
from twinhub.mrv.meter import register_faults
from twinhub.mrv.period_inputs import device_identity
from twinhub.mrv.periods import StovePeriod
from twinhub.mrv.plausibility import assess
from twinhub.mrv.rules import takes_part
from twinhub.security.signing import Issuer
from twinhub.services.claim_credits import active_evaluators, compute_claims_read
from twinhub.services.claims import (
    APPROVED,
    FLAGGED,
    PENDING,
    REJECTED,
    ClaimService,
    Credited,
    EvaluationRequest,
)
from twinhub.services.credentials import rfc3339
from twinhub.services.protocols import ProtocolService, ProtocolView

log = get_logger(__name__)
LEASED, DECIDED, SKIPPED = "leased", "decided", "skipped"
DECISION_TYPE = "OracleDecision"
REVIEW_KINDS = ("tampered", "cloned", "broken")
_CHUNK = 500  # claims per IN (...) list


@dataclass
class Decision:
    outcome: str
    reasons: list[str] = field(default_factory=list)
    oracle: str | None = None
    computation: ClaimComputation | None = None
    inputs_digest: str | None = None
    methodology: dict[str, str] | None = None


async def _stoves(session: AsyncSession, dids: list[str | None]) -> dict[str, Domain]:
    """The claims' stoves (those that are domains), by DID."""
    wanted = sorted({did for did in dids if did})
    found: dict[str, Domain] = {}
    for offset in range(0, len(wanted), _CHUNK):
        rows = await session.scalars(
            select(Domain).where(Domain.did.in_(wanted[offset : offset + _CHUNK]))
        )
        found.update({row.did: row for row in rows})
    return found


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
            waiting = await self._waiting(wanted[offset : offset + self.batch])
            done += await self._decide_leased(await self._take_many(waiting))
        return done

    async def run_once(self) -> int:
        """Lease and decide what is waiting now; how many claims were decided."""
        return await self._decide_leased(await self._take_many(await self._waiting()))

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
        return (await self._take_many([claim_id])).get(claim_id)

    async def _take_many(self, claim_ids: list[str]) -> dict[str, int]:
        """Leases on those of the claims no other oracle holds (claim -> its attempt
        number, in the given order), in one transaction: a new lease row for each claim
        without one, a lease that ran out taken over. Two oracles asking at once each get
        a claim or not (the row's unique claim, the update's condition), never both."""
        if not claim_ids:
            return {}
        now = utcnow()
        lease_until = now + self.lease
        taken: dict[str, int] = {}
        async with self._sessions.begin() as session:
            upsert = dialect_of(session).insert
            for offset in range(0, len(claim_ids), _CHUNK):
                chunk = claim_ids[offset : offset + _CHUNK]
                # Core executemany (one cached statement, its rows sent together).
                new = await session.scalars(
                    upsert(OracleDecision.__table__)
                    .on_conflict_do_nothing(index_elements=["claim_id"])
                    .returning(OracleDecision.__table__.c.claim_id),
                    [
                        {
                            "claim_id": claim_id,
                            "state": LEASED,
                            "owner": self.owner,
                            "lease_until": lease_until,
                            "attempts": 1,
                            "reasons": [],
                            "created_at": now,
                        }
                        for claim_id in chunk
                    ],
                )
                taken.update(dict.fromkeys(new, 1))
                rest = [claim_id for claim_id in chunk if claim_id not in taken]
                if not rest:
                    continue
                over = await session.execute(
                    update(OracleDecision)
                    .where(
                        OracleDecision.claim_id.in_(rest),
                        OracleDecision.state == LEASED,
                        OracleDecision.lease_until < now,
                    )
                    .values(
                        owner=self.owner,
                        lease_until=lease_until,
                        attempts=OracleDecision.attempts + 1,
                    )
                    .returning(OracleDecision.claim_id, OracleDecision.attempts)
                    .execution_options(synchronize_session=False)
                )
                taken.update({claim_id: int(attempts) for claim_id, attempts in over})
        return {claim_id: taken[claim_id] for claim_id in claim_ids if claim_id in taken}

    # -- decisions -----------------------------------------------------------------------
    async def _decide_leased(self, leased: dict[str, int]) -> int:
        """Assess and decide the leased claims (claim -> attempt) together: their reads a
        handful of statements for the batch, their evaluations and signed decisions one
        ledger write. A claim an earlier one of the batch is about to credit the same stove
        or device for waits for a next round, so it is decided against that approval as it
        would be one by one. How many were decided."""
        decisions = {
            claim_id: self._stopped(attempts)
            for claim_id, attempts in leased.items()
            if attempts > self.max_attempts
        }
        waiting = [claim_id for claim_id in leased if claim_id not in decisions]
        done = 0
        while decisions or waiting:
            try:
                found, waiting_next = await self.assess_many(waiting)
            except Exception:  # a fault of ours somewhere in the batch: each claim alone,
                log.exception("oracle batch assessment failed", claims=len(waiting))
                found, waiting_next = {}, []  # so that it flags only the claim it is in
                for claim_id in waiting:
                    await self._apply({claim_id: await self._assess_alone(claim_id)})
                    done += 1
            decisions.update(found)
            await self._apply(decisions)
            done += len(decisions)
            decisions, waiting = {}, waiting_next
        return done

    async def decide(self, claim_id: str, attempts: int = 1) -> dict[str, Any] | None:
        """Assess the leased claim alone, then record the decision and apply it to the
        claim; the claim with its evaluations, or None when none was made."""
        if attempts > self.max_attempts:
            decision = self._stopped(attempts)
        else:
            decision = await self._assess_alone(claim_id)
        return (await self._apply({claim_id: decision})).get(claim_id)

    @staticmethod
    def _stopped(attempts: int) -> Decision:
        return Decision(
            FLAGGED,
            [
                f"the oracle stopped {attempts - 1} times while evaluating this claim; "
                "a person should look at it"
            ],
        )

    async def _assess_alone(self, claim_id: str) -> Decision:
        try:
            return await self.assess(claim_id)
        except Exception as error:  # a fault of ours: flag, never approve by default
            log.exception("oracle assessment failed", claim=claim_id)
            return Decision(FLAGGED, [f"the oracle failed: {type(error).__name__}"])

    async def _apply(self, decisions: dict[str, Decision]) -> dict[str, dict[str, Any]]:
        """Record the decisions and apply them to their claims: the evaluations (through
        the claims' own service, as the bulk evaluation route makes them) and the signed
        decision rows in one ledger write of the oracle's, so a crash leaves none of them
        and the leases run out for another try. Each claim's evaluation is made or refused
        on its own; a refused one is recorded with why. The evaluated claims' replies."""
        if not decisions:
            return {}
        unnamed = [
            claim_id
            for claim_id, decision in decisions.items()
            if decision.oracle is None and decision.outcome != SKIPPED
        ]
        if unnamed:
            oracles = await self._oracles_for(unnamed)
            for claim_id in unnamed:
                decisions[claim_id].oracle = oracles.get(claim_id)
        by_oracle: dict[str, list[EvaluationRequest]] = {}
        for claim_id, decision in decisions.items():
            if decision.outcome == SKIPPED or decision.oracle is None:
                continue
            by_oracle.setdefault(decision.oracle, []).append(
                EvaluationRequest(
                    claim_id,
                    decision.outcome,
                    "; ".join(decision.reasons)[:1000] or None,
                    oracle=decision.oracle,
                    computation=decision.computation,
                )
            )
        replies: dict[str, dict[str, Any]] = {}
        async with self._claims.evaluations.write() as write:
            for oracle, requests in by_oracle.items():
                principal = Principal(oracle, frozenset({"writer"}))
                outcomes = await self._claims.evaluations.evaluate_many_within(
                    write, requests, principal
                )
                for outcome in outcomes:
                    if outcome.error is not None:  # e.g. the project lost its verification
                        decisions[outcome.claim].reasons.append(
                            f"not applied to the claim: {outcome.error.message}"
                        )
                    elif outcome.reply is not None:
                        replies[outcome.claim] = outcome.reply
            await self._record(write.session, decisions)
        self.decided += len(replies)
        return replies

    async def _record(self, session: AsyncSession, decisions: dict[str, Decision]) -> None:
        """Sign each decision and store it on its claim's decision row (locked), a
        statement for the batch's rows (one more for rows of claims decided without a
        lease: a direct call)."""
        ids = list(decisions)
        leased: set[str] = set()
        for offset in range(0, len(ids), _CHUNK):
            leased.update(
                await session.scalars(
                    select(OracleDecision.claim_id)
                    .where(OracleDecision.claim_id.in_(ids[offset : offset + _CHUNK]))
                    .with_for_update()
                )
            )
        now = utcnow()
        decided_at = rfc3339(now)
        changed: dict[str, dict[str, Any]] = {}  # claim -> its row's new values
        for claim_id, decision in decisions.items():
            state = SKIPPED if decision.outcome == SKIPPED else DECIDED
            outcome = decision.outcome if state == DECIDED else None
            computation = decision.computation
            document = {
                "type": DECISION_TYPE,
                "claim": claim_id,
                "oracle": decision.oracle,
                "outcome": outcome,
                "reasons": decision.reasons,
                "inputsDigest": decision.inputs_digest,
                "methodology": decision.methodology,
                "calculation": computation.calculation() if computation else None,
                "decidedAt": decided_at,
                "issuer": self._issuer.did,
            }
            approved = computation is not None and decision.outcome == APPROVED
            changed[claim_id] = {
                "state": state,
                "owner": None,
                "lease_until": None,
                "oracle": decision.oracle,
                "outcome": outcome,
                "reasons": decision.reasons,
                "inputs_digest": decision.inputs_digest,
                "methodology": decision.methodology,
                "amount": computation.amount if computation and approved else None,
                "document": orjson.dumps(self._issuer.sign(document, decided_at)).decode(),
                "decided_at": now,
            }
        table = OracleDecision.__table__
        if unleased := [claim_id for claim_id in changed if claim_id not in leased]:
            await session.execute(
                insert(table),
                [
                    {"claim_id": claim_id, "attempts": 1, "created_at": now, **changed[claim_id]}
                    for claim_id in unleased
                ],
            )
        if rows := [{"b_claim": c, **values} for c, values in changed.items() if c in leased]:
            await session.execute(
                update(table).where(table.c.claim_id == bindparam("b_claim")), rows
            )

    async def assess(self, claim_id: str) -> Decision:
        """The decision and every reason for it; writes nothing."""
        decisions, _ = await self.assess_many([claim_id])
        return decisions[claim_id]

    async def assess_many(self, claim_ids: list[str]) -> tuple[dict[str, Decision], list[str]]:
        """Each claim's decision and every reason for it, in a handful of statements for
        them all; writes nothing. Returns the decisions and the claims put off to a next
        round: those whose stove or device an earlier claim here would credit (approved),
        so their double counting is checked against that approval once it is made."""
        now = utcnow()
        decisions: dict[str, Decision] = {}
        later: list[str] = []
        if not claim_ids:
            return decisions, later
        # One snapshot: the figures and the readings an approval keeps as behind them agree.
        async with read_snapshot(self._sessions) as session:
            rows: dict[str, tuple[Claim, ClaimCollection]] = {}
            for offset in range(0, len(claim_ids), _CHUNK):
                found = await session.execute(
                    select(Claim, ClaimCollection)
                    .join(ClaimCollection, ClaimCollection.id == Claim.collection_id)
                    .where(Claim.id.in_(claim_ids[offset : offset + _CHUNK]))
                )
                rows.update({claim.id: (claim, collection) for claim, collection in found})
            collections = list({c.id: c for _, c in rows.values()}.values())
            oracles = await active_evaluators(session, collections)
            stoves = await _stoves(session, [c.asset_did for c, _ in rows.values()])
            # Each claim's checks up to its computation, the computations together.
            computing: list[tuple[str, Claim, ProtocolView, Decision]] = []
            jobs: list[ClaimJob] = []
            for claim_id in claim_ids:
                if claim_id not in rows:
                    # As a lone assessment failed on it: a fault (the claim went away).
                    decisions[claim_id] = Decision(FLAGGED, ["the oracle failed: NotFound"])
                    continue
                claim, collection = rows[claim_id]
                protocol = await self._protocols.get(collection.protocol_did)
                document, token = protocol.effective_methodology, protocol.effective_token_class
                if document is None or token is None:
                    decisions[claim_id] = Decision(
                        SKIPPED, ["the protocol has no methodology: left for a person"]
                    )
                    continue
                oracle = oracles[collection.id]
                decision = decisions[claim_id] = Decision(
                    FLAGGED, oracle=oracle, methodology=protocol.methodology_summary()
                )
                if oracle is None:
                    decision.reasons.append("the collection has no active evaluator oracle")
                    continue
                stove = stoves.get(claim.asset_did) if claim.asset_did else None
                if stove is not None and not takes_part(stove.verified, stove.status):
                    decision.reasons.append(
                        f"the stove {stove.did} is not verified (only verified domains take "
                        "part in credit issuance)"
                    )
                    continue
                computing.append((claim_id, claim, protocol, decision))
                jobs.append(
                    ClaimJob(claim.asset_did, claim.data, document, token, collection.project_did)
                )
            results = await compute_claims_read(session, jobs, now)
            computed: list[tuple[str, Claim, ProtocolView, Decision, ClaimComputation]] = []
            periods: dict[str, StovePeriod] = {}  # the days each computation read
            for (claim_id, claim, protocol, decision), (result, period) in zip(
                computing, results, strict=True
            ):
                if isinstance(result, NotComputable):
                    decision.reasons.append(result.reason)
                else:
                    assert period is not None
                    decision.inputs_digest = result.inputs_digest
                    computed.append((claim_id, claim, protocol, decision, result))
                    periods[claim_id] = period
            # Double counting, against what is credited already (one read for the batch).
            devices = {
                did: device_identity(did, stoves[did].properties)
                for _, claim, _, _, _ in computed
                if (did := claim.asset_did) is not None and did in stoves
            }
            credited = await self._credited(
                session,
                [(claim, computation) for _, claim, _, _, computation in computed],
                {rows[claim_id][1].project_did for claim_id, *_ in computed},
                devices,
            )
            crediting: set[str] = set()  # stoves and devices this batch approves
            tolerances: dict[str, float] = {}  # by protocol
            for claim_id, claim, protocol, decision, computation in computed:
                credits = {
                    did for did in (claim.asset_did, devices.get(claim.asset_did or "")) if did
                }
                if credits & crediting:
                    del decisions[claim_id]
                    later.append(claim_id)
                    continue
                tolerance = tolerances.get(protocol.did)
                if tolerance is None:
                    rules = methodology_of(protocol.effective_methodology or {}).rule_values()
                    tolerance = tolerances[protocol.did] = float(
                        rules.get("corroboration_tolerance", 0.2)
                    )
                doubled = credited.doubled(claim, rows[claim_id][1].project_did, computation)
                self._conclude(decision, claim, computation, tolerance, doubled, periods[claim_id])
                if decision.outcome == APPROVED:
                    crediting |= credits
        return decisions, later

    async def _oracles_for(self, claim_ids: list[str]) -> dict[str, str | None]:
        """Each claim's collection's active evaluator oracle."""
        async with self._sessions() as session:
            rows = (
                await session.execute(
                    select(Claim.id, ClaimCollection)
                    .join(ClaimCollection, ClaimCollection.id == Claim.collection_id)
                    .where(Claim.id.in_(claim_ids))
                )
            ).all()
            oracles = await active_evaluators(session, [collection for _, collection in rows])
        return {claim_id: oracles[collection.id] for claim_id, collection in rows}

    @staticmethod
    async def _credited(
        session: AsyncSession,
        computed: list[tuple[Claim, ClaimComputation]],
        projects: set[str],
        devices: dict[str, str],
    ) -> Credited:
        """What is credited already of the computed claims' stoves (`devices`: their
        device identities) over the days each computation covers."""
        spans_of: dict[str, set[tuple[date, date]]] = {}
        for claim, computation in computed:
            if claim.asset_did is not None:
                spans_of.setdefault(claim.asset_did, set()).add(
                    (computation.start, computation.end)
                )
        return await Credited.load(
            session,
            list(spans_of),
            projects,
            [span for spans in spans_of.values() for span in spans],
            devices,
            spans_of,
        )

    @classmethod
    def _conclude(
        cls,
        decision: Decision,
        claim: Claim,
        computation: ClaimComputation,
        tolerance: float,
        doubled: list[str],
        period: StovePeriod,
    ) -> None:
        """The outcome of a claim whose credits computed: rejected for an over-claim or
        double counting (`doubled`), flagged for an under-claim or a stove that looks
        tampered, cloned or broken over its days, else approved with its computation."""
        rejects, flags = cls._corroborate(claim.data, computation, tolerance)
        rejects += doubled
        for finding in assess(period.days):  # learned plausibility
            if finding.kind in REVIEW_KINDS:
                flags.append(f"looks {finding.kind}: {finding.explanation}")
        # A fault of the register is credited as a gap, never as a rise; a person decides
        # whether the rest of the claim stands (a claim of a stove whose meter misread).
        flags += [f"the meter: {fault}" for fault in register_faults(period.register_events)]
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
