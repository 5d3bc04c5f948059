"""A twin's telemetry history as the twin page draws it: panels of series from the rollups,
each quantity with its unit, the meter register apart from per-session figures.

Three panels, from the twin protocol's telemetry declaration:
- register: the cumulative meter (its highest value in each bucket: where it stood);
- use: what readings report "since the previous reading" (energy, fuel; summed per
  bucket) and the cooking sessions started (counted per bucket);
- condition: every other number (temperature, battery; the mean per bucket).
The page's script (static/js/live.js) draws them with uPlot, one y axis per unit, and folds
the live readings of the event stream into them by the same rules (`how`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from twinhub.mrv.rollups import ENERGY, FUEL, SESSIONS, bucket_of, counted_field
from twinhub.mrv.telemetry_schema import TelemetrySchema

# The ranges the page offers: days shown and the rollup interval read.
RANGES: dict[str, tuple[int, str, str]] = {
    "7d": (7, "hour", "7 days"),
    "30d": (30, "day", "30 days"),
    "90d": (90, "day", "90 days"),
    "365d": (365, "month", "12 months"),
}
DEFAULT_RANGE = "90d"
FLOWS = {ENERGY: "energy used", FUEL: "fuel used"}  # per reading: summed per bucket
PER = {"hour": "per hour", "day": "per day", "month": "per month"}


def _series(key: str, field: str, label: str, unit: str, how: str, **extra: Any) -> dict[str, Any]:
    return {"key": key, "field": field, "label": label, "unit": unit, "how": how, **extra}


def panels_for(schema: TelemetrySchema, interval: str) -> list[dict[str, Any]]:
    """The panels and their series for a twin reporting `schema` (no data yet)."""
    per = PER[interval]
    register, use, condition = [], [], []
    for spec in schema.fields.values():
        unit = spec.unit or ""
        if spec.cumulative:
            label = f"meter register ({unit})" if unit else "meter register"
            register.append(_series(spec.name, spec.name, label, unit or "register", "last"))
        elif spec.name in FLOWS and spec.type in ("number", "integer"):
            label = f"{FLOWS[spec.name]} ({unit} {per})" if unit else f"{FLOWS[spec.name]} {per}"
            use.append(_series(spec.name, spec.name, label, f"{unit} {per}".strip(), "sum"))
        elif spec.type in ("number", "integer"):
            label = f"{spec.name} ({unit})" if unit else spec.name
            condition.append(_series(spec.name, spec.name, label, unit or spec.name, "mean"))
    session = schema.fields.get("session")
    if session is not None and session.enum and "start" in session.enum:
        use.append(
            _series(
                SESSIONS,
                "session",
                f"cooking sessions {per}",
                f"sessions {per}",
                "count",
                value="start",
            )
        )
    titles = {
        "register": "Meter register",
        "use": "Use",
        "condition": "Condition",
    }
    return [
        {"id": name, "title": titles[name], "series": series}
        for name, series in (("register", register), ("use", use), ("condition", condition))
        if series
    ]


def _value(cell: dict[str, float] | None, how: str) -> float | None:
    if not cell or not cell.get("count"):
        return None
    if how == "last":
        return cell["max"]
    if how == "sum":
        return cell["sum"]
    if how == "count":
        return cell["count"]
    return cell["sum"] / cell["count"]


def history(
    schema: TelemetrySchema,
    buckets: dict[datetime, dict[str, dict[str, float]]],
    range_key: str,
    end: datetime,
) -> dict[str, Any]:
    """The chart's data: {range, interval, from, to, panels: [{id, title, series, x,
    values}]}, each value from its bucket's rollup cell (None where there is none)."""
    days, interval, label = RANGES[range_key]
    start = bucket_of(end - timedelta(days=days), interval)
    # Every bucket of the range, those without readings too (drawn as gaps, not as a line
    # from the last reading across the weeks without any).
    times = _buckets(start, end, interval)
    empty: dict[str, dict[str, float]] = {}
    panels = panels_for(schema, interval)
    for panel in panels:
        for series in panel["series"]:
            series["cell"] = _cell_name(series)  # the rollup field the script reads
        panel["x"] = [int(moment.timestamp()) for moment in times]
        panel["values"] = [
            [_value(buckets.get(moment, empty).get(_cell_name(s)), s["how"]) for moment in times]
            for s in panel["series"]
        ]
    return {
        "range": range_key,
        "label": label,
        "interval": interval,
        "from": int(start.timestamp()),
        "to": int(end.timestamp()),
        "panels": panels,
    }


def _buckets(start: datetime, end: datetime, interval: str) -> list[datetime]:
    times, moment = [], start
    while moment < end:
        times.append(moment)
        if interval == "hour":
            moment += timedelta(hours=1)
        elif interval == "day":
            moment += timedelta(days=1)
        else:
            moment = (moment + timedelta(days=32)).replace(day=1)
    return times


def _cell_name(series: dict[str, Any]) -> str:
    if series["how"] == "count":
        return counted_field(series["field"], series["value"])
    return str(series["field"])


def range_start(range_key: str, end: datetime) -> datetime:
    days, interval, _ = RANGES[range_key]
    return bucket_of(end - timedelta(days=days), interval).astimezone(UTC)
