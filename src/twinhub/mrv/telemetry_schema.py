"""What a device reports, as its protocol declares it, and the check of every reading.

A declaration reads `{"fields": {name: {"type", "unit", "min", "max", "enum",
"cumulative"}}}`: type is number, integer, boolean or string; at most one numeric field is
the cumulative meter (its latest value is the twin's meter total).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property, partial
from itertools import chain, repeat
from operator import attrgetter, contains, is_, itemgetter
from typing import Any, NamedTuple

import orjson

from twinhub.kernel.bounds import EARLIEST_YEAR, LATEST_YEAR, TIME_RANGE, text_problem, time_problem
from twinhub.kernel.errors import Problems

FIELD_TYPES = ("number", "integer", "boolean", "string")
NUMERIC = ("number", "integer")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
_KEYS = {"type", "unit", "min", "max", "enum", "cumulative", "description"}
MAX_STRING = 200
SEQ_MAX = 2**63 - 1

# The built-in clean-cooking stove: an electric (or pellet) stove with a metering board.
STOVE_TELEMETRY: dict[str, Any] = {
    "fields": {
        "session": {
            "type": "string",
            "enum": ["start", "end"],
            "description": "A cooking session starts or ends at this reading's time.",
        },
        "energyKwh": {
            "type": "number",
            "unit": "kWh",
            "min": 0,
            "max": 20,
            "description": "Energy used since the previous reading.",
        },
        "fuelKg": {
            "type": "number",
            "unit": "kg",
            "min": 0,
            "max": 20,
            "description": "Fuel (pellets) burnt since the previous reading.",
        },
        "meterKwh": {
            "type": "number",
            "unit": "kWh",
            "min": 0,
            "max": 1_000_000,
            "cumulative": True,
            "description": "The stove's cumulative energy meter.",
        },
        "meterEvent": {
            "type": "string",
            "enum": ["reset"],
            "description": "The meter's register was reset to zero at this reading: the "
            "register counts again from zero (a declared reset, mrv/meter.py).",
        },
        "temperatureC": {"type": "number", "unit": "°C", "min": -40, "max": 700},
        "batteryPct": {"type": "number", "unit": "%", "min": 0, "max": 100},
        "faultCode": {
            "type": "string",
            "enum": ["none", "overheat", "sensor", "meter", "power", "fan"],
        },
    }
}


@dataclass(frozen=True)
class FieldSpec:
    name: str
    type: str
    unit: str | None
    min: float | None
    max: float | None
    enum: tuple[str, ...] | None
    cumulative: bool


@dataclass(frozen=True)
class TelemetrySchema:
    fields: dict[str, FieldSpec]

    @cached_property
    def checks(self) -> dict[str, Callable[[Any], bool]]:
        """Each field's value check, built once per schema (a schema is cached per twin):
        True when the value is valid; the reason is worked out only for invalid ones."""
        return {name: _compile(spec) for name, spec in self.fields.items()}

    @cached_property
    def column_checks(self) -> dict[str, Callable[[list[Any]], bool]]:
        """Each field's check of a whole column of values (check_readings' common case):
        True only when `checks` would pass every one of them."""
        return {name: _compile_column(spec) for name, spec in self.fields.items()}

    @property
    def meter(self) -> str | None:
        return next((f.name for f in self.fields.values() if f.cumulative), None)

    @property
    def numeric(self) -> list[str]:
        return [f.name for f in self.fields.values() if f.type in NUMERIC]

    @property
    def counted(self) -> list[str]:
        """Enum fields: their values are counted in the rollups (e.g. sessions started)."""
        return [f.name for f in self.fields.values() if f.enum]

    def as_record(self) -> dict[str, Any]:
        return {
            "fields": {
                f.name: {
                    k: v
                    for k, v in (
                        ("type", f.type),
                        ("unit", f.unit),
                        ("min", f.min),
                        ("max", f.max),
                        ("enum", list(f.enum) if f.enum else None),
                        ("cumulative", f.cumulative or None),
                    )
                    if v is not None
                }
                for f in self.fields.values()
            },
            "meter": self.meter,
        }


def check_declaration(declaration: Any, problems: Problems, where: str = "telemetry") -> None:
    """Every problem of a protocol's telemetry declaration, added to `problems`."""
    if not isinstance(declaration, dict) or set(declaration) - {"fields"}:
        problems.add(where, "expected an object {'fields': {name: {type, unit, min, max}}}")
        return
    fields = declaration.get("fields")
    if not isinstance(fields, dict) or not fields:
        problems.add(f"{where}.fields", "expected at least one field")
        return
    if len(fields) > 64:
        problems.add(f"{where}.fields", "at most 64 fields")
    meters = 0
    for name, spec in fields.items():
        at = f"{where}.fields.{name}"
        if not _NAME.match(name):
            problems.add(at, "names start with a letter, then letters, digits or _ (at most 64)")
        if not isinstance(spec, dict):
            problems.add(at, "expected an object with a type")
            continue
        unknown = set(spec) - _KEYS
        if unknown:
            problems.add(at, f"unknown keys: {', '.join(sorted(unknown))}")
        kind = spec.get("type")
        if kind not in FIELD_TYPES:
            problems.add(f"{at}.type", f"expected one of {', '.join(FIELD_TYPES)}")
            continue
        unit = spec.get("unit")
        if unit is not None and (not isinstance(unit, str) or not 1 <= len(unit) <= 20):
            problems.add(f"{at}.unit", "expected a unit of 1 to 20 characters")
        for bound in ("min", "max"):
            value = spec.get(bound)
            if value is None:
                continue
            if kind not in NUMERIC:
                problems.add(f"{at}.{bound}", "only numeric fields have bounds")
            elif not _finite(value):
                problems.add(f"{at}.{bound}", "expected a finite number")
        low, high = spec.get("min"), spec.get("max")
        if _finite(low) and _finite(high) and low > high:
            problems.add(at, "min is greater than max")
        enum = spec.get("enum")
        if enum is not None:
            if kind != "string":
                problems.add(f"{at}.enum", "only string fields have an enum")
            elif (
                not isinstance(enum, list)
                or not enum
                or not all(isinstance(item, str) and item for item in enum)
            ):
                problems.add(f"{at}.enum", "expected a list of non-empty strings")
        cumulative = spec.get("cumulative", False)
        if not isinstance(cumulative, bool):
            problems.add(f"{at}.cumulative", "expected true or false")
        elif cumulative:
            meters += 1
            if kind not in NUMERIC:
                problems.add(f"{at}.cumulative", "only a numeric field can be the meter")
    if meters > 1:
        problems.add(f"{where}.fields", "at most one field is the cumulative meter")


def parse_schema(declaration: dict[str, Any]) -> TelemetrySchema:
    """A checked declaration as a schema (check_declaration first)."""
    fields = {}
    for name, spec in declaration["fields"].items():
        enum = spec.get("enum")
        fields[name] = FieldSpec(
            name=name,
            type=spec["type"],
            unit=spec.get("unit"),
            min=spec.get("min"),
            max=spec.get("max"),
            enum=tuple(enum) if enum else None,
            cumulative=bool(spec.get("cumulative", False)),
        )
    return TelemetrySchema(fields)


class Reading(NamedTuple):
    """One checked reading (a named tuple: made for every reading, cheaper than a frozen
    dataclass)."""

    seq: int
    time: datetime
    values: dict[str, Any]


# A reading's order, as a max or sort key: its time, then its seq (C-level, no lambda).
READING_ORDER = attrgetter("time", "seq")


@dataclass(frozen=True)
class Rejection:
    index: int
    field: str
    error: str
    seq: int | None = None

    def as_detail(self) -> dict[str, Any]:
        return {"field": f"readings[{self.index}].{self.field}".rstrip("."), "error": self.error}


def loads(data: bytes | str) -> Any:
    """A telemetry body or message parsed (orjson: several times the standard library's
    speed; NaN and Infinity are not JSON and are refused). Raises ValueError."""
    return orjson.loads(data)


def dumps(value: Any) -> str:
    """JSON text of a reading's values, as stored (compact)."""
    return orjson.dumps(value).decode()


def dumps_each(values: Iterable[Any]) -> list[str]:
    """dumps of each value, by C-level maps (a batch's readings: no Python call each)."""
    return list(map(bytes.decode, map(orjson.dumps, values)))


def _finite(value: Any) -> bool:
    """A number a float64 holds (an integer past its range is not one: no figure can sum it,
    and math.isfinite raises on it)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


TIME_EXPECTED = f"expected an RFC 3339 time with its offset, {TIME_RANGE}"


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp with its offset, in UTC; None when it is not one, or not one
    of the years kernel.bounds allows (checked as written: year 1 or 9999 overflowed
    Python's dates on the way to UTC, and PostgreSQL's partitions after)."""
    if not isinstance(value, str) or not 10 <= len(value) <= 40 or "T" not in value.upper():
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None or time_problem(parsed) is not None:
        return None
    return parsed.astimezone(UTC)


def check_reading(
    index: int, raw: Any, schema: TelemetrySchema, latest_allowed: datetime
) -> Reading | Rejection:
    """A valid reading, or the first reason it is not one."""
    if not isinstance(raw, dict):
        return Rejection(index, "", "expected an object with seq, time and values")
    unknown = set(raw) - {"seq", "time", "values"}
    if unknown:
        return Rejection(index, sorted(unknown)[0], "unknown field")
    seq = raw.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq <= SEQ_MAX:
        return Rejection(index, "seq", "expected a whole number from 0 to 2^63-1")
    if "time" not in raw:
        return Rejection(index, "time", "required", seq)
    time = parse_time(raw["time"])
    if time is None:
        return Rejection(index, "time", TIME_EXPECTED, seq)
    if time > latest_allowed:
        return Rejection(index, "time", "too far in the future", seq)
    values = raw.get("values")
    if not isinstance(values, dict) or not values:
        return Rejection(index, "values", "expected an object with at least one field", seq)
    checks = schema.checks
    for name, value in values.items():
        valid = checks.get(name)
        if valid is None:
            return Rejection(index, f"values.{name}", "not a telemetry field of the protocol", seq)
        if not valid(value):
            problem = _value_problem(schema.fields[name], value) or "invalid value"
            return Rejection(index, f"values.{name}", problem, seq)
    return Reading(seq, time, values)


def check_readings(
    items: list[Any], schema: TelemetrySchema, latest_allowed: datetime
) -> tuple[list[Reading], list[Rejection]]:
    """check_reading over a batch. The common case, a batch (of COLUMN_CHECK readings or
    more) whose every reading is plainly valid, is checked column by column (each check
    one C-level pass over the batch, no Python step per reading); any other batch reading
    by reading (_check_each), which finds the same verdicts and their reasons."""
    valid = None
    if len(items) >= COLUMN_CHECK:
        try:
            valid = _check_columns(items, schema, latest_allowed)
        except (KeyError, ValueError, TypeError, OverflowError):
            valid = None
    if valid is not None:
        return valid, []
    return _check_each(items, schema, latest_allowed)


# From this many readings the column pass costs less than the loop (measured: 1 reading
# 7.3 µs against 1.7, 8 readings 12.6 against 10.7, 32 readings 32 against 38).
COLUMN_CHECK = 16
_SEQ, _TIME, _VALUES = itemgetter("seq"), itemgetter("time"), itemgetter("values")
_ZONE, _YEAR = attrgetter("tzinfo"), attrgetter("year")
_TIME_OF = attrgetter("time")  # a Reading's
# A Reading made by tuple's own constructor: the named tuple's __new__ is a Python function.
_new_reading = partial(tuple.__new__, Reading)


def _check_columns(
    items: list[Any], schema: TelemetrySchema, latest_allowed: datetime
) -> list[Reading] | None:
    """The batch's readings when every one passes _check_each's inlined test (the same
    Readings, in order), else None: then _check_each decides. Raises KeyError, ValueError,
    TypeError or OverflowError on input its passes cannot take (also None, to the caller)."""
    if set(map(type, items)) != {dict} or set(map(len, items)) != {3}:
        return None
    seqs = list(map(_SEQ, items))  # three keys, each present: exactly seq, time, values
    texts = list(map(_TIME, items))
    values = list(map(_VALUES, items))
    if set(map(type, seqs)) != {int} or min(seqs) < 0 or max(seqs) > SEQ_MAX:
        return None
    if (
        set(map(type, texts)) != {str}
        or not 10 <= min(map(len, texts)) <= max(map(len, texts)) <= 40
    ):
        return None
    if not all(map(contains, texts, repeat("T"))) or any(map(contains, texts, repeat("z"))):
        return None  # a lower-case t or z: rare, left to _check_each
    if any(map(contains, texts, repeat("Z"))):
        texts = list(map(str.replace, texts, repeat("Z"), repeat("+00:00")))
    moments = list(map(datetime.fromisoformat, texts))
    if all(map(is_, map(_ZONE, moments), repeat(UTC))):  # usual: the years are UTC's
        first, last = min(moments), max(moments)
        if first.year < EARLIEST_YEAR or last.year > LATEST_YEAR:
            return None
    else:
        years = list(map(_YEAR, moments))
        if None in map(_ZONE, moments) or min(years) < EARLIEST_YEAR or max(years) > LATEST_YEAR:
            return None
        moments = list(map(datetime.astimezone, moments, repeat(UTC)))
        last = max(moments)
    if last > latest_allowed:
        return None
    if set(map(type, values)) != {dict} or not min(map(len, values)):
        return None
    checks = schema.column_checks
    for name in set(chain.from_iterable(values)):
        check = checks.get(name)
        if check is None:
            return None
        try:
            column = list(map(itemgetter(name), values))  # in every reading: the usual case
        except KeyError:
            column = [one[name] for one in values if name in one]
        if not check(column):
            return None
    return list(map(_new_reading, zip(seqs, moments, values, strict=True)))


def _check_each(
    items: list[Any], schema: TelemetrySchema, latest_allowed: datetime
) -> tuple[list[Reading], list[Rejection]]:
    """check_reading over a batch, with the common case inlined (one loop, no call per
    reading): a reading that is not plainly valid goes through check_reading, which
    finds the same verdict and its reason."""
    checks = schema.checks
    parse = datetime.fromisoformat
    earliest, latest = EARLIEST_YEAR, LATEST_YEAR
    valid: list[Reading] = []
    append = valid.append
    rejected: list[Rejection] = []
    for index, raw in enumerate(items):
        try:
            if type(raw) is dict and len(raw) == 3:
                seq, text, values = raw["seq"], raw["time"], raw["values"]
                if (
                    type(seq) is int
                    and 0 <= seq <= SEQ_MAX
                    and type(text) is str
                    and 10 <= len(text) <= 40
                    and ("T" in text or "t" in text)
                    and type(values) is dict
                    and values
                ):
                    if "z" in text or "Z" in text:
                        text = text.replace("z", "Z").replace("Z", "+00:00")
                    moment = parse(text)
                    if moment.tzinfo is not None and earliest <= moment.year <= latest:
                        moment = moment.astimezone(UTC)  # no copy when it is UTC already
                        if moment <= latest_allowed:
                            for name, value in values.items():
                                check = checks.get(name)
                                if check is None or not check(value):
                                    break
                            else:
                                append(Reading(seq, moment, values))
                                continue
        except (KeyError, ValueError, TypeError, OverflowError):
            pass
        checked = check_reading(index, raw, schema, latest_allowed)
        if isinstance(checked, Rejection):
            rejected.append(checked)
        else:
            valid.append(checked)
    return valid, rejected


def _compile(spec: FieldSpec) -> Callable[[Any], bool]:
    """A fast yes/no check of one field's values, agreeing with _value_problem (which it
    falls back on for any type JSON does not give as exactly int, float, bool or str)."""
    low, high = spec.min, spec.max

    def in_range(value: float) -> bool:
        return (low is None or value >= low) and (high is None or value <= high)

    def slow(value: Any) -> bool:
        return _value_problem(spec, value) is None

    if spec.type == "number" and low is not None and high is not None:

        def bounded(value: Any) -> bool:
            # Finite bounds: a value between them is finite (NaN and infinities fail).
            kind = type(value)
            return low <= value <= high if kind is float or kind is int else slow(value)

        return bounded
    if spec.type == "number":

        def number(value: Any) -> bool:
            kind = type(value)
            if kind is float:
                return math.isfinite(value) and in_range(value)
            return in_range(value) if kind is int else slow(value)

        return number
    if spec.type == "integer":
        return lambda value: in_range(value) if type(value) is int else slow(value)
    if spec.type == "boolean":
        return lambda value: type(value) is bool or slow(value)
    allowed = frozenset(spec.enum) if spec.enum else None

    def string(value: Any) -> bool:
        if type(value) is not str or "\x00" in value:
            return slow(value)
        return len(value) <= MAX_STRING and (allowed is None or value in allowed)

    return string


def _compile_column(spec: FieldSpec) -> Callable[[list[Any]], bool]:
    """_compile's check over a column of values at once: True only when it passes every
    one (a value of any other type, or a NaN, fails the column: _check_each then judges
    each value alone). Exact Python comparisons (min/max), as _compile's: no rounding of
    integers to floats."""
    low, high = spec.min, spec.max

    def in_range(column: list[Any]) -> bool:
        return (low is None or min(column) >= low) and (high is None or max(column) <= high)

    if spec.type == "number":

        def number(column: list[Any]) -> bool:
            kinds = set(map(type, column))
            if not kinds <= {int, float}:
                return False
            # A NaN or an infinity makes the sum one (so may a huge sum: then each is judged).
            return (float not in kinds or math.isfinite(sum(column))) and in_range(column)

        return number
    if spec.type == "integer":
        return lambda column: set(map(type, column)) == {int} and in_range(column)
    if spec.type == "boolean":
        return lambda column: set(map(type, column)) == {bool}
    allowed = frozenset(spec.enum) if spec.enum else None

    def string(column: list[Any]) -> bool:
        if set(map(type, column)) != {str} or any(map(contains, column, repeat("\x00"))):
            return False
        if max(map(len, column)) > MAX_STRING:
            return False
        return allowed is None or allowed.issuperset(column)

    return string


def _value_problem(spec: FieldSpec, value: Any) -> str | None:
    match spec.type:
        case "number":
            if not _finite(value):
                return "expected a finite number"
        case "integer":
            if not isinstance(value, int) or isinstance(value, bool):
                return "expected a whole number"
        case "boolean":
            return None if isinstance(value, bool) else "expected true or false"
        case "string":
            if not isinstance(value, str) or len(value) > MAX_STRING:
                return f"expected a string of at most {MAX_STRING} characters"
            if text_problem(value) is not None:
                return text_problem(value)
            if spec.enum and value not in spec.enum:
                return f"expected one of {', '.join(spec.enum)}"
            return None
    if spec.min is not None and value < spec.min:
        return f"below the minimum {spec.min}{(' ' + spec.unit) if spec.unit else ''}"
    if spec.max is not None and value > spec.max:
        return f"above the maximum {spec.max}{(' ' + spec.unit) if spec.unit else ''}"
    return None


BEFORE_ENROLMENT = "before the device's enrolment"
AHEAD_OF_RECEIPT = "ahead of its receipt time"
BEHIND_RECEIPT = "too long before its receipt time"


def clock_problem(
    moment: datetime,
    received: datetime,
    enrolled: datetime | None,
    future: timedelta,
    past: timedelta | None,
) -> str | None:
    """Why a reading's time cannot be trusted (issue 30 §6), or None: timed before its
    device's enrolment, more than `future` after its receipt, or more than `past` before it
    (None: no past limit). Such a reading is quarantined, never rolled up or credited."""
    if enrolled is not None and moment < enrolled:
        return BEFORE_ENROLMENT
    if moment > received + future:
        return AHEAD_OF_RECEIPT
    if past is not None and moment < received - past:
        return BEHIND_RECEIPT
    return None


def split_by_clock(
    readings: list[Reading],
    received: datetime,
    enrolled: datetime | None,
    future: timedelta,
    past: timedelta | None,
) -> tuple[list[Reading], list[tuple[Reading, str]]]:
    """The readings whose time is plausible, and the others with their reasons; one
    comparison pair per reading in the common case (all within the bounds)."""
    low = received - past if past is not None else None
    if enrolled is not None and (low is None or enrolled > low):
        low = enrolled
    high = received + future
    times = list(map(_TIME_OF, readings))
    if not times or (max(times) <= high and (low is None or min(times) >= low)):
        return readings, []
    kept: list[Reading] = []
    out: list[tuple[Reading, str]] = []
    for reading in readings:
        problem = clock_problem(reading.time, received, enrolled, future, past)
        if problem is None:
            kept.append(reading)
        else:
            out.append((reading, problem))
    return kept, out
