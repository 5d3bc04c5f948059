"""Running one or several interfaces in one process, on one event loop, sharing one Platform.

Every HTTP port is bound before anything starts (see `twinhub.startup`): a taken port is
one line and exit status 3, not a crash. A database that does not answer at start is one
line and status 4. Background work of a process (a subscriber, say) goes in `background`:
each is a coroutine factory run as a task after the platform started and cancelled before
it stops.

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
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import uvicorn
from starlette.types import ASGIApp

from twinhub.logging import get_logger
from twinhub.platform import Platform
from twinhub.startup import ExitCode, StartupError, bind_socket, database_failure

if TYPE_CHECKING:
    from twinhub.chain.node import NodeServer

log = get_logger(__name__)


@dataclass(frozen=True)
class Listener:
    name: str
    build: Callable[[Platform | None], ASGIApp]
    host: str
    port: int
    setting: str = "PORT"  # the setting that chooses the port, named when it is taken
    # How long an idle keep-alive connection stays open (HTTP_KEEP_ALIVE_SECONDS). It must
    # outlast the idle timeout of the client's pool (a USSD aggregator, a proxy): when the
    # server closes first, a request sent at that instant meets a closed socket and is lost.
    keep_alive_seconds: float = 75.0


@dataclass
class NodeListener:
    """The chain node (gRPC) of this process; `port` becomes the bound one once started."""

    host: str
    port: int
    server: NodeServer | None = None
    reuse_port: bool = False

    @property
    def address(self) -> str:
        """Where a client in this process reaches the node (a wildcard bind is loopback)."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host  # noqa: S104
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    async def start(self, platform: Platform) -> None:
        from twinhub.chain.bootstrap import build_node

        self.server = build_node(platform)
        try:
            self.port = await self.server.start(self.host, self.port, self.reuse_port)
        except (OSError, RuntimeError):  # grpc reports a busy port as RuntimeError
            await self.stop()
            raise StartupError(
                ExitCode.port_unavailable,
                f"{self.host}:{self.port} is already in use or cannot be bound; choose "
                "another with NODE_PORT (or HOST)",
            ) from None

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop(grace=1.0)
            self.server = None


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield  # signals are handled once, for all servers, by `serve`


async def serve(
    platform: Platform | None,
    listeners: list[Listener],
    node: NodeListener | None = None,
    reuse_port: bool = False,
    background: list[Callable[[], Awaitable[None]]] | None = None,
) -> None:
    """Bind every port, start the platform (when there is one: a gateway fronting another
    node needs none), the node, then every listener; return when all have stopped.
    Raises StartupError (nothing left running) when a port or the database fails."""
    sockets = []
    try:
        for listener in listeners:
            sockets.append(bind_socket(listener.host, listener.port, listener.setting, reuse_port))
    except StartupError:
        for sock in sockets:
            sock.close()
        raise
    if platform is not None:
        try:
            await platform.start()
        except Exception as error:  # unreachable, missing, refused, not migratable
            await platform.stop()
            for sock in sockets:
                sock.close()
            raise database_failure(error) from None
    if node is not None:
        assert platform is not None, "the node answers from a platform"
        node.reuse_port = reuse_port
        try:
            await node.start(platform)
        except StartupError:
            await platform.stop()
            for sock in sockets:
                sock.close()
            raise
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
                timeout_keep_alive=listener.keep_alive_seconds,
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
    tasks: list[asyncio.Task[None]] = []
    try:
        tasks = [asyncio.create_task(work()) for work in background or ()]
        if not servers:  # the node alone: wait for the signal
            await stopping.wait()
        results = await asyncio.gather(
            *(s.serve(sockets=[sock]) for s, sock in zip(servers, sockets, strict=True)),
            return_exceptions=True,
        )
        for listener, result in zip(listeners, results, strict=True):
            if isinstance(result, BaseException):
                log.error("interface failed", interface=listener.name, error=repr(result))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for sock in sockets:
            sock.close()
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
