"""The `twinhub` command for tests: in this process, or as a real process.

A new `python -m twinhub` spends about 1.5 s of CPU importing the platform before it does
anything; the suite ran the command some sixty times to read what one command prints. So
`run_cli` runs the same Typer app in this process (typer's CliRunner), with the same
arguments and environment, and answers as `subprocess.run` would: the exit status, standard
output and standard error apart, logs included (the command sets up its own logging, as it
does in a process of its own), and an unexpected exception's traceback on standard error.

`run_process` runs the real entry point, for what only a process shows: `serve` (ports,
signals, workers), several commands racing each other, and the end-to-end tests.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

import orjson
import structlog

TWINHUB = [sys.executable, "-m", "twinhub"]

# The loggers a command's logging set-up changes (twinhub.logging.configure_logging, and
# `twinhub demo`, which quiets the audit log).
_LOGGERS = (
    "",
    "uvicorn.access",
    "sqlalchemy.engine",
    "aiosqlite",
    "asyncio",
    "alembic",
    "twinhub.audit",
)
# One command at a time in a process: the runner swaps the process's standard streams and
# environment while a command runs (concurrent callers, as asyncio.gather of threads, wait).
_one_at_a_time = threading.Lock()


def base_env(tmp_path: Path) -> dict[str, str]:
    return {"DATA_DIR": str(tmp_path / "data"), "ENVIRONMENT": "development", "LOG_FORMAT": "json"}


def run_process(
    *args: str, env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`python -m twinhub *args` as a process of its own, with `env` over this one's."""
    return subprocess.run(
        [*TWINHUB, *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_cli(
    *args: str, env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`twinhub *args` run in this process, answered as `run_process` answers.

    The command runs in a thread of its own, so that its `asyncio.run` works from inside a
    test's running event loop as well; the logging it sets up is undone afterwards."""
    outcome: list[subprocess.CompletedProcess[str]] = []
    failure: list[BaseException] = []

    def work() -> None:
        try:
            with _one_at_a_time:
                outcome.append(_invoke(args, env))
        except BaseException as error:  # handed to the caller below
            failure.append(error)

    thread = threading.Thread(target=work, name=f"twinhub {' '.join(args[:2])}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise subprocess.TimeoutExpired([*TWINHUB, *args], timeout)
    if failure:
        raise failure[0]
    return outcome[0]


def _cli_app() -> Any:
    """The command's Typer app. Its module is imported with COLUMNS and LINES unset: the
    module's console then reads them at each print from the environment the command runs
    with, as a process of its own reads them at its start (pytest-xdist's workers have
    COLUMNS=80 set, where a test may give a command COLUMNS=250)."""
    if "twinhub.cli" not in sys.modules:
        saved = {name: os.environ.pop(name) for name in ("COLUMNS", "LINES") if name in os.environ}
        try:
            import twinhub.cli  # noqa: F401 (imported here, with the environment above)
        finally:
            os.environ.update(saved)
    from twinhub.cli import app

    return app


def _invoke(args: tuple[str, ...], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    from typer.testing import CliRunner

    app = _cli_app()
    loggers = [logging.getLogger(name) for name in _LOGGERS]
    saved_levels = [logger.level for logger in loggers]
    saved_handlers = loggers[0].handlers[:]
    structlog_configured = structlog.is_configured()
    saved_structlog: dict[str, Any] = structlog.get_config()
    try:
        result = CliRunner().invoke(app, list(args), env=env, prog_name="twinhub")
    finally:
        for logger, level in zip(loggers, saved_levels, strict=True):
            logger.setLevel(level)
        loggers[0].handlers[:] = saved_handlers
        if structlog_configured:
            structlog.configure(**saved_structlog)
        else:
            structlog.reset_defaults()
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        # What the interpreter prints for an exception nothing caught.
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess([*TWINHUB, *args], result.exit_code, result.stdout, stderr)


async def verify_evidence_offline(
    tmp_path: Path, intact: Any, damaged: Any
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """`twinhub oracle verify-evidence` over two bundles saved to files, as an auditor runs
    it: no data folder it may create (it must not) and no reachable database."""
    saved, changed = tmp_path / "bundle.json", tmp_path / "changed.json"
    saved.write_bytes(orjson.dumps(intact))
    changed.write_bytes(orjson.dumps(damaged))
    env = {"DATA_DIR": str(tmp_path / "nowhere"), "DATABASE_URL": "postgresql://nobody@0.0.0.0:1/x"}
    first, second = await asyncio.gather(
        asyncio.to_thread(run_cli, "oracle", "verify-evidence", str(saved), env=env),
        asyncio.to_thread(run_cli, "oracle", "verify-evidence", str(changed), env=env),
    )
    return first, second
