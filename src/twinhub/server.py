"""Running one or several interfaces in one process, on one event loop, sharing one Platform.

Uvicorn's own signal handling assumes one server per process; here every server's
`capture_signals` is disabled and a single handler asks all of them to stop together. The
chain node is a grpc.aio server on the same loop: it starts before the HTTP servers (the
gateway connects to it) and stops after them.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import uvicorn
from starlette.types import ASGIApp

from twinhub.logging import get_logger
from twinhub.platform import Platform

if TYPE_CHECKING:
    from twinhub.chain.node import NodeServer

log = get_logger(__name__)


@dataclass(frozen=True)
class Listener:
    name: str
    build: Callable[[Platform | None], ASGIApp]
    host: str
    port: int


@dataclass
class NodeListener:
    """The chain node (gRPC) of this process; `port` becomes the bound one once started."""

    host: str
    port: int
    server: NodeServer | None = None

    @property
    def address(self) -> str:
        """Where a client in this process reaches the node (a wildcard bind is loopback)."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host  # noqa: S104
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    async def start(self, platform: Platform) -> None:
        from twinhub.chain.node import NodeServer

        self.server = NodeServer(platform)
        self.port = await self.server.start(self.host, self.port)

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop(grace=1.0)
            self.server = None


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield  # signals are handled once, for all servers, by `serve`


async def serve(
    platform: Platform | None, listeners: list[Listener], node: NodeListener | None = None
) -> None:
    """Start the platform (when there is one: a gateway fronting another node needs none),
    the node, then every listener; return when all have stopped."""
    if platform is not None:
        await platform.start()
    if node is not None:
        assert platform is not None, "the node answers from a platform"
        try:
            await node.start(platform)
        except OSError as error:
            log.error("interface failed", interface="node", error=str(error))
            await platform.stop()
            raise SystemExit(1) from None
    servers = [
        _Server(
            uvicorn.Config(
                listener.build(platform),
                host=listener.host,
                port=listener.port,
                log_config=None,  # twinhub's logging configuration stays in force
                access_log=False,
                proxy_headers=False,  # client IPs are resolved by twinhub (TRUST_PROXY_ENABLED)
                server_header=False,
                lifespan="on",
                timeout_graceful_shutdown=10,
            )
        )
        for listener in listeners
    ]
    loop = asyncio.get_running_loop()
    # Everything loaded so far (modules, settings, engines) lives as long as the process:
    # moving it out of the collector's reach keeps full collections, and their pauses, short.
    gc.collect()
    gc.freeze()

    stopping = asyncio.Event()

    def stop_all() -> None:
        stopping.set()
        for server in servers:
            server.should_exit = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop_all)
    if node is not None:
        log.info("listening", interface="node", url=f"grpc://{node.host}:{node.port}")
    for listener in listeners:
        log.info(
            "listening",
            interface=listener.name,
            url=f"http://{listener.host}:{listener.port}",
        )
    try:
        if not servers:  # the node alone: wait for the signal
            await stopping.wait()
        results = await asyncio.gather(*(s.serve() for s in servers), return_exceptions=True)
        for listener, result in zip(listeners, results, strict=True):
            if isinstance(result, BaseException):
                log.error("interface failed", interface=listener.name, error=repr(result))
        if any(not s.started for s in servers):
            stop_all()
            raise SystemExit(1)  # a port could not be bound: say so with the exit code
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        if node is not None:
            await node.stop()
        if platform is not None:
            await platform.stop()


def run(coroutine_factory: Callable[[], object]) -> None:
    """Run on uvloop when it is installed (it is, through uvicorn[standard])."""
    try:
        import uvloop

        loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - platforms without uvloop
        loop_factory = None
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(coroutine_factory())  # type: ignore[arg-type]
