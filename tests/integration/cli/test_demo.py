"""`twinhub demo` loads a whole programme through the services, and a second run adds
nothing: the same DIDs, the same customers, one verification, one collection, the same role
keys (files readable by their owner alone, their secrets never printed), one validated
design document, one survey answered once, the last full month of telemetry once."""

from __future__ import annotations

import calendar
import stat
from pathlib import Path

import orjson

from tests.support.cli import base_env, run_cli
from twinhub import demo
from twinhub.platform import Platform
from twinhub.services.domains import DomainFilter
from twinhub.settings import Settings


async def test_demo_loads_a_programme_and_is_safe_to_run_twice(tmp_path: Path) -> None:
    env = base_env(tmp_path)
    first = run_cli("demo", "--stoves", "7", env=env, timeout=120)
    assert first.returncode == 0, first.stderr
    assert "1 organisation, 3 role keys, 1 oracle, 1 project," in first.stdout
    assert "7 customers, 7 stoves" in first.stdout
    assert demo.DEMO_PIN in first.stdout
    assert "project document, accreditation, validation" in first.stdout
    keys = tmp_path / "data" / demo.keys.KEY_FOLDER
    stored = {role: orjson.loads((keys / f"{role}.key").read_bytes()) for role in demo.ROLES}
    for role, key in stored.items():
        assert key["did"].startswith("did:key:z6Mk") and key["did"] in first.stdout
        for file in (keys / f"{role}.key", keys / f"{role}.api-key"):
            assert stat.S_IMODE(file.stat().st_mode) == 0o600
            assert str(file) in first.stdout
        secret = (keys / f"{role}.api-key").read_text()
        assert key["seed"] not in first.stdout + first.stderr
        assert secret not in first.stdout + first.stderr
    second = run_cli("demo", "--stoves", "7", env=env, timeout=120)
    assert second.returncode == 0, second.stderr
    assert "nothing new" in second.stdout
    assert "0 readings stored this run" in second.stdout  # the month of telemetry, once
    assert "0 answers this run" in second.stdout and "validated already" in second.stdout
    for role, key in stored.items():  # the same keys, whose API keys still hold
        assert orjson.loads((keys / f"{role}.key").read_bytes()) == key

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
        meter = stove["properties"]["meter"]
        content, _ = await platform.project_documents.attachment(meter["certificate"])
        assert meter["serial"].encode() in content  # the calibration record, by its hash
        assert stove["properties"]["stoveModel"] in demo.evidence.STOVE_MODELS
        document = await platform.project_documents.document(demo.PROJECT)
        assert document["validation"]["issuer"] == stored["verifier"]["did"]
        assert document["document"]["country"] == "ZM"
        assert (await platform.domains.get(demo.PROJECT))["controller"] == [
            demo.OPERATOR,
            stored["proponent"]["did"],
        ]
        [survey] = await platform.surveys.surveys(demo.PROJECT)
        households = await platform.surveys.households(survey.id)
        assert households and all(h.confirmed for h in households)  # answered once each
        assert all(len(h.answers) == 3 for h in households)
        collections = await platform.claims.collections.collections(demo.PROJECT, None, 10)
        assert len(collections.items) == 1
        assert collections.items[0]["evaluators"] == [demo.ORACLE]
        assert (await platform.ledger.verify()).ok
        state = await platform.telemetry.state("did:ixo:entity/demo-stove-0003")
        assert state["readings"] >= 150 and state["meterTotal"] > 0
        month = await platform.telemetry.aggregates(demo.PROJECT, "day", None, None)
        first, _ = demo.telemetry_month()
        assert len(month["buckets"]) == calendar.monthrange(first.year, first.month)[1]
        assert month["buckets"][0]["start"].startswith(first.isoformat())
    finally:
        await platform.stop()
