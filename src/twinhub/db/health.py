"""Knowing whether the database answers, without asking it on every USSD request.

A background probe runs every `DATABASE_HEALTH_INTERVAL_SECONDS`; a query that could not
reach the database marks it down at once (`failed`) and the probe brings it back up when it
answers again, so the gateway recovers by itself after an outage. A query the database
refused for its values (db/failures.py) says nothing about its health and marks nothing.
"""

from __future__ import annotations

import asyncio
import contextlib

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from twinhub.db.failures import Failure, classify
from twinhub.logging import get_logger

log = get_logger(__name__)


class DatabaseMonitor:
    def __init__(self, engine: AsyncEngine, interval: float, timeout: float) -> None:
        self._engine = engine
        self._interval = interval
        self._timeout = timeout
        self._task: asyncio.Task[None] | None = None
        self.healthy = True

    async def check(self) -> bool:
        """Ask the database now; updates `healthy`."""
        try:
            async with asyncio.timeout(self._timeout), self._engine.connect() as connection:
                await connection.execute(text("SELECT 1"))
        except Exception as error:  # any failure to answer is an outage to the caller
            self.mark_down(error)
            return False
        if not self.healthy:
            log.info("database reachable again")
        self.healthy = True
        return True

    def failed(self, error: BaseException) -> Failure:
        """What a failed statement means (db/failures.py); only a failure to reach the
        database marks it down. An error that is no database failure counts as a fault."""
        found = classify(error) or Failure.FAULT
        if found is Failure.UNREACHABLE:
            self.mark_down(error)
        return found

    def mark_down(self, error: BaseException) -> None:
        if self.healthy:
            log.error("database unreachable", error=f"{type(error).__name__}: {error}")
        self.healthy = False

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            await self.check()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="database-monitor")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
