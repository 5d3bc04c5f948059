"""The USSD gateway's HTTP surface (seed part B): routes, rate limiting, failure handling.

Routes are thin: parse, authorise, call the engine, render. Every failure of a dependency
(database, Redis, a stuck session lock) becomes the seed's plain-text
`END Service temporarily unavailable. Please try again later.`, never a 5xx.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import ValidationError
from redis.exceptions import RedisError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from twinhub.db.engine import sqlite_file
from twinhub.db.failures import DATABASE_ERRORS, RETRYABLE, Failure, classify
from twinhub.kernel.ratelimit import MemoryCounter, RateLimiter
from twinhub.logging import get_logger, scrub
from twinhub.platform import Platform
from twinhub.settings import Environment, Settings, setting_name
from twinhub.ussd.engine import UssdEngine
from twinhub.ussd.i18n import ServiceDefaults
from twinhub.ussd.languages import LanguageMemory
from twinhub.ussd.menu import Menu, Reply
from twinhub.ussd.metrics import UssdMetrics
from twinhub.ussd.request import (
    InvalidRequest,
    form_fields,
    parse_ussd_request,
    receive_rest,
    validate_request,
)
from twinhub.ussd.screens import Content, all_contents
from twinhub.ussd.sessions import MemorySessionStore, SessionBusy, SessionStore
from twinhub.ussd.sessions_redis import RedisSessionStore
from twinhub.web.client_ip import client_ip
from twinhub.web.errors import error_response
from twinhub.web.health import health, metrics_endpoint, root
from twinhub.web.operator import operator_denial

log = get_logger(__name__)
USSD_PREFIX = "/api/ussd"


def create_session_store(platform: Platform) -> SessionStore:
    settings = platform.settings
    if platform.redis is not None:
        return RedisSessionStore(
            platform.redis,
            settings.storage.redis_key_prefix,
            ttl=settings.ussd.session_ttl_seconds,
            retention=settings.ussd.session_retention_seconds,
            lock_timeout=settings.ussd.lock_timeout_seconds,
        )
    return MemorySessionStore(
        ttl=settings.ussd.session_ttl_seconds,
        retention=settings.ussd.session_retention_seconds,
        max_sessions=settings.ussd.max_sessions,
        lock_timeout=settings.ussd.lock_timeout_seconds,
    )


class RateLimitMiddleware:
    """429 with Retry-After once a client IP exceeds USSD_RATE_LIMIT on /api/ussd routes."""

    def __init__(self, app: ASGIApp, limiter: RateLimiter, settings: Settings, text: str) -> None:
        self._app = app
        self._text = text  # the whole END reply, in the default language
        self._limiter = limiter
        self._trust_proxy = settings.security.trust_proxy_enabled
        self._hops = settings.security.trust_proxy_hops

    @property
    def counter(self) -> MemoryCounter | None:
        """The in-process counter, when the limit is counted in this process (then `hit`
        needs no await)."""
        return self._limiter.memory

    def client_of(self, scope: Scope) -> str:
        if not self._trust_proxy:
            client = scope.get("client")
            return client[0] if client else "unknown"  # peer_ip, inline
        return client_ip(scope, self._trust_proxy, self._hops)

    async def hit(self, client: str) -> int | None:
        return await self._limiter.hit(client)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(USSD_PREFIX):
            await self._app(scope, receive, send)
            return
        retry_after = await self._limiter.hit(self.client_of(scope))
        if retry_after is None:
            await self._app(scope, receive, send)
            return
        await self.refuse(scope, receive, send, retry_after)

    async def refuse(self, scope: Scope, receive: Receive, send: Send, retry_after: int) -> None:
        """The 429 of a client over the limit: the END reply on the session step, else the
        platform's JSON error."""
        headers = {"Retry-After": str(retry_after)}
        response: Response
        if scope["path"] == USSD_PREFIX:
            scope["app"].state.metrics.replies.labels("rate_limited").inc()
            response = PlainTextResponse(self._text, status_code=429, headers=headers)
        else:
            limit = setting_name("ussd", "rate_limit")
            message = f"Too many requests (the limit per client address is {limit})."
            response = error_response(429, "rate_limited", message, headers=headers)
        await response(scope, receive, send)


PLAIN_TEXT = (b"content-type", b"text/plain; charset=utf-8")
FORM = b"application/x-www-form-urlencoded"
_perf_counter = time.perf_counter


class SessionEndpoint:
    """`POST /api/ussd` as a plain ASGI app: the one route a telecom calls for every key a
    phone sends, so it skips Starlette's Request and Response objects (their header parsing
    and wrapping cost as much as the session step itself) and answers in two messages."""

    def __init__(
        self,
        platform: Platform,
        engine: UssdEngine,
        metrics: UssdMetrics,
        content: Content,
        limits: RateLimitMiddleware | None = None,
    ) -> None:
        self._platform = platform
        # The rate limit, checked here rather than by wrapping this endpoint in the
        # middleware (one call and coroutine fewer per request; the same counter and 429).
        self._limits = limits
        self._counter = limits.counter if limits is not None else None
        self._direct = not platform.settings.security.trust_proxy_enabled  # the peer is the client
        self._engine = engine
        self._max_bytes = platform.settings.ussd.max_body_bytes
        self._unavailable = Reply(True, content.closing.unavailable).render()
        self._invalid = Reply(True, content.closing.invalid_request).render()
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = _perf_counter()
        limits = self._limits
        if limits is not None:
            if self._direct:  # peer_ip, inline
                peer = scope.get("client")
                client = peer[0] if peer else "unknown"
            else:
                client = limits.client_of(scope)
            counter = self._counter
            retry_after = counter.hit(client) if counter is not None else await limits.hit(client)
            if retry_after is not None:
                await limits.refuse(scope, receive, send, retry_after)
                return
        headers = dict(scope["headers"])  # names are lower case; the last of a name counts
        content_type = headers.get(b"content-type")
        declared = headers.get(b"content-length")
        outcome, rendered = "unavailable", self._unavailable
        answer = None
        max_bytes = self._max_bytes
        try:
            # A declared length past the limit is refused before reading; the usual
            # single-message body is taken here, anything longer read by receive_rest.
            if declared is not None and (not declared.isdigit() or int(declared) > max_bytes):
                raise InvalidRequest("body too large")
            first = await receive()
            if first["type"] == "http.request" and not first.get("more_body", False):
                body = first.get("body", b"")
                if len(body) > max_bytes:
                    raise InvalidRequest("body too large")
            else:
                body = await receive_rest(receive, first, max_bytes)
            if content_type == FORM:  # what a gateway sends: parse_ussd_request's own steps
                fields = form_fields(body)
                if self._platform.database.healthy:  # a session's next step, answered now
                    try:
                        answer = self._engine.continue_now(fields)
                    except Exception:  # left to the whole step below, which reports it
                        answer = None
                if answer is None:
                    try:
                        parsed = validate_request(fields)
                    except ValidationError:
                        parsed = parse_ussd_request(FORM.decode(), body)  # says what is wrong
            else:
                text = content_type.decode("latin-1") if content_type is not None else ""
                parsed = parse_ussd_request(text, body)
        except InvalidRequest as error:
            log.info("ussd request rejected", reason=str(error))
            outcome, rendered = "invalid", self._invalid
        else:
            if answer is not None:
                rendered, outcome = answer
            elif self._platform.database.healthy:
                try:
                    engine = self._engine
                    answer = engine.handle_now(parsed)
                    rendered, outcome = answer or await engine.handle(parsed)
                except Exception as error:
                    outcome = "unavailable"
                    if await _report_failure(self._platform, parsed.sessionId, error):
                        outcome, rendered = "invalid", self._invalid
        self._metrics.reply(outcome, _perf_counter() - started)
        payload = rendered.encode()
        length = (b"content-length", str(len(payload)).encode())
        await send({"type": "http.response.start", "status": 200, "headers": [length, PLAIN_TEXT]})
        await send({"type": "http.response.body", "body": payload})


def create_ussd_app(
    platform: Platform | None = None, settings: Settings | None = None
) -> Starlette:
    """The gateway; it opens and closes the platform itself unless one is handed in."""
    owns_platform = platform is None
    platform = platform or Platform(settings or Settings())
    settings = platform.settings
    defaults = ServiceDefaults(settings.ussd.default_languages, settings.ussd.default_language)
    contents = all_contents(
        settings.ussd.service_name, settings.ussd.support_contact, _zone(settings.ussd.timezone)
    )
    # Replies given before a session is known (bad request, outage) speak the default.
    content = contents[defaults.default]
    metrics = UssdMetrics()
    languages = LanguageMemory(
        platform.sessionmaker,
        platform.redis,
        settings.storage.redis_key_prefix,
        sqlite_path=sqlite_file(settings.storage.resolved_database_url),
    )
    menu = Menu(
        platform.customers,
        platform.pin_cipher,
        contents,
        platform.stoves,
        languages,
        defaults,
        platform.stove_care,
        platform.surveys,
    )
    engine = UssdEngine(
        create_session_store(platform),
        menu,
        digest=platform.pin_cipher.digest,
        on_session_started=metrics.session_started,
    )
    production = settings.environment is Environment.production

    async def debug_endpoint(request: Request) -> Response:
        denial = operator_denial(
            request, settings.ussd.operator_token, settings.security.trust_proxy_enabled, production
        )
        if denial is not None:
            return denial
        session_id = request.path_params["session_id"]
        try:
            view = await engine.debug_view(session_id)
        except (RedisError, OSError) as error:
            return _store_unavailable(error)
        if view is None:
            return error_response(
                404,
                "session_not_found",
                "No active session with this id: it expired, ended or never started. "
                "The user must dial again.",
            )
        return JSONResponse(view)

    async def sessions_endpoint(request: Request) -> Response:
        denial = operator_denial(
            request, settings.ussd.operator_token, settings.security.trust_proxy_enabled, production
        )
        if denial is not None:
            return denial
        try:
            active = await engine.store.active_ids()
        except (RedisError, OSError) as error:
            return _store_unavailable(error)
        return JSONResponse({"activeSessions": active, "count": len(active)})

    async def health_endpoint(_: Request) -> Response:
        extra = {}
        if platform.redis is not None:
            extra["redis"] = await _redis_answers(engine.store)
        return await health(platform, extra)

    async def root_endpoint(_: Request) -> Response:
        return root(platform, f"{settings.ussd.service_name} USSD gateway is running")

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        if owns_platform:
            await platform.start()
        try:
            yield
        finally:
            await engine.store.close()
            languages.close()
            if owns_platform:
                await platform.stop()

    limiter = RateLimiter.create(
        settings.ussd.rate_limit_item,
        settings.storage.redis_url.get_secret_value() if settings.storage.redis_url else None,
        settings.storage.redis_key_prefix,
        namespace="ussd",
    )
    rate_limited = Reply(True, content.closing.rate_limited).render()
    session_endpoint = SessionEndpoint(platform, engine, metrics, content)
    routes = [
        Route(USSD_PREFIX, session_endpoint, methods=["POST"]),
        Route(f"{USSD_PREFIX}/debug/{{session_id:path}}", debug_endpoint, methods=["GET"]),
        Route(f"{USSD_PREFIX}/sessions", sessions_endpoint, methods=["GET"]),
        Route("/health", health_endpoint, methods=["GET"]),
        Route("/", root_endpoint, methods=["GET"]),
    ]
    if settings.observability.metrics_enabled:
        routes.append(Route("/metrics", metrics_endpoint, methods=["GET"]))
    app = UssdApp(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error},
    )
    app.state.platform = platform
    app.state.engine = engine
    app.state.metrics = metrics
    app.state.rate_limiter = limiter
    app.add_middleware(RateLimitMiddleware, limiter=limiter, settings=settings, text=rate_limited)
    limits = RateLimitMiddleware(session_endpoint, limiter, settings, rate_limited)
    app.session_step = SessionEndpoint(platform, engine, metrics, content, limits)
    return app


class UssdApp(Starlette):
    """The gateway's Starlette app, with the session step taken straight to its endpoint
    (behind the rate limit): a profile under load had a fifth of the busy time in the
    error, exception and routing layers around that one route. The endpoint answers every
    failure itself (`END Service temporarily unavailable...`), so they have nothing to do
    there; every other route goes through the whole stack."""

    session_step: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        step = self.session_step
        if (
            step is not None
            and scope["type"] == "http"
            and scope["path"] == USSD_PREFIX
            and scope["method"] == "POST"
        ):
            scope["app"] = self
            await step(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def _zone(name: str) -> tzinfo:
    """USSD_TIMEZONE as a zone; an unknown name shows times in UTC (and says so in the log)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        log.warning("USSD_TIMEZONE unknown; times shown in UTC", value=name[:64])
        return UTC


async def _report_failure(platform: Platform, session_id: str, error: Exception) -> bool:
    """Log a failed request without its input; re-probe the database if it may be the
    cause. True when the database refused a value of the request (db/failures.py): the
    caller is told its request is invalid, and nothing is marked down."""
    if isinstance(error, SessionBusy):
        log.warning("ussd session busy", session_id=session_id)
        return False
    if isinstance(error, RedisError):
        log.error("session store unavailable", session_id=session_id, error=scrub(str(error)))
        return False
    failure = classify(error) if isinstance(error, DATABASE_ERRORS) else None
    if failure in (Failure.DATA, Failure.CONFLICT):
        log.warning("ussd request refused by the database", session_id=session_id)
        return True
    if failure in RETRYABLE:
        log.error("database error", session_id=session_id, error=type(error).__name__)
        await platform.database.check()
        return False
    log.exception("ussd request failed", session_id=session_id)
    return False


async def _redis_answers(store: SessionStore) -> bool:
    try:
        async with asyncio.timeout(2):
            return await store.ping()
    except Exception:
        return False


def _store_unavailable(error: Exception) -> Response:
    log.error("session store unavailable", error=scrub(str(error)))
    return error_response(503, "unavailable", "The session store is unavailable.")


async def _http_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return error_response(exc.status_code, code, str(exc.detail), headers=exc.headers)
