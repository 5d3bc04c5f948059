"""Why `twinhub serve` could not start: one line naming the cause and the setting to change,
and one exit status per cause, so that a supervisor (systemd, Kubernetes) can tell them apart.

| status | cause |
|---|---|
| 0 | stopped by SIGTERM or SIGINT |
| 2 | a setting is malformed or missing (its name is printed) |
| 3 | a port cannot be bound: in use or not permitted (PORT, REGISTRY_PORT, ...) |
| 4 | the database does not answer, is missing, or cannot be migrated (DATABASE_URL) |
| 5 | a worker process of `twinhub serve` stopped unexpectedly |
"""

from __future__ import annotations

import errno
import socket
from enum import IntEnum

from twinhub.logging import scrub


class ExitCode(IntEnum):
    stopped = 0
    configuration = 2
    port_unavailable = 3
    database_unavailable = 4
    worker_failed = 5


class StartupError(Exception):
    """A start-up failure an operator can fix; the message is the one line printed."""

    def __init__(self, code: ExitCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def bind_socket(host: str, port: int, setting: str, reuse_port: bool = False) -> socket.socket:
    """A listening TCP socket bound now, before anything else starts, so that a taken port
    stops the start cleanly (uvicorn itself exits the process from inside the event loop,
    which once left the gRPC server's threads to crash the interpreter: exit 139).
    `reuse_port` lets several worker processes share the port (SO_REUSEPORT)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as error:
        sock.close()
        reason = {
            errno.EADDRINUSE: "is already in use",
            errno.EACCES: "needs privileges this process lacks",
            errno.EADDRNOTAVAIL: "names an address this machine does not have",
        }.get(error.errno or 0, f"cannot be bound ({error.strerror})")
        raise StartupError(
            ExitCode.port_unavailable,
            f"{host}:{port} {reason}; choose another with {setting} (or HOST)",
        ) from None
    sock.setblocking(False)
    return sock


def database_failure(error: BaseException) -> StartupError:
    """The one line for a database that cannot be reached or migrated at start."""
    detail = scrub(str(error).strip().splitlines()[0] if str(error).strip() else "")
    cause = type(error).__name__ + (f": {detail[:200]}" if detail else "")
    return StartupError(
        ExitCode.database_unavailable,
        f"the database does not answer or cannot be migrated ({cause}); check DATABASE_URL",
    )
