"""The meter (mrv/meter.py): its record checked with paths, and its register's rise read by
the declared rules (resets, rollovers, gaps) from the day rollups' lowest and highest
readings, as mrv/rollups.py builds a stove's days."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest

from twinhub.kernel.errors import Problems
from twinhub.mrv.meter import RegisterDay, check_meter, register_rise
from twinhub.mrv.rollups import ENERGY, METER, METER_RESET, SESSIONS, stove_period

DAY = date(2026, 10, 1)
RECORD = {
    "model": "EM-1",
    "serial": "M-1",
    "accuracyClass": "1",
    "maxPermissibleError": 0.01,
    "calibratedOn": "2026-01-10",
    "calibrationDue": "2027-01-10",
    "certificate": "sha256:" + "c" * 64,
    "registerMax": 9999.9,
}


def on(offset: int) -> date:
    return DAY + timedelta(days=offset)


def test_a_sound_record_is_read() -> None:
    record = check_meter(RECORD, Problems())
    assert record is not None
    assert record.max_permissible_error == 0.01 and record.register_max == 9999.9
    assert record.calibration_due == date(2027, 1, 10)
    assert record.as_record()["calibrationDue"] == "2027-01-10"


def test_a_bad_record_names_each_field() -> None:
    problems = Problems()
    bad: dict[str, Any] = {
        **RECORD,
        "model": "",
        "maxPermissibleError": 0.7,
        "calibratedOn": "2026-05-01",
        "calibrationDue": "2026-01-01",
        "certificate": "sha1:00",
        "registerMax": -1,
        "colour": "red",
    }
    assert check_meter(bad, problems) is None
    assert {p.field for p in problems.items} == {
        "properties.meter.model",
        "properties.meter.maxPermissibleError",
        "properties.meter.calibrationDue",
        "properties.meter.certificate",
        "properties.meter.registerMax",
        "properties.meter.colour",
    }
    assert check_meter(None, problems := Problems()) is None
    assert problems.items[0].field == "properties.meter"


def test_a_steady_register_rises_from_the_first_reading_to_the_last() -> None:
    days = [RegisterDay(on(0), 100.0, 101.0), RegisterDay(on(1), 101.5, 102.0)]
    rise = register_rise(days, None)
    assert rise.deltas == {on(0): 1.0, on(1): 1.0}  # the second day from 101 to 102
    assert rise.total == 2.0 and rise.events == ()


def test_a_gap_is_crossed_by_the_readings_on_either_side() -> None:
    days = [RegisterDay(on(0), 10.0, 11.0), RegisterDay(on(5), 15.0, 16.0)]
    rise = register_rise(days, None)
    assert rise.deltas == {on(0): 1.0, on(5): 5.0}  # 11 -> 16 across four silent days


def test_a_declared_reset_counts_again_from_zero() -> None:
    days = [
        RegisterDay(on(0), 500.0, 510.0),
        RegisterDay(on(1), 0.5, 512.0, resets=1),  # before and after the reset: unknown tail
        RegisterDay(on(2), 3.0, 4.0),
    ]
    rise = register_rise(days, None)
    assert rise.deltas == {on(0): 10.0, on(1): 0.0, on(2): 4.0}  # day 3 from zero to 4
    assert rise.total == 14.0
    assert rise.events == ("register reset on 2026-10-02 (declared): counted again from zero",)
    clean = register_rise([RegisterDay(on(0), 500.0, 510.0), RegisterDay(on(1), 0.5, 2.0, 1)], None)
    assert clean.deltas[on(1)] == 2.0  # every reading after the reset: 0 -> 2


def test_a_rollover_counts_up_to_the_range_and_on_from_zero() -> None:
    days = [
        RegisterDay(on(0), 9990.0, 9998.0),
        RegisterDay(on(1), 1.0, 9999.5),  # readings on both sides of the rollover
        RegisterDay(on(2), 2.0, 3.0),
    ]
    rise = register_rise(days, 9999.9)
    assert rise.deltas[on(1)] == pytest.approx(1.9)  # 9998 -> 9999.9
    assert rise.deltas[on(2)] == 3.0  # 0 -> 3
    assert rise.total == pytest.approx(8.0 + 1.9 + 3.0)
    assert "rolled over at 9999.9 kWh on 2026-10-02" in rise.events[0]
    after = register_rise(
        [RegisterDay(on(0), 9990.0, 9998.0), RegisterDay(on(1), 0.5, 2.5)], 9999.9
    )
    assert after.deltas[on(1)] == pytest.approx(1.9 + 2.5)


def test_an_undeclared_fall_is_reported_and_never_counts() -> None:
    days = [RegisterDay(on(0), 50.0, 60.0), RegisterDay(on(1), 5.0, 8.0)]
    rise = register_rise(days, None)
    assert rise.deltas[on(1)] == -55.0  # the plausibility rules call it broken
    assert rise.total == 10.0
    assert "went back from 60 to 5 kWh on 2026-10-02" in rise.events[0]


def test_a_stove_period_reads_the_register_from_its_rollups() -> None:
    """The rollups keep (count, sum, min, max) per day and field; a reset is a counted
    enum value. The stove's days carry the register's rise; the events ride along."""
    cells: dict[date, dict[str, tuple[int, float, float, float]]] = {
        on(0): {SESSIONS: (2, 2, 1, 1), ENERGY: (2, 1.0, 0.5, 0.5), METER: (3, 0, 100.0, 101.0)},
        on(1): {
            SESSIONS: (2, 2, 1, 1),
            ENERGY: (2, 1.0, 0.5, 0.5),
            METER: (3, 0, 0.2, 101.5),
            METER_RESET: (1, 0, 0, 0),
        },
        on(2): {SESSIONS: (2, 2, 1, 1), ENERGY: (2, 1.0, 0.5, 0.5), METER: (3, 0, 1.0, 1.6)},
        on(3): {SESSIONS: (1, 1, 1, 1), ENERGY: (1, 0.4, 0.4, 0.4)},  # no register reading
    }
    facts = (
        {"householdSize": 5, "efficiency": 0.85, "stoveModel": "ECO-1", "meter": RECORD},
        True,
        "active",
    )
    period = stove_period("did:stove", facts, True, cells)
    assert [d.meter_delta for d in period.days] == [1.0, 0.0, 1.6, None]
    assert period.register_events == (
        "register reset on 2026-10-02 (declared): counted again from zero",
    )
    assert period.stove_model == "ECO-1" and period.meter == RECORD
    assert period.fuel is None and period.unit == "kWh"
    lpg = stove_period("did:lpg", ({"fuelType": "LPG"}, True, "active"), True, {})
    assert lpg.unit == "kg" and lpg.fuel == "lpg"
