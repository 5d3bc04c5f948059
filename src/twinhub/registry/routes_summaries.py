"""`GET /v1/domains/{did}/summary`: a project's or organisation's dashboard figures."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from twinhub.registry.auth import Reader
from twinhub.registry.errors import ERROR_RESPONSES
from twinhub.registry.params import Moment
from twinhub.registry.routes import DID_PATH

router = APIRouter(
    prefix="/v1", responses={c: ERROR_RESPONSES[c] for c in (400, 401, 403, 404, 422)}
)


@router.get(
    f"/domains/{DID_PATH}/summary",
    tags=["domains"],
    summary="Stoves by state, claims by status, credits issued and retired, telemetry per day",
)
async def domain_summary(
    request: Request,
    did: str,
    caller: Reader,
    start: Annotated[
        Moment | None, Query(alias="from", description="Start (inclusive); default: to - 30 days")
    ] = None,
    end: Annotated[
        Moment | None, Query(alias="to", description="End (exclusive); default: now")
    ] = None,
) -> dict[str, Any]:
    """Counted with aggregate queries, so nobody pages through claims to count them. The
    `telemetry` part is empty (`available: false`) until a telemetry store is wired in."""
    return await request.app.state.platform.summaries.summary(did, start, end)
