"""Pages over a sequence column: the registry API's opaque cursors, and Cosmos-style
windows (key or offset, limit, reverse, total).

The registry API pages with opaque cursors; the chain node must follow Cosmos'
PageRequest instead. Both walk the same monotonically increasing sequence column, so a
key here is simply the sequence number of the last row returned.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import BigInteger, Integer, Select, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from twinhub.kernel.bounds import INT32_MAX, INT64_MAX, integer_problem
from twinhub.kernel.errors import FieldProblem, Invalid

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None
    total: int | None = None


def encode_cursor(seq: int) -> str:
    return base64.urlsafe_b64encode(str(seq).encode()).decode().rstrip("=")


def split_page(rows: list[R], limit: int, key: Callable[[R], int]) -> tuple[list[R], str | None]:
    """Rows fetched with `limit + 1`: the page's rows, and the cursor of the next page
    (None at the end), made from `key` of the page's last row."""
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, encode_cursor(key(rows[-1])) if more and rows else None


_FOREIGN_CURSOR = "The cursor is not one this API gave out."
_CURSOR_PROBLEM = FieldProblem("cursor", "the nextCursor of a previous page")


def decode_cursor(cursor: str | None, column: Any = None) -> int:
    """The sequence number after which a page starts; 0 for the first page. `column` is
    the one the number is compared with: its type bounds it (an INTEGER id at 2^31-1, a
    BIGINT sequence, the default, at 2^63-1), so a cursor past it is refused here rather
    than by the database (kernel.bounds)."""
    if not cursor:
        return 0
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        value = int(base64.urlsafe_b64decode(padded.encode()).decode())
    except (ValueError, UnicodeDecodeError):
        raise Invalid(_FOREIGN_CURSOR, [_CURSOR_PROBLEM]) from None
    if integer_problem(value, column_maximum(column)) is not None:
        raise Invalid(_FOREIGN_CURSOR, [_CURSOR_PROBLEM])
    return value


def column_maximum(column: Any) -> int:
    """The largest value an integer column holds: INTEGER's 32 bits, else BIGINT's 64."""
    kind = getattr(column, "type", None)
    if isinstance(kind, Integer) and not isinstance(kind, BigInteger):
        return INT32_MAX
    return INT64_MAX


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
