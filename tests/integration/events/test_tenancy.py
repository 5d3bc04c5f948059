"""Each organisation sees only its own people (issue 31, item 8).

Two organisations, each with its own keys, organisation, project, stove and household (a
USSD customer owning the stove, who reports a problem), read what the registry holds over
REST (events, support problems, telemetry; customers' records are for neither), GraphQL,
the event stream (SSE, on a real port) and webhooks (real receivers on loopback ports).
Each sees its own household and never the other's; the registry role and the admin see
both. Public registry facts (domain records, protocols) stay readable by both."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest
import uvicorn

from tests.conftest import Registry, free_port, new_phone, unique
from tests.integration.events import test_webhooks
from tests.integration.events.test_webhooks import EventsRegistry
from tests.support.telemetry_world import at, day_start
from tests.support.webhook_receiver import Receiver
from twinhub.security.signing import Issuer

events_registry = test_webhooks.events_registry  # the same fixtures here
STOVE = "did:ixo:protocol/clean-cooking"
READING = {"batteryPct": 90}
GRAPHQL_EVENTS = (
    "query($after: String) "
    "{ events(after: $after, first: 100) { nodes { id type subject data } endCursor } }"
)


@dataclass
class Tenant:
    """One organisation: its key, its domains, its household."""

    principal: str
    client: httpx.AsyncClient
    token: str
    project: str = ""
    stove: str = ""
    customer: str = ""  # the household's customer ID
    problem: str = ""  # the reference of the household's problem report


async def _created(client: httpx.AsyncClient, body: dict[str, Any]) -> str:
    made = await client.post("/v1/domains", json=body)
    assert made.status_code == 201, made.text
    return str(made.json()["did"])


async def _tenant(registry: Registry, name: str) -> Tenant:
    principal = f"did:ixo:org/{unique(name)}"
    token = await registry.key(principal, "writer", "reader")
    return Tenant(principal, registry.as_key(token), token)


async def _populate(registry: Registry, tenant: Tenant, name: str) -> None:
    """The organisation's domains, its household owning its stove, a problem report and
    a reading, made with its own key (the household's parts as USSD and a meter do)."""
    customer = await registry.platform.customers.create(new_phone(), f"{name} Household", "48151")
    tenant.customer = customer.customer_id
    organisation = await _created(
        tenant.client,
        {
            "type": "Organisation",
            "class": "did:ixo:protocol/organisation",
            "id": unique(f"{name}-org"),
            "metadata": {"name": name},
        },
    )
    tenant.project = await _created(
        tenant.client,
        {
            "type": "Project",
            "class": "did:ixo:protocol/project",
            "id": unique(f"{name}-project"),
            "metadata": {"name": f"{name} cooking"},
            "relationships": {"implementedBy": [organisation]},
        },
    )
    tenant.stove = await _created(
        tenant.client,
        {
            "type": "Device",
            "class": STOVE,
            "id": unique(f"{name}-stove"),
            "metadata": {"name": "stove"},
            "properties": {"ownerCustomerId": tenant.customer},
            "relationships": {"project": [tenant.project]},
        },
    )
    care = registry.platform.stove_care
    tenant.problem = (await care.report_problem(tenant.customer, tenant.stove, "smoke")).reference
    device = await tenant.client.post(f"/v1/domains/{tenant.stove}/device-tokens", json={})
    assert device.status_code == 201, device.text
    async with registry.as_key(device.json()["token"]) as meter:
        sent = await meter.post(
            f"/v1/domains/{tenant.stove}/telemetry",
            json={
                "readings": [{"seq": 1, "time": at(day_start(1), 1), "values": {"batteryPct": 90}}]
            },
        )
        assert sent.status_code == 200, sent.text


def _text(items: list[dict[str, Any]]) -> str:
    return orjson.dumps(items).decode()


def assert_only_own(seen: list[dict[str, Any]], own: Tenant, other: Tenant) -> None:
    """`seen` (events as JSON) holds own's household and stove, nothing of the other's."""
    text = _text(seen)
    assert own.customer in text and own.stove in text
    assert other.customer not in text and other.stove not in text
    assert other.project not in text and other.principal not in text
    assigned = [e for e in seen if e["type"] == "stove.assigned"]
    assert [e["data"]["customerId"] for e in assigned] == [own.customer]


async def rest_events(client: httpx.AsyncClient, limit: int = 500) -> list[dict[str, Any]]:
    """Every event the client may read, page by page."""
    found: list[dict[str, Any]] = []
    cursor = "0"
    while True:
        page = await client.get("/v1/events", params={"after": cursor, "limit": limit})
        assert page.status_code == 200, page.text
        items = page.json()["items"]
        if not items:
            return found
        found += items
        cursor = page.json()["nextCursor"]


async def graphql_events(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    after = "0"
    while True:
        answer = await client.post(
            "/graphql", json={"query": GRAPHQL_EVENTS, "variables": {"after": after}}
        )
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert "errors" not in body, body
        page = body["data"]["events"]
        if not page["nodes"]:
            return found
        found += page["nodes"]
        after = page["endCursor"]


async def stream_until(base: str, token: str, sentinel: str) -> list[dict[str, Any]]:
    """The event stream from the start, read until the event `sentinel` (an id)."""
    found: list[dict[str, Any]] = []
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx.AsyncClient(base_url=base, headers=headers, timeout=10) as client,
        client.stream("GET", "/v1/events/stream", params={"after": "0"}) as stream,
    ):
        assert stream.status_code == 200
        async for line in stream.aiter_lines():
            if line.startswith("data:"):
                found.append(orjson.loads(line[5:]))
                if found[-1]["id"] == sentinel:
                    return found
    raise AssertionError("the stream ended")


@pytest.fixture
async def receivers() -> AsyncIterator[list[Receiver]]:
    found = [await Receiver(free_port()).start() for _ in range(4)]
    yield found
    for receiver in found:
        await receiver.stop()


async def _subscribe(client: httpx.AsyncClient, receiver: Receiver) -> str:
    made = await client.post("/v1/webhooks", json={"url": receiver.url})
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


async def _received_until(receiver: Receiver, sentinel: str) -> list[dict[str, Any]]:
    """What the receiver got, once the event `sentinel` (sent to everyone) has arrived."""
    for _ in range(1000):
        bodies = [orjson.loads(got.body) for got in receiver.received]
        if sentinel in [body["id"] for body in bodies]:
            return bodies
        await asyncio.sleep(0.02)
    raise AssertionError(f"{sentinel} never reached {receiver.url}")


async def test_each_organisation_sees_only_its_own_households(
    events_registry: EventsRegistry, receivers: list[Receiver]
) -> None:
    registry = await events_registry(background_workers_enabled=True)
    registry_role = await registry.key(Issuer(secrets.token_bytes(32)).did, "registry", "reader")
    a, b = await _tenant(registry, "tenant-a"), await _tenant(registry, "tenant-b")
    overseer = registry.as_key(registry_role)
    clients = {"a": a.client, "b": b.client, "registry": overseer, "admin": registry.client}
    hooks = {
        who: await _subscribe(c, r) for (who, c), r in zip(clients.items(), receivers, strict=True)
    }
    await _populate(registry, a, "tenant-a")
    await _populate(registry, b, "tenant-b")
    # A protocol is public: every reader and every subscription gets it, last.
    protocol = await registry.client.post(
        "/v1/protocols",
        json={"type": "Protocol", "id": unique("sentinel"), "name": "Sentinel", "properties": {}},
    )
    assert protocol.status_code == 201, protocol.text
    await registry.platform.events.sequencer.run_until_idle()
    everything = await rest_events(registry.client)
    [sentinel] = [e["id"] for e in everything if e["subject"] == protocol.json()["did"]]

    # REST: each organisation's events, whole pages, however small.
    for own, other in ((a, b), (b, a)):
        seen = await rest_events(own.client)
        assert_only_own(seen, own, other)
        assert await rest_events(own.client, limit=1) == seen  # paging skips nothing
        assert sentinel in [e["id"] for e in seen]
    for sees_all in (overseer, registry.client):
        text = _text(await rest_events(sees_all))
        assert a.customer in text and b.customer in text

    # GraphQL: the same events; another organisation's stove's telemetry is refused.
    for own, other in ((a, b), (b, a)):
        assert_only_own(await graphql_events(own.client), own, other)
        query = "query($id: String!) { telemetryState(id: $id) { readings } }"
        mine = await own.client.post(
            "/graphql", json={"query": query, "variables": {"id": own.stove}}
        )
        assert mine.json()["data"]["telemetryState"]["readings"] == 1, mine.text
        theirs = await own.client.post(
            "/graphql", json={"query": query, "variables": {"id": other.stove}}
        )
        assert theirs.json()["errors"][0]["extensions"]["code"] == "forbidden", theirs.text
    text = _text(await graphql_events(overseer))
    assert a.customer in text and b.customer in text

    # REST: customers, support problems, telemetry.
    for own, other in ((a, b), (b, a)):
        # People's records (name, phone) are for who sees everything: any writer may name
        # any customer as its stove's household, so that proves nothing.
        for customer in (own.customer, other.customer):
            for path in (f"/v1/customers/{customer}", f"/v1/customers/{customer}/stoves"):
                assert (await own.client.get(path)).status_code == 403
            found = await own.client.get("/v1/customers", params={"id": customer})
            assert found.status_code == 403
        problems = (await own.client.get("/v1/support/problems")).json()["items"]
        assert [p["reference"] for p in problems] == [own.problem]
        resolve = await own.client.post(
            f"/v1/support/problems/{other.problem}/resolve", json={"note": "not ours"}
        )
        assert resolve.status_code == 404, resolve.text
        assert (await own.client.get(f"/v1/domains/{own.stove}/state")).status_code == 200
        for path in ("state", "telemetry", "telemetry/quarantine", "telemetry/aggregates"):
            refused = await own.client.get(f"/v1/domains/{other.stove}/{path}")
            assert refused.status_code == 403, (path, refused.text)
        # Public registry facts stay public: the other's stove record and the protocol.
        assert (await own.client.get(f"/v1/domains/{other.stove}")).status_code == 200
    for sees_all in (overseer, registry.client):
        for tenant in (a, b):
            found = await sees_all.get(f"/v1/customers/{tenant.customer}")
            assert found.status_code == 200, found.text
            state = await sees_all.get(f"/v1/domains/{tenant.stove}/state")
            assert state.status_code == 200
        problems = (await sees_all.get("/v1/support/problems")).json()["items"]
        assert {a.problem, b.problem} <= {p["reference"] for p in problems}

    # SSE, on a real port.
    from twinhub.registry.app import create_registry_app

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_registry_app(platform=registry.platform),
            host="127.0.0.1",
            port=port,
            log_config=None,
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
    )
    serving = asyncio.create_task(server.serve())
    try:
        for _ in range(500):
            if server.started:
                break
            await asyncio.sleep(0.01)
        base = f"http://127.0.0.1:{port}"
        for own, other in ((a, b), (b, a)):
            streamed = await asyncio.wait_for(stream_until(base, own.token, sentinel), 20)
            assert_only_own(streamed, own, other)
            paged = [e["id"] for e in await rest_events(own.client)]
            assert [e["id"] for e in streamed] == paged[: paged.index(sentinel) + 1]
        streamed = await asyncio.wait_for(stream_until(base, registry_role, sentinel), 20)
        assert a.customer in _text(streamed) and b.customer in _text(streamed)
    finally:
        server.should_exit = True
        await serving

    # Webhooks: each organisation's receiver got its own household's events only.
    got = {who: await _received_until(r, sentinel) for who, r in zip(hooks, receivers, strict=True)}
    assert_only_own(got["a"], a, b)
    assert_only_own(got["b"], b, a)
    for who in ("registry", "admin"):
        assert a.customer in _text(got[who]) and b.customer in _text(got[who])
    # A replay sends again only what the subscription's creator may see.
    replay = await a.client.post(f"/v1/webhooks/{hooks['a']}/replay", json={"after": 0})
    assert replay.json()["queued"] == len({e["id"] for e in await rest_events(a.client)})
    for client in (a.client, b.client, overseer):
        await client.aclose()
