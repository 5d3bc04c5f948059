"""`twinhub demo` loads a whole programme through the services, and a second run adds
nothing: the same DIDs, the same customers, one verification, one collection."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import base_env, run_cli
from twinhub import demo
from twinhub.platform import Platform
from twinhub.services.domains import DomainFilter
from twinhub.settings import Settings


async def test_demo_loads_a_programme_and_is_safe_to_run_twice(tmp_path: Path) -> None:
    env = base_env(tmp_path)
    first = run_cli("demo", "--stoves", "7", env=env, timeout=120)
    assert first.returncode == 0, first.stderr
    assert "1 organisation, 1 oracle, 1 project," in first.stdout
    assert "7 customers, 7 stoves" in first.stdout
    assert demo.DEMO_PIN in first.stdout
    second = run_cli("demo", "--stoves", "7", env=env, timeout=120)
    assert second.returncode == 0, second.stderr
    assert "nothing new" in second.stdout
    assert "0 readings stored this run" in second.stdout  # the month of telemetry, once

    platform = Platform(Settings(data_dir=tmp_path / "data", environment="test"))
    await platform.start()
    try:
        project = await platform.domains.get(demo.PROJECT)
        assert project["verified"] is True
        proposals = await platform.governance.proposals_of(demo.PROJECT)
        assert [(p["action"], p["status"]) for p in proposals] == [
            ("verify", "executed"),
            ("verify-batch", "executed"),  # the stoves, once
        ]
        stoves = await platform.domains.list(
            DomainFilter(protocol="did:ixo:protocol/clean-cooking"), None, 100, count=True
        )
        assert stoves.total == 7
        customer = await platform.customers.by_phone(f"{demo.PHONE_PREFIX}00003")
        assert customer is not None
        stove = await platform.domains.get("did:ixo:entity/demo-stove-0003")
        assert stove["properties"]["ownerCustomerId"] == customer.customer_id
        assert stove["controller"] == [demo.OPERATOR]
        assert stove["verified"] is True
        collections = await platform.claims.collections.collections(demo.PROJECT, None, 10)
        assert len(collections.items) == 1
        assert collections.items[0]["evaluators"] == [demo.ORACLE]
        assert (await platform.ledger.verify()).ok
        state = await platform.telemetry.state("did:ixo:entity/demo-stove-0003")
        assert state["readings"] >= 150 and state["meterTotal"] > 0
        month = await platform.telemetry.aggregates(demo.PROJECT, "day", None, None)
        assert len(month["buckets"]) == 30
    finally:
        await platform.stop()
