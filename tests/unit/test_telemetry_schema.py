"""The compiled value checks (built once per protocol) agree with the reasons given for
invalid values: a value passes the fast check exactly when no reason is found for it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from twinhub.mrv.telemetry_schema import (
    STOVE_TELEMETRY,
    Reading,
    Rejection,
    _value_problem,
    check_reading,
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
    *(0, 1, -1, 3, 9, 10, -4, 20, 100, 700, 701, -40, -41, 1_000_000, 10**30),
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
