"""Which readings a frozen row (a period's snapshot row, an approved claim's inputs) was
read from: `seen_ranges` keeps a day's sequence numbers as runs, and `behind` picks exactly
those readings back out of everything stored, whatever their receipt times say; a row kept
before `seen` falls back to the receipt-time cut."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from twinhub.mrv.period_inputs import behind, seen_ranges

DAYS = ["2026-10-01", "2026-10-02"]


def reading(seq: int, day: str, received: str | None) -> dict[str, object]:
    return {"seq": seq, "time": f"{day}T06:00:00+00:00", "values": {}, "receivedAt": received}


def test_runs_are_sorted_and_joined() -> None:
    assert seen_ranges([]) == []
    assert seen_ranges([5, 3, 4, 9, 9, 11, 10, 1]) == [[1, 1], [3, 5], [9, 11]]


@given(
    stored=st.sets(st.tuples(st.integers(0, 60), st.sampled_from(DAYS)), max_size=40),
    picked=st.sets(st.integers(0, 60)),
)
def test_behind_gives_back_exactly_the_seen_readings(
    stored: set[tuple[int, str]], picked: set[int]
) -> None:
    readings = [reading(seq, day, "2000-01-01T00:00:00+00:00") for seq, day in sorted(stored)]
    seen = {
        day: seen_ranges(seq for seq, on in stored if on == day and seq in picked) for day in DAYS
    }
    kept = behind({"seen": seen}, readings, "1999-01-01T00:00:00+00:00")
    assert kept == [r for r in readings if r["seq"] in picked]


def test_a_day_the_row_did_not_see_is_late_whole() -> None:
    readings = [reading(1, DAYS[0], None), reading(1, DAYS[1], None)]
    assert behind({"seen": {DAYS[0]: [[1, 1]]}}, readings, None) == readings[:1]


def test_a_row_kept_before_seen_cuts_by_receipt_time() -> None:
    readings = [
        reading(1, DAYS[0], "2026-10-03T00:00:00+00:00"),
        reading(2, DAYS[0], "2026-10-05T00:00:00+00:00"),
        reading(3, DAYS[0], None),  # stored before receipt times were kept
    ]
    assert behind({}, readings, "2026-10-04T00:00:00+00:00") == [readings[0], readings[2]]
    assert behind({}, readings, None) == readings
