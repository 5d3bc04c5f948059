"""Start-up failures of `twinhub serve` (issue 15.7): one line naming the cause and the
setting, one documented exit status per cause, never a traceback or a crash (exit 139)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import POSTGRES_URL, free_port

TWINHUB = [sys.executable, "-m", "twinhub"]
SETTINGS = ("PORT", "REGISTRY_PORT", "NODE_PORT", "GATEWAY_PORT")


def serve(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {name: value for name, value in os.environ.items() if name != "REDIS_URL"}
    return subprocess.run(
        [*TWINHUB, "serve", *args],
        env={**base, "DATA_DIR": str(tmp_path / "data"), "LOG_FORMAT": "json", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def failure_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if "cannot start" in line]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("taken", SETTINGS)
def test_a_taken_port_is_one_line_and_exit_3(tmp_path: Path, taken: str) -> None:
    ports = {setting: str(free_port()) for setting in SETTINGS}
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", int(ports[taken])))
        busy.listen()
        result = serve(tmp_path, **ports)
    assert result.returncode == 3, result.stderr
    line = failure_line(result)
    assert taken in line and ports[taken] in line and "in use" in line


def test_a_database_that_does_not_answer_is_one_line_and_exit_4(tmp_path: Path) -> None:
    ports = {setting: str(free_port()) for setting in SETTINGS}
    url = f"postgresql://postgres:secret-word@127.0.0.1:{free_port()}/nothing"
    result = serve(tmp_path, DATABASE_URL=url, DATABASE_CONNECT_TIMEOUT_SECONDS="1", **ports)
    assert result.returncode == 4, result.stderr
    assert "DATABASE_URL" in failure_line(result)
    assert "secret-word" not in result.stderr


def test_a_missing_database_is_one_line_and_exit_4(tmp_path: Path) -> None:
    ports = {setting: str(free_port()) for setting in SETTINGS}
    url = f"{POSTGRES_URL.rsplit('/', 1)[0]}/twinhub_no_such_database"
    result = serve(tmp_path, DATABASE_URL=url, **ports)
    assert result.returncode == 4, result.stderr
    line = failure_line(result)
    assert "DATABASE_URL" in line and "does not exist" in line


def test_several_workers_without_redis_are_refused_with_exit_2(tmp_path: Path) -> None:
    result = serve(tmp_path, "--workers", "2")
    assert result.returncode == 2, result.stderr
    assert "REDIS_URL" in failure_line(result)
