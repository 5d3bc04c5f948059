"""`twinhub serve`'s parent process: the USSD gateway in processes of its own, and workers.

A phone session times out at the telecom within seconds, so no registry, GraphQL or chain
request may delay a USSD reply: the parent runs no interface itself. It prepares the
database and keys once (without background work: it opens no MQTT session), then starts
`twinhub serve ussd` and `twinhub serve api` (registry, node and REST gateway) as child
processes, `workers` of each, numbered by WORKER_INDEX, sharing their listening ports
through SO_REUSEPORT (the kernel spreads connections among them). Several workers share
sessions and rate-limit counters through Redis; without REDIS_URL only one is allowed.

The parent forwards SIGTERM/SIGINT to its children and waits for them; a child that stops
by itself stops the others, and the parent exits with the child's status (its own line
already said why), or 5 when the child had no failure status of its own.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from types import FrameType

from twinhub.logging import get_logger
from twinhub.settings import Settings
from twinhub.startup import ExitCode, StartupError, bind_socket

log = get_logger(__name__)
STOP_GRACE_SECONDS = 20.0


def worker_count(value: str) -> int:
    """`auto` is the number of cores this process may run on."""
    if value == "auto":
        return (
            len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else os.cpu_count() or 1
        )
    return int(value)


def check_workers(settings: Settings, workers: int) -> None:
    if workers > 1 and settings.storage.redis_url is None:
        raise StartupError(
            ExitCode.configuration,
            f"{workers} workers need REDIS_URL: without it each process would keep its own "
            "USSD sessions and rate-limit counters; set REDIS_URL or WORKERS=1",
        )


def check_ports(settings: Settings) -> None:
    """Each port free, tried before any worker starts: one clear line instead of workers
    starting and stopping again (a worker binds it again, with SO_REUSEPORT when shared)."""
    for port, setting in (
        (settings.ussd.port, "PORT"),
        (settings.registry.port, "REGISTRY_PORT"),
        (settings.chain.node_port, "NODE_PORT"),
        (settings.chain.gateway_port, "GATEWAY_PORT"),
    ):
        if port:
            bind_socket(settings.server.host, port, setting).close()


def child_environment(settings: Settings) -> dict[str, str]:
    """The environment of a child: the parent's, with the command line's choices applied."""
    return {
        **os.environ,
        "HOST": settings.server.host,
        "PORT": str(settings.ussd.port),
        "REGISTRY_PORT": str(settings.registry.port),
        "NODE_PORT": str(settings.chain.node_port),
        "GATEWAY_PORT": str(settings.chain.gateway_port),
    }


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: the child gets SIGTERM when the parent dies, even by SIGKILL."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def supervise(settings: Settings, workers: int) -> int:
    """Run the children until a signal or a child's own exit; the exit status."""
    reuse = ["--reuse-port"] if workers > 1 else []
    commands = [
        ([sys.executable, "-m", "twinhub", "serve", kind, *reuse], index)
        for kind in ("ussd", "api")
        for index in range(workers)
    ]
    env = child_environment(settings)
    stopping = False

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    # Each worker knows its number (WORKER_INDEX): it names the worker's MQTT session, so
    # the worker restarted in its place resumes it.
    children = [
        subprocess.Popen(  # noqa: S603
            command, env={**env, "WORKER_INDEX": str(index)}, preexec_fn=_die_with_parent
        )
        for command, index in commands
    ]
    log.info("workers started", ussd=workers, api=workers, pids=[c.pid for c in children])
    status = int(ExitCode.stopped)
    try:
        while not stopping:
            failed = next((c for c in children if c.poll() is not None), None)
            if failed is not None:
                code = failed.returncode
                status = code if code > 0 else int(ExitCode.worker_failed)
                log.error(
                    "worker stopped; stopping the others",
                    command=" ".join(failed.args[3:]),
                    status=code,
                )
                break
            time.sleep(0.1)
    finally:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for child in children:
            try:
                child.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return status
