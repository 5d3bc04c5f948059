"""A real HTTP receiver for webhook tests: a small Starlette app under uvicorn on a loopback
port, whose behaviour (status, delay, body size) a test changes while it runs."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    port: int
    status: int = 200
    delay: float = 0.0
    answer_bytes: int = 2
    received: list[Received] = field(default_factory=list)
    _server: uvicorn.Server | None = None
    _task: asyncio.Task[Any] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def _hook(self, request: Request) -> Response:
        self.received.append(Received(dict(request.headers), await request.body()))
        if self.delay:
            await asyncio.sleep(self.delay)
        return Response(b"k" * self.answer_bytes, self.status)

    async def start(self) -> Receiver:
        app = Starlette(routes=[Route("/hook", self._hook, methods=["POST"])])
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=self.port,
            log_config=None,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve())
        for _ in range(200):
            if self._server.started:
                return self
            await asyncio.sleep(0.01)
        raise RuntimeError("the receiver did not start")

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
            self._server = self._task = None
