"""The pure parts of the console's views: the map's geometry and the twin chart's panels."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from twinhub.console.map_drawing import Box, draw, region_table
from twinhub.console.twin_history import history, panels_for
from twinhub.mrv.telemetry_schema import STOVE_TELEMETRY, parse_schema
from twinhub.services.programme_views import Place


def place(n: int, lat: float, lon: float, region: str = "A", state: str = "verified") -> Place:
    return Place(f"did:ixo:entity/s{n}", f"stove {n}", state, lat, lon, region, None)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("1,2,3", "south,west,north,east"),
        ("a,b,c,d", "numbers of degrees"),
        ("10,0,5,1", "south < north"),
        ("-91,0,0,1", "south < north"),
        ("0,10,1,5", "west < east"),
        ("nan,0,1,1", "numbers"),
    ],
)
def test_a_box_is_checked(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        Box.parse(text)


def test_a_box_round_trips() -> None:
    box = Box.parse("-15.5,28.1,-15.3,28.4")
    assert Box.parse(box.text()) == box


def test_close_stoves_are_one_group_far_ones_their_own_marks() -> None:
    near = [place(n, -15.42 + n * 1e-5, 28.28) for n in range(10)]
    far = place(99, -13.0, 31.0, region="B", state="unverified")
    drawn = draw([*near, far])
    assert drawn is not None
    marks = sorted(drawn["marks"], key=lambda m: m["count"])
    assert [m["count"] for m in marks] == [1, 10]
    assert marks[0]["place"] == far and marks[0]["state"] == "unverified"
    assert marks[1]["zoom"] is not None and marks[1]["place"] is None
    # Its box holds the ten; drawn alone they are too close to tell apart: a ring.
    zoomed = draw([*near, far], Box.parse(marks[1]["zoom"]))
    assert zoomed is not None and zoomed["shown"] == 10
    (ring,) = zoomed["marks"]
    assert sorted(spot["place"].did for spot in ring["ring"]) == sorted(p.did for p in near)
    for mark in drawn["marks"]:
        assert 0 <= mark["x"] <= drawn["width"] and 0 <= mark["y"] <= drawn["height"]


def test_groups_keep_to_their_region_and_names_cover_no_mark() -> None:
    places = [place(n, -15.0 + (n % 3) * 1e-4, 28.0, region="A") for n in range(6)]
    places += [place(10 + n, -15.0 + (n % 3) * 1e-4, 28.0002, region="B") for n in range(4)]
    places += [place(20, -16.0, 29.0, region="C")]
    for detail in ("fine", "coarse"):
        drawn = draw(places, None, detail)
        assert drawn is not None
        counts = sorted(m["count"] for m in drawn["marks"])
        assert counts == [1, 4, 6], detail  # A and B are not merged though they touch
        marks = drawn["marks"]
        for a in marks:
            for b in marks:
                if a is not b:
                    gap = ((a["x"] - b["x"]) ** 2 + (a["y"] - b["y"]) ** 2) ** 0.5
                    assert gap >= a["r"] + b["r"], detail
        assert sorted(label["name"] for label in drawn["labels"]) == ["A", "B", "C"]


def test_no_place_in_view_draws_nothing() -> None:
    assert draw([]) is None
    assert draw([place(1, -15, 28)], Box.parse("60,10,61,11")) is None


def test_the_region_table_counts_by_state() -> None:
    rows = region_table(
        [place(1, 0, 0, "A"), place(2, 0, 0, "A", "deactivated"), place(3, 0, 0, "B")]
    )
    assert rows[0] == {"region": "A", "total": 2, "verified": 1, "unverified": 0, "deactivated": 1}


def test_the_stove_panels_keep_the_register_apart() -> None:
    panels = {p["id"]: p for p in panels_for(parse_schema(STOVE_TELEMETRY), "day")}
    keys = {name: [s["key"] for s in p["series"]] for name, p in panels.items()}
    assert keys == {
        "register": ["meterKwh"],
        "use": ["energyKwh", "fuelKg", "session=start"],
        "condition": ["temperatureC", "batteryPct"],
    }
    assert {s["how"] for s in panels["use"]["series"]} == {"sum", "count"}


def test_twelve_months_are_a_bucket_each() -> None:
    end = datetime(2026, 11, 28, 12, tzinfo=UTC)
    chart = history(parse_schema(STOVE_TELEMETRY), {}, "365d", end)
    first = chart["panels"][0]["x"]
    months = [datetime.fromtimestamp(x, UTC) for x in first]
    assert months[0] == datetime(2025, 11, 1, tzinfo=UTC)
    assert months[-1] == datetime(2026, 11, 1, tzinfo=UTC) and len(months) == 13
    assert all(m.day == 1 for m in months)
