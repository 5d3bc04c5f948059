"""Claims: collections, submissions, oracle evaluations, and what an approval sets off.

Rules that live here:
- verified only: a collection is created for, and claims are submitted and evaluated
  under, a project domain that governance has verified; a project that is not (or whose
  verification was revoked) is refused with `domain_not_verified` at every step;
- a collection names a claim protocol; its evaluators are oracle domains of the kind the
  protocol's `verifier` role declares; it may have a quota and an open window;
- claim data is checked against the protocol's template, like domain properties;
- claims may be submitted by the project's or the asset's controllers (or an admin);
  only an evaluator oracle (or one of its controllers) evaluates, and only a pending or
  flagged claim: approved, rejected, disputed and invalidated are final;
- an approval issues a signed verifiable credential and, when the protocol names a token
  class, records the evaluated amount and holds the claim's stove-days (one stove-day, one
  credit): a draft figure. It mints nothing. The credits come with issuance: the claim
  rides its project's next monitoring period (oracle.period_workflow), whose submission,
  verification and issuance credentials cover it, and the registry's issuance mints the
  amount to the owner of the claim's asset (`credit_owner`): the household its
  `ownerCustomerId` names, else its first controller; or to the project's first
  controller when the claim names no asset.
Every write is one ledger write: the claim, its counters, the credential and the held days
commit together or not at all. That is why "claim approved -> credential" is a step of the
approval's own transaction and not a handler of the bus (kernel.bus) run after its commit:
a crash between them would leave an approved claim without its credential. What the bus
carries after the commit is the news (claim.approved, credential.issued: webhooks,
streams). A caller that must write with an evaluation (the oracle's signed decision)
opens the ledger write itself and makes the evaluation in it
(`ClaimEvaluations.evaluate_within`), rather than passing a callback down here.

The service is four classes of one job each, built together (`ClaimService`):
`ClaimCollections`, `ClaimSubmissions`, `ClaimEvaluations` and `ClaimViews`.

Events carry their causes (kernel.bus.Cause): a claim keeps the id of its claim.submitted
event, which causes its evaluation's events (claim.evaluated, claim.approved,
credential.issued).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import orjson
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import bindparam, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.dialects import DaySpan, SubmissionAsks, dialect_of, read_snapshot
from twinhub.db.driver import driver_error, session_driver
from twinhub.db.models import (
    Claim,
    ClaimCollection,
    Credential,
    Domain,
    Evaluation,
    MonitoringPeriod,
)
from twinhub.events.store import new_event_id
from twinhub.kernel.bus import Cause
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import (
    Conflict,
    FieldProblem,
    Forbidden,
    Invalid,
    NotFound,
    NotVerified,
    Problems,
    ServiceError,
)
from twinhub.kernel.identifiers import customer_did, is_did
from twinhub.kernel.principals import Principal, require_role
from twinhub.mrv.claims import FAR_FUTURE, ClaimComputation, ClaimJob, NotComputable, claim_days
from twinhub.mrv.period_inputs import claim_inputs, device_identity
from twinhub.mrv.rules import takes_part
from twinhub.services.claim_credits import compute_claim, compute_claims
from twinhub.services.coalesce import Coalescer
from twinhub.services.collection_members import agent_joins
from twinhub.services.credentials import CredentialService, rfc3339
from twinhub.services.credited_days import day_spans, held_over, hold_spans
from twinhub.services.domains import ACTIVE, require_verified_project, verified_project
from twinhub.services.ledger import Ledger, LedgerWrite
from twinhub.services.paging import (
    Page,
    Window,
    WindowPage,
    decode_cursor,
    fetch_window,
    split_page,
)
from twinhub.services.protocols import ProtocolService, ProtocolView, check_values
from twinhub.services.twin_classes import same_kind

OPEN, PAUSED, CLOSED = "open", "paused", "closed"
STATES = (OPEN, PAUSED, CLOSED)
PENDING, APPROVED, REJECTED = "pending", "approved", "rejected"
FLAGGED, DISPUTED, INVALIDATED = "flagged", "disputed", "invalidated"
OUTCOMES = (APPROVED, REJECTED, FLAGGED, DISPUTED, INVALIDATED)
STATUSES = (PENDING, *OUTCOMES)
EVALUABLE = (PENDING, FLAGGED)
VERIFIER_ROLE = "verifier"
MAX_EVALUATORS = 50
_CHUNK = 500  # ids per IN (...) list
# Approvals computed in the ledger's own transaction where it is a snapshot (SQLite): up to
# this many a batch, the read session of their own (its connection, BEGIN and close, the
# claims read twice) cost more than the statements; larger batches keep the write lock
# for less time by computing before the turn.
_COMPUTED_IN_WRITE = 64
# The statements every evaluation batch runs, built once (each IN list one expanding
# parameter): building and cache-keying them per batch cost about as much as running them.
_APPROVED_OVER = select(Claim.asset_did, Claim.id, Claim.data).where(
    Claim.asset_did.in_(bindparam("stoves", expanding=True)),
    Claim.status == APPROVED,
    or_(Claim.period.in_(bindparam("months", expanding=True)), Claim.period.is_(None)),
)
_PERIODS_OVER = select(
    MonitoringPeriod.project_did,
    MonitoringPeriod.id,
    MonitoringPeriod.start,
    MonitoringPeriod.end,
    MonitoringPeriod.report,
).where(
    MonitoringPeriod.project_did.in_(bindparam("projects", expanding=True)),
    MonitoringPeriod.start <= bindparam("last"),
    MonitoringPeriod.end >= bindparam("first"),
    # A draft credits nothing; a rejected period no longer holds its days.
    MonitoringPeriod.state.in_(("submitted", "verified", "issued")),
)
_TO_PREPARE = (
    select(
        Claim.id,
        Claim.collection_id,
        Claim.asset_did,
        Claim.data,
        Claim.status,
        ClaimCollection.protocol_did,
        ClaimCollection.project_did,
    )
    .join(ClaimCollection, ClaimCollection.id == Claim.collection_id)
    .where(Claim.id.in_(bindparam("ids", expanding=True)))
)
# The claims an evaluation batch makes, and their collections, as plain rows (Core): the
# ORM's loading and unit of work cost more than the statements. Every column but the
# claim's `inputs` (written, never read here), by attribute name.
_CLAIM_FIELDS = tuple(c.key for c in Claim.__table__.c if c.key != "inputs")
_COLLECTION_FIELDS = tuple(c.key for c in ClaimCollection.__table__.c)
_CLAIMS_LOCKED = (
    select(
        *(Claim.__table__.c[name] for name in _CLAIM_FIELDS),
        *(ClaimCollection.__table__.c[name] for name in _COLLECTION_FIELDS),
    )
    .join_from(Claim.__table__, ClaimCollection.__table__)
    .where(Claim.__table__.c.id.in_(bindparam("ids", expanding=True)))
    .order_by(Claim.__table__.c.id)
    .with_for_update()
)
# What an evaluation changes, a statement per batch (executemany).
_EVALUATED_FIELDS = ("status", "oracle", "reason", "amount", "credential_id", "evaluated_at")
_COUNTED_FIELDS = ("evaluated", "approved", "rejected", "flagged", "disputed", "invalidated")
_UPDATE_CLAIMS = {  # by whether the evaluation computed the claim's `inputs`
    fields: update(Claim.__table__)
    .where(Claim.__table__.c.id == bindparam("id_"))
    .values({name: bindparam(name) for name in fields})
    for fields in (_EVALUATED_FIELDS, (*_EVALUATED_FIELDS, "inputs"))
}
_UPDATE_COLLECTIONS = (
    update(ClaimCollection.__table__)
    .where(ClaimCollection.__table__.c.id == bindparam("id_"))
    .values({name: bindparam(name) for name in (*_COUNTED_FIELDS, "updated_at")})
)
_INSERT_CREDENTIAL = insert(Credential.__table__)
_INSERT_EVALUATION = insert(Evaluation.__table__)
_DOMAINS_LOCKED = (
    select(Domain)
    .where(Domain.did.in_(bindparam("dids", expanding=True)))
    .order_by(Domain.did)
    .with_for_update()
)
CLAIM_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:\-]{0,99}$")
_REASON = re.compile(r"^\S.{0,999}$", re.DOTALL)
JSON_SAFE_INTEGER = 2**53 - 1  # credentials are canonicalised as JSON numbers (RFC 8785)
CREDENTIAL_TYPE = "ClaimEvaluationCredential"
PERIOD_FIELDS = ("periodStart", "periodEnd")
PERIOD_SKEW = timedelta(minutes=5)  # a client clock a little ahead is not a future period
UNCOUNTED = (REJECTED, INVALIDATED)  # a stove-period freed for a corrected report


@dataclass
class CollectionSpec:
    project: str
    protocol: str
    evaluators: list[str]
    name: str | None = None
    quota: int | None = None
    start_date: datetime | None = None
    end_date: datetime | None = None


@dataclass
class ClaimFilter:
    collection: int | None = None
    status: str | None = None
    agent: str | None = None
    asset: str | None = None


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def collection_view(row: ClaimCollection) -> dict[str, Any]:
    return {
        "id": row.id,
        "name": row.name,
        "project": row.project_did,
        "protocol": row.protocol_did,
        "admin": row.admin,
        "evaluators": row.evaluators,
        "state": row.state,
        "quota": row.quota,
        "startDate": _iso(row.start_date),
        "endDate": _iso(row.end_date),
        "counts": {
            "submitted": row.count,
            "evaluated": row.evaluated,
            "pending": row.count - row.evaluated,
            "approved": row.approved,
            "rejected": row.rejected,
            "flagged": row.flagged,
            "disputed": row.disputed,
            "invalidated": row.invalidated,
        },
        "createdAt": _iso(row.created_at),
        "updatedAt": _iso(row.updated_at),
    }


AWAITING_ISSUANCE, ISSUED = "awaiting issuance", "issued"


def credits_state(
    status: str, amount: int | None, period_id: int | None, issued_at: datetime | None
) -> dict[str, Any] | None:
    """Where an approved claim's credits are: "awaiting issuance" (the approval's figure is a
    draft; `period` names the monitoring period carrying it once one is submitted) or
    "issued" by that period's issuance. None for a claim with nothing to credit."""
    if status != APPROVED or not amount:
        return None
    return {
        "state": ISSUED if issued_at is not None else AWAITING_ISSUANCE,
        "period": period_id,
        "issuedAt": _iso(issued_at),
    }


def claim_view(row: Claim, evaluations: list[Evaluation] | None = None) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": row.id,
        "collection": row.collection_id,
        "agent": row.agent,
        "asset": row.asset_did,
        "data": row.data,
        "status": row.status,
        "oracle": row.oracle,
        "reason": row.reason,
        "amount": row.amount,
        "credential": row.credential_id,
        "credits": credits_state(row.status, row.amount, row.period_id, row.issued_at),
        "submittedAt": _iso(row.submitted_at),
        "evaluatedAt": _iso(row.evaluated_at),
    }
    if evaluations is not None:
        view["evaluations"] = [
            {
                "oracle": e.oracle,
                "by": e.actor,
                "status": e.status,
                "reason": e.reason,
                "amount": e.amount,
                "at": _iso(e.created_at),
            }
            for e in evaluations
        ]
    return view


def _unsafe_integers(value: Any, path: str, problems: Problems) -> None:
    """Integers a JSON number cannot carry exactly would break the credential's signature."""
    if isinstance(value, bool):
        return
    if isinstance(value, int) and abs(value) > JSON_SAFE_INTEGER:
        problems.add(path, f"integers are limited to ±{JSON_SAFE_INTEGER} in claims")
    elif isinstance(value, dict):
        for key, item in value.items():
            _unsafe_integers(item, f"{path}.{key}", problems)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _unsafe_integers(item, f"{path}[{index}]", problems)


@dataclass
class _Prepared:
    """A claim's credits computed before the ledger's turn, and what they were computed
    from: the turn uses them only if the claim it locked still says the same."""

    collection: int
    asset: str | None
    data: dict[str, Any]
    protocol: str
    project: str
    computation: ClaimComputation | None = None
    error: NotComputable | None = None

    def fits(self, claim: Claim, collection: ClaimCollection) -> bool:
        return (
            claim.collection_id == self.collection
            and claim.asset_did == self.asset
            and claim.data == self.data
            and collection.protocol_did == self.protocol
            and collection.project_did == self.project
        )

    def result(self) -> ClaimComputation:
        if self.error is not None:
            raise self.error
        assert self.computation is not None
        return self.computation


class _NothingApplied(Exception):
    """Every evaluation of a write was refused: roll it back rather than commit nothing."""


class DoubleCounting(Conflict):
    """The approval would credit a stove-period that is credited already."""

    code = "double_counting"


class PeriodClaimed(Conflict):
    """The stove already has a counted claim for this reporting period."""

    code = "period_claimed"


def _month_start(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def last_month_start(now: datetime) -> datetime:
    """The first instant of the calendar month (UTC) before `now`'s: a report that names
    no period speaks for the month just ended, whose telemetry is complete, so its credits
    can be computed at once."""
    return (_month_start(now) - timedelta(days=1)).replace(day=1)


def _next_month(start: datetime) -> datetime:
    return (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )


def _instant(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def reporting_period(
    protocol: ProtocolView, data: dict[str, Any], asset: str | None, now: datetime
) -> tuple[dict[str, Any], str | None]:
    """The claim's data and its reporting period ("2026-11"), for a periodic claim about an
    asset: one whose protocol declares periodStart and periodEnd. A claim that gives no
    period covers the calendar month (UTC) before the one it is submitted in (the month
    just ended), and says so in its data; a
    given period lies within one calendar month, so that overlapping claims for a stove
    share one key. Anything else has no period (None)."""
    if asset is None or not all(name in protocol.effective_properties for name in PERIOD_FIELDS):
        return data, None
    given = [name for name in PERIOD_FIELDS if name in data]
    if not given:
        start = last_month_start(now)
        bounds = {"periodStart": rfc3339(start), "periodEnd": rfc3339(_next_month(start))}
        return {**data, **bounds}, f"{start:%Y-%m}"
    problems = Problems()
    if len(given) == 1:
        missing = next(name for name in PERIOD_FIELDS if name not in data)
        problems.add(f"data.{missing}", "a period has a start and an end (or neither)")
        problems.raise_if_any("The claim's period is incomplete.")
    start, end = _instant(data["periodStart"]), _instant(data["periodEnd"])
    month = _month_start(start)
    if end <= start:
        problems.add("data.periodEnd", "must be after periodStart")
    elif end > _next_month(month):
        problems.add(
            "data.periodEnd",
            f"a claim covers at most one calendar month (UTC): {month:%Y-%m} ends at "
            f"{rfc3339(_next_month(month))}; split the report",
        )
    if start > now + PERIOD_SKEW:
        problems.add("data.periodStart", "the period has not started yet")
    problems.raise_if_any("The claim's period is invalid.")
    return data, f"{month:%Y-%m}"


class Credited:
    """What is credited already for some stoves: other approved claims' periods, and the
    monitoring periods of their projects with the stoves each credited. Read once for a
    batch of approvals and kept up to date as the batch approves (`add`), so each approval
    is checked against the database and against the batch before it."""

    def __init__(self) -> None:
        self._claims: dict[str, list[tuple[str, dict[str, Any]]]] = {}  # stove -> (id, data)
        self._periods: dict[str, list[tuple[int, date, date, set[str]]]] = {}  # project ->
        # One stove-day, one credit across the registry (services.credited_days): each
        # device's held days, and which device each stove is.
        self._devices: dict[str, str] = {}
        self._held: dict[str, list[tuple[date, str]]] = {}

    @classmethod
    async def load(
        cls,
        session: AsyncSession,
        stoves: Iterable[str],
        projects: Iterable[str],
        days: Iterable[tuple[date, date]],
        devices: Mapping[str, str] | None = None,
        spans_of: Mapping[str, Iterable[tuple[date, date]]] | None = None,
    ) -> Credited:
        """For approvals of `stoves` (claims of `projects`) over `days` (first, last);
        `devices`: each stove's device identity, whose days held anywhere are read too:
        over the days `spans_of` gives the stove (its claims' days), or else over every
        day from the first of `days` to the last."""
        credited = cls()
        spans = list(days)
        if devices and spans:
            credited._devices = dict(devices)
            asked: dict[tuple[date, date], list[str]] = {}
            if spans_of is None:
                whole = (min(first for first, _ in spans), max(last for _, last in spans))
                asked[whole] = list(devices.values())
            else:
                for stove, stove_spans in spans_of.items():
                    if stove in devices:
                        for span in stove_spans:
                            asked.setdefault(span, []).append(devices[stove])
            credited._held = await held_over(session, asked)
        stoves, projects = sorted(set(stoves)), sorted(set(projects))
        # A periodic claim lies within the calendar month its `period` names: only claims
        # of the spans' months can overlap them (and claims with no period: older ones).
        months = sorted({month for span in spans for month in _months(*span)})
        for offset in range(0, len(stoves), _CHUNK):
            rows = await session.execute(
                _APPROVED_OVER, {"stoves": stoves[offset : offset + _CHUNK], "months": months}
            )
            for stove, claim_id, data in rows:
                credited._claims.setdefault(stove, []).append((claim_id, data))
        if projects and spans:
            periods = await session.execute(
                _PERIODS_OVER,
                {
                    "projects": projects,
                    "last": max(last for _, last in spans),
                    "first": min(first for first, _ in spans),
                },
            )
            for project, period_id, start, end, report in periods:
                stoves_credited = {row["stove"] for row in orjson.loads(report).get("stoves", [])}
                credited._periods.setdefault(project, []).append(
                    (period_id, start, end, stoves_credited)
                )
        return credited

    def doubled(self, claim: Claim, project: str, computation: ClaimComputation) -> list[str]:
        """Why approving `claim` would credit its stove-period twice (empty: it would not)."""
        found = []
        for period_id, start, end, stoves in self._periods.get(project, []):
            if start <= computation.end and end >= computation.start and claim.asset_did in stoves:
                found.append(
                    f"monitoring period {period_id} ({start}..{end}) credited this stove "
                    "already (double counting)"
                )
        device = self._devices.get(claim.asset_did or "")
        for day, holder in self._held.get(device or "", []):
            if computation.start <= day <= computation.end:
                found.append(
                    f"{day.isoformat()} of this device was credited already by {holder} "
                    "(double counting)"
                )
                break
        for other, data in self._claims.get(claim.asset_did or "", []):
            if other == claim.id:
                continue
            try:
                start, end = claim_days(data, FAR_FUTURE)
            except NotComputable:
                continue
            if start <= computation.end and computation.start <= end:
                found.append(
                    f"the stove-period {start}..{end} was credited already by claim {other} "
                    "(double counting)"
                )
        return found

    def add(
        self, claim: Claim, project: str, computation: ClaimComputation | None = None
    ) -> list[DaySpan]:
        """`claim` is approved now (in this batch); the spans holding its stove's days."""
        if claim.asset_did is None:
            return []
        self._claims.setdefault(claim.asset_did, []).append((claim.id, claim.data))
        device = self._devices.get(claim.asset_did)
        if device is None or computation is None:
            return []
        held = self._held.setdefault(device, [])
        # Only days nobody holds (an approval checked `doubled` first).
        spans = day_spans(
            device,
            claim.asset_did,
            project,
            computation.start,
            computation.end,
            claim.id,
            (day for day, _ in held),
        )
        holder = f"claim {claim.id}"
        for *_, first, last in spans:
            held.extend((first + timedelta(days=n), holder) for n in range((last - first).days + 1))
        return spans


def _months(first: date, last: date) -> list[str]:
    """The calendar months ("2026-11") from `first`'s to `last`'s, as claims name them."""
    months, year, month = [], first.year, first.month
    while (year, month) <= (last.year, last.month):
        months.append(f"{year:04d}-{month:02d}")
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return months


async def double_counted(
    session: AsyncSession, claim: Claim, computation: ClaimComputation
) -> list[str]:
    """Why approving `claim` would credit its stove-period twice: another approved claim
    on the stove whose period overlaps, or a monitoring period of the project that credited
    the stove for overlapping days. Checked by the oracle and by every approval."""
    project = await session.scalar(
        select(ClaimCollection.project_did).where(ClaimCollection.id == claim.collection_id)
    )
    stoves = [claim.asset_did] if claim.asset_did else []
    span = [(computation.start, computation.end)]
    asset = await session.get(Domain, claim.asset_did) if claim.asset_did else None
    devices = (
        {asset.did: device_identity(asset.did, asset.properties)} if asset is not None else None
    )
    credited = await Credited.load(session, stoves, [project] if project else [], span, devices)
    return credited.doubled(claim, project or "", computation)


@dataclass
class EvaluationRequest:
    """One evaluation (`ClaimEvaluations.evaluate_many`). `computation`: the claim's credits as
    the oracle computed them already."""

    claim: str
    status: str
    reason: str | None = None
    amount: int | None = None
    oracle: str | None = None
    computation: ClaimComputation | None = None


@dataclass
class EvaluationOutcome:
    """What became of one evaluation: the claim with its evaluations, or why not."""

    claim: str
    reply: dict[str, Any] | None = None
    error: ServiceError | None = None
    credential: str | None = None  # the approval's credential id
    token: str | None = None  # and the token class its credits will be issued in


@dataclass
class _Applied:
    """An evaluation made in the open write, whose reply is built once all are stored."""

    outcome: EvaluationOutcome
    claim: Claim
    evaluation: dict[str, Any]  # its `evaluations` row
    before: str


@dataclass
class _Turn:
    """What the evaluations of one ledger write share: the rows read for them (locked),
    the new rows gathered, written together once every evaluation is made."""

    write: LedgerWrite
    domains: dict[str, Domain]
    credited: Credited
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    credentials: list[dict[str, Any]] = field(default_factory=list)
    days: list[DaySpan] = field(default_factory=list)  # credited stove-days, as spans
    claims: list[Any] = field(default_factory=list)  # the evaluated claims (rows, changed)
    collections: dict[int, Any] = field(default_factory=dict)  # and their collections

    async def store(self) -> None:
        """The gathered rows and the changed claims and collections, a statement per table
        (Core: the ORM's bulk insert and unit of work spent more on their bookkeeping than
        the statements)."""
        session = self.write.session
        changed: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for claim in self.claims:
            fields = _EVALUATED_FIELDS if claim.inputs is None else (*_EVALUATED_FIELDS, "inputs")
            changed.setdefault(fields, []).append(
                {"id_": claim.id, **{name: getattr(claim, name) for name in fields}}
            )
        for fields, rows in changed.items():
            await session.execute(_UPDATE_CLAIMS[fields], rows)
        if self.collections:
            await session.execute(
                _UPDATE_COLLECTIONS,
                [
                    {
                        "id_": key,
                        "updated_at": row.updated_at,
                        **{name: getattr(row, name) for name in _COUNTED_FIELDS},
                    }
                    for key, row in self.collections.items()
                ],
            )
        if self.credentials:
            await session.execute(_INSERT_CREDENTIAL, self.credentials)
        if self.evaluations:
            await session.execute(_INSERT_EVALUATION, self.evaluations)
        await hold_spans(session, self.days)


async def _project(session: AsyncSession, did: str, doing: str) -> Domain:
    """The collection's project, locked: a revocation executing now waits for us."""
    return await verified_project(
        session, did, doing, purpose="claims are collected for projects", lock=True
    )


def _verified_project(project: Domain | None, did: str, doing: str) -> Domain:
    return require_verified_project(
        project, did, doing, purpose="claims are collected for projects"
    )


def _verified_asset(asset: Domain | None, did: str) -> Domain:
    """Verified domains only, for the stove as for the project: a claim about an asset
    is approved (and credits issued) only while governance has it verified (`asset` is
    read locked, so a revocation executing now waits for the approval, or it for it)."""
    if asset is None or not takes_part(asset.verified, asset.status):
        state = "deactivated" if asset is not None and asset.status != ACTIVE else "not verified"
        raise NotVerified(
            f"{did} is {state}: only an asset verified by governance takes part in credit "
            "issuance (rule: verified domains only). Verify it, e.g. in a batch proposal."
        )
    return asset


async def _collection_row(session: AsyncSession, collection_id: int) -> ClaimCollection:
    row = await session.get(ClaimCollection, collection_id, with_for_update=True)
    if row is None:
        raise NotFound(f"No claim collection {collection_id}.")
    return row


async def _evaluations_of(
    session: AsyncSession, claim_ids: list[str]
) -> dict[str, list[Evaluation]]:
    found: dict[str, list[Evaluation]] = {}
    if claim_ids:
        rows = await session.scalars(
            select(Evaluation).where(Evaluation.claim_id.in_(claim_ids)).order_by(Evaluation.id)
        )
        for row in rows:
            found.setdefault(row.claim_id, []).append(row)
    return found


class ClaimCollections:
    """Claim collections: opened for a verified project under a claim protocol, paused,
    reopened, closed; read one by one or in pages."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        ledger: Ledger,
        protocols: ProtocolService,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._sessions = sessions
        self._ledger = ledger
        self._protocols = protocols
        self._now = clock

    async def create_collection(self, spec: CollectionSpec, actor: Principal) -> dict[str, Any]:
        require_role(actor, "writer")
        problems = Problems()
        protocol = await self._claim_protocol(spec.protocol, problems)
        if spec.name is not None and not 1 <= len(spec.name) <= 200:
            problems.add("name", "expected 1 to 200 characters")
        if spec.quota is not None and (
            isinstance(spec.quota, bool) or not 1 <= spec.quota <= 10**12
        ):
            problems.add("quota", "expected a whole number of claims from 1 to 10^12")
        if spec.start_date and spec.end_date and spec.end_date <= spec.start_date:
            problems.add("endDate", "must be after startDate")
        if not 1 <= len(spec.evaluators) <= MAX_EVALUATORS:
            problems.add("evaluators", f"expected 1 to {MAX_EVALUATORS} oracle DIDs")
        if len(set(spec.evaluators)) != len(spec.evaluators):
            problems.add("evaluators", "an oracle is named twice")
        async with self._ledger.write() as write:
            session = write.session
            project = await _project(session, spec.project, "create a claim collection")
            if not (actor.is_admin or actor.did in project.controller):
                raise Forbidden(f"Only a controller of {project.did} or an admin may do this.")
            if protocol is not None:
                kind = protocol.effective_relationships[VERIFIER_ROLE]
                for index, did in enumerate(spec.evaluators):
                    oracle = await session.get(Domain, did) if is_did(did) else None
                    where = f"evaluators[{index}]"
                    if oracle is None:
                        problems.add(where, f"no domain {did}")
                    elif oracle.status != ACTIVE:
                        problems.add(where, f"{did} is deactivated")
                    elif not same_kind(oracle.type, kind):
                        problems.add(where, f"the verifier role needs a {kind}, not {oracle.type}")
            problems.raise_if_any("The claim collection is invalid.")
            assert protocol is not None
            now = self._now()
            row = ClaimCollection(
                name=spec.name or f"{protocol.name} claims",
                project_did=project.did,
                protocol_did=protocol.did,
                admin=actor.did,
                evaluators=spec.evaluators,
                state=OPEN,
                quota=spec.quota,
                start_date=spec.start_date,
                end_date=spec.end_date,
                count=0,
                evaluated=0,
                approved=0,
                rejected=0,
                flagged=0,
                disputed=0,
                invalidated=0,
                created_at=now,
                updated_at=now,
            )
            session.add(row)
            await session.flush()
            view = collection_view(row)
            await write.append(
                "claims.collection.create", project.did, actor.did, {"collection": view}
            )
        return view

    async def _claim_protocol(self, did: str, problems: Problems) -> ProtocolView | None:
        try:
            protocol = await self._protocols.get(did)
        except NotFound:
            problems.add("protocol", f"no protocol {did}")
            return None
        if VERIFIER_ROLE not in protocol.effective_relationships:
            problems.add("protocol", f"{did} declares no '{VERIFIER_ROLE}' role for oracles")
            return None
        return protocol

    async def collection(self, collection_id: int) -> dict[str, Any]:
        async with self._sessions() as session:
            row = await session.get(ClaimCollection, collection_id)
        if row is None:
            raise NotFound(f"No claim collection {collection_id}.")
        return collection_view(row)

    async def collections(
        self, project: str | None, cursor: str | None, limit: int
    ) -> Page[dict[str, Any]]:
        after = decode_cursor(cursor, ClaimCollection.id)
        query = select(ClaimCollection).where(ClaimCollection.id > after)
        if project is not None:
            query = query.where(ClaimCollection.project_did == project)
        async with self._sessions() as session:
            rows = list(await session.scalars(query.order_by(ClaimCollection.id).limit(limit + 1)))
        rows, next_cursor = split_page(rows, limit, lambda row: row.id)
        return Page([collection_view(r) for r in rows], next_cursor)

    async def set_state(self, collection_id: int, state: str, actor: Principal) -> dict[str, Any]:
        if state not in STATES:
            raise Invalid("The state is open, paused or closed.", [FieldProblem("state", state)])
        async with self._ledger.write() as write:
            row = await _collection_row(write.session, collection_id)
            if not (actor.is_admin or actor.did == row.admin):
                raise Forbidden(f"Only {row.admin} (the collection's admin) or an admin may.")
            if row.state == CLOSED and state != CLOSED:
                raise Conflict(f"Claim collection {collection_id} is closed for good.")
            row.state, row.updated_at = state, self._now()
            view = collection_view(row)
            await write.append(
                "claims.collection.state", row.project_did, actor.did, {"collection": view}
            )
        return view

    async def collections_window(self, window: Window) -> WindowPage[dict[str, Any]]:
        async with self._sessions() as session:
            page = await fetch_window(session, select(ClaimCollection), ClaimCollection.id, window)
        return WindowPage([collection_view(r) for r in page.items], page.next_key, page.total)

    async def collection_sequence(self) -> int:
        async with self._sessions() as session:
            return int(await session.scalar(select(func.max(ClaimCollection.id))) or 0)


@dataclass(frozen=True)
class _Submission:
    """One submission waiting for its batch (ClaimSubmissions.submit)."""

    data: dict[str, Any]
    actor: Principal
    asset: str | None
    claim_id: str | None


@dataclass(frozen=True)
class _Refused:
    """A submission of a batch that was refused: its caller raises `error`."""

    error: Exception


_COLLECTIONS = ClaimCollection.__table__
_CLAIMS = Claim.__table__
_SUBMISSION_BATCH = _CHUNK  # submissions one batch carries (each IN list one expanding param)
# The statements a batch of submissions runs, built once (services.coalesce, _submit_batch).
_COLLECTION_LOCKED = (
    select(_COLLECTIONS).where(_COLLECTIONS.c.id == bindparam("id")).with_for_update()
)
# The collection's project, locked: only what a submission checks of it (a Core row, not
# an ORM object, which cost the batch twice the statement).
_DOMAIN_TABLE = Domain.__table__
_PROJECT_LOCKED = (
    select(
        _DOMAIN_TABLE.c.did,
        _DOMAIN_TABLE.c.type,
        _DOMAIN_TABLE.c.controller,
        _DOMAIN_TABLE.c.verified,
        _DOMAIN_TABLE.c.status,
    )
    .where(_DOMAIN_TABLE.c.did == bindparam("did"))
    .with_for_update()
)
# The counted claims of some stoves over some periods, and the claims of some ids, are
# read with the batch's other facts (SUBMISSION_FACTS); a row value list,
# `(asset_did, period) IN (VALUES ...)`, made SQLite scan the table.
_PROBES = 2048  # stoves x periods one SUBMISSION_FACTS statement searches at most


class ClaimSubmissions:
    """Submitting claims to an open collection: who may, what the data must follow, one
    counted claim per stove and reporting period.

    Submissions to one collection arriving together are made together (services/coalesce):
    one deferred ledger write (services.ledger) a batch, with one statement each for the
    collection, its project, the assets and their project relationships, the taken
    stove-periods and ids; the claims are inserted with the ledger batch's other deferred
    rows, in one statement, and the collection's count updated once. Each submission is
    still checked on its own, in the order they came, with the errors it would get alone,
    and still appends its own ledger transaction."""

    def __init__(
        self,
        ledger: Ledger,
        protocols: ProtocolService,
        clock: Callable[[], datetime] = utcnow,
        linger: float = 0.0,
    ) -> None:
        self._ledger = ledger
        self._protocols = protocols
        self._now = clock
        self._coalescer: Coalescer[_Submission, dict[str, Any] | _Refused] = Coalescer(
            self._submit_batch, _SUBMISSION_BATCH, linger
        )

    @property
    def coalesced(self) -> tuple[int, int]:
        """Submissions coalesced so far: (batches run, submissions they carried)."""
        return self._coalescer.batches, self._coalescer.items

    async def submit(
        self,
        collection_id: int,
        data: dict[str, Any],
        actor: Principal,
        asset: str | None = None,
        claim_id: str | None = None,
    ) -> dict[str, Any]:
        require_role(actor, "writer")
        problems = Problems()
        if claim_id is not None and not CLAIM_ID.match(claim_id):
            problems.add("id", "letters, digits and . _ : - (at most 100), starting alphanumeric")
        if asset is not None and not is_did(asset):
            problems.add("asset", "expected a DID")
        _unsafe_integers(data, "data", problems)
        problems.raise_if_any("The claim is invalid.")
        outcome = await self._coalescer.submit(
            collection_id, _Submission(data, actor, asset, claim_id)
        )
        if isinstance(outcome, _Refused):
            raise outcome.error
        return outcome

    async def _submit_batch(
        self, collection_id: Hashable, items: list[_Submission]
    ) -> list[dict[str, Any] | _Refused]:
        """The submissions `items` to one collection, as one deferred ledger write; each
        gets its view or its refusal."""
        assert isinstance(collection_id, int)
        outcomes: list[dict[str, Any] | _Refused] = []
        async with self._ledger.write(deferred=True) as write:
            found = _BatchFacts(write, collection_id, items, self._now)
            await found.read(self._protocols)
            for item in items:
                try:
                    outcomes.append(await self._submit_one(write, found, item))
                except Exception as error:  # its caller's alone: the others go on
                    outcomes.append(_Refused(error))
        return outcomes

    async def _submit_one(
        self, write: LedgerWrite, found: _BatchFacts, item: _Submission
    ) -> dict[str, Any]:
        """One submission of a batch, checked in the order and with the errors of a
        submission made alone, against what the batch read and the rows it defers."""
        collection = found.collection
        if collection is None:
            raise NotFound(f"No claim collection {found.collection_id}.")
        project = _verified_project(found.project, collection.project_did, "take claims")
        self._check_window(collection, write.added(_COLLECTIONS, collection.id, "count"))
        asset, actor, data = item.asset, item.actor, item.data
        asset_row = found.asset(asset, project.did) if asset else None
        owners = {*project.controller, *(asset_row.controller if asset_row else [])}
        if asset_row is not None and asset_row.owner_customer_id:
            owners.add(customer_did(asset_row.owner_customer_id))  # the household
        if not (actor.is_admin or actor.did in owners or actor.did == collection.admin):
            raise Forbidden(
                "Only a controller of the project or of the asset (or an admin) may "
                "submit claims here."
            )
        protocol = found.protocol()
        problems = Problems()
        check_values(data, protocol, problems, partial=False, where="data")
        problems.raise_if_any("The claim does not follow the collection's protocol.")
        now = self._now()
        data, period = reporting_period(protocol, data, asset, now)
        await found.unclaimed(item.claim_id, asset, period)
        claim_id = item.claim_id or uuid.uuid4().hex
        submitted = new_event_id()  # its claim.submitted event's: its evaluation's cause
        row = SimpleNamespace(
            id=claim_id,
            seq=await write.next_seq(Claim.seq),
            collection_id=collection.id,
            agent=actor.did,
            asset_did=asset,
            data=data,
            status=PENDING,
            oracle=None,
            reason=None,
            amount=None,
            credential_id=None,
            submitted_at=now,
            evaluated_at=None,
            period=period,
            submitted_event=submitted,
            period_id=None,
            issued_at=None,
            inputs=None,
        )
        view = claim_view(row)  # type: ignore[arg-type]  # a Claim's columns
        await write.append(
            "claims.submit",
            asset or project.did,
            actor.did,
            {"claim": view},
            event_id=submitted,
        )
        # Last, and nothing here can fail: a refused submission must leave nothing deferred.
        write.defer(_CLAIMS, dict(vars(row)))
        write.take(("claims.id", claim_id), claim_id)
        if asset is not None and period is not None:
            write.take(("claims.period", asset, period), claim_id)
        agent_joins(write, collection.id, actor.did, found.members, now)
        write.add(_COLLECTIONS, collection.id, {"count": 1}, {"updated_at": now})
        return view

    def _check_window(self, collection: Any, added: int = 0) -> None:
        """The collection takes claims now; `added`: its claims not yet counted in `count`."""
        now = self._now()
        if collection.state != OPEN:
            raise Conflict(f"Claim collection {collection.id} is {collection.state}.")
        if collection.start_date and now < collection.start_date:
            raise Conflict(f"Claim collection {collection.id} opens at {collection.start_date}.")
        if collection.end_date and now >= collection.end_date:
            raise Conflict(f"Claim collection {collection.id} ended at {collection.end_date}.")
        if collection.quota is not None and collection.count + added >= collection.quota:
            raise Conflict(
                f"Claim collection {collection.id} has reached its quota of "
                f"{collection.quota} claims."
            )


class _BatchFacts:
    """What a batch of submissions to one collection checks its claims against, read in
    one statement each under the ledger's turn (which holds the database's write lock, so
    nobody else changes it before the batch commits): the collection and its project,
    locked; the named assets and which of them are linked to the project; the counted
    claims and chosen ids the submissions could clash with; the collection's members among
    their agents. The batch's own deferred rows are told by the write (`holder`)."""

    def __init__(
        self,
        write: LedgerWrite,
        collection_id: int,
        items: list[_Submission],
        clock: Callable[[], datetime],
    ) -> None:
        self.write = write
        self._now = clock
        self.collection_id = collection_id
        self.items = items
        self.collection: Any = None
        self.project: Any = None  # _PROJECT_LOCKED's row: a Domain's columns a check reads
        self.assets: dict[str, Any] = {}
        self.linked: set[str] = set()
        self.claimed: dict[tuple[str, str], str] = {}  # (asset, period) -> its counted claim
        self.asked: set[tuple[str, str]] = set()  # the (asset, period) pairs `claimed` covers
        self.ids: set[str] = set()
        self.members: set[str] = set()
        self._protocol: ProtocolView | None = None
        self._protocol_error: ServiceError | None = None

    async def read(self, protocols: ProtocolService) -> None:
        session = self.write.session
        found = (
            await session.execute(_COLLECTION_LOCKED, {"id": self.collection_id})
        ).one_or_none()
        if found is None:
            return
        self.collection = SimpleNamespace(**found._mapping)
        did = self.collection.project_did
        if is_did(did):
            self.project = (await session.execute(_PROJECT_LOCKED, {"did": did})).one_or_none()
        if self.project is None:
            return
        try:
            self._protocol = await protocols.get(self.collection.protocol_did)
        except ServiceError as error:
            self._protocol_error = error
        assets = sorted({item.asset for item in self.items if item.asset is not None})
        ids = sorted({item.claim_id for item in self.items if item.claim_id is not None})
        agents = sorted({item.actor.did for item in self.items})
        await self._claimed(sorted(self._pairs()), ids, assets, agents)

    async def _claimed(
        self,
        pairs: list[tuple[str, str]],
        ids: list[str],
        assets: Sequence[str] = (),
        agents: Sequence[str] = (),
    ) -> None:
        """The counted claims of `pairs` (asset, period) and the claims of `ids`: each
        statement asks for every stove of its pairs over every period of them, a few
        more pairs than needed and never more than `_PROBES`. The first also reads the
        `assets`, which of them are linked to the project, and the members among the
        `agents`: one statement (SUBMISSION_FACTS) through the driver, no ORM on the way."""
        asks: list[tuple[set[str], set[str]]] = []
        for asset, period in sorted(pairs, key=lambda pair: (pair[1], pair[0])):
            if asks:
                stoves, periods = asks[-1]
                grown = (len(stoves) + (asset not in stoves)) * (
                    len(periods) + (period not in periods)
                )
                if grown <= _PROBES:
                    stoves.add(asset)
                    periods.add(period)
                    continue
            asks.append(({asset}, {period}))
        if not asks:  # the first statement carries the rest
            asks.append((set(), set()))
        assert self.project is not None
        connection, raw = await session_driver(self.write.session)
        dialect = dialect_of(connection.dialect)
        for number, (stoves, periods) in enumerate(asks):
            first = number == 0
            ask = SubmissionAsks(
                assets=list(assets) if first else [],
                project=self.project.did,
                claimed=sorted(stoves),
                periods=sorted(periods),
                ids=ids if first else [],
                collection=self.collection_id,
                agents=list(agents) if first else [],
            )
            try:
                rows = await dialect.submission_facts(raw, ask)
            except Exception as error:  # the driver's own error, told as SQLAlchemy tells it
                raise driver_error(connection.dialect, raw, error) from error
            for kind, key, second, third, fourth, fifth in rows:
                if kind == "c":
                    if fourth not in UNCOUNTED and second is not None and third is not None:
                        self.claimed.setdefault((second, third), key)
                    self.ids.add(key)
                elif kind == "a":
                    controller = orjson.loads(fourth) if isinstance(fourth, str | bytes) else fourth
                    self.assets[key] = SimpleNamespace(
                        did=key,
                        status=second,
                        parent_did=third,
                        controller=controller,
                        owner_customer_id=fifth,
                    )
                elif kind == "l":
                    self.linked.add(key)
                else:
                    self.members.add(key)
        self.asked.update(pairs)

    def _pairs(self) -> set[tuple[str, str]]:
        """(asset, period) of each submission that names both, as far as its data says
        before it is checked (a wrong guess only asks for a row more or less)."""
        pairs = set()
        protocol = self._protocol
        for item in self.items:
            if item.asset is None or protocol is None:
                continue
            try:
                _, period = reporting_period(protocol, item.data, item.asset, self._now())
            except (ServiceError, TypeError, ValueError, AttributeError):
                continue
            if period is not None:
                pairs.add((item.asset, period))
        return pairs

    def protocol(self) -> ProtocolView:
        if self._protocol_error is not None:
            raise self._protocol_error
        assert self._protocol is not None
        return self._protocol

    def asset(self, did: str, project: str) -> Any:
        """The claim's asset, as `ClaimSubmissions` requires it."""
        row = self.assets.get(did)
        if row is None:
            raise Invalid("The claim's asset is unknown.", [FieldProblem("asset", f"no {did}")])
        if row.status != ACTIVE:
            raise Conflict(f"{did} is deactivated; it cannot produce claims.")
        if not (row.parent_did == project or did in self.linked):
            raise Invalid(
                f"{did} is not an asset of {project}.",
                [FieldProblem("asset", f"expected a 'project' relationship to {project}")],
            )
        return row

    async def unclaimed(self, claim_id: str | None, asset: str | None, period: str | None) -> None:
        """The new claim's unique keys: one counted claim per stove and reporting period,
        whatever the channel (the unique index `uq_claims_asset_period` backs it), and a
        chosen id nobody has, in the table or in the batch's rows not yet written."""
        write = self.write
        if asset is not None and period is not None:
            if (asset, period) not in self.asked:  # its period was not foreseen (`_pairs`)
                await self._claimed([(asset, period)], [])
            existing = write.holder(("claims.period", asset, period)) or self.claimed.get(
                (asset, period)
            )
            if existing is not None:
                raise PeriodClaimed(
                    f"{asset} has a claim for the reporting period {period} already: claim "
                    f"{existing}. A stove-period is counted once.",
                    [FieldProblem("existingClaim", existing)],
                )
        if claim_id is not None and (
            claim_id in self.ids or write.holder(("claims.id", claim_id)) is not None
        ):
            raise Conflict(f"A claim {claim_id} exists already.")


class ClaimEvaluations:
    """Evaluating claims: each evaluation checked under the ledger's turn, an approval's
    credential and credits written in its own ledger write; single evaluations arriving
    together coalesced into one write."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        ledger: Ledger,
        protocols: ProtocolService,
        credentials: CredentialService,
        clock: Callable[[], datetime] = utcnow,
        batch_max: int = 1000,
        linger: float = 0.0,
    ) -> None:
        self._sessions = sessions
        self._ledger = ledger
        self._protocols = protocols
        self._credentials = credentials
        self._now = clock
        self._coalescer: Coalescer[EvaluationRequest, EvaluationOutcome] = Coalescer(
            self._evaluate_batch, batch_max, linger
        )
        self._write_is_snapshot = dialect_of(sessions).write_is_snapshot

    @property
    def coalesced(self) -> tuple[int, int]:
        """Single evaluations coalesced so far: (batches run, evaluations they carried)."""
        return self._coalescer.batches, self._coalescer.items

    def collector(self) -> Collector:
        """Prometheus metrics of this process's coalesced single evaluations: their mean
        batch size is how much concurrent approvals share."""
        coalescer = self._coalescer

        class EvaluationMetrics(Collector):
            def collect(self) -> Iterator[Metric]:
                yield CounterMetricFamily(
                    "twinhub_claim_evaluation_batches",
                    "Batches that made single claim evaluations (coalesced when concurrent).",
                    value=coalescer.batches,
                )
                yield CounterMetricFamily(
                    "twinhub_claim_evaluations_coalesced",
                    "Single claim evaluations made in those batches.",
                    value=coalescer.items,
                )

        return EvaluationMetrics()

    async def evaluate(
        self,
        claim_id: str,
        status: str,
        actor: Principal,
        reason: str | None = None,
        amount: int | None = None,
        oracle: str | None = None,
        computation: ClaimComputation | None = None,
    ) -> dict[str, Any]:
        """Record an evaluation. An approval records what the protocol's methodology
        computes from the claim's stove telemetry (`computation`, when the oracle computed
        it already), minted later by the issuance that carries the claim; nobody names an
        amount."""
        request = EvaluationRequest(claim_id, status, reason, amount, oracle, computation)
        if computation is None:
            # Single evaluations arriving together are made together (services/coalesce).
            require_role(actor, "writer")
            outcome = await self._coalescer.submit(actor, request)
        else:  # computed by the oracle already: nothing to share with other evaluations
            (outcome,) = await self.evaluate_many([request], actor)
        if outcome.error is not None:
            raise outcome.error
        assert outcome.reply is not None
        return outcome.reply

    def write(self) -> AbstractAsyncContextManager[LedgerWrite]:
        """A ledger write of the caller's own, for `evaluate_within`."""
        return self._ledger.write()

    async def evaluate_within(
        self, write: LedgerWrite, request: EvaluationRequest, actor: Principal
    ) -> dict[str, Any]:
        """Make one evaluation inside the caller's ledger write, so that what the caller
        writes beside it (the oracle's signed decision, a monitoring period) commits with
        the evaluation, its credential and its credits, or none of them does: the caller
        raising after this rolls the whole write back. A refused evaluation raises its
        error (and the caller's write then changes nothing of the claim)."""
        require_role(actor, "writer")
        self._check_request(request)
        outcome = EvaluationOutcome(request.claim)
        now = self._now()
        applied = await self._apply(write, [request], [outcome], [0], actor, now, {})
        if outcome.error is not None:
            raise outcome.error
        await self._replies(write.session, applied)
        assert outcome.reply is not None
        return outcome.reply

    async def evaluate_many(
        self, requests: Sequence[EvaluationRequest], actor: Principal
    ) -> list[EvaluationOutcome]:
        """Record evaluations, in order, each made or refused on its own (one refused
        changes nothing and keeps none of the others from being made), in one ledger write.
        Credits are computed before the ledger's turn (telemetry rollups, methodology), a
        statement per set of claims over the same days: they depend only on each claim's
        immutable data and past telemetry, so the turn re-checks what can change (status,
        verification, double counting), then writes all the evaluations together."""
        require_role(actor, "writer")
        outcomes, live = self._checked(requests)
        if not live:
            return outcomes
        now = self._now()
        computing = [
            requests[i].claim
            for i in live
            if requests[i].status == APPROVED and requests[i].computation is None
        ]
        # Small batches where the write's transaction is a snapshot: computed in the turn
        # (`_apply`), from the claims it locks; others before it, in a snapshot of their own.
        in_write = self._write_is_snapshot and len(computing) <= _COMPUTED_IN_WRITE
        prepared = {} if in_write else await self._prepare(computing, now)
        try:
            async with self._ledger.write() as write:
                applied = await self._apply(
                    write, requests, outcomes, live, actor, now, prepared, in_write
                )
                if not applied:
                    raise _NothingApplied
                await self._replies(write.session, applied)
        except _NothingApplied:
            pass
        return outcomes

    async def evaluate_many_within(
        self, write: LedgerWrite, requests: Sequence[EvaluationRequest], actor: Principal
    ) -> list[EvaluationOutcome]:
        """`evaluate_within` for several evaluations (the oracle's batch of decisions): made
        in order in the caller's ledger write, each made or refused on its own as in
        `evaluate_many`; what the caller writes beside them commits with them or not at
        all. Approvals come with their computation (or are computed in the write)."""
        require_role(actor, "writer")
        outcomes, live = self._checked(requests)
        if live:
            applied = await self._apply(write, requests, outcomes, live, actor, self._now(), {})
            await self._replies(write.session, applied)
        return outcomes

    async def _evaluate_batch(
        self, actor: Hashable, requests: list[EvaluationRequest]
    ) -> list[EvaluationOutcome]:
        assert isinstance(actor, Principal)
        return await self.evaluate_many(requests, actor)

    @classmethod
    def _checked(
        cls, requests: Sequence[EvaluationRequest]
    ) -> tuple[list[EvaluationOutcome], list[int]]:
        """An outcome per request, those whose own fields are wrong already refused, and the
        indexes of the others (the ones to make)."""
        outcomes = [EvaluationOutcome(request.claim) for request in requests]
        live: list[int] = []
        for index, request in enumerate(requests):
            try:
                cls._check_request(request)
            except ServiceError as error:
                outcomes[index].error = error
            else:
                live.append(index)
        return outcomes, live

    @staticmethod
    def _check_request(request: EvaluationRequest) -> None:
        """The evaluation's own fields, before anything is read."""
        problems = Problems()
        status, reason = request.status, request.reason
        if status not in OUTCOMES:
            problems.add("status", f"expected one of {', '.join(OUTCOMES)}")
        if reason is not None and (not isinstance(reason, str) or not _REASON.match(reason)):
            problems.add("reason", "1 to 1000 characters, not starting with a space")
        if status != APPROVED and reason is None:
            problems.add("reason", f"a {status} evaluation says why")
        if request.amount is not None:
            problems.add(
                "amount",
                "credits follow from the methodology: an approval records what it computes "
                "from the stove's telemetry; leave amount out",
            )
        problems.raise_if_any("The evaluation is invalid.")

    async def _apply(
        self,
        write: LedgerWrite,
        requests: Sequence[EvaluationRequest],
        outcomes: list[EvaluationOutcome],
        live: list[int],
        actor: Principal,
        now: datetime,
        prepared: dict[str, _Prepared],
        compute: bool = False,
    ) -> list[_Applied]:
        """The evaluations made under the ledger's turn: every row they need read (and
        locked) at once, each evaluation checked and made in order. `compute`: the
        approvals' credits not given are computed here, from the locked rows, in the
        write's own transaction (only where it is a snapshot: Dialect.write_is_snapshot)."""
        session = write.session
        rows = await self._claim_rows(session, [requests[i].claim for i in live])
        approving = {requests[i].claim for i in live if requests[i].status == APPROVED}
        if compute:
            asked = {requests[i].claim for i in live if requests[i].computation is None}
            prepared = await self._computed(
                session,
                [
                    (
                        c.id,
                        c.collection_id,
                        c.asset_did,
                        c.data,
                        c.status,
                        of.protocol_did,
                        of.project_did,
                    )
                    for c, of in rows.values()
                    if c.id in approving and c.id in asked
                ],
                now,
            )
        dids: list[str] = []
        for claim, collection in rows.values():
            dids += [collection.project_did, *collection.evaluators]
            if claim.id in approving and claim.asset_did:
                dids.append(claim.asset_did)
        domains = await self._domains(session, dids)
        assets = [c.asset_did for c, _ in rows.values() if c.id in approving and c.asset_did]
        spans_of = self._spans(requests, live, rows, prepared)
        credited = await Credited.load(
            session,
            assets,
            [collection.project_did for c, collection in rows.values() if c.id in approving],
            [span for spans in spans_of.values() for span in spans],
            {
                did: device_identity(did, domains[did].properties)
                for did in assets
                if did in domains
            },
            spans_of,
        )
        turn = _Turn(write, domains, credited)
        applied: list[_Applied] = []
        for index in live:
            request, outcome = requests[index], outcomes[index]
            try:
                found = rows.get(request.claim)
                if found is None:
                    raise NotFound(f"No claim {request.claim!r}.")
                applied.append(
                    await self._evaluate_one(
                        turn, request, outcome, found, actor, now, prepared.get(request.claim)
                    )
                )
            except ServiceError as error:
                outcome.error = error
        await turn.store()
        return applied

    @staticmethod
    def _spans(
        requests: Sequence[EvaluationRequest],
        live: list[int],
        rows: dict[str, tuple[Claim, ClaimCollection]],
        prepared: dict[str, _Prepared],
    ) -> dict[str, set[tuple[date, date]]]:
        """The days each stove's approvals' credits cover, as far as known before the turn:
        what double counting is checked over (stove -> (first, last) spans)."""
        spans: dict[str, set[tuple[date, date]]] = {}
        for index in live:
            request = requests[index]
            found = rows.get(request.claim)
            if request.status != APPROVED or found is None or found[0].asset_did is None:
                continue
            stove = found[0].asset_did
            computed = request.computation or getattr(
                prepared.get(request.claim), "computation", None
            )
            if computed is not None:
                spans.setdefault(stove, set()).add((computed.start, computed.end))
                continue
            try:
                spans.setdefault(stove, set()).add(claim_days(found[0].data, FAR_FUTURE))
            except NotComputable:
                continue
        return spans

    async def _evaluate_one(
        self,
        turn: _Turn,
        request: EvaluationRequest,
        outcome: EvaluationOutcome,
        found: tuple[Claim, ClaimCollection],
        actor: Principal,
        now: datetime,
        prepared: _Prepared | None,
    ) -> _Applied:
        """One evaluation: every check first (a refusal leaves no trace), then its rows."""
        write, domains, credited = turn.write, turn.domains, turn.credited
        claim, collection = found
        status, reason, computation = request.status, request.reason, request.computation
        project = _verified_project(
            domains.get(collection.project_did), collection.project_did, "evaluate claims"
        )
        if status == APPROVED and claim.asset_did is not None:
            _verified_asset(domains.get(claim.asset_did), claim.asset_did)
        evaluator = self._evaluator(domains, collection, actor, request.oracle)
        if claim.status not in EVALUABLE:
            raise Conflict(
                f"Claim {claim.id} is {claim.status}; only pending or flagged claims "
                "can be evaluated."
            )
        if claim.status == FLAGGED and reason is None:
            raise Invalid(
                "Overriding a flagged claim needs a recorded reason.",
                [FieldProblem("reason", "say why the flag is overridden")],
            )
        protocol = await self._protocols.get(collection.protocol_did)
        token = protocol.effective_token_class
        if status == APPROVED and token is not None and computation is None:
            try:
                if prepared is not None and prepared.fits(claim, collection):
                    computation = prepared.result()
                else:  # not computed ahead (or the claim changed meanwhile): now, read
                    # in a snapshot of its own as ahead (the write's reads on PostgreSQL
                    # see each statement's newest commit)
                    async with read_snapshot(self._sessions) as read:
                        computation = await compute_claim(
                            read, claim, protocol.effective_methodology, token, project.did, now
                        )
            except NotComputable as error:
                raise Invalid(
                    "Credits follow from the methodology, and it cannot compute this "
                    f"claim: {error.reason}. Flag or reject it instead.",
                    [FieldProblem("status", error.reason)],
                ) from None
        if status != APPROVED or token is None:
            computation = None
        # A stove's claim (a project's monitoring period excluded credited stoves when it
        # computed). Checked under the ledger's turn, so no other approval races it.
        if isinstance(computation, ClaimComputation) and claim.asset_did is not None:
            doubled = credited.doubled(claim, project.did, computation)
            if doubled:
                raise DoubleCounting(
                    f"Approving claim {claim.id} would credit its stove twice: "
                    f"{doubled[0]}. Reject it instead."
                )
        # Checked: from here on the evaluation is made.
        turn.claims.append(claim)
        turn.collections[collection.id] = collection
        amount = computation.amount if computation is not None else None
        before = claim.status
        self._count(collection, claim.status, status)
        claim.status, claim.oracle, claim.reason = status, evaluator, reason
        claim.amount, claim.evaluated_at = amount, now
        if isinstance(computation, ClaimComputation):  # kept for the evidence bundle
            claim.inputs = orjson.dumps(claim_inputs(computation)).decode()
        collection.updated_at = now
        evaluation = {
            "claim_id": claim.id,
            "oracle": evaluator,
            "actor": actor.did,
            "status": status,
            "reason": reason,
            "amount": amount,
            "created_at": now,
        }
        turn.evaluations.append(evaluation)
        subject = claim.asset_did or project.did
        credential = None
        if status == APPROVED:
            turn.days += credited.add(
                claim,
                project.did,
                computation if isinstance(computation, ClaimComputation) else None,
            )
            credential = self._approve(turn, claim, collection, project, protocol, now, computation)
            outcome.credential = credential["id"]
        view = claim_view(claim)
        # Caused by the claim's submission (claims submitted before events had causes
        # name none: their evaluation starts a chain).
        cause = Cause.root(claim.submitted_event) if claim.submitted_event else None
        await write.append(
            "claims.evaluate",
            subject,
            actor.did,
            {"claim": view, "credential": credential["id"] if credential else None},
            cause=cause,
        )
        if computation is not None and computation.amount > 0:
            outcome.token = computation.token  # minted by its period's issuance, not here
        return _Applied(outcome, claim, evaluation, before)

    async def _replies(self, session: AsyncSession, applied: list[_Applied]) -> None:
        """Each evaluated claim with its evaluations, read in the write's own transaction
        (stored by now, this one's included). A pending claim had no evaluation before this
        one, so there is nothing to read."""
        await session.flush()
        earlier = await _evaluations_of(
            session, [a.claim.id for a in applied if a.before != PENDING]
        )
        for item in applied:
            if item.before == PENDING:
                history: list[Any] = [SimpleNamespace(**item.evaluation)]
            else:
                history = earlier.get(item.claim.id, [])
            item.outcome.reply = claim_view(item.claim, history)

    async def _prepare(self, claim_ids: list[str], now: datetime) -> dict[str, _Prepared]:
        """The claims' credits, computed outside the ledger's turn in a session of its own
        (a claim with nothing to compute is left out: the turn finds out why)."""
        wanted = sorted({c for c in claim_ids if isinstance(c, str) and CLAIM_ID.match(c)})
        if not wanted:
            return {}
        # One snapshot: the figures and the readings an approval keeps as behind them agree.
        async with read_snapshot(self._sessions) as session:
            rows: list[Any] = []
            for offset in range(0, len(wanted), _CHUNK):
                rows += await session.execute(
                    _TO_PREPARE, {"ids": wanted[offset : offset + _CHUNK]}
                )
            return await self._computed(session, rows, now)

    async def _computed(
        self, session: AsyncSession, rows: Sequence[Any], now: datetime
    ) -> dict[str, _Prepared]:
        """The credits of the claims `rows` (id, collection, asset, data, status, protocol,
        project), computed in `session`, which must read one state of the database."""
        found: dict[str, _Prepared] = {}
        ids: list[str] = []
        jobs: list[ClaimJob] = []
        for claim_id, collection, asset, data, status, protocol_did, project in rows:
            if status not in EVALUABLE:
                continue
            protocol = await self._protocols.get(protocol_did)
            token = protocol.effective_token_class
            if token is None:
                continue
            found[claim_id] = _Prepared(collection, asset, data, protocol_did, project)
            ids.append(claim_id)
            jobs.append(ClaimJob(asset, data, protocol.effective_methodology, token, project))
        results = await compute_claims(session, jobs, now) if jobs else []
        for claim_id, result in zip(ids, results, strict=True):
            if isinstance(result, NotComputable):
                found[claim_id].error = result
            else:
                found[claim_id].computation = result
        return found

    @staticmethod
    async def _claim_rows(
        session: AsyncSession, claim_ids: list[str]
    ) -> dict[str, tuple[Claim, ClaimCollection]]:
        """The claims and their collections, locked (in id order), a statement per chunk:
        plain rows with a Claim's and a ClaimCollection's attributes, one object per
        collection (its counters change with each of its claims), written by `_Turn.store`.
        A claim has no `inputs` until its evaluation computes them."""
        wanted = sorted({c for c in claim_ids if isinstance(c, str)})
        found: dict[str, tuple[Any, Any]] = {}  # rows standing for (Claim, ClaimCollection)
        collections: dict[int, Any] = {}
        width = len(_CLAIM_FIELDS)
        for offset in range(0, len(wanted), _CHUNK):
            rows = await session.execute(_CLAIMS_LOCKED, {"ids": wanted[offset : offset + _CHUNK]})
            for row in rows:
                claim = SimpleNamespace(**dict(zip(_CLAIM_FIELDS, row[:width], strict=True)))
                claim.inputs = None
                collection = collections.get(claim.collection_id)
                if collection is None:
                    collection = SimpleNamespace(
                        **dict(zip(_COLLECTION_FIELDS, row[width:], strict=True))
                    )
                    collections[collection.id] = collection
                found[claim.id] = (claim, collection)
        return found

    @staticmethod
    async def _domains(session: AsyncSession, dids: list[str]) -> dict[str, Domain]:
        """The evaluation's project, stove and evaluator oracles in one statement, locked
        (in DID order): a revocation executing now waits for the approval, or it for it."""
        wanted = sorted({did for did in dids if is_did(did)})
        rows = await session.scalars(_DOMAINS_LOCKED, {"dids": wanted})
        return {row.did: row for row in rows}

    @staticmethod
    def _evaluator(
        domains: dict[str, Domain],
        collection: ClaimCollection,
        actor: Principal,
        oracle: str | None,
    ) -> str:
        """The oracle this evaluation is made for: the caller is it, or controls it."""
        eligible = {
            row.did
            for did in collection.evaluators
            if (row := domains.get(did)) is not None
            and row.status == ACTIVE
            and (actor.did == row.did or actor.did in row.controller)
        }
        candidates = [did for did in collection.evaluators if did in eligible]
        if oracle is not None:
            if oracle not in candidates:
                raise Forbidden(f"{actor.did} may not evaluate for {oracle} in this collection.")
            return oracle
        if not candidates:
            raise Forbidden(
                f"Only the evaluators of claim collection {collection.id} (oracles "
                f"{', '.join(collection.evaluators)}) or their controllers may evaluate."
            )
        if len(candidates) > 1:
            raise Invalid(
                "You control several of this collection's oracles; name one.",
                [FieldProblem("oracle", ", ".join(candidates))],
            )
        return candidates[0]

    @staticmethod
    def _count(collection: ClaimCollection, before: str, after: str) -> None:
        if before == PENDING:
            collection.evaluated += 1
        else:  # a flagged claim evaluated again
            collection.flagged -= 1
        setattr(collection, after, getattr(collection, after) + 1)

    def _approve(
        self,
        turn: _Turn,
        claim: Claim,
        collection: ClaimCollection,
        project: Domain,
        protocol: ProtocolView,
        now: datetime,
        computation: ClaimComputation | None,
    ) -> dict[str, Any]:
        evaluation: dict[str, Any] = {
            "status": APPROVED,
            "oracle": claim.oracle,
            "evaluatedAt": rfc3339(now),
        }
        if computation is not None:
            evaluation["amount"] = computation.amount
            evaluation["tokenClass"] = computation.token
            evaluation["decimals"] = computation.decimals
            # The whole calculation, so the credential alone lets anyone recompute it.
            evaluation["calculation"] = computation.calculation()
        credential, row = self._credentials.issue(
            claim.id,
            claim.asset_did or project.did,
            CREDENTIAL_TYPE,
            {
                "claim": {
                    "id": claim.id,
                    "collection": str(collection.id),
                    "protocol": protocol.did,
                    "project": project.did,
                    "agent": claim.agent,
                    "submittedAt": rfc3339(claim.submitted_at),
                    "data": claim.data,
                },
                "evaluation": evaluation,
            },
            now,
        )
        claim.credential_id = credential["id"]
        turn.credentials.append(row)
        return credential


def credit_owner(claim: Claim, project: Domain, asset: Domain | None) -> str:
    """Who an approved claim's credits go to at issuance: the household owning its stove,
    else the stove's first controller; the project's first controller when the claim names
    no stove (`asset`: the claim's stove as read at the period's submission)."""
    if claim.asset_did:
        if asset is not None and asset.owner_customer_id:
            return customer_did(asset.owner_customer_id)  # the household owning it
        if asset is not None and asset.controller:
            return asset.controller[0]
    return project.controller[0]


class ClaimViews:
    """Reading claims: one with its evaluations, pages by filter, Cosmos-style windows,
    an approved claim's credential."""

    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], credentials: CredentialService
    ) -> None:
        self._sessions = sessions
        self._credentials = credentials

    async def claim(self, claim_id: str) -> dict[str, Any]:
        async with self._sessions() as session:
            row = await session.get(Claim, claim_id) if CLAIM_ID.match(claim_id) else None
            if row is None:
                raise NotFound(f"No claim {claim_id!r}.")
            evaluations = list(
                await session.scalars(
                    select(Evaluation)
                    .where(Evaluation.claim_id == claim_id)
                    .order_by(Evaluation.id)
                )
            )
        return claim_view(row, evaluations)

    async def claims(
        self, where: ClaimFilter, cursor: str | None, limit: int
    ) -> Page[dict[str, Any]]:
        after = decode_cursor(cursor, Claim.seq)
        if where.status is not None and where.status not in STATUSES:
            raise Invalid("Unknown claim status.", [FieldProblem("status", ", ".join(STATUSES))])
        query = select(Claim).where(Claim.seq > after)
        if where.collection is not None:
            query = query.where(Claim.collection_id == where.collection)
        if where.status is not None:
            query = query.where(Claim.status == where.status)
        if where.agent is not None:
            query = query.where(Claim.agent == where.agent)
        if where.asset is not None:
            query = query.where(Claim.asset_did == where.asset)
        async with self._sessions() as session:
            rows = list(await session.scalars(query.order_by(Claim.seq).limit(limit + 1)))
        rows, next_cursor = split_page(rows, limit, lambda row: row.seq)
        return Page([claim_view(r) for r in rows], next_cursor)

    async def claims_window(self, window: Window) -> WindowPage[dict[str, Any]]:
        """A Cosmos-style page of claims, each with its evaluation history."""
        async with self._sessions() as session:
            page = await fetch_window(session, select(Claim), Claim.seq, window)
            history = await _evaluations_of(session, [row.id for row in page.items])
        views = [claim_view(row, history.get(row.id, [])) for row in page.items]
        return WindowPage(views, page.next_key, page.total)

    async def credential_of(self, claim_id: str) -> dict[str, Any]:
        await self.claim(claim_id)  # NotFound for an unknown claim
        return await self._credentials.of_claim(claim_id)


class ClaimService:
    """The claims context, in four parts of one job each, built together over the same
    ledger: `collections`, `submissions`, `evaluations` and `views`."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        ledger: Ledger,
        protocols: ProtocolService,
        credentials: CredentialService,
        clock: Callable[[], datetime] = utcnow,
        batch_max: int = 1000,
        linger: float = 0.0,
    ) -> None:
        self.collections = ClaimCollections(sessions, ledger, protocols, clock)
        self.submissions = ClaimSubmissions(ledger, protocols, clock, linger)
        self.evaluations = ClaimEvaluations(
            sessions, ledger, protocols, credentials, clock, batch_max, linger
        )
        self.views = ClaimViews(sessions, credentials)
