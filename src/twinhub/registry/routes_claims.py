"""Claim routes: collections, claims, oracle evaluations, credentials and credits."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Path, Query, Request
from fastapi import Body as JsonBody
from fastapi.routing import APIRoute
from pydantic import Field, field_validator
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import Scope

from twinhub.kernel.bounds import INT64_MAX
from twinhub.kernel.errors import FieldProblem, TooLarge
from twinhub.kernel.principals import Principal
from twinhub.platform import Platform
from twinhub.registry.auth import Reader, Writer, bearer_of, principal, reader
from twinhub.registry.errors import ERROR_RESPONSES
from twinhub.registry.idempotent import Created, idempotent
from twinhub.registry.params import Cursor, Moment, documented
from twinhub.registry.routes import (
    DID_PATH,
    BodyRoute,
    QueryRoute,
    RawResponse,
    page_size,
    query_once,
)
from twinhub.registry.schemas import Body, as_utc
from twinhub.services.claims import (
    CLAIM_ID,
    STATUSES,
    ClaimFilter,
    CollectionSpec,
    EvaluationOutcome,
    EvaluationRequest,
    claim_view,
)
from twinhub.services.paging import decode_cursor
from twinhub.settings import setting_name

router = APIRouter(prefix="/v1", responses=ERROR_RESPONSES)
CollectionId = Annotated[int, Path(ge=1, le=2**31 - 1)]
ClaimId = Annotated[str, Path(min_length=1, max_length=100)]
TokenName = Annotated[str, Path(min_length=1, max_length=32)]


def _platform(request: Request) -> Platform:
    return request.app.state.platform


def _page(items: list[dict[str, Any]], cursor: str | None) -> dict[str, Any]:
    return {"items": items, "nextCursor": cursor}


class CollectionIn(Body):
    project: str = Field(description="DID of a verified Project domain.")
    protocol: str = Field(
        "did:ixo:protocol/clean-cooking-claim",
        description="Claim protocol: the template claim data must follow, its verifier "
        "role and token class.",
    )
    evaluators: list[str] = Field(
        min_length=1, description="Oracle domains that fill the protocol's verifier role."
    )
    name: str | None = None
    quota: int | None = Field(None, le=INT64_MAX, description="Most claims the collection takes.")
    startDate: Moment | None = None
    endDate: Moment | None = None

    @field_validator("startDate", "endDate")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return as_utc(value)


class StateIn(Body):
    state: Literal["open", "paused", "closed"]


class ClaimIn(Body):
    id: str | None = Field(None, description="Your id for the claim; generated if absent.")
    asset: str | None = Field(None, description="DID of the asset the claim is about.")
    data: dict[str, Any] = Field(description="Claim data, checked against the protocol.")


class EvaluationIn(Body):
    status: Literal["approved", "rejected", "flagged", "disputed", "invalidated"]
    reason: str | None = Field(None, description="Why; required unless approved.")
    amount: int | None = Field(
        None,
        description="Refused (422): credits follow from the protocol's methodology, computed "
        "from the stove's telemetry; an approval mints exactly that.",
    )
    oracle: str | None = Field(None, description="The oracle evaluating, if you run several.")


class BatchEvaluationIn(EvaluationIn):
    claim: str = Field(min_length=1, max_length=100, description="The claim's id.")


class EvaluationsIn(Body):
    evaluations: list[BatchEvaluationIn] = Field(
        min_length=1,
        description="Evaluations made in order, each on its own (at most "
        "CLAIMS_EVALUATION_BATCH_MAX, default 1,000).",
    )


class TransferIn(Body):
    to: str = Field(description="DID receiving the credits.")
    amount: int = Field(description="In the token's smallest unit (see its decimals).")
    from_: str | None = Field(
        None, alias="from", description="Holder (default: you); admins act as custodians."
    )


class RetirementIn(Body):
    amount: int
    reason: str = Field(description="Why the credits are retired (offset claim, ...).")
    from_: str | None = Field(None, alias="from", description="Holder (default: you).")
    beneficiary: str | None = Field(
        None,
        max_length=200,
        description="On whose behalf the credits are retired, as the retirement certificate "
        "names it (a name or a DID; default: the holder).",
    )


# -- collections ---------------------------------------------------------------------------
@router.post(
    "/claim-collections",
    status_code=201,
    tags=["claims"],
    summary="Open a claim collection for a verified project",
)
async def create_collection(request: Request, body: CollectionIn, caller: Writer) -> Response:
    async def run() -> Created:
        spec = CollectionSpec(
            project=body.project,
            protocol=body.protocol,
            evaluators=body.evaluators,
            name=body.name,
            quota=body.quota,
            start_date=body.startDate,
            end_date=body.endDate,
        )
        view = await _platform(request).claims.collections.create_collection(spec, caller)
        return 201, view, f"/v1/claim-collections/{view['id']}"

    return await idempotent(request, caller, run)


@router.get("/claim-collections", tags=["claims"])
async def list_collections(
    request: Request,
    caller: Reader,
    project: str | None = None,
    cursor: Cursor = None,
    limit: Annotated[int | None, Query(ge=1)] = None,
) -> dict[str, Any]:
    page = await _platform(request).claims.collections.collections(
        project, cursor, page_size(request, limit)
    )
    return _page(page.items, page.next_cursor)


@router.get("/claim-collections/{collection_id}", tags=["claims"])
async def get_collection(
    request: Request, collection_id: CollectionId, caller: Reader
) -> dict[str, Any]:
    return await _platform(request).claims.collections.collection(collection_id)


@router.patch(
    "/claim-collections/{collection_id}", tags=["claims"], summary="Pause, reopen or close"
)
async def set_collection_state(
    request: Request, collection_id: CollectionId, body: StateIn, caller: Writer
) -> dict[str, Any]:
    return await _platform(request).claims.collections.set_state(collection_id, body.state, caller)


# -- claims --------------------------------------------------------------------------------
@router.post(
    "/claim-collections/{collection_id}/claims",
    status_code=201,
    tags=["claims"],
    summary="Submit a claim (data checked against the collection's protocol)",
)
async def submit_claim(
    request: Request, collection_id: CollectionId, body: ClaimIn, caller: Writer
) -> Response:
    return await _submitted(request, collection_id, body, caller)


async def _submitted(
    request: Request, collection_id: int, body: ClaimIn, caller: Principal
) -> Response:
    async def run() -> Created:
        view = await _platform(request).claims.submissions.submit(
            collection_id, body.data, caller, asset=body.asset, claim_id=body.id
        )
        return 201, view, f"/v1/claims/{view['id']}"

    return await idempotent(request, caller, run)


class SubmitRoute(BodyRoute):
    """`POST /v1/claim-collections/{id}/claims` with a JSON body that `ClaimIn` accepts and
    an id `CollectionId` accepts, as a plain route tried before FastAPI's (BodyRoute)."""

    def __init__(self, general: APIRoute) -> None:
        super().__init__(SUBMIT_PATH, general, ClaimIn)

    def accepts(self, path_params: dict[str, Any]) -> bool:
        """Plain decimal digits within `CollectionId`'s bounds (FastAPI reads more forms,
        and refuses others: those go the general way)."""
        text = path_params.get("collection_id", "")
        return (
            isinstance(text, str)
            and 0 < len(text) <= 10
            and text.isascii()
            and text.isdigit()
            and 1 <= int(text) <= 2**31 - 1
        )

    async def answer(self, request: Request, body: Any, caller: Principal) -> Response:
        collection_id = int(request.path_params["collection_id"])
        return await _submitted(request, collection_id, body, caller)


SUBMIT_PATH = "/v1/claim-collections/{collection_id}/claims"


@router.get("/claims", tags=["claims"])
async def list_claims(
    request: Request,
    caller: Reader,
    collection: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
    status: Annotated[str | None, Query(json_schema_extra=documented(enum=list(STATUSES)))] = None,
    agent: str | None = None,
    asset: str | None = None,
    cursor: Cursor = None,
    limit: Annotated[int | None, Query(ge=1)] = None,
) -> dict[str, Any]:
    where = ClaimFilter(collection=collection, status=status, agent=agent, asset=asset)
    page = await _platform(request).claims.views.claims(where, cursor, page_size(request, limit))
    return _page(page.items, page.next_cursor)


@router.get("/claims/{claim_id}", tags=["claims"])
async def get_claim(request: Request, claim_id: ClaimId, caller: Reader) -> dict[str, Any]:
    return await _platform(request).claims.views.claim(claim_id)


CLAIM_PATH = "/v1/claims/{claim_id}"


CLAIMS_PATH = "/v1/claims"
LISTED_CLAIMS = "twinhub.listed_claims"  # scope key: what ClaimsListRoute matched


_COLLECTION_PARAMETERS = frozenset({"collection", "cursor", "limit"})


def _collection_query(query: bytes) -> tuple[int, str | None, int | None] | None:
    """(collection, cursor, limit) of a claims list ClaimsListRoute answers: `collection`,
    with `cursor` and `limit` at most, each once and not empty, the numbers whole and in
    the general route's bounds; None for anything else (the general route answers it)."""
    asked = query_once(query, _COLLECTION_PARAMETERS)
    if asked is None:
        return None
    numbers = [asked.get("collection", ""), asked.get("limit", "1")]
    if not all(n.isascii() and n.isdigit() and 1 <= int(n) <= 2**31 - 1 for n in numbers):
        return None
    limit = asked.get("limit")
    return int(asked["collection"]), asked.get("cursor"), int(limit) if limit else None


class ClaimsListRoute(QueryRoute):
    """`GET /v1/claims?collection=` (with `cursor` and `limit` at most), as a plain
    Starlette route the registry app matches directly, as ListRoute does for domains: the
    read model reads the page's rows on the (collection_id, seq) index and joins items it
    rendered once per row (`ClaimRecords.collection_page`), each `claim_view` encoded by
    the general route's response field. Any other request is the general route's.
    tests/integration/registry/test_hot_paths.py holds the two equal."""

    scope_key = LISTED_CLAIMS

    def __init__(self, claim: ClaimRoute) -> None:
        super().__init__(CLAIMS_PATH, self._list, methods=["GET"], include_in_schema=False)
        self.claim = claim

    @staticmethod
    def asked(query: bytes) -> Any | None:
        return _collection_query(query)

    def render(self, rows: list[Any]) -> list[bytes]:
        """Claims' rows as the general route's list items (`claim_view`, no evaluations)."""
        return [self.claim.encoded(claim_view(row)) for row in rows]

    async def _list(self, request: Request) -> Response:
        await reader(await principal(request, bearer_of(request)))
        collection, cursor, limit = request.scope[LISTED_CLAIMS]
        after = decode_cursor(cursor)  # refused as the claim service refuses it
        size = page_size(request, limit)
        claims = request.app.state.reads.claims
        body = await claims.collection_page(collection, after, size, self.render)
        return Response(body, media_type="application/json")


class ClaimRoute(Route):
    """`GET /v1/claims/{claim_id}` without a query string, as a plain Starlette route that
    the registry app matches directly (RegistryApp), and on a SQLite file answers outright
    (`ClaimRecords.claim_now`): FastAPI's route handling, dependency solving and response
    encoding, and the ORM session of the claim service's read, were nearly all of the
    read's cost. The read model reads the claim and its evaluations as the ORM loads them;
    the body is `claim_view`'s, the claim service's one view of a claim, encoded by the
    general route's own response field (`render`), and kept under the claim's stamp until
    the claim changes. The same checks, the same errors (an unknown claim is the service's
    404); an id the general route would refuse (too long, not an id) is left to it.
    tests/integration/registry/test_hot_paths.py holds the two equal for every state of a
    claim."""

    def __init__(self, general: APIRoute) -> None:
        super().__init__(CLAIM_PATH, self._read, methods=["GET"], include_in_schema=False)
        self.general = general

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope.get("query_string") or scope.get("method") != "GET":
            return Match.NONE, {}
        match, child = super().matches(scope)
        if match is not Match.FULL or not CLAIM_ID.match(child["path_params"]["claim_id"]):
            return Match.NONE, {}
        child["route"] = self  # the metrics label: the path, as the general route's
        return match, child

    def render(self, row: Any, evaluations: list[Any]) -> bytes:
        """The general route's body for a claim's row and evaluations (`claim_view`)."""
        return self.encoded(claim_view(row, evaluations))

    def encoded(self, view: dict[str, Any]) -> bytes:
        """`view` validated and encoded by the general route's response field, as FastAPI
        does it."""
        field = self.general.response_field
        assert field is not None
        value, errors = field.validate(view, {}, loc=("response",))
        assert not errors, errors
        return bytes(field.serialize_json(value))

    async def _read(self, request: Request) -> Response:
        await reader(await principal(request, bearer_of(request)))
        claim_id = request.path_params["claim_id"]
        answer = await request.app.state.reads.claims.claim_answer(claim_id, self.render)
        if answer is None:  # unknown (the service's 404), or nothing to read here
            body = self.encoded(await _platform(request).claims.views.claim(claim_id))
            return Response(body, media_type="application/json")
        return RawResponse(*answer)


@router.post(
    "/claims/{claim_id}/evaluations",
    tags=["claims"],
    summary="Evaluate a claim (its collection's oracles); approval issues a credential",
    response_model=dict[str, Any],
)
async def evaluate_claim(
    request: Request, claim_id: ClaimId, body: EvaluationIn, caller: Writer
) -> Response:
    # The evaluated claim, encoded by orjson: FastAPI's validation and encoding of the
    # returned dict took 0.28 ms against 0.6 µs, 3 % of a coalesced approval measured beside
    # it. The same bytes as the claim read (tests/integration/registry/test_hot_paths.py) but
    # for floats of 1e16
    # and beyond in a claim's data, which orjson writes without the exponent's plus sign.
    return await _evaluated(request, claim_id, body, caller)


async def _evaluated(
    request: Request, claim_id: str, body: EvaluationIn, caller: Principal
) -> Response:
    reply = await _platform(request).claims.evaluations.evaluate(
        claim_id, body.status, caller, reason=body.reason, amount=body.amount, oracle=body.oracle
    )
    return Response(orjson.dumps(reply), media_type="application/json")


class EvaluateRoute(BodyRoute):
    """`POST /v1/claims/{claim_id}/evaluations` with a JSON body that `EvaluationIn` accepts
    and an id `ClaimId` accepts, as a plain route tried before FastAPI's (BodyRoute): a
    single approval spent about a millisecond in FastAPI's route handling."""

    def __init__(self, general: APIRoute) -> None:
        super().__init__(EVALUATE_PATH, general, EvaluationIn)

    def accepts(self, path_params: dict[str, Any]) -> bool:
        """An id of `ClaimId`'s length (others go the general way, which refuses them)."""
        text = path_params.get("claim_id", "")
        return isinstance(text, str) and 1 <= len(text) <= 100

    async def answer(self, request: Request, body: Any, caller: Principal) -> Response:
        return await _evaluated(request, request.path_params["claim_id"], body, caller)


EVALUATE_PATH = "/v1/claims/{claim_id}/evaluations"


@router.post(
    "/claims/evaluations",
    tags=["claims"],
    summary="Evaluate many claims at once (an oracle's month); each made or refused alone",
)
async def evaluate_claims(request: Request, body: EvaluationsIn, caller: Writer) -> Response:
    """One ledger write for the whole list: each approval still computes its credits from
    the stove's telemetry, issues its credential and mints, exactly as one evaluation does;
    a refused item (its JSON error in `results`) changes nothing and does not stop the
    others. 200 whenever the list was read; `refused` counts the items that were not made."""
    platform = _platform(request)
    limit = platform.settings.registry.claims_evaluation_batch_max
    if len(body.evaluations) > limit:
        raise TooLarge(
            f"One request evaluates at most {limit} claims "
            f"({setting_name('registry', 'claims_evaluation_batch_max')}); this one has "
            f"{len(body.evaluations)}. Send the rest in further requests.",
            [FieldProblem("evaluations", f"at most {limit}")],
        )
    outcomes = await platform.claims.evaluations.evaluate_many(
        [
            EvaluationRequest(item.claim, item.status, item.reason, item.amount, item.oracle)
            for item in body.evaluations
        ],
        caller,
    )
    results = [_evaluation_result(index, outcome) for index, outcome in enumerate(outcomes)]
    refused = sum(1 for outcome in outcomes if outcome.error is not None)
    reply = {"evaluated": len(outcomes) - refused, "refused": refused, "results": results}
    return Response(orjson.dumps(reply), media_type="application/json")


def _evaluation_result(index: int, outcome: EvaluationOutcome) -> dict[str, Any]:
    """One item of a batch's reply: what the claim became, or the error one evaluation
    would have answered (its JSON error body's `error`)."""
    result: dict[str, Any] = {"index": index, "claim": outcome.claim}
    if outcome.error is not None:
        result["error"] = outcome.error.fields()
        return result
    assert outcome.reply is not None
    result.update(
        status=outcome.reply["status"],
        amount=outcome.reply["amount"],
        token=outcome.token,
        credential=outcome.credential,
    )
    return result


@router.get("/claims/{claim_id}/credential", tags=["credentials"])
async def claim_credential(request: Request, claim_id: ClaimId, caller: Reader) -> dict[str, Any]:
    return await _platform(request).claims.views.credential_of(claim_id)


# -- credentials ---------------------------------------------------------------------------
@router.get(
    "/credentials/issuer",
    tags=["credentials"],
    summary="The platform issuer's DID document (did:key, Ed25519)",
)
async def issuer(request: Request, caller: Reader) -> dict[str, Any]:
    return _platform(request).credentials.issuer.did_document()


@router.post(
    "/credentials/verify",
    tags=["credentials"],
    summary="Check a credential's Ed25519 proof (any did:key issuer)",
)
async def verify_credential(
    request: Request,
    caller: Reader,
    credential: Annotated[dict[str, Any], JsonBody(description="The credential, as issued.")],
) -> dict[str, Any]:
    return _platform(request).credentials.verify(credential)


@router.get("/credentials/{credential_id}", tags=["credentials"])
async def get_credential(
    request: Request,
    credential_id: Annotated[str, Path(min_length=1, max_length=100)],
    caller: Reader,
) -> dict[str, Any]:
    return await _platform(request).credentials.get(credential_id)


# -- credits -------------------------------------------------------------------------------
@router.get("/credits", tags=["credits"], summary="Every credit class: minted, retired, supply")
async def list_tokens(request: Request, caller: Reader) -> list[dict[str, Any]]:
    return await _platform(request).credits.tokens()


@router.get("/credits/{token}", tags=["credits"])
async def get_token(request: Request, token: TokenName, caller: Reader) -> dict[str, Any]:
    return await _platform(request).credits.token(token)


@router.post("/credits/{token}/transfers", status_code=201, tags=["credits"])
async def transfer(
    request: Request, token: TokenName, body: TransferIn, caller: Writer
) -> Response:
    async def run() -> Created:
        movement = await _platform(request).credits.transfer(
            token, body.from_ or caller.did, body.to, body.amount, caller
        )
        return 201, movement, None

    return await idempotent(request, caller, run)


@router.post("/credits/{token}/retirements", status_code=201, tags=["credits"])
async def retire(
    request: Request, token: TokenName, body: RetirementIn, caller: Writer
) -> Response:
    async def run() -> Created:
        movement = await _platform(request).credits.retire(
            token, body.from_ or caller.did, body.amount, body.reason, caller, body.beneficiary
        )
        return 201, movement, None

    return await idempotent(request, caller, run)


@router.get("/credit-movements", tags=["credits"])
async def movements(
    request: Request,
    caller: Reader,
    holder: str | None = None,
    token: str | None = None,
    cursor: Cursor = None,
    limit: Annotated[int | None, Query(ge=1)] = None,
) -> dict[str, Any]:
    page = await _platform(request).credits.movements(
        holder, token, cursor, page_size(request, limit)
    )
    return _page(page.items, page.next_cursor)


@router.get(f"/balances/{DID_PATH}", tags=["credits"], summary="A holder's credit balances")
async def balances(request: Request, did: str, caller: Reader) -> dict[str, Any]:
    return {"holder": did, "balances": await _platform(request).credits.balances(did)}
