"""An ASGI app served by uvicorn on a loopback port inside the test's event loop: real
HTTP (sockets, the server's own parsing) in front of a platform the test can also reach."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import uvicorn

from tests.conftest import free_port


@asynccontextmanager
async def uvicorn_served(app: Any) -> AsyncIterator[str]:
    """`app` under uvicorn until the block ends; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:  # uvicorn offers no event to wait on
        if task.done():
            task.result()  # it failed to start: say why
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
