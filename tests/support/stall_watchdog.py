"""A diagnostic for the suite's shared event loop: report when it stops turning.

Every test shares one event loop (pytest-asyncio's session scope), so one piece of code
that blocks it (a synchronous database call, a busy loop) stalls whatever test runs then.
With `TWINHUB_TEST_STALL_SECONDS=<s>` set, a task ticks the loop every 50 ms and a thread
watches the ticks; when the loop has not turned for `<s>` seconds the thread writes the
running test, the loop thread's Python stack and every thread's stack to stderr (and to
`TWINHUB_TEST_STALL_LOG` if set). Off by default: it costs nothing then.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
import traceback
from collections.abc import AsyncIterator

import pytest

STALL_SECONDS = float(os.environ.get("TWINHUB_TEST_STALL_SECONDS", "0") or 0)
_current_test = ["(none)"]


def pytest_runtest_setup(item: pytest.Item) -> None:
    _current_test[0] = item.nodeid


def _report(loop_thread: int, stalled_for: float) -> None:
    frames = sys._current_frames()
    lines = [f"\n=== event loop stalled {stalled_for:.1f}s during {_current_test[0]} ===\n"]
    for ident, frame in frames.items():
        marker = " (event loop)" if ident == loop_thread else ""
        lines.append(f"--- thread {ident}{marker} ---\n")
        lines.extend(traceback.format_stack(frame))
    text = "".join(lines)
    sys.stderr.write(text)
    path = os.environ.get("TWINHUB_TEST_STALL_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(text)


@pytest.fixture(scope="session", autouse=True)
async def stall_watchdog() -> AsyncIterator[None]:
    if STALL_SECONDS <= 0:
        yield
        return
    last_tick = [time.monotonic()]
    stop = threading.Event()
    loop_thread = threading.get_ident()

    async def tick() -> None:
        while True:
            last_tick[0] = time.monotonic()
            await asyncio.sleep(0.05)

    def watch() -> None:
        reported = 0.0
        while not stop.wait(0.25):
            stalled = time.monotonic() - last_tick[0]
            if stalled >= STALL_SECONDS and last_tick[0] != reported:
                reported = last_tick[0]
                _report(loop_thread, stalled)

    ticker = asyncio.create_task(tick())
    watcher = threading.Thread(target=watch, name="stall-watchdog", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        ticker.cancel()
