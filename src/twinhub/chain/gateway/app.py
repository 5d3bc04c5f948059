"""The gateway's ASGI application: gating, CORS, rate limit, routing, metrics and the
OpenAPI document around the transcoding pipeline (see the package docstring).

Plain ASGI rather than a framework router: the route table is data learnt at start (from
descriptors or reflection), every answer is a ready byte string, and the hot path stays a
handful of dictionary lookups.

HTTP method rules: GET (and HEAD) call the route; OPTIONS answers 204 (a CORS preflight
gets its grant when the origin is allowed); any other method on a served path is 405 with
`Allow: GET, HEAD, OPTIONS` and gRPC code 12 (UNIMPLEMENTED) in the body.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from typing import Any

import grpc
import orjson
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from starlette.types import Receive, Scope, Send

from twinhub.chain.gateway.errors import GatewayError, error_body
from twinhub.chain.gateway.openapi import openapi_document
from twinhub.chain.gateway.reflection import learn
from twinhub.chain.gateway.routes import RouteTable, build_pool, compiled_source, http_bindings
from twinhub.chain.gateway.transcode import build_request
from twinhub.chain.gateway.upstream import HEIGHT_HEADER, Upstream
from twinhub.kernel.ratelimit import RateLimiter
from twinhub.logging import get_logger, scrub
from twinhub.settings import Settings, setting_name
from twinhub.web.client_ip import client_ip

log = get_logger(__name__)
JSON = (b"content-type", b"application/json")
ALLOW = "GET, HEAD, OPTIONS"
SWAGGER_PATHS = frozenset({"/swagger", "/swagger/", "/swagger/openapi.json"})
UNGATED_PATHS = frozenset({"/health", "/metrics"})
REFLECTION_RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0)  # then every 5 s until learnt


MAX_PATH_BYTES = 8192  # a longer path is 414 (it once reached the node and came back 429)


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "twinhub_gateway_requests",
            "Chain REST gateway requests by gRPC method (or unmatched/swagger) and HTTP status.",
            ["route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "twinhub_gateway_request_seconds",
            "Chain REST gateway latency by gRPC method.",
            ["route"],
            registry=self.registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0),
        )


class GatewayApp:
    """One gateway in front of one node (`upstream`, host:port)."""

    def __init__(self, settings: Settings, upstream: str, routes_from: str) -> None:
        if routes_from not in ("descriptors", "reflection"):
            raise ValueError(f"routes_from must be descriptors or reflection, not {routes_from}")
        self.settings = settings
        self.upstream_target = upstream
        self.routes_from = routes_from
        self.upstream: Upstream | None = None
        self.table: RouteTable | None = None
        self.metrics = GatewayMetrics()
        redis_url = (
            settings.storage.redis_url.get_secret_value() if settings.storage.redis_url else None
        )
        self.rate_limiter = RateLimiter.create(
            settings.chain.gateway_rate_limit_item,
            redis_url,
            settings.storage.redis_key_prefix,
            "gateway",
        )
        self._learning: asyncio.Task[None] | None = None
        self._openapi: bytes | None = None

    # ------------------------------------------------------------------ lifespan

    async def startup(self) -> None:
        """Open the channel and learn the routes; a reflection that fails now is retried in
        the background, and requests are answered 503 until it succeeds."""
        self.upstream = Upstream(
            self.upstream_target, self.settings.chain.gateway_upstream_timeout_seconds
        )
        if self.routes_from == "descriptors":
            pool, bindings = compiled_source()
            self._install(RouteTable.build(pool, bindings, **self._table_options()))
            return
        try:
            await self._reflect()
        except Exception as error:
            log.warning(
                "gateway could not learn routes by reflection; retrying in the background",
                upstream=self.upstream_target,
                error=scrub(str(error))[:200],
            )
            self._learning = asyncio.get_running_loop().create_task(self._keep_reflecting())

    async def shutdown(self) -> None:
        if self._learning is not None:
            self._learning.cancel()
            await asyncio.gather(self._learning, return_exceptions=True)
        if self.upstream is not None:
            await self.upstream.close()

    def _table_options(self) -> dict[str, Any]:
        return {
            "prefix": self.settings.chain.gateway_route_prefix,
            "legacy": self.settings.chain.gateway_legacy_routes,
            "disabled": self.settings.chain.gateway_disabled,
        }

    def _install(self, table: RouteTable) -> None:
        unknown = sorted(self.settings.chain.gateway_disabled - table.methods())
        if unknown:
            log.warning("GATEWAY_DISABLED_METHODS names methods with no route", methods=unknown)
        self.table = table
        self._openapi = None
        log.info("gateway routes ready", routes=len(table), source=self.routes_from)

    async def _reflect(self) -> None:
        assert self.upstream is not None
        timeout = min(self.settings.chain.gateway_upstream_timeout_seconds, 5.0)
        services, files = await learn(self.upstream.channel, timeout)
        bindings = [b for b in http_bindings(files, services) if b.verb == "get"]
        self._install(RouteTable.build(build_pool(files), bindings, **self._table_options()))

    async def _keep_reflecting(self) -> None:
        attempt = 0
        while self.table is None:
            delay = REFLECTION_RETRY_SECONDS[min(attempt, len(REFLECTION_RETRY_SECONDS) - 1)]
            await asyncio.sleep(delay)
            attempt += 1
            assert self.upstream is not None
            if not self.upstream.connected:
                self.upstream.reconnect(self.upstream.channel)
            try:
                await self._reflect()
            except Exception as error:
                log.debug("reflection retry failed", error=scrub(str(error))[:200])

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as error:  # pragma: no cover - reported to the server
                    await send({"type": "lifespan.startup.failed", "message": str(error)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    # ------------------------------------------------------------------ requests

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, send)
        elif scope["type"] == "lifespan":
            await self._lifespan(receive, send)

    async def _http(self, scope: Scope, send: Send) -> None:
        started = time.perf_counter()
        path: str = scope["path"]
        verb: str = scope["method"]
        origin = authorization = None
        for name, value in scope["headers"]:
            if name == b"origin":
                origin = value.decode("latin-1")
            elif name == b"authorization":
                authorization = value.decode("latin-1")
        cors = self._cors_headers(origin)
        label = "unmatched"
        headers: list[tuple[bytes, bytes]] = []
        content_type = JSON
        try:
            if verb == "OPTIONS":
                label = "options"
                status, body = 204, b""
                headers = [(b"allow", ALLOW.encode()), *self._preflight(scope, origin)]
            elif path in UNGATED_PATHS and verb in ("GET", "HEAD"):
                label = path[1:]
                status, body, content_type = await self._ungated(path)
            else:
                self._check_credentials(authorization)
                await self._check_rate(scope)
                if path in SWAGGER_PATHS:
                    label = "swagger"
                    self._check_verb(verb)
                    status, body = 200, self._openapi_body()
                else:
                    label, status, body, headers = await self._route(scope, verb)
        except GatewayError as error:
            status, body = error.http_status, error.body()
            headers = [(k.encode(), v.encode()) for k, v in error.headers.items()]
        except Exception:
            log.exception("gateway request failed", route=label)
            status = 500
            body = error_body(grpc.StatusCode.INTERNAL, "the gateway failed to answer")
        if status == 204:
            response_headers = [*headers, *cors]
        else:
            length = (b"content-length", str(len(body)).encode())
            response_headers = [content_type, length, *headers, *cors]
        await send({"type": "http.response.start", "status": status, "headers": response_headers})
        await send({"type": "http.response.body", "body": b"" if verb == "HEAD" else body})
        self.metrics.requests.labels(label, str(status)).inc()
        self.metrics.latency.labels(label).observe(time.perf_counter() - started)

    async def _route(
        self, scope: Scope, verb: str
    ) -> tuple[str, int, bytes, list[tuple[bytes, bytes]]]:
        """Match, transcode, call, render: (metrics label, status, body, headers)."""
        table = self.table
        if table is None:
            raise GatewayError(
                grpc.StatusCode.UNAVAILABLE, "the gateway has not yet learnt the node's routes"
            )
        raw_path = scope.get("raw_path")
        raw = raw_path.decode("latin-1") if raw_path else scope["path"]
        if len(raw) > MAX_PATH_BYTES:  # no id is this long; the node would refuse the call
            raise GatewayError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"the path is longer than {MAX_PATH_BYTES} bytes",
                http_status=414,
            )
        try:
            found = table.match(raw)
        except UnicodeDecodeError:
            raise GatewayError(
                grpc.StatusCode.INVALID_ARGUMENT, "a path value is not UTF-8 after percent-decoding"
            ) from None
        if found is None:
            raise GatewayError(grpc.StatusCode.NOT_FOUND, "no route serves this path")
        route, values = found
        label = route.method.full_name
        self._check_verb(verb)
        if label in table.disabled:
            raise GatewayError(
                grpc.StatusCode.UNIMPLEMENTED, f"{label} is disabled on this gateway"
            )
        request = build_request(route.method.request_type, values, scope.get("query_string", b""))
        assert self.upstream is not None
        body, height = await self.upstream.call_json(
            route.method, request, self._requested_height(scope)
        )
        headers = [(HEIGHT_HEADER.encode(), height.encode())] if height is not None else []
        return label, 200, body, headers

    @staticmethod
    def _requested_height(scope: Scope) -> str | None:
        """The client's `x-cosmos-block-height`, if it sent one the node can be told."""
        asked = next((v for k, v in scope["headers"] if k == HEIGHT_HEADER.encode()), None)
        if asked is None:
            return None
        if not asked.strip() or any(byte < 0x20 or byte > 0x7E for byte in asked):
            raise GatewayError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{HEIGHT_HEADER} must be a block height (a whole number)",
            )
        return asked.decode("ascii").strip()

    @staticmethod
    def _check_verb(verb: str) -> None:
        if verb not in ("GET", "HEAD"):
            raise GatewayError(
                grpc.StatusCode.UNIMPLEMENTED,
                f"{verb} is not allowed here; the gateway serves GET queries",
                http_status=405,
                headers={"allow": ALLOW},
            )

    def _check_credentials(self, authorization: str | None) -> None:
        """401 without a bearer token, 403 with one that is not accepted."""
        tokens = self.settings.chain.gateway_tokens
        if not tokens:
            return
        scheme, _, given = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            raise GatewayError(
                grpc.StatusCode.UNAUTHENTICATED,
                "this gateway needs 'Authorization: Bearer <token>'",
                headers={"www-authenticate": 'Bearer realm="twinhub-gateway"'},
            )
        candidate = given.strip().encode()
        # Compare with every key (no early exit), so timing does not tell which was close.
        accepted = False
        for token in tokens:
            accepted |= hmac.compare_digest(candidate, token)
        if not accepted:
            raise GatewayError(grpc.StatusCode.PERMISSION_DENIED, "this token is not accepted")

    async def _check_rate(self, scope: Scope) -> None:
        settings = self.settings
        client = client_ip(
            scope, settings.security.trust_proxy_enabled, settings.security.trust_proxy_hops
        )
        retry_after = await self.rate_limiter.hit(client)
        if retry_after is not None:
            raise GatewayError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"too many requests (the limit per client address is "
                f"{setting_name('chain', 'gateway_rate_limit')}); slow down",
                headers={"retry-after": str(retry_after)},
            )

    def _cors_headers(self, origin: str | None) -> list[tuple[bytes, bytes]]:
        if origin is None or not self._origin_allowed(origin):
            # The answer depends on Origin whenever origins are configured: say so to caches.
            return [(b"vary", b"Origin")] if self.settings.chain.gateway_origins else []
        return [
            (b"access-control-allow-origin", origin.encode("latin-1")),
            (b"access-control-expose-headers", HEIGHT_HEADER.encode()),
            (b"vary", b"Origin"),
        ]

    def _origin_allowed(self, origin: str) -> bool:
        allowed = self.settings.chain.gateway_origins
        return bool(allowed) and (origin.rstrip("/") in allowed or "*" in allowed)

    def _preflight(self, scope: Scope, origin: str | None) -> list[tuple[bytes, bytes]]:
        """The preflight's own grant: only GET (and HEAD), only for an allowed origin."""
        requested = next(
            (v for k, v in scope["headers"] if k == b"access-control-request-method"), None
        )
        if origin is None or requested not in (b"GET", b"HEAD") or not self._origin_allowed(origin):
            return []
        return [
            (b"access-control-allow-methods", b"GET, OPTIONS"),
            (
                b"access-control-allow-headers",
                b"Authorization, Content-Type, Accept, " + HEIGHT_HEADER.encode(),
            ),
            (b"access-control-max-age", b"600"),
        ]

    async def _ungated(self, path: str) -> tuple[int, bytes, tuple[bytes, bytes]]:
        if path == "/metrics":
            if not self.settings.observability.metrics_enabled:
                raise GatewayError(grpc.StatusCode.NOT_FOUND, "no route serves this path")
            return (
                200,
                generate_latest(self.metrics.registry),
                (
                    b"content-type",
                    CONTENT_TYPE_LATEST.encode(),
                ),
            )
        serving = await self._upstream_serving()
        body = {
            "status": "ok" if serving and self.table is not None else "error",
            "upstream": "serving" if serving else "unavailable",
            "routes": len(self.table) if self.table is not None else 0,
        }
        healthy = body["status"] == "ok"
        return (200 if healthy else 503), orjson.dumps(body), JSON

    async def _upstream_serving(self) -> bool:
        if self.upstream is None:
            return False
        stub = health_pb2_grpc.HealthStub(self.upstream.channel)
        try:
            answer = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1.0)
        except grpc.aio.AioRpcError as error:
            if error.code() is grpc.StatusCode.UNIMPLEMENTED:
                return True  # a node without the health service, yet answering
            if not self.upstream.connected:
                self.upstream.reconnect(self.upstream.channel)
            return False
        return answer.status == health_pb2.HealthCheckResponse.SERVING

    def _openapi_body(self) -> bytes:
        if self.table is None:
            raise GatewayError(
                grpc.StatusCode.UNAVAILABLE, "the gateway has not yet learnt the node's routes"
            )
        if self._openapi is None:
            document = openapi_document(self.table, gated=bool(self.settings.chain.gateway_tokens))
            self._openapi = orjson.dumps(document)
        return self._openapi


def resolve_routes_from(settings: Settings, upstream_given: bool) -> str:
    """GATEWAY_ROUTES_FROM=auto: reflection when fronting a named upstream, else the
    compiled descriptors (the in-process node is twinhub's own)."""
    if settings.chain.gateway_routes_from != "auto":
        return settings.chain.gateway_routes_from
    return "reflection" if upstream_given else "descriptors"


def create_gateway_app(
    settings: Settings, upstream: str | None = None, routes_from: str | None = None
) -> GatewayApp:
    """A gateway for `upstream` (default GATEWAY_GRPC_UPSTREAM)."""
    target = upstream or settings.chain.gateway_grpc_upstream
    if not target:
        raise ValueError("the gateway needs an upstream node (GATEWAY_GRPC_UPSTREAM)")
    chosen = routes_from or resolve_routes_from(settings, upstream_given=upstream is None)
    return GatewayApp(settings, target, chosen)
