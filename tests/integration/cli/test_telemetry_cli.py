"""The telemetry commands (issue 12, points 1 and 8): `twinhub devices ...`, `twinhub
simulate` over HTTP and MQTT, and the numbers it leaves behind."""

from __future__ import annotations

import secrets
import socket
from pathlib import Path

from tests.conftest import unavailable
from tests.support.cli import base_env, run_cli, run_process
from twinhub import simulator
from twinhub.platform import Platform
from twinhub.settings import Settings


async def test_devices_commands_enrol_list_rotate_and_revoke(tmp_path: Path) -> None:
    env = base_env(tmp_path)
    made = run_cli("simulate", "--stoves", "1", "--days", "1", env=env, timeout=120)
    assert made.returncode == 0, made.stderr
    stove = "did:ixo:entity/sim-stove-00001"
    created = run_cli("devices", "create", stove, "--label", "board 7", env=env)
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    assert token.startswith("thd_") and token not in created.stderr
    token_id = token.split("_")[1]
    listed = run_cli("devices", "list", stove, env=env)
    assert token_id in listed.stdout and "board 7" in listed.stdout
    assert token.split("_", 2)[2] not in listed.stdout  # the secret (may hold "_") never shows
    rotated = run_cli("devices", "rotate", stove, token_id, env=env)
    assert rotated.returncode == 0, rotated.stderr
    successor = rotated.stdout.strip()
    assert successor.startswith("thd_") and successor != token
    revoked = run_cli("devices", "revoke", stove, successor.split("_")[1], env=env)
    assert revoked.returncode == 0, revoked.stderr
    listed = run_cli("devices", "list", stove, env=env).stdout
    assert listed.count("revoked") == 2
    platform = Platform(Settings(data_dir=tmp_path / "data", environment="test"))
    await platform.start()
    try:
        assert await platform.device_tokens.authenticate(token) is None
        assert await platform.device_tokens.authenticate(successor) is None
    finally:
        await platform.stop()
    missing = run_cli("devices", "create", "did:ixo:entity/nothing", env=env)
    assert missing.returncode == 1 and "No domain" in missing.stderr
    project = run_cli("devices", "create", simulator.SIM_PROJECT, env=env)
    assert project.returncode == 1 and "physical" in project.stderr


async def test_simulate_over_http_then_mqtt_stores_each_reading_once(tmp_path: Path) -> None:
    env = base_env(tmp_path)
    first = run_cli("simulate", "--stoves", "12", "--days", "10", env=env, timeout=180)
    assert first.returncode == 0, first.stderr
    assert "0 failed" in first.stdout
    platform = Platform(Settings(data_dir=tmp_path / "data", environment="test"))
    await platform.start()
    try:
        stored = 0
        for n in range(1, 13):
            state = await platform.telemetry.state(f"did:ixo:entity/sim-stove-{n:05d}")
            stored += state["readings"]
        project = await platform.telemetry.aggregates(simulator.SIM_PROJECT, "month", None, None)
        counted = sum(b["fields"]["batteryPct"]["count"] for b in project["buckets"])
    finally:
        await platform.stop()
    assert f"{stored} readings stored" in first.stdout
    assert counted == 12 * 10  # one battery report per stove-day, summed over the project
    # Stove 7 (of 50) has a faulty meter; stove 3 was offline and sent late; batches twice.
    assert " 0 rejected" not in first.stdout and " 0 duplicates" not in first.stdout
    try:
        socket.create_connection(("127.0.0.1", 1883), timeout=2).close()
    except OSError as error:
        unavailable("Mosquitto", error)
    mqtt_env = {
        **env,
        "MQTT_URL": "mqtt://127.0.0.1:1883",
        "MQTT_TOPIC_PREFIX": f"twinhub-sim/{secrets.token_hex(4)}",
    }
    again = run_cli(
        "simulate", "--stoves", "12", "--days", "10", "--mqtt", env=mqtt_env, timeout=180
    )
    assert again.returncode == 0, again.stderr
    assert "0 readings stored" in again.stdout and "0 failed" in again.stdout


def test_simulate_over_mqtt_twice_ends_each_time(tmp_path: Path) -> None:
    """Each run's subscriber has a clean session of its own: a second run (a process of its
    own) finds no session of the first still subscribed to the shared group and taking a
    share of its messages (before: the second run waited for them, 600 s)."""
    try:
        socket.create_connection(("127.0.0.1", 1883), timeout=2).close()
    except OSError as error:
        unavailable("Mosquitto", error)
    env = {
        **base_env(tmp_path),
        "MQTT_URL": "mqtt://127.0.0.1:1883",
        "MQTT_TOPIC_PREFIX": f"twinhub-sim/{secrets.token_hex(4)}",
    }
    for run in ("first", "second"):
        done = run_process(
            "simulate", "--stoves", "3", "--days", "2", "--mqtt", env=env, timeout=90
        )
        assert done.returncode == 0, f"{run}: {done.stderr[-2000:]}"
        assert " 0 failed" in done.stdout, f"{run}: {done.stdout}"
