"""The support queue: problems households reported about their stoves over USSD (Stove
Status), for a programme's support team to work. Reading the queue needs the reader role
and shows the problems of the stoves the caller's organisation may see (db.visibility: the
same problems are the `stove.problem_reported` events it reads); resolving one needs the
writer role and such a stove, is recorded with who resolved it and why, and raises
`stove.problem_resolved`. The write log (web/audit.py) logs each resolution.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, Field

from twinhub.db.visibility import viewer_of
from twinhub.kernel.identifiers import customer_did
from twinhub.registry.auth import Reader, Writer
from twinhub.registry.errors import ERROR_RESPONSES
from twinhub.registry.params import NO_NUL, PROBLEM_REFERENCE_PATTERN, Cursor, documented
from twinhub.registry.routes import page_size
from twinhub.registry.schemas import Body
from twinhub.services.stove_care import NOTE_MAX, ProblemView, StoveCare

router = APIRouter(prefix="/v1/support", responses=ERROR_RESPONSES, tags=["support"])
Reference = Annotated[
    str,
    Path(pattern=PROBLEM_REFERENCE_PATTERN, description="The problem's reference (8 hex digits)"),
]
Status = Annotated[
    str | None,
    Query(
        description="open or resolved; absent: both",
        json_schema_extra=documented(pattern=r"^(?:open|resolved)?$"),
    ),
]

Stove = Annotated[
    str | None,
    Query(description="Only this stove's (its DID)", json_schema_extra=documented(pattern=NO_NUL)),
]


class ProblemOut(BaseModel):
    reference: str
    stove: str = Field(description="The stove's DID")
    customer: str = Field(description="The reporting household's DID")
    kind: str = Field(description="noStart, smoke, broken, meter or other")
    status: str = Field(description="open or resolved")
    reportedAt: str
    resolvedAt: str | None = Field(None, description="null while open")
    resolvedBy: str | None = Field(None, description="The DID of who resolved it")
    note: str | None = Field(None, description="How it was resolved")


class ProblemsOut(BaseModel):
    items: list[ProblemOut]
    nextCursor: str | None = Field(description="The next page; null on the last")


class ResolveIn(Body):
    note: str = Field(
        min_length=1, max_length=NOTE_MAX, description="How the problem was resolved."
    )


def _care(request: Request) -> StoveCare:
    care: StoveCare = request.app.state.platform.stove_care
    return care


def _out(problem: ProblemView) -> ProblemOut:
    return ProblemOut(
        reference=problem.reference,
        stove=problem.stove,
        customer=customer_did(problem.customer_id),
        kind=problem.kind,
        status=problem.status,
        reportedAt=problem.reported_at.isoformat(),
        resolvedAt=problem.resolved_at.isoformat() if problem.resolved_at else None,
        resolvedBy=problem.resolved_by,
        note=problem.note,
    )


@router.get("/problems", summary="Reported stove problems, oldest first (reader)")
async def list_problems(
    request: Request,
    caller: Reader,
    status: Status = None,
    stove: Stove = None,
    cursor: Cursor = None,
    limit: Annotated[int | None, Query(ge=1)] = None,
) -> ProblemsOut:
    page = await _care(request).problems(
        status or None, stove or None, cursor, page_size(request, limit), viewer=viewer_of(caller)
    )
    return ProblemsOut(items=[_out(p) for p in page.items], nextCursor=page.next_cursor)


@router.post(
    "/problems/{reference}/resolve",
    summary="Resolve an open stove problem, saying how (writer)",
    responses={409: {"description": "conflict: the problem is resolved already"}},
)
async def resolve_problem(
    request: Request, caller: Writer, reference: Reference, body: ResolveIn
) -> ProblemOut:
    care = _care(request)
    return _out(
        await care.resolve_problem(reference, caller.did, body.note, viewer=viewer_of(caller))
    )
