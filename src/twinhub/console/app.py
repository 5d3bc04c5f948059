"""The console's ASGI app, mounted at /console by the registry app.

Pages are rendered on the server (Jinja2, autoescaped) and call the same services as the
API with the signed-in key's principal; small JS modules add charts, the graph and the
phone. Every response carries a Content-Security-Policy without 'unsafe-inline' scripts.
"""

from __future__ import annotations

from typing import Any

from redis.exceptions import RedisError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from twinhub.console import list_pages, pages, views, workflow_pages
from twinhub.console.assets import STATIC_DIR
from twinhub.console.auth import SignInRequired
from twinhub.console.sessions import SessionStore
from twinhub.platform import Platform
from twinhub.services.programme_views import ProgrammeViews
from twinhub.web.key_failures import KeyFailures

# Scripts only from the package, never inline. Styles may be inline: cytoscape injects its
# own small stylesheet, and a style cannot run code.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
]


class SecurityHeaders:
    """CSP and friends on every console response; pages are never cached (they hold data
    the next user of a shared field-office computer must not see from the cache)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        static = scope["path"].startswith(f"{scope.get('root_path', '')}/static/")

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), *SECURITY_HEADERS]
                if not static:
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        await self._app(scope, receive, sending)


async def _sign_in_required(request: Request, exc: Exception) -> Response:
    target = request.url.path
    if request.url.query:
        target += f"?{request.url.query}"
    response = RedirectResponse(pages.url("/sign-in", next=target), status_code=303)
    return response


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return pages.render(
        request,
        "error.html",
        {"status": exc.status_code, "message": exc.detail},
        status_code=exc.status_code,
    )


async def _sessions_unavailable(request: Request, exc: Exception) -> Response:
    """Redis (where sessions live) is unreachable: say so instead of a bare 500."""
    response = pages.render(
        request,
        "error.html",
        {"status": 503, "message": "Sign-ins are unavailable for a moment; try again shortly."},
        status_code=503,
    )
    response.headers["retry-after"] = "5"
    return response


def create_console_app(
    platform: Platform, sessions: SessionStore, key_failures: KeyFailures
) -> Starlette:
    """The console; `key_failures`: the registry's counter of wrong keys, so that sign-in
    attempts and API calls share one allowance per address."""
    app = Starlette(
        routes=[
            Route("/", pages.dashboard, name="dashboard"),
            Route("/sign-in", pages.sign_in_form, methods=["GET"]),
            Route("/sign-in", pages.sign_in, methods=["POST"]),
            Route("/sign-out", pages.sign_out, methods=["POST"]),
            Route("/graph", views.graph),
            Route("/graph.json", views.graph_data),
            Route("/graph/members.json", views.graph_members),
            Route("/map", views.programme_map),
            Route("/twins/{did:path}", views.twin),
            Route("/claims", list_pages.claims),
            Route("/claims/{claim_id}/evaluation", list_pages.evaluate, methods=["POST"]),
            Route("/support", list_pages.support),
            Route("/support/{reference}/resolution", list_pages.resolve_problem, methods=["POST"]),
            Route("/stoves", list_pages.stoves),
            Route("/households", list_pages.households),
            Route("/events", list_pages.events),
            Route("/webhooks", list_pages.webhooks),
            Route("/governance", pages.governance),
            Route("/governance/proposals/{proposal_id:int}/votes", pages.vote, methods=["POST"]),
            Route(
                "/governance/proposals/{proposal_id:int}/execution",
                pages.execute,
                methods=["POST"],
            ),
            Route("/surveys", pages.surveys),
            Route("/surveys/{survey_id}", pages.survey),
            # The verification workflow (issue 29 §7); the most specific path first, since
            # a DID may hold slashes.
            Route("/projects", workflow_pages.projects),
            Route("/projects/{did:path}/periods/{period_id:int}/review", workflow_pages.review),
            Route("/projects/{did:path}/periods/{period_id:int}", workflow_pages.period),
            Route("/projects/{did:path}/periods", workflow_pages.periods),
            Route("/projects/{did:path}/documents", workflow_pages.documents),
            Route("/attachments/{digest}", workflow_pages.attachment),
            Route("/retirements/{retirement_id:int}", workflow_pages.retirement),
            Route("/ussd", pages.ussd_phone),
            Route("/ussd/send", pages.ussd_send, methods=["POST"]),
            Route("/keys", pages.keys),
            Route("/keys", pages.create_key, methods=["POST"]),
            Route("/keys/{key_id}/revocation", pages.revoke_key, methods=["POST"]),
            Route("/keys/devices", pages.create_device_token, methods=["POST"]),
            Route("/keys/devices/{token_id}/rotation", pages.rotate_device_token, methods=["POST"]),
            Route(
                "/keys/devices/{token_id}/revocation", pages.revoke_device_token, methods=["POST"]
            ),
            Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
        ],
        middleware=[Middleware(SecurityHeaders)],
        exception_handlers={
            SignInRequired: _sign_in_required,
            HTTPException: _http_error,
            RedisError: _sessions_unavailable,
        },
    )
    state: Any = app.state
    state.platform = platform
    state.sessions = sessions
    state.key_failures = key_failures
    state.views = ProgrammeViews(platform.sessionmaker)  # the graph's groups, the map's places
    return app
