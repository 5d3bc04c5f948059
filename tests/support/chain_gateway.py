"""A real chain REST gateway for tests: uvicorn on a free loopback port in front of a real
NodeServer over loopback gRPC. No fakes: the node answers from the registry's platform."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Generator
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn

from twinhub.chain.bootstrap import build_node
from twinhub.chain.gateway import GatewayApp, create_gateway_app
from twinhub.platform import Platform
from twinhub.settings import Settings


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield  # the test runner owns the signals


@dataclass
class RunningGateway:
    app: GatewayApp
    url: str
    client: httpx.AsyncClient
    port: int

    async def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.client.get(path, **kwargs)


@contextlib.asynccontextmanager
async def running_gateway(
    settings: Settings, upstream: str, routes_from: str = "descriptors", port: int = 0
) -> AsyncIterator[RunningGateway]:
    """Serve a gateway for `upstream` on 127.0.0.1 until the block ends."""
    app = create_gateway_app(settings, upstream, routes_from)
    server = _Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=2,
        )
    )
    task = asyncio.get_running_loop().create_task(server.serve())
    for _ in range(300):
        if server.started or task.done():
            break
        await asyncio.sleep(0.02)
    if not server.started:
        await task  # raises what stopped it
        raise AssertionError("the gateway did not start")
    bound = server.servers[0].sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{bound}"
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        try:
            yield RunningGateway(app=app, url=url, client=client, port=bound)
        finally:
            server.should_exit = True
            await task


@contextlib.asynccontextmanager
async def running_node(platform: Platform, port: int = 0) -> AsyncIterator[str]:
    """A NodeServer for `platform` on loopback; yields its `host:port`."""
    node = build_node(platform)
    bound = await node.start("127.0.0.1", port)
    try:
        yield f"127.0.0.1:{bound}"
    finally:
        await node.stop(0)


def gateway_settings(settings: Settings, **overrides: Any) -> Settings:
    """The registry's settings (same backend, same Redis) with gateway overrides."""
    values = {**settings.model_dump(), "gateway_rate_limit": "1000000/minute", **overrides}
    return Settings(**values)
