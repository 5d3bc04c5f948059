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
from typing import TYPE_CHECKING, Any

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
    header_timeout_seconds: float = 10.0  # HTTP_HEADER_TIMEOUT_SECONDS
    max_connections_per_client: int = 100  # HTTP_MAX_CONNECTIONS_PER_CLIENT (0: no cap)


_REFUSED = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\n"
    b"Connection: close\r\n\r\n"
)
_TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def guarded_protocol(header_timeout: float, per_client: int) -> type[asyncio.Protocol]:
    """Uvicorn's HTTP protocol with what uvicorn lacks against slow clients, for one port.

    Uvicorn closes idle keep-alive connections (`timeout_keep_alive`) and caps everything
    at once (`limit_concurrency`, 503 to all alike), but holds a connection whose headers
    trickle in a byte at a time for as long as the bytes keep coming. Here, a request's
    headers must be complete `header_timeout` seconds after its first byte (after the
    connection opened, for the first request), else 408 and close; and one address holds
    at most `per_client` connections (0: no cap), one more is answered 503 and closed
    before uvicorn sees it. Parsing stays uvicorn's: a request's headers are complete when
    uvicorn starts its request cycle (`cycle`)."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    open_by_client: dict[str, int] = {}

    class Guarded(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
        _guard_client: str | None = None
        _header_deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:  # uvloop's is no asyncio.Transport
            peer = transport.get_extra_info("peername")
            client = str(peer[0]) if isinstance(peer, tuple) and peer else ""
            held = open_by_client.get(client, 0)
            if per_client and held >= per_client:
                transport.write(_REFUSED)
                transport.close()  # uvicorn never tracked it: nothing else to undo
                return
            open_by_client[client] = held + 1
            self._guard_client = client
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            client = self._guard_client
            if client is None:  # refused in connection_made
                return
            self._guard_client = None
            left = open_by_client.get(client, 1) - 1
            if left > 0:
                open_by_client[client] = left
            else:
                open_by_client.pop(client, None)
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            cycle = self.cycle
            if self._header_deadline is None and (cycle is None or cycle.response_complete):
                self._arm()  # the first byte of the next request on a kept-alive connection
            super().data_received(data)
            if self.cycle is not cycle:  # uvicorn parsed the headers: a request began
                self._disarm()

        def _arm(self) -> None:
            self._header_deadline = self.loop.call_later(header_timeout, self._expired)

        def _disarm(self) -> None:
            if self._header_deadline is not None:
                self._header_deadline.cancel()
                self._header_deadline = None

        def _expired(self) -> None:
            self._header_deadline = None
            transport = self.transport
            # An upgraded connection belongs to another protocol; a closing one is gone.
            if transport.is_closing() or transport.get_protocol() is not self:
                return
            transport.write(_TIMED_OUT)
            transport.close()

    return Guarded


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
                http=guarded_protocol(
                    listener.header_timeout_seconds, listener.max_connections_per_client
                ),
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
