"""The console's one table: every long list is declared here as a `TableSpec` (its
columns, sort keys, filters and search) and read from the request by `table_query`; the
`_table.html` macros draw it (search and filter form, sortable headings, pager). The
database does the paging, sorting and filtering (services.listing); this module only
turns query parameters into a `ListQuery` and back into links.

Query parameters, the same on every list: `q` (search), `sort` and `dir` (asc|desc),
`page`, `per_page`, and each filter by its name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from starlette.exceptions import HTTPException
from starlette.requests import Request

from twinhub.kernel.errors import Invalid
from twinhub.services.listing import ListPage, ListQuery

PER_PAGE = 25
PER_PAGE_CHOICES = (25, 50, 100)


@dataclass(frozen=True)
class Column:
    label: str
    sort: str | None = None  # the list's sort key, when the column sorts
    numeric: bool = False


@dataclass(frozen=True)
class Filter:
    name: str
    label: str
    options: Sequence[tuple[str, str]]  # (value, shown); "" is "all"
    default: str = ""


@dataclass(frozen=True)
class TableSpec:
    name: str  # the table's id in the page
    caption: str
    columns: Sequence[Column]
    filters: Sequence[Filter] = ()
    search: str | None = None  # the search box's hint; None: no search
    default_sort: str = ""
    default_descending: bool = False
    stack: bool = False  # on a phone each row is a card (rows holding forms)


def _number(text: str | None, name: str, default: int) -> int:
    if text is None or text == "":
        return default
    try:
        return int(text)
    except ValueError:
        raise HTTPException(422, f"{name} must be a whole number, not {text[:20]!r}.") from None


def table_query(request: Request, spec: TableSpec, **fixed: str) -> ListQuery:
    """The ListQuery the request's parameters ask of `spec`'s list (bad ones: a 422 page
    saying which); `fixed` filters come from the page itself (say, the project)."""
    params = request.query_params
    direction = params.get("dir", "")
    if direction not in ("", "asc", "desc"):
        raise HTTPException(422, "dir must be asc or desc.")
    sort = params.get("sort", "")
    sortable = [c.sort for c in spec.columns if c.sort]
    if sort and sort not in sortable:
        raise HTTPException(422, f"This table sorts by {', '.join(sortable)}, not {sort[:40]!r}.")
    filters = {f.name: params.get(f.name, f.default) for f in spec.filters}
    for each in spec.filters:
        allowed = {value for value, _ in each.options}
        if filters[each.name] and filters[each.name] not in allowed:
            raise HTTPException(422, f"{each.label}: no choice {filters[each.name][:40]!r}.")
    descending = direction == "desc" if direction else (spec.default_descending and not sort)
    try:
        return ListQuery(
            search=params.get("q", "").strip(),
            filters={**filters, **fixed},
            sort=sort or spec.default_sort,
            descending=descending,
            page=_number(params.get("page"), "page", 1),
            per_page=_number(params.get("per_page"), "per_page", PER_PAGE),
        )
    except Invalid as problem:
        details = "; ".join(f"{d.field}: {d.error}" for d in problem.details)
        raise HTTPException(422, f"{problem.message} ({details})") from None


@dataclass
class Table:
    """A page of a list as the macros draw it."""

    spec: TableSpec
    query: ListQuery
    page: ListPage[Any]
    path: str  # the page's own URL path
    keep: Mapping[str, str] = field(default_factory=dict)  # parameters every link keeps

    @property
    def items(self) -> list[Any]:
        return self.page.items

    def _params(self, **changes: Any) -> dict[str, Any]:
        spec_sorts = self.query.sort if self.query.sort != self.spec.default_sort else ""
        params: dict[str, Any] = {
            **self.keep,
            "q": self.query.search,
            **{f.name: self.query.filter(f.name) for f in self.spec.filters},
            "sort": spec_sorts,
            "dir": "desc" if self.query.descending else "",
            "per_page": self.query.per_page if self.query.per_page != PER_PAGE else "",
            "page": self.query.page if self.query.page > 1 else "",
        }
        params.update(changes)
        return {k: v for k, v in params.items() if v not in ("", None)}

    def link(self, **changes: Any) -> str:
        params = self._params(**changes)
        return self.path + (f"?{urlencode(params)}" if params else "")

    def page_link(self, page: int) -> str:
        return self.link(page=page if page > 1 else "")

    def sort_link(self, key: str) -> str:
        """Sorted by `key`, ascending first, the other way when it already is."""
        ascending_now = self.query.sort == key and not self.query.descending
        return self.link(sort=key, dir="desc" if ascending_now else "asc", page="")

    def aria_sort(self, key: str | None) -> str | None:
        if key is None or self.query.sort != key:
            return None
        return "descending" if self.query.descending else "ascending"

    @property
    def hidden(self) -> dict[str, Any]:
        """What the search form sends besides its own fields (sort and kept parameters)."""
        return {
            k: v
            for k, v in self._params().items()
            if k not in {"q", "page", *(f.name for f in self.spec.filters)}
        }


async def table(
    request: Request,
    spec: TableSpec,
    fetch: Any,
    path: str,
    keep: Mapping[str, str] | None = None,
    **fixed: str,
) -> Table:
    """Read the request's query for `spec`, fetch the page (`fetch(query)`), and return the
    Table to render; a page past the end shows the last page."""
    asked = table_query(request, spec, **fixed)
    try:
        page = await fetch(asked)
    except Invalid as problem:
        details = "; ".join(f"{d.field}: {d.error}" for d in problem.details)
        raise HTTPException(422, f"{problem.message} ({details})") from None
    if not page.items and page.total and asked.page > page.pages:
        asked = ListQuery(
            asked.search,
            asked.filters,
            asked.sort,
            asked.descending,
            page.pages,
            asked.per_page,
        )
        page = await fetch(asked)
    return Table(spec, asked, page, path, dict(keep or {}))


def listed(items: Sequence[Any], asked: ListQuery) -> ListPage[Any]:
    """A page of a list that is short by nature (a project's monitoring periods, the
    surveys, the projects) and comes whole from its service: the same table, cut here."""
    rows = list(items)
    return ListPage(
        rows[asked.offset : asked.offset + asked.per_page], len(rows), asked.page, asked.per_page
    )
