"""The console's views of a programme at scale, through the real ASGI stack on SQLite and
PostgreSQL: the graph's stove groups and their pages, a twin's history from the rollups,
the map of located stoves, and the stove protocol's checked location.

The browser tests (tests/e2e/test_console_views_browser.py) draw and click them."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import httpx

from tests.conftest import BOOTSTRAP_KEY, Registry
from tests.integration.console.test_console import console, sign_in
from tests.support.telemetry_world import STOVE, Farm, at, build_farm, day_start

EVIL = "<script>alert(1)</script>"


async def stove_at(farm: Farm, location: dict[str, Any] | None, name: str = "stove") -> str:
    body: dict[str, Any] = {
        "type": "Device",
        "class": STOVE,
        "metadata": {"name": name},
        "relationships": {"project": [farm.project]},
    }
    if location is not None:
        body["properties"] = {"location": location}
    made = await farm.registry.client.post("/v1/domains", json=body)
    assert made.status_code == 201, made.text
    return str(made.json()["did"])


def attribute(page: str, name: str) -> Any:
    found = re.search(rf'{name}="([^"]*)"', page)
    assert found, f"no {name} on the page"
    return json.loads(html.unescape(found.group(1)))


async def test_a_stove_location_is_a_checked_place(registry: Registry) -> None:
    farm = await build_farm(registry)
    for location, expected in (
        ({"lat": 91, "lon": 28.3}, "lat 91 is outside -90 to 90 degrees"),
        ({"lat": -15.4, "lon": -180.5}, "lon -180.5 is outside -180 to 180 degrees"),
        ({"lat": "-15.4", "lon": 28.3}, "lat must be a number of degrees from -90 to 90"),
        ({"lat": -15.4}, "lon must be a number"),
        ({"lat": -15.4, "lon": 28.3, "alt": 1200}, "unknown keys alt"),
        ({"lat": -15.4, "lon": 28.3, "region": ""}, "region must be a name of 1 to 100"),
        ([-15.4, 28.3], "expected an object {lat, lon}, got array"),
        ({"lat": True, "lon": 28.3}, "lat must be a number"),
    ):
        refused = await registry.client.post(
            "/v1/domains",
            json={
                "type": "Device",
                "class": STOVE,
                "properties": {"location": location},
                "relationships": {"project": [farm.project]},
            },
        )
        assert refused.status_code == 422, refused.text
        details = refused.json()["error"]["details"]
        assert details[0]["field"] == "properties.location", details
        assert expected in details[0]["error"], details
    # The edges are places too, and a stove without a location is fine (it is optional).
    for location in ({"lat": -90, "lon": 180}, {"lat": 0, "lon": -180, "region": "Equator"}):
        made = await stove_at(farm, location)
        assert (await registry.client.get(f"/v1/domains/{made}")).json()["properties"][
            "location"
        ] == location
    plain = await stove_at(farm, None)
    # A patch that breaks the rule is refused and leaves the record as it was.
    patched = await registry.client.patch(
        f"/v1/domains/{plain}", json={"properties": {"location": {"lat": -99, "lon": 0}}}
    )
    assert patched.status_code == 422, patched.text
    record = (await registry.client.get(f"/v1/domains/{plain}")).json()
    assert "location" not in record["properties"] and record["version"] == 1


async def test_the_graph_groups_a_projects_stoves_and_pages_a_group(registry: Registry) -> None:
    farm = await build_farm(registry)
    stoves = [await stove_at(farm, None, f"stove {n}") for n in range(30)]
    for did in stoves[:3]:
        gone = await registry.client.delete(f"/v1/domains/{did}")
        assert gone.status_code == 200, gone.text
    async with console(registry) as browser:
        await sign_in(browser, BOOTSTRAP_KEY)
        for root in (farm.project, farm.organisation):
            answer = await browser.get("/console/graph.json", params={"did": root})
            assert answer.status_code == 200, answer.text
            graph = answer.json()
            shown = {node["did"] for node in graph["nodes"]}
            # No stove is a node of its own: they are counted in groups by state.
            assert not shown & set(stoves), root
            assert {farm.project, farm.organisation} <= shown
            groups = {(g["project"], g["state"]): g["count"] for g in graph["groups"]}
            assert groups == {(farm.project, "unverified"): 27, (farm.project, "deactivated"): 3}
        # A group's stoves, 25 a page, in creation order, then the rest.
        first = (
            await browser.get(
                "/console/graph/members.json",
                params={"project": farm.project, "state": "unverified"},
            )
        ).json()
        assert first["total"] == 27 and first["next"]
        assert [item["did"] for item in first["items"]] == stoves[3:28]
        assert all(item["state"] == "unverified" for item in first["items"])
        rest = (
            await browser.get(
                "/console/graph/members.json",
                params={"project": farm.project, "state": "unverified", "cursor": first["next"]},
            )
        ).json()
        assert [item["did"] for item in rest["items"]] == stoves[28:] and rest["next"] is None
        deactivated = (
            await browser.get(
                "/console/graph/members.json",
                params={"project": farm.project, "state": "deactivated"},
            )
        ).json()
        assert [item["did"] for item in deactivated["items"]] == stoves[:3]
        # Bad requests answer in the API's error shape.
        for params, status, field in (
            ({"project": farm.project, "state": "lost"}, 422, "state"),
            ({"project": farm.project, "state": "verified", "cursor": "!!"}, 422, "cursor"),
            ({"project": "did:ixo:entity/nothing-here", "state": "verified"}, 404, None),
        ):
            answer = await browser.get("/console/graph/members.json", params=params)
            assert answer.status_code == status, answer.text
            error = answer.json()["error"]
            assert error["message"]
            if field:
                assert error["details"][0]["field"] == field
        missing = await browser.get("/console/graph.json", params={"did": "did:ixo:entity/x"})
        assert missing.status_code == 404


async def test_a_small_project_shows_each_stove_with_its_place_in_the_hierarchy(
    registry: Registry,
) -> None:
    farm = await build_farm(registry)
    stoves = [await stove_at(farm, None) for _ in range(3)]
    async with console(registry) as browser:
        await sign_in(browser, BOOTSTRAP_KEY)
        graph = (await browser.get("/console/graph.json", params={"did": farm.project})).json()
    assert graph["groups"] == []
    edges = {(e["source"], e["type"], e["target"]) for e in graph["edges"]}
    assert {(s, "project", farm.project) for s in stoves} <= edges
    assert (farm.project, "implementedBy", farm.organisation) in edges


async def test_the_twin_page_charts_the_rollups_register_apart_from_use(
    registry: Registry,
) -> None:
    farm = await build_farm(registry)
    stove = await farm.stove()
    first, second = day_start(3), day_start(2)
    sent = await farm.send(
        stove,
        [
            {"seq": 1, "time": at(first, 7), "values": {"session": "start", "meterKwh": 10.0}},
            {
                "seq": 2,
                "time": at(first, 8),
                "values": {"energyKwh": 0.5, "meterKwh": 10.5, "temperatureC": 180},
            },
            {"seq": 3, "time": at(first, 18), "values": {"session": "start", "temperatureC": 20}},
            {"seq": 4, "time": at(first, 19), "values": {"energyKwh": 0.7, "meterKwh": 11.2}},
            {"seq": 5, "time": at(second, 7), "values": {"session": "start", "batteryPct": 80}},
            {"seq": 6, "time": at(second, 8), "values": {"energyKwh": 1.0, "meterKwh": 12.2}},
        ],
    )
    assert sent.status_code == 200 and sent.json()["accepted"] == 6, sent.text
    async with console(registry) as browser:
        await sign_in(browser, BOOTSTRAP_KEY)
        page = await browser.get(f"/console/twins/{stove}", params={"range": "30d"})
        assert page.status_code == 200, page.text
        chart = attribute(page.text, "data-history")
        assert chart["interval"] == "day" and chart["range"] == "30d"
        panels = {panel["id"]: panel for panel in chart["panels"]}
        assert list(panels) == ["register", "use", "condition"]
        days = [int(first.timestamp()), int(second.timestamp())]

        def series(panel: str) -> dict[str, list[Any]]:
            """Each series' values on the two days; every other day of the range empty."""
            shown = panels[panel]
            assert len(shown["x"]) == 31 and shown["x"] == sorted(shown["x"])
            at = [shown["x"].index(day) for day in days]
            for values in shown["values"]:
                assert all(v is None for i, v in enumerate(values) if i not in at)
            return {
                s["key"]: [values[i] for i in at]
                for s, values in zip(shown["series"], shown["values"], strict=True)
                if any(v is not None for v in values)
            }

        # The meter register alone in its panel, in kWh: where it stood each day.
        assert series("register") == {"meterKwh": [11.2, 12.2]}
        assert panels["register"]["series"][0]["unit"] == "kWh"
        use = series("use")
        assert use["energyKwh"][0] == 1.2 or abs(use["energyKwh"][0] - 1.2) < 1e-9
        assert use["energyKwh"][1] == 1.0 and use["session=start"] == [2, 1]
        units = {s["key"]: s["unit"] for s in panels["use"]["series"]}
        assert units == {
            "energyKwh": "kWh per day",
            "fuelKg": "kg per day",
            "session=start": "sessions per day",
        }
        condition = series("condition")
        assert condition["temperatureC"] == [100.0, None]
        assert condition["batteryPct"] == [None, 80]
        # Seven days, hour by hour: each reading's hour is a bucket of its own.
        hourly = attribute(
            (await browser.get(f"/console/twins/{stove}", params={"range": "7d"})).text,
            "data-history",
        )
        assert hourly["interval"] == "hour"
        register = next(p for p in hourly["panels"] if p["id"] == "register")
        assert len(register["x"]) in (168, 169)  # the hour now is the 169th, once it began
        assert [v for v in register["values"][0] if v is not None] == [10.0, 10.5, 11.2, 12.2]
        hours = [register["x"][i] for i, v in enumerate(register["values"][0]) if v is not None]
        assert [h - hours[0] for h in hours] == [0, 3600, 12 * 3600, 25 * 3600]
        assert (
            await browser.get(f"/console/twins/{stove}", params={"range": "5y"})
        ).status_code == 422
        # A twin whose protocol declares no telemetry says so, and draws nothing.
        organisation = (await browser.get(f"/console/twins/{farm.organisation}")).text
        assert "declares no telemetry" in organisation and "data-history" not in organisation


async def test_the_map_draws_located_stoves_grouped_and_linked(registry: Registry) -> None:
    farm = await build_farm(registry)
    near = [
        await stove_at(farm, {"lat": -15.42 + n * 0.0001, "lon": 28.28, "region": "Lusaka"})
        for n in range(5)
    ]
    far = await stove_at(farm, {"lat": -13.0, "lon": 31.0, "region": EVIL}, name=EVIL)
    await stove_at(farm, None)  # no place: not on the map
    async with console(registry) as browser:
        await sign_in(browser, BOOTSTRAP_KEY)
        for scope in (farm.project, farm.organisation):
            page = await browser.get("/console/map", params={"did": scope})
            assert page.status_code == 200, page.text
            text = page.text
            assert EVIL not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
            fine = text[text.index('id="map-fine"') : text.index('id="map-coarse"')]
            # The far stove links to its twin; the five near ones are one group of five.
            assert f'href="/console/twins/{far}"' in fine
            assert 'data-count="5"' in fine
            assert not any(f"/console/twins/{did}" in fine for did in near)
            assert "6 of 6 located stoves" in text
        zoom = re.search(r'class="mark group" data-count="5"', fine)
        assert zoom
        link = re.search(r'<a href="([^"]+)" class="mark group" data-count="5"', fine)
        assert link
        zoomed = await browser.get(html.unescape(link.group(1)))
        assert zoomed.status_code == 200, zoomed.text
        part = zoomed.text[
            zoomed.text.index('id="map-fine"') : zoomed.text.index('id="map-coarse"')
        ]
        # Closer than the finest zoom tells apart: each stove drawn around the spot.
        assert all(f'href="/console/twins/{did}"' in part for did in near)
        assert far not in part
        assert "5 of 6 located stoves in this part of the map" in zoomed.text
        for bad in ("1,2,3", "10,0,5,1", "a,b,c,d", "-91,0,0,1"):
            refused = await browser.get("/console/map", params={"did": farm.project, "bbox": bad})
            assert refused.status_code == 422, bad
        stove_scope = await browser.get("/console/map", params={"did": far})
        assert stove_scope.status_code == 422
        empty = await browser.get(
            "/console/map", params={"did": farm.project, "bbox": "60,10,61,11"}
        )
        assert empty.status_code == 200 and "No located stove in this part" in empty.text


async def test_the_views_need_a_signed_in_session(registry: Registry) -> None:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=registry.asgi), base_url="http://registry.test"
    ) as anonymous:
        for path in ("/console/map", "/console/graph/members.json?project=x&state=verified"):
            answer = await anonymous.get(path)
            assert answer.status_code == 303 and "/console/sign-in" in answer.headers["location"]
