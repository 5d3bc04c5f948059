"""Telemetry over MQTT against the real Mosquitto (issue 12, point 4): a shared subscription
split between two subscribers, signed messages, drops counted and listed, redelivery and
duplicates stored once, and a PostgreSQL outage that loses nothing."""

from __future__ import annotations

import asyncio
import json
import secrets
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from tests.conftest import BACKENDS, POSTGRES_URL, RUN_ID, Registry, RegistryFactory, unavailable
from tests.integration.ussd.test_ussd_resilience import address_of, with_address
from tests.support.tcp_proxy import TcpProxy
from tests.support.telemetry_world import Farm, at, build_farm
from twinhub.security.device_signatures import device_public_key, sign_batch
from twinhub.services.device_tokens import sign
from twinhub.telemetry.mqtt import MqttIngest, device_properties, topic_for

BROKER = ("127.0.0.1", 1883)


@pytest.fixture
def mqtt_settings() -> dict[str, Any]:
    try:
        socket.create_connection(BROKER, timeout=2).close()
    except OSError as error:
        unavailable("Mosquitto", error)
    return {
        "mqtt_url": f"mqtt://{BROKER[0]}:{BROKER[1]}",
        "mqtt_topic_prefix": f"twinhub-test/{RUN_ID}/{secrets.token_hex(3)}",
        "mqtt_client_id": f"twinhub-test-{secrets.token_hex(4)}",
    }


@pytest.fixture
async def publisher() -> AsyncIterator[mqtt.Client]:
    client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    client.connect(*BROKER)
    client.loop_start()
    yield client
    client.disconnect()
    client.loop_stop()


def publish(
    client: mqtt.Client, prefix: str, did: str, token: str, body: Any, sign_as: str | None = None
) -> None:
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()
    properties = Properties(PacketTypes.PUBLISH)  # the device side: paho, as a device may
    properties.UserProperty = device_properties(sign_as or token, payload)
    info = client.publish(topic_for(prefix, did), payload, qos=1, properties=properties)
    info.wait_for_publish(5)


async def until(
    check: Callable[[], Awaitable[bool]],
    seconds: float = 15,
    what: Callable[[], object] = lambda: None,
) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"not reached in time: {what()}"
        await asyncio.sleep(0.05)


async def readings_of(farm: Farm, did: str) -> int:
    state = await farm.registry.client.get(f"/v1/domains/{did}/state")
    if state.status_code == 503:  # the registry's answer while its database is down
        return -1
    assert state.status_code == 200, state.text
    return state.json()["readings"]


def reading(seq: int) -> dict[str, Any]:
    return {
        "readings": [{"seq": seq, "time": at(datetime.now(UTC), -1), "values": {"energyKwh": 0.25}}]
    }


async def subscribed(*ingests: MqttIngest) -> None:
    async def ready() -> bool:
        return all(i.subscribed for i in ingests)

    await until(ready)


async def test_two_subscribers_share_the_stream_and_bad_messages_are_dropped(
    make_registry: RegistryFactory, mqtt_settings: dict[str, Any], publisher: mqtt.Client
) -> None:
    registry = await make_registry(**mqtt_settings)
    platform = registry.platform
    second = MqttIngest(
        registry.settings.telemetry,
        platform.telemetry,
        platform.device_tokens,
        client_id=mqtt_settings["mqtt_client_id"] + "-b",
    )
    task = asyncio.create_task(second.run())
    try:
        await subscribed(platform.mqtt, second)
        health = await registry.client.get("/health")
        assert health.json()["mqtt"] == "connected"
        farm = await build_farm(registry)
        stove, other = await farm.stove(), await farm.stove()
        prefix = mqtt_settings["mqtt_topic_prefix"]
        for seq in range(1, 41):
            publish(publisher, prefix, stove, farm.tokens[stove], reading(seq))
        await until(lambda: _equals(readings_of(farm, stove), 40))
        assert platform.mqtt.stored + second.stored == 40
        assert platform.mqtt.stored > 0 and second.stored > 0  # the group split the stream
        # Redelivered or repeated messages store nothing new.
        for seq in range(1, 11):
            publish(publisher, prefix, stove, farm.tokens[stove], reading(seq))
        await until(
            lambda: _true(platform.telemetry.counters["duplicates"] >= 10),
            what=lambda: (
                platform.telemetry.counters,
                list(platform.telemetry.rejections)[:5],
                platform.mqtt.as_record(),
                second.as_record(),
            ),
        )
        assert await readings_of(farm, stove) == 40
        # A message for the stove signed with the other device's token; a forged signature;
        # no signature; malformed JSON; an invalid reading: each dropped, counted, listed.
        dropped_before = platform.mqtt.dropped + second.dropped
        publish(publisher, prefix, stove, farm.tokens[other], reading(100))
        publish(
            publisher,
            prefix,
            stove,
            farm.tokens[stove],
            reading(101),
            sign_as="thd_" + farm.tokens[stove].split("_")[1] + "_forged",
        )
        publisher.publish(
            topic_for(prefix, stove), json.dumps(reading(102)), qos=1
        ).wait_for_publish(5)
        publish(publisher, prefix, stove, farm.tokens[stove], b"{nope")
        publish(
            publisher,
            prefix,
            stove,
            farm.tokens[stove],
            {"readings": [{"seq": 103, "time": "x", "values": {}}]},
        )
        await until(lambda: _true(platform.mqtt.dropped + second.dropped - dropped_before == 5))
        assert await readings_of(farm, stove) == 40
        listed = (await registry.client.get("/v1/telemetry/rejections")).json()
        reasons = {item["reason"] for item in listed["items"] if item["source"] == "mqtt"}
        assert "a token of another device" in reasons
        assert "bad signature" in reasons
        assert "malformed JSON" in reasons
        assert any(r.startswith("unsigned") for r in reasons)
        assert any("readings[0].time" in r for r in reasons)
        # The other device's own messages still go in.
        publish(publisher, prefix, other, farm.tokens[other], reading(1))
        await until(lambda: _equals(readings_of(farm, other), 1))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _equals(value: Awaitable[int], expected: int) -> bool:
    return await value == expected


async def _true(value: bool) -> bool:
    return value


@pytest.mark.parametrize("backend", [BACKENDS[1]], indirect=True, ids=str)  # PostgreSQL only
async def test_a_database_outage_loses_nothing_and_doubles_nothing(
    make_registry: RegistryFactory,
    mqtt_settings: dict[str, Any],
    publisher: mqtt.Client,
    postgres_url: str,
) -> None:
    async with TcpProxy(*address_of(POSTGRES_URL, 5432)) as proxy:
        registry: Registry = await make_registry(
            **mqtt_settings,
            database_url=with_address(postgres_url, proxy.port),
            database_connect_timeout_seconds=5,  # cut: refused at once; 5 s outlasts a GC pause
        )
        platform = registry.platform
        await subscribed(platform.mqtt)
        farm = await build_farm(registry)
        stove = await farm.stove()
        prefix = mqtt_settings["mqtt_topic_prefix"]
        publish(publisher, prefix, stove, farm.tokens[stove], reading(1))
        await until(lambda: _equals(readings_of(farm, stove), 1))
        await proxy.cut()
        for seq in range(2, 22):
            publish(publisher, prefix, stove, farm.tokens[stove], reading(seq))
        await until(lambda: _true(platform.mqtt.retries >= 3))
        assert platform.mqtt.stored == 1
        await proxy.restore()
        await until(lambda: _equals(readings_of(farm, stove), 21), seconds=30)
        # Everything again (as a broker redelivers after a reconnect): nothing doubles.
        for seq in range(1, 22):
            publish(publisher, prefix, stove, farm.tokens[stove], reading(seq))
        await until(lambda: _true(platform.telemetry.counters["duplicates"] >= 21))
        assert await readings_of(farm, stove) == 21
        history = await registry.client.get(f"/v1/domains/{stove}/telemetry", params={"limit": 100})
        assert [r["seq"] for r in history.json()["items"]] == list(range(1, 22))


async def test_a_broker_that_is_away_stops_nothing_else(make_registry: RegistryFactory) -> None:
    """MQTT_URL names a port where nothing listens: twinhub starts, serves, ingests over
    HTTP, and /health says the broker is disconnected (while it keeps retrying)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again at once: nothing listens there
    registry = await make_registry(
        mqtt_url=f"mqtt://127.0.0.1:{port}", mqtt_reconnect_max_seconds=1
    )
    health = await registry.client.get("/health")
    assert health.status_code == 200
    assert health.json()["mqtt"] == "disconnected" and health.json()["database"] == "connected"
    farm = await build_farm(registry)
    stove = await farm.stove()
    sent = await farm.send(
        stove, [{"seq": 1, "time": at(datetime.now(UTC), -1), "values": {"batteryPct": 80}}]
    )
    assert sent.json()["accepted"] == 1
    listed = (await registry.client.get("/v1/telemetry/rejections")).json()
    assert listed["mqtt"]["state"] == "disconnected"


@pytest.mark.parametrize("backend", [BACKENDS[1]], indirect=True, ids=str)  # PostgreSQL only
async def test_messages_not_stored_stay_unacknowledged_and_come_again(
    make_registry: RegistryFactory,
    mqtt_settings: dict[str, Any],
    publisher: mqtt.Client,
    postgres_url: str,
) -> None:
    """A subscriber stopped while its messages wait for the database acknowledged none of
    them: the broker hands them to the next subscriber of that session, which stores them
    (as duplicates of what the platform's own subscriber stored meanwhile)."""
    async with TcpProxy(*address_of(POSTGRES_URL, 5432)) as proxy:
        registry: Registry = await make_registry(
            **mqtt_settings,
            database_url=with_address(postgres_url, proxy.port),
            database_connect_timeout_seconds=5,
        )
        platform = registry.platform
        # A second group: it gets its own copy of every message.
        settings = registry.settings.telemetry.model_copy(update={"mqtt_shared_group": "second"})
        client_id = mqtt_settings["mqtt_client_id"] + "-second"

        def second() -> MqttIngest:
            return MqttIngest(settings, platform.telemetry, platform.device_tokens, client_id)

        first = second()
        task = asyncio.create_task(first.run())
        try:
            await subscribed(platform.mqtt, first)
            farm = await build_farm(registry)
            stove = await farm.stove()
            prefix = mqtt_settings["mqtt_topic_prefix"]
            await proxy.cut()
            for seq in range(1, 6):
                publish(publisher, prefix, stove, farm.tokens[stove], reading(seq))
            await until(lambda: _true(first.retries >= 2))
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert first.stored == 0
        await proxy.restore()
        await until(lambda: _equals(readings_of(farm, stove), 5), seconds=30)
        again = second()
        task = asyncio.create_task(again.run())
        try:
            await until(lambda: _true(again.stored == 5), what=again.as_record)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert await readings_of(farm, stove) == 5


async def test_a_silent_broker_is_left_and_reconnected_to(
    make_registry: RegistryFactory, mqtt_settings: dict[str, Any], publisher: mqtt.Client
) -> None:
    """Keep-alive: a broker that stops answering (the connection open, no byte passing) is
    taken as gone after twice the keep-alive; /health says so; a fresh connection follows
    once it answers, and messages flow again."""
    async with TcpProxy(*BROKER) as proxy:
        registry = await make_registry(
            **{**mqtt_settings, "mqtt_url": f"mqtt://127.0.0.1:{proxy.port}"},
            mqtt_keepalive_seconds=1,
            mqtt_reconnect_max_seconds=1,
        )
        ingest: MqttIngest = registry.platform.mqtt
        await subscribed(ingest)
        farm = await build_farm(registry)
        stove = await farm.stove()
        prefix = mqtt_settings["mqtt_topic_prefix"]
        publish(publisher, prefix, stove, farm.tokens[stove], reading(1))
        await until(lambda: _equals(readings_of(farm, stove), 1))
        proxy.hang()

        async def health() -> str:
            return str((await registry.client.get("/health")).json()["mqtt"])

        await until(lambda: _equals_text(health(), "disconnected"))
        proxy.unhang()
        await until(lambda: _true(ingest.subscribed), seconds=30)
        assert ingest.connections >= 2 and await health() == "connected"
        publish(publisher, prefix, stove, farm.tokens[stove], reading(2))
        await until(lambda: _equals(readings_of(farm, stove), 2))


async def _equals_text(value: Awaitable[str], expected: str) -> bool:
    return await value == expected


async def test_a_device_over_its_rate_limit_loses_only_the_excess(
    make_registry: RegistryFactory, mqtt_settings: dict[str, Any], publisher: mqtt.Client
) -> None:
    """Messages of one device are admitted together when the limit allows; otherwise each
    counts on its own: what fits is stored, the rest dropped, counted and listed."""
    registry = await make_registry(**mqtt_settings, telemetry_rate_limit="3/minute")
    ingest: MqttIngest = registry.platform.mqtt
    await subscribed(ingest)
    farm = await build_farm(registry)
    stove = await farm.stove()
    prefix = mqtt_settings["mqtt_topic_prefix"]
    for seq in range(1, 7):
        publish(publisher, prefix, stove, farm.tokens[stove], reading(seq))
    await until(lambda: _true(ingest.stored + ingest.dropped == 6), what=ingest.as_record)
    assert ingest.stored == 3 and ingest.dropped == 3
    assert await readings_of(farm, stove) == 3
    listed = (await registry.client.get("/v1/telemetry/rejections")).json()["items"]
    assert [i["reason"] for i in listed if i["device"] == stove].count("rate limited") == 3


@pytest.mark.parametrize("backend", [BACKENDS[0]], indirect=True, ids=str)  # the broker's part
async def test_a_stored_group_is_acknowledged_so_the_broker_sends_more(
    make_registry: RegistryFactory,
    mqtt_settings: dict[str, Any],
    publisher: mqtt.Client,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A group's PUBACKs go out once it is stored: with a Receive Maximum of 3 the broker
    holds back every further message until some are acknowledged (without acknowledgements
    the subscriber would get three of the ten), so all ten arrive only if they reach it."""
    from twinhub.telemetry import mqtt as ingest_module

    registry = await make_registry(**mqtt_settings)
    platform = registry.platform
    monkeypatch.setattr(ingest_module, "RECEIVE_MAXIMUM", 3)
    settings = registry.settings.telemetry.model_copy(update={"mqtt_shared_group": "small"})
    client_id = mqtt_settings["mqtt_client_id"] + "-small"
    small = MqttIngest(settings, platform.telemetry, platform.device_tokens, client_id, False)
    task = asyncio.create_task(small.run())
    try:
        await subscribed(platform.mqtt, small)
        farm = await build_farm(registry)
        stove = await farm.stove()
        for seq in range(1, 11):
            publish(
                publisher,
                mqtt_settings["mqtt_topic_prefix"],
                stove,
                farm.tokens[stove],
                reading(seq),
            )
        await until(lambda: _true(small.stored == 10), what=small.as_record)
        assert small.dropped == 0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_small_group_waits_a_moment_for_the_messages_on_their_way(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that finds fewer than LINGER_BELOW messages lingers before taking them, so
    the messages arriving meanwhile go in the same transaction; a group that is big
    enough is taken at once. (The linger is the test's to end, so nothing here is timed.)"""
    from twinhub.settings import Settings
    from twinhub.telemetry import mqtt as ingest_module

    settings = Settings(environment="test", data_dir=tmp_path, mqtt_url="mqtt://127.0.0.1:1883")
    ingest = MqttIngest(settings.telemetry, None, None, "unused")  # type: ignore[arg-type]  # _handle is replaced
    handled: list[int] = []
    lingering = asyncio.Event()
    go_on = asyncio.Event()

    async def handle(messages: list[Any]) -> None:
        handled.append(len(messages))

    async def linger() -> None:
        lingering.set()
        await go_on.wait()

    monkeypatch.setattr(ingest, "_handle", handle)
    monkeypatch.setattr(ingest, "_linger", linger)
    ingest._filling = ingest_module._Group()
    worker = asyncio.create_task(ingest._work())

    def arrive(count: int) -> list[asyncio.Task[int]]:
        return [
            asyncio.create_task(ingest._on_message(None, "t/x", b"{}", 1, {})) for _ in range(count)
        ]

    try:
        first = arrive(1)
        await asyncio.wait_for(lingering.wait(), 10)  # the worker waits with one message
        later = arrive(4)
        await asyncio.sleep(0)  # the four join the group being filled
        go_on.set()
        assert await asyncio.wait_for(asyncio.gather(*first, *later), 10) == [0] * 5
        assert handled == [5]

        lingering.clear()
        big = arrive(ingest_module.LINGER_BELOW)
        assert await asyncio.wait_for(asyncio.gather(*big), 10) == [0] * len(big)
        assert handled == [5, ingest_module.LINGER_BELOW] and not lingering.is_set()
    finally:
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)


async def test_messages_keep_their_hmac_device_signatures_hold_and_bad_clocks_are_quarantined(
    make_registry: RegistryFactory, mqtt_settings: dict[str, Any], publisher: mqtt.Client
) -> None:
    """Over MQTT, on both backends: a message's HMAC is kept with its readings (the bytes as
    received, checkable again); a device with an enrolled key must add its Ed25519
    signature; a reading stamped 1970 is quarantined, never stored as data."""
    registry = await make_registry(**mqtt_settings)
    platform = registry.platform
    await subscribed(platform.mqtt)
    farm = await build_farm(registry)
    stove, keyed = await farm.stove(), await farm.stove()
    prefix = mqtt_settings["mqtt_topic_prefix"]
    body = reading(1)
    body["readings"].append({"seq": 2, "time": "1970-01-01T00:00:00Z", "values": {"energyKwh": 1}})
    publish(publisher, prefix, stove, farm.tokens[stove], body)
    await until(lambda: _equals(readings_of(farm, stove), 1))
    export = (await registry.client.get(f"/v1/domains/{stove}/telemetry")).json()
    (item,) = export["items"]
    (signature,) = export["receipts"][str(item["receipt"])]["signatures"]
    payload = export["receipts"][str(item["receipt"])]["payload"].encode()
    assert signature["type"] == "hmac-sha256"
    assert signature["deviceToken"] == farm.tokens[stove].split("_")[1]
    assert signature["value"] == sign(farm.tokens[stove], payload)
    quarantine = (await registry.client.get(f"/v1/domains/{stove}/telemetry/quarantine")).json()
    assert [(q["seq"], q["reason"]) for q in quarantine["items"]] == [
        (2, "too long before its receipt time")
    ]
    assert quarantine["items"][0]["receipt"] == item["receipt"]
    # A device with a key: a message without its signature is dropped, one with it kept.
    seed = bytes(range(32))
    enrolled = await registry.client.post(
        f"/v1/domains/{keyed}/device-key", json={"publicKey": device_public_key(seed)}
    )
    assert enrolled.status_code == 200, enrolled.text
    publish(publisher, prefix, keyed, farm.tokens[keyed], reading(1))
    await until(lambda: _true(platform.mqtt.dropped >= 1))
    signed = reading(2)
    payload = json.dumps(signed).encode()
    properties = Properties(PacketTypes.PUBLISH)
    properties.UserProperty = device_properties(
        farm.tokens[keyed], payload, sign_batch(seed, signed)
    )
    publisher.publish(
        topic_for(prefix, keyed), payload, qos=1, properties=properties
    ).wait_for_publish(5)
    await until(lambda: _equals(readings_of(farm, keyed), 1))
    export = (await registry.client.get(f"/v1/domains/{keyed}/telemetry")).json()
    assert [item["seq"] for item in export["items"]] == [2]
    receipt = export["receipts"][str(export["items"][0]["receipt"])]
    kinds = {s["type"] for s in receipt["signatures"]}
    assert kinds == {"hmac-sha256", "ed25519-jcs"}


async def test_a_reading_the_database_could_not_hold_is_refused_alone(
    make_registry: RegistryFactory, mqtt_settings: dict[str, Any], publisher: mqtt.Client
) -> None:
    """Issue 31 §1 over MQTT: with no past limit on clocks, a reading dated 0001-01-01
    reached PostgreSQL's partitions as a data error, and a data error was retried as an
    outage. Now it is refused alone, with its reason, beside its batch's good reading, and
    the ingestion goes on."""
    registry = await make_registry(**mqtt_settings, telemetry_past_skew_days=0)
    platform = registry.platform
    await subscribed(platform.mqtt)
    farm = await build_farm(registry)
    stove = await farm.stove()
    prefix = mqtt_settings["mqtt_topic_prefix"]
    good = reading(1)["readings"][0]
    year_one = {"seq": 2, "time": "0001-01-01T00:00:00Z", "values": {"energyKwh": 0.25}}
    far = {"seq": 3, "time": "9999-12-31T23:59:59-13:00", "values": {"energyKwh": 0.25}}
    publish(publisher, prefix, stove, farm.tokens[stove], {"readings": [good, year_one, far]})
    await until(lambda: _equals(readings_of(farm, stove), 1))
    listed = (await registry.client.get("/v1/telemetry/rejections")).json()
    reasons = [item["reason"] for item in listed["items"] if item["source"] == "mqtt"]
    assert any("readings[1].time" in r and "1970 to 2099" in r for r in reasons), reasons
    assert any("readings[2].time" in r for r in reasons), reasons
    assert platform.mqtt.retries == 0 and platform.database.healthy
    publish(publisher, prefix, stove, farm.tokens[stove], reading(4))
    await until(lambda: _equals(readings_of(farm, stove), 2))


async def test_a_devices_messages_checked_together_keep_their_own_verdicts(
    make_registry: RegistryFactory, mqtt_settings: dict[str, Any], publisher: mqtt.Client
) -> None:
    """A group's messages of one device are checked in one pass (prepare_many); each
    message still gets its own verdict: a bad reading is named by its place in its own
    message, a message with no valid reading is refused alone, and the others' readings
    are stored."""
    registry = await make_registry(**mqtt_settings)
    await subscribed(registry.platform.mqtt)
    farm = await build_farm(registry)
    stove = await farm.stove()
    prefix, token = mqtt_settings["mqtt_topic_prefix"], farm.tokens[stove]
    now = datetime.now(UTC)

    def one(seq: int, value: Any) -> dict[str, Any]:
        return {"seq": seq, "time": at(now, -seq), "values": {"energyKwh": value}}

    bodies = [
        {"readings": [one(1, 0.25)]},
        {"readings": [one(2, 0.5), one(3, "hot"), one(4, 0.75)]},
        {"readings": [one(5, -1)]},  # below the protocol's minimum: nothing valid
        {"readings": [one(6, 1.0)]},
    ]
    for body in bodies:  # back to back: they usually arrive in one group
        publish(publisher, prefix, stove, token, body)
    await until(lambda: _equals(readings_of(farm, stove), 4))

    async def listed() -> list[str]:
        page = (await registry.client.get("/v1/telemetry/rejections")).json()
        items = page["items"]
        return [i["reason"] for i in items if i["source"] == "mqtt" and i["device"] == stove]

    await until(lambda: _has(listed, 2), what=lambda: "two rejections listed")
    reasons = await listed()
    assert any("readings[1].values.energyKwh" in r for r in reasons), reasons
    assert any("readings[0].values.energyKwh" in r for r in reasons), reasons
    history = (await registry.client.get(f"/v1/domains/{stove}/telemetry")).json()
    assert sorted(item["seq"] for item in history["items"]) == [1, 2, 4, 6]


async def _has(listed: Callable[[], Awaitable[list[str]]], count: int) -> bool:
    return len(await listed()) >= count
