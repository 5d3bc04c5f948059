"""A stove's frozen row (mrv.period_inputs.stove_row) keeps every figure of its days under
the named tuple's own field names, in its order: the row is digested, so a figure renamed,
dropped or reordered would change every inputs digest and lose data. A day's readings as
stored digest as the same readings parsed."""

from __future__ import annotations

import json
from datetime import date

from hypothesis import given, settings
from hypothesis import strategies as st

from twinhub.mrv.period_inputs import (
    readings_digest,
    stored_readings_digest,
    stove_days,
    stove_row,
)
from twinhub.mrv.periods import StovePeriod
from twinhub.mrv.plausibility import StoveDay


def test_a_frozen_day_is_the_named_tuple_with_its_readings_digest() -> None:
    days = [
        StoveDay("did:ixo:entity/s", date(2026, 10, 1), 3, 1.25, 95.5, 1, 2, 1.3),
        StoveDay("did:ixo:entity/s", date(2026, 10, 2), 0, 0.0, 0.0, 0, 0),
    ]
    stove = StovePeriod("did:ixo:entity/s", "SN-1", True, True, 5, 0.85, "kWh", days)
    digests = {("did:ixo:entity/s", date(2026, 10, 1)): "sha256:" + "a" * 64}
    row = stove_row(stove, digests, "sn-1|m-1")
    expected = []
    for day in days:
        figures = day._asdict()
        del figures["stove"]
        figures["day"] = day.day.isoformat()
        figures["readings"] = digests.get((day.stove, day.day))
        expected.append(figures)
    assert row["days"] == expected
    assert [list(frozen) for frozen in row["days"]] == [list(each) for each in expected]
    assert stove_days(row) == days  # and back, as the rules read them


values = st.dictionaries(
    st.sampled_from(["meter", "energy", "session", "battery", "\U0001f600", "note"]),
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    max_size=5,
)
times = st.sampled_from(
    ["2026-10-01T01:00:00+00:00", "2026-10-01T01:00:00.500000+00:00", "2026-10-01T23:59:59+00:00"]
)


@given(st.lists(st.tuples(st.integers(0, 10**12), times, values), max_size=6))
@settings(max_examples=300, deadline=None)
def test_readings_as_stored_digest_as_the_same_readings_parsed(
    readings: list[tuple[int, str, dict[str, object]]],
) -> None:
    # The draft digests the stored text (stored_readings_digest); the evidence bundle and
    # the late-data check digest parsed readings (readings_digest): one digest for both.
    stored = [(seq, time, json.dumps(value)) for seq, time, value in readings]
    parsed = [{"seq": seq, "time": time, "values": value} for seq, time, value in readings]
    assert stored_readings_digest(stored) == readings_digest(parsed)
