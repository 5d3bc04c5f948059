"""A household's own stove, as its owner asks about it: is it on, when did it last cook, how
much this month; and the problems households report, which are the support queue.

Health is read from telemetry's live state (the device's last reading and latest value of
each field) and its month rollups, never from raw readings: one small read per question.
A problem report is a row and its `stove.problem_reported` event, in one transaction (the
outbox: a crash never loses or invents one). The same open problem reported again (same
stove, same kind) is the one report: the household gets its reference back, no new event.

A programme's support team works the queue: resolving a problem (open -> resolved, once)
records who and why, and its `stove.problem_resolved` event, in one transaction. The same
problem reported after that is a new problem with a new reference.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import StoveProblem, TelemetryDevice, TelemetryRollup, rollup_figures
from twinhub.db.visibility import Viewer, domain_visible
from twinhub.events.store import record_event
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import Conflict, FieldProblem, Invalid, NotFound
from twinhub.kernel.identifiers import customer_did
from twinhub.mrv.rollups import ENERGY as ENERGY_FIELD
from twinhub.mrv.rollups import SESSIONS as SESSIONS_STARTED
from twinhub.mrv.rollups import bucket_of
from twinhub.services.paging import Page, decode_cursor, split_page
from twinhub.services.stoves import StoveService, StoveView

PROBLEM_KINDS = ("noStart", "smoke", "broken", "meter", "other")
OPEN, RESOLVED = "open", "resolved"
PROBLEM_STATUSES = (OPEN, RESOLVED)
PROBLEM_EVENT = "stove.problem_reported"
RESOLVED_EVENT = "stove.problem_resolved"
NOTE_MAX = 500  # characters of a resolution note
SESSION_FIELD = "session"  # the stove protocol's start | end of a cooking session


@dataclass(frozen=True, slots=True)
class StoveHealth:
    online: bool
    last_seen: datetime | None  # the stove's newest reading
    last_cooked: datetime | None  # the newest reading that started or ended a session
    month_sessions: int  # cooking sessions started this calendar month (UTC)
    month_kwh: float


@dataclass(frozen=True, slots=True)
class ProblemView:
    reference: str
    stove: str
    customer_id: str
    kind: str
    status: str
    reported_at: datetime
    resolved_at: datetime | None = None
    resolved_by: str | None = None  # the DID of who resolved it
    note: str | None = None  # why, in the resolver's words

    def as_json(self) -> dict[str, Any]:
        """The problem as events and the API show it: a reported problem as its
        `stove.problem_reported` event carries it, a resolved one with the resolution."""
        shown: dict[str, Any] = {
            "reference": self.reference,
            "stove": self.stove,
            "customer": customer_did(self.customer_id),
            "kind": self.kind,
            "status": self.status,
            "reportedAt": self.reported_at.isoformat(),
        }
        if self.status == RESOLVED:
            shown["resolvedAt"] = self.resolved_at.isoformat() if self.resolved_at else None
            shown["resolvedBy"] = self.resolved_by
            shown["note"] = self.note
        return shown


async def owned_stoves(stoves: StoveService, customer_id: str) -> list[StoveView]:
    """The stoves that belong to a customer. The one place Stove Status asks who owns a
    stove, so that a change of the ownership rule (ownerCustomerId) lands here alone."""
    return await stoves.stoves_of(customer_id)


def _view(row: StoveProblem) -> ProblemView:
    return ProblemView(
        row.reference,
        row.stove_did,
        row.customer_id,
        row.kind,
        row.status,
        row.reported_at,
        row.closed_at,
        row.resolved_by,
        row.resolution_note,
    )


def _note(note: str) -> str:
    """A resolution note: 1 to NOTE_MAX characters once trimmed."""
    text = note.strip() if isinstance(note, str) else ""
    if not 1 <= len(text) <= NOTE_MAX:
        raise Invalid(
            "Say how the problem was resolved.",
            [FieldProblem("note", f"1 to {NOTE_MAX} characters")],
        )
    return text


class StoveCare:
    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], offline_after_seconds: float
    ) -> None:
        self._sessions = sessions
        self._offline_after = timedelta(seconds=offline_after_seconds)

    async def health(self, did: str, now: datetime | None = None) -> StoveHealth:
        now = now or datetime.now(UTC)
        month = bucket_of(now, "month")
        async with self._sessions() as session:
            device = await session.scalar(select(TelemetryDevice).where(TelemetryDevice.did == did))
            row = (
                await session.execute(
                    select(TelemetryRollup.fields, TelemetryRollup.cells).where(
                        TelemetryRollup.scope == did,
                        TelemetryRollup.interval == "month",
                        TelemetryRollup.bucket == month,
                    )
                )
            ).first()
            figures = rollup_figures(*row) if row is not None else {}
            totals = {
                name: float(figures[name][1])
                for name in (ENERGY_FIELD, SESSIONS_STARTED)
                if name in figures
            }
        last_seen = device.last_time if device else None
        last_cooked = None
        cooking = (device.latest or {}).get(SESSION_FIELD) if device else None
        if isinstance(cooking, dict) and isinstance(cooking.get("time"), str):
            last_cooked = datetime.fromisoformat(cooking["time"])
        return StoveHealth(
            online=last_seen is not None and now - last_seen < self._offline_after,
            last_seen=last_seen,
            last_cooked=last_cooked,
            month_sessions=round(totals.get(SESSIONS_STARTED, 0)),
            month_kwh=totals.get(ENERGY_FIELD, 0.0),
        )

    async def report_problem(self, customer_id: str, stove: str, kind: str) -> ProblemView:
        """Record a problem (the caller has checked the stove is the customer's)."""
        if kind not in PROBLEM_KINDS:
            raise Invalid("Unknown problem kind.", [FieldProblem("kind", ", ".join(PROBLEM_KINDS))])
        for _ in range(2):  # the second pass finds the report that won a race
            try:
                return await self._open_problem(customer_id, stove, kind)
            except IntegrityError:  # uq_stove_problems_open: the same report just opened
                continue
        raise Conflict("The problem was reported twice at once; try again.")

    async def _open_problem(self, customer_id: str, stove: str, kind: str) -> ProblemView:
        """The open problem of this stove and kind, opened now if there is none."""
        async with self._sessions() as session, session.begin():
            held = await session.scalar(
                select(StoveProblem).where(
                    StoveProblem.stove_did == stove,
                    StoveProblem.kind == kind,
                    StoveProblem.status == OPEN,
                )
            )
            if held is not None:
                return _view(held)
            row = StoveProblem(
                reference=secrets.token_hex(4),
                stove_did=stove,
                customer_id=customer_id,
                kind=kind,
                status=OPEN,
                reported_at=utcnow(),
            )
            session.add(row)
            view = _view(row)
            record_event(session, PROBLEM_EVENT, stove, customer_did(customer_id), view.as_json())
        return view

    async def open_problems(self, viewer: Viewer, limit: int = 50) -> list[ProblemView]:
        """The support queue: open problems `viewer` may see, newest first."""
        async with self._sessions() as session:
            rows = await session.scalars(
                select(StoveProblem)
                .where(StoveProblem.status == OPEN, domain_visible(StoveProblem.stove_did, viewer))
                .order_by(StoveProblem.reported_at.desc(), StoveProblem.id.desc())
                .limit(limit)
            )
            return [_view(row) for row in rows]

    async def problems(
        self,
        status: str | None = None,
        stove: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
        *,
        viewer: Viewer,
    ) -> Page[ProblemView]:
        """The support queue as the API and CLI page it: oldest first (the order to work
        it in), optionally only one status or one stove's; `cursor` continues a page. Only
        the problems of stoves `viewer` may see (db.visibility)."""
        if status is not None and status not in PROBLEM_STATUSES:
            raise Invalid(
                "Unknown problem status.", [FieldProblem("status", " or ".join(PROBLEM_STATUSES))]
            )
        query = select(StoveProblem).where(
            StoveProblem.id > decode_cursor(cursor, StoveProblem.id),
            domain_visible(StoveProblem.stove_did, viewer),
        )
        if status is not None:
            query = query.where(StoveProblem.status == status)
        if stove is not None:
            query = query.where(StoveProblem.stove_did == stove)
        async with self._sessions() as session:
            rows = list(await session.scalars(query.order_by(StoveProblem.id).limit(limit + 1)))
        rows, next_cursor = split_page(rows, limit, lambda row: row.id)
        return Page([_view(row) for row in rows], next_cursor)

    async def resolve_problem(
        self, reference: str, actor_did: str, note: str, *, viewer: Viewer
    ) -> ProblemView:
        """Resolve an open problem: who did and why, with its `stove.problem_resolved` event
        in the same transaction. NotFound for an unknown reference (or one of a stove
        `viewer` may not see); Conflict when it is already resolved (also when two
        operators resolve it at once: one wins)."""
        text = _note(note)
        mine = (StoveProblem.reference == reference, domain_visible(StoveProblem.stove_did, viewer))
        async with self._sessions() as session, session.begin():
            # One conditional UPDATE: of two concurrent resolutions only one changes the row.
            changed = await session.execute(
                update(StoveProblem)
                .where(*mine, StoveProblem.status == OPEN)
                .values(
                    status=RESOLVED,
                    closed_at=utcnow(),
                    resolved_by=actor_did,
                    resolution_note=text,
                )
                .execution_options(synchronize_session=False)
            )
            row = await session.scalar(
                select(StoveProblem).where(*mine).execution_options(populate_existing=True)
            )
            if row is None:
                raise NotFound(f"No stove problem {reference}.")
            if not changed.rowcount:  # type: ignore[attr-defined]
                raise Conflict(f"Stove problem {reference} is already {row.status}.")
            view = _view(row)
            record_event(session, RESOLVED_EVENT, row.stove_did, actor_did, view.as_json())
        return view
