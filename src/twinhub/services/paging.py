"""Cosmos-style pages (key or offset, limit, reverse, total) over a sequence column.

The registry API pages with opaque cursors; the chain node must follow Cosmos'
PageRequest instead. Both walk the same monotonically increasing sequence column, so a
key here is simply the sequence number of the last row returned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import Select, func, select
from sqlalchemy.ext.asyncio import AsyncSession

T = TypeVar("T")


@dataclass(frozen=True)
class Window:
    key: int | None = None  # continue after this sequence number (before it, in reverse)
    offset: int = 0
    limit: int = 100
    reverse: bool = False
    count_total: bool = False


@dataclass(frozen=True)
class WindowPage(Generic[T]):
    items: list[T]
    next_key: int | None
    total: int | None


async def fetch_window(
    session: AsyncSession, query: Select[Any], seq: Any, window: Window
) -> WindowPage[Any]:
    """Rows of `query` (a select of one entity) in the window, and the key of the next."""
    total = None
    if window.count_total:
        total = await session.scalar(select(func.count()).select_from(query.subquery()))
    if window.key is not None:
        query = query.where(seq < window.key if window.reverse else seq > window.key)
    query = query.order_by(seq.desc() if window.reverse else seq)
    if window.offset:
        query = query.offset(window.offset)
    rows = list(await session.scalars(query.limit(window.limit + 1)))
    more = len(rows) > window.limit
    rows = rows[: window.limit]
    next_key = getattr(rows[-1], seq.key) if more and rows else None
    return WindowPage(rows, next_key, total)
