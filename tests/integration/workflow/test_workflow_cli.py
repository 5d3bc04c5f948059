"""The workflow's commands against a running registry: `twinhub period verify` and `issue`
sign with a key file and post; a refused step exits 1 with the API's reason."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path

import orjson

from tests.conftest import BOOTSTRAP_KEY, free_port, running_registry
from tests.integration.cli.test_cli import wait_healthy
from tests.support.cli import TWINHUB, base_env, run_cli
from tests.support.workflow_world import build_workflow
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
            submitted = await flow.step(flow.proponent, period, "submission", "submit")
            assert submitted.status_code == 200, submitted.text
            keys = {}
            for name, actor in (("verifier", flow.verifier), ("registry", flow.registry)):
                file = tmp_path / f"{name}.key"
                file.write_bytes(orjson.dumps({"did": actor.did, "seed": actor.seed.hex()}))
                keys[name] = str(file)
                keys[f"{name}-api"] = await registry.key(actor.did, name, "reader")
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
        assert wrong.returncode == 1 and "registry role" in wrong.stderr
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=20)
