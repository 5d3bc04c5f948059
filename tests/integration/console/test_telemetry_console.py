"""Telemetry meets the console: the dashboard's figures come from the day rollups (REST and
GraphQL), on SQLite and PostgreSQL, checked against sums worked out by hand."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.conftest import BOOTSTRAP_KEY, Registry, unique
from tests.integration.console.test_console import console, sign_in
from tests.support.telemetry_world import STOVE, at, build_farm, day_start


async def test_summary_shows_sessions_energy_and_online_stoves(registry: Registry) -> None:
    farm = await build_farm(registry)
    stoves = [await farm.stove(), await farm.stove(), await farm.stove()]
    day = day_start(2)
    # Two days ago: stove 0 cooks twice (1.0 + 1.5 kWh), stove 1 once (2.0 kWh).
    # Yesterday: stove 1 cooks once (0.5 kWh). Stove 2 reports now (online), no session.
    sent = [
        await farm.send(
            stoves[0],
            [
                {"seq": 1, "time": at(day, 7), "values": {"session": "start"}},
                {"seq": 2, "time": at(day, 8), "values": {"session": "end", "energyKwh": 1.0}},
                {"seq": 3, "time": at(day, 18), "values": {"session": "start"}},
                {"seq": 4, "time": at(day, 19), "values": {"energyKwh": 1.5}},
            ],
        ),
        await farm.send(
            stoves[1],
            [
                {"seq": 1, "time": at(day, 12), "values": {"session": "start", "energyKwh": 2.0}},
                {"seq": 2, "time": at(day, 30), "values": {"session": "start"}},
                {"seq": 3, "time": at(day, 31), "values": {"energyKwh": 0.5}},
            ],
        ),
        await farm.send(
            stoves[2],
            [{"seq": 1, "time": _seconds_ago(5), "values": {"temperatureC": 20}}],
        ),
    ]
    assert all(r.status_code == 200 for r in sent), [r.text for r in sent]
    # A reading sent twice is counted once (the rollups take only inserted readings).
    again = await farm.send(
        stoves[0], [{"seq": 1, "time": at(day, 7), "values": {"session": "start"}}]
    )
    assert again.json()["duplicates"] == 1

    expected = {
        day.date().isoformat(): {"cookingSessions": 3, "energyKwh": 4.5},
        (day + timedelta(days=1)).date().isoformat(): {"cookingSessions": 1, "energyKwh": 0.5},
    }
    for scope in (farm.project, farm.organisation):
        answer = await registry.client.get(f"/v1/domains/{scope}/summary")
        assert answer.status_code == 200, answer.text
        body = answer.json()
        telemetry = body["telemetry"]
        assert telemetry["available"] is True
        assert telemetry["onlineNow"] == body["stoves"]["onlineNow"] == 1
        days = {d["date"]: d for d in telemetry["days"]}
        for date, figures in expected.items():
            assert days[date]["cookingSessions"] == figures["cookingSessions"]
            assert days[date]["energyKwh"] == pytest.approx(figures["energyKwh"])
        others = [d for d in telemetry["days"] if d["date"] not in expected]
        assert all(d["cookingSessions"] == 0 and d["energyKwh"] == 0 for d in others)

    # The whole deployment sums the stoves' own rollups (the database may hold other
    # tests' stoves too, so at least this programme's figures).
    everything = await registry.platform.summaries.summary(None)
    whole = {d["date"]: d for d in everything["telemetry"]["days"]}
    for date, figures in expected.items():
        assert whole[date]["cookingSessions"] >= figures["cookingSessions"]
        assert whole[date]["energyKwh"] >= figures["energyKwh"] - 1e-9
    assert everything["telemetry"]["onlineNow"] >= 1

    query = """query($id: String!) { summary(id: $id) { telemetry } }"""
    graphql = await registry.client.post(
        "/graphql", json={"query": query, "variables": {"id": farm.project}}
    )
    found = graphql.json()["data"]["summary"]["telemetry"]
    assert {d["date"]: d["cookingSessions"] for d in found["days"] if d["cookingSessions"]} == {
        date: f["cookingSessions"] for date, f in expected.items()
    }


async def test_online_now_counts_stoves_seen_within_the_window(registry: Registry) -> None:
    """A stove that reported seconds ago is online; one quiet for longer than
    TELEMETRY_OFFLINE_AFTER_SECONDS is not."""
    farm = await build_farm(registry)
    fresh, quiet = await farm.stove(), await farm.stove()
    window = registry.platform.settings.telemetry.offline_after_seconds
    sent = [
        await farm.send(fresh, [{"seq": 1, "time": _seconds_ago(5), "values": {"fuelKg": 0.1}}]),
        await farm.send(
            quiet, [{"seq": 1, "time": _seconds_ago(window + 60), "values": {"fuelKg": 0.1}}]
        ),
    ]
    assert all(r.status_code == 200 for r in sent), [r.text for r in sent]
    body = (await registry.client.get(f"/v1/domains/{farm.project}/summary")).json()
    assert body["telemetry"]["onlineNow"] == 1
    assert body["stoves"]["registered"] == 2


def _seconds_ago(seconds: float) -> str:
    return (datetime.now(UTC) - timedelta(seconds=seconds)).isoformat()


async def test_console_manages_a_twins_device_tokens(registry: Registry) -> None:
    """List, enrol (secret shown once), rotate and revoke through the keys page, with the
    REST routes' rules: an admin or the twin's controller, a writer; CSRF on every form."""
    farm = await build_farm(registry)
    stove = await farm.stove()
    async with console(registry) as browser:
        csrf = await sign_in(browser, BOOTSTRAP_KEY)
        page = await browser.get("/console/keys", params={"twin": stove})
        assert page.status_code == 200
        assert "meter board" in page.text and len(TOKEN_ROW.findall(page.text)) == 1
        # A form without the session's CSRF token changes nothing.
        forged = await browser.post("/console/keys/devices", data={"twin": stove, "label": "x"})
        assert forged.status_code == 403
        made = await browser.post(
            "/console/keys/devices", data={"csrf": csrf, "twin": stove, "label": "second meter"}
        )
        assert made.status_code == 201, made.text
        secret = NEW_TOKEN.search(made.text)
        assert secret, "the new device token is shown"
        first = secret.group(1)
        listed = await browser.get("/console/keys", params={"twin": stove})
        assert first not in listed.text  # shown once, never listed
        token_id = first.split("_")[1]
        assert token_id in TOKEN_ROW.findall(listed.text)
        assert (await farm.send(stove, [reading(1)], token=first)).status_code == 200

        rotated = await browser.post(
            f"/console/keys/devices/{token_id}/rotation", data={"csrf": csrf, "twin": stove}
        )
        assert rotated.status_code == 200, rotated.text
        found = NEW_TOKEN.search(rotated.text)
        assert found and found.group(1) != first
        second = found.group(1)
        assert (await farm.send(stove, [reading(2)], token=first)).status_code == 401
        assert (await farm.send(stove, [reading(3)], token=second)).status_code == 200
        token_id = second.split("_")[1]  # the successor has an id of its own

        revoked = await browser.post(
            f"/console/keys/devices/{token_id}/revocation", data={"csrf": csrf, "twin": stove}
        )
        assert revoked.status_code == 303
        shown = await browser.get(revoked.headers["location"])
        assert f"Device token {token_id} revoked." in shown.text
        assert (await farm.send(stove, [reading(4)], token=second)).status_code == 401

    # A writer who does not control the twin may see the page but not its tokens.
    stranger = await registry.key(f"did:ixo:org/{unique('stranger')}", "writer")
    async with console(registry) as browser:
        csrf = await sign_in(browser, stranger)
        page = await browser.get("/console/keys", params={"twin": stove})
        assert page.status_code == 200 and "Only a controller" in page.text
        assert "Create a key" not in page.text  # API keys stay an admin's
        refused = await browser.post(
            "/console/keys/devices", data={"csrf": csrf, "twin": stove, "label": "mine"}
        )
        assert refused.status_code == 403 and "Only a controller" in refused.text
    reader = await registry.key(f"did:ixo:org/{unique('reader')}", "reader")
    async with console(registry) as browser:
        await sign_in(browser, reader)
        assert (await browser.get("/console/keys", params={"twin": stove})).status_code == 403
    listed = await registry.client.get(f"/v1/domains/{stove}/device-tokens")
    items = listed.json()["items"]
    assert sorted(t["label"] for t in items) == ["meter board", "second meter", "second meter"]
    assert [t["label"] for t in items if t["revokedAt"] is None] == ["meter board"]


TOKEN_ROW = re.compile(r'id="device-token-([^"]+)"')
NEW_TOKEN = re.compile(r'id="new-device-token" readonly value="([^"]+)"')


def reading(seq: int) -> dict[str, Any]:
    return {"seq": seq, "time": _seconds_ago(1), "values": {"fuelKg": 0.1}}


async def test_an_organisation_sums_its_projects_and_only_them(registry: Registry) -> None:
    """Two projects of one organisation add up; a stove of another organisation's project
    that names this organisation its `operator` is not this organisation's stove."""
    farm = await build_farm(registry)
    ours = await farm.stove()
    second = await build_farm(registry)  # another organisation and project
    second.organisation = farm.organisation  # ...then a second project of ours:
    project = await registry.client.post(
        "/v1/domains",
        json={
            "type": "Project",
            "class": "did:ixo:protocol/project",
            "id": unique("project"),
            "metadata": {"name": "Second"},
            "relationships": {"implementedBy": [farm.organisation]},
        },
    )
    assert project.status_code == 201, project.text
    second.project = project.json()["did"]
    theirs_in_ours = await second.stove()
    other = await build_farm(registry)
    made = await registry.client.post(
        "/v1/domains",
        json={
            "type": "Device",
            "class": STOVE,
            "id": unique("stove"),
            "metadata": {"name": "stove"},
            "relationships": {"project": [other.project], "operator": [farm.organisation]},
        },
    )
    assert made.status_code == 201, made.text
    outsider = made.json()["did"]
    enrolled = await registry.client.post(f"/v1/domains/{outsider}/device-tokens", json={})
    other.tokens[outsider] = enrolled.json()["token"]
    day = day_start(1)
    start = {"session": "start", "energyKwh": 1.0}
    for farm_of, did in ((farm, ours), (second, theirs_in_ours), (other, outsider)):
        sent = await farm_of.send(did, [{"seq": 1, "time": at(day, 9), "values": start}])
        assert sent.status_code == 200, sent.text

    def sessions(body: dict[str, Any]) -> int:
        found = [d for d in body["telemetry"]["days"] if d["date"] == day.date().isoformat()]
        return found[0]["cookingSessions"]

    summary = registry.client.get
    assert sessions((await summary(f"/v1/domains/{farm.project}/summary")).json()) == 1
    assert sessions((await summary(f"/v1/domains/{second.project}/summary")).json()) == 1
    assert sessions((await summary(f"/v1/domains/{other.project}/summary")).json()) == 1
    organisation = (await summary(f"/v1/domains/{farm.organisation}/summary")).json()
    assert organisation["stoves"]["registered"] == 2
    assert sessions(organisation) == 2


async def test_a_twins_page_lists_its_quarantined_readings_with_the_reason(
    registry: Registry,
) -> None:
    """Issue 30 §6 where an operator looks: a reading stamped 1970 is quarantined, never
    charted; the twin's page lists it with its reason; a twin with none shows no table."""
    farm = await build_farm(registry)
    stove, clean = await farm.stove(), await farm.stove()
    sent = await farm.send(
        stove,
        [
            {"seq": 1, "time": "1970-01-01T00:00:00Z", "values": {"fuelKg": 0.1}},
            {"seq": 2, "time": _seconds_ago(5), "values": {"fuelKg": 0.1}},
        ],
    )
    assert sent.json()["quarantined"] == 1, sent.text
    async with console(registry) as browser:
        await sign_in(browser, BOOTSTRAP_KEY)
        page = await browser.get(f"/console/twins/{stove}")
        assert page.status_code == 200, page.text
        table = page.text.split('id="quarantine"', 1)[1].split("</table>", 1)[0]
        assert table.count("<tr>") == 2  # the header and the one reading
        assert "1970-01-01T00:00:00+00:00" in table
        assert "too long before its receipt time" in table
        assert 'id="quarantine"' not in (await browser.get(f"/console/twins/{clean}")).text
