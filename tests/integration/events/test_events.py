"""Events: written in the transaction of the change (never by a rolled-back one), numbered
by the sequencer so that a reader paging by position never skips a late commit (PostgreSQL,
with a transaction held open while later ones commit), listed in order, and followed live
over server-sent events from a real server."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import httpx
import orjson
import pytest
import uvicorn
from sqlalchemy import select

from tests.conftest import BACKENDS, BOOTSTRAP_KEY, free_port, running_registry
from tests.integration.events import test_webhooks
from tests.integration.events.test_webhooks import EventsRegistry
from tests.integration.registry.test_registry_basics import make_domain
from tests.support.claims_world import METERED_AMOUNT, build_world
from tests.support.workflow_world import issue_claims
from twinhub.db.models import Event
from twinhub.db.visibility import EVERYTHING
from twinhub.events.store import record_event
from twinhub.events.types import CATALOGUE, events_for_transaction
from twinhub.services.ledger import Transaction

events_registry = test_webhooks.events_registry  # the same fixtures here
receiver = test_webhooks.receiver
POSTGRES_ONLY = pytest.mark.parametrize(
    "backend", [b for b in BACKENDS if b.database == "postgresql"], indirect=True, ids=str
)


def transaction(kind: str, payload: dict[str, Any]) -> Transaction:
    from datetime import UTC, datetime

    return Transaction(
        7,
        "ab" * 32,
        "00" * 32,
        kind,
        "did:ixo:entity/x",
        "did:ixo:org/a",
        payload,
        datetime.now(UTC),
    )


# -- the mapping -----------------------------------------------------------------------------
def test_each_ledger_kind_maps_to_catalogued_events() -> None:
    approved = transaction(
        "claims.evaluate", {"claim": {"id": "c1", "status": "approved"}, "credential": "urn:vc"}
    )
    assert [e.type for e in events_for_transaction(approved)] == [
        "claim.evaluated",
        "claim.approved",
        "credential.issued",
    ]
    rejected = transaction("claims.evaluate", {"claim": {"id": "c1", "status": "rejected"}})
    assert [e.type for e in events_for_transaction(rejected)] == [
        "claim.evaluated",
        "claim.rejected",
    ]
    flagged = transaction("claims.evaluate", {"claim": {"status": "flagged"}, "credential": None})
    assert [e.type for e in events_for_transaction(flagged)] == ["claim.evaluated"]
    kinds = {
        "domain.create": "domain.created",
        "domain.update": "domain.updated",
        "domain.relate": "domain.updated",
        "domain.verify": "domain.verified",
        "domain.revoke": "domain.revoked",
        "domain.deactivate": "domain.deactivated",
        "protocol.create": "protocol.created",
        "proposal.create": "proposal.created",
        "proposal.vote": "proposal.voted",
        "claims.collection.create": "collection.created",
        "claims.collection.state": "collection.updated",
        "claims.submit": "claim.submitted",
        "credits.mint": "credits.minted",
        "credits.transfer": "credits.transferred",
        "credits.retire": "credits.retired",
    }
    for kind, expected in kinds.items():
        [event] = events_for_transaction(transaction(kind, {"x": 1}))
        assert event.type == expected and event.type in CATALOGUE
        assert event.data["ledger"] == {"height": 7, "hash": "ab" * 32}
        assert event.subject == "did:ixo:entity/x" and event.actor == "did:ixo:org/a"
    assert events_for_transaction(transaction("group.create", {})) == []
    for later in ("device.online", "device.offline", "telemetry.rejected"):
        assert later in CATALOGUE  # written by the telemetry ingestion with record_event


# -- the outbox ------------------------------------------------------------------------------
async def test_a_rolled_back_write_leaves_no_event(events_registry: EventsRegistry) -> None:
    registry = await events_registry()
    platform = registry.platform
    ghost = "did:ixo:entity/never-was"
    with pytest.raises(RuntimeError):
        async with platform.ledger.write() as write:
            await write.append("domain.create", ghost, "did:ixo:org/a", {"record": {}})
            record_event(write.session, "device.online", ghost, "did:ixo:org/a", {})
            raise RuntimeError("the change fails after its events were added")
    kept = await make_domain(registry)
    await platform.events.sequencer.run_until_idle()
    async with platform.sessionmaker() as session:
        subjects = set(await session.scalars(select(Event.subject)))
    assert ghost not in subjects and kept["did"] in subjects
    with pytest.raises(ValueError, match="unknown event type"):
        async with platform.sessionmaker() as session:
            record_event(session, "domain.exploded", ghost, "did:ixo:org/a", {})


async def test_a_programme_reads_as_events_in_order(events_registry: EventsRegistry) -> None:
    registry = await events_registry()
    start = int((await registry.client.get("/v1/events")).json()["nextCursor"])
    world = await build_world(registry)
    try:
        stove, _collection, claim = await world.approved_claim()
        await issue_claims(world)  # its credits come with the registry's issuance
    finally:
        await world.close()
    await registry.platform.events.sequencer.run_until_idle()
    items: list[dict] = []
    cursor = start
    while True:  # small pages, to walk the cursor
        page = await registry.client.get("/v1/events", params={"after": cursor, "limit": 3})
        assert page.status_code == 200, page.text
        body = page.json()
        items += body["items"]
        if not body["items"]:
            break
        cursor = int(body["nextCursor"])
    positions = [item["position"] for item in items]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    types = [item["type"] for item in items]
    project_verified = next(
        i for i in items if i["type"] == "domain.verified" and i["subject"] == world.project
    )
    assert project_verified["data"]["record"]["verified"] is True
    tail = [t for t in types if t.startswith(("claim.", "credential.", "credits.", "collection."))]
    assert tail == [
        "collection.created",
        "claim.submitted",
        "claim.evaluated",
        "claim.approved",
        "credential.issued",
        "credits.minted",
    ]
    minted = next(i for i in items if i["type"] == "credits.minted")
    assert minted["data"]["amount"] == METERED_AMOUNT and minted["data"]["claim"] == claim["id"]
    approved = next(i for i in items if i["type"] == "claim.approved")
    assert approved["subject"] == stove and approved["id"].startswith("evt_")

    only = await registry.client.get(
        "/v1/events", params={"after": start, "type": "credits.minted,claim.approved"}
    )
    assert [i["type"] for i in only.json()["items"]] == ["claim.approved", "credits.minted"]
    bad = await registry.client.get("/v1/events", params={"type": "claims.exploded"})
    assert bad.status_code == 422
    assert (await registry.client.get("/v1/events", params={"after": -1})).status_code == 422
    async with registry.as_key(None) as anonymous:
        assert (await anonymous.get("/v1/events")).status_code == 401
    catalogue = await registry.client.get("/v1/events/types")
    assert catalogue.json() == CATALOGUE


# -- ordering that never skips ---------------------------------------------------------------
@POSTGRES_ONLY
async def test_a_late_commit_is_not_skipped(events_registry: EventsRegistry) -> None:
    """Event A takes its id first but commits last: a cursor over ids would pass it by."""
    registry = await events_registry()
    platform = registry.platform
    await platform.events.sequencer.run_until_idle()
    top = (await platform.events.store.after(0, 10_000, None, EVERYTHING))[-1].position
    async with platform.sessionmaker() as held:
        await held.begin()
        record_event(held, "device.online", "did:ixo:entity/late", "did:ixo:org/t", {})
        await held.flush()  # A's id is taken now
        async with platform.sessionmaker.begin() as quick:
            record_event(quick, "device.offline", "did:ixo:entity/early", "did:ixo:org/t", {})
        assert await platform.events.sequencer.run_once() == 1
        seen = await platform.events.store.after(top, 100, None, EVERYTHING)
        assert [e.subject for e in seen] == ["did:ixo:entity/early"]
        cursor = seen[-1].position
        await held.commit()
    await platform.events.sequencer.run_until_idle()
    after = await platform.events.store.after(cursor, 100, None, EVERYTHING)
    assert [e.subject for e in after] == ["did:ixo:entity/late"]
    async with platform.sessionmaker() as session:
        ids = dict(
            (
                await session.execute(
                    select(Event.subject, Event.id).where(
                        Event.subject.in_(["did:ixo:entity/late", "did:ixo:entity/early"])
                    )
                )
            ).all()
        )
    assert ids["did:ixo:entity/late"] < ids["did:ixo:entity/early"]  # the trap is real


@POSTGRES_ONLY
async def test_concurrent_writers_and_a_following_reader(events_registry: EventsRegistry) -> None:
    """Forty writers commit in random order while two sequencers (as two processes would)
    run and a reader follows by position: the reader sees every event exactly once."""
    registry = await events_registry()
    platform = registry.platform
    await platform.events.sequencer.run_until_idle()
    start = (await platform.events.store.after(0, 10_000, None, EVERYTHING))[-1].position
    other = type(platform.events.sequencer)(platform.sessionmaker)  # a second "process"
    writers_done = asyncio.Event()

    async def writer(n: int) -> None:
        async with platform.sessionmaker.begin() as session:
            record_event(session, "device.online", f"did:ixo:entity/w{n}", "did:ixo:org/t", {})
            await session.flush()
            await asyncio.sleep(random.uniform(0, 0.2))  # commit late, in another order

    async def sequencing() -> None:
        while not writers_done.is_set():
            await asyncio.gather(platform.events.sequencer.run_once(), other.run_once())
            await asyncio.sleep(0.005)
        await platform.events.sequencer.run_until_idle()

    seen: list[str] = []

    async def reader() -> None:
        cursor = start
        while len(seen) < 40:
            for event in await platform.events.store.after(cursor, 7, None, EVERYTHING):
                seen.append(event.subject)
                cursor = event.position
            await asyncio.sleep(0.003)

    async def write_all() -> None:
        await asyncio.gather(*(writer(n) for n in range(40)))
        writers_done.set()

    await asyncio.wait_for(asyncio.gather(write_all(), sequencing(), reader()), 30)
    assert sorted(seen) == sorted(f"did:ixo:entity/w{n}" for n in range(40))
    positions = [
        e.position for e in await platform.events.store.after(start, 100, None, EVERYTHING)
    ]
    assert positions == list(range(start + 1, start + 41))


async def test_ledger_batches_number_their_own_events(events_registry: EventsRegistry) -> None:
    """The ledger numbers its events in the batch that writes them: readable at once, with
    no sequencer pass. Two processes' ledgers, writers outside the ledger (left to the
    sequencer) and two sequencers all run together while a reader follows by position: it
    sees every event once, positions have no gap, and the ledger's follow its heights."""
    registry = await events_registry()
    platform = registry.platform
    await platform.events.sequencer.run_until_idle()
    start = (await platform.events.store.after(0, 10_000, None, EVERYTHING))[-1].position
    made = await make_domain(registry)
    seen_now = await platform.events.store.after(
        start, 100, None, EVERYTHING
    )  # no sequencer has run
    assert ("domain.created", made["did"]) in {(e.type, e.subject) for e in seen_now}
    start = seen_now[-1].position

    async with running_registry(registry.settings) as other_process:
        platforms = (platform, other_process.platform)
        other_sequencer = other_process.platform.events.sequencer
        outside_done = asyncio.Event()
        created: list[str] = []

        async def ledger_writes() -> None:
            results = await asyncio.gather(
                *(
                    make_domain(p_registry, metadata={"name": f"Co-op {n}"})
                    for n, p_registry in enumerate([registry, other_process] * 15)
                )
            )
            created.extend(r["did"] for r in results)

        async def outside_writer(n: int) -> None:
            async with platform.sessionmaker.begin() as session:
                record_event(session, "device.online", f"did:ixo:entity/o{n}", "did:ixo:org/t", {})
                await session.flush()
                await asyncio.sleep(random.uniform(0, 0.1))

        async def outside() -> None:
            await asyncio.gather(*(outside_writer(n) for n in range(20)))
            outside_done.set()

        async def sequencing() -> None:
            while not outside_done.is_set():
                await asyncio.gather(*(p.events.sequencer.run_once() for p in platforms))
                await asyncio.sleep(0.005)
            await other_sequencer.run_until_idle()

        seen: list[str] = []

        async def reader() -> None:
            cursor = start
            # 30 organisations and their groups (two domain.created each) and 20 others.
            while len(seen) < 30 * 2 + 20:
                for event in await platform.events.store.after(cursor, 7, None, EVERYTHING):
                    seen.append(event.subject)
                    cursor = event.position
                await asyncio.sleep(0.003)

        await asyncio.wait_for(
            asyncio.gather(ledger_writes(), outside(), sequencing(), reader()), 60
        )
    assert len(created) == 30
    assert set(created) | {f"did:ixo:entity/o{n}" for n in range(20)} <= set(seen)
    assert len(seen) == len(set(seen)) == 80
    async with platform.sessionmaker() as session:
        rows = (
            await session.execute(
                select(Event.position, Event.ledger_height)
                .where(Event.position > start)
                .order_by(Event.position)
            )
        ).all()
    assert [position for position, _ in rows] == list(range(start + 1, start + 81))
    heights = [height for _, height in rows if height is not None]
    assert len(heights) == 60 and heights == sorted(heights)


async def test_deliveries_are_made_with_the_batch(
    events_registry: EventsRegistry, receiver: test_webhooks.Receiver
) -> None:
    """A subscribed event's deliveries are written in the ledger batch that writes the event
    (the sequencer never runs here), and the dispatcher sends them."""
    registry = await events_registry()
    hook = await test_webhooks.subscribe(registry, receiver.url, ["domain.created"])
    made = await make_domain(registry)
    pending = await test_webhooks.deliveries(registry, hook["id"])
    assert [d["status"] for d in pending] == ["pending", "pending"]
    await registry.platform.events.dispatcher.run_once()
    sent = await test_webhooks.deliveries(registry, hook["id"])
    assert [d["status"] for d in sent] == ["delivered", "delivered"]
    subjects = {orjson.loads(got.body)["subject"] for got in receiver.received}
    assert len(receiver.received) == 2 and made["did"] in subjects


# -- the live stream -------------------------------------------------------------------------
async def test_the_stream_follows_live_and_resumes(events_registry: EventsRegistry) -> None:
    registry = await events_registry(background_workers_enabled=True)
    port = free_port()
    from twinhub.registry.app import create_registry_app

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
    headers = {"Authorization": f"Bearer {BOOTSTRAP_KEY}"}
    try:
        for _ in range(500):
            if server.started:
                break
            await asyncio.sleep(0.01)
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=10) as client:
            now = int((await client.get("/v1/events")).json()["nextCursor"])

            async def domain_events(
                after: int | None, last_id: int | None, count: int = 2
            ) -> list[dict]:
                """The first `count` domain.created events (an organisation makes two)."""
                params = {"type": "domain.created"}
                if after is not None:
                    params["after"] = str(after)
                extra = {"Last-Event-ID": str(last_id)} if last_id is not None else {}
                async with client.stream(
                    "GET", "/v1/events/stream", params=params, headers=extra
                ) as stream:
                    assert stream.status_code == 200
                    assert stream.headers["content-type"].startswith("text/event-stream")
                    fields: dict[str, str] = {}
                    found: list[dict] = []
                    async for line in stream.aiter_lines():
                        if line.startswith(("id:", "event:", "data:")):
                            name, _, value = line.partition(":")
                            fields[name] = value.strip()
                        elif not line and "data" in fields:
                            found.append({**fields, "parsed": orjson.loads(fields["data"])})
                            fields = {}
                            if len(found) == count:
                                return found
                raise AssertionError("the stream ended")

            listening = asyncio.create_task(domain_events(now, None))
            await asyncio.sleep(0.3)  # the stream is open and idle
            domain = await make_domain(registry)  # through the ASGI client: another "caller"
            [live] = [
                f
                for f in await asyncio.wait_for(listening, 10)
                if f["parsed"]["subject"] == domain["did"]
            ]
            event = live["parsed"]
            assert event["subject"] == domain["did"] and live["event"] == "domain.created"
            assert live["id"] == str(event["position"])
            resumed = await domain_events(None, event["position"] - 1, count=1)
            assert resumed[0]["parsed"]["id"] == event["id"]
            bad = await client.get("/v1/events/stream", headers={"Last-Event-ID": "x"})
            assert bad.status_code == 422
    finally:
        server.should_exit = True
        await serving


# -- the migration ---------------------------------------------------------------------------
async def test_the_migration_goes_down_and_up_again(events_registry: EventsRegistry) -> None:
    from alembic import command
    from sqlalchemy import inspect

    from twinhub.db.migrate import alembic_config, upgrade_database

    registry = await events_registry()
    engine = registry.platform.engine
    tables = {"events", "webhook_subscriptions", "webhook_deliveries", "webhook_attempts"}

    def downgrade(connection: Any) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, "0005")

    async with engine.begin() as connection:
        await connection.run_sync(downgrade)
        names = set(await connection.run_sync(lambda c: inspect(c).get_table_names()))
    assert not tables & names
    await upgrade_database(engine)
    async with engine.connect() as connection:
        names = set(await connection.run_sync(lambda c: inspect(c).get_table_names()))
    assert tables <= names
    await make_domain(registry)  # writes (and their events) work on the re-made tables
    # The ledger's batch numbered its own two events: the sequencer finds nothing left.
    assert await registry.platform.events.sequencer.run_until_idle() == 0
    page = await registry.client.get("/v1/events")
    assert page.status_code == 200, page.text
    assert [item["position"] for item in page.json()["items"]] == [1, 2]
