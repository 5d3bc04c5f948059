"""Events are pruned after EVENTS_RETENTION_DAYS, never while a webhook delivery needs them;
time is moved on the platform's clock, never slept."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from tests.integration.events.test_webhooks import (  # noqa: F401 (fixtures)
    EventsRegistry,
    FakeClock,
    deliveries,
    events_registry,
    receiver,
    step,
    subscribe,
)
from tests.integration.registry.test_registry_basics import make_domain
from tests.support.webhook_receiver import Receiver
from twinhub.events.store import record_event
from twinhub.kernel.clock import utcnow


async def kinds_about(registry: object, did: str) -> list[str]:
    records = await registry.platform.events.store.all_records()  # type: ignore[attr-defined]
    return [r.type for r in records if r.subject == did]


async def test_old_events_go_unless_a_delivery_needs_them(
    events_registry: EventsRegistry,  # noqa: F811
    receiver: Receiver,  # noqa: F811
) -> None:
    registry = await events_registry(events_retention_days=90)
    hub = registry.platform.events
    clock = FakeClock()
    clock.now = utcnow()
    hub.set_clock(clock)
    delivered = await subscribe(registry, receiver.url, ["domain.created"])
    kept = await make_domain(registry)
    await step(registry)
    # The organisation and its membership group: two domain.created, both delivered.
    assert [d["status"] for d in await deliveries(registry, delivered["id"])] == ["delivered"] * 2
    # A receiver that fails now: the update's delivery stays pending (retried for a day).
    receiver.status = 500
    failing = await subscribe(registry, receiver.url, ["domain.updated"])
    changed = await registry.client.patch(
        f"/v1/domains/{kept['did']}", json={"metadata": {"name": "Renamed"}}
    )
    assert changed.status_code == 200, changed.text
    await step(registry)
    assert [d["status"] for d in await deliveries(registry, failing["id"])] == ["pending"]
    # Written, not yet numbered by the sequencer: its deliveries are not made yet. (The
    # ledger numbers its own events as it commits them; writers outside it leave theirs to
    # the sequencer, as this one does.)
    unnumbered = {"did": "did:ixo:entity/unnumbered"}
    async with registry.platform.sessionmaker.begin() as session:
        record_event(session, "domain.created", unnumbered["did"], "did:ixo:org/test", {})

    clock.now = utcnow() + timedelta(days=89)
    assert await hub.prune() == 0
    clock.now = utcnow() + timedelta(days=91)
    assert await hub.prune() > 0
    assert await kinds_about(registry, kept["did"]) == ["domain.updated"]
    assert await kinds_about(registry, unnumbered["did"]) == ["domain.created"]
    assert await deliveries(registry, delivered["id"]) == []  # gone with their events
    [pending] = await deliveries(registry, failing["id"])
    assert pending["event"]["type"] == "domain.updated"
    page = await registry.client.get("/v1/events", params={"type": "domain.created"})
    assert page.status_code == 200 and page.json()["items"] == []

    # Failed for good, it is still replayable: kept. Once its subscription is deleted,
    # nothing needs it any more.
    gone = await registry.client.delete(f"/v1/webhooks/{failing['id']}")
    assert gone.status_code == 204
    assert await hub.prune() >= 1
    assert await kinds_about(registry, kept["did"]) == []


async def test_a_failed_delivery_keeps_its_event(
    events_registry: EventsRegistry,  # noqa: F811
    receiver: Receiver,  # noqa: F811
) -> None:
    registry = await events_registry(events_retention_days=1, webhook_retry_horizon_seconds=60)
    hub = registry.platform.events
    clock = FakeClock()
    clock.now = utcnow()
    hub.set_clock(clock)
    receiver.status = 500
    hook = await subscribe(registry, receiver.url, ["domain.created"])
    project = {"type": "Project", "class": "did:ixo:protocol/project"}
    domain = await make_domain(registry, **project)  # one event (no membership group)
    await step(registry)
    for _ in range(50):
        [delivery] = await deliveries(registry, hook["id"])
        if delivery["status"] != "pending":
            break
        clock.now = clock.now + timedelta(seconds=120)
        await step(registry)
    assert delivery["status"] == "failed"
    clock.now = utcnow() + timedelta(days=30)
    await hub.prune()
    assert await kinds_about(registry, domain["did"]) == ["domain.created"]
    receiver.status = 204
    retried = await registry.client.post(
        f"/v1/webhooks/{hook['id']}/deliveries/{delivery['id']}/retry"
    )
    assert retried.status_code == 202, retried.text
    await step(registry)
    assert [d["status"] for d in await deliveries(registry, hook["id"])] == ["delivered"]
    await hub.prune()
    assert await kinds_about(registry, domain["did"]) == []


async def test_the_pruner_runs_with_the_background_work(
    events_registry: EventsRegistry,  # noqa: F811
) -> None:
    registry = await events_registry(
        background_workers_enabled=True,
        events_retention_days=30,
        events_prune_interval_seconds=0.05,
    )
    domain = await make_domain(registry)
    for _ in range(200):  # numbered by the background sequencer
        if (await registry.client.get("/v1/events")).json()["items"]:
            break
        await asyncio.sleep(0.05)
    assert await kinds_about(registry, domain["did"]) == ["domain.created"]
    clock = FakeClock()
    clock.now = utcnow() + timedelta(days=31)
    registry.platform.events.set_clock(clock)
    for _ in range(200):
        if not await kinds_about(registry, domain["did"]):
            break
        await asyncio.sleep(0.05)
    assert await kinds_about(registry, domain["did"]) == []


async def test_retention_zero_keeps_everything(
    events_registry: EventsRegistry,  # noqa: F811
) -> None:
    registry = await events_registry(events_retention_days=0)
    domain = await make_domain(registry)
    await step(registry)
    clock = FakeClock()
    clock.now = utcnow() + timedelta(days=3650)
    registry.platform.events.set_clock(clock)
    assert await registry.platform.events.prune() == 0
    assert await kinds_about(registry, domain["did"]) == ["domain.created"]
