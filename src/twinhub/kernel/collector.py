"""The cyclic garbage collector held off while a bulk computation builds many small objects.

A monitoring period of 10,000 stoves makes about a million tuples, floats and dicts, none
in a reference cycle: reference counting frees them all, yet each few hundred allocations
start a young-generation pass and each quarter's growth of the heap a full one, which walk
them again and again (a third of the period's CPU, measured in bench/results/2026-11-28.md,
"period"). Held off for the computation, the collector runs as before afterwards.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_depth = 0  # the pauses open now: the first to open disables, the last to close enables
_paused = False  # whether the pauses open now disabled the collector (it was enabled)
_counting = threading.Lock()  # a pause may open in a worker thread (a draft's report)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Disable the cyclic collector inside the block, nested or overlapping blocks (tasks of
    one event loop) counted, and enable it again when the last one ends, by exception too,
    unless it was already disabled by someone else; threads too. Garbage in cycles made
    meanwhile waits for the next collection; nothing else changes."""
    global _depth, _paused
    with _counting:
        if _depth == 0:
            _paused = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _counting:
            _depth -= 1
            if _depth == 0 and _paused:
                _paused = False
                gc.enable()
