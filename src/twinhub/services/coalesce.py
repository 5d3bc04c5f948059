"""Coalescing: single calls that arrive while a batch of them runs are made together next.

Approving one claim costs two dozen statements, each with the same fixed overhead
(SQLAlchemy's async bridge, the driver's round trip), while a batch of a hundred costs
barely more statements than one. So when an oracle's clients send single evaluations
concurrently, the first runs at once (alone, no added wait) and the ones arriving
meanwhile wait for it, then run together as one batch: the group commit of the ledger,
one level up, where the statements are shared too. Each caller still gets its own
outcome.

Without more, batches stay small at modest concurrency: with 8 clients each waiting for
its reply before sending again, the callers answered by one batch come back while the
next batch (the others) already runs, so batches alternate at about half the clients.
Hence the linger: after a batch, the coalescer expects its callers back (as many as it
just answered, besides those already waiting) and waits for them, at most `linger`
seconds, before it starts the next batch. A lone caller never waits (a batch starts at
once when nothing ran just before, and the expected count is met by the caller itself);
a caller waits at most for the batch ahead of it, one linger, and its own batch.
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
    `run` returns one result per item, in order. `linger` (seconds, 0: none) is how long
    the next batch may wait for the callers of the last one to come back."""

    def __init__(
        self,
        run: Callable[[Hashable, list[Item]], Awaitable[list[Result]]],
        max_batch: int,
        linger: float = 0.0,
    ) -> None:
        self._run = run
        self.max_batch = max(1, max_batch)
        self.linger = max(0.0, linger)
        self._waiting: dict[Hashable, list[tuple[Item, asyncio.Future[Result]]]] = {}
        self._drainer: asyncio.Task[None] | None = None
        self._arrived: asyncio.Event | None = None  # set by submit while the drainer lingers
        self.batches = 0  # batches run, and the items they carried: for /metrics and tests
        self.items = 0

    async def submit(self, key: Hashable, item: Item) -> Result:
        """`item`'s result, made in the next batch of its key. A caller cancelled while
        waiting does not stop its batch (its item may be made all the same, as a write
        whose reply was lost)."""
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append((item, future))
        if self._arrived is not None:
            self._arrived.set()
        if self._drainer is None:
            self._drainer = asyncio.ensure_future(self._drain())
        return await asyncio.shield(future)

    async def _drain(self) -> None:
        """Run the waiting batches, oldest key first, until none waits (nor is expected)."""
        try:
            while self._waiting:
                key = next(iter(self._waiting))
                queued = self._waiting.pop(key)
                batch, rest = queued[: self.max_batch], queued[self.max_batch :]
                if rest:  # the overflow goes first next round
                    self._waiting = {key: rest, **self._waiting}
                self.batches += 1
                self.items += len(batch)
                await self._run_batch(key, batch)
                if self.linger:
                    expected = min(self.max_batch, len(batch) + len(self._waiting.get(key, ())))
                    await self._wait_for(key, expected)
        finally:
            self._drainer = None
            self._arrived = None
            for queued in self._waiting.values():  # cancelled (shutdown): fail the rest
                for _, future in queued:
                    if not future.done():
                        future.cancel()
            self._waiting.clear()

    async def _wait_for(self, key: Hashable, expected: int) -> None:
        """Wait until `expected` items of `key` wait, at most `linger` seconds; not at all
        while another key's items wait (there is work to do)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.linger
        while len(self._waiting.get(key, ())) < expected:
            if any(other != key for other in self._waiting):
                return
            left = deadline - loop.time()
            if left <= 0:
                return
            self._arrived = arrived = asyncio.Event()
            try:
                await asyncio.wait_for(arrived.wait(), left)
            except TimeoutError:
                pass
            finally:
                self._arrived = None

    async def _run_batch(
        self, key: Hashable, batch: list[tuple[Item, asyncio.Future[Result]]]
    ) -> None:
        """One batch; its callers get their results, or all of them its error."""
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
            return
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)
