"""The `twinhub` command as operators run it, on real databases: `serve` as real processes on
real ports, the one-shot commands in this process (tests/support/cli.py)."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from alembic.script import ScriptDirectory

from tests.conftest import free_port, fresh_postgres_database
from tests.support.cli import TWINHUB, base_env, run_cli, run_process
from twinhub.db.engine import create_engine
from twinhub.db.migrate import alembic_config, schema_revisions
from twinhub.platform import Platform
from twinhub.security.pins import DEV_KEY_FILE
from twinhub.settings import Settings

HEAD = ScriptDirectory.from_config(alembic_config()).get_current_head()


def wait_healthy(url: str, process: subprocess.Popen[str], deadline: float = 90) -> httpx.Response:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if process.poll() is not None:
            raise AssertionError(
                f"server exited early: {process.stderr.read() if process.stderr else ''}"
            )
        try:
            return httpx.get(url, timeout=1)
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError("server did not come up")


def wait_upstream_serving(url: str, process: subprocess.Popen[str], deadline: float = 60) -> None:
    """Wait until the gateway at `url` reports its gRPC upstream as serving: its channel
    connects after the gateway itself answers, later still on a loaded machine."""
    end = time.monotonic() + deadline
    upstream = None
    while time.monotonic() < end:
        upstream = wait_healthy(f"{url}/health", process).json()["upstream"]
        if upstream == "serving":
            return
        time.sleep(0.2)
    raise AssertionError(f"the gateway's upstream stayed {upstream!r}")


def test_serve_runs_every_interface(tmp_path: Path) -> None:
    ussd_port, registry_port = free_port(), free_port()
    node_port, gateway_port = free_port(), free_port()
    key = secrets.token_hex(24)
    process = subprocess.Popen(
        [
            *TWINHUB,
            "serve",
            "--port",
            str(ussd_port),
            "--registry-port",
            str(registry_port),
            "--node-port",
            str(node_port),
            "--gateway-port",
            str(gateway_port),
        ],
        env={**os.environ, **base_env(tmp_path), "TWINHUB_BOOTSTRAP_API_KEY": key},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_healthy(f"http://127.0.0.1:{ussd_port}/health", process).status_code == 200
        registry = f"http://127.0.0.1:{registry_port}"
        assert wait_healthy(f"{registry}/health", process).status_code == 200
        listed = httpx.get(f"{registry}/v1/protocols", headers={"Authorization": f"Bearer {key}"})
        assert listed.status_code == 200
        assert listed.json()["total"] >= 1  # the built-in protocols
        gateway = f"http://127.0.0.1:{gateway_port}"
        wait_upstream_serving(gateway, process)
        params = httpx.get(f"{gateway}/ixo/token/params")
        assert params.json() == {"params": {"ixo1155_contract_code": "0"}}
        assert int(params.headers["x-cosmos-block-height"]) >= 1
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
    assert process.returncode == 0, stderr
    assert key not in stderr


def test_serve_registry_alone(tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [*TWINHUB, "serve", "registry", "--port", str(port)],
        env={**os.environ, **base_env(tmp_path), "HTTP_KEEP_ALIVE_SECONDS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        root = wait_healthy(f"http://127.0.0.1:{port}/", process).json()
        assert "registry" in root["message"]
        assert httpx.get(f"http://127.0.0.1:{port}/docs").status_code == 200
        # HTTP_KEEP_ALIVE_SECONDS reaches the server: an idle connection is closed after
        # about 1 s, where uvicorn's own default would keep it for 5.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            conn.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
            started = time.monotonic()
            received = b""
            while chunk := conn.recv(65536):
                received += chunk
            assert received.startswith(b"HTTP/1.1 200")
            assert time.monotonic() - started < 4
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
    assert process.returncode == 0
    # A server logs (a one-shot command shows its result instead, its logs at --verbose).
    assert "platform started" in stderr


def test_serve_node_and_a_gateway_fronting_it(tmp_path: Path) -> None:
    """`serve node` alone, and `serve gateway --grpc-upstream` learning its routes from it
    by reflection, without a database of its own."""
    node_port, gateway_port = free_port(), free_port()
    node = subprocess.Popen(
        [*TWINHUB, "serve", "node", "--port", str(node_port)],
        env={**os.environ, **base_env(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    gateway_dir = tmp_path / "gateway"
    gateway = subprocess.Popen(
        [
            *TWINHUB,
            "serve",
            "gateway",
            "--port",
            str(gateway_port),
            "--grpc-upstream",
            f"127.0.0.1:{node_port}",
        ],
        env={**os.environ, **base_env(gateway_dir), "GATEWAY_ROUTE_PREFIX": "chain"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{gateway_port}"
        end = time.monotonic() + 30
        while wait_healthy(f"{url}/health", gateway).status_code != 200:
            assert time.monotonic() < end, "the gateway never saw the node"
            time.sleep(0.2)
        params = httpx.get(f"{url}/chain/claims/params")
        assert params.status_code == 200, params.text
        assert params.json()["params"]["node_fee_percentage"] == "0.000000000000000000"
        assert not (gateway_dir / "data" / "twinhub.db").exists()
    finally:
        for process in (gateway, node):
            process.send_signal(signal.SIGTERM)
        outputs = [process.communicate(timeout=20) for process in (gateway, node)]
    assert gateway.returncode == 0, outputs[0][1]
    assert node.returncode == 0, outputs[1][1]
    assert '"source": "reflection"' in outputs[0][1]


def test_a_busy_node_port_stops_the_start_with_exit_code_3(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_process("serve", "node", "--port", str(port), env=base_env(tmp_path))
    assert result.returncode == 3, result.stderr
    assert "NODE_PORT" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("command", [["serve", "ussd"]])
def test_serve_runs_the_gateway_and_stops_on_sigterm(tmp_path: Path, command: list[str]) -> None:
    port = free_port()
    process = subprocess.Popen(
        [*TWINHUB, *command, "--host", "127.0.0.1", "--port", str(port)],
        env={**os.environ, **base_env(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        health = wait_healthy(f"http://127.0.0.1:{port}/health", process)
        assert health.status_code == 200
        assert health.json()["database"] == "connected"
        reply = httpx.post(
            f"http://127.0.0.1:{port}/api/ussd",
            data={
                "sessionId": "s",
                "serviceCode": "*384#",
                "phoneNumber": "+254712345678",
                "text": "",
            },
        )
        assert reply.text.startswith("CON Welcome to twinhub")
        assert (tmp_path / "data" / "twinhub.db").exists()
        key_file = tmp_path / "data" / DEV_KEY_FILE
        assert key_file.stat().st_mode & 0o777 == 0o600
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
    assert process.returncode == 0, stderr
    assert "generated a development key for PIN_ENCRYPTION_KEY" in stderr
    assert key_file.read_text().strip() not in stderr  # the key itself is never logged


def test_port_environment_variable_sets_the_ussd_port(tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [*TWINHUB, "serve", "ussd"],
        env={**os.environ, **base_env(tmp_path), "PORT": str(port)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_healthy(f"http://127.0.0.1:{port}/", process).json()["status"] == "ok"
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=20)
    assert process.returncode == 0


def test_production_refuses_to_start_without_pin_key(tmp_path: Path) -> None:
    result = run_cli("serve", env={**base_env(tmp_path), "ENVIRONMENT": "production"})
    assert result.returncode == 2
    assert "PIN_ENCRYPTION_KEY is required in production" in result.stderr
    assert not (tmp_path / "data" / DEV_KEY_FILE).exists()


def test_malformed_pin_key_is_refused_without_echoing_it(tmp_path: Path) -> None:
    result = run_cli("serve", env={**base_env(tmp_path), "PIN_ENCRYPTION_KEY": "zz" * 32})
    assert result.returncode == 2
    said = " ".join(result.stderr.split())  # the console may wrap long lines
    assert "PIN_ENCRYPTION_KEY" in said and "64 hexadecimal" in said
    assert "zz" * 32 not in result.stderr


def test_bad_setting_is_reported_by_name(tmp_path: Path) -> None:
    result = run_cli("serve", env={**base_env(tmp_path), "USSD_RATE_LIMIT": "lots"})
    assert result.returncode == 2
    assert "USSD_RATE_LIMIT" in result.stderr


def test_config_masks_secrets(tmp_path: Path) -> None:
    key = secrets.token_hex(32)
    result = run_cli(
        "config",
        env={**base_env(tmp_path), "PIN_ENCRYPTION_KEY": key, "USSD_OPERATOR_TOKEN": "tok-123"},
    )
    assert result.returncode == 0, result.stderr
    assert "PIN_ENCRYPTION_KEY=********" in result.stdout
    assert key not in result.stdout and "tok-123" not in result.stdout
    assert "USSD_RATE_LIMIT=100/minute" in result.stdout


async def test_development_key_is_reused_across_restarts(tmp_path: Path) -> None:
    settings = Settings(environment="test", data_dir=tmp_path)
    first = Platform(settings)
    second = Platform(settings)
    try:
        ciphertext = first.pin_cipher.encrypt("58213", "ctx")
        assert second.pin_cipher.matches(ciphertext, "58213", "ctx")
    finally:
        await first.engine.dispose()
        await second.engine.dispose()


def test_migrate_on_sqlite(tmp_path: Path) -> None:
    result = run_cli("migrate", env=base_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert f"database at revision {HEAD}" in result.stderr
    again = run_cli("migrate", env=base_env(tmp_path))
    assert f"database at revision {HEAD}; newest is {HEAD}" in again.stderr


async def test_migrate_on_a_fresh_postgresql_database(tmp_path: Path) -> None:
    async with fresh_postgres_database("migrate", empty=True) as url:
        env = {**base_env(tmp_path), "DATABASE_URL": url}
        # Two migrators at once: the advisory lock makes them take turns.
        results = await asyncio.gather(
            asyncio.to_thread(run_process, "migrate", env=env),
            asyncio.to_thread(run_process, "migrate", env=env),
        )
        assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
        engine = create_engine(Settings(database_url=url, data_dir=tmp_path).storage)
        try:
            assert await schema_revisions(engine) == (HEAD, HEAD)
        finally:
            await engine.dispose()


def test_unlock_a_locked_customer(tmp_path: Path) -> None:
    env = {**base_env(tmp_path), "PIN_ENCRYPTION_KEY": secrets.token_hex(32)}

    async def locked_customer() -> str:
        platform = Platform(
            Settings(data_dir=tmp_path / "data", pin_encryption_key=env["PIN_ENCRYPTION_KEY"])
        )
        await platform.start()
        try:
            customer = await platform.customers.create("+254700000001", "Amina Otieno", "58213")
            for _ in range(3):
                await platform.customers.login(customer.customer_id, "60719", "+254700000001")
            keys = {lock.key for lock in await platform.customers.lockouts()}
            assert f"own:{customer.customer_id}" in keys
            return customer.customer_id
        finally:
            await platform.stop()

    customer_id = asyncio.run(locked_customer())
    result = run_cli("ussd", "unlock", customer_id, env=env)
    assert result.returncode == 0, result.stderr
    assert f"customer {customer_id} unlocked" in result.stdout  # what it did, and only that
    assert result.stderr == ""  # no log lines from a one-shot command without --verbose

    async def login_works() -> bool:
        platform = Platform(
            Settings(data_dir=tmp_path / "data", pin_encryption_key=env["PIN_ENCRYPTION_KEY"])
        )
        await platform.start()
        try:
            return (await platform.customers.login(customer_id, "58213")).outcome.value == "ok"
        finally:
            await platform.stop()

    assert asyncio.run(login_works())
    missing = run_cli("ussd", "unlock", "10000009", env=env)
    assert missing.returncode == 1
