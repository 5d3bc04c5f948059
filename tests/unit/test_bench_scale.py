"""The scale benchmark's load (bench/scale.py) is what a metered stove sends: every reading
carries the register, which never falls, and the sessions start at the cooking hours; a
week-long period keeps the methodology except for the one rule a week cannot meet."""

from __future__ import annotations

from datetime import UTC, datetime

from bench.scale import COOKING_HOURS, period_methodology, stove_batch


def test_a_stove_batch_is_a_metered_stove_s_hours() -> None:
    first_day = datetime(2026, 11, 1, tzinfo=UTC)
    readings, register = stove_batch(first_day, range(0, 48), 100.0)
    assert [r["seq"] for r in readings] == list(range(1, 49))
    meters = [r["values"]["meterKwh"] for r in readings]
    assert meters == sorted(meters) and meters[-1] == register > 100.0
    sessions = [r for r in readings if r["values"].get("session") == "start"]
    assert len(sessions) == 2 * len(COOKING_HOURS)
    energy = sum(r["values"]["energyKwh"] for r in readings)
    assert round(100.0 + energy, 3) == register
    again, _ = stove_batch(first_day, range(48, 72), register)  # the next day goes on
    assert again[0]["seq"] == 49 and again[0]["time"] == "2026-11-03T00:00:00+00:00"


def test_only_a_period_shorter_than_the_minimum_lowers_it() -> None:
    week, lowered = period_methodology(7)
    assert lowered == 10 and week.rule_values()["min_active_days"] == 7
    month, unchanged = period_methodology(30)
    assert unchanged is None and month.rule_values()["min_active_days"] == 10
