"""The compiled value checks (built once per protocol) agree with the reasons given for
invalid values: a value passes the fast check exactly when no reason is found for it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from twinhub.mrv.telemetry_schema import (
    SEQ_MAX,
    STOVE_TELEMETRY,
    Reading,
    Rejection,
    _check_columns,
    _check_each,
    _value_problem,
    check_reading,
    check_readings,
    parse_schema,
)

SCHEMA = parse_schema(
    {
        "fields": {
            **STOVE_TELEMETRY["fields"],
            "count": {"type": "integer", "min": -3, "max": 9},
            "door": {"type": "boolean"},
            "note": {"type": "string"},
        }
    }
)
SAMPLES: list[Any] = [
    *(0, 1, -1, 3, 9, 10, -4, 20, 100, 700, 701, -40, -41, 1_000_000, 10**30, 10**400, -(10**400)),
    *(5.5, 20.0001, -1e-9, 1e9, float("nan"), float("inf"), float("-inf")),
    *(True, False, None, [], {}, "start", "end", "overheat", "x", "", "a" * 200, "a" * 201),
]


def test_every_field_check_agrees_with_its_reason() -> None:
    for name, spec in SCHEMA.fields.items():
        for value in SAMPLES:
            assert SCHEMA.checks[name](value) is (_value_problem(spec, value) is None), (
                name,
                value,
            )


def test_a_reading_is_checked_field_by_field() -> None:
    latest = datetime.now(UTC) + timedelta(minutes=5)
    at = datetime.now(UTC).isoformat()
    good = check_reading(
        0, {"seq": 1, "time": at, "values": {"energyKwh": 2, "door": True}}, SCHEMA, latest
    )
    assert isinstance(good, Reading) and good.values == {"energyKwh": 2, "door": True}
    bad = check_reading(3, {"seq": 2, "time": at, "values": {"batteryPct": 101}}, SCHEMA, latest)
    assert isinstance(bad, Rejection)
    assert bad.as_detail() == {
        "field": "readings[3].values.batteryPct",
        "error": "above the maximum 100 %",
    }
    unknown = check_reading(4, {"seq": 3, "time": at, "values": {"colour": "red"}}, SCHEMA, latest)
    assert (
        isinstance(unknown, Rejection) and unknown.error == "not a telemetry field of the protocol"
    )


# Readings as devices send them: mostly valid, each part sometimes not (a value of another
# type, out of its range, NaN; a time without offset, in another zone, with Z or z, out of
# the years allowed; a seq out of range; a missing or extra key).
_VALUES = {
    "energyKwh": st.one_of(
        st.floats(0, 20), st.integers(0, 20), st.sampled_from([-0.5, 20.5, float("nan"), True])
    ),
    "meterKwh": st.one_of(
        st.floats(0, 1_000_000), st.sampled_from([float("inf"), 2**64, 2**53 + 1, "1"])
    ),
    "count": st.one_of(st.integers(-3, 9), st.sampled_from([-4, 10, 2.0, False])),
    "door": st.one_of(st.booleans(), st.sampled_from([0, 1, None])),
    "session": st.sampled_from(["start", "end", "middle", 1]),
    "note": st.one_of(st.text(max_size=5), st.sampled_from(["a" * 201, "a\x00b"])),
}
_ZONES = [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(0)), None]


def _time(moment: datetime, zone: timezone | None, form: int) -> str:
    text = moment.replace(tzinfo=zone).isoformat()
    if form == 1:
        return text.replace("+00:00", "Z")
    if form == 2:
        return text.replace("+00:00", "z").replace("T", "t")
    return text


def _readings(valid_only: bool) -> st.SearchStrategy[Any]:
    values = st.fixed_dictionaries(
        {}, optional={n: s for n, s in _VALUES.items() if n != "note" or not valid_only}
    )
    times = st.builds(
        _time,
        st.datetimes(datetime(1969, 12, 31), datetime(2100, 1, 1)),
        st.sampled_from(_ZONES[:1] if valid_only else _ZONES),
        st.integers(0, 2),
    )
    seqs = st.integers(0, SEQ_MAX) if valid_only else st.integers(-1, SEQ_MAX + 1)
    reading = st.fixed_dictionaries({"seq": seqs, "time": times, "values": values})
    if valid_only:
        return reading
    odd = st.sampled_from([[1], {"seq": 1}, {"seq": 1, "time": "x", "values": {}, "extra": 1}])
    return st.one_of(reading, reading, reading, odd)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(
    st.one_of(st.lists(_readings(True), max_size=40), st.lists(_readings(False), max_size=40)),
    st.sampled_from([datetime(2099, 12, 31, tzinfo=UTC), datetime(2026, 6, 1, tzinfo=UTC)]),
)
def test_the_column_check_of_a_batch_agrees_with_the_check_of_each_reading(
    items: list[Any], latest: datetime
) -> None:
    """check_readings checks a batch column-wise when every reading is plainly valid: the
    same readings (equal, in order, times in UTC) and rejections as reading by reading, and
    the column pass takes a batch only when reading by reading rejects none of it."""
    each = _check_each(items, SCHEMA, latest)
    assert check_readings(items, SCHEMA, latest) == each
    try:
        columns = _check_columns(items, SCHEMA, latest)
    except (KeyError, ValueError, TypeError, OverflowError):
        columns = None
    if columns is not None:
        assert not each[1] and columns == each[0]
        assert all(type(r) is Reading and r.time.tzinfo is UTC for r in columns)


def test_a_plainly_valid_batch_takes_the_column_pass() -> None:
    """The common batch (and one of other zones) is decided column-wise, not one by one."""
    start = datetime(2026, 5, 1, tzinfo=UTC)
    items = [
        {"seq": n, "time": (start + timedelta(hours=n)).isoformat(), "values": {"energyKwh": 1}}
        for n in range(50)
    ]
    items.append({"seq": 50, "time": "2026-05-01T10:00:00+05:30", "values": {"count": 9}})
    taken = _check_columns(items, SCHEMA, datetime(2026, 6, 1, tzinfo=UTC))
    assert taken is not None and len(taken) == 51
    assert taken[-1].time == datetime(2026, 5, 1, 4, 30, tzinfo=UTC)
    assert _check_columns(items, SCHEMA, datetime(2026, 5, 2, tzinfo=UTC)) is None
