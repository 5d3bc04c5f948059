"""Build a FastAPI app's per-route state before the first request, not during it.

FastAPI builds each included router's route state (dependencies, response models, their
pydantic adapters) lazily, when a request first walks that router: for the registry's ~90
routes that is a few hundred ms of CPU on the event loop, paid by whichever request comes
first after a start (seconds on a busy machine, past the request deadline). A start-up
walk of every router by one request that matches no route pays it before any client
waits.
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Message

UNMATCHED_PATH = "/.twinhub/prepare-routes"  # no route has it: the walk tries them all


async def prepare_routes(router: ASGIApp) -> None:
    """Walk every route of `router` once with a request nobody answers but its 404."""
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": UNMATCHED_PATH,
        "raw_path": UNMATCHED_PATH.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [],
        "client": ("127.0.0.1", 0),
        "server": ("127.0.0.1", 0),
        "state": {},
    }

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(_: Message) -> None:
        return None

    await router(scope, receive, send)
