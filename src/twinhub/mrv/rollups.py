"""The inputs a methodology reads from telemetry rollups: the rollup field names, and each
stove's period (registry facts and daily figures) built from its day rollups.

Pure: services.mrv_inputs reads the rows from the database and hands them here, so a claim's
evaluation, a monitoring period and `verify-report` all turn the same rows into the same
inputs. The telemetry store writes rollups under these names and the dashboard's figures
(telemetry.figures) read them by them.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from twinhub.mrv.meter import RegisterDay, register_rise
from twinhub.mrv.periods import StovePeriod
from twinhub.mrv.plausibility import StoveDay

INTERVALS = ("hour", "day", "month")  # the rollups' buckets


def bucket_of(moment: datetime, interval: str) -> datetime:
    """The start of the hour, day or month (UTC) that holds `moment`."""
    moment = moment.astimezone(UTC)
    if interval == "hour":
        return moment.replace(minute=0, second=0, microsecond=0)
    if interval == "day":
        return moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def counted_field(name: str, value: str) -> str:
    """The rollup field that counts readings whose enum field `name` is `value`."""
    return f"{name}={value}"


ENERGY = "energyKwh"  # the stove protocol's energy used since the previous reading
FUEL = "fuelKg"  # a fuel stove's fuel used since the previous reading
SESSIONS = counted_field("session", "start")  # one per cooking session started
METER = "meterKwh"  # the stove's cumulative meter
METER_RESET = counted_field("meterEvent", "reset")  # a reading declaring the register reset
FIELDS = (ENERGY, FUEL, SESSIONS, METER, METER_RESET)
FUEL_TYPES = {  # a stove's `fuelType` property -> the methodology's project fuel
    "electric": "electricity",
    "electricity": "electricity",
    "lpg": "lpg",
    "ethanol": "ethanol",
    "pellets": "pellets",
    "biomass": "pellets",
    "biogas": "biogas",
    "charcoal": "charcoal",
    "wood": "wood",
}
MASS_FUELS = ("lpg", "ethanol", "pellets", "biogas", "charcoal", "wood")  # metered in kg

# day -> field -> (count, sum, min, max)
Cells = dict[date, dict[str, tuple[int, float, float, float]]]


def day_start(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def stove_period(
    did: str,
    facts: tuple[dict[str, Any], bool, str] | None,
    enrolled: bool,
    cells: Cells,
) -> StovePeriod:
    """One stove's period from its registry facts (properties, verified, status; None when
    it is not a domain), whether a device is enrolled, and its day rollups."""
    properties: dict[str, Any] = facts[0] if facts is not None else {}
    unit = _unit(properties, cells)
    meter = properties.get("meter")
    top = _number(meter.get("registerMax")) if isinstance(meter, dict) else None
    register_max = top if top is not None and top > 0 else None
    days, events = _days(did, cells, FUEL if unit == "kg" else ENERGY, register_max)
    household = properties.get("householdSize")
    model, fuel = properties.get("stoveModel"), properties.get("fuelType")
    return StovePeriod(
        stove=did,
        serial=properties.get("serialNumber") if facts is not None else None,
        verified=facts is not None and bool(facts[1]),
        enrolled=enrolled,
        household_size=household
        if isinstance(household, int) and not isinstance(household, bool)
        else None,
        stove_efficiency=_number(properties.get("efficiency")),
        unit=unit,
        days=days,
        status=facts[2] if facts is not None else None,
        stove_model=model if isinstance(model, str) else None,
        fuel=FUEL_TYPES.get(fuel.lower()) if isinstance(fuel, str) else None,
        meter=meter if facts is not None and "meter" in properties else None,
        register_events=events,
    )


def day_figures(
    did: str, cells: Cells, unit: str, meter: Any = None
) -> tuple[list[StoveDay], tuple[str, ...]]:
    """The stove's days and register events from its day cells, for a stove of `unit` (kWh
    or kg) with `meter` (properties.meter): how an evidence bundle's raw readings are turned
    into the figures a period froze, by the same rules as `stove_period`."""
    top = _number(meter.get("registerMax")) if isinstance(meter, dict) else None
    register_max = top if top is not None and top > 0 else None
    return _days(did, cells, FUEL if unit == "kg" else ENERGY, register_max)


def _unit(properties: dict[str, Any], cells: Cells) -> str:
    """kWh for an electric stove, kg for a fuel stove: the stove's fuelType says, else the
    telemetry it sends (fuel and no energy)."""
    kind = properties.get("fuelType")
    if isinstance(kind, str) and FUEL_TYPES.get(kind.lower()) in MASS_FUELS:
        return "kg"
    energy = any(ENERGY in fields for fields in cells.values())
    fuel = any(FUEL in fields for fields in cells.values())
    return "kg" if fuel and not energy else "kWh"


def _days(
    did: str, cells: Cells, quantity: str = ENERGY, register_max: float | None = None
) -> tuple[list[StoveDay], tuple[str, ...]]:
    """One StoveDay per day with telemetry, and the register's events. A day's meter rise is
    read by the declared rules of mrv.meter (resets, rollovers, gaps); None on a day with no
    register reading."""
    register = [
        RegisterDay(day, fields[METER][2], fields[METER][3], int(fields.get(METER_RESET, (0,))[0]))
        for day, fields in cells.items()
        if METER in fields and fields[METER][0]
    ]
    rise = register_rise(register, register_max)
    days: list[StoveDay] = []
    for day in sorted(cells):
        fields = cells[day]
        sessions = int(fields[SESSIONS][0]) if SESSIONS in fields else 0
        energy = float(fields[quantity][1]) if quantity in fields else 0.0
        days.append(StoveDay(did, day, sessions, energy, 0.0, 0, 0, rise.deltas.get(day)))
    return days, rise.events
