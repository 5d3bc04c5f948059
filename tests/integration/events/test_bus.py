"""The message bus (kernel.bus, platform.HANDLERS): committed events reach their handlers at
once, a restarted worker finds in the outbox what it had not handled, every event carries
its causes, and nothing listens on SQLAlchemy's global Session class.

Real database (SQLite and PostgreSQL), real HTTP through the ASGI stack, a real webhook
receiver on a loopback port. The recovery polls are set to a minute (their longest) throughout: what
arrives within seconds came by the bus (or, after a restart, by the start-up scan)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
import pytest
from sqlalchemy import event, select
from sqlalchemy.orm import Session

from tests.conftest import (
    BOOTSTRAP_KEY,
    Registry,
    RegistryFactory,
    free_port,
    fresh_postgres_database,
    running_registry,
)
from tests.integration.registry.test_registry_basics import make_domain
from tests.support.claims_world import METERED_AMOUNT, build_world, metered_claim
from tests.support.webhook_receiver import Received, Receiver
from tests.support.workflow_world import issue_claims
from twinhub.db.models import Event, WebhookDelivery
from twinhub.kernel.bus import Bus, Message
from twinhub.services import collection_members
from twinhub.settings import Settings

RECOVERY = 60.0  # seconds: the polls' interval (their longest), far longer than any wait
PROMPTLY = 20.0  # seconds a bus-driven step may take on a loaded 2-core machine


@pytest.fixture(scope="module")
async def postgres_url() -> AsyncIterator[str]:
    """A PostgreSQL database of this module's own: its restarted workers must find only
    what these tests left, not other modules' pending claims."""
    async with fresh_postgres_database("bus") as url:
        yield url


async def eventually(check: Callable[[], Awaitable[Any]], seconds: float = PROMPTLY) -> Any:
    """The first truthy result of `check`, tried every 50 ms for at most `seconds`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        found = await check()
        if found or loop.time() > deadline:
            return found
        await asyncio.sleep(0.05)


async def submit(registry: Registry, world: Any, collection: int, stove: str) -> str:
    response = await world.operator_client.post(
        f"/v1/claim-collections/{collection}/claims",
        json={"asset": stove, "data": metered_claim()},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def status(registry: Registry, claim_id: str) -> str:
    return str((await registry.client.get(f"/v1/claims/{claim_id}")).json()["status"])


async def decided(registry: Registry, claim_id: str) -> str | None:
    found = await status(registry, claim_id)
    return None if found == "pending" else found


# -- (a) a submitted claim is evaluated by the bus, not by the poll ----------------------------
async def test_a_submitted_claim_is_decided_without_waiting_for_the_poll(
    make_registry: RegistryFactory,
) -> None:
    registry = await make_registry(oracle_enabled=True, oracle_poll_seconds=RECOVERY)
    world = await build_world(registry)
    try:
        collection = (await world.collection())["id"]
        stove = await world.metered_asset()
        loop = asyncio.get_running_loop()
        started = loop.time()
        claim_id = await submit(registry, world, collection, stove)
        outcome = await eventually(lambda: decided(registry, claim_id))
        took = loop.time() - started
        assert outcome == "approved", f"still {await status(registry, claim_id)}"
        assert took < PROMPTLY < RECOVERY
        view = (await registry.client.get(f"/v1/claims/{claim_id}")).json()
        assert view["amount"] == METERED_AMOUNT
    finally:
        await world.close()


# -- (b) a restarted worker picks up what it had not handled -----------------------------------
async def test_a_restarted_oracle_decides_a_claim_submitted_while_it_was_down(
    settings_for: Callable[..., Settings],
) -> None:
    settings = settings_for(twinhub_bootstrap_api_key=BOOTSTRAP_KEY, oracle_enabled=False)
    async with running_registry(settings) as first:
        world = await build_world(first)
        try:
            collection = (await world.collection())["id"]
            claim_id = await submit(first, world, collection, await world.metered_asset())
            await asyncio.sleep(0.5)  # nobody decides it: no oracle runs
            assert await status(first, claim_id) == "pending"
        finally:
            await world.close()
    restarted = settings.model_copy(
        update={"oracle_enabled": True, "oracle_poll_seconds": RECOVERY}
    )
    async with running_registry(restarted) as second:
        assert await eventually(lambda: decided(second, claim_id)) == "approved"


async def test_a_restarted_dispatcher_sends_a_delivery_left_pending(
    settings_for: Callable[..., Settings],
) -> None:
    receiver = await Receiver(free_port()).start()
    settings = settings_for(
        twinhub_bootstrap_api_key=BOOTSTRAP_KEY,
        background_workers_enabled=False,
        webhook_allow_private_networks=True,
        webhook_poll_interval_seconds=RECOVERY,
        events_sequencer_interval_seconds=RECOVERY,
    )
    try:
        async with running_registry(settings) as first:
            made = await first.client.post(
                "/v1/webhooks", json={"url": receiver.url, "events": ["domain.created"]}
            )
            assert made.status_code == 201, made.text
            domain = await make_domain(first)
            # Numbered and fanned out (a delivery made), never sent: no dispatcher runs.
            await first.platform.events.sequencer.run_until_idle()
            async with first.platform.sessionmaker() as session:
                pending = await session.scalar(
                    select(WebhookDelivery.status)
                    .join(Event, Event.id == WebhookDelivery.event_pk)
                    .where(Event.subject == domain["did"])
                )
            assert pending == "pending"
        assert not receiver.received
        restarted = settings.model_copy(update={"background_workers_enabled": True})
        async with running_registry(restarted):

            async def sent() -> list[Received]:
                return [
                    r for r in receiver.received if orjson.loads(r.body)["subject"] == domain["did"]
                ]

            assert len(await eventually(sent)) == 1
    finally:
        await receiver.stop()


# -- (c) a delivery traced back to the claim, the credit and the readings ----------------------
async def test_a_credit_delivery_traces_back_to_the_claim_and_its_readings(
    make_registry: RegistryFactory,
) -> None:
    receiver = await Receiver(free_port()).start()
    registry = await make_registry(
        oracle_enabled=True,
        oracle_poll_seconds=RECOVERY,
        webhook_allow_private_networks=True,
        webhook_poll_interval_seconds=RECOVERY,
    )
    world = await build_world(registry)
    try:
        made = await registry.client.post(
            "/v1/webhooks", json={"url": receiver.url, "events": ["credits.minted"]}
        )
        assert made.status_code == 201, made.text
        collection = (await world.collection())["id"]
        stove = await world.metered_asset()
        claim_id = await submit(registry, world, collection, stove)
        # The oracle approves it by itself; its credits come with the registry's issuance.
        assert await eventually(lambda: decided(registry, claim_id)) == "approved"
        await issue_claims(world)

        async def minted() -> list[Received]:
            return [
                r
                for r in receiver.received
                if orjson.loads(r.body)["data"].get("claim") == claim_id
            ]

        (delivery,) = await eventually(minted)
        body = orjson.loads(delivery.body)
        # The webhook's JSON is as before: no cause in it.
        assert set(body) == {"id", "position", "type", "subject", "actor", "timestamp", "data"}
        chain = await registry.platform.events.store.trace(delivery.headers["webhook-id"])
        assert [e.type for e in chain] == ["credits.minted", "claim.approved", "claim.submitted"]
        minted_event, approved, submitted = chain
        assert minted_event.data["amount"] == METERED_AMOUNT
        assert approved.data["claim"]["id"] == claim_id
        assert submitted.data["claim"]["id"] == claim_id and submitted.causation_id is None
        # One chain, started by the submission.
        assert {e.correlation_id for e in chain} == {submitted.id}
        # The claim names its stove and period: the readings the oracle counted.
        claim = submitted.data["claim"]
        assert claim["asset"] == stove
        readings = await registry.client.get(
            f"/v1/domains/{stove}/telemetry",
            params={"from": claim["data"]["periodStart"], "to": claim["data"]["periodEnd"]},
        )
        assert readings.status_code == 200, readings.text
        assert readings.json()["items"], "the credited period has readings"
        decision = (await registry.client.get(f"/v1/claims/{claim_id}/oracle-decision")).json()
        assert decision["outcome"] == "approved" and decision["inputsDigest"]
        # The evaluation's other events share the chain.
        async with registry.platform.sessionmaker() as session:
            rows = (
                await session.execute(
                    select(Event.type, Event.causation_id, Event.correlation_id).where(
                        Event.correlation_id == submitted.id
                    )
                )
            ).all()
        caused = {type_: cause for type_, cause, _ in rows}
        assert caused["claim.evaluated"] == submitted.id
        assert caused["credential.issued"] == submitted.id
        assert caused["credits.minted"] == approved.id
    finally:
        await world.close()
        await receiver.stop()


# -- (d) nothing global ------------------------------------------------------------------------
async def test_no_listener_is_left_on_sqlalchemys_session_class(
    make_registry: RegistryFactory,
) -> None:
    registry = await make_registry()
    for name in ("after_commit", "after_rollback", "after_flush"):
        assert not getattr(Session().dispatch, name), name
    assert not event.contains(Session, "after_flush", collection_members._add_members)
    # The platform's own session class carries them.
    own = registry.platform.sessionmaker.kw["sync_session_class"]
    assert own is not Session and issubclass(own, Session)
    assert event.contains(own, "after_flush", collection_members._add_members)
    assert own().dispatch.after_commit


def test_the_bus_refuses_a_topic_nobody_publishes_and_survives_a_failing_handler() -> None:
    bus = Bus(["claim.submitted"])
    with pytest.raises(ValueError, match=r"claim\.submited"):
        bus.on("claim.submited", lambda message: None)
    seen: list[str] = []

    def broken(message: Message) -> None:
        raise RuntimeError("a handler's fault")

    bus.on("claim.submitted", broken)
    bus.on("claim.submitted", lambda message: seen.append(message.data["claim"]["id"]))
    bus.publish_rows(
        [
            {
                "event_id": "evt_1",
                "type": "claim.submitted",
                "subject": "did:x",
                "actor": "did:y",
                "position": 1,
                "data": orjson.dumps({"claim": {"id": "c1"}}).decode(),
            },
            {
                "event_id": "evt_2",
                "type": "claim.approved",  # nobody's: never parsed
                "subject": "did:x",
                "actor": "did:y",
                "position": 2,
                "data": "not json",
            },
        ]
    )
    assert seen == ["c1"]
