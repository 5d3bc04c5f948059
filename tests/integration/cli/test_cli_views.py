"""The command line's views of a programme, on the demo's: stoves, claims, monitoring
periods, webhooks, device tokens and API keys, as tables for people and as JSON for
scripts; a one-shot command shows its result, and its log lines only with --verbose."""

from __future__ import annotations

import re
from pathlib import Path

import orjson

from tests.support.cli import base_env, run_cli
from twinhub import demo
from twinhub.kernel.principals import Principal
from twinhub.platform import Platform
from twinhub.settings import Settings

STOVES = 3


def as_json(*args: str, env: dict[str, str]) -> object:
    result = run_cli(*args, "--json", env=env)
    assert result.returncode == 0, result.stderr
    return orjson.loads(result.stdout)


def column(table: str, index: int) -> str:
    """The cells of a rich table's column `index`, joined: a folded cell reads whole."""
    cells = [line.split("│")[index].strip() for line in table.splitlines() if "│" in line]
    return "".join(cells)


async def test_the_programme_as_lists_and_records(tmp_path: Path) -> None:
    env = base_env(tmp_path)
    loaded = run_cli("demo", "--stoves", str(STOVES), env=env, timeout=180)
    assert loaded.returncode == 0, loaded.stderr
    assert "registry write" not in loaded.stderr and "platform started" not in loaded.stderr

    first, last = demo.telemetry_month()
    stove = "did:ixo:entity/demo-stove-0002"
    settings = Settings(
        data_dir=tmp_path / "data", environment="test", webhook_allow_private_networks=True
    )
    platform = Platform(settings)
    await platform.start()
    try:
        customer = (await platform.domains.get(stove))["properties"]["ownerCustomerId"]
        claim = await platform.stoves.report(customer, stove, "cooking", 12)
        admin = Principal("did:ixo:org/test-admin", frozenset({"admin"}))
        hook = await platform.events.webhooks.create(
            "http://127.0.0.1:9/hook", ["claim.submitted"], "ops board", admin
        )
        await platform.monitoring.run(demo.PROJECT, first, last, admin)
    finally:
        await platform.stop()

    # Stoves: the whole records for scripts, a table for people.
    stoves = as_json("stoves", "list", env=env)
    assert isinstance(stoves, list) and len(stoves) == STOVES
    assert {s["did"] for s in stoves} == {f"did:ixo:entity/demo-stove-{n:04d}" for n in (1, 2, 3)}
    assert all(s["verified"] and s["project"] == demo.PROJECT for s in stoves)
    only = as_json("stoves", "list", "--customer", customer, env=env)
    assert [s["did"] for s in only] == [stove]
    table = run_cli("stoves", "list", "--limit", "2", env=env | {"COLUMNS": "200"})
    assert table.returncode == 0 and "EPC 001" in table.stdout and "EPC 003" not in table.stdout
    assert "2 stoves shown; there are more" in table.stderr
    # Nothing but the command's own words on standard error: no log lines...
    assert table.stderr.strip() == "2 stoves shown; there are more (raise --limit)"
    # ...unless asked for.
    verbose = run_cli("--verbose", "stoves", "list", env=env)
    assert "platform started" in verbose.stderr

    shown = as_json("stoves", "show", stove, env=env)
    assert shown["stove"]["did"] == stove and shown["telemetry"]["readings"] > 0
    # The demo ran once here: its meter has one active device token.
    assert [t["revokedAt"] for t in shown["deviceTokens"]] == [None]
    said = run_cli("stoves", "show", stove, env=env).stdout
    assert f"stove {stove}: EPC 002" in said and "1 active of 1" in said

    # Claims.
    claims = as_json("claims", "list", "--stove", stove, env=env)
    assert [c["id"] for c in claims] == [claim["id"]]
    assert as_json("claims", "list", "--status", "rejected", env=env) == []
    one = as_json("claims", "show", claim["id"], env=env)
    assert one["data"]["mealsCooked"] == 12 and one["asset"] == stove
    said = run_cli("claims", "show", claim["id"], env=env).stdout
    assert f"claim {claim['id']} ({one['status']})" in said and "data.mealsCooked: 12" in said
    unknown = run_cli("claims", "show", "nope", env=env)
    assert unknown.returncode == 1 and "No claim" in unknown.stderr

    # Monitoring periods.
    periods = as_json("period", "list", demo.PROJECT, env=env)
    assert [(p["id"], p["state"], p["from"]) for p in periods] == [
        (periods[0]["id"], "draft", first.isoformat())
    ]
    period = as_json("period", "show", demo.PROJECT, str(periods[0]["id"]), env=env)
    assert period["to"] == last.isoformat() and period["project"] == demo.PROJECT

    # Webhooks, never with their secrets.
    hooks = as_json("webhooks", "list", env=env)
    assert [(h["id"], h["events"]) for h in hooks] == [(hook["id"], ["claim.submitted"])]
    listed = run_cli("webhooks", "list", env=env | {"COLUMNS": "200"})
    assert hook["secret"] not in listed.stdout and "ops board" in listed.stdout
    said = run_cli("webhooks", "show", hook["id"], env=env).stdout
    assert "http://127.0.0.1:9/hook" in said and "deliveries" in said

    device = as_json("devices", "show", stove, env=env)
    assert device["device"]["did"] == stove and device["telemetry"] == shown["telemetry"]

    # Device tokens: a revocation says what it did, on standard output.
    [token] = as_json("devices", "list", stove, env=env)
    revoked = run_cli("devices", "revoke", stove, token["id"], env=env)
    assert revoked.returncode == 0 and f"device token {token['id']} of {stove} revoked" in (
        revoked.stdout
    )

    # API keys: each owner whole, folded over lines in a narrow terminal, never cut.
    keys = as_json("keys", "list", env=env)
    owners = {k["principal"] for k in keys}
    assert any(owner.startswith("did:key:") for owner in owners)
    narrow = run_cli("keys", "list", env=env | {"COLUMNS": "70"})
    assert narrow.returncode == 0, narrow.stderr
    assert "…" not in narrow.stdout
    owner_cells = column(narrow.stdout, 2)
    for owner in owners:
        assert owner in owner_cells
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 70


async def test_demo_twice_leaves_one_active_token_per_meter(tmp_path: Path) -> None:
    env = base_env(tmp_path)
    for _ in range(2):
        result = run_cli("demo", "--stoves", "2", env=env, timeout=180)
        assert result.returncode == 0, result.stderr
        # Its progress and its report; no log line (there were thousands of audit lines).
        assert not re.search(r'"level": ?"(info|warning)"', result.stderr), result.stderr[:500]
    for n in (1, 2):
        tokens = as_json("devices", "list", f"did:ixo:entity/demo-stove-{n:04d}", env=env)
        assert [t["revokedAt"] is None for t in tokens] == [False, True]
