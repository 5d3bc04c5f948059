"""Work that must not be cancelled midway, because others share what it holds.

A ledger write in its turn runs on the batch's one database connection, which the writes
queued behind it join. Cancelling it midway (a request past its deadline) interrupts a
statement on that connection: the driver may leave it unusable, and every write that had
joined the batch then fails with it. Once it has joined, its outcome is the batch's too:
cancelling it while it waits for the commit would report a failure for a write that may yet
be stored. So such code marks its task (`holding_shared`), and whoever cancels on a timer
asks first (`holds_shared`): it answers its caller on time all the same, saying the outcome
is not known, and lets the work end by itself (every statement has its own timeout, so it
does end).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

_holding: weakref.WeakKeyDictionary[asyncio.Task[object], int] = weakref.WeakKeyDictionary()


@contextmanager
def holding_shared() -> Iterator[None]:
    """Mark the current task as holding what others share, for the block's duration."""
    task = asyncio.current_task()
    if task is None:
        yield
        return
    _holding[task] = _holding.get(task, 0) + 1
    try:
        yield
    finally:
        left = _holding.get(task, 1) - 1
        if left:
            _holding[task] = left
        else:
            _holding.pop(task, None)


def holds_shared(task: asyncio.Future[object]) -> bool:
    """Whether `task` is now inside a `holding_shared` block: cancel it only as a last resort."""
    return isinstance(task, asyncio.Task) and _holding.get(task, 0) > 0
