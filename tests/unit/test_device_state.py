"""A device's state advanced by a batch (TelemetryStore._advance_state) finds each field's
newest reading column-wise; it must be what comparing reading by reading gives: the newest
by (time, seq), the last of equals, and the fields in the order they first appear."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from twinhub.mrv.telemetry_schema import Reading
from twinhub.telemetry.rows import DeviceState
from twinhub.telemetry.store import TelemetryStore

START = datetime(2026, 5, 1, tzinfo=UTC)


def _newest_by_reading(inserted: list[Reading]) -> dict[str, Reading]:
    """The reference: each field's newest reading, one reading and field at a time."""
    newest_of: dict[str, Reading] = {}
    for reading in inserted:
        for name in reading.values:
            held = newest_of.get(name)
            if held is None or (held.time, held.seq) <= (reading.time, reading.seq):
                newest_of[name] = reading
    return newest_of


_reading = st.builds(
    Reading,
    st.integers(0, 5),  # few seqs and hours: equal (time, seq) pairs are drawn too
    st.integers(0, 4).map(lambda h: START + timedelta(hours=h)),
    st.dictionaries(st.sampled_from(["a", "b", "c", "meter"]), st.integers(0, 99), min_size=1),
)
_held = st.dictionaries(
    st.sampled_from(["a", "c", "meter"]),
    st.fixed_dictionaries(
        {
            "value": st.integers(0, 99),
            "time": st.integers(0, 6).map(lambda h: (START + timedelta(hours=h)).isoformat()),
            "seq": st.integers(0, 5),
        }
    ),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(_reading, min_size=1, max_size=12), _held, st.integers(0, 6))
def test_the_state_advanced_by_a_batch_is_the_reading_by_reading_one(
    inserted: list[Reading], held: dict[str, Any], last_hour: int
) -> None:
    row = DeviceState(1, START + timedelta(hours=last_hour), 3, dict(held), None, 7)
    TelemetryStore._advance_state(row, inserted, "meter")

    expected = dict(held)
    for name, reading in _newest_by_reading(inserted).items():
        stamp = reading.time.isoformat()
        was = expected.get(name)
        if was is None or (was["time"], was["seq"]) <= (stamp, reading.seq):
            expected[name] = {"value": reading.values[name], "time": stamp, "seq": reading.seq}
    assert row.latest == expected
    assert list(row.latest) == list(expected)  # the stored JSON's key order too
    newest = max(inserted, key=lambda r: (r.time, r.seq))
    if (newest.time, newest.seq) >= (START + timedelta(hours=last_hour), 3):
        assert (row.last_time, row.last_seq) == (newest.time, newest.seq)
    else:
        assert (row.last_time, row.last_seq) == (START + timedelta(hours=last_hour), 3)
    assert row.meter == (float(expected["meter"]["value"]) if "meter" in expected else None)
    assert row.readings == 7 + len(inserted)


def test_a_field_absent_from_the_newest_reading_takes_its_own_newest() -> None:
    early = Reading(1, START, {"a": 1, "session": "start"})
    late = Reading(2, START + timedelta(hours=1), {"a": 2})
    row = DeviceState(1, None, None, {}, None, 0)
    TelemetryStore._advance_state(row, [early, late], None)
    assert row.latest["a"]["value"] == 2 and row.latest["session"]["value"] == "start"
    assert list(row.latest) == ["a", "session"]
