"""SQLite's time text of a batch's readings, formatted column-wise (numpy), is the text
sqlite_time (and so SQLAlchemy) writes for each: the keys, ranges and comparisons of the
readings table depend on it to the character."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from twinhub.telemetry.dialects.sqlite import sqlite_time, sqlite_times

_moments = st.datetimes(datetime(1900, 1, 1), datetime(2200, 12, 31))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(_moments, max_size=30), st.sampled_from([None, 5.5, -8.0, 0.0]))
def test_the_column_text_of_times_is_each_time_s_text(
    naive: list[datetime], hours: float | None
) -> None:
    zone = UTC if hours is None else timezone(timedelta(hours=hours))
    moments = [moment.replace(tzinfo=zone) for moment in naive]
    assert sqlite_times(moments) == [sqlite_time(moment) for moment in moments]


def test_whole_seconds_and_the_epoch_keep_their_microseconds() -> None:
    moments = [datetime(1970, 1, 1, tzinfo=UTC), datetime(2026, 5, 1, 10, tzinfo=UTC)] * 8
    assert sqlite_times(moments)[:2] == [
        "1970-01-01 00:00:00.000000",
        "2026-05-01 10:00:00.000000",
    ]
