"""The inputs a methodology reads from telemetry rollups: the rollup field names, and each
stove's period (registry facts and daily figures) built from its day rollups.

Pure: services.mrv_inputs reads the rows from the database and hands them here, so a claim's
evaluation, a monitoring period and `verify-report` all turn the same rows into the same
inputs. The telemetry store writes rollups under these names and the dashboard's figures
(telemetry.figures) read them by them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any, NamedTuple

from twinhub.mrv.day_columns import DaySource
from twinhub.mrv.meter import METER_READING, Reading, RegisterDay, register_rise
from twinhub.mrv.periods import StovePeriod
from twinhub.mrv.plausibility import StoveDay
from twinhub.mrv.rollup_columns import RollupColumns, chunk_days, day_of, day_rows

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
# The stove property that records which survey answer confirmed its householdSize.
HOUSEHOLD_CONFIRMATION = "householdSizeConfirmation"
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


class DayRow(NamedTuple):
    """One stove-day of rollups as the period reads them, one column a figure (what
    services.mrv_inputs reads through the driver, one row per stove and day): the day (a
    date, or its ISO text as the driver gives it), the sessions started, the energy and
    fuel the readings reported (None: no such field that day), how many register readings
    came with their lowest and highest values, and the resets declared. The period reads
    any tuple of this layout (the driver's rows are not copied into this class)."""

    day: date | str
    sessions: int | None
    energy: float | None
    fuel: float | None
    meter_readings: int | None
    meter_low: float | None
    meter_high: float | None
    resets: int | None


# The rollup columns a DayRow is made of, in its order after the day: (field, aggregate).
DAY_COLUMNS = (
    (SESSIONS, "count"),
    (ENERGY, "sum"),
    (FUEL, "sum"),
    (METER, "count"),
    (METER, "min"),
    (METER, "max"),
    (METER_RESET, "count"),
)


def day_start(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def rows_of(cells: Cells) -> list[DayRow]:
    """Day cells (as raw readings give them) as DayRows, in day order."""
    rows = []
    for day in sorted(cells):
        fields = cells[day]
        sessions, energy, fuel = fields.get(SESSIONS), fields.get(ENERGY), fields.get(FUEL)
        meter, reset = fields.get(METER), fields.get(METER_RESET)
        rows.append(
            DayRow(
                day,
                int(sessions[0]) if sessions else 0,
                float(energy[1]) if energy else None,
                float(fuel[1]) if fuel else None,
                int(meter[0]) if meter else 0,
                meter[2] if meter else None,
                meter[3] if meter else None,
                int(reset[0]) if reset else 0,
            )
        )
    return rows


def stove_period(
    did: str,
    facts: tuple[dict[str, Any], bool, str] | None,
    enrolled: bool,
    days: Cells | Sequence[tuple[Any, ...]],
    reading: Reading = METER_READING,
) -> StovePeriod:
    """One stove's period from its registry facts (properties, verified, status; None when
    it is not a domain), whether a device is enrolled, and its day rollups (DayRows in day
    order, or cells), read by the methodology's rules (`Methodology.reading`): the
    day-by-day reference of `stove_periods`."""
    rows = rows_of(days) if isinstance(days, dict) else days
    properties: dict[str, Any] = facts[0] if facts is not None else {}
    unit = _unit(properties, rows)
    figures, events = _days(did, rows, unit, properties.get("meter"), reading)
    return _period(did, facts, enrolled, unit, figures, events)


def stove_periods(
    stoves: Sequence[str],
    facts: Mapping[str, tuple[dict[str, Any], bool, str]],
    enrolled: set[str] | frozenset[str],
    rollups: RollupColumns,
    reading: Reading = METER_READING,
) -> list[StovePeriod]:
    """`stove_period` of each of `stoves` (distinct), its facts in `facts` (absent: not a
    domain) and its day rollups among the chunk's columns `rollups` (DAY_COLUMNS), with
    every stove's days made at once by array operations (mrv.rollup_columns); a stove they
    cannot decide exactly is read day by day from its DayRows, as `stove_period` reads it."""
    declared: list[str | None] = []
    tops: list[float | None] = []
    for did in rollups.scopes:
        found = facts.get(did)
        properties = found[0] if found is not None else {}
        declared.append("kg" if _declared_mass(properties) else None)
        meter = properties.get("meter")
        top = _number(meter.get("registerMax")) if isinstance(meter, dict) else None
        tops.append(top if top is not None and top > 0 else None)
    figured = (
        chunk_days(rollups, declared, tops, reading.max_rise_per_day)
        if reading.measure != "sessions"
        else [None] * len(rollups.scopes)
    )
    rows: list[list[tuple[Any, ...]]] | None = None  # DayRows, made if a scope needs them
    where = dict(zip(rollups.scopes, range(len(rollups.scopes)), strict=True))
    periods = []
    for did in stoves:
        scope = where.get(did)
        made = figured[scope] if scope is not None else None
        if made is not None:
            periods.append(_period(did, facts.get(did), did in enrolled, *made))
            continue
        if scope is not None and rows is None:
            rows = day_rows(rollups, [aggregate == "count" for _, aggregate in DAY_COLUMNS])
        days = rows[scope] if scope is not None and rows is not None else []
        periods.append(stove_period(did, facts.get(did), did in enrolled, days, reading))
    return periods


def _period(
    did: str,
    facts: tuple[dict[str, Any], bool, str] | None,
    enrolled: bool,
    unit: str,
    figures: list[StoveDay],
    events: tuple[str, ...],
    source: DaySource | None = None,
) -> StovePeriod:
    """The period of a stove whose days are made (`source`: from a chunk's columns)."""
    properties: dict[str, Any] = facts[0] if facts is not None else {}
    meter = properties.get("meter")
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
        days=figures,
        status=facts[2] if facts is not None else None,
        stove_model=model if isinstance(model, str) else None,
        fuel=FUEL_TYPES.get(fuel.lower()) if isinstance(fuel, str) else None,
        meter=meter if facts is not None and "meter" in properties else None,
        register_events=events,
        household=household_record(properties),
        source=source,
    )


def household_record(properties: dict[str, Any]) -> dict[str, Any] | None:
    """The survey answer that confirmed the recorded household size (HOUSEHOLD_CONFIRMATION,
    written with the size by services.surveys), when it confirms the size recorded now."""
    found = properties.get(HOUSEHOLD_CONFIRMATION)
    size = properties.get("householdSize")
    if isinstance(found, dict) and found.get("householdSize") == size:
        return found
    return None


def day_figures(
    did: str, cells: Cells, unit: str, meter: Any = None, reading: Reading = METER_READING
) -> tuple[list[StoveDay], tuple[str, ...]]:
    """The stove's days and register events from its day cells, for a stove of `unit` (kWh
    or kg) with `meter` (properties.meter): how an evidence bundle's raw readings are turned
    into the figures a period froze, by the same rules as `stove_period`."""
    return _days(did, rows_of(cells), unit, meter, reading)


def _unit(properties: dict[str, Any], rows: Sequence[tuple[Any, ...]]) -> str:
    """kWh for an electric stove, kg for a fuel stove: the stove's fuelType says, else the
    telemetry it sends (fuel and no energy)."""
    if _declared_mass(properties):
        return "kg"
    energy = any(row[2] is not None for row in rows)
    fuel = any(row[3] is not None for row in rows)
    return "kg" if fuel and not energy else "kWh"


def _declared_mass(properties: dict[str, Any]) -> bool:
    """Whether the stove's fuelType names a fuel metered in kg."""
    kind = properties.get("fuelType")
    return isinstance(kind, str) and FUEL_TYPES.get(kind.lower()) in MASS_FUELS


def _days(
    did: str, rows: Sequence[tuple[Any, ...]], unit: str, meter: Any, reading: Reading
) -> tuple[list[StoveDay], tuple[str, ...]]:
    """One StoveDay per day with telemetry (`rows`: DayRow's layout, in day order), and the
    register's events. Under the `meter` measure a day's meter rise is read by the declared
    rules of mrv.meter (resets, rollovers, gaps, and from 2.1.0 the register's plausible
    rate; None on a day with no register reading or a gap);
    under `sessions` (1.0.0) as that version read it, for its reports to recompute: the
    day's lowest register reading less the previous such day's (the first: None), with no
    events. Tuples are made with tuple.__new__ (a named tuple's own __new__ is a Python
    call: a 10,000-stove month makes 600,000 of them)."""
    new = tuple.__new__
    days = [row[0] if type(row[0]) is not str else day_of(row[0]) for row in rows]
    if reading.measure == "sessions":
        deltas: dict[date, float] = {}
        previous: float | None = None
        for day, row in zip(days, rows, strict=True):
            if row[5] is not None:
                if previous is not None:
                    deltas[day] = row[5] - previous
                previous = row[5]
        events: tuple[str, ...] = ()
    else:
        top = _number(meter.get("registerMax")) if isinstance(meter, dict) else None
        rise = register_rise(
            [
                new(RegisterDay, (day, row[5], row[6], row[7] or 0))
                for day, row in zip(days, rows, strict=True)
                if row[4]
            ],
            top if top is not None and top > 0 else None,
            reading.max_rise_per_day,
        )
        deltas, events = rise.deltas, rise.events
    get = deltas.get
    at = 3 if unit == "kg" else 2
    return [
        new(StoveDay, (did, day, row[1] or 0, row[at] or 0.0, 0.0, 0, 0, get(day)))
        for day, row in zip(days, rows, strict=True)
    ], events
