"""MQTT evidence survives a restart with the default settings (issue 31, point 2).

`twinhub serve` runs as real processes against the real Mosquitto, with nothing MQTT-related
set but the broker's address and a topic prefix of this run. Readings are published before,
during and after a restart of the server; every one must be stored exactly once. Before the
fix the default client id held the process id: the restarted worker opened a new session
while the old one stayed subscribed to the shared group (and so did the supervising
parent's), and the broker handed them a share of the stream nobody would ever read.
"""

from __future__ import annotations

import json
import secrets
import socket
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from tests.conftest import RUN_ID, unavailable
from tests.support.served import serving
from twinhub.settings import Settings
from twinhub.telemetry.bootstrap import mqtt_client_id
from twinhub.telemetry.mqtt import device_properties, topic_for

BROKER = ("127.0.0.1", 1883)
MESSAGES = 400


@pytest.fixture
def broker() -> None:
    try:
        socket.create_connection(BROKER, timeout=2).close()
    except OSError as error:
        unavailable("Mosquitto", error)


def _publisher() -> mqtt.Client:
    client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    client.connect(*BROKER)
    client.loop_start()
    return client


def _publish(client: mqtt.Client, prefix: str, did: str, token: str, seqs: range) -> None:
    base = datetime.now(UTC) - timedelta(hours=2)
    for seq in seqs:
        body = {
            "readings": [
                {
                    "seq": seq,
                    "time": (base + timedelta(seconds=seq)).isoformat(),
                    "values": {"energyKwh": 0.01},
                }
            ]
        }
        payload = json.dumps(body).encode()
        properties = Properties(PacketTypes.PUBLISH)
        properties.UserProperty = device_properties(token, payload)
        client.publish(topic_for(prefix, did), payload, qos=1, properties=properties)
    # Wait for the broker's PUBACK of the last one (paho sends in order).
    client.publish(topic_for(prefix, "did:ixo:none"), b"{}", qos=1).wait_for_publish(10)


def _stove(registry: httpx.Client) -> tuple[str, str]:
    def create(kind: str, cls: str, **extra: object) -> str:
        body = {
            "type": kind,
            "class": f"did:ixo:protocol/{cls}",
            "id": f"{cls}-{secrets.token_hex(4)}",
            "metadata": {"name": kind},
            **extra,
        }
        answer = registry.post("/v1/domains", json=body)
        assert answer.status_code == 201, answer.text
        return str(answer.json()["did"])

    organisation = create("Organisation", "organisation")
    project = create("Project", "project", relationships={"implementedBy": [organisation]})
    stove = create("Device", "clean-cooking", relationships={"project": [project]})
    token = registry.post(f"/v1/domains/{stove}/device-tokens", json={"label": "board"})
    assert token.status_code == 201, token.text
    return stove, str(token.json()["token"])


def _wait_mqtt(registry: httpx.Client) -> None:
    deadline = time.monotonic() + 30
    while registry.get("/health").json().get("mqtt") != "connected":
        assert time.monotonic() < deadline, registry.get("/health").text
        time.sleep(0.1)


def _readings(registry: httpx.Client, did: str, expected: int, seconds: float = 60) -> int:
    deadline = time.monotonic() + seconds
    count = -1
    while time.monotonic() < deadline:
        count = int(registry.get(f"/v1/domains/{did}/state").json()["readings"])
        if count >= expected:
            return count
        time.sleep(0.2)
    return count


def test_a_restart_mid_stream_loses_no_reading_with_the_default_client_id(
    tmp_path: Path, broker: None
) -> None:
    key = secrets.token_urlsafe(32)
    prefix = f"twinhub-test/{RUN_ID}/restart-{secrets.token_hex(3)}"
    env = {
        "TWINHUB_BOOTSTRAP_API_KEY": key,
        "MQTT_URL": f"mqtt://{BROKER[0]}:{BROKER[1]}",
        "MQTT_TOPIC_PREFIX": prefix,
    }
    data = tmp_path / "data"
    headers = {"Authorization": f"Bearer {key}"}
    publisher = _publisher()
    third = MESSAGES // 3
    try:
        with (
            serving(data, **env) as urls,
            httpx.Client(base_url=urls["registry"], headers=headers, timeout=10) as registry,
        ):
            _wait_mqtt(registry)
            did, token = _stove(registry)
            _publish(publisher, prefix, did, token, range(1, third + 1))
            assert _readings(registry, did, third, 30) == third
        # The server is stopped: what is published now waits in the worker's session.
        _publish(publisher, prefix, did, token, range(third + 1, 2 * third + 1))
        with (
            serving(data, **env) as urls,
            httpx.Client(base_url=urls["registry"], headers=headers, timeout=10) as registry,
        ):
            _wait_mqtt(registry)
            _publish(publisher, prefix, did, token, range(2 * third + 1, MESSAGES + 1))
            stored = _readings(registry, did, MESSAGES)
            time.sleep(1.0)  # nothing more arrives later (no reading stored twice)
            assert registry.get(f"/v1/domains/{did}/state").json()["readings"] == stored
        assert stored == MESSAGES, f"{stored} of {MESSAGES} readings stored"
    finally:
        publisher.disconnect()
        publisher.loop_stop()
        _forget_session(data, env)


def _forget_session(data: Path, env: dict[str, str]) -> None:
    """End the worker's persistent session on the shared broker (its id is the one the
    server derives), so the test leaves no subscriber behind."""
    settings = Settings(data_dir=data, **{name.lower(): value for name, value in env.items()})
    client = mqtt.Client(
        CallbackAPIVersion.VERSION2,
        client_id=mqtt_client_id(settings.telemetry, settings.storage, 0),
        protocol=mqtt.MQTTv5,
    )
    properties = Properties(PacketTypes.CONNECT)
    properties.SessionExpiryInterval = 0
    client.connect(*BROKER, clean_start=True, properties=properties)
    client.disconnect()
