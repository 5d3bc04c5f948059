"""Monitoring periods of a project: every stove's reductions from its telemetry rollups, one
claim for the project-period with the per-stove breakdown, its credits, and the report.

Idempotent and safe to re-run after a crash: the period's claim has an id derived from the
project and the dates, so a second run finds it; the period row is written in the same
ledger write as the claim's approval and its mint, so credits are minted once. Overlapping
periods of one project are refused (checked again inside that write, so two concurrent
runs cannot both pass).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import orjson
from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import Claim, ClaimCollection, Domain, MonitoringPeriod, Relationship
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import (
    Conflict,
    FieldProblem,
    Forbidden,
    Invalid,
    NotFound,
)
from twinhub.kernel.principals import Principal, require_role
from twinhub.mrv.claims import FAR_FUTURE, NotComputable, claim_days, methodology_of
from twinhub.mrv.periods import (
    PeriodSpec,
    compare_reports,
    compute_period,
    report_csv,
    report_digest,
)
from twinhub.mrv.plausibility import assess
from twinhub.services.claim_credits import active_evaluator, token_decimals
from twinhub.services.claims import (
    APPROVED,
    OPEN,
    ClaimService,
    DoubleCounting,
    EvaluationRequest,
)
from twinhub.services.domains import ACTIVE, verified_project
from twinhub.services.ledger import LedgerWrite
from twinhub.services.mrv_inputs import stove_periods
from twinhub.services.protocols import ProtocolService, ProtocolView

MAX_PERIOD_DAYS = 366


class PeriodOverlaps(Conflict):
    code = "period_overlaps"


@dataclass(frozen=True)
class PeriodComputation:
    """A project-period's credits, in the shape an approval mints from."""

    amount: int
    token: str
    decimals: int
    report: dict[str, Any]

    def calculation(self) -> dict[str, Any]:
        """What the credential carries: totals and digests (the report itself is large)."""
        return {
            "methodology": {
                key: self.report["methodology"][key] for key in ("id", "version", "digest")
            },
            "period": self.report["period"],
            "totals": self.report["totals"],
            "credits": self.report["credits"],
            "inputsDigest": self.report["inputsDigest"],
            "reportDigest": self.report["reportDigest"],
        }


def period_view(row: MonitoringPeriod) -> dict[str, Any]:
    report = orjson.loads(row.report)
    return {
        "id": row.id,
        "project": row.project_did,
        "from": row.start.isoformat(),
        "to": row.end.isoformat(),
        "claim": row.claim_id,
        "credits": report["credits"],
        "totals": report["totals"],
        "reportDigest": row.report_digest,
        "createdAt": row.created_at.isoformat(),
    }


def period_claim_id(project: str, start: date, end: date) -> str:
    key = hashlib.sha256(project.encode()).hexdigest()[:16]
    return f"period:{key}:{start.isoformat()}:{end.isoformat()}"


class MonitoringService:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        claims: ClaimService,
        protocols: ProtocolService,
    ) -> None:
        self._sessions = sessions
        self._claims = claims
        self._protocols = protocols

    async def run(
        self, project: str, start: date, end: date, actor: Principal
    ) -> tuple[dict[str, Any], bool]:
        """The period (made now, or as made before): (view, created)."""
        require_role(actor, "writer")
        self._check_dates(start, end)
        async with self._sessions() as session:
            domain = await self._project(session, project)
            if not (actor.is_admin or actor.did in domain.controller):
                raise Forbidden(f"Only a controller of {project} or an admin may do this.")
            existing = await self._existing(session, project, start, end)
            if existing is not None:
                return period_view(existing), False
            await self._no_overlap(session, project, start, end)
            collection, protocol = await self._collection(session, project)
            oracle = await active_evaluator(session, collection)
            if oracle is None:
                raise Conflict(f"Claim collection {collection.id} has no active evaluator oracle.")
            report = await self.compute(session, project, start, end, protocol)
        token = report["credits"]["token"]
        computation = PeriodComputation(
            report["credits"]["amount"], token, report["credits"]["decimals"], report
        )
        claim_id = period_claim_id(project, start, end)
        try:
            await self._claims.views.claim(claim_id)
        except NotFound:
            await self._claims.submissions.submit(
                collection.id,
                {
                    "reportType": "monitoring-period",
                    "periodStart": datetime(
                        start.year, start.month, start.day, tzinfo=UTC
                    ).isoformat(),
                    "periodEnd": datetime(end.year, end.month, end.day, tzinfo=UTC).isoformat(),
                    "evidence": {
                        "reportDigest": report["reportDigest"],
                        "stoves": report["totals"]["stoves"],
                        "included": report["totals"]["included"],
                    },
                },
                actor,
                claim_id=claim_id,
            )

        included = [row["stove"] for row in report["stoves"]]

        async def record(write: LedgerWrite) -> None:
            await self._no_overlap(write.session, project, start, end)
            # The report left out stoves credited when it was computed; a claim approved
            # since (approvals check periods under the turn, so this is the other half).
            raced = await self.credited(write.session, project, included, start, end)
            if raced:
                stove, other = next(iter(raced.items()))
                raise DoubleCounting(
                    f"Claim {other} credited {stove} for days of this period while the "
                    "period was computed; run the period again."
                )
            write.session.add(
                MonitoringPeriod(
                    project_did=project,
                    start=start,
                    end=end,
                    claim_id=claim_id,
                    amount=computation.amount,
                    report_digest=report["reportDigest"],
                    report=orjson.dumps(report).decode(),
                    actor=actor.did,
                    created_at=utcnow(),
                )
            )

        request = EvaluationRequest(
            claim_id,
            APPROVED,
            (
                f"monitoring period {start}..{end}: {report['totals']['included']} of "
                f"{report['totals']['stoves']} stoves credited"
            ),
            oracle=oracle,
            computation=computation,  # type: ignore[arg-type]
        )
        # The approval and the period's row in one ledger write: both or neither.
        async with self._claims.evaluations.write() as write:
            await self._claims.evaluations.evaluate_within(
                write, request, Principal(oracle, frozenset({"writer"}))
            )
            await record(write)
        async with self._sessions() as session:
            row = await self._existing(session, project, start, end)
        assert row is not None
        return period_view(row), True

    async def compute(
        self,
        session: AsyncSession,
        project: str,
        start: date,
        end: date,
        protocol: ProtocolView,
        stoves: list[str] | None = None,
    ) -> dict[str, Any]:
        """The report for the period from the stored telemetry (pure after the reads)."""
        assert protocol.effective_methodology is not None and protocol.effective_token_class
        methodology = methodology_of(protocol.effective_methodology)
        if stoves is None:
            stoves = await self.stoves_of(session, project)
        periods = await stove_periods(session, stoves, start, end)
        findings = assess(day for period in periods for day in period.days)
        token = protocol.effective_token_class
        spec = PeriodSpec(project, start, end, token, await token_decimals(session, token))
        credited = await self.credited(session, project, stoves, start, end)
        report = compute_period(spec, methodology, periods, findings, credited)
        report["protocol"] = protocol.did
        report["reportDigest"] = report_digest(report)
        return report

    @staticmethod
    async def credited(
        session: AsyncSession, project: str, stoves: list[str], start: date, end: date
    ) -> dict[str, str]:
        """Stoves of the project an approved claim credited for days of this period."""
        wanted = set(stoves)
        rows = await session.execute(
            select(Claim.id, Claim.asset_did, Claim.data)
            .join(ClaimCollection, ClaimCollection.id == Claim.collection_id)
            .where(
                ClaimCollection.project_did == project,
                Claim.status == APPROVED,
                Claim.asset_did.is_not(None),
            )
            .order_by(Claim.seq)
        )
        found: dict[str, str] = {}
        for claim_id, stove, data in rows:
            if stove not in wanted or stove in found:
                continue
            try:
                first, last = claim_days(data, FAR_FUTURE)
            except NotComputable:
                continue
            if first <= end and start <= last:
                found[stove] = claim_id
        return found

    @staticmethod
    async def stoves_of(session: AsyncSession, project: str) -> list[str]:
        """The project's active devices: a `project` relationship or the project as parent."""
        linked = select(Relationship.source_did).where(
            Relationship.type == "project", Relationship.target_did == project
        )
        rows = await session.scalars(
            select(Domain.did)
            .where(
                or_(Domain.did.in_(linked), Domain.parent_did == project),
                Domain.status == ACTIVE,
            )
            .order_by(Domain.did)
        )
        return list(rows)

    async def period(self, project: str, period_id: int) -> dict[str, Any]:
        async with self._sessions() as session:
            row = await session.get(MonitoringPeriod, period_id)
        if row is None or row.project_did != project:
            raise NotFound(f"No monitoring period {period_id} of {project}.")
        return period_view(row)

    async def report(self, project: str, period_id: int, form: str) -> str:
        async with self._sessions() as session:
            row = await session.get(MonitoringPeriod, period_id)
        if row is None or row.project_did != project:
            raise NotFound(f"No monitoring period {period_id} of {project}.")
        if form == "csv":
            return report_csv(orjson.loads(row.report))
        return row.report

    async def periods(self, project: str) -> list[dict[str, Any]]:
        async with self._sessions() as session:
            rows = await session.scalars(
                select(MonitoringPeriod)
                .where(MonitoringPeriod.project_did == project)
                .order_by(MonitoringPeriod.start)
            )
            return [period_view(row) for row in rows]

    async def verify(self, report: dict[str, Any]) -> list[str]:
        """Every difference between a report and its recomputation from stored telemetry."""
        try:
            project = report["project"]
            start = date.fromisoformat(report["period"]["from"])
            end = date.fromisoformat(report["period"]["to"])
            protocol = await self._protocols.get(report["protocol"])
        except (KeyError, TypeError, ValueError) as error:
            return [f"not a monitoring report: {error!r}"]
        except NotFound:
            return [f"the report's protocol {report.get('protocol')} is unknown here"]
        stoves = sorted(
            {row["stove"] for row in report.get("stoves", [])}
            | {row["stove"] for row in report.get("exclusions", [])}
        )
        async with self._sessions() as session:
            recomputed = await self.compute(session, project, start, end, protocol, stoves)
        return compare_reports(report, recomputed)

    # -- checks ----------------------------------------------------------------------------
    @staticmethod
    def _check_dates(start: date, end: date) -> None:
        problems = []
        if end < start:
            problems.append(FieldProblem("to", "must not be before from"))
        elif (end - start).days + 1 > MAX_PERIOD_DAYS:
            problems.append(FieldProblem("to", f"a period is at most {MAX_PERIOD_DAYS} days"))
        if end >= datetime.now(UTC).date():
            problems.append(FieldProblem("to", "the period must have ended (to is before today)"))
        if problems:
            raise Invalid("The monitoring period is invalid.", problems)

    @staticmethod
    async def _project(session: AsyncSession, project: str) -> Domain:
        return await verified_project(
            session,
            project,
            "take part in credit issuance",
            purpose="monitoring periods are a project's",
        )

    @staticmethod
    async def _existing(
        session: AsyncSession, project: str, start: date, end: date
    ) -> MonitoringPeriod | None:
        return await session.scalar(
            select(MonitoringPeriod).where(
                MonitoringPeriod.project_did == project,
                MonitoringPeriod.start == start,
                MonitoringPeriod.end == end,
            )
        )

    @staticmethod
    async def _no_overlap(session: AsyncSession, project: str, start: date, end: date) -> None:
        other = await session.scalar(
            select(MonitoringPeriod).where(
                MonitoringPeriod.project_did == project,
                MonitoringPeriod.start <= end,
                MonitoringPeriod.end >= start,
            )
        )
        if other is not None and not (other.start == start and other.end == end):
            raise PeriodOverlaps(
                f"The period overlaps monitoring period {other.id} "
                f"({other.start}..{other.end}) of {project}; its stoves were credited then."
            )

    async def _collection(
        self, session: AsyncSession, project: str
    ) -> tuple[ClaimCollection, ProtocolView]:
        """The project's newest open collection whose protocol computes credits."""
        rows = await session.scalars(
            select(ClaimCollection)
            .where(ClaimCollection.project_did == project, ClaimCollection.state == OPEN)
            .order_by(ClaimCollection.id.desc())
        )
        for row in rows:
            protocol = await self._protocols.get(row.protocol_did)
            if protocol.effective_methodology and protocol.effective_token_class:
                return row, protocol
        raise Conflict(
            f"{project} has no open claim collection whose protocol carries a methodology "
            "and a token class; create one first."
        )
