"""Webhooks against a real receiving HTTP server on a loopback port: signed the Standard
Webhooks way (checked here with hmac alone), delivered once per subscription though
retried, through a receiver that is down, slow, answers 500 or comes back after an hour
(time moved on an injected clock, never slept), and URLs the platform must not call."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import hmac
import ipaddress
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import (
    BACKENDS,
    BOOTSTRAP_KEY,
    Backend,
    Registry,
    backend_values,
    free_port,
    fresh_postgres_database,
    running_registry,
)
from tests.integration.registry.test_registry_basics import make_domain
from tests.support.webhook_receiver import Receiver
from twinhub.events.dispatcher import Dispatcher
from twinhub.events.webhooks import address_problem, sign
from twinhub.settings import Settings

EventsRegistry = Callable[..., Awaitable[Registry]]


class FakeClock:
    """The dispatcher's time, moved by the test."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def events_registry(
    backend: Backend, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[EventsRegistry]:
    """Registries on a database of their own (PostgreSQL: a fresh one per test), with the
    background workers off: the test steps the sequencer and dispatcher itself."""
    async with AsyncExitStack() as stack:

        async def start(**overrides: Any) -> Registry:
            # The SQLite values, then (PostgreSQL) a database of this test's own.
            values = backend_values(Backend("sqlite", "memory"), tmp_path, request)
            if backend.database == "postgresql":
                values["database_url"] = await stack.enter_async_context(
                    fresh_postgres_database("events")
                )
            settings = Settings(
                **{
                    **values,
                    "twinhub_bootstrap_api_key": BOOTSTRAP_KEY,
                    "background_workers_enabled": False,
                    "webhook_allow_private_networks": True,
                    **overrides,
                }
            )
            registry = await stack.enter_async_context(running_registry(settings))
            await registry.platform.events.sequencer.run_until_idle()  # the built-ins' events
            return registry

        yield start


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    found = await Receiver(free_port()).start()
    yield found
    await found.stop()


async def subscribe(registry: Registry, url: str, events: list[str] | None = None) -> dict:
    body: dict[str, Any] = {"url": url}
    if events is not None:
        body["events"] = events
    response = await registry.client.post("/v1/webhooks", json=body)
    assert response.status_code == 201, response.text
    return response.json()


async def step(registry: Registry) -> None:
    """Number new events, then attempt every due delivery and wait for the outcomes."""
    await registry.platform.events.sequencer.run_until_idle()
    await registry.platform.events.dispatcher.run_once()


async def deliveries(registry: Registry, webhook: str) -> list[dict]:
    response = await registry.client.get(f"/v1/webhooks/{webhook}/deliveries")
    assert response.status_code == 200, response.text
    return response.json()["items"]


def verify(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """The receiver's check, written from the specification alone."""
    key = base64.b64decode(secret.split("_", 1)[1])
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    offered = [part.split(",", 1)[1] for part in headers["webhook-signature"].split(" ")]
    return any(hmac.compare_digest(expected, one) for one in offered)


# -- signing ---------------------------------------------------------------------------------
def test_signature_matches_the_specifications_example() -> None:
    # The example of the Standard Webhooks reference libraries' own tests.
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = b'{"test": 2432232314}'
    assert (
        sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body)
        == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    )


# -- delivery --------------------------------------------------------------------------------
async def test_an_event_reaches_the_receiver_signed_and_once(
    events_registry: EventsRegistry, receiver: Receiver
) -> None:
    registry = await events_registry()
    created = await subscribe(registry, receiver.url, ["domain.created"])
    assert created["secret"].startswith("whsec_")
    assert len(base64.b64decode(created["secret"][6:])) >= 24
    listed = await registry.client.get(f"/v1/webhooks/{created['id']}")
    assert listed.status_code == 200 and "secret" not in listed.json()
    assert created["secret"] not in (await registry.client.get("/v1/webhooks")).text

    domain = await make_domain(registry)
    await step(registry)
    await step(registry)  # nothing is sent twice

    ours = [r for r in receiver.received if orjson.loads(r.body)["subject"] == domain["did"]]
    assert len(ours) == 1
    got = ours[0]
    assert verify(created["secret"], got.headers, got.body)
    assert not verify("whsec_" + base64.b64encode(b"x" * 32).decode(), got.headers, got.body)
    event = orjson.loads(got.body)
    assert event["type"] == "domain.created"
    assert got.headers["webhook-id"] == event["id"]
    assert abs(int(got.headers["webhook-timestamp"]) - time.time()) < 60
    assert event["data"]["record"]["did"] == domain["did"]
    # Only the subscribed type: the organisation's membership group is a domain.created
    # too, and nothing else (protocol.created of the built-ins, ...) was sent.
    assert {orjson.loads(r.body)["type"] for r in receiver.received} == {"domain.created"}

    page = await registry.client.get("/v1/events", params={"type": "domain.created"})
    assert event["id"] in [item["id"] for item in page.json()["items"]]

    log = await deliveries(registry, created["id"])
    mine = next(d for d in log if d["event"]["id"] == event["id"])
    assert mine["status"] == "delivered" and mine["attempts"] == 1
    assert mine["log"][0]["statusCode"] == 200 and mine["log"][0]["durationMs"] >= 0
    metrics = (await registry.client.get("/metrics")).text
    assert 'twinhub_webhook_attempts_total{outcome="delivered"} 2.0' in metrics
    assert "twinhub_webhook_in_flight 0.0" in metrics


async def test_a_receiver_down_then_failing_comes_back_after_an_hour(
    events_registry: EventsRegistry,
) -> None:
    registry = await events_registry()
    clock = FakeClock()
    registry.platform.events.set_clock(clock)
    receiver = Receiver(free_port())  # not started: connections are refused
    created = await subscribe(registry, receiver.url, ["domain.created"])
    start = clock.now
    domain = await make_domain(registry)
    await step(registry)

    waits: list[float] = []

    def answered_500() -> int:  # events (the organisation and its group) seen failing
        return len({r.headers["webhook-id"] for r in receiver.received})

    while clock.now - start < timedelta(hours=1) or answered_500() < 2:
        if clock.now - start >= timedelta(minutes=30) and receiver._server is None:
            receiver.status = 500
            await receiver.start()  # up, but failing
        [mine] = [
            d
            for d in await deliveries(registry, created["id"])
            if d["event"]["type"] == "domain.created" and d["attempts"]
        ][-1:]
        assert mine["status"] == "pending"
        due = datetime.fromisoformat(mine["nextAttemptAt"].replace("Z", "+00:00"))
        waits.append((due - clock.now).total_seconds())
        clock.now = due
        await step(registry)
    try:
        receiver.status = 200
        failing = len(receiver.received)
        for _ in range(5):  # the next due attempt succeeds
            log = await deliveries(registry, created["id"])
            pending = [d for d in log if d["status"] == "pending"]
            if not pending:
                break
            clock.now = max(
                datetime.fromisoformat(d["nextAttemptAt"].replace("Z", "+00:00")) for d in pending
            )
            await step(registry)
        log = await deliveries(registry, created["id"])
        assert {d["status"] for d in log} == {"delivered"}, [
            (d["nextAttemptAt"], d["log"][-2:]) for d in log
        ] + [str(clock.now)]
        mine = next(d for d in log if d["event"]["id"] in _ids_for(receiver, domain["did"]))
        errors = [entry["error"] or "" for entry in mine["log"]]
        assert any("ConnectError" in e for e in errors)  # it was down
        assert 500 in [entry["statusCode"] for entry in mine["log"]]  # then answered 500
        assert mine["log"][-1]["statusCode"] == 200
        assert mine["attempts"] == len(mine["log"]) >= 6
        # Back-off grows (with jitter of at most half), capped by the settings' maximum.
        assert waits[0] < 10 and max(waits) > 300
        # Each successful receipt of one event is one; every attempt carried the same id.
        ok = [
            r for r in receiver.received[failing:] if r.headers["webhook-id"] == mine["event"]["id"]
        ]
        assert len(ok) == 1
        ids = {
            r.headers["webhook-id"]
            for r in receiver.received
            if orjson.loads(r.body)["subject"] == domain["did"]
        }
        assert ids == {mine["event"]["id"]}
    finally:
        await receiver.stop()


def _ids_for(receiver: Receiver, subject: str) -> set[str]:
    return {
        orjson.loads(r.body)["id"]
        for r in receiver.received
        if orjson.loads(r.body)["subject"] == subject
    }


async def test_a_slow_receiver_times_out_and_blocks_no_other(
    events_registry: EventsRegistry,
) -> None:
    registry = await events_registry(webhook_timeout_seconds=0.5)
    slow = await Receiver(free_port(), delay=5.0).start()
    fast = await Receiver(free_port()).start()
    try:
        slow_hook = await subscribe(registry, slow.url, ["protocol.created"])
        await subscribe(registry, fast.url, ["protocol.created"])
        response = await registry.client.post(
            "/v1/protocols", json={"type": "Protocol", "name": f"Slow {free_port()}"}
        )
        assert response.status_code == 201, response.text
        await registry.platform.events.sequencer.run_until_idle()
        started = time.perf_counter()
        claimed = await registry.platform.events.dispatcher.run_once(wait=False)
        assert claimed == 2
        for _ in range(400):
            if fast.received:
                break
            await asyncio.sleep(0.001)
        assert time.perf_counter() - started < 0.4  # not behind the slow one
        await asyncio.sleep(0.7)  # the slow attempt's deadline passes
        for _ in range(100):
            [attempt] = await deliveries(registry, slow_hook["id"])
            if attempt["attempts"]:
                break
            await asyncio.sleep(0.05)
        assert attempt["status"] == "pending"
        assert "no complete answer within 0.5 s" in attempt["lastError"]
        assert attempt["log"][0]["durationMs"] < 1500
    finally:
        await slow.stop()
        await fast.stop()


async def test_failed_after_the_horizon_then_retried_by_hand(
    events_registry: EventsRegistry, receiver: Receiver
) -> None:
    registry = await events_registry(webhook_retry_horizon_seconds=3600)
    clock = FakeClock()
    registry.platform.events.set_clock(clock)
    receiver.status = 500
    created = await subscribe(registry, receiver.url, ["domain.deactivated"])
    domain = await make_domain(registry)
    gone = await registry.client.delete(f"/v1/domains/{domain['did']}")
    assert gone.status_code == 200, gone.text
    await step(registry)
    for _ in range(100):
        [delivery] = await deliveries(registry, created["id"])
        if delivery["status"] != "pending":
            break
        clock.now = datetime.fromisoformat(delivery["nextAttemptAt"].replace("Z", "+00:00"))
        await step(registry)
    assert delivery["status"] == "failed"
    assert delivery["lastStatusCode"] == 500
    assert delivery["attempts"] >= 5
    hook = (await registry.client.get(f"/v1/webhooks/{created['id']}")).json()
    assert hook["deliveries"] == {"pending": 0, "delivered": 0, "failed": 1}

    receiver.status = 204
    retried = await registry.client.post(
        f"/v1/webhooks/{created['id']}/deliveries/{delivery['id']}/retry"
    )
    assert retried.status_code == 202, retried.text
    await step(registry)
    [delivery] = await deliveries(registry, created["id"])
    assert delivery["status"] == "delivered" and delivery["lastStatusCode"] == 204

    # Replay from a position: every event after it is sent again.
    replay = await registry.client.post(f"/v1/webhooks/{created['id']}/replay", json={"after": 0})
    assert replay.status_code == 202 and replay.json() == {"queued": 1}
    before = len(receiver.received)
    await step(registry)
    assert len(receiver.received) == before + 1
    assert receiver.received[-1].headers["webhook-id"] == delivery["event"]["id"]

    missing = await registry.client.post(f"/v1/webhooks/{created['id']}/deliveries/999999/retry")
    assert missing.status_code == 404


async def test_an_oversized_answer_is_cut_off(
    events_registry: EventsRegistry, receiver: Receiver
) -> None:
    registry = await events_registry(webhook_max_response_bytes=1024)
    receiver.answer_bytes = 5_000_000
    created = await subscribe(registry, receiver.url, ["domain.created"])
    await make_domain(registry)
    await step(registry)
    log = await deliveries(registry, created["id"])
    assert log and {d["status"] for d in log} == {"delivered"}
    assert "cut off at 1024 bytes" in log[0]["lastError"]
    assert len(log[0]["log"][0]["response"]) <= 500


async def test_a_deleted_subscription_gets_nothing_more(
    events_registry: EventsRegistry, receiver: Receiver
) -> None:
    registry = await events_registry()
    created = await subscribe(registry, receiver.url)  # every type
    assert created["events"] == []
    gone = await registry.client.delete(f"/v1/webhooks/{created['id']}")
    assert gone.status_code == 204
    assert (await registry.client.get(f"/v1/webhooks/{created['id']}")).status_code == 404
    assert (await registry.client.get("/v1/webhooks")).json()["items"] == []
    await make_domain(registry)
    await step(registry)
    assert receiver.received == []


# -- who may, and which URLs -----------------------------------------------------------------
async def test_webhooks_are_their_creators_and_bad_bodies_are_422(
    events_registry: EventsRegistry, receiver: Receiver
) -> None:
    registry = await events_registry()
    reader = registry.as_key(await registry.key("did:ixo:org/hooks-reader", "reader"))
    writer = registry.as_key(await registry.key("did:ixo:org/hooks-writer", "writer", "reader"))
    other = registry.as_key(await registry.key("did:ixo:org/hooks-other", "writer", "reader"))
    admins = await subscribe(registry, receiver.url)
    async with reader, writer, other:
        refused = await reader.post("/v1/webhooks", json={"url": receiver.url})
        assert refused.status_code == 403
        assert (await reader.get("/v1/events")).status_code == 200  # reading events is fine
        # A writer subscribes (for what its organisation may see) and manages its own.
        made = await writer.post("/v1/webhooks", json={"url": receiver.url})
        assert made.status_code == 201, made.text
        mine = made.json()
        assert [h["id"] for h in (await writer.get("/v1/webhooks")).json()["items"]] == [mine["id"]]
        assert (await writer.get(f"/v1/webhooks/{admins['id']}")).status_code == 404
        assert (await other.get(f"/v1/webhooks/{mine['id']}")).status_code == 404
        assert (await other.delete(f"/v1/webhooks/{mine['id']}")).status_code == 404
        assert (await other.get("/v1/webhooks")).json()["items"] == []
        listed = (await registry.client.get("/v1/webhooks")).json()["items"]
        assert {h["id"] for h in listed} == {admins["id"], mine["id"]}  # an admin sees all
        assert (await writer.delete(f"/v1/webhooks/{mine['id']}")).status_code == 204
    unknown = await registry.client.post(
        "/v1/webhooks", json={"url": receiver.url, "events": ["domain.exploded"]}
    )
    assert unknown.status_code == 422
    assert unknown.json()["error"]["details"][0]["field"] == "type"
    for url in ("ftp://example.org/x", "not a url", "http://user:pw@example.org/", ""):
        bad = await registry.client.post("/v1/webhooks", json={"url": url})
        assert bad.status_code == 422, url
        assert bad.json()["error"]["details"][0]["field"] == "url"


PRIVATE_URLS = [
    "http://127.0.0.1:9/hook",
    "http://localhost/hook",
    "http://10.1.2.3/hook",
    "http://192.168.0.10/hook",
    "http://172.16.5.4/hook",
    "http://169.254.169.254/latest/meta-data/",
    "http://[::1]:8080/hook",
    "http://[fe80::1]/hook",
    "http://[::ffff:10.0.0.1]/hook",
    "http://224.0.0.1/hook",
    "http://0.0.0.0/hook",
    "http://100.64.0.1/hook",
]


async def test_private_addresses_are_refused(events_registry: EventsRegistry) -> None:
    registry = await events_registry(webhook_allow_private_networks=False)
    for url in PRIVATE_URLS:
        response = await registry.client.post("/v1/webhooks", json={"url": url})
        assert response.status_code == 422, (url, response.text)
        assert response.json()["error"]["details"][0]["field"] == "url"
        # The refusal names the setting that would allow it.
        assert "WEBHOOK_ALLOW_PRIVATE_NETWORKS=true" in response.text, url
    assert (await registry.client.get("/v1/webhooks")).json()["items"] == []
    denied = await events_registry(webhook_denied_hosts="hooks.example.org")
    response = await denied.client.post("/v1/webhooks", json={"url": "https://hooks.example.org/"})
    assert response.status_code == 422 and "WEBHOOK_DENIED_HOSTS" in response.text


async def test_the_platform_itself_is_refused_even_on_private_networks(
    events_registry: EventsRegistry,
) -> None:
    registry = await events_registry(webhook_allow_private_networks=True)
    port = registry.settings.registry.port
    for url in (f"http://127.0.0.1:{port}/v1/domains", f"http://localhost:{port}/"):
        response = await registry.client.post("/v1/webhooks", json={"url": url})
        assert response.status_code == 422, url
        assert "platform itself" in response.text


async def test_the_address_is_checked_again_at_delivery(
    events_registry: EventsRegistry, receiver: Receiver
) -> None:
    """A URL accepted once is checked again on every attempt (DNS may now answer a private
    address): here the policy tightens between the subscription and the delivery."""
    registry = await events_registry(webhook_allow_private_networks=True)
    created = await subscribe(registry, f"http://localhost:{receiver.port}/hook")
    dispatcher = registry.platform.events.dispatcher
    dispatcher.policy = dataclasses.replace(dispatcher.policy, allow_private_networks=False)
    await make_domain(registry)
    await step(registry)
    assert receiver.received == []
    log = await deliveries(registry, created["id"])
    assert log and all("refused by the URL policy" in d["lastError"] for d in log)
    assert all(d["status"] == "pending" for d in log)


def test_address_policy_units() -> None:
    policy = Settings(host="127.0.0.1").webhooks
    public = ipaddress.ip_address("93.184.216.34")
    assert address_problem(public, 443, policy) is None
    for private in ("127.0.0.2", "10.0.0.1", "169.254.1.1", "::1", "fd00::1", "240.0.0.1"):
        assert address_problem(ipaddress.ip_address(private), 443, policy), private
    open_policy = dataclasses.replace(policy, allow_private_networks=True)
    assert address_problem(ipaddress.ip_address("10.0.0.1"), 443, open_policy) is None
    assert "platform itself" in (
        address_problem(ipaddress.ip_address("127.0.0.1"), 8000, open_policy) or ""
    )


@pytest.mark.parametrize(
    "backend", [b for b in BACKENDS if b.database == "postgresql"], indirect=True, ids=str
)
async def test_two_dispatchers_share_the_work_and_send_nothing_twice(
    events_registry: EventsRegistry, receiver: Receiver
) -> None:
    """Two processes' dispatchers on one database: every delivery is sent exactly once."""
    registry = await events_registry(webhook_concurrency_per_endpoint=4)
    platform = registry.platform
    await subscribe(registry, receiver.url, ["domain.created"])
    for _ in range(6):
        await make_domain(registry)  # 12 domain.created events (each with its group)
    await platform.events.sequencer.run_until_idle()
    first = platform.events.dispatcher
    second = Dispatcher(platform.sessionmaker, first._box, first.policy)
    try:
        for _ in range(20):
            claimed = await asyncio.gather(first.run_once(), second.run_once())
            if not any(claimed):
                break
        ids = [r.headers["webhook-id"] for r in receiver.received]
        assert len(ids) == 12 and len(set(ids)) == 12
    finally:
        await second.stop()


async def test_a_process_dying_mid_delivery_leaves_it_to_be_sent_again(
    events_registry: EventsRegistry, receiver: Receiver
) -> None:
    """Claimed but never recorded (the process died): once the lease runs out, another
    attempt sends it; a receiver answering 410 Gone is not asked again."""
    registry = await events_registry()
    clock = FakeClock()
    registry.platform.events.set_clock(clock)
    created = await subscribe(registry, receiver.url, ["protocol.created"])
    response = await registry.client.post(
        "/v1/protocols", json={"type": "Protocol", "name": f"Lease {free_port()}"}
    )
    assert response.status_code == 201, response.text
    dispatcher = registry.platform.events.dispatcher
    await registry.platform.events.sequencer.run_until_idle()
    [claimed] = await dispatcher._claim()  # ... and the process dies here
    assert await dispatcher.run_once() == 0  # leased: nobody else sends it meanwhile
    clock.now += timedelta(seconds=dispatcher.policy.timeout + 31)
    receiver.status = 410
    assert await dispatcher.run_once() == 1
    [delivery] = await deliveries(registry, created["id"])
    assert delivery["id"] == claimed.delivery
    assert delivery["status"] == "failed" and delivery["lastStatusCode"] == 410
    clock.now += timedelta(hours=1)
    assert await dispatcher.run_once() == 0
    assert len(receiver.received) == 1


# -- a receiver that keeps failing is disabled; idempotent subscribing ------------------------
async def test_a_receiver_failing_too_long_is_disabled_then_enabled_again(
    events_registry: EventsRegistry, receiver: Receiver
) -> None:
    registry = await events_registry(
        webhook_disable_after_seconds=6 * 3600, webhook_retry_horizon_seconds=3 * 3600
    )
    clock = FakeClock()
    registry.platform.events.set_clock(clock)
    receiver.status = 503
    failing = await subscribe(registry, receiver.url, ["domain.created"])
    watcher = await subscribe(registry, receiver.url, ["webhook.disabled"])
    assert failing["state"] == "active" and failing["failingSince"] is None
    started = clock.now
    await make_domain(registry)
    await step(registry)
    hook = (await registry.client.get(f"/v1/webhooks/{failing['id']}")).json()
    assert hook["state"] == "active" and hook["failingSince"] is not None

    # A success in between starts the count again.
    receiver.status = 200
    clock.now += timedelta(hours=1)
    await make_domain(registry)
    await step(registry)
    healed = (await registry.client.get(f"/v1/webhooks/{failing['id']}")).json()
    assert healed["failingSince"] is None and healed["state"] == "active"
    receiver.status = 503
    failing_from = clock.now
    await make_domain(registry)  # each new event is tried once and retried
    while True:
        await step(registry)
        hook = (await registry.client.get(f"/v1/webhooks/{failing['id']}")).json()
        if hook["state"] == "disabled" or clock.now - failing_from > timedelta(days=2):
            break
        clock.now += timedelta(minutes=30)
        await make_domain(registry)
    assert hook["state"] == "disabled"
    elapsed = datetime.fromisoformat(hook["disabledAt"].replace("Z", "+00:00")) - failing_from
    assert timedelta(hours=6) <= elapsed <= timedelta(hours=7), elapsed
    assert clock.now - started > timedelta(hours=6)
    # Its pending deliveries are failed (replayable), and no new ones are made.
    counts = hook["deliveries"]
    assert counts["pending"] == 0 and counts["failed"] >= 1
    before = len(receiver.received)
    receiver.status = 200
    await make_domain(registry)
    await step(registry)
    domain_created = [
        r for r in receiver.received[before:] if orjson.loads(r.body)["type"] == "domain.created"
    ]
    assert domain_created == []
    # Said so as an event, to readers of events and to the other subscription.
    events = (await registry.client.get("/v1/events", params={"type": "webhook.disabled"})).json()
    [disabled] = events["items"]
    assert disabled["subject"] == failing["id"] and disabled["data"]["url"] == receiver.url
    assert "503" in disabled["data"]["lastError"]
    told = [orjson.loads(r.body) for r in receiver.received if r.body]
    assert disabled["id"] in [body["id"] for body in told if body["type"] == "webhook.disabled"]
    assert watcher["id"] != failing["id"]

    # Enabled again: new events are delivered; what it missed comes by replay.
    enabled = await registry.client.post(f"/v1/webhooks/{failing['id']}/enable")
    assert enabled.status_code == 200, enabled.text
    assert enabled.json()["state"] == "active" and enabled.json()["disabledAt"] is None
    domain = await make_domain(registry)
    await step(registry)
    subjects = [orjson.loads(r.body)["subject"] for r in receiver.received[before:]]
    assert domain["did"] in subjects
    missing = await registry.client.post("/v1/webhooks/wh_0000000000000000/enable")
    assert missing.status_code == 404


async def test_an_idempotency_key_returns_the_first_subscription(
    events_registry: EventsRegistry, receiver: Receiver
) -> None:
    registry = await events_registry()
    headers = {"Idempotency-Key": "subscribe-once"}
    body = {"url": receiver.url, "events": ["domain.created"]}
    first = await registry.client.post("/v1/webhooks", json=body, headers=headers)
    assert first.status_code == 201, first.text
    assert first.json()["secret"].startswith("whsec_")
    again = await registry.client.post("/v1/webhooks", json=body, headers=headers)
    assert again.status_code == 201, again.text
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.headers["Location"] == first.headers["Location"]
    assert again.headers["Cache-Control"] == "no-store"
    assert again.json()["id"] == first.json()["id"]
    assert "secret" not in again.json()  # shown once, never stored
    listed = (await registry.client.get("/v1/webhooks")).json()["items"]
    assert [hook["id"] for hook in listed] == [first.json()["id"]]
    other = await registry.client.post(
        "/v1/webhooks", json={**body, "description": "another"}, headers=headers
    )
    assert other.status_code == 422  # the same key with another body
    await make_domain(registry)
    await step(registry)
    assert len({r.headers["webhook-id"] for r in receiver.received}) == len(receiver.received)
