"""What a test module's fixtures will need, built ahead while earlier tests of the process run.

The browser tests run one module after another on one worker (the browser lane, see
tests/conftest.py), mostly waiting on Chromium and on a served process. Two of those modules
serve data that takes long to make (the views module's `twinhub demo` of 250 stoves, the
scale module's programme of 30,000 stoves), which each built only when it began, while the
lane left a core idle before. A module names what it will need when it is imported (`plan`);
the lane's first fixture starts every piece planned by a module of this run (`start_planned`),
each in a thread of its own; the module's fixture then takes its piece (`take`), waiting for
it if it is not done, or building it there and then if nothing started it (a module run
alone). A piece that failed raises its error in the fixture that takes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass(frozen=True)
class _Plan:
    module: str
    work: Callable[[pytest.TempPathFactory], Any]


_plans: dict[str, _Plan] = {}
_started: dict[str, Future[Any]] = {}
_pool: list[ThreadPoolExecutor] = []


def plan(name: str, module: str, work: Callable[[pytest.TempPathFactory], Any]) -> None:
    """Register `work` (given the run's temporary folder factory) as piece `name` of
    `module` (its __name__)."""
    _plans[name] = _Plan(module, work)


def _start(name: str, factory: pytest.TempPathFactory) -> Future[Any]:
    if name not in _started:
        # The worker's base folder is made here, in the test's thread: pytest makes it on
        # first use by emptying and recreating it, which a piece's thread racing the test's
        # first `tmp_path` would see vanish under it (FileNotFoundError).
        factory.getbasetemp()
        if not _pool:
            _pool.append(ThreadPoolExecutor(thread_name_prefix="ahead"))
        _started[name] = _pool[0].submit(_plans[name].work, factory)
    return _started[name]


def start_planned(modules: Iterable[str], factory: pytest.TempPathFactory) -> None:
    """Start every piece planned by one of `modules` (those with tests in this run)."""
    wanted = set(modules)
    for name, planned in _plans.items():
        if planned.module in wanted:
            _start(name, factory)


def take(name: str, factory: pytest.TempPathFactory) -> Any:
    """Piece `name`, started now if nothing started it yet; waits for it to be done."""
    return _start(name, factory).result()
