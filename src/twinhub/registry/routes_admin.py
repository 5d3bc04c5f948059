"""Operator routes (admin keys only): USSD PIN lock-outs, to see and lift them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from pydantic import BaseModel
from starlette.responses import Response

from twinhub.kernel.errors import NotFound
from twinhub.kernel.principals import require_role
from twinhub.registry.auth import Reader
from twinhub.registry.errors import ERROR_RESPONSES

router = APIRouter(prefix="/v1/admin", responses=ERROR_RESPONSES, tags=["admin"])


class LockoutOut(BaseModel):
    key: str
    failedAttempts: int
    lockouts: int
    lockedUntil: str | None


class LockoutsOut(BaseModel):
    items: list[LockoutOut]


@router.get("/lockouts", summary="PIN lock-outs in force (admin)")
async def list_lockouts(request: Request, caller: Reader) -> LockoutsOut:
    require_role(caller, "admin")
    locks = await request.app.state.platform.customers.lockouts()
    return LockoutsOut(
        items=[
            LockoutOut(
                key=lock.key,
                failedAttempts=lock.failed_attempts,
                lockouts=lock.lockouts,
                lockedUntil=lock.locked_until.isoformat() if lock.locked_until else None,
            )
            for lock in locks
        ]
    )


@router.delete(
    "/lockouts/{target}",
    status_code=204,
    summary="Lift the lock-outs of a customer ID or a phone number (admin)",
)
async def lift_lockout(
    request: Request,
    caller: Reader,
    target: Annotated[str, Path(pattern=r"^(\+[1-9][0-9]{6,14}|[0-9]{8})$")],
) -> Response:
    require_role(caller, "admin")
    if not await request.app.state.platform.customers.unlock(target):
        raise NotFound(f"No lock-out for {target}.")
    return Response(status_code=204)
