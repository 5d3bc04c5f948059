"""Running one or several interfaces in one process, on one event loop, sharing one Platform.

Uvicorn's own signal handling assumes one server per process; here every server's
`capture_signals` is disabled and a single handler asks all of them to stop together.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from collections.abc import Callable, Generator
from dataclasses import dataclass

import uvicorn
from starlette.types import ASGIApp

from twinhub.logging import get_logger
from twinhub.platform import Platform

log = get_logger(__name__)


@dataclass(frozen=True)
class Listener:
    name: str
    build: Callable[[Platform], ASGIApp]
    host: str
    port: int


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield  # signals are handled once, for all servers, by `serve`


async def serve(platform: Platform, listeners: list[Listener]) -> None:
    """Start the platform, then every listener; return when all have stopped."""
    await platform.start()
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

    def stop_all() -> None:
        for server in servers:
            server.should_exit = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop_all)
    for listener in listeners:
        log.info(
            "listening",
            interface=listener.name,
            url=f"http://{listener.host}:{listener.port}",
        )
    try:
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
