"""Coalescing: single calls that arrive while a batch of them runs are made together next.

Approving one claim costs two dozen statements, each with the same fixed overhead
(SQLAlchemy's async bridge, the driver's round trip), while a batch of a hundred costs
barely more statements than one. So when an oracle's clients send single evaluations
concurrently, the first runs at once (alone, no added wait) and the ones arriving
meanwhile wait for it, then run together as one batch: the group commit of the ledger,
one level up, where the statements are shared too. Each caller still gets its own
outcome; a call never waits for more than the batch ahead of it and its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class Coalescer(Generic[Item, Result]):
    """Runs `run(key, items)` for the items submitted under one `key` (items of different
    keys never share a batch), one batch at a time, at most `max_batch` items each.
    `run` returns one result per item, in order."""

    def __init__(
        self,
        run: Callable[[Hashable, list[Item]], Awaitable[list[Result]]],
        max_batch: int,
    ) -> None:
        self._run = run
        self.max_batch = max(1, max_batch)
        self._waiting: dict[Hashable, list[tuple[Item, asyncio.Future[Result]]]] = {}
        self._drainer: asyncio.Task[None] | None = None
        self.batches = 0  # batches run, and the items they carried: for /metrics and tests
        self.items = 0

    async def submit(self, key: Hashable, item: Item) -> Result:
        """`item`'s result, made in the next batch of its key. A caller cancelled while
        waiting does not stop its batch (its item may be made all the same, as a write
        whose reply was lost)."""
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append((item, future))
        if self._drainer is None:
            self._drainer = asyncio.ensure_future(self._drain())
        return await asyncio.shield(future)

    async def _drain(self) -> None:
        """Run the waiting batches, oldest key first, until none waits."""
        try:
            while self._waiting:
                key = next(iter(self._waiting))
                queued = self._waiting.pop(key)
                batch, rest = queued[: self.max_batch], queued[self.max_batch :]
                if rest:  # the overflow goes first next round
                    self._waiting = {key: rest, **self._waiting}
                self.batches += 1
                self.items += len(batch)
                try:
                    results = await self._run(key, [item for item, _ in batch])
                except BaseException as error:  # every caller of the batch learns it
                    for _, future in batch:
                        if future.done():
                            continue
                        if isinstance(error, Exception):
                            future.set_exception(error)
                        else:
                            future.cancel()
                    if not isinstance(error, Exception):
                        raise
                    continue
                for (_, future), result in zip(batch, results, strict=True):
                    if not future.done():
                        future.set_result(result)
        finally:
            self._drainer = None
            for queued in self._waiting.values():  # cancelled (shutdown): fail the rest
                for _, future in queued:
                    if not future.done():
                        future.cancel()
            self._waiting.clear()
