"""The workflow's commands against a running registry: `twinhub period verify` and `issue`
sign with a key file and post; a refused step exits 1 with the API's reason."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import orjson

from tests.conftest import BOOTSTRAP_KEY, free_port, running_registry
from tests.integration.cli.test_cli import wait_healthy
from tests.support.cli import TWINHUB, base_env, run_cli
from tests.support.workflow_world import Actor, accredit, actor, build_workflow
from twinhub.security.signing import Issuer
from twinhub.settings import Settings


def test_period_steps_from_the_command_line(tmp_path: Path) -> None:
    env = {**base_env(tmp_path), "PIN_ENCRYPTION_KEY": "cd" * 32}
    env["TWINHUB_BOOTSTRAP_API_KEY"] = BOOTSTRAP_KEY
    settings = Settings(
        environment="test",
        data_dir=Path(env["DATA_DIR"]),
        pin_encryption_key=env["PIN_ENCRYPTION_KEY"],
        log_level="warning",
        twinhub_bootstrap_api_key=BOOTSTRAP_KEY,
        oracle_enabled=False,
    )

    async def build() -> dict[str, str]:
        async with running_registry(settings) as registry:
            flow = await build_workflow(registry)
            stove = await flow.stove()
            period = (await flow.draft())["id"]
            # A verifier the registry never accredited for this project.
            stranger = await actor(registry, flow.world, "verifier")
            keys = {}
            for name, role, who in (
                ("proponent", "proponent", flow.proponent),
                ("verifier", "verifier", flow.verifier),
                ("registry", "registry", flow.registry),
                ("stranger", "verifier", stranger),
            ):
                file = tmp_path / f"{name}.key"
                file.write_bytes(orjson.dumps({"did": who.did, "seed": who.seed.hex()}))
                keys[name] = str(file)
                keys[f"{name}-api"] = await registry.key(who.did, role, "reader")
            # The proponent's own key, also given the verifier role and accredited.
            both = Actor(
                flow.proponent.key, await flow.world.client(flow.proponent.did, "verifier")
            )
            await accredit(flow, both, flow.project)
            keys["own-api"] = await registry.key(flow.proponent.did, "verifier", "reader")
            await flow.world.close()
            return {"project": flow.project, "period": str(period), "stove": stove, **keys}

    made = asyncio.run(build())
    port = free_port()
    server = subprocess.Popen(
        [*TWINHUB, "serve", "registry", "--port", str(port)],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_healthy(f"http://127.0.0.1:{port}/", server)
        url = {**env, "TWINHUB_URL": f"http://127.0.0.1:{port}"}
        step = (made["project"], made["period"])

        def as_role(name: str, *command: str) -> Any:
            key = ("--key", made[name])
            return run_cli(
                *command, *step, *key, env={**url, "TWINHUB_API_KEY": made[f"{name}-api"]}
            )

        # Issue 29's bad input, each refused by the API: one line, exit 1, nothing changed.
        early = as_role("registry", "period", "issue")
        assert early.returncode == 1 and "only a verified period" in _one_line(early)
        submitted = as_role("proponent", "period", "submit")
        assert submitted.returncode == 0, submitted.stderr
        assert orjson.loads(submitted.stdout)["state"] == "submitted"
        again = as_role("proponent", "period", "submit")
        assert again.returncode == 1 and "submitted" in _one_line(again)
        stranger = as_role(
            "stranger", "period", "verify", "--outcome", "approved", "--sample", made["stove"]
        )
        assert stranger.returncode == 1 and "not accredited" in _one_line(stranger)
        own = run_cli(
            "period",
            "verify",
            *step,
            "--key",
            made["proponent"],
            "--outcome",
            "approved",
            "--sample",
            made["stove"],
            env={**url, "TWINHUB_API_KEY": made["own-api"]},
        )
        assert own.returncode == 1 and "proponent's own key" in _one_line(own)
        shown = run_cli("period", "show", *step, "--json", env=url)  # from the database
        assert shown.returncode == 0, shown.stderr
        assert orjson.loads(shown.stdout)["state"] == "submitted"
        verified = run_cli(
            "period",
            "verify",
            *step,
            "--key",
            made["verifier"],
            "--outcome",
            "approved",
            "--finding",
            "readings match",
            "--sample",
            made["stove"],
            env={**url, "TWINHUB_API_KEY": made["verifier-api"]},
        )
        assert verified.returncode == 0, verified.stderr
        assert orjson.loads(verified.stdout)["state"] == "verified"
        # The verifier's key file with the registry's API key: said before anything is
        # posted, and nothing issued.
        mixed = run_cli(
            "period",
            "issue",
            *step,
            "--key",
            made["verifier"],
            env={**url, "TWINHUB_API_KEY": made["registry-api"]},
        )
        assert mixed.returncode == 2 and "sign with the key file" in _one_line(mixed)
        issued = run_cli(
            "period",
            "issue",
            *step,
            "--key",
            made["registry"],
            env={**url, "TWINHUB_API_KEY": made["registry-api"]},
        )
        assert issued.returncode == 0, issued.stderr
        assert orjson.loads(issued.stdout)["state"] == "issued"
        assert f"monitoring period {made['period']} of {made['project']} issued" in " ".join(
            issued.stderr.split()
        )  # and what it did, in words
        # The verifier's key cannot issue: refused by the API, said, exit 1.
        wrong = run_cli(
            "period",
            "issue",
            *step,
            "--key",
            made["verifier"],
            env={**url, "TWINHUB_API_KEY": made["verifier-api"]},
        )
        assert wrong.returncode == 1 and "registry role" in _one_line(wrong)
        # A refusal of the step itself (issued already): one line, exit 1, the reason.
        again = run_cli(
            "period",
            "issue",
            *step,
            "--key",
            made["registry"],
            env={**url, "TWINHUB_API_KEY": made["registry-api"]},
        )
        assert again.returncode == 1 and "issued already" in _one_line(again)
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=20)


def _one_line(done: Any) -> str:
    """The command's error: exactly one line on standard error, nothing on standard output."""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and not done.stdout.strip(), (done.stdout, done.stderr)
    return lines[0]


def test_workflow_commands_say_in_one_line_what_is_wrong(tmp_path: Path) -> None:
    """No registry to reach, no key file, a key file that is none, no API key: each said in
    one line, exit 2, before or without anything sent."""
    seed = os.urandom(32)
    key = tmp_path / "verifier.key"
    key.write_bytes(orjson.dumps({"did": Issuer(seed).did, "seed": seed.hex()}))
    nowhere = f"http://127.0.0.1:{free_port()}"  # nobody listens there
    env = {**base_env(tmp_path), "TWINHUB_URL": nowhere, "TWINHUB_API_KEY": "th_" + "x" * 40}
    issue = ("period", "issue", "did:ixo:entity/p", "1")

    unreachable = run_cli(*issue, "--key", str(key), env=env)
    assert unreachable.returncode == 2
    assert f"cannot reach the registry at {nowhere}" in _one_line(unreachable)

    missing = run_cli(*issue, "--key", str(tmp_path / "no.key"), env=env)
    assert missing.returncode == 2
    assert "cannot read the key file" in _one_line(missing) and "no.key" in missing.stderr

    garbage = tmp_path / "garbage.key"
    for content in (b"not json", b'{"seed": "zz"}', b'{"did": "did:key:z6MkOther", "seed": "'):
        garbage.write_bytes(content)
        bad = run_cli(*issue, "--key", str(garbage), env=env)
        assert bad.returncode == 2 and "is not a key file" in _one_line(bad), bad.stderr
    other = tmp_path / "other.key"
    other.write_bytes(orjson.dumps({"did": "did:key:z6MkOther", "seed": seed.hex()}))
    damaged = run_cli(*issue, "--key", str(other), env=env)
    assert damaged.returncode == 2 and "is damaged" in _one_line(damaged)

    no_api_key = run_cli(*issue, "--key", str(key), env={**env, "TWINHUB_API_KEY": ""})
    assert no_api_key.returncode == 2
    assert "no API key" in _one_line(no_api_key) and "TWINHUB_API_KEY" in no_api_key.stderr

    bad_url = run_cli(*issue, "--key", str(key), "--url", "ftp://example.org", env=env)
    assert bad_url.returncode == 2 and "cannot reach the registry" in _one_line(bad_url)
