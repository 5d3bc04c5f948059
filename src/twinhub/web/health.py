"""The seed's two health records: `GET /health` (checks the database for real) and `GET /`."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from twinhub.platform import Platform


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def health(platform: Platform, extra_checks: dict[str, Any] | None = None) -> JSONResponse:
    """200 with `database: connected`, or 503 with `disconnected` while it does not answer."""
    database_ok = await platform.database.check()
    body: dict[str, Any] = {
        "status": "ok" if database_ok else "error",
        "environment": platform.settings.environment.value,
        "timestamp": _now(),
        "uptime": platform.uptime(),
        "database": "connected" if database_ok else "disconnected",
    }
    healthy = database_ok
    for name, ok in (extra_checks or {}).items():
        body[name] = "connected" if ok else "disconnected"
        healthy = healthy and ok
    if not healthy:
        body["status"] = "error"
    return JSONResponse(body, status_code=200 if healthy else 503)


def root(platform: Platform, message: str) -> JSONResponse:
    return JSONResponse(
        {
            "status": "ok",
            "message": message,
            "environment": platform.settings.environment.value,
            "timestamp": _now(),
            "process": os.getpid(),  # which worker answered, with `serve --workers N`
        }
    )


async def metrics_endpoint(request: Request) -> Response:
    """Prometheus text exposition of the app's own registry (`app.state.metrics.registry`)."""
    registry = request.app.state.metrics.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
