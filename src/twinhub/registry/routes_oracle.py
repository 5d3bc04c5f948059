"""Oracle routes: a claim's signed oracle decision, a project's monitoring periods and their
reports (JSON or CSV)."""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from pydantic import Field
from starlette.responses import JSONResponse, Response

from twinhub.platform import Platform
from twinhub.registry.auth import Caller, Reader, WorkflowReader
from twinhub.registry.errors import ERROR_RESPONSES
from twinhub.registry.routes import DID_PATH
from twinhub.registry.schemas import Body

router = APIRouter(prefix="/v1", responses=ERROR_RESPONSES)
PeriodId = Annotated[int, Path(ge=1, le=2**31 - 1)]


def _platform(request: Request) -> Platform:
    return request.app.state.platform


class PeriodIn(Body):
    from_: date = Field(alias="from", description="First day of the period (UTC), inclusive.")
    to: date = Field(description="Last day of the period (UTC), inclusive; before today.")


@router.get(
    "/claims/{claim_id}/oracle-decision",
    tags=["claims"],
    summary="The oracle's signed decision on a claim: outcome, reasons, inputs, methodology",
)
async def oracle_decision(
    request: Request,
    claim_id: Annotated[str, Path(min_length=1, max_length=100)],
    caller: Reader,
) -> dict[str, Any]:
    return await _platform(request).oracle.decision(claim_id)


@router.post(
    f"/domains/{DID_PATH}/monitoring-periods",
    tags=["claims"],
    summary="Compute (or recompute) a project's monitoring period as a draft: nothing minted",
    description="201 with the new draft (200: recomputed, or as frozen once submitted). A "
    "draft that outlasts ORACLE_DRAFT_WAIT_SECONDS (a large programme) carries on in the "
    "background: 202 with its job, whose `Location` shows its `progress` until its `state` "
    "is `done` (with its `period`) or `failed` (with the `error` this request would have "
    "answered). Asking again while it drafts answers the same job and starts nothing new.",
    responses={202: {"description": "Drafting in the background; poll the Location."}},
)
async def run_period(request: Request, did: str, body: PeriodIn, caller: Caller) -> Response:
    platform = _platform(request)
    # Answered well within the request's deadline, whatever the wait is set to.
    wait = min(
        platform.settings.oracle.draft_wait_seconds,
        0.75 * platform.settings.registry.request_timeout_seconds,
    )
    drafted = await platform.period_drafts.draft(did, body.from_, body.to, caller, wait)
    if drafted.job is not None:
        return JSONResponse(
            drafted.job,
            202,
            headers={
                "Location": f"/v1/domains/{did}/monitoring-periods/drafts/{drafted.job['id']}",
                "Retry-After": "2",
            },
        )
    assert drafted.period is not None
    return JSONResponse(
        drafted.period,
        201 if drafted.created else 200,
        headers={"Location": f"/v1/domains/{did}/monitoring-periods/{drafted.period['id']}"},
    )


@router.get(
    f"/domains/{DID_PATH}/monitoring-periods/drafts/{{job_id}}",
    tags=["claims"],
    summary="A period draft running in the background: its step and progress, then its period",
)
async def period_draft(
    request: Request,
    did: str,
    job_id: Annotated[str, Path(pattern=r"^[0-9a-f]{32}$")],
    caller: WorkflowReader,
) -> dict[str, Any]:
    return await _platform(request).period_drafts.job(did, job_id)


@router.get(f"/domains/{DID_PATH}/monitoring-periods", tags=["claims"])
async def list_periods(request: Request, did: str, caller: WorkflowReader) -> dict[str, Any]:
    return {"items": await _platform(request).monitoring.periods(did)}


@router.get(f"/domains/{DID_PATH}/monitoring-periods/{{period_id}}", tags=["claims"])
async def get_period(
    request: Request, did: str, period_id: PeriodId, caller: WorkflowReader
) -> dict[str, Any]:
    return await _platform(request).monitoring.period(did, period_id)


@router.get(
    f"/domains/{DID_PATH}/monitoring-periods/{{period_id}}/report",
    tags=["claims"],
    summary="The monitoring report an auditor checks (format=json or csv)",
)
async def period_report(
    request: Request,
    did: str,
    period_id: PeriodId,
    caller: WorkflowReader,
    format: Annotated[Literal["json", "csv"], Query()] = "json",
) -> Response:
    text = await _platform(request).monitoring.report(did, period_id, format)
    if format == "csv":
        return Response(text, media_type="text/csv; charset=utf-8")
    return Response(text, media_type="application/json")
