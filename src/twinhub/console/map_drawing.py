"""The programme map, drawn on the server as SVG from the programme's own data: no tiles,
no network, no script.

Stoves with a location are projected into the bounding box of the programme (or of the
part asked for), equirectangular with the longitude scaled by the cosine of the middle
latitude, so distances read right near the equator and in the tropics where stove
programmes are. Points closer than a cell are drawn as one group with its count, which
links to the map of that group's box; regions are labelled where their stoves are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from twinhub.services.programme_views import STATES, Place

WIDTH = 640.0  # the viewBox's width; its height follows the programme's shape
MIN_HEIGHT, MAX_HEIGHT = 320.0, 640.0
MARGIN = 28.0
# Points within one cell of this size are drawn as one group, and groups whose circles
# would overlap are merged; a phone gets the coarse map (fewer, larger marks), a wide
# screen the fine one (the page carries both; CSS shows one).
CELLS = {"fine": 40.0, "coarse": 90.0}
SIZES = {"fine": 1.0, "coarse": 2.0}  # marks' radius factor
MIN_SPAN = 0.01  # degrees: a box no smaller than about a kilometre
STEPS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 45.0)


@dataclass(frozen=True)
class Box:
    south: float
    west: float
    north: float
    east: float

    @classmethod
    def parse(cls, text: str) -> Box:
        """`south,west,north,east` in decimal degrees; ValueError says what is wrong."""
        parts = text.split(",")
        if len(parts) != 4:
            raise ValueError("a box is south,west,north,east in degrees")
        try:
            south, west, north, east = (float(part) for part in parts)
        except ValueError:
            raise ValueError("a box's edges are numbers of degrees") from None
        if not all(math.isfinite(v) for v in (south, west, north, east)):
            raise ValueError("a box's edges are numbers")
        if not -90 <= south < north <= 90 or not -180 <= west < east <= 180:
            raise ValueError("south < north within -90..90 and west < east within -180..180")
        return cls(south, west, north, east)

    def holds(self, place: Place) -> bool:
        return self.south <= place.lat <= self.north and self.west <= place.lon <= self.east

    def text(self) -> str:
        return ",".join(f"{v:.5f}" for v in (self.south, self.west, self.north, self.east))


@dataclass
class Mark:
    """A stove, or a group of stoves drawn as one."""

    x: float
    y: float
    places: list[Place]
    counts: dict[str, int] = field(default_factory=dict)
    region: str = ""

    @property
    def state(self) -> str:
        """The group's most common state (ties: the order of STATES)."""
        return max(STATES, key=lambda s: (self.counts.get(s, 0), -STATES.index(s)))

    def radius(self, size: float) -> float:
        n = len(self.places)
        return size * (6.0 if n == 1 else min(9.0 + 3.0 * math.log2(n), 24.0))

    def absorb(self, other: Mark) -> None:
        n, m = len(self.places), len(other.places)
        self.x = (self.x * n + other.x * m) / (n + m)
        self.y = (self.y * n + other.y * m) / (n + m)
        self.places += other.places
        for state, count in other.counts.items():
            self.counts[state] = self.counts.get(state, 0) + count


def _bounds(places: Sequence[Place]) -> Box:
    south, north = min(p.lat for p in places), max(p.lat for p in places)
    west, east = min(p.lon for p in places), max(p.lon for p in places)
    pad_lat = max((north - south) * 0.08, MIN_SPAN / 2)
    pad_lon = max((east - west) * 0.08, MIN_SPAN / 2)
    return Box(
        max(south - pad_lat, -90),
        max(west - pad_lon, -180),
        min(north + pad_lat, 90),
        min(east + pad_lon, 180),
    )


def _step(span: float) -> float:
    """A round graticule step giving three to eight lines over `span` degrees."""
    return next((s for s in STEPS if span / s <= 8), STEPS[-1])


def _degrees(value: float, positive: str, negative: str, step: float) -> str:
    text = f"{step:g}"
    places = len(text.split(".")[1]) if "." in text else 0
    return f"{abs(value):.{places}f}°{positive if value >= 0 else negative}"


def draw(
    places: Sequence[Place], box: Box | None = None, detail: str = "fine"
) -> dict[str, Any] | None:
    """The map's geometry: viewBox size, marks, region labels and graticule, for the
    template to write as SVG (escaped there). None when no place is in view."""
    shown = [p for p in places if box is None or box.holds(p)]
    if not shown:
        return None
    view = box or _bounds(shown)
    middle = math.radians((view.north + view.south) / 2)
    lon_scale = max(math.cos(middle), 0.05)
    span_x = (view.east - view.west) * lon_scale
    span_y = view.north - view.south
    height = min(max(WIDTH * span_y / span_x, MIN_HEIGHT), MAX_HEIGHT)
    scale = min((WIDTH - 2 * MARGIN) / span_x, (height - 2 * MARGIN) / span_y)
    mid_lon, mid_lat = (view.east + view.west) / 2, (view.north + view.south) / 2

    def project(lat: float, lon: float) -> tuple[float, float]:
        return (
            WIDTH / 2 + (lon - mid_lon) * lon_scale * scale,
            height / 2 - (lat - mid_lat) * scale,
        )

    cell, size = CELLS[detail], SIZES[detail]
    # A group never mixes regions: its count would otherwise belong to two labels.
    cells: dict[tuple[str, int, int], Mark] = {}
    for place in shown:
        x, y = project(place.lat, place.lon)
        key = (place.region or "", int(x // cell), int(y // cell))
        mark = cells.setdefault(key, Mark(0.0, 0.0, [], region=place.region or ""))
        mark.x += x
        mark.y += y
        mark.places.append(place)
        mark.counts[place.state] = mark.counts.get(place.state, 0) + 1
    for mark in cells.values():
        mark.x /= len(mark.places)
        mark.y /= len(mark.places)
    finest = span_y <= MIN_SPAN * 1.5
    merged = _spread(_merged(list(cells.values()), size), size, height)
    marks = [_as_view(mark, finest, size) for mark in merged]
    regions: dict[str, list[Mark]] = {}
    for mark in merged:
        if mark.region:
            regions.setdefault(mark.region, []).append(mark)
    labels = _labels(regions, merged, size, height)
    return {
        "width": WIDTH,
        "height": round(height, 1),
        "box": view,
        "marks": sorted(marks, key=lambda m: m["count"]),  # groups over single stoves
        "labels": labels,
        "graticule": _graticule(view, project, height),
        "shown": len(shown),
        "detail": detail,
        "dot": 6.0 * size,
    }


def _merged(marks: list[Mark], size: float) -> list[Mark]:
    """Marks whose circles would overlap, merged into one (the larger absorbs), until none
    overlap (a few rounds; the marks are at most a few hundred grid cells)."""
    for _ in range(8):
        marks.sort(key=lambda m: -len(m.places))
        kept: list[Mark] = []
        changed = False
        for mark in marks:
            into = next(
                (
                    k
                    for k in kept
                    if k.region == mark.region
                    and math.hypot(k.x - mark.x, k.y - mark.y)
                    < k.radius(size) + mark.radius(size) + 2 * size
                ),
                None,
            )
            if into is None:
                kept.append(mark)
            else:
                into.absorb(mark)
                changed = True
        marks = kept
        if not changed:
            break
    return marks


LABEL_FONT = 13.0  # the region labels' size in the fine map (views.css; twice in the coarse)


def _labels(
    regions: dict[str, list[Mark]], marks: list[Mark], size: float, height: float
) -> list[dict[str, Any]]:
    """Each region's name beside its stoves, where it covers no mark and no other name:
    above its highest mark, else below its lowest, else to the right or the left; above
    when nothing is free."""
    font = LABEL_FONT * size
    taken: list[Rect] = [
        (m.x - m.radius(size), m.y - m.radius(size), m.x + m.radius(size), m.y + m.radius(size))
        for m in marks
    ]
    labels = []
    for name, group in sorted(regions.items(), key=lambda item: -len(item[1])):
        width = len(name) * font * 0.62
        count = sum(len(m.places) for m in group)
        x = sum(m.x * len(m.places) for m in group) / count
        top = min(m.y - m.radius(size) for m in group)
        bottom = max(m.y + m.radius(size) for m in group)
        left = min(m.x - m.radius(size) for m in group)
        right = max(m.x + m.radius(size) for m in group)
        middle = (top + bottom) / 2 + font / 3
        candidates = [
            (x, top - 4 * size),  # text's baseline: its box is font tall above it
            (x, bottom + font + 2 * size),
            (right + 4 * size + width / 2, middle),
            (left - 4 * size - width / 2, middle),
        ]

        boxes = [_text_box(c, width, font) for c in candidates]
        spot, placed = next(
            ((c, b) for c, b in zip(candidates, boxes, strict=True) if _free(b, taken, height)),
            (candidates[0], boxes[0]),
        )
        taken.append(placed)
        labels.append({"name": name, "x": spot[0], "y": max(spot[1], font), "count": count})
    return labels


Rect = tuple[float, float, float, float]


def _text_box(at: tuple[float, float], width: float, font: float) -> Rect:
    """The box of a centred label whose baseline is at `at`."""
    return (at[0] - width / 2, at[1] - font, at[0] + width / 2, at[1] + font * 0.25)


def _free(box: Rect, taken: list[Rect], height: float) -> bool:
    x0, y0, x1, y1 = box
    inside = x0 >= 0 and x1 <= WIDTH and y0 >= 0 and y1 <= height
    return inside and not any(x0 < b[2] and b[0] < x1 and y0 < b[3] and b[1] < y1 for b in taken)


SPREAD_MAX = 300  # marks: above this, overlaps between regions are left as they are


def _spread(marks: list[Mark], size: float, height: float) -> list[Mark]:
    """Groups of different regions that overlap are pushed apart (a few rounds, each pair
    moved half its overlap each way): a group's circle stands for its stoves, so a few
    units off their mean is no error; two circles on top of each other would hide one."""
    if len(marks) > SPREAD_MAX:
        return marks
    for _ in range(40):
        moved = False
        for i, a in enumerate(marks):
            for b in marks[i + 1 :]:
                dx, dy = b.x - a.x, b.y - a.y
                distance = math.hypot(dx, dy)
                room = a.radius(size) + b.radius(size) + 3 * size
                if distance >= room:
                    continue
                if distance < 1e-6:
                    dx, dy, distance = 1.0, 0.0, 1.0
                push = (room - distance) / 2
                a.x, a.y = a.x - dx / distance * push, a.y - dy / distance * push
                b.x, b.y = b.x + dx / distance * push, b.y + dy / distance * push
                moved = True
        for mark in marks:
            r = mark.radius(size)
            mark.x = min(max(mark.x, r), WIDTH - r)
            mark.y = min(max(mark.y, r), height - r)
        if not moved:
            break
    return marks


def _as_view(mark: Mark, finest: bool, size: float) -> dict[str, Any]:
    """What the template needs of a mark; a group's box, to zoom into (none at the finest
    zoom, where its stoves are listed instead)."""
    places = mark.places
    zoom = None
    if len(places) > 1 and not finest:
        zoom = _bounds(places).text()
    return {
        "x": round(mark.x, 1),
        "y": round(mark.y, 1),
        "r": round(mark.radius(size), 1),
        "count": len(places),
        "state": mark.state,
        # A group of mixed states: its next most common state, drawn as a ring around it.
        "minor": next(
            (
                state
                for state in sorted(STATES, key=lambda st: -mark.counts.get(st, 0))
                if state != mark.state and mark.counts.get(state)
            ),
            None,
        ),
        "counts": mark.counts,
        "place": places[0] if len(places) == 1 else None,
        "ring": _ring(mark, size) if len(places) > 1 and finest else [],
        "zoom": zoom,
    }


def _ring(mark: Mark, size: float) -> list[dict[str, Any]]:
    """Stoves at one spot (closer than the finest zoom tells apart), drawn around it."""
    n = len(mark.places)
    radius = size * (14.0 + 2.0 * n / 6)
    return [
        {
            "place": place,
            "x": round(mark.x + radius * math.cos(2 * math.pi * i / n), 1),
            "y": round(mark.y + radius * math.sin(2 * math.pi * i / n), 1),
        }
        for i, place in enumerate(mark.places)
    ]


def _graticule(view: Box, project: Any, height: float) -> list[dict[str, Any]]:
    lines = []
    step = _step(max(view.north - view.south, view.east - view.west))
    lat = math.ceil(view.south / step) * step
    while lat <= view.north:
        _, y = project(lat, view.west)
        if 0 <= y <= height:
            lines.append(
                {
                    "x1": 0,
                    "y1": y,
                    "x2": WIDTH,
                    "y2": y,
                    "label": _degrees(lat, "N", "S", step),
                    "lx": 4,
                    "ly": y - 3,
                }
            )
        lat += step
    lon = math.ceil(view.west / step) * step
    while lon <= view.east:
        x, _ = project(view.south, lon)
        if 0 <= x <= WIDTH:
            lines.append(
                {
                    "x1": x,
                    "y1": 0,
                    "x2": x,
                    "y2": height,
                    "label": _degrees(lon, "E", "W", step),
                    "lx": x + 3,
                    "ly": height - 4,
                }
            )
        lon += step
    return [
        {k: round(v, 1) if isinstance(v, float) else v for k, v in line.items()} for line in lines
    ]


def region_table(places: Sequence[Place]) -> list[dict[str, Any]]:
    """Stoves per region and state, for the table beside the map (no region: '—')."""
    rows: dict[str, dict[str, int]] = {}
    for place in places:
        counts = rows.setdefault(place.region or "—", dict.fromkeys(STATES, 0))
        counts[place.state] += 1
    return [
        {"region": name, "total": sum(counts.values()), **counts}
        for name, counts in sorted(rows.items(), key=lambda item: (-sum(item[1].values()), item[0]))
    ]
