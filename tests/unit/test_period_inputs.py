"""A stove's frozen row (mrv.period_inputs.stove_row) keeps every figure of its days under
the named tuple's own field names, in its order: the row is digested, so a figure renamed,
dropped or reordered would change every inputs digest and lose data."""

from __future__ import annotations

from datetime import date

from twinhub.mrv.period_inputs import stove_days, stove_row
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
