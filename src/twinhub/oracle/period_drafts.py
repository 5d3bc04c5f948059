"""Monitoring periods drafted in the background: a programme too large to draft within one
request's deadline (100,000 stoves x 30 days takes about two minutes, docs/operations.md)
is drafted anyway, and whoever asked can follow it.

A draft request starts the draft and waits for it a little (ORACLE_DRAFT_WAIT_SECONDS):
a draft done by then is answered as before (the period, 201 or 200), and so is any refusal.
Otherwise the request is answered with a draft job that carries on in this process, its
progress kept in the database (`period_drafts`) so that any worker answers for it, until it
ends with the period or with the error the request would have answered. A job whose
progress has not moved for ORACLE_DRAFT_STALE_SECONDS is reported stopped (its process
ended): drafting again is safe, as a draft is recomputed, never duplicated. Asking again
for a period whose draft is under way answers that job and starts nothing new.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import PeriodDraft
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import NotFound, ServiceError
from twinhub.kernel.principals import Principal
from twinhub.logging import get_logger
from twinhub.oracle.monitoring import MonitoringService
from twinhub.settings import OracleSettings

log = get_logger(__name__)

DRAFTING, DONE, FAILED = "drafting", "done", "failed"
_SAVE_EVERY_SECONDS = 1.0  # a job's progress is written at most this often
_STOPPED = {
    "code": "draft_stopped",
    "message": "The process drafting this period stopped before it ended; draft it again.",
    "details": [],
}


@dataclass
class _Job:
    """A draft under way in this process: its progress, kept in memory until the request
    that started it answers with the job; written to its row from then on."""

    id: str
    project: str
    start: date
    end: date
    actor: str
    created_at: datetime
    step: str = "starting"
    done: int = 0
    total: int = 0
    stored: bool = False  # the row exists (the request answered with the job)
    saved_at: float = 0.0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # The draft's end, for the requests waiting on it: set unless the row was made (then
    # the row says how it ended).
    result: asyncio.Future[tuple[dict[str, Any], bool]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    @property
    def key(self) -> tuple[str, date, date]:
        return self.project, self.start, self.end

    def row(self) -> PeriodDraft:
        """The job as its row stands now (made when the request answers with it)."""
        return PeriodDraft(
            id=self.id,
            project_did=self.project,
            start=self.start,
            end=self.end,
            actor=self.actor,
            state=DRAFTING,
            step=self.step,
            done=self.done,
            total=self.total,
            created_at=self.created_at,
            updated_at=utcnow(),
        )


@dataclass(frozen=True)
class Drafted:
    """What a draft request is answered with: the period (as `MonitoringService.run`
    answers), or the job still drafting it."""

    period: dict[str, Any] | None = None
    created: bool = False
    job: dict[str, Any] | None = None


class PeriodDrafts:
    """Drafts of monitoring periods, in the background when they outlast the wait."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        monitoring: MonitoringService,
        settings: OracleSettings,
    ) -> None:
        self._sessions = sessions
        self._monitoring = monitoring
        self._settings = settings
        self._tasks: set[asyncio.Task[None]] = set()
        self._running: dict[tuple[str, date, date], _Job] = {}  # by project and days

    async def draft(
        self, project: str, start: date, end: date, actor: Principal, wait: float
    ) -> Drafted:
        """Draft the period, waiting at most `wait` seconds for it: the period once done,
        a refusal raised as `run` raises it, or the job drafting it meanwhile. What is
        refused before anything is computed is refused at once, never as a job."""
        frozen = await self._monitoring.check_draft(project, start, end, actor)
        if frozen is not None:
            return Drafted(period=frozen)
        job = self._running.get((project, start, end))  # a retry, a double click
        if job is None:
            under_way = await self._under_way(project, start, end)
            if under_way is not None:  # another process drafts it
                return Drafted(job=job_view(under_way, self._stale_before()))
            job = self._running.get((project, start, end))
        if job is None:
            job = _Job(secrets.token_hex(16), project, start, end, actor.did, utcnow())
            self._running[job.key] = job
            task = asyncio.create_task(self._drafting(job, actor), name=f"draft-{job.id}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        result = job.result
        try:
            period, created = await asyncio.wait_for(asyncio.shield(result), wait)
        except TimeoutError:
            pass
        else:
            return Drafted(period=period, created=created)
        async with job.lock:  # the draft's end waits for the row to exist
            if not result.done():
                if not job.stored:
                    await self._store(job)
                return Drafted(job=job_view(job.row(), self._stale_before()))
        period, created = result.result()  # ended while the lock was taken
        return Drafted(period=period, created=created)

    async def job(self, project: str, job_id: str) -> dict[str, Any]:
        """A draft job of `project`, as it stands."""
        async with self._sessions() as session:
            row = await session.get(PeriodDraft, job_id) if len(job_id) == 32 else None
        if row is None or row.project_did != project:
            raise NotFound(f"No draft {job_id!r} of {project}.")
        return job_view(row, self._stale_before())

    async def recent(self, project: str, hours: float = 24.0) -> list[dict[str, Any]]:
        """`project`'s drafts under way and those that failed in the last `hours`, newest
        first: what its periods page shows above the periods."""
        since = utcnow() - timedelta(hours=hours)
        async with self._sessions() as session:
            rows = await session.scalars(
                select(PeriodDraft)
                .where(
                    PeriodDraft.project_did == project,
                    PeriodDraft.state != DONE,
                    PeriodDraft.created_at >= since,
                )
                .order_by(PeriodDraft.created_at.desc())
                .limit(10)
            )
            stale_before = self._stale_before()
            return [job_view(row, stale_before) for row in rows]

    async def stop(self) -> None:
        """Cancel the drafts under way (the process is stopping): their jobs read as
        stopped once stale, and a draft is simply asked for again."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _drafting(self, job: _Job, actor: Principal) -> None:
        """Run the draft; its end is the waiting requests' answer, or the job's row."""
        result = job.result

        async def progress(step: str, done: int, total: int) -> None:
            job.step, job.done, job.total = step, done, total
            if job.stored and time.monotonic() - job.saved_at >= _SAVE_EVERY_SECONDS:
                await self._save(job, {"step": step, "done": done, "total": total})

        try:
            outcome: BaseException | tuple[dict[str, Any], bool] = await self._monitoring.run(
                job.project, job.start, job.end, actor, progress
            )
        except asyncio.CancelledError:
            self._running.pop(job.key, None)
            if not result.done():
                result.cancel()
            raise
        except Exception as error:
            outcome = error
        async with job.lock:  # the request either has the row made, or reads `result`
            self._running.pop(job.key, None)
            if not job.stored:
                if isinstance(outcome, BaseException):
                    result.set_exception(outcome)
                else:
                    result.set_result(outcome)
                return
        await self._save(
            job, {"step": job.step, "done": job.done, "total": job.total} | _ended(job, outcome)
        )

    async def _store(self, job: _Job) -> None:
        async with self._sessions() as session, session.begin():
            session.add(job.row())
        job.stored, job.saved_at = True, time.monotonic()

    async def _save(self, job: _Job, values: dict[str, Any]) -> None:
        """Best effort for progress (the next step writes again); the end is retried by
        nobody, so a failure to write it is logged, and the job reads stopped once stale."""
        try:
            async with self._sessions() as session, session.begin():
                await session.execute(
                    update(PeriodDraft)
                    .where(PeriodDraft.id == job.id)
                    .values(**values, updated_at=utcnow())
                )
            job.saved_at = time.monotonic()
        except Exception as error:
            log.warning("period draft progress not stored", job=job.id, error=type(error).__name__)

    async def _under_way(self, project: str, start: date, end: date) -> PeriodDraft | None:
        async with self._sessions() as session:
            return (
                await session.scalars(
                    select(PeriodDraft)
                    .where(
                        PeriodDraft.project_did == project,
                        PeriodDraft.start == start,
                        PeriodDraft.end == end,
                        PeriodDraft.state == DRAFTING,
                        PeriodDraft.updated_at >= self._stale_before(),
                    )
                    .order_by(PeriodDraft.created_at.desc())
                    .limit(1)
                )
            ).first()

    def _stale_before(self) -> datetime:
        return utcnow() - timedelta(seconds=self._settings.draft_stale_seconds)


def job_view(row: PeriodDraft, stale_before: datetime) -> dict[str, Any]:
    """A draft job as the API shows it; one drafting past `stale_before` reads stopped."""
    state, error = row.state, orjson.loads(row.error) if row.error else None
    if state == DRAFTING and row.updated_at < stale_before:
        state, error = FAILED, _STOPPED
    return {
        "id": row.id,
        "project": row.project_did,
        "from": row.start.isoformat(),
        "to": row.end.isoformat(),
        "state": state,
        "step": row.step,
        "progress": {"done": row.done, "total": row.total},
        "period": row.period_id,
        "error": error,
        "createdAt": row.created_at.isoformat(),
        "updatedAt": row.updated_at.isoformat(),
    }


def _ended(job: _Job, outcome: BaseException | tuple[dict[str, Any], bool]) -> dict[str, Any]:
    """The job row's values once its draft has ended with `outcome`."""
    if isinstance(outcome, ServiceError):  # refused: what the request would have answered
        return {"state": FAILED, "error": orjson.dumps(outcome.fields()).decode()}
    if isinstance(outcome, BaseException):  # a fault, not the request's: logged, said so
        log.error(
            "period draft failed",
            project=job.project,
            job=job.id,
            error=type(outcome).__name__,
            exc_info=outcome,
        )
        fault = {
            "code": "draft_failed",
            "message": f"The draft failed ({type(outcome).__name__}); draft the period again.",
            "details": [],
        }
        return {"state": FAILED, "error": orjson.dumps(fault).decode()}
    period, _ = outcome
    return {"state": DONE, "step": "done", "period_id": period["id"]}
