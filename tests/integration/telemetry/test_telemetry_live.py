"""Live state (issue 12, point 5): the server-sent event stream of a twin and of its
project, over a real uvicorn server, and the twin's state through GraphQL."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import uvicorn

from tests.conftest import BOOTSTRAP_KEY, Registry, RegistryFactory, free_port
from tests.support.telemetry_world import Farm, at, build_farm
from twinhub.registry.app import create_registry_app


@pytest.fixture
async def served(make_registry: RegistryFactory) -> AsyncIterator[tuple[Registry, str]]:
    """The registry app on the test's platform, served by uvicorn on a loopback port."""
    registry = await make_registry(telemetry_offline_after_seconds=2)
    port = free_port()
    app = create_registry_app(platform=registry.platform)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 (uvicorn offers no event to wait on)
        await asyncio.sleep(0.02)
    yield registry, f"http://127.0.0.1:{port}"
    server.should_exit = True
    await asyncio.wait_for(task, 10)


async def events(lines: AsyncIterator[str], count: int) -> list[dict[str, Any]]:
    """The next `count` events of a stream (its `aiter_lines()`), parsed."""
    found: list[dict[str, Any]] = []
    kind = None
    async for line in lines:
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            found.append({"kind": kind, **json.loads(line[6:])})
            if len(found) == count:
                return found
    return found


async def test_a_twin_and_its_project_stream_readings_and_state(
    served: tuple[Registry, str],
) -> None:
    """Readings and state changes, on the twin's stream and its project's; the twin goes
    offline (TELEMETRY_OFFLINE_AFTER_SECONDS=2 here) and the streams say so."""
    registry, url = served
    farm: Farm = await build_farm(registry)
    stove = await farm.stove()
    headers = {"Authorization": f"Bearer {BOOTSTRAP_KEY}"}
    async with (
        httpx.AsyncClient(base_url=url, headers=headers, timeout=10) as client,
        client.stream("GET", f"/v1/domains/{stove}/events") as twin_response,
        client.stream("GET", f"/v1/domains/{farm.project}/events") as project_response,
    ):
        assert twin_response.headers["content-type"].startswith("text/event-stream")
        twin, project = twin_response.aiter_lines(), project_response.aiter_lines()
        first = await events(twin, 1)
        assert first[0]["kind"] == "state" and first[0]["online"] is False
        await events(project, 1)
        now = datetime.now(UTC)
        sent = await farm.send(
            stove,
            [
                {"seq": 1, "time": at(now, -0.0003), "values": {"energyKwh": 0.3}},
                {"seq": 2, "time": at(now, -0.0001), "values": {"meterKwh": 12.5}},
            ],
        )
        assert sent.json()["accepted"] == 2
        got = await asyncio.wait_for(events(twin, 2), 10)
        assert got[0]["kind"] == "readings" and got[0]["count"] == 2
        assert got[0]["latest"]["seq"] == 2 and got[0]["latest"]["meterKwh"] == 12.5
        assert got[1] == {"kind": "state", "event": "state", "device": stove, "online": True}
        on_project = await asyncio.wait_for(events(project, 1), 10)
        assert on_project[0]["device"] == stove
        quiet = await asyncio.wait_for(events(twin, 1), 15)
        assert quiet == [{"kind": "state", "event": "state", "device": stove, "online": False}]
        on_project = await asyncio.wait_for(events(project, 2), 15)
        assert on_project[-1]["online"] is False
    # Anonymous callers get no stream.
    async with httpx.AsyncClient(base_url=url) as anonymous:
        assert (await anonymous.get(f"/v1/domains/{stove}/events")).status_code == 401


async def test_graphql_answers_the_state(registry: Registry) -> None:
    farm = await build_farm(registry)
    stove = await farm.stove()
    await farm.send(
        stove, [{"seq": 7, "time": at(datetime.now(UTC), -0.1), "values": {"meterKwh": 3.5}}]
    )
    query = (
        "query($id: String!) { telemetryState(id: $id) "
        "{ did online lastSeq meterField meterTotal readings latest } }"
    )
    response = await registry.client.post(
        "/graphql", json={"query": query, "variables": {"id": stove}}
    )
    state = response.json()["data"]["telemetryState"]
    assert state["online"] is True and state["lastSeq"] == 7
    assert state["meterField"] == "meterKwh" and state["meterTotal"] == 3.5
    assert state["latest"]["meterKwh"]["value"] == 3.5 and state["readings"] == 1
    missing = await registry.client.post(
        "/graphql",
        json={"query": query, "variables": {"id": "did:ixo:entity/none"}},
    )
    assert missing.json()["data"]["telemetryState"] is None
