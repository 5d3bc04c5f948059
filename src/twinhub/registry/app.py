"""The registry API application (interface A): FastAPI, OpenAPI at /docs, GraphQL at /graphql."""

from __future__ import annotations

import asyncio
import functools
import math
import time
from bisect import bisect_left
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from twinhub import __version__
from twinhub.console.app import create_console_app
from twinhub.console.assets import SWAGGER_CSS, SWAGGER_FAVICON, SWAGGER_JS
from twinhub.console.sessions import console_session_store
from twinhub.kernel.bounds import NO_NUL as NUL_PROBLEM
from twinhub.kernel.ratelimit import RateLimiter
from twinhub.kernel.uncancelled import holds_shared
from twinhub.logging import get_logger
from twinhub.platform import Platform
from twinhub.registry.auth import bearer_token
from twinhub.registry.errors import database_unavailable, install_error_handlers
from twinhub.registry.graphql import create_graphql_router
from twinhub.registry.params import nul_parameters
from twinhub.registry.routes import (
    DID_PATH,
    DOMAIN_DID_PATH,
    LIST_PATH,
    LISTED,
    CreateRoute,
    HotRoute,
    ListRoute,
    create_domain,
    create_router,
    hot_router,
    page_size_of,
    router,
)
from twinhub.registry.routes_admin import router as admin_router
from twinhub.registry.routes_claims import (
    CLAIM_PATH,
    CLAIMS_PATH,
    LISTED_CLAIMS,
    ClaimRoute,
    ClaimsListRoute,
    EvaluateRoute,
    SubmitRoute,
    evaluate_claim,
    get_claim,
    submit_claim,
)
from twinhub.registry.routes_claims import router as claims_router
from twinhub.registry.routes_customers import router as customers_router
from twinhub.registry.routes_events import router as events_router
from twinhub.registry.routes_governance import router as governance_router
from twinhub.registry.routes_oracle import router as oracle_router
from twinhub.registry.routes_retirements import router as retirements_router
from twinhub.registry.routes_summaries import router as summaries_router
from twinhub.registry.routes_support import router as support_router
from twinhub.registry.routes_surveys import router as surveys_router
from twinhub.registry.routes_telemetry import router as telemetry_router
from twinhub.registry.routes_workflow import router as workflow_router
from twinhub.services.paging import decode_cursor
from twinhub.settings import Settings, setting_name
from twinhub.web.audit import WriteLog
from twinhub.web.errors import error_response
from twinhub.web.health import health, metrics_endpoint, root
from twinhub.web.key_failures import KeyFailures
from twinhub.web.routes_ready import prepare_routes

DESCRIPTION = """
Register real-world things as digital-twin domains: protocols (templates), domains and
entities, their relationships, versions and ledger history.

Every `/v1` request carries `Authorization: Bearer <API_KEY>` (keys: `twinhub keys create`).
Errors share one shape: `{"error": {"code", "message", "details": [{"field", "error"}]}}`.
POST requests accept an `Idempotency-Key` header; PATCH and DELETE accept `If-Match`.
"""

ATTACHMENTS_PATH = "/v1/attachments"  # its bodies: REGISTRY_MAX_ATTACHMENT_BYTES


class BodyLimit:
    """413 for bodies over the limit, whether announced by Content-Length or streamed.

    A streamed body is read here, up to the limit, before the app sees it: raising from
    inside the app's own body reading would surface as a parse error (400) instead.
    Evidence attachments (`POST /v1/attachments`) have a limit of their own
    (REGISTRY_MAX_ATTACHMENT_BYTES), which no other route gets.
    """

    def __init__(
        self,
        app: ASGIApp,
        limit: int,
        graphql_limit: int | None = None,
        attachment_limit: int | None = None,
    ) -> None:
        self._app = app
        self._default = (limit, setting_name("registry", "max_body_bytes"))
        self._graphql = (graphql_limit or limit, setting_name("registry", "graphql_max_body_bytes"))
        self._attachment = (
            attachment_limit or limit,
            setting_name("registry", "max_attachment_bytes"),
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        # GraphQL documents are parsed in one go on the event loop: a smaller limit keeps
        # that parse short (GRAPHQL_MAX_BODY_BYTES), beside the token limit of the schema.
        path = scope["path"]
        if path.startswith("/graphql"):
            limit = self._graphql
        elif path == ATTACHMENTS_PATH and scope.get("method") == "POST":
            limit = self._attachment
        else:
            limit = self._default
        await self._limited(scope, receive, send, limit)

    async def _limited(
        self, scope: Scope, receive: Receive, send: Send, limit: tuple[int, str]
    ) -> None:
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None:
            if not declared.isdigit() or int(declared) > limit[0]:
                await self._too_large(scope, receive, send, limit)
            else:
                await self._app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away mid-body: nobody to answer, nothing to log
            size += len(message.get("body", b""))
            if size > limit[0]:
                await self._too_large(scope, receive, send, limit)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self._app(scope, replay, send)

    async def _too_large(
        self, scope: Scope, receive: Receive, send: Send, limit: tuple[int, str]
    ) -> None:
        size, setting = limit
        response = error_response(
            413, "too_large", f"Request bodies are limited to {size} bytes ({setting})."
        )
        await response(scope, receive, send)


class NulGuard:
    """A request whose path or query holds a NUL is refused (422, naming the parameters)
    before any route reads it: no database column holds one (params.nul_parameters). The
    check is a substring search per request; the hot lane keeps it."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            found = nul_parameters(scope)
            if found:
                details = [{"field": name, "error": NUL_PROBLEM} for name in found]
                response = error_response(
                    422, "validation_failed", "The request is not valid.", details
                )
                await response(scope, receive, send)
                return
        await self._app(scope, receive, send)


class DatabaseGuard:
    """While the database is known to be down, API requests are answered 503 with
    Retry-After at once, in the registry's error shape, instead of each waiting for its own
    connect timeout; health, metrics and the documentation keep answering."""

    def __init__(self, app: ASGIApp, platform: Platform) -> None:
        self._app = app
        self._platform = platform

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and not self._platform.database.healthy
            and scope["path"].startswith(GUARDED)
        ):
            retry_after = self._platform.settings.storage.retry_after_seconds
            await database_unavailable(retry_after)(scope, receive, send)
            return
        await self._app(scope, receive, send)


GUARDED = ("/v1/", "/graphql")
log = get_logger(__name__)


_unwinding: set[asyncio.Future[None]] = set()  # cancelled requests still unwinding


def _unwound(work: asyncio.Future[None]) -> None:
    _unwinding.discard(work)
    if not work.cancelled() and work.exception() is not None:
        log.info("cancelled request ended with", error=type(work.exception()).__name__)


class RequestDeadline:
    """No API request is held longer than REGISTRY_REQUEST_TIMEOUT_SECONDS before its answer
    starts, whatever holds it (a hung database connection costs a pre-ping, a reconnect and
    a statement before the driver gives up, more than any one of those timeouts). Past the
    deadline the request's work is cancelled, so its transaction rolls back, and the client
    gets the registry's JSON 503 with Retry-After. An answer that has started (an event
    stream) is never cut. Work inside the ledger's turn is the exception: the writes that
    joined its batch share its connection, which a cancelled statement may leave unusable,
    so it is left to end by itself (cancelled only after REGISTRY_WRITE_GRACE_SECONDS more),
    and the 503 says its write may still be stored.

    The work runs in a task of its own, so that its unwinding (which may itself wait on the
    dead connection) can finish in the background once the client has its answer. What
    wakes the request is one future, set by the work's end, its answer's start or a timer:
    a second task and an event per request, as before, cost a tenth of a fast read."""

    def __init__(self, app: ASGIApp, platform: Platform) -> None:
        self._app = app
        self._seconds = platform.settings.registry.request_timeout_seconds
        self._grace = platform.settings.registry.write_grace_seconds
        self._retry_after = platform.settings.storage.retry_after_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(GUARDED):
            await self._app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        started = False

        def wake(_: object = None) -> None:
            if not woken.done():
                woken.set_result(None)

        answered_late = False

        async def sending(message: Message) -> None:
            nonlocal started
            if answered_late:
                return
            if message["type"] == "http.response.start":
                started = True
                wake()
            await send(message)

        work = loop.create_task(self._app(scope, receive, sending))
        work.add_done_callback(wake)
        timer = loop.call_later(self._seconds, wake)
        try:
            await woken
        finally:
            timer.cancel()
        if work.done() or started:
            await work  # finished, or streaming: let it run to its end
            return
        answered_late = True  # whatever the work sends from now on goes nowhere
        message = f"The request did not finish within {self._seconds:g} s; "
        if holds_shared(work):
            # In the ledger's turn: cancelling it would fail the writes sharing its batch.
            # It ends by itself (every statement has a timeout); the grace is a last resort.
            message += "its write may still be stored: read it back before you try again."
            grace = loop.call_later(self._grace, work.cancel)
            work.add_done_callback(lambda _: grace.cancel())
        else:
            message += "try again later."
            work.cancel()
        log.warning("request past its deadline", path=scope["path"], seconds=self._seconds)
        late = error_response(
            503, "unavailable", message, headers={"Retry-After": str(self._retry_after)}
        )
        await late(scope, receive, send)
        _unwinding.add(work)
        work.add_done_callback(_unwound)


class RegistryMetrics:
    """Requests and latency by route. A request adds to plain numbers (`observe`); they
    are moved into the Prometheus metrics whenever the registry is collected (a scrape,
    `get_sample_value`), as the USSD gateway does (ussd/metrics.py): prometheus_client's
    labelled inc and observe were three locks and a dozen calls per request."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_Flush(self))  # first: collected before the metrics below
        self.requests = Counter(
            "twinhub_registry_requests",
            "Registry API requests by route and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "twinhub_registry_request_seconds",
            "Registry API latency by route.",
            ["method", "route"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0),
        )
        self._bounds: list[float] = list(self.latency._upper_bounds)  # ends with +Inf
        # (counter child, histogram child): [requests, seconds, per-bucket observations]
        self._pending: dict[tuple[Any, Any], list[Any]] = {}

    def observe(self, children: tuple[Any, Any], seconds: float) -> None:
        """`children[0].inc()` and `children[1].observe(seconds)`, counted at collection."""
        pending = self._pending.get(children)
        if pending is None:
            pending = self._pending[children] = [0, 0.0, [0] * len(self._bounds)]
        pending[0] += 1
        pending[1] += seconds
        pending[2][bisect_left(self._bounds, seconds)] += 1  # the first bound >= it

    def flush(self) -> None:
        """Move the pending numbers into the metrics (on the event loop's thread, as the
        requests count them: nothing is counted between reading and clearing)."""
        pending, self._pending = self._pending, {}
        for (requests, latency), (count, seconds, buckets) in pending.items():
            requests.inc(count)
            # Histogram.observe's additions in bulk (its private values: pinned version).
            latency._sum.inc(seconds)
            for index, observed in enumerate(buckets):
                if observed:
                    latency._buckets[index].inc(observed)


class _Flush(Collector):
    """A collector of nothing that flushes RegistryMetrics' pending numbers."""

    def __init__(self, metrics: RegistryMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterable[Metric]:
        self._metrics.flush()
        return ()


class ObserveRequests:
    """Count and time requests by route template (never by raw path: DIDs would explode the
    label set). Plain ASGI: no per-request task or body copy."""

    def __init__(self, app: ASGIApp, metrics: RegistryMetrics) -> None:
        self._app = app
        self._metrics = metrics
        # The labelled children by (method, route, status): labels() costs a lock and a
        # look-up per call, and the set of routes is small.
        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            key = (scope["method"], route, status)
            children = self._children.get(key)
            if children is None:
                method, metrics = key[0], self._metrics
                # The domain's own routes keep the label they had before their convertor.
                route = route.replace(DOMAIN_DID_PATH, DID_PATH)
                children = self._children[key] = (
                    metrics.requests.labels(method, route, str(status)),
                    metrics.latency.labels(method, route),
                )
            self._metrics.observe(children, time.perf_counter() - started)


class RecheckedEvery:
    """A yes/no question asked again at most every `seconds`, the answer kept in between."""

    def __init__(self, ask: Callable[[], bool], seconds: float = 1.0) -> None:
        self._ask = ask
        self._seconds = seconds
        self._answer = False
        self._until = -math.inf

    def __call__(self) -> bool:
        now = time.monotonic()
        if now >= self._until:
            self._answer = self._ask()
            self._until = now + self._seconds
        return self._answer


def _recheck_telemetry(app: FastAPI) -> None:
    """FastAPI 0.165 asks on every request whether its native OpenTelemetry is on: the
    global tracer, meter and logger providers, each looked up again (a tenth of a cached
    domain read). twinhub installs none; the answer is now kept for a second, so a provider
    installed while running (auto-instrumentation) is still picked up, a second later."""
    native = getattr(app, "_native_telemetry", None)
    if native is not None and callable(getattr(native, "enabled", None)):
        native.enabled = RecheckedEvery(native.enabled)


# The route (the metrics label) of each read RegistryApp may answer outright.
_READ_PATHS = {
    "domain": f"/v1/domains/{DID_PATH}",
    "claim": CLAIM_PATH,
    "list": LIST_PATH,
    "claims": CLAIMS_PATH,
}


class RegistryApp(FastAPI):
    """The registry's FastAPI app, with a lane of its own for the current version's read
    of a domain (`GET /v1/domains/{did}` without a query string, no body): a wallet or
    dashboard polling twins sends little else. The lane is the same app minus the layers
    that have nothing to do for such a request: the write log (reads are not logged), the
    two body limits (no body), FastAPI's telemetry layers (only while its telemetry is
    off) and the router's search (HotRoute, which the router tries first anyway, is
    matched directly). Error handling, metrics, the database guard and the deadline are
    the same middleware, in the same order. Anything else takes the whole stack.

    Before the lane, `_answer_now` answers the read outright when nothing in it would
    await (SQLite, a known key, the limit counted in process): a read took a task for the
    deadline, five middleware frames, a Request and the record's decoding and encoding."""

    hot_route: Route | None = None
    claim_route: Route | None = None  # `GET /v1/claims/{id}`, the same way (ClaimRoute)
    create_route: CreateRoute | None = None
    submit_route: SubmitRoute | None = None  # `POST /v1/claim-collections/{id}/claims`
    evaluate_route: EvaluateRoute | None = None  # `POST /v1/claims/{id}/evaluations`
    list_route: Route | None = None  # `GET /v1/domains?type=...` and the like (ListRoute)
    claims_list_route: Route | None = None  # `GET /v1/claims?collection=` (ClaimsListRoute)
    answers_now = True  # whether `_answer_now` is asked first (tests compare without it)
    answered_now = 0  # requests it answered

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lanes: dict[str, ASGIApp] = {}  # by read (`_READ_PATHS`), built on first use
        self._kept_children: dict[str, tuple[Any, Any]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and not self.root_path:
            path = scope["path"]
            route = None
            if path in (LIST_PATH, CLAIMS_PATH):
                listing = self.list_route if path == LIST_PATH else self.claims_list_route
                if listing is not None and self.state.reads.fast:
                    await self._listed(listing, scope, receive, send)
                    return
            elif scope.get("query_string"):
                pass
            elif path.startswith(HOT_PREFIX):
                route, claim = self.hot_route, False
            elif path.startswith(CLAIM_PREFIX):
                route, claim = self.claim_route, True
            if (
                route is not None
                and not self._native_telemetry.enabled()
                and _bodiless(scope)
                and await self._hot(route, claim, scope, receive, send)
            ):
                return
        await super().__call__(scope, receive, send)

    async def _listed(self, route: Route, scope: Scope, receive: Receive, send: Send) -> None:
        """A list page ListRoute (or ClaimsListRoute) answers, outright or through its
        lane; any other, the whole stack."""
        if self._native_telemetry.enabled() or not _bodiless(scope):
            await super().__call__(scope, receive, send)
            return
        match, child = route.matches(scope)
        if match is not Match.FULL:
            await super().__call__(scope, receive, send)
            return
        read, key = ("list", LISTED) if route is self.list_route else ("claims", LISTED_CLAIMS)
        await self._kept_or_lane(route, read, child[key], child, scope, receive, send)

    async def _hot(
        self, route: Route, claim: bool, scope: Scope, receive: Receive, send: Send
    ) -> bool:
        """Answer a hot read (a domain's or, when `claim`, a claim's) outright or through
        its lane; False when `route` does not match, for the whole stack to answer."""
        match, child = route.matches(scope)
        if match is not Match.FULL:
            return False
        if claim:
            key, read = child["path_params"]["claim_id"], "claim"
        else:
            key, read = child["path_params"]["did"], "domain"
        await self._kept_or_lane(route, read, key, child, scope, receive, send)
        return True

    async def _kept_or_lane(
        self,
        route: Route,
        read: str,
        key: Any,
        child: Scope,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        """Answer `read` of `key` outright when `_answer_now` can, counted as the metrics
        count a 200 of its route; else through the route's lane, built on first use."""
        started = time.perf_counter()
        answer = self._answer_now(key, scope, read)
        if answer is not None:
            self.answered_now += 1
            try:
                await send({"type": "http.response.start", "status": 200, "headers": answer[0]})
                await send({"type": "http.response.body", "body": answer[1]})
            finally:
                self.state.metrics.observe(self._children_of(read), time.perf_counter() - started)
            return
        scope["app"] = self
        if "router" not in scope:
            scope["router"] = self.router
        scope.update(child)
        lane = self.lanes.get(read)
        if lane is None:
            lane = self.lanes[read] = self._build_hot_lane(route)
        await lane(scope, receive, send)

    def _answer_now(self, key: Any, scope: Scope, read: str) -> tuple[list[Any], bytes] | None:
        """The lane's 200 when it can be given without awaiting anything, else None, having
        changed nothing, for the lane to answer (tests/integration/registry/test_hot_paths.py
        holds the two equal).
        It can when the database is up, the key is the bootstrap key or one checked less
        than five seconds ago (`ApiKeyService.authenticate_now`), the caller may read, the
        rate limit is counted in this process, and the domain is read from a SQLite file
        (`ReadModel.record_now`). The rate limit is counted last, and only a request it lets
        through is answered here: a refused one is refused by the lane, which counts it
        again, as a refusal costs nothing. Nothing awaits before the answer starts, so the
        request deadline (which only ends requests still waiting when it fires) has nothing
        to do, and the request needs no task of its own; the metrics count it as
        ObserveRequests does. An error here leaves the answer to the lane, which reads
        again and answers the error as always. `read` says which read: a domain's (`key` its
        DID), a claim's (its id: `ClaimRecords.claim_now`) or a list page (what ListRoute
        matched: `DomainRecords.list_now`, a page kept and unchanged)."""
        if not self.answers_now:
            return None
        state = self.state
        counter = state.rate_limiter.memory
        platform = state.platform
        if counter is None or not platform.database.healthy:
            return None
        token = bearer_token(scope["headers"])
        if token is None:
            return None
        try:
            caller = platform.api_keys.authenticate_now(token)
            if caller is None or not (caller.is_admin or caller.roles & _READ_ROLES):
                return None
            if read == "claim":
                route = self.claim_route
                assert isinstance(route, ClaimRoute)
                answer = state.reads.claims.claim_now(key, route.render)
            elif read == "claims":
                collection, cursor, limit = key
                size = page_size_of(platform.settings, limit)
                found = decode_cursor(cursor)
                answer = state.reads.claims.collection_now(collection, found, size)
            elif read == "list":
                kind, value, cursor, limit = key
                size = page_size_of(platform.settings, limit)
                answer = state.reads.domains.list_now(kind, value, decode_cursor(cursor), size)
            else:
                answer = state.reads.domains.record_now(key)
        except Exception:
            return None
        if answer is None or counter.hit(caller.did) is not None:
            return None
        return answer

    def _children_of(self, read: str) -> tuple[Any, Any]:
        """The metrics children ObserveRequests counts a 200 of `read`'s route under,
        looked up once."""
        children = self._kept_children.get(read)
        if children is None:
            path = _READ_PATHS[read]
            metrics: RegistryMetrics = self.state.metrics
            children = self._kept_children[read] = (
                metrics.requests.labels("GET", path, "200"),
                metrics.latency.labels("GET", path),
            )
        return children

    def _build_hot_lane(self, route: Route) -> ASGIApp:
        """`build_middleware_stack` for the hot route alone, without the layers above."""
        error_handler = None
        handlers: dict[Any, Any] = {}
        for key, value in self.exception_handlers.items():
            if key in (500, Exception):
                error_handler = value
            else:
                handlers[key] = value
        # ExceptionMiddleware only puts its handlers in the scope and wraps the route in the
        # handling the route's own endpoint wrapper does again (request_response): the
        # lane puts them there itself.
        handling = ExceptionMiddleware(route.handle, handlers=handlers, debug=self.debug)
        in_scope = (handling._exception_handlers, handling._status_handlers)

        async def routed(scope: Scope, receive: Receive, send: Send) -> None:
            scope["starlette.exception_handlers"] = in_scope
            await route.handle(scope, receive, send)

        app: ASGIApp = routed
        for cls, args, kwargs in reversed(self.user_middleware):
            if cls not in _NOTHING_TO_DO_ON_A_READ:
                app = cls(app, *args, **kwargs)
        return ServerErrorMiddleware(app, handler=error_handler, debug=self.debug)


HOT_PREFIX = "/v1/domains/"
CLAIM_PREFIX = "/v1/claims/"
_READ_ROLES = frozenset({"reader", "writer"})  # the `reader` dependency's roles


def _bodiless(scope: Scope) -> bool:
    for name, _ in scope["headers"]:  # noqa: SIM110 (a loop: no generator per request)
        if name in _BODY_HEADERS:
            return False
    return True


_BODY_HEADERS = frozenset({b"content-length", b"transfer-encoding"})


# In this order: the hot read first (see routes.hot_router), then the hot write (see
# routes.create_router), then the routers whose paths the core router's greedy
# /domains/{did:path} would otherwise swallow, the core router last.
_SHARED_ROUTERS = (
    hot_router,
    create_router,
    telemetry_router,
    oracle_router,
    workflow_router,
    governance_router,
    claims_router,
    retirements_router,
    summaries_router,
    admin_router,
    events_router,
    customers_router,
    support_router,
    surveys_router,
    router,
)


@functools.cache
def _included_routers() -> tuple[Any, ...]:
    """The module routers as `FastAPI.include_router` puts them into an app, made once per
    process and shared by every registry app in it.

    FastAPI prepares an included router's routes (dependencies, response models, their
    pydantic adapters) lazily and keeps them in the inclusion: ~80 ms of CPU for the
    registry, which `prepare_routes` paid again at every app start (every test, every CLI
    command that serves). The inclusions depend only on the module routers and on the app's
    router defaults, which every registry app leaves as they are, so one set serves all. The
    one thing an inclusion keeps of its app is where `dependency_overrides` are read: here
    a template app that has none, as no registry app sets any. The module routers have no
    start-up or shutdown handlers of their own, so there is no lifespan to merge."""
    template = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    before = len(template.router.routes)
    for shared in _SHARED_ROUTERS:
        assert not (shared.on_startup or shared.on_shutdown), shared.prefix
        template.include_router(shared)
    return tuple(template.router.routes[before:])


def create_registry_app(
    platform: Platform | None = None, settings: Settings | None = None
) -> FastAPI:
    owns_platform = platform is None
    platform = platform or Platform(settings or Settings())

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if owns_platform:
            await platform.start()
        await prepare_routes(app.router)
        try:
            yield
        finally:
            if owns_platform:
                await platform.stop()  # closes the platform's reads too

    reads = platform.reads  # hot GETs without an ORM session (routes.get_domain)
    app = RegistryApp(
        title="twinhub registry",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served below with the package's own Swagger UI files (no CDN)
        redoc_url=None,
    )
    app.state.platform = platform
    app.state.reads = reads
    _recheck_telemetry(app)
    settings = platform.settings
    redis_url = (
        settings.storage.redis_url.get_secret_value() if settings.storage.redis_url else None
    )
    app.state.rate_limiter = RateLimiter.create(
        settings.registry.rate_limit_item, redis_url, settings.storage.redis_key_prefix, "registry"
    )
    # Wrong keys, at the API and at the console's sign-in alike (web/key_failures.py).
    app.state.key_failures = KeyFailures(settings.security, settings.storage)
    # The public retirement-certificate routes answer without a key: a limit per address.
    app.state.certificate_limiter = RateLimiter.create(
        settings.registry.certificate_rate_limit_item,
        redis_url,
        settings.storage.redis_key_prefix,
        "certificates",
    )
    metrics = RegistryMetrics()
    metrics.registry.register(platform.events.collector())
    metrics.registry.register(platform.claims.evaluations.collector())
    metrics.registry.register(platform.ledger.collector())
    metrics.registry.register(platform.telemetry.collector())
    app.state.metrics = metrics
    install_error_handlers(app)
    # Governance first: its /domains/{did}/verification-proposals routes would otherwise be
    # swallowed by the core router's greedy /domains/{did:path}.
    app.hot_route = HotRoute()
    app.router.routes.insert(0, app.hot_route)  # the current version's read, tried first
    app.create_route = CreateRoute(
        next(r for r in create_router.routes if getattr(r, "endpoint", None) is create_domain)
    )
    app.router.routes.insert(1, app.create_route)  # then the hot writes (see BodyRoute)
    app.submit_route = SubmitRoute(
        next(r for r in claims_router.routes if getattr(r, "endpoint", None) is submit_claim)
    )
    app.router.routes.insert(2, app.submit_route)
    app.evaluate_route = EvaluateRoute(
        next(r for r in claims_router.routes if getattr(r, "endpoint", None) is evaluate_claim)
    )
    app.router.routes.insert(3, app.evaluate_route)
    app.router.routes.extend(_included_routers())  # as include_router, prepared once
    app.list_route = ListRoute()  # matched by the app itself, as the claim read
    app.claim_route = ClaimRoute(  # matched by the app itself (RegistryApp), not the router
        next(r for r in claims_router.routes if getattr(r, "endpoint", None) is get_claim)
    )
    app.claims_list_route = ClaimsListRoute(app.claim_route)
    app.include_router(create_graphql_router(settings))

    # Endpoints read the platform from the request, never from a closure: FastAPI keeps
    # endpoints in process-wide caches, and a closure there would keep this app's whole
    # platform (engine, pools, caches) alive after it stopped.
    @app.get("/health", tags=["health"], include_in_schema=True)
    async def health_endpoint(request: Request) -> Response:
        return await health(request.app.state.platform)

    @app.get("/", tags=["health"])
    async def root_endpoint(request: Request) -> Response:
        return root(request.app.state.platform, "twinhub registry API is running")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> Response:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="twinhub registry",
            swagger_js_url=SWAGGER_JS,
            swagger_css_url=SWAGGER_CSS,
            swagger_favicon_url=SWAGGER_FAVICON,
        )

    # The operator console shares this port; its sessions also let the console's browser
    # code read GET routes of /v1 (see registry/auth.py).
    app.state.console_sessions = console_session_store(platform)
    if settings.console.enabled:
        app.mount(
            "/console",
            create_console_app(platform, app.state.console_sessions, app.state.key_failures),
        )

    if platform.settings.observability.metrics_enabled:
        app.add_route("/metrics", metrics_endpoint, include_in_schema=False)

    app.add_middleware(NulGuard)  # innermost: its refusals are counted and logged as any
    app.add_middleware(RequestDeadline, platform=platform)
    app.add_middleware(DatabaseGuard, platform=platform)
    app.add_middleware(
        BodyLimit,
        limit=settings.registry.max_body_bytes,
        graphql_limit=settings.registry.graphql_max_body_bytes,
        attachment_limit=settings.registry.max_attachment_bytes,
    )
    app.add_middleware(WriteLog)  # one info line per write: actor, route, object, status
    app.add_middleware(ObserveRequests, metrics=metrics)
    return app


# What the hot lane leaves out of the stack (RegistryApp): a body-less GET passes through.
_NOTHING_TO_DO_ON_A_READ = (WriteLog, BodyLimit)
