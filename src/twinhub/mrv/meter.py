"""The meter: its record (recorded with the device) and how its register's rise over a period
is read, the measure a monitoring period credits.

A stove's cumulative register is the harder number to fake and the one the methodology
credits; the sessions' own figures only corroborate it. The day rollups keep, per day, how
many register readings came and their lowest and highest values (a register only rises, so
the lowest is the day's first reading and the highest its last) and how many readings
declared a reset. From those the rise is read with declared rules rather than by excluding
the stove:

- a normal day rises from the previous reading's value to the day's highest;
- the first day of the period counts only its own rise (the energy before its first reading
  belongs to the period before);
- a declared reset (a `meterEvent: reset` reading) restarts the register at zero: the tail
  before the reset is not counted, everything after it is;
- a rollover (the register went backwards and the device declares `registerMax`) counts the
  rise up to the register's range and on from zero;
- a register that goes backwards with no reset declared and no range to roll over is
  reported as such (the plausibility rules flag it as broken) and its fall never counts;
- days without register readings are gaps in the data: the missing-data rule counts them,
  and the rise across a gap is read from the readings on either side.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any, NamedTuple

from twinhub.kernel.errors import Problems
from twinhub.security.jcs import DIGEST

MAX_TEXT = 200


@dataclass(frozen=True)
class MeterRecord:
    """The meter recorded with the device (`properties.meter`)."""

    model: str
    serial: str
    accuracy_class: str
    max_permissible_error: float  # fraction, e.g. 0.01 for +/-1 %
    calibrated_on: date
    calibration_due: date
    certificate: str  # sha256:<hex> of the calibration certificate
    register_max: float | None  # kWh at which the register rolls over to zero

    def as_record(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "serial": self.serial,
            "accuracyClass": self.accuracy_class,
            "maxPermissibleError": self.max_permissible_error,
            "calibratedOn": self.calibrated_on.isoformat(),
            "calibrationDue": self.calibration_due.isoformat(),
            "certificate": self.certificate,
            "registerMax": self.register_max,
        }


def check_meter(
    value: Any, problems: Problems, where: str = "properties.meter"
) -> MeterRecord | None:
    """A meter record checked field by field; faults go into `problems` with their path."""
    if not isinstance(value, dict):
        problems.add(where, "expected the meter's record: model, serial, accuracyClass, ...")
        return None
    before = len(problems.items)
    known = {
        "model",
        "serial",
        "accuracyClass",
        "maxPermissibleError",
        "calibratedOn",
        "calibrationDue",
        "certificate",
        "registerMax",
    }
    for extra in sorted(set(value) - known):
        problems.add(f"{where}.{extra}", "not a field of a meter record")
    texts = {}
    for key in ("model", "serial", "accuracyClass"):
        text = value.get(key)
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT:
            problems.add(f"{where}.{key}", f"expected text (1-{MAX_TEXT} characters)")
        texts[key] = text
    error = value.get("maxPermissibleError")
    if isinstance(error, bool) or not isinstance(error, int | float) or not 0 <= error < 0.5:
        problems.add(f"{where}.maxPermissibleError", "expected a fraction from 0 to 0.5")
    dates: dict[str, date | None] = {}
    for key in ("calibratedOn", "calibrationDue"):
        try:
            dates[key] = date.fromisoformat(value.get(key))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            problems.add(f"{where}.{key}", "expected an ISO date such as 2026-01-31")
            dates[key] = None
    calibrated, due = dates["calibratedOn"], dates["calibrationDue"]
    if calibrated is not None and due is not None and due < calibrated:
        problems.add(f"{where}.calibrationDue", "must not be before calibratedOn")
    certificate = value.get("certificate")
    if not isinstance(certificate, str) or not DIGEST.match(certificate):
        problems.add(f"{where}.certificate", "expected the calibration certificate's sha256:<hex>")
    top = value.get("registerMax")
    if top is not None and (
        isinstance(top, bool)
        or not isinstance(top, int | float)
        or not math.isfinite(top)
        or top <= 0
    ):
        problems.add(f"{where}.registerMax", "expected the register's range in kWh (> 0) or null")
    if len(problems.items) > before:
        return None
    assert calibrated is not None and due is not None
    return MeterRecord(
        model=texts["model"],
        serial=texts["serial"],
        accuracy_class=texts["accuracyClass"],
        max_permissible_error=float(error),
        calibrated_on=calibrated,
        calibration_due=due,
        certificate=certificate,
        register_max=None if top is None else float(top),
    )


class RegisterDay(NamedTuple):
    """One day's register readings as the day rollup keeps them (a tuple: a period of ten
    thousand stoves makes three hundred thousand of them)."""

    day: date
    low: float  # the day's lowest (first) register reading
    high: float  # the day's highest (last) register reading
    resets: int = 0  # readings that declared a reset of the register


@dataclass(frozen=True)
class RegisterRise:
    """The register read over the period: the rise per day and the events on the way."""

    deltas: dict[date, float]  # rise attributed to each day with readings (< 0: went back)
    events: tuple[str, ...]

    @property
    def total(self) -> float:
        """The register's rise over the period: what the methodology credits."""
        return sum(value for value in self.deltas.values() if value > 0)


def register_rise(days: Sequence[RegisterDay], register_max: float | None) -> RegisterRise:
    """Read the register's rise day by day with the declared rules (module docstring)."""
    deltas: dict[date, float] = {}
    events: list[str] = []
    last: float | None = None  # the register's value at the last reading known
    for reading in sorted(days):
        if reading.resets:
            when = reading.day.isoformat()
            if last is not None and reading.high < last:
                deltas[reading.day] = reading.high  # every reading came after the reset
                last = reading.high
            else:  # readings from before and after the reset: count from zero next time
                deltas[reading.day] = 0.0
                last = 0.0
            events.append(f"register reset on {when} (declared): counted again from zero")
            continue
        if last is None:
            deltas[reading.day] = reading.high - reading.low
        elif reading.low >= last:
            deltas[reading.day] = reading.high - last
        elif register_max is not None and reading.high <= register_max and last <= register_max:
            if reading.high < last:  # every reading came after the rollover
                deltas[reading.day] = register_max - last + reading.high
                last = reading.high
            else:
                deltas[reading.day] = register_max - last
                last = 0.0
            events.append(
                f"register rolled over at {register_max:g} kWh on {reading.day.isoformat()}"
            )
            continue
        else:
            deltas[reading.day] = reading.low - last
            events.append(
                f"register went back from {last:g} to {reading.low:g} kWh on "
                f"{reading.day.isoformat()} with no "
                "reset declared and no registerMax to roll over: its fall is not counted"
            )
        last = reading.high
    return RegisterRise(deltas, tuple(events))
