"""The verification workflow's routes: attachments by hash, a project's design document,
verifier accreditation and validation, and a monitoring period's signed steps (submit,
verification, issuance), the credential to sign for each, the verifier's view of a stove's
raw readings, late data and the evidence bundle.

Role holders sign client-side: `POST .../credential-request` answers the unsigned
credential, the client signs it with its own key and posts it to the step's route.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from pydantic import Field
from starlette.responses import JSONResponse, Response

from twinhub.platform import Platform
from twinhub.registry.auth import Caller, WorkflowReader
from twinhub.registry.errors import ERROR_RESPONSES
from twinhub.registry.routes import DID_PATH
from twinhub.registry.schemas import Body
from twinhub.security.jcs import DIGEST

router = APIRouter(prefix="/v1", responses=ERROR_RESPONSES)
PeriodId = Annotated[int, Path(ge=1, le=2**31 - 1)]
PERIOD = f"/domains/{DID_PATH}/monitoring-periods/{{period_id}}"


def _platform(request: Request) -> Platform:
    return request.app.state.platform


class SignedIn(Body):
    credential: dict[str, Any] = Field(description="The step's credential, signed by the caller.")


class DocumentIn(Body):
    document: dict[str, Any] = Field(description="The project design document (JSON).")


class ProjectRequestIn(Body):
    step: Literal["accreditation", "validation"]
    verifier: str | None = Field(None, description="The verifier to accredit (its DID).")


class PeriodRequestIn(Body):
    step: Literal["submission", "verification", "issuance"]
    outcome: str | None = Field(None, description="approved, rejected or corrections")
    findings: list[str] = Field(default_factory=list, max_length=200)
    sampledStoves: list[str] = Field(default_factory=list, max_length=10_000)


@router.post(
    "/attachments",
    tags=["workflow"],
    summary="Store evidence by its SHA-256",
    responses={413: {"description": "Larger than REGISTRY_MAX_ATTACHMENT_BYTES"}},
)
async def put_attachment(
    request: Request,
    caller: Caller,
    digest: Annotated[str, Query(description="sha256:<hex> of the body", pattern=DIGEST.pattern)],
) -> JSONResponse:
    content = await request.body()
    media_type = request.headers.get("content-type", "application/octet-stream")
    view = await _platform(request).project_documents.put_attachment(
        content, digest, media_type, caller
    )
    return JSONResponse(view, 201, headers={"Location": f"/v1/attachments/{view['digest']}"})


@router.get("/attachments/{digest}", tags=["workflow"])
async def get_attachment(
    request: Request,
    digest: Annotated[str, Path(pattern=DIGEST.pattern)],
    caller: WorkflowReader,
) -> Response:
    content, media_type = await _platform(request).project_documents.attachment(digest)
    return Response(content, media_type=media_type)


@router.post(f"/domains/{DID_PATH}/project-document", tags=["workflow"])
async def put_document(request: Request, did: str, body: DocumentIn, caller: Caller) -> Response:
    view, created = await _platform(request).project_documents.store(did, body.document, caller)
    return JSONResponse(view, 201 if created else 200)


@router.get(f"/domains/{DID_PATH}/project-document", tags=["workflow"])
async def get_document(request: Request, did: str, caller: WorkflowReader) -> dict[str, Any]:
    return await _platform(request).project_documents.document(did)


@router.post(f"/domains/{DID_PATH}/accreditations", tags=["workflow"], status_code=201)
async def accredit(request: Request, did: str, body: SignedIn, caller: Caller) -> dict[str, Any]:
    return await _platform(request).project_documents.accredit(did, body.credential, caller)


@router.post(f"/domains/{DID_PATH}/validation", tags=["workflow"], status_code=201)
async def validate(request: Request, did: str, body: SignedIn, caller: Caller) -> dict[str, Any]:
    return await _platform(request).project_documents.validate(did, body.credential, caller)


@router.post(
    f"{PERIOD}/credential-request",
    tags=["workflow"],
    summary="The unsigned submission, verification or issuance for the caller to sign",
)
async def period_request(
    request: Request, did: str, period_id: PeriodId, body: PeriodRequestIn, caller: Caller
) -> dict[str, Any]:
    verdict = {
        "outcome": body.outcome,
        "findings": body.findings,
        "sampledStoves": body.sampledStoves,
    }
    return await _platform(request).periods.credential_request(
        did, period_id, body.step, verdict, caller
    )


@router.post(f"{PERIOD}/submit", tags=["workflow"])
async def submit(
    request: Request, did: str, period_id: PeriodId, body: SignedIn, caller: Caller
) -> dict[str, Any]:
    return await _platform(request).periods.submit(did, period_id, body.credential, caller)


@router.post(f"{PERIOD}/verification", tags=["workflow"])
async def verification(
    request: Request, did: str, period_id: PeriodId, body: SignedIn, caller: Caller
) -> dict[str, Any]:
    return await _platform(request).periods.verify(did, period_id, body.credential, caller)


@router.post(f"{PERIOD}/issuance", tags=["workflow"])
async def issuance(
    request: Request, did: str, period_id: PeriodId, body: SignedIn, caller: Caller
) -> dict[str, Any]:
    return await _platform(request).periods.issue(did, period_id, body.credential, caller)


@router.get(f"{PERIOD}/chain", tags=["workflow"], summary="The period's signed steps")
async def chain(
    request: Request, did: str, period_id: PeriodId, caller: WorkflowReader
) -> dict[str, Any]:
    return {"items": await _platform(request).periods.chain(did, period_id)}


@router.get(f"{PERIOD}/readings", tags=["workflow"], summary="A stove's raw readings")
async def readings(
    request: Request,
    did: str,
    period_id: PeriodId,
    caller: WorkflowReader,
    stove: Annotated[str, Query(max_length=200)],
) -> dict[str, Any]:
    return await _platform(request).periods.readings(did, period_id, stove)


@router.get(f"{PERIOD}/late-data", tags=["workflow"])
async def late_data(
    request: Request, did: str, period_id: PeriodId, caller: WorkflowReader
) -> dict[str, Any]:
    return await _platform(request).periods.late_data(did, period_id)


@router.get(f"{PERIOD}/evidence", tags=["workflow"], summary="The period's evidence bundle")
async def evidence(
    request: Request, did: str, period_id: PeriodId, caller: WorkflowReader
) -> dict[str, Any]:
    return await _platform(request).periods.evidence(did, period_id)


# After the period routes: `{did:path}` would take `.../monitoring-periods/1` as a DID.
@router.post(
    f"/domains/{DID_PATH}/credential-request",
    tags=["workflow"],
    summary="The unsigned accreditation or validation credential for the caller to sign",
)
async def project_request(
    request: Request, did: str, body: ProjectRequestIn, caller: Caller
) -> dict[str, Any]:
    return await _platform(request).project_documents.credential_request(
        did, body.step, body.verifier, caller
    )
