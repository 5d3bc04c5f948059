"""GraphQL status queries at `/graphql`, shaped like the ixo indexer's (PostGraphile) schema.

Why this shape: programme dashboards and ixo tooling already ask the ixo indexer
`entity(id) { id type status entityVerified context service linkedEntity metadata }` and page
through `entities { nodes pageInfo { hasNextPage endCursor } totalCount }`. Answering the same
query text lets them check a twinhub domain's status unchanged. As in the indexer,
`context`, `service`, `linkedEntity` and `metadata` are JSON values, not typed objects, so
such queries need no sub-selection.

Read-only on purpose: every change goes through `/v1`, where If-Match, idempotency keys and
controller checks live. Authentication is the `/v1` one (`Authorization: Bearer <API_KEY>`,
reader or writer role), failing before any GraphQL runs with the registry's JSON error shape.
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import lru_cache
from typing import Annotated, Any, NewType

import strawberry
from cross_web import HTTPException as StrawberryHTTPError  # what strawberry's views raise
from fastapi import Depends, Request
from fastapi.routing import APIRoute, APIWebSocketRoute
from fastapi.security import HTTPAuthorizationCredentials
from graphql import GraphQLError, StringValueNode, ValidationRule
from starlette.responses import JSONResponse, Response
from starlette.websockets import WebSocket
from strawberry.extensions import (
    AddValidationRules,
    MaskErrors,
    MaxAliasesLimiter,
    MaxTokensLimiter,
    QueryDepthLimiter,
)
from strawberry.fastapi import BaseContext, GraphQLRouter
from strawberry.scalars import JSON
from strawberry.schema.config import StrawberryConfig
from strawberry.types import ExecutionContext, Info
from strawberry.types.unset import UNSET

from twinhub.console.assets import offline_graphiql
from twinhub.db.failures import DATABASE_ERRORS, Failure, classify
from twinhub.db.visibility import sees_domain, viewer_of
from twinhub.events.store import check_types
from twinhub.kernel.bounds import text_problem, text_problems, time_problem
from twinhub.kernel.errors import Forbidden, NotFound, ServiceError
from twinhub.kernel.principals import Principal
from twinhub.platform import Platform
from twinhub.registry.auth import bearer, principal, reader
from twinhub.registry.errors import DATA_REFUSED, ERROR_RESPONSES
from twinhub.services.claims import ClaimFilter
from twinhub.services.domains import ACTIVE, DEACTIVATED, DomainFilter
from twinhub.services.paging import decode_cursor
from twinhub.settings import Settings
from twinhub.web.errors import error_response

# ixo's entity status (int32): 0 created, 1 closed, 2 transferred. A twinhub domain is
# created active and can only be deactivated, which is ixo's "closed"; nothing transfers.
IXO_STATUS = {ACTIVE: 0, DEACTIVATED: 1}
TRANSFERRED = "transferred"  # matches no twinhub domain; kept so `status: 2` is valid
REGISTRY_STATUS = {0: ACTIVE, 1: DEACTIVATED, 2: TRANSFERRED}
UNKNOWN_TYPE = "domain"  # linkedEntity type of a target the registry cannot find
MAX_SEQ = 2**63 - 1  # cursors wrap a BIGINT sequence number; beyond it the database fails


@strawberry.type(description="The REST /v1/domains/{did}/state record.")
class TelemetryState:
    did: str
    last_seen: str | None = strawberry.field(description="Time of the newest reading.")
    online: bool = strawberry.field(description="A reading within TELEMETRY_OFFLINE_AFTER_SECONDS.")
    last_seq: int | None = strawberry.field(description="seq of the newest reading.")
    latest: JSON = strawberry.field(description="Field name to {value, time, seq}.")
    meter_field: str | None = strawberry.field(description="The protocol's cumulative meter.")
    meter_total: float | None = strawberry.field(description="The meter's newest value.")
    readings: float = strawberry.field(description="Readings stored (a count).")


class RegistryContext(BaseContext):
    """What resolvers need: the platform, the caller, and a per-request cache of types."""

    def __init__(self, platform: Platform, caller: Principal | None) -> None:
        super().__init__()
        self.platform = platform
        self.caller = caller
        self._types: dict[str, str] = {}

    def remember(self, record: dict[str, Any]) -> None:
        self._types[record["did"]] = record["type"]

    async def entity_type(self, did: str) -> str:
        """The target's entity type, read once per request however many entities link it."""
        if did not in self._types:
            try:
                self.remember(await self.platform.domains.get(did))
            except NotFound:
                self._types[did] = UNKNOWN_TYPE
        return self._types[did]


GraphQLInfo = Info[RegistryContext, None]


def _graphql_error(error: ServiceError) -> GraphQLError:
    """A service failure as a GraphQL error, with the `/v1` error code and field details."""
    details = [{"field": d.field, "error": d.error} for d in error.details]
    return GraphQLError(error.message, extensions={"code": error.code, "details": details})


def _invalid(message: str, field: str) -> GraphQLError:
    return GraphQLError(
        message,
        extensions={"code": "validation_failed", "details": [{"field": field, "error": message}]},
    )


def _datetime(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


# -- types -----------------------------------------------------------------------------------
@strawberry.type(
    description="A twinhub domain (digital twin) as the ixo indexer shows an entity. "
    "ixo field names come first; `registryStatus`, `protocol`, `twinClass`, `properties`, "
    "`version` and the rest are twinhub's own."
)
class Entity:
    id: str = strawberry.field(description="The domain's DID.")
    type: str = strawberry.field(description="Entity type, e.g. Organisation, Device.")
    status: int = strawberry.field(
        description="ixo entity status: 0 created (twinhub `active`), 1 closed "
        "(twinhub `deactivated`); 2 transferred never occurs in twinhub."
    )
    registry_status: str = strawberry.field(
        description="twinhub's own status word: `active` or `deactivated`."
    )
    entity_verified: bool = strawberry.field(
        description="Set by governance once a verification proposal has executed."
    )
    start_date: datetime | None = strawberry.field(description="validFrom, if set.")
    end_date: datetime | None = strawberry.field(description="validUntil, if set.")
    controller: list[str] = strawberry.field(description="DIDs that may change the domain.")
    context: JSON = strawberry.field(
        description='[{key, val}]; `{key: "class", val: <protocol DID>}` names the protocol, '
        "as ixo does."
    )
    service: JSON = strawberry.field(
        description="[{id, type, serviceEndpoint}]: the domain's own services, then those it "
        "inherits from its protocol chain (its own entry wins on an id clash)."
    )
    metadata: JSON = strawberry.field(
        description="The domain's metadata (name, ...) plus ixo's versionId (the version as "
        "a string), created, updated (RFC 3339) and deactivated; these four win over "
        "same-named keys of the domain's own, which `registryMetadata` keeps unchanged."
    )
    registry_metadata: JSON = strawberry.field(description="The domain's own metadata alone.")
    protocol: str = strawberry.field(description="The protocol (ixo `class`) DID.")
    twin_class: str = strawberry.field(description="physical, cognitive, system or oracle.")
    properties: JSON = strawberry.field(description="Property values, checked by the protocol.")
    version: int = strawberry.field(description="Bumped by every change; 1 when created.")
    created_at: datetime = strawberry.field(description="When version 1 was written.")
    updated_at: datetime = strawberry.field(description="When the current version was written.")
    parent: str | None = strawberry.field(
        description="The domain this one belongs to (a membership group's organisation)."
    )
    membership_group: str | None = strawberry.field(
        description="An organisation's membership-group domain."
    )
    inherited_services: list[str] = strawberry.field(
        description="Ids of the `service` entries inherited from the protocol."
    )
    relationships: strawberry.Private[list[dict[str, str]]]

    @strawberry.field(
        description="[{type, id, relationship, service}], one per outgoing relationship: "
        "`id` the target DID, `relationship` the role (e.g. implementedBy, membershipGroup), "
        "`type` the target's entity type (e.g. Group), `service` always empty since every "
        "target lives in this registry. Costs one read per distinct target per request."
    )
    async def linked_entity(self, info: GraphQLInfo) -> JSON:
        return [
            {
                "type": await info.context.entity_type(edge["target"]),
                "id": edge["target"],
                "relationship": edge["type"],
                "service": "",
            }
            for edge in self.relationships
        ]

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Entity:
        """Map a registry record (as `/v1/domains` returns it) to the ixo entity shape."""
        services = [
            {"id": s["id"], "type": s["type"], "serviceEndpoint": s["endpoint"]}
            for s in record["services"]
        ]
        metadata = {
            **record["metadata"],
            "versionId": str(record["version"]),
            "created": record["createdAt"],
            "updated": record["updatedAt"],
            "deactivated": record["status"] == DEACTIVATED,
        }
        return cls(
            id=record["did"],
            type=record["type"],
            status=IXO_STATUS[record["status"]],
            registry_status=record["status"],
            entity_verified=record["verified"],
            start_date=_datetime(record["validFrom"]),
            end_date=_datetime(record["validUntil"]),
            controller=list(record["controller"]),
            context=[{"key": "class", "val": record["class"]}],
            service=services,
            metadata=metadata,
            registry_metadata=record["metadata"],
            protocol=record["class"],
            twin_class=record["twinClass"],
            properties=record["properties"],
            version=record["version"],
            created_at=datetime.fromisoformat(record["createdAt"]),
            updated_at=datetime.fromisoformat(record["updatedAt"]),
            parent=record["parent"],
            membership_group=record["membershipGroup"],
            inherited_services=list(record["inheritedServices"]),
            relationships=list(record["relationships"]),
        )


@strawberry.type(description="Where a page ends and whether another follows.")
class PageInfo:
    has_next_page: bool
    end_cursor: str | None = strawberry.field(
        description="Pass as `after` to read the next page; null on the last page."
    )


@strawberry.type(description="One page of entities, oldest first.")
class EntitiesConnection:
    nodes: list[Entity]
    page_info: PageInfo
    total_count: int = strawberry.field(description="Entities matching the filter, all pages.")


@strawberry.input(
    description="Exact-match conditions; all that are given must hold. (Unlike PostGraphile, "
    "values are plain, not {equalTo: ...} objects.)"
)
class EntityFilter:
    type: str | None = None
    protocol: str | None = strawberry.field(default=None, description="Protocol (class) DID.")
    entity_verified: bool | None = None
    verified: bool | None = strawberry.field(default=None, description="Same as entityVerified.")
    controller: str | None = strawberry.field(default=None, description="One controller DID.")
    status: int | None = strawberry.field(
        default=None, description="ixo status: 0 active, 1 deactivated, 2 transferred (none)."
    )
    twin_class: str | None = None
    parent: str | None = None

    def to_domain_filter(self) -> DomainFilter:
        both = self.verified is not None and self.entity_verified is not None
        if both and self.verified != self.entity_verified:
            raise _invalid("verified and entityVerified disagree.", "filter.verified")
        verified = self.entity_verified if self.entity_verified is not None else self.verified
        status = None
        if self.status is not None:
            if self.status not in REGISTRY_STATUS:
                raise _invalid("status must be 0, 1 or 2.", "filter.status")
            status = REGISTRY_STATUS[self.status]
        return DomainFilter(
            type=self.type,
            protocol=self.protocol,
            verified=verified,
            controller=self.controller,
            status=status,
            twin_class=self.twin_class,
            parent=self.parent,
        )


Long = NewType("Long", int)  # credit amounts and supplies outgrow GraphQL's 32-bit Int
LONG_SCALAR = strawberry.scalar(
    name="Long",
    description="A whole number beyond GraphQL's 32-bit Int (credit amounts and supplies).",
    serialize=int,
    parse_value=int,
)


@strawberry.type(description="A claim about a project (often one of its assets) and its status.")
class Claim:
    id: str
    collection_id: int
    agent: str
    asset: str | None
    status: str = strawberry.field(
        description="pending, approved, rejected, flagged, disputed or invalidated."
    )
    oracle: str | None
    reason: str | None
    amount: Long | None = strawberry.field(
        description="Credits an approval computed: minted to the claim's owner when the "
        "registry issues the project's monitoring period that carries the claim."
    )
    credential: str | None = strawberry.field(description="Id of the credential it earned.")
    submitted_at: datetime
    evaluated_at: datetime | None
    credits_state: str | None = strawberry.field(
        default=None,
        description='An approved claim\'s credits: "awaiting issuance" or "issued".',
    )
    credits_period: int | None = strawberry.field(
        default=None, description="The monitoring period carrying (or that issued) them."
    )

    @classmethod
    def from_view(cls, view: dict[str, Any]) -> Claim:
        return cls(
            id=view["id"],
            collection_id=view["collection"],
            agent=view["agent"],
            asset=view["asset"],
            status=view["status"],
            oracle=view["oracle"],
            reason=view["reason"],
            amount=view["amount"],
            credential=view["credential"],
            submitted_at=datetime.fromisoformat(view["submittedAt"]),
            evaluated_at=_datetime(view["evaluatedAt"]),
            credits_state=(view.get("credits") or {}).get("state"),
            credits_period=(view.get("credits") or {}).get("period"),
        )


@strawberry.type(description="One page of claims, oldest first.")
class ClaimsConnection:
    nodes: list[Claim]
    page_info: PageInfo


@strawberry.type(description="An event, as GET /v1/events gives it (see docs/events.md).")
class RegistryEvent:
    id: str
    position: Long = strawberry.field(description="Its place in the order; a cursor.")
    type: str
    subject: str
    actor: str
    timestamp: str
    data: JSON


@strawberry.type(description="A page of events the caller may read.")
class EventsConnection:
    nodes: list[RegistryEvent]
    end_cursor: str = strawberry.field(
        description="The last position read: `after` of the next page, also when empty."
    )


@strawberry.type(description="Credits of one class a holder has, and has retired.")
class Balance:
    token: str
    amount: Long = strawberry.field(description="In the token's smallest unit.")
    retired: Long = strawberry.field(description="In the token's smallest unit.")
    decimals: int = strawberry.field(description="Places of the smallest unit: 6 = millionths.")


@strawberry.type(description="A class of credits: minted, retired, and the supply left.")
class CreditClass:
    name: str
    protocol: str
    minted: Long
    retired: Long
    supply: Long


@strawberry.type(
    description="Dashboard figures of a project or organisation over a period (the REST "
    "`/v1/domains/{did}/summary`): stoves by state, claims by status, credits issued and "
    "retired, telemetry online now and per day (cooking sessions, energy) from the day rollups."
)
class Summary:
    domain: str
    type: str
    start: datetime = strawberry.field(name="from")
    end: datetime = strawberry.field(name="to")
    stoves: JSON
    claims: JSON
    credits: JSON
    telemetry: JSON


@strawberry.type(description="Status checks of registry domains (read-only).")
class Query:
    @strawberry.field(
        description="A project's or organisation's summary; `from` defaults to "
        "30 days before `to`, `to` to now."
    )
    async def summary(
        self,
        info: GraphQLInfo,
        id: str,
        start: Annotated[datetime | None, strawberry.argument(name="from")] = None,
        end: Annotated[datetime | None, strawberry.argument(name="to")] = None,
    ) -> Summary:
        context = _authorised(info)
        for moment, name in ((start, "from"), (end, "to")):
            problem = time_problem(moment) if moment is not None else None
            if problem is not None:
                raise _invalid(f"{name}: {problem}.", name)
        try:
            view = await context.platform.summaries.summary(id, start, end)
        except ServiceError as error:
            raise _graphql_error(error) from error
        return Summary(
            domain=view["domain"],
            type=view["type"],
            start=datetime.fromisoformat(view["from"]),
            end=datetime.fromisoformat(view["to"]),
            stoves=view["stoves"],
            claims=view["claims"],
            credits=view["credits"],
            telemetry=view["telemetry"],
        )

    @strawberry.field(description="One claim by id; null when there is none.")
    async def claim(self, info: GraphQLInfo, id: str) -> Claim | None:
        context = _authorised(info)
        try:
            return Claim.from_view(await context.platform.claims.views.claim(id))
        except NotFound:
            return None

    @strawberry.field(description="Claims by collection, agent, asset or status.")
    async def claims(
        self,
        info: GraphQLInfo,
        collection: int | None = None,
        agent: str | None = None,
        asset: str | None = None,
        status: str | None = None,
        first: int | None = None,
        after: str | None = None,
    ) -> ClaimsConnection:
        context = _authorised(info)
        limit = _page_limit(context.platform, first)
        where = ClaimFilter(collection=collection, agent=agent, asset=asset, status=status)
        try:
            if decode_cursor(after) > MAX_SEQ:
                raise _invalid("The cursor is not one this API gave out.", "after")
            page = await context.platform.claims.views.claims(where, after, limit)
        except ServiceError as error:
            raise _graphql_error(error) from error
        return ClaimsConnection(
            nodes=[Claim.from_view(view) for view in page.items],
            page_info=PageInfo(
                has_next_page=page.next_cursor is not None, end_cursor=page.next_cursor
            ),
        )

    @strawberry.field(description="A holder's credit balances (a DID: customer, organisation).")
    async def balances(self, info: GraphQLInfo, holder: str) -> list[Balance]:
        context = _authorised(info)
        return [Balance(**b) for b in await context.platform.credits.balances(holder)]

    @strawberry.field(description="A credit class such as CARBON; null when never minted.")
    async def credit_class(self, info: GraphQLInfo, name: str) -> CreditClass | None:
        context = _authorised(info)
        try:
            view = await context.platform.credits.token(name)
        except NotFound:
            return None
        return CreditClass(
            name=view["name"],
            protocol=view["protocol"],
            minted=view["minted"],
            retired=view["retired"],
            supply=view["supply"],
        )

    @strawberry.field(
        description="A physical twin's live state from its telemetry (issue 12); null when "
        "the registry has no such DID."
    )
    async def telemetry_state(self, info: GraphQLInfo, id: str) -> TelemetryState | None:
        context = _authorised(info)
        assert context.caller is not None
        platform = context.platform
        if not await sees_domain(platform.sessionmaker, id, viewer_of(context.caller)):
            raise _graphql_error(
                Forbidden(
                    f"The telemetry of {id} is for its controllers, its parties and the "
                    "registry role."
                )
            )
        try:
            state = await context.platform.telemetry.state(id)
        except NotFound:
            return None
        except ServiceError as error:
            raise _graphql_error(error) from error
        return TelemetryState(
            did=state["did"],
            last_seen=state["lastSeen"],
            online=state["online"],
            last_seq=state["lastSeq"],
            latest=state["latest"],
            meter_field=state["meterField"],
            meter_total=state["meterTotal"],
            readings=state["readings"],
        )

    @strawberry.field(
        description="Events in order after `after` (a position), of `types` if given: those "
        "of the caller's organisation's domains and households (every one for the registry "
        "role and admins), as GET /v1/events."
    )
    async def events(
        self,
        info: GraphQLInfo,
        after: str | None = None,
        types: list[str] | None = None,
        first: int | None = None,
    ) -> EventsConnection:
        context = _authorised(info)
        assert context.caller is not None
        limit = _page_limit(context.platform, first)
        position = after or "0"
        if not position.isdigit() or int(position) > MAX_SEQ:
            raise _invalid("The cursor is not an event position.", "after")
        try:
            wanted = check_types(types) if types else None
        except ServiceError as error:
            raise _graphql_error(error) from error
        found = await context.platform.events.store.after(
            int(position), limit, wanted, viewer_of(context.caller)
        )
        return EventsConnection(
            nodes=[RegistryEvent(**event.as_json()) for event in found],
            end_cursor=str(found[-1].position if found else int(position)),
        )

    @strawberry.field(description="One entity by DID; null when the registry has no such DID.")
    async def entity(self, info: GraphQLInfo, id: str) -> Entity | None:
        context = _authorised(info)
        try:
            record = await context.platform.domains.get(id)
        except NotFound:
            return None
        except ServiceError as error:
            raise _graphql_error(error) from error
        context.remember(record)
        return Entity.from_record(record)

    @strawberry.field(
        description="Entities in registration order. `first` defaults to REGISTRY_PAGE_SIZE "
        "(50) and is capped at REGISTRY_MAX_PAGE_SIZE; `after` takes a page's endCursor."
    )
    async def entities(
        self,
        info: GraphQLInfo,
        filter: EntityFilter | None = None,
        first: int | None = None,
        after: str | None = None,
    ) -> EntitiesConnection:
        context = _authorised(info)
        limit = _page_limit(context.platform, first)
        where = (filter or EntityFilter()).to_domain_filter()
        try:
            if decode_cursor(after) > MAX_SEQ:  # the service would pass it to the database
                raise _invalid("The cursor is not one this API gave out.", "after")
            page = await context.platform.domains.list(where, after, limit, count=True)
        except ServiceError as error:
            raise _graphql_error(error) from error
        for record in page.items:
            context.remember(record)
        return EntitiesConnection(
            nodes=[Entity.from_record(record) for record in page.items],
            page_info=PageInfo(
                has_next_page=page.next_cursor is not None, end_cursor=page.next_cursor
            ),
            total_count=page.total or 0,
        )


def _page_limit(platform: Platform, first: int | None) -> int:
    """`first`, or the default page size, capped as the REST lists are."""
    if first is not None and first < 1:
        raise _invalid("first must be at least 1.", "first")
    settings = platform.settings
    return min(first or settings.registry.page_size, settings.registry.max_page_size)


def _authorised(info: GraphQLInfo) -> RegistryContext:
    """The context of an authenticated caller (the context getter lets none other
    execute), whose variables' text is storable (kernel.bounds; literals: `TextLiterals`)."""
    if info.context.caller is None:
        raise GraphQLError("Send an API key as 'Authorization: Bearer <API_KEY>'.")
    for path, problem in text_problems(info.variable_values):
        raise _invalid(f"${path} {problem}.", path)
    return info.context


class TextLiterals(ValidationRule):
    """A string literal of a document that no database stores (a NUL, `"a\\u0000b"`; a
    lone surrogate) is refused while the document is validated (kernel.bounds)."""

    def enter_string_value(self, node: StringValueNode, *_: Any) -> None:
        problem = text_problem(node.value)
        if problem is not None:
            self.report_error(
                GraphQLError(f"A string {problem}.", node, extensions={"code": "validation_failed"})
            )


class RegistryErrors(MaskErrors):
    """Errors as callers may see them: a failed statement answered by what it means
    (db/failures.py: a value the database refuses is a `validation_failed` error, a
    database out of reach `unavailable` and marked down), and any other failure of the
    registry itself masked (it must not leak SQL or hosts)."""

    def _process_errors(self, errors: list[GraphQLError]) -> list[GraphQLError]:
        context = self.execution_context.context
        processed = []
        for error in errors:
            original = error.original_error
            failure = _database_failure(error)
            if failure is not None and failure is not Failure.FAULT:
                context.platform.database.failed(original)
                code, message = _FAILURE_ERRORS[failure]
                processed.append(
                    GraphQLError(
                        message,
                        error.nodes,
                        path=error.path,
                        extensions={"code": code, "details": []},
                    )
                )
            elif self.should_mask_error(error):
                processed.append(self.anonymise_error(error))
            else:
                processed.append(error)
        return processed


_UNAVAILABLE = ("unavailable", "The database is unavailable; try again later.")
_FAILURE_ERRORS = {
    Failure.UNREACHABLE: _UNAVAILABLE,
    Failure.BUSY: _UNAVAILABLE,
    Failure.DATA: ("validation_failed", DATA_REFUSED),
    Failure.CONFLICT: ("conflict", "The request conflicts with what is stored."),
}


def _database_failure(error: GraphQLError) -> Failure | None:
    original = error.original_error
    if original is None or isinstance(original, GraphQLError):
        return None
    if not isinstance(original, DATABASE_ERRORS):
        return None
    return classify(original)


# -- schema and router -----------------------------------------------------------------------
def _unexpected(error: GraphQLError) -> bool:
    """A failure of the registry itself, rather than a caller's mistake, a service rule or
    a statement the database refused for the caller's values (or could not run: an outage
    is logged where it is marked)."""
    if error.original_error is None or isinstance(error.original_error, GraphQLError):
        return False
    failure = _database_failure(error)
    return failure is None or failure is Failure.FAULT


class _Schema(strawberry.Schema):
    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        """Log only the registry's own failures: a caller's bad query is answered, not logged."""
        super().process_errors([e for e in errors if _unexpected(e)], execution_context)


def build_schema(max_tokens: int, max_depth: int, max_aliases: int) -> strawberry.Schema:
    """The schema with these request limits: a hostile document is refused while it is
    parsed (tokens) or validated (depth, aliases), before anything runs."""
    return _Schema(
        query=Query,
        config=StrawberryConfig(scalar_map={Long: LONG_SCALAR}),
        extensions=[
            lambda: MaxTokensLimiter(max_token_count=max_tokens),
            # Introspection (GraphiQL's own query nests ofType deeply) is bounded by tokens.
            lambda: QueryDepthLimiter(
                max_depth=max_depth,
                should_ignore=lambda ignored: ignored.field_name.startswith("__"),
            ),
            lambda: MaxAliasesLimiter(max_alias_count=max_aliases),
            lambda: AddValidationRules([TextLiterals]),
            # Internal failures must not leak SQL or hosts to callers.
            lambda: RegistryErrors(
                should_mask_error=_unexpected, error_message="Internal error; logged."
            ),
        ],
    )


def _answers_nothing(request: Request) -> bool:
    """A GET without `query` executes nothing (it opens GraphiQL), so it needs no key:
    a browser cannot send one when opening the page; GraphiQL then sends it with queries."""
    return request.method == "GET" and "query" not in request.query_params


async def registry_context(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> RegistryContext:
    """Authenticate as `/v1` does: 401 (unknown or missing key) and 403 (no reader or writer
    role) leave through the registry's exception handlers, before any GraphQL runs."""
    platform: Platform = request.app.state.platform
    if _answers_nothing(request):
        return RegistryContext(platform, None)
    caller = await reader(await principal(request, credentials))
    return RegistryContext(platform, caller)


_HTTP_CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}


NOT_AN_OBJECT = 'Expected a JSON object: a GraphQL request is {"query": "...", "variables": {}}.'


def http_error(status: int, message: str) -> Response:
    """The router's own refusal of a request (not JSON, not an object, no query): in the
    GraphQL error shape (`errors`, which GraphQL clients read) with the registry's `error`
    object beside it (which every other registry client reads)."""
    code = _HTTP_CODES.get(status, "http_error")
    registry_shape = json.loads(error_response(status, code, message).body)
    body = {"errors": [{"message": message, "extensions": {"code": code}}], **registry_shape}
    return JSONResponse(body, status_code=status)


class RegistryGraphQLRouter(GraphQLRouter[RegistryContext, None]):
    """Strawberry's router, answering its own HTTP errors (a body that is not JSON or not
    an object, no query) as `http_error` does instead of plain text or a 500, and serving
    GraphiQL with the scripts shipped in the package (no CDN: it must work offline)."""

    @property
    def graphql_ide_html(self) -> str:
        return offline_graphiql(super().graphql_ide_html)

    def decode_json(self, data: str | bytes) -> object:
        """A body that is not UTF-8 is malformed JSON (400), not a failure of the server."""
        try:
            return super().decode_json(data)
        except UnicodeDecodeError as error:
            raise json.JSONDecodeError("the body is not UTF-8", "", 0) from error

    def parse_json(self, data: str | bytes) -> Any:
        """A request body (or GET `variables`) that is JSON but not an object (`"AAA"`,
        `1`, `null`, a list: batching is off) is a 400; strawberry read it as a dict."""
        parsed = super().parse_json(data)
        if not isinstance(parsed, dict):
            raise StrawberryHTTPError(400, NOT_AN_OBJECT)
        return parsed

    async def run(  # type: ignore[override]
        self,
        request: Request | WebSocket,
        context: RegistryContext | None = UNSET,
        root_value: None = UNSET,
    ) -> Response | WebSocket:
        try:
            return await super().run(request, context, root_value)
        except StrawberryHTTPError as error:
            return http_error(error.status_code, error.reason)


def create_graphql_router(settings: Settings) -> GraphQLRouter[RegistryContext, None]:
    """The `/graphql` routes (POST and GET queries, GraphiQL) for a registry app: one
    router per set of limits in a process, shared by its apps (it holds no app's state;
    FastAPI's process-wide caches would otherwise keep every app's schema alive)."""
    return _graphql_router(
        settings.registry.graphql_max_tokens,
        settings.registry.graphql_max_depth,
        settings.registry.graphql_max_aliases,
    )


@lru_cache(maxsize=8)
def _graphql_router(
    max_tokens: int, max_depth: int, max_aliases: int
) -> GraphQLRouter[RegistryContext, None]:
    router = RegistryGraphQLRouter(
        build_schema(max_tokens, max_depth, max_aliases),
        path="/graphql",
        context_getter=registry_context,
        graphql_ide="graphiql",
        tags=["graphql"],
        responses={code: ERROR_RESPONSES[code] for code in (400, 401, 403, 413, 503)},
    )
    # No subscriptions: drop the websocket route rather than serve an unauthenticated one.
    router.routes = [route for route in router.routes if not isinstance(route, APIWebSocketRoute)]
    for route in router.routes:
        if isinstance(route, APIRoute) and "GET" in route.methods:
            # A GET without a query answers the GraphiQL page (HTML), with one the result.
            route.responses.setdefault(200, {}).setdefault("content", {})["text/html"] = {}
            # ...and needs no key for the page (see _answers_nothing): optional security.
            route.openapi_extra = {"security": [{}]}
        elif isinstance(route, APIRoute) and "POST" in route.methods:
            route.openapi_extra = {"requestBody": GRAPHQL_POST_BODY}
    return router


GRAPHQL_POST_BODY: dict[str, Any] = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["query"],
                "properties": {
                    "query": {"type": "string", "pattern": r"\S", "description": "The document"},
                    "variables": {"type": ["object", "null"], "description": "Its variables"},
                },
                "description": "A GraphQL request; `operationName` picks one operation of a "
                "document that holds several (an unknown name is a 400).",
            }
        }
    },
}
