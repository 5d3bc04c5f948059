"""`twinhub serve` as a real process for the tests that need one (schema fuzzing, process
isolation, workers): free ports, a fresh DATA_DIR, health waited for, and at the end a clean
SIGTERM exit with no traceback in stderr."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import free_port
from tests.integration.cli.test_cli import wait_healthy

TWINHUB = [sys.executable, "-m", "twinhub"]
# How long a cold `twinhub serve` may take to answer /health: it imports the whole platform in
# several processes, which on a loaded 2-core machine running a second xdist worker beside it
# took over 60 s. A bound on waiting only: a server that comes up sooner is used sooner.
START_SECONDS = 120
# The port settings of every interface, and the name each answers under in `urls`.
PORTS = {
    "PORT": "ussd",
    "REGISTRY_PORT": "registry",
    "NODE_PORT": "node",
    "GATEWAY_PORT": "gateway",
}


@contextmanager
def serving(
    data_dir: Path, *args: str, wait_for: tuple[str, ...] = ("ussd", "registry"), **env: str
) -> Iterator[dict[str, str]]:
    """Run `twinhub serve *args` until the block ends; yields each interface's base URL.

    REDIS_URL is dropped from the inherited environment (pass it in `env` to use Redis);
    `wait_for` names the interfaces whose /health must answer 200 before the block runs."""
    ports = {name: free_port() for name in PORTS}
    # stderr goes to a file, not a pipe: a long run could fill a pipe nobody reads yet.
    log_path = data_dir.parent / f"{data_dir.name}-stderr.log"
    inherited = {name: value for name, value in os.environ.items() if name != "REDIS_URL"}
    log = log_path.open("w")
    process = subprocess.Popen(
        [*TWINHUB, "serve", *args],
        env={
            **inherited,
            "DATA_DIR": str(data_dir),
            "LOG_FORMAT": "json",
            "LOG_LEVEL": "warning",
            **{name: str(port) for name, port in ports.items()},
            **env,
        },
        stdout=subprocess.DEVNULL,
        stderr=log,
        text=True,
    )
    urls = {PORTS[name]: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    try:
        for name in wait_for:
            try:
                answer = wait_healthy(f"{urls[name]}/health", process, deadline=START_SECONDS)
            except AssertionError as error:
                process.kill()
                process.wait()
                raise AssertionError(f"{error}\n{log_path.read_text()[-3000:]}") from None
            assert answer.status_code == 200, answer.text
        yield urls
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=40)
        log.close()
    stderr = log_path.read_text()
    assert process.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
