"""What a value must be before any interface hands it to the database (issue 31 §1): each
rule here, once, for every interface to apply in its own convention.

A value past these bounds is refused as the request's mistake. Let through, it reached
PostgreSQL as a data error (a NUL byte in text, a number past its column's 32 or 64 bits)
or overflowed Python's dates on the way (0001-01-01 less a day), and was answered as an
outage. Whatever still gets through is classified by db/failures.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

INT32_MAX = 2**31 - 1  # an INTEGER column (ids of collections, problems, movements)
INT64_MAX = 2**63 - 1  # a BIGINT column (sequence numbers, positions)
# Times, by the year as written (before any conversion to UTC, which is where year 1 or
# 9999 overflowed): nothing twinhub records happened before 1970 or is due after 2099.
EARLIEST_YEAR = 1970
LATEST_YEAR = 2099
TIME_RANGE = f"within the years {EARLIEST_YEAR} to {LATEST_YEAR}"
NO_NUL = "must not contain a NUL character"
NOT_TEXT = "must be text (a lone UTF-16 surrogate, as JSON's \\ud800, is not)"


def time_problem(moment: datetime) -> str | None:
    """Why `moment` is refused, or None."""
    if EARLIEST_YEAR <= moment.year <= LATEST_YEAR:
        return None
    return f"expected a time {TIME_RANGE}"


def integer_problem(value: int, maximum: int = INT64_MAX, minimum: int = 0) -> str | None:
    """Why a whole number for a column holding `minimum`..`maximum` is refused, or None."""
    if minimum <= value <= maximum:
        return None
    return f"expected a whole number from {minimum} to {maximum}"


def text_problem(value: str) -> str | None:
    """Why text is refused, or None: a NUL, which no text column of PostgreSQL holds, or a
    lone UTF-16 surrogate, which no database's UTF-8 can encode."""
    if "\x00" in value:
        return NO_NUL
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return NOT_TEXT
    return None


def text_problems(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(path, problem) of each string of a JSON value, keys too, that `text_problem`
    refuses; paths as `metadata.name`, `items[2]`."""
    if isinstance(value, str):
        problem = text_problem(value)
        if problem is not None:
            yield path, problem
    elif isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            problem = text_problem(key) if isinstance(key, str) else None
            if problem is not None:
                yield where, problem
            yield from text_problems(item, where)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from text_problems(item, f"{path}[{index}]")
