"""Charts of a stove's raw readings drawn on the server as SVG: a verifier's review page
shows what the meter said with no script at all (the page must read the same printed or
saved). One small chart per numeric field, time across, the field's own scale up; only
numbers reach the markup."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

WIDTH, HEIGHT = 640, 160
LEFT, RIGHT, TOP, BOTTOM = 56, 8, 10, 22  # room for the axis labels
MAX_POINTS = 2000  # a chart beyond this draws every n-th reading (the table lists all)


@dataclass(frozen=True)
class Chart:
    field: str
    points: str  # the polyline's "x,y x,y ..." in the viewBox
    dots: list[tuple[float, float]]
    low: float
    high: float
    first: str  # the first and last reading's time, as labels
    last: str
    count: int
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    top: int = TOP
    bottom: int = HEIGHT - BOTTOM
    right: int = WIDTH - RIGHT


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def charts(readings: Iterable[Mapping[str, Any]]) -> list[Chart]:
    """A chart for each numeric field of the readings ({time, values}), in name order."""
    series: dict[str, list[tuple[float, float]]] = {}
    labels: dict[float, str] = {}
    for reading in readings:
        try:
            moment = datetime.fromisoformat(str(reading["time"]).replace("Z", "+00:00"))
        except (KeyError, ValueError):
            continue
        x = moment.timestamp()
        labels.setdefault(x, moment.strftime("%Y-%m-%d %H:%M"))
        for name, value in (reading.get("values") or {}).items():
            number = _number(value)
            if number is not None:
                series.setdefault(str(name), []).append((x, number))
    return [_chart(name, points, labels) for name, points in sorted(series.items())]


def _chart(name: str, points: list[tuple[float, float]], labels: dict[float, str]) -> Chart:
    points.sort()
    step = max(1, len(points) // MAX_POINTS)
    drawn = points[::step]
    x0, x1 = points[0][0], points[-1][0]
    low = min(0.0, min(y for _, y in points))
    high = max(y for _, y in points)
    span_x = (x1 - x0) or 1.0
    span_y = (high - low) or 1.0
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    dots = [
        (
            round(LEFT + (x - x0) / span_x * inner_w, 1),
            round(TOP + inner_h - (y - low) / span_y * inner_h, 1),
        )
        for x, y in drawn
    ]
    return Chart(
        field=name,
        points=" ".join(f"{x},{y}" for x, y in dots),
        dots=dots if len(dots) <= 200 else [],
        low=low,
        high=high,
        first=labels[x0],
        last=labels[x1],
        count=len(points),
    )
