"""One page of a long list, counted, sorted and cut by the database: what the console's
tables show (a page of 25 of 30,000 stoves, sorted by a column, filtered and searched).

A list declares its sort keys (each an SQL expression) and builds its filtered query; this
module gives every list the same rules: a sort key the list does not declare is refused,
the creation order breaks ties (so a page never repeats or skips a row between requests),
search is a case-insensitive substring of the list's own columns with LIKE's wildcards
taken literally, and the page is LIMIT/OFFSET over the filtered, ordered query (the sorts
lists offer are indexed, or over a filter that already narrows the rows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from sqlalchemy import Select, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import ColumnElement

from twinhub.kernel.errors import FieldProblem, Invalid

T = TypeVar("T")
MAX_PER_PAGE = 100
MAX_SEARCH = 100  # characters of a search


@dataclass(frozen=True)
class ListQuery:
    """What a reader asked of a list: a search, filters by name, a sort and a page."""

    search: str = ""
    filters: Mapping[str, str] = field(default_factory=dict)
    sort: str = ""  # "" is the list's own default order
    descending: bool = False
    page: int = 1
    per_page: int = 25

    def __post_init__(self) -> None:
        problems = []
        if len(self.search) > MAX_SEARCH:
            problems.append(FieldProblem("q", f"at most {MAX_SEARCH} characters"))
        if "\x00" in self.search or any("\x00" in v for v in self.filters.values()):
            problems.append(FieldProblem("q", "no NUL characters"))
        if self.page < 1:
            problems.append(FieldProblem("page", "a page number from 1"))
        if not 1 <= self.per_page <= MAX_PER_PAGE:
            problems.append(FieldProblem("per_page", f"from 1 to {MAX_PER_PAGE}"))
        if problems:
            raise Invalid("The list cannot be shown that way.", problems)

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.per_page

    def filter(self, name: str) -> str:
        return self.filters.get(name, "")


@dataclass(frozen=True)
class ListPage(Generic[T]):
    """A page of rows and how many rows the whole filtered list holds."""

    items: list[T]
    total: int
    page: int
    per_page: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.per_page))

    @property
    def first(self) -> int:
        """The 1-based position of the page's first row (0 when empty)."""
        return (self.page - 1) * self.per_page + 1 if self.items else 0

    @property
    def last(self) -> int:
        return self.first + len(self.items) - 1 if self.items else 0


def choose(value: str, allowed: Sequence[str], name: str) -> str:
    """`value` if it is one of `allowed` ("" always is: no filter), else a clear refusal."""
    if value and value not in allowed:
        raise Invalid(
            f"Unknown {name}.", [FieldProblem(name, "one of " + ", ".join(map(str, allowed)))]
        )
    return value


def matching(text: str, *columns: Any) -> ColumnElement[bool]:
    """Rows where any of `columns` holds `text`, case-insensitively; %, _ and \\ in the
    text are matched as themselves."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    pattern = f"%{escaped}%"
    return or_(*(column.ilike(pattern, escape="\\") for column in columns))


async def fetch_page(
    session: AsyncSession,
    query: Select[Any],
    asked: ListQuery,
    sorts: Mapping[str, ColumnElement[Any] | Sequence[ColumnElement[Any]]],
    default: str,
    tiebreak: ColumnElement[Any],
    rows: Select[Any] | None = None,
) -> ListPage[Any]:
    """The page of `query` (a select, filtered) that `asked` names, ordered by its sort key
    (one of `sorts`; `default` when none is asked) and then by `tiebreak`, the list's
    unique creation order, in the same direction; with the filtered list's total. `rows`,
    when given, reads the page's rows (the same columns, without the filters, which the
    choice of `tiebreak`s already applied: a filter scanning the table runs once, not twice).

    The count and the choice of the page's rows read `tiebreak` alone; only the page's own
    rows are then read whole. Reading whole rows to skip them (page 600 of 30,000 stoves
    skips 15,000, each with its JSON read) cost more than the rest of the page."""
    key = choose(asked.sort, list(sorts), "sort") or default
    by = sorts[key]
    columns = list(by) if isinstance(by, Sequence) else [by]
    direction = (lambda c: c.desc()) if asked.descending else (lambda c: c.asc())
    order = [direction(c) for c in [*columns, tiebreak]]
    keys = query.with_only_columns(tiebreak, maintain_column_froms=True).order_by(None)
    total = await session.scalar(select(func.count()).select_from(keys.subquery()))
    chosen = keys.order_by(*order).offset(asked.offset).limit(asked.per_page)
    reading = rows if rows is not None else query
    found = (await session.execute(reading.where(tiebreak.in_(chosen)).order_by(*order))).all()
    return ListPage(list(found), int(total or 0), asked.page, asked.per_page)
