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

From methodology 2.1.0 a rate rule (`rules.max_register_kwh_per_day`, the register's
plausible rise a day) tells a rollover from a fault, because under 2.0.0 any fall of a meter
that declares `registerMax` read as a wrap (5,000 -> 3,000 kWh on a 99,999.99 register made
a rise of about 97,000 kWh):

- a fall is a rollover only when the rise across the wrap (from the last reading up to
  `registerMax` and on from zero to the first reading after) is at most the rate times the
  days the two readings span (so the register was near its top), every reading within the
  register's range;
- any other fall with no reset declared, any rise faster than the rate and any reading
  beyond `registerMax` is a fault: the day is a gap in the data (no rise is read for it,
  the missing-data rule counts it, the event says why), and the register is read on from
  the day's highest reading. The stove is not excluded for the fault, and the fault is
  never credited.
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
REGISTER_RATE = "max_register_kwh_per_day"  # the methodology's rule (2.1.0 on)
GAP = "a gap in the data"  # what every fault's event says (register_faults finds them)


class Reading(NamedTuple):
    """How a methodology reads a stove's telemetry into its days (mrv.rollups): its measure
    ("meter", or "sessions" as 1.0.0 read it) and the register's plausible rise in kWh a
    day (REGISTER_RATE; None: undeclared, as 2.0.0 read the register)."""

    measure: str = "meter"
    max_rise_per_day: float | None = None


METER_READING = Reading()  # the meter as the measure, read without a rate rule (2.0.0)


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


def register_rise(
    days: Sequence[RegisterDay], register_max: float | None, max_per_day: float | None = None
) -> RegisterRise:
    """Read the register's rise day by day with the declared rules (module docstring);
    `max_per_day` is the methodology's rate rule (None: 2.0.0's reading, without it)."""
    deltas: dict[date, float] = {}
    events: list[str] = []
    last: float | None = None  # the register's value at the last reading known
    since: date | None = None  # the day of that reading
    # kWh in the events: to the watt-hour from 2.1.0 (2.0.0's six digits kept as issued)
    kwh = _kwh if max_per_day is not None else "{:g}".format
    for reading in sorted(days):
        # The most the register can rise from the last reading to this day's last: the
        # days they span, both counted (their readings' hours are not kept). Worked out
        # only for a rise beyond one day's (most days' rises are far below it).
        allowed = max_per_day
        if reading.resets:
            if last is not None and reading.high < last:
                deltas[reading.day] = reading.high  # every reading came after the reset
                last = reading.high
            else:  # readings from before and after the reset: count from zero next time
                deltas[reading.day] = 0.0
                last = 0.0
            since = reading.day
            events.append(
                f"register reset on {reading.day.isoformat()} (declared): counted again from zero"
            )
            continue
        if last is None or reading.low >= last:
            rise = reading.high - (reading.low if last is None else last)
            if allowed is not None and not rise <= allowed:
                allowed = _allowed(allowed, since, reading.day)
            if allowed is not None and register_max is not None and reading.high > register_max:
                events.append(
                    f"register read {_kwh(reading.high)} kWh on {reading.day.isoformat()}, "
                    f"beyond its range ({_kwh(register_max)}): {GAP}, the day's rise not counted"
                )
            elif allowed is not None and not rise <= allowed:
                events.append(
                    f"register rose {_kwh(rise)} kWh by {reading.day.isoformat()}, more than "
                    f"the methodology's {_kwh(max_per_day)} kWh a day allows ({_kwh(allowed)}): "
                    f"{GAP}, the day's rise not counted"
                )
            else:
                deltas[reading.day] = rise
        elif register_max is not None and reading.high <= register_max and last <= register_max:
            after = reading.high < last  # every reading came after the rollover
            wrap = register_max - last + (reading.high if after else reading.low)
            if allowed is not None and not wrap <= allowed:
                allowed = _allowed(allowed, since, reading.day)
            if allowed is not None and reading.low < 0:
                events.append(_fault(last, reading, "a reading below zero"))
            elif allowed is not None and not wrap <= allowed:
                events.append(
                    _fault(
                        last,
                        reading,
                        f"a rollover would be a rise of {_kwh(wrap)} kWh, "
                        f"more than the methodology's {_kwh(max_per_day)} kWh a day "
                        f"allows ({_kwh(allowed)})",
                    )
                )
            elif after:
                deltas[reading.day] = wrap
                last, since = reading.high, reading.day
                events.append(_rolled(kwh(register_max), reading.day))
                continue
            else:
                deltas[reading.day] = register_max - last
                last, since = 0.0, reading.day
                events.append(_rolled(kwh(register_max), reading.day))
                continue
        elif max_per_day is not None:
            events.append(
                _fault(
                    last,
                    reading,
                    "no registerMax to roll over"
                    if register_max is None
                    else "outside the register's range",
                )
            )
        else:
            deltas[reading.day] = reading.low - last
            events.append(
                f"register went back from {last:g} to {reading.low:g} kWh on "
                f"{reading.day.isoformat()} with no reset declared and no registerMax to roll "
                "over: its fall is not counted"
            )
        last, since = reading.high, reading.day
    return RegisterRise(deltas, tuple(events))


def register_faults(events: Sequence[str]) -> list[str]:
    """The register events that are faults read as gaps (2.1.0's rate rule): what the
    oracle flags a claim for, where a period's report only lists them."""
    return [event for event in events if GAP in event]


def _allowed(per_day: float, since: date | None, day: date) -> float:
    """The register's plausible rise from a reading on `since` to `day`'s last reading."""
    return per_day * ((day - since).days + 1 if since is not None else 1)


def _rolled(top: str, day: date) -> str:
    return f"register rolled over at {top} kWh on {day.isoformat()}"


def _fault(last: float, reading: RegisterDay, why: str) -> str:
    """The event of a fall that is neither a declared reset nor a plausible rollover."""
    return (
        f"register fell from {_kwh(last)} to {_kwh(reading.low)} kWh on "
        f"{reading.day.isoformat()} with no reset declared and {why}: {GAP}, the day's rise "
        f"not counted, read on from {_kwh(reading.high)}"
    )


def _kwh(value: float) -> str:
    """A register figure to the watt-hour, without trailing zeros (99999.99, 48)."""
    return f"{value:.3f}".rstrip("0").rstrip(".")
