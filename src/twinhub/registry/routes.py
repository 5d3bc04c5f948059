"""The `/v1` routes: thin adapters from HTTP to the registry services."""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import parse_qsl, quote

import orjson
from fastapi import APIRouter, Body, Query, Request
from fastapi.dependencies.utils import request_body_to_args
from fastapi.routing import APIRoute
from pydantic import TypeAdapter
from starlette._exception_handler import wrap_app_handling_exceptions
from starlette.convertors import Convertor, register_url_convertor
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import Message, Receive, Scope, Send

from twinhub.kernel.errors import FieldProblem, Invalid, NotFound
from twinhub.kernel.identifiers import is_did
from twinhub.kernel.principals import Principal
from twinhub.registry.auth import (
    Reader,
    Writer,
    bearer,
    bearer_of,
    principal,
    reader,
    writer,
)
from twinhub.registry.errors import ERROR_RESPONSES
from twinhub.registry.idempotent import Created, idempotent
from twinhub.registry.params import NO_NUL, Cursor, Filter, IfMatch, documented
from twinhub.registry.schemas import (
    DomainIn,
    DomainOut,
    DomainPage,
    DomainPatchIn,
    EntityIn,
    GraphOut,
    HistoryPage,
    ProtocolIn,
    ProtocolOut,
    ProtocolPage,
    RelationshipIn,
)
from twinhub.services.domains import (
    MAX_GRAPH_DEPTH,
    DomainFilter,
    DomainPatch,
    DomainService,
    DomainSpec,
)
from twinhub.services.paging import decode_cursor
from twinhub.services.protocols import ProtocolService, ProtocolSpec, ProtocolView
from twinhub.services.read_model import ReadModel
from twinhub.settings import Settings

router = APIRouter(prefix="/v1", responses=ERROR_RESPONSES)
DID_PATH = "{did:path}"
# The sub-resources of a domain (`/v1/domains/{did}/<one of these>`), served by this and
# the other routers. A DID may contain `/`, so `/v1/domains/{did}` alone would also match
# `/v1/domains/x/graph`: a PATCH there reached the domain's PATCH route and answered 422
# about its body instead of 405. tests/integration/registry/test_registry_limits.py checks
# this list is whole.
DOMAIN_SUBRESOURCES = (
    r"device-tokens(?:/[^/]+(?:/rotate)?)?",
    r"telemetry(?:/aggregates|/quarantine)?",
    "device-key",
    "state",
    "events",
    "verification-proposals",
    "batch-verification-proposals",
    r"monitoring-periods(?:/drafts/[^/]+|/[^/]+(?:/(?:report|credential-request|submit"
    r"|verification|issuance|chain|readings|late-data|evidence))?)?",
    "project-document",
    "credential-request",
    "accreditations",
    "validation",
    "summary",
    "history",
    "graph",
    "relationships",
)


class DomainDidConvertor(Convertor[str]):
    """A DID as the last part of `/v1/domains/{did}`: any path that does not end in one of
    the domain's sub-resources (those paths belong to the sub-resource's routes alone)."""

    regex = rf"(?!.*/(?:{'|'.join(DOMAIN_SUBRESOURCES)})$).+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("domain_did", DomainDidConvertor())
DOMAIN_DID_PATH = "{did:domain_did}"
# The hottest read, `GET /v1/domains/{did}`, is matched first: routes are tried in order,
# and each of the ~70 before it cost a match attempt on every request (the DID's convertor
# keeps it off every other route's paths).
hot_router = APIRouter(prefix="/v1", responses=ERROR_RESPONSES)
# The hot write, creating a domain, next: its two exact paths cost every other request one
# cheap match attempt each, and save the create dozens.
create_router = APIRouter(prefix="/v1", responses=ERROR_RESPONSES)


def _domains(request: Request) -> DomainService:
    return request.app.state.platform.domains


def _protocols(request: Request) -> ProtocolService:
    return request.app.state.platform.protocols


def page_size(request: Request, limit: int | None) -> int:
    return page_size_of(request.app.state.platform.settings, limit)


def page_size_of(settings: Settings, limit: int | None) -> int:
    """The size of a page a client asked `limit` of (None: the default)."""
    return min(limit or settings.registry.page_size, settings.registry.max_page_size)


def _location(kind: str, did: str) -> str:
    return f"/v1/{kind}/{quote(did, safe=':/')}"


def protocol_record(view: ProtocolView) -> dict[str, Any]:
    record = view.as_record()
    record["effective"] = {
        "properties": view.effective_properties,
        "required": view.effective_required,
        "relationships": view.effective_relationships,
        "services": view.effective_services,
        "twinClass": view.effective_twin_class,
        "entityType": view.effective_entity_type,
        "tokenClass": view.effective_token_class,
        "telemetry": view.effective_telemetry,
        "constraints": view.effective_constraints,
        "methodology": view.methodology_summary(),
    }
    return record


def _if_match(value: str | None) -> int | None:
    """The version an `If-Match` header names: `3`, `"3"` or `W/"3"`; `*` means any."""
    if value is None or value.strip() == "*":
        return None
    text = value.strip().removeprefix("W/").strip('"')
    if not text.isdigit():
        raise Invalid(
            "If-Match must name a version, as in the ETag header.",
            [FieldProblem("If-Match", 'expected a version number such as "3"')],
        )
    return int(text)


def _record_response(record: dict[str, Any], status: int = 200) -> Response:
    """The record as JSON with its version as ETag (orjson: the stdlib encoder was a tenth
    of a domain read's time)."""
    return RecordResponse(record, status)


class RecordResponse(Response):
    """`Response(orjson.dumps(record), status, headers={"ETag": ...},
    media_type="application/json")` with its raw headers written out: Response's header
    building (a loop and a dozen calls) was a tenth of the hot read's own work. The same
    bytes and headers, in the same order (tests/integration/registry/test_hot_paths.py)."""

    media_type = "application/json"

    def __init__(self, record: dict[str, Any], status: int = 200) -> None:
        self.status_code = status
        self.background = None
        self.body = orjson.dumps(record)
        self.raw_headers = [
            (b"etag", f'"{record["version"]}"'.encode("latin-1")),
            (b"content-length", str(len(self.body)).encode("latin-1")),
            (b"content-type", b"application/json"),
        ]


# -- protocols -----------------------------------------------------------------------------
@router.post(
    "/protocols",
    status_code=201,
    response_model=ProtocolOut,
    tags=["protocols"],
    summary="Register a protocol (a template of properties and relationship roles)",
)
async def create_protocol(request: Request, body: ProtocolIn, caller: Writer) -> Response:
    async def run() -> Created:
        spec = ProtocolSpec(
            name=body.name or body.id or "",
            slug=body.id,
            entity_type=body.entityType,
            twin_class=body.twinClass,
            properties=body.properties,
            required=body.required,
            relationships=body.relationships,
            services=[s.model_dump() for s in body.services],
            extends=body.extends,
            token_class=body.tokenClass,
            telemetry=body.telemetry,
            constraints=body.constraints,
            methodology=body.methodology,
        )
        view = await _protocols(request).create(spec, caller.did)
        return 201, protocol_record(view), _location("protocols", view.did)

    return await idempotent(request, caller, run)


@router.get("/protocols", response_model=ProtocolPage, tags=["protocols"])
async def list_protocols(
    request: Request,
    caller: Reader,
    cursor: Cursor = None,
    limit: Annotated[int | None, Query(ge=1)] = None,
) -> dict[str, Any]:
    page = await _protocols(request).list(cursor, page_size(request, limit))
    return {
        "items": [protocol_record(view) for view in page.items],
        "nextCursor": page.next_cursor,
        "total": page.total,
    }


@router.get(f"/protocols/{DID_PATH}", response_model=ProtocolOut, tags=["protocols"])
async def get_protocol(request: Request, did: str, caller: Reader) -> dict[str, Any]:
    return protocol_record(await _protocols(request).get(did))


# -- domains and entities ------------------------------------------------------------------
def _spec(body: DomainIn, protocol: str) -> DomainSpec:
    controller = [body.controller] if isinstance(body.controller, str) else body.controller
    return DomainSpec(
        type=body.type,
        protocol=protocol,
        metadata=body.metadata,
        properties=body.properties,
        controller=controller or [],
        services=[s.model_dump() for s in body.services],
        credentials=[c.model_dump() for c in body.verifiableCredential],
        relationships=body.relationships_by_role(),
        valid_from=body.validFrom,
        valid_until=body.validUntil,
        local_id=body.id,
    )


def _protocol_of(body: DomainIn) -> str:
    if body.class_ and body.protocol and body.class_ != body.protocol:
        raise Invalid(
            "`class` and `protocol` name the same thing and must agree.",
            [FieldProblem("class", f"differs from protocol {body.protocol}")],
        )
    chosen = body.class_ or body.protocol
    if not chosen:
        raise Invalid(
            "Name the domain's protocol DID in `class` (or `protocol`).",
            [FieldProblem("class", "required")],
        )
    return chosen


@create_router.post(
    "/domains",
    status_code=201,
    response_model=DomainOut,
    tags=["domains"],
    summary="Register a digital-twin domain",
)
async def create_domain(request: Request, body: DomainIn, caller: Writer) -> Response:
    async def run() -> Created:
        record = await _domains(request).create(_spec(body, _protocol_of(body)), caller)
        return 201, record, _location("domains", record["did"])

    return await idempotent(request, caller, run)


GENERAL = "twinhub.general"  # scope key: CreateRoute sent this request the general way


class BodyRoute(Route):
    """A hot write (`POST` with a JSON body) as a plain Starlette route tried before
    FastAPI's: FastAPI's route handling (its router search, request wrappers, dependency
    solving) was a fifth of a create's CPU. The body is parsed as FastAPI parses it
    (`json.loads`) and validated by FastAPI's own `request_body_to_args` with the general
    route's body field; the caller is checked by the same `writer` dependency, called
    directly; then the general route's own code runs (`answer`), errors going to the same
    handlers. Anything else (another content type, a body or path parameter that does not
    parse or validate, a body that could not be read) is handed, with the body as
    received, to the router again, which then skips this route: the general route answers
    it exactly as before, with its own error. While FastAPI's own telemetry follows a
    request, the general route takes it from the start. tests/integration/registry/
    test_hot_paths.py holds the two equal, for each (`CreateRoute`, `SubmitRoute`,
    `EvaluateRoute`)."""

    def __init__(self, path: str, general: APIRoute, body_type: type) -> None:
        super().__init__(path, self._unused, methods=["POST"], include_in_schema=False)
        self.general = general
        self.body_type = body_type
        self.enabled = True

    @staticmethod
    async def _unused(request: Request) -> Response:  # pragma: no cover - handle() answers
        raise NotImplementedError

    def accepts(self, path_params: dict[str, Any]) -> bool:
        """Whether FastAPI would take the path's parameters as they are (else: general)."""
        return True

    async def answer(self, request: Request, body: Any, caller: Principal) -> Response:
        """What the general route's endpoint answers for `body` from `caller`."""
        raise NotImplementedError

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if (
            not self.enabled
            or scope.get("method") != "POST"
            or GENERAL in scope
            or scope.get("fastapi.telemetry") is not None  # FastAPI's route records it
        ):
            return Match.NONE, {}  # no partial match: a 405 stays the general routes'
        match, child = super().matches(scope)
        if match is not Match.NONE:
            if not self.accepts(child.get("path_params", {})):
                return Match.NONE, {}
            child["route"] = self  # the metrics label: the path, as the general route's
        return match, child

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        received: list[Message] = []
        failure: Exception | None = None
        try:
            while True:
                message = await receive()
                received.append(message)
                if message["type"] != "http.request" or not message.get("more_body", False):
                    break
        except Exception as error:  # read again by the general route, which reports it
            failure = error
        replay = _replay(received, failure, receive)
        body = await self._body(scope, received) if failure is None else None
        if body is None:
            scope[GENERAL] = True
            await scope["router"](scope, replay, send)
            return
        request = Request(scope, replay)

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            caller = await writer(await principal(request, bearer_of(request)))
            response = await self.answer(request, body, caller)
            await response(scope, receive, send)

        await wrap_app_handling_exceptions(app, request)(scope, replay, send)

    async def _body(self, scope: Scope, received: list[Message]) -> Any:
        """The body as FastAPI's route would pass it to its endpoint, or None where
        FastAPI would do anything else with it (parse it otherwise, or refuse it)."""
        if not received or received[-1]["type"] != "http.request":
            return None
        for name, value in scope["headers"]:
            if name == b"content-type":
                if value != b"application/json":
                    return None
                break
        else:
            return None
        raw = b"".join(message.get("body", b"") for message in received)
        if not raw:
            return None
        try:
            data = json.loads(raw)  # Starlette's Request.json(), as FastAPI calls it
        except Exception:
            return None
        general = self.general
        values, errors = await request_body_to_args(
            general.dependant.body_params, data, general._embed_body_fields
        )
        body = values.get("body")
        return body if not errors and isinstance(body, self.body_type) else None


class CreateRoute(BodyRoute):
    """`POST /v1/domains` with a JSON body that `DomainIn` accepts (BodyRoute)."""

    def __init__(self, general: APIRoute) -> None:
        super().__init__("/v1/domains", general, DomainIn)

    async def answer(self, request: Request, body: Any, caller: Principal) -> Response:
        async def run() -> Created:
            record = await _domains(request).create(_spec(body, _protocol_of(body)), caller)
            return 201, record, _location("domains", record["did"])

        return await idempotent(request, caller, run)


def _replay(received: list[Message], failure: Exception | None, receive: Receive) -> Receive:
    """`receive` as it was before CreateRoute read the body: the messages it gave, then its
    error (if reading failed), then whatever it gives next."""
    pending = list(received)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        if failure is not None:
            raise failure
        return await receive()

    return replayed


@create_router.post(
    "/entities",
    status_code=201,
    response_model=DomainOut,
    tags=["domains"],
    summary="Create an entity from a protocol; its properties are checked against it",
)
async def create_entity(request: Request, body: EntityIn, caller: Writer) -> Response:
    async def run() -> Created:
        record = await _domains(request).create(_spec(body, body.protocol), caller)
        return 201, record, _location("domains", record["did"])

    return await idempotent(request, caller, run)


@router.get("/domains", response_model=DomainPage, tags=["domains"])
async def list_domains(
    request: Request,
    caller: Reader,
    type: Filter = None,
    class_: Annotated[
        str | None, Query(alias="class", json_schema_extra=documented(pattern=NO_NUL))
    ] = None,
    protocol: Filter = None,
    verified: bool | None = None,
    controller: Filter = None,
    status: Filter = None,
    twinClass: Filter = None,
    parent: Filter = None,
    cursor: Cursor = None,
    limit: Annotated[int | None, Query(ge=1)] = None,
    count: bool = False,
) -> dict[str, Any]:
    where = DomainFilter(
        type=type,
        protocol=class_ or protocol,
        verified=verified,
        controller=controller,
        status=status,
        twin_class=twinClass,
        parent=parent,
    )
    page = await _domains(request).list(where, cursor, page_size(request, limit), count)
    return {"items": page.items, "nextCursor": page.next_cursor, "total": page.total}


class RawResponse(Response):
    """A 200 of JSON whose raw headers and body were built already (kept by the read
    model): the headers `Response(body, media_type="application/json")` gives."""

    def __init__(self, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        self.status_code = 200
        self.background = None
        self.body = body
        self.raw_headers = list(headers)  # a kept list stays as kept


LIST_PATH = "/v1/domains"
_LIST_PARAMETERS = frozenset({"type", "class", "cursor", "limit"})
_DOMAIN_OUT: TypeAdapter[DomainOut] = TypeAdapter(DomainOut)


def _rendered(records: list[dict[str, Any]]) -> list[bytes]:
    """Records as list items, encoded as the general route's response model encodes each
    of its `items` (FastAPI: validated, then dumped to JSON by alias)."""
    return [
        _DOMAIN_OUT.dump_json(
            _DOMAIN_OUT.validate_python(record, from_attributes=True), by_alias=True
        )
        for record in records
    ]


def query_once(query: bytes, names: frozenset[str]) -> dict[str, str] | None:
    """The query's parameters when each is one of `names`, given once and not empty, with
    no NUL; None for anything else (a hot route leaves such a request to the general one)."""
    if b"%00" in query:
        return None
    asked: dict[str, str] = {}
    for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        if name not in names or name in asked or not value or "\x00" in value:
            return None
        asked[name] = value
    return asked


def _list_query(query: bytes) -> tuple[str | None, str | None, str | None, int | None] | None:
    """(filter, its value, cursor, limit) of a list request ListRoute answers: `type` or
    `class` (or neither), `cursor` and `limit`, each at most once and not empty, `limit` a
    whole number from 1; None for anything else (the general route answers it)."""
    asked = query_once(query, _LIST_PARAMETERS)
    if asked is None:
        return None
    limit = asked.get("limit")
    if limit is not None and not (limit.isascii() and limit.isdigit() and int(limit) >= 1):
        return None
    if "type" in asked and "class" in asked:
        return None
    kind = "type" if "type" in asked else "class" if "class" in asked else None
    value = asked.get(kind) if kind else None
    return kind, value, asked.get("cursor"), int(limit) if limit else None


class QueryRoute(Route):
    """A plain GET route for one path and the queries its `asked` reads (None: not this
    route's, left to the general route of the same path); what it read is kept in the
    scope under `scope_key` for the endpoint and RegistryApp."""

    scope_key: str

    @staticmethod
    def asked(query: bytes) -> Any | None:
        raise NotImplementedError

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope.get("method") != "GET":
            return Match.NONE, {}
        asked = self.asked(scope.get("query_string", b""))
        if asked is None:
            return Match.NONE, {}
        match, child = super().matches(scope)
        if match is not Match.FULL:
            return Match.NONE, {}
        child["route"] = self  # the metrics label: the path, as the general route's
        child[self.scope_key] = asked
        return match, child


class ListRoute(QueryRoute):
    """`GET /v1/domains` filtered by `type` or `class` alone (with `cursor` and `limit`),
    as a plain Starlette route that the registry app matches directly (RegistryApp):
    FastAPI's parameter solving, the ORM session and the response model's validation and
    encoding of every record were nearly all of a page's cost. The read model reads the
    page's keys on the filter's (column, seq) index and joins the items it rendered per
    domain version (`DomainRecords.list_page`), rendered as the general route renders
    them. Any other request (another filter, `count`, a parameter twice, a limit that is
    no number) is left to the general route. tests/integration/registry/test_hot_paths.py
    holds the two equal."""

    scope_key = "twinhub.listed"  # LISTED

    def __init__(self) -> None:
        super().__init__(LIST_PATH, self._list, methods=["GET"], include_in_schema=False)

    @staticmethod
    def asked(query: bytes) -> Any | None:
        return _list_query(query)

    @staticmethod
    async def _list(request: Request) -> Response:
        await reader(await principal(request, bearer_of(request)))
        kind, value, cursor, limit = request.scope[LISTED]
        after = decode_cursor(cursor)  # refused as the domain service refuses it
        size = page_size(request, limit)
        reads: ReadModel = request.app.state.reads
        body = await reads.domains.list_page(kind, value, after, size, _rendered)
        return Response(body, media_type="application/json")


LISTED = ListRoute.scope_key  # scope key: what ListRoute matched


@router.get(
    f"/domains/{DID_PATH}/history",
    response_model=HistoryPage,
    tags=["domains"],
    summary="The domain's ledger transactions (its versions, and claims about it), oldest first",
)
async def domain_history(
    request: Request,
    did: str,
    caller: Reader,
    cursor: Cursor = None,
    limit: Annotated[int | None, Query(ge=1)] = None,
) -> dict[str, Any]:
    page = await _domains(request).history(did, cursor, page_size(request, limit))
    items = [
        {
            "height": tx.height,
            "txHash": tx.tx_hash,
            "kind": tx.kind,
            "actor": tx.actor,
            "timestamp": tx.created_at.isoformat(),
            "version": tx.payload.get("record", {}).get("version"),
            "record": tx.payload.get("record", {}),
        }
        for tx in page.items
    ]
    return {"items": items, "nextCursor": page.next_cursor}


@router.get(f"/domains/{DID_PATH}/graph", response_model=GraphOut, tags=["domains"])
async def domain_graph(
    request: Request,
    did: str,
    caller: Reader,
    depth: Annotated[int, Query(ge=0, le=MAX_GRAPH_DEPTH)] = 1,
) -> dict[str, Any]:
    return await _domains(request).graph(did, depth)


@router.post(
    f"/domains/{DID_PATH}/relationships",
    response_model=DomainOut,
    tags=["domains"],
    summary="Relate the domain to another (checked against its protocol's roles)",
)
async def add_relationship(
    request: Request,
    did: str,
    body: RelationshipIn,
    caller: Writer,
    if_match: IfMatch = None,
) -> Response:
    async def run() -> Created:
        record = await _domains(request).relate(
            did, body.type, body.target, caller, _if_match(if_match)
        )
        return 200, record, None

    return await idempotent(request, caller, run)


@hot_router.get(
    f"/domains/{DOMAIN_DID_PATH}",
    response_model=DomainOut,
    tags=["domains"],
    openapi_extra={"security": [{"HTTPBearer": []}]},  # checked in the body, see below
)
async def get_domain(
    request: Request,
    did: str,
    version: Annotated[int | None, Query(ge=1, description="An earlier version")] = None,
) -> Response:
    # The same check as the `Reader` dependency, called directly: FastAPI's dependency
    # solving for reader -> principal -> bearer cost more than the rest of this read.
    await reader(await principal(request, await bearer(request)))
    reads: ReadModel = request.app.state.reads
    if version is not None or not reads.fast:
        return _record_response(await _domains(request).get(did, version))
    return await _current_domain(request, reads, did)


async def _current_domain(request: Request, reads: ReadModel, did: str) -> Response:
    # The hot read (a wallet or dashboard polling a twin): the node's read model answers it
    # from its own read-only SQLite connection, without an ORM session and its thread
    # hand-offs; the record is the one DomainService.get builds
    # (tests/integration/chain/test_node_read_path.py).
    row = await reads.domains.domain_row(did) if is_did(did) else None
    if row is None:
        raise NotFound(f"No domain {did!r}." if not is_did(did) else f"No domain {did}.")
    return _record_response(await reads.domains.domain(row))


async def get_current_domain(request: Request) -> Response:
    """`GET /v1/domains/{did}` without a query string, as a plain Starlette endpoint (see
    HotRoute): FastAPI's parameter solving for the three parameters of `get_domain` cost a
    third of the read. The same checks, the same read, the same errors."""
    await reader(await principal(request, bearer_of(request)))
    return await _current_domain(request, request.app.state.reads, request.path_params["did"])


class HotRoute(Route):
    """The current-version read (`get_current_domain`), tried before every other route; it
    matches only requests without a query string, so `?version=` and any other parameter
    go on to `get_domain`, where FastAPI validates them (and documents the route)."""

    def __init__(self) -> None:
        super().__init__(
            f"/v1/domains/{DOMAIN_DID_PATH}",
            get_current_domain,
            methods=["GET"],
            include_in_schema=False,
        )

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope.get("query_string"):
            return Match.NONE, {}
        match, child = super().matches(scope)
        if match is not Match.NONE:
            child["route"] = self  # FastAPI's router names only its own routes (metrics)
        return match, child


@router.patch(
    f"/domains/{DOMAIN_DID_PATH}",
    response_model=DomainOut,
    tags=["domains"],
    summary="Change a domain (controllers or admins); If-Match guards against lost updates",
    responses={412: {"description": "If-Match names a version that is no longer current"}},
)
async def patch_domain(
    request: Request,
    did: str,
    caller: Writer,
    body: Annotated[DomainPatchIn, Body()],
    if_match: IfMatch = None,
) -> Response:
    fields = body.model_fields_set
    patch = DomainPatch(
        metadata=body.metadata,
        properties=body.properties,
        controller=body.controller,
        services=[s.model_dump() for s in body.services] if body.services is not None else None,
        credentials=(
            [c.model_dump() for c in body.verifiableCredential]
            if body.verifiableCredential is not None
            else None
        ),
        valid_from=body.validFrom,
        valid_until=body.validUntil,
        clear_valid_from="validFrom" in fields and body.validFrom is None,
        clear_valid_until="validUntil" in fields and body.validUntil is None,
    )
    record = await _domains(request).update(did, patch, caller, _if_match(if_match))
    return _record_response(record)


@router.delete(
    f"/domains/{DOMAIN_DID_PATH}",
    response_model=DomainOut,
    tags=["domains"],
    summary="Deactivate a domain (records are never deleted)",
)
async def deactivate_domain(
    request: Request,
    did: str,
    caller: Writer,
    if_match: IfMatch = None,
) -> Response:
    return _record_response(await _domains(request).deactivate(did, caller, _if_match(if_match)))
