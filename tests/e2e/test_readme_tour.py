"""The README's tour runs as written and ends with credits that came from telemetry through
the verification workflow: a draft, submitted, verified and issued with the demo's role
keys, minted to the proponent, the evidence bundle checked offline, and a month with no
data refused.

Its shell blocks are run in order in one bash, as a reader would paste them, with two
changes only: free ports instead of the default ones, and this interpreter's `twinhub`
instead of the `./dev` launcher (which would install into `.venv`). The README asks the
reader to wait for the health check before dialling; so does this test.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
START, END = "<!-- --8<-- [start:tour] -->", "<!-- --8<-- [end:tour] -->"


def tour_script(ports: dict[int, int]) -> str:
    """The tour's commands, on `ports` (default port -> port used) and this interpreter."""
    readme = (ROOT / "README.md").read_text()
    tour = readme.split(START, 1)[1].split(END, 1)[0]
    script = "\n".join(re.findall(r"```sh\n(.*?)```", tour, re.S))
    for default, port in ports.items():
        script = script.replace(f"localhost:{default}", f"localhost:{port}")
    flags = (
        f"--port {ports[3000]} --registry-port {ports[8000]} "
        f"--node-port {ports[9090]} --gateway-port {ports[1317]}"
    )
    assert "./dev serve &" in script and "./dev demo" in script
    script = script.replace("./dev serve &", f'"$TH" serve {flags} >"$DATA_DIR/serve.log" 2>&1 &')
    script = script.replace("./dev demo", '"$TH" demo').replace(".venv/bin/twinhub", '"$TH"')
    health = (
        f"for _ in $(seq 120); do curl -sf localhost:{ports[8000]}/health >/dev/null && "
        f"curl -sf localhost:{ports[3000]}/health >/dev/null && break; sleep 0.5; done\n"
    )
    first_dial = f"curl -s localhost:{ports[3000]}/api/ussd"
    assert first_dial in script
    return script.replace(first_dial, health + first_dial, 1)


def test_the_readme_tour_ends_with_credits_from_telemetry(tmp_path: Path) -> None:
    missing = [tool for tool in ("bash", "curl", "date") if shutil.which(tool) is None]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"the tour needs {missing}")
        pytest.skip(f"the tour needs {missing}")
    ports = {default: free_port() for default in (3000, 8000, 9090, 1317)}
    script = tour_script(ports)
    twinhub = f"{shlex.quote(sys.executable)} -m twinhub"
    # Whatever happens, the server is stopped and the scratch folder removed.
    cleanup = "trap 'kill $(jobs -p) 2>/dev/null; wait; rm -rf \"${DATA_DIR:-}\"' EXIT\n"
    wrapper = "set -u\n" + cleanup + script.replace('"$TH"', twinhub) + "\n"

    env = {k: v for k, v in os.environ.items() if k != "DATA_DIR" and k != "DATABASE_URL"}
    done = subprocess.run(
        ["bash", "-c", wrapper],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = done.stdout
    both = out + done.stderr
    assert done.returncode == 0, out + done.stderr[-4000:]
    assert "demo programme ready" in out
    assert "CON Welcome to twinhub" in out
    assert "validated: True" in out  # the design document, validated by the verifier
    assert '"householdSize":{"value":' in out  # the survey's sampled household size
    draft = re.search(
        r'"state":"draft".*?"credits":\{"token":"CARBON","decimals":6,"amount":(\d+)\}', out
    )
    assert draft, out
    amount = int(draft.group(1))
    assert amount > 0  # computed from the stoves' metered telemetry
    assert re.search(r'"totals":\{"stoves":20,"included":(1\d|20),', out), out
    # Submitted, verified, issued with the role keys: the CLI prints each step's period.
    states = re.findall(r'"state": "(\w+)"', out)
    assert states[:3] == ["submitted", "verified", "issued"], states
    issued = out.split('"state": "issued"', 1)[1]
    assert re.search(rf'"amount": {amount}\b', issued), issued[:2000]
    assert "the evidence checks: signatures, digests and every credit" in both
    # Minted by issuance, to the proponent (a did:key), exactly the draft's amount.
    balance = re.search(r'\{"holder":"(did:key:[^"]+)","balances":\[(.*?)\]', out)
    assert balance, out
    assert f'"token":"CARBON","amount":{amount},' in balance.group(2)
    # A month with no data: a draft crediting nothing, whose submission is refused.
    assert re.search(r'"id":2,.*?"amount":0\}.*?"included":0,', out), out
    assert "includes no stove" in both and "refused" in out
    worked_example(tmp_path / "bundle.json")


def shape(line: str) -> str:
    """A line of `verify-evidence` with its digests, dates and numbers blanked: what the
    verifier's worked example shows whatever the month it was run in."""
    line = re.sub(r"sha256:[0-9a-f]+(…)?", "sha256:H", line)
    line = re.sub(r"\d{4}-\d{2}-\d{2}", "D", line)
    line = re.sub(r"\{'token': 'CARBON', 'decimals': 6, 'amount': \d+\}", "{C}", line)
    line = re.sub(r"\{\.\.\. \d+\}", "{C}", line)  # the page abbreviates the same
    return re.sub(r"-?\d+(\.\d+)?", "N", line)


def documented(after: str) -> list[str]:
    """The output block that follows `after` in docs/roles/verifier.md, line by line."""
    page = (ROOT / "docs" / "roles" / "verifier.md").read_text()
    block = re.search(r"```\n(.*?)```", page.split(after, 1)[1], re.S)
    assert block, after
    return [shape(line) for line in block.group(1).strip().splitlines()]


def worked_example(saved: Path) -> None:
    """docs/roles/verifier.md's worked example on the tour's own bundle: a raised meter
    reading and doubled credits, each named as the page shows them, exit 1."""
    bundle = json.loads(saved.read_text())
    raised = copy.deepcopy(bundle)
    first = next(
        r for r in raised["readings"]["did:ixo:entity/demo-stove-0001"] if "meterKwh" in r["values"]
    )
    first["values"]["meterKwh"] += 5
    doubled = copy.deepcopy(bundle)
    doubled["report"]["credits"]["amount"] *= 2
    for changed, after in ((raised, "Raise the first meter reading"), (doubled, "Double the")):
        saved.write_text(json.dumps(changed))
        nowhere = {"DATA_DIR": str(saved.parent / "nowhere")}  # it reads the file alone
        checked = run_cli("oracle", "verify-evidence", str(saved), env=nowhere)
        assert checked.returncode == 1, checked.stdout + checked.stderr
        lines = (checked.stdout + checked.stderr).strip().splitlines()
        assert [shape(line) for line in lines] == documented(after), lines
