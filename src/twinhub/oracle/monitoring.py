"""Monitoring periods of a project: every stove's reductions from its telemetry rollups,
computed as a draft with its inputs' snapshot (the figures and the digests of the readings
behind them, and the project's approved claims awaiting issuance it carries: services.
claim_issuance), which the verification workflow (oracle.period_workflow) freezes, verifies
and issues. A draft can be recomputed; nothing is minted here.

Overlapping periods of one project are refused (checked again inside the ledger write, so
two concurrent runs cannot both pass); a rejected period no longer holds its days.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime
from typing import Any, NamedTuple

import orjson
import structlog
from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.dialects import read_snapshot
from twinhub.db.models import Claim, ClaimCollection, Domain, MonitoringPeriod, Relationship
from twinhub.kernel.clock import utcnow
from twinhub.kernel.collector import collector_paused
from twinhub.kernel.errors import (
    Conflict,
    FieldProblem,
    Forbidden,
    Invalid,
    NotFound,
)
from twinhub.kernel.principals import Principal
from twinhub.mrv.builtin import past_document
from twinhub.mrv.claims import FAR_FUTURE, NotComputable, claim_days, methodology_of
from twinhub.mrv.methodology import digest_of
from twinhub.mrv.period_inputs import freeze, report_of
from twinhub.mrv.periods import (
    PeriodSpec,
    StovePeriod,
    compare_reports,
    report_csv,
)
from twinhub.services.claim_credits import token_decimals
from twinhub.services.claim_issuance import carried
from twinhub.services.claims import APPROVED, OPEN
from twinhub.services.credited_days import held
from twinhub.services.day_digests import DayDigests, Digested, digest_days
from twinhub.services.domains import ACTIVE, verified_project
from twinhub.services.ledger import Ledger
from twinhub.services.mrv_inputs import stove_periods
from twinhub.services.project_documents import ProjectDocuments
from twinhub.services.protocols import ProtocolService, ProtocolView
from twinhub.services.surveys import SurveyService

MAX_PERIOD_DAYS = 366


class PeriodOverlaps(Conflict):
    code = "period_overlaps"


DRAFT, SUBMITTED, VERIFIED, REJECTED, ISSUED = (
    "draft",
    "submitted",
    "verified",
    "rejected",
    "issued",
)
FROZEN = (SUBMITTED, VERIFIED, ISSUED)  # inputs frozen, stove-days held
_READINGS_CHUNK = 200  # stoves whose raw readings a draft holds at once
_KEEP_EVERY = 100_000  # stove-days a draft digested, kept as it goes (another transaction)
log = structlog.get_logger(__name__)

# How far a draft is, for whoever waits on it (oracle.period_drafts): its step ("reading",
# "computing", "storing"), and the stoves whose readings are read of all of them.
Progress = Callable[[str, int, int], Awaitable[None]]


async def unheard(step: str, done: int, total: int) -> None:
    """The progress nobody asked to hear."""


DRAFT_STEPS = {  # each step as a person reads it (the CLI's bar, the console's periods page)
    "starting": "starting",
    "reading": "reading the stoves' readings",
    "computing": "computing the report",
    "storing": "storing the draft",
}


async def report_aside(
    frozen: dict[str, Any], stoves: Sequence[StovePeriod] | None = None
) -> dict[str, Any]:
    """The draft's report, computed in a thread: seconds of pure computation at programme
    scale (20 s at 100,000 stoves), during which the worker's event loop keeps answering
    its other requests. `stoves`: those the snapshot froze (mrv.period_inputs.report_of)."""
    return await asyncio.to_thread(_report, frozen, stoves)


def _frozen(*inputs: Any) -> dict[str, Any]:
    with collector_paused():  # a row and a day's figures a stove-day, no cycle
        return freeze(*inputs)


def _report(frozen: dict[str, Any], stoves: Sequence[StovePeriod] | None) -> dict[str, Any]:
    with collector_paused():  # the thawed stove-days: many small objects, no cycle
        return report_of(frozen, stoves)


class Inputs(NamedTuple):
    """A snapshot: the frozen inputs, and the stoves they froze as the rules read them."""

    frozen: dict[str, Any]
    stoves: list[StovePeriod]


def period_view(row: MonitoringPeriod) -> dict[str, Any]:
    report = orjson.loads(row.report)
    return {
        "id": row.id,
        "project": row.project_did,
        "from": row.start.isoformat(),
        "to": row.end.isoformat(),
        "state": row.state,
        "proponent": row.proponent,
        "claim": row.claim_id,
        "credits": report["credits"],
        "totals": report["totals"],
        "reportDigest": row.report_digest,
        "findings": orjson.loads(row.findings) if row.findings else [],
        "createdAt": row.created_at.isoformat(),
        "updatedAt": row.updated_at.isoformat() if row.updated_at else None,
    }


class MonitoringService:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        ledger: Ledger,
        protocols: ProtocolService,
        documents: ProjectDocuments | None = None,
        surveys: SurveyService | None = None,
        days: DayDigests | None = None,
    ) -> None:
        self._sessions = sessions
        self._ledger = ledger
        self._protocols = protocols
        self._days = days  # stove-days' digests kept between drafts (services.day_digests)
        self._documents = documents  # the validated project document a period computes under
        self._surveys = surveys  # the sampled parameters its surveys fixed (household size)

    @property
    def protocols(self) -> ProtocolService:
        return self._protocols

    async def run(
        self,
        project: str,
        start: date,
        end: date,
        actor: Principal,
        progress: Progress = unheard,
    ) -> tuple[dict[str, Any], bool]:
        """The period as a draft (computed now, or recomputed while still a draft; as
        frozen once submitted): (view, created). Nothing is minted: credits come with the
        registry's issuance (oracle.period_workflow). `progress` hears how far it is."""
        async with read_snapshot(self._sessions) as session:  # figures and readings agree
            existing, protocol = await self._may_draft(session, project, start, end, actor)
            if existing is not None and existing.state != DRAFT:
                return period_view(existing), False
            assert protocol is not None
            digested = Digested() if self._days is not None else None
            frozen, stoves = await self.inputs(
                session,
                project,
                start,
                end,
                protocol,
                None,
                existing.id if existing else None,
                progress=progress,
                into=digested,
            )
        await progress("computing", len(frozen["stoves"]), len(frozen["stoves"]))
        report = await report_aside(frozen, stoves)
        if report["totals"]["stoves"] == 0:
            raise Conflict(
                f"{project} has no active stoves: a period with no data is refused, never "
                "issued with zero."
            )
        await progress("storing", len(frozen["stoves"]), len(frozen["stoves"]))
        stored = await self._store_draft(project, start, end, actor, frozen, report)
        await self._keep(digested)  # the rest of what it digested, once it is stored
        return stored

    async def _keep(self, digested: Digested | None) -> None:
        """Keep the stove-days `digested` holds to keep, and let go of them: the next
        draft's shortcut (services.day_digests); the draft stands without it."""
        if self._days is None or digested is None or not digested.fresh:
            return
        try:
            await self._days.keep(digested.fresh)
        except Exception as error:  # a data error is never a failed draft
            log.warning("day digests not kept", error=type(error).__name__)
        digested.fresh.clear()

    async def _store_draft(
        self,
        project: str,
        start: date,
        end: date,
        actor: Principal,
        frozen: dict[str, Any],
        report: dict[str, Any],
    ) -> tuple[dict[str, Any], bool]:
        """The draft stored (a period made, or its draft replaced) with its ledger entry;
        a period submitted meanwhile is answered as frozen: (view, created)."""
        async with self._ledger.write() as write:
            session = write.session
            await self._no_overlap(session, project, start, end)
            row = await self._existing(session, project, start, end, lock=True)
            if row is not None and row.state != DRAFT:  # submitted meanwhile: frozen now
                return period_view(row), False
            created = row is None
            if row is None:
                row = MonitoringPeriod(
                    project_did=project, start=start, end=end, state=DRAFT, created_at=utcnow()
                )
                session.add(row)
            row.claim_id = None
            row.amount = report["credits"]["amount"]
            row.report_digest = report["reportDigest"]
            row.report = orjson.dumps(report).decode()
            row.inputs = orjson.dumps(frozen).decode()
            row.actor = actor.did
            row.updated_at = utcnow()
            await session.flush()
            await write.append(
                "period.draft",
                project,
                actor.did,
                {
                    "period": row.id,
                    "from": start.isoformat(),
                    "to": end.isoformat(),
                    "reportDigest": row.report_digest,
                },
            )
            return period_view(row), created

    async def check_draft(
        self, project: str, start: date, end: date, actor: Principal
    ) -> dict[str, Any] | None:
        """What `run` refuses before it computes, refused now (a request answers it at
        once, before any draft starts in the background); the period as frozen when it was
        submitted already (`run` would answer it, computing nothing)."""
        async with self._sessions() as session:
            existing, _ = await self._may_draft(session, project, start, end, actor)
        return period_view(existing) if existing is not None and existing.state != DRAFT else None

    async def _may_draft(
        self, session: AsyncSession, project: str, start: date, end: date, actor: Principal
    ) -> tuple[MonitoringPeriod | None, ProtocolView | None]:
        """The checks before a draft: the caller's rights, the dates, the project, no other
        period over its days, a claim collection with a protocol. The period stored for
        these dates (frozen: nothing more is checked) and the protocol it computes under."""
        if not (actor.is_admin or actor.roles & {"writer", "proponent"}):
            raise Forbidden("This needs the writer or proponent role.")
        self._check_dates(start, end)
        domain = await self._project(session, project)
        if not (actor.is_admin or actor.did in domain.controller):
            raise Forbidden(f"Only a controller of {project} or an admin may do this.")
        existing = await self._existing(session, project, start, end)
        if existing is not None and existing.state != DRAFT:
            return existing, None
        await self._no_overlap(session, project, start, end)
        _, protocol = await self._collection(session, project)
        return existing, protocol

    async def inputs(
        self,
        session: AsyncSession,
        project: str,
        start: date,
        end: date,
        protocol: ProtocolView,
        stoves: list[str] | None = None,
        period_id: int | None = None,
        methodology: dict[str, Any] | None = None,
        progress: Progress = unheard,
        into: Digested | None = None,
    ) -> Inputs:
        """The period's inputs from the stored telemetry, as a draft freezes them: every
        stove's facts and days, the digests of each day's readings, and what is credited
        elsewhere already (other claims, other periods' days of the same device, or a
        second domain of one device). `methodology`: another document than the protocol's
        (a report issued under an earlier version, recomputed as it was issued). `progress`
        hears of each chunk of stoves whose readings are read. `into` (a draft's): the
        stove-days' kept digests reused where they still hold (services.day_digests), the
        others digested from their readings and left in `into.fresh` to keep; without it
        (a verifier's recomputation), every reading is read."""
        assert protocol.effective_methodology is not None and protocol.effective_token_class
        methodology = methodology or protocol.effective_methodology
        if stoves is None:
            stoves = await self.stoves_of(session, project)
        reading = methodology_of(methodology).reading
        identities: dict[str, str] = {}
        periods = await stove_periods(session, stoves, start, end, reading, identities)
        credited = {
            stove: f"claim {claim}"
            for stove, claim in (await self.credited(session, project, stoves, start, end)).items()
        }
        for stove, (_, holder) in (await held(session, identities, start, end, period_id)).items():
            credited.setdefault(stove, holder)
        first_of: dict[str, str] = {}
        for stove in sorted(stoves):
            first = first_of.setdefault(identities[stove], stove)
            if first != stove:
                credited.setdefault(stove, f"{first}, the same device")
        with_days = [p.stove for p in periods if p.days]
        taken_at = utcnow()
        digested = into if into is not None else Digested()
        # Every raw reading of the period not digested before (1.2 million at 10,000 stoves
        # x 30 days, at worst), none in a reference cycle: the collector's passes over them
        # cost a quarter of the snapshot (bench/results/2026-11-28.md, "session 21").
        with collector_paused():
            for offset in range(0, len(with_days), _READINGS_CHUNK):
                await progress("reading", offset, len(with_days))
                chunk = with_days[offset : offset + _READINGS_CHUNK]
                await digest_days(session, chunk, start, end, digested, into is not None)
                if len(digested.fresh) >= _KEEP_EVERY:  # bounded: 3 million at 100,000 stoves
                    await self._keep(digested)
        digests, seen = digested.digests, digested.seen
        periods = [replace(p, seen=seen[p.stove]) if p.stove in seen else p for p in periods]
        token = protocol.effective_token_class
        spec = PeriodSpec(project, start, end, token, await token_decimals(session, token))
        validation = (
            await self._documents.validation_of(session, project) if self._documents else None
        )
        sampled = await self._surveys.sampled_parameters(project) if self._surveys else None
        claims = await carried(session, project, end)
        # In a thread, as the report: a second at 10,000 stoves the event loop is not held.
        frozen = await asyncio.to_thread(
            _frozen,
            spec,
            protocol.did,
            methodology,
            periods,
            credited,
            digests,
            identities,
            taken_at,
            validation.document if validation is not None else None,
            sampled or None,  # frozen with the inputs: the survey's figures at submission
            claims,  # the approved claims awaiting issuance it carries
        )
        return Inputs(frozen, periods)

    async def compute(
        self,
        session: AsyncSession,
        project: str,
        start: date,
        end: date,
        protocol: ProtocolView,
        stoves: list[str] | None = None,
        period_id: int | None = None,
        methodology: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The report for the period from the stored telemetry (pure after the reads)."""
        made = await self.inputs(
            session, project, start, end, protocol, stoves, period_id, methodology
        )
        with collector_paused():  # the thawed stove-days: many small objects, no cycle
            return report_of(made.frozen)  # thawed: a verifier recomputes what was frozen

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

    async def row(
        self, session: AsyncSession, project: str, period_id: int, lock: bool = False
    ) -> MonitoringPeriod:
        """The period's row (FOR UPDATE with `lock`); NotFound when it is not the project's."""
        row = await session.get(MonitoringPeriod, period_id, with_for_update=lock)
        if row is None or row.project_did != project:
            raise NotFound(f"No monitoring period {period_id} of {project}.")
        return row

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
        async with read_snapshot(self._sessions) as session:
            row = await self._existing(session, project, start, end)
            if row is not None and row.state in FROZEN and row.inputs:
                # Its inputs were frozen at submission: readings that came later are late
                # data (reported apart), never a change of the issued report.
                recomputed = report_of(orjson.loads(row.inputs))
            else:
                # The methodology the report names, when the protocol has moved on since
                # (1.0.0's reports after 2.0.0): each version recomputes as it was issued.
                named = (report.get("methodology") or {}).get("digest")
                ours = protocol.effective_methodology
                past = None
                if isinstance(named, str) and ours is not None and named != digest_of(ours):
                    past = past_document(named)
                recomputed = await self.compute(
                    session, project, start, end, protocol, stoves, row.id if row else None, past
                )
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
        session: AsyncSession, project: str, start: date, end: date, lock: bool = False
    ) -> MonitoringPeriod | None:
        query = select(MonitoringPeriod).where(
            MonitoringPeriod.project_did == project,
            MonitoringPeriod.start == start,
            MonitoringPeriod.end == end,
        )
        return await session.scalar(query.with_for_update() if lock else query)

    @staticmethod
    async def _no_overlap(session: AsyncSession, project: str, start: date, end: date) -> None:
        other = await session.scalar(
            select(MonitoringPeriod)
            .where(
                MonitoringPeriod.project_did == project,
                MonitoringPeriod.start <= end,
                MonitoringPeriod.end >= start,
                MonitoringPeriod.state != REJECTED,
                ~((MonitoringPeriod.start == start) & (MonitoringPeriod.end == end)),
            )
            .limit(1)
        )
        if other is not None:
            raise PeriodOverlaps(
                f"The period overlaps monitoring period {other.id} "
                f"({other.start}..{other.end}, {other.state}) of {project}."
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
