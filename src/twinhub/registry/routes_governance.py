"""Governance routes: groups, verification proposals, votes, execution."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from pydantic import Field
from starlette.responses import JSONResponse, Response

from twinhub.registry.auth import Reader, Writer
from twinhub.registry.errors import ERROR_RESPONSES
from twinhub.registry.idempotent import Created, idempotent
from twinhub.registry.routes import DID_PATH
from twinhub.registry.schemas import Body
from twinhub.services.governance import (
    EXECUTED,
    MAX_BATCH_LIST,
    VERIFY_BATCH,
    BatchSelection,
    GovernanceService,
    GroupSpec,
)

router = APIRouter(prefix="/v1", responses=ERROR_RESPONSES, tags=["governance"])
ProposalId = Annotated[int, Path(ge=1, le=2**31 - 1)]  # the column is a 32-bit integer


class MemberIn(Body):
    did: str
    weight: int = Field(1, ge=1, le=1_000_000)


class ThresholdIn(Body):
    kind: Literal["absolute_count", "absolute_percentage", "threshold_quorum"]
    value: float = Field(description="A weight (absolute_count) or a fraction (the others).")
    quorum: float | None = Field(None, description="threshold_quorum only: a fraction.")


class GroupIn(Body):
    id: str | None = Field(None, description="Slug of the new DID did:ixo:group/<id>.")
    name: str
    members: list[MemberIn] = Field(min_length=1)
    threshold: ThresholdIn
    votingPeriodSeconds: int = Field(7 * 86400)
    default: bool = Field(False, description="The deployment's default compliance group.")


class ProposalIn(Body):
    action: Literal["verify", "revoke"] = "verify"
    group: str | None = Field(None, description="Deciding group; the default one if absent.")
    evidence: dict[str, Any] = Field(default_factory=dict, description="The entity package.")


class BatchProposalIn(Body):
    group: str | None = Field(None, description="Deciding group; the default one if absent.")
    evidence: dict[str, Any] = Field(default_factory=dict, description="The batch's package.")
    protocol: str | None = Field(
        None, description="Only assets of this protocol, e.g. did:ixo:protocol/clean-cooking."
    )
    domains: list[str] | None = Field(
        None,
        max_length=MAX_BATCH_LIST,
        description="Only these DIDs (each an unverified active asset of the project); "
        "absent: every unverified active asset of the project (and protocol).",
    )


class VoteIn(Body):
    option: Literal["yes", "no", "abstain"]


def _governance(request: Request) -> GovernanceService:
    return request.app.state.platform.governance


@router.post("/governance/groups", status_code=201, summary="Create a governance group (admin)")
async def create_group(request: Request, body: GroupIn, caller: Writer) -> Response:
    async def run() -> Created:
        members: dict[str, int] = {}
        for member in body.members:
            members[member.did] = members.get(member.did, 0) + member.weight
        spec = GroupSpec(
            name=body.name,
            slug=body.id,
            members=members,
            threshold_kind=body.threshold.kind,
            threshold=body.threshold.value,
            quorum=body.threshold.quorum,
            voting_period_seconds=body.votingPeriodSeconds,
            is_default=body.default,
        )
        record = await _governance(request).create_group(spec, caller)
        return 201, record, f"/v1/governance/groups/{record['did']}"

    return await idempotent(request, caller, run)


@router.get(f"/governance/groups/{DID_PATH}")
async def get_group(request: Request, did: str, caller: Reader) -> dict[str, Any]:
    return await _governance(request).group(did)


@router.post(
    f"/domains/{DID_PATH}/verification-proposals",
    status_code=201,
    summary="Propose verifying (or revoking) a domain; group members only",
)
async def propose(request: Request, did: str, body: ProposalIn, caller: Writer) -> Response:
    async def run() -> Created:
        view = await _governance(request).propose(
            did, body.action, body.evidence, body.group, caller
        )
        return 201, view, f"/v1/proposals/{view['id']}"

    return await idempotent(request, caller, run)


@router.post(
    f"/domains/{DID_PATH}/batch-verification-proposals",
    status_code=201,
    summary="Propose verifying many assets (stoves) of a project at once; members only",
)
async def propose_batch(
    request: Request, did: str, body: BatchProposalIn, caller: Writer
) -> Response:
    async def run() -> Created:
        selection = BatchSelection(did, body.protocol, body.domains)
        view = await _governance(request).propose_batch(
            selection, body.evidence, body.group, caller
        )
        return 201, view, f"/v1/proposals/{view['id']}"

    return await idempotent(request, caller, run)


@router.get("/proposals/{proposal_id}/items", summary="A batch proposal's domains, paged")
async def proposal_items(
    request: Request,
    proposal_id: ProposalId,
    caller: Reader,
    after: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict[str, Any]:
    items, next_after = await _governance(request).proposal_items(proposal_id, after, limit)
    return {"items": items, "nextAfter": next_after}


@router.get(f"/domains/{DID_PATH}/verification-proposals")
async def proposals_of(request: Request, did: str, caller: Reader) -> list[dict[str, Any]]:
    return await _governance(request).proposals_of(did)


@router.get("/proposals/{proposal_id}")
async def get_proposal(request: Request, proposal_id: ProposalId, caller: Reader) -> dict[str, Any]:
    return await _governance(request).proposal(proposal_id)


@router.post("/proposals/{proposal_id}/votes", summary="Vote yes, no or abstain, once")
async def vote(
    request: Request, proposal_id: ProposalId, body: VoteIn, caller: Reader
) -> dict[str, Any]:
    return await _governance(request).vote(proposal_id, body.option, caller)


@router.post(
    "/proposals/{proposal_id}/execute",
    summary="Apply a passed proposal",
    description="200 with the executed proposal; for a batch proposal larger than one chunk "
    "(GOVERNANCE_BATCH_CHUNK), 202 once its first chunk is verified: the rest runs in the "
    "background, and `GET /v1/proposals/{id}` (the `Location`) shows its `progress` until "
    "its status is `executed`. Executing again while it runs answers 202 and starts "
    "nothing new.",
    responses={202: {"description": "Executing in the background; poll the Location."}},
)
async def execute(request: Request, proposal_id: ProposalId, caller: Reader) -> Response:
    governance = _governance(request)
    view = await governance.execute(proposal_id, caller)
    if view["action"] == VERIFY_BATCH and view["status"] != EXECUTED:
        return JSONResponse(
            view,
            status_code=202,
            headers={"Location": f"/v1/proposals/{proposal_id}", "Retry-After": "1"},
        )
    return JSONResponse(view)
