"""Query and header parameters whose OpenAPI schema says exactly what the server accepts.

A parameter typed `str | None` is documented as "any string or null", so a client (or a
schema fuzzer) may send `cursor=%05` or `If-Match: null` and be refused with a 422 the
document never warned of. These types keep the routes' own checks and error messages (the
pattern is documented, not enforced a second time) and narrow the documented schema to the
strings those checks let through.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import parse_qsl

from fastapi import Header, Query
from pydantic import AfterValidator
from starlette.types import Scope

from twinhub.kernel.bounds import time_problem

# An opaque cursor is base64url (unpadded) of a decimal sequence number (services/paging.py):
# every 3 digits make 4 characters. The first character of each quartet is one of M, N, O
# (0x30-0x3f's top six bits), and the rest follow from the digit's bits. At most 18 digits,
# so every cursor the pattern allows decodes below 2**63.
_QUARTET = r"(?:[MN][DTjz]|O[DT])[AEIMQUYcgk][w-z0-5]"
_TAIL = r"(?:(?:[MN][DTjz]|O[DT])[AEIMQUYcgk]|[MN][AQgw]|O[AQ])"
CURSOR_PATTERN = rf"^(?:{_QUARTET}){{0,5}}(?:{_QUARTET}|{_TAIL})?$"
# What routes.py's `_if_match` accepts: `*`, or a version as `3`, `"3"` or `W/"3"`.
IF_MATCH_PATTERN = r'^ *(?:\*|(?:W/)?"?[0-9]{1,18}"?) *$'
POSITION_PATTERN = r"^[0-9]{1,18}$"
# A stove problem's reference, as the USSD screen shows it (stove_care: 4 random bytes, hex).
PROBLEM_REFERENCE_PATTERN = r"^[0-9a-f]{8}$"
# RFC 3339 with its offset, as telemetry's `parse_time` and pydantic's datetime both read,
# in the years kernel.bounds allows (1970 to 2099, as written).
DATE_TIME_PATTERN = (
    r"^(?:19[7-9][0-9]|20[0-9][0-9])-(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])"
    r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?(?:Z|[+-](?:0[0-9]|1[0-3]):00)$"
)


def documented(**schema: Any) -> Callable[[dict[str, Any]], None]:
    """A `json_schema_extra` that documents a plain string (not "string or null": an absent
    parameter is already optional) with the given keywords."""

    def narrow(found: dict[str, Any]) -> None:
        found.pop("anyOf", None)
        found.update(type="string", **schema)

    return narrow


def one_of_list(values: Iterable[str]) -> str:
    """The pattern of a comma-separated list of the given values; empty means none given."""
    choice = "|".join(re.escape(value) for value in sorted(values, key=len, reverse=True))
    return rf"^(?:(?:{choice})(?:,(?:{choice}))*)?$"


# A text filter: any string but NUL, which no database column holds (refused in every
# parameter of every route by the app's NulGuard, `nul_parameters` below).
NO_NUL = r"^[^\x00]*$"
Filter = Annotated[str | None, Query(json_schema_extra=documented(pattern=NO_NUL))]
Cursor = Annotated[
    str | None,
    Query(
        description="`nextCursor` of the previous page",
        json_schema_extra=documented(pattern=CURSOR_PATTERN),
    ),
]
IfMatch = Annotated[
    str | None,
    Header(
        description='The version you read (the ETag, as in `"3"`), or `*`',
        json_schema_extra=documented(pattern=IF_MATCH_PATTERN),
    ),
]


def nul_parameters(scope: Scope) -> list[str]:
    """The query parameters of a request (and `path`) that hold a NUL, which no database
    column holds: one check for every route (the registry app's NulGuard), so that no
    parameter reaches SQL with one. An empty list when there is none: the common case is a
    substring search in the raw bytes (a NUL in a query string can only come as %00)."""
    found = ["path"] if "\x00" in scope.get("path", "") else []
    query: bytes = scope.get("query_string", b"")
    if b"%00" in query:
        pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
        found += [name.replace("\x00", "\\0") for name, value in pairs if "\x00" in name + value]
    return found


def _bounded_time(value: datetime) -> datetime:
    problem = time_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


# A time the API takes (a query parameter or a body's field): within kernel.bounds' years,
# checked as written, before anything converts it (year 1 less an offset overflowed).
Moment = Annotated[datetime, AfterValidator(_bounded_time)]
