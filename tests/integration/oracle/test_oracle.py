"""The oracle: methodologies on protocols, credits computed (never typed), the oracle's
signed decisions with leases, and monitoring periods with reports that recompute.

Real database, real HTTP through the ASGI stack; the numbers are docs/methodology.md's
worked example 1 (30 kWh a month) taken for ten days of 1 kWh (METERED_AMOUNT)."""

from __future__ import annotations

import asyncio
import copy
import csv
import io
import json
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import update

from tests.conftest import (
    BOOTSTRAP_KEY,
    Registry,
    fresh_postgres_database,
    restore_token_decimals,
    running_registry,
    saved_token_decimals,
    unique,
)
from tests.support.claims_world import (
    CLAIM_PROTOCOL,
    METERED_AMOUNT,
    World,
    build_world,
    metered_claim,
)
from tests.support.cli import TWINHUB, base_env, run_cli
from tests.support.workflow_world import build_workflow, issue_claims
from twinhub import simulator
from twinhub.db.models import OracleDecision
from twinhub.kernel.clock import utcnow
from twinhub.mrv.builtin import CLEAN_COOKING, builtin_document
from twinhub.oracle.service import OracleService
from twinhub.platform import Platform
from twinhub.services.stoves import whole_credits
from twinhub.settings import Settings

ISSUED_2_0_0 = "clean-cooking-mecd-2.0.0"  # the shipped document 2.0.0 issued under


@pytest.fixture(scope="module")
async def postgres_url() -> AsyncIterator[str]:
    """A PostgreSQL database of this module's own: its assertions count what the whole
    database holds (pending claims, domains), which other modules' leftovers would change."""
    async with fresh_postgres_database("own") as url:
        yield url


async def submit(world: World, collection: int, stove: str, data: dict[str, Any]) -> str:
    response = await world.operator_client.post(
        f"/v1/claim-collections/{collection}/claims", json={"asset": stove, "data": data}
    )
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def claim(registry: Registry, claim_id: str) -> dict[str, Any]:
    return (await registry.client.get(f"/v1/claims/{claim_id}")).json()


async def test_a_protocol_with_a_faulty_methodology_is_refused_where(registry: Registry) -> None:
    document = copy.deepcopy(builtin_document(CLEAN_COOKING))
    last = len(document["formulas"]) - 1  # ER, the result
    document["formulas"][last]["expression"] = "BE / missing_name"
    response = await registry.client.post(
        "/v1/protocols",
        json={
            "type": "Protocol",
            "id": unique("bad-method"),
            "name": "Bad",
            "tokenClass": "CARBON",
            "methodology": document,
        },
    )
    assert response.status_code == 422, response.text
    fields = [d["field"] for d in response.json()["error"]["details"]]
    assert fields[0] == f"methodology.formulas[{last}].expression"  # (and the result it named)
    assert "missing_name" in response.json()["error"]["details"][0]["error"]
    # The built-in claim protocol carries the built-in methodology, named by its digest.
    builtin = await registry.client.get("/v1/protocols/did:ixo:protocol/clean-cooking-claim")
    summary = builtin.json()["effective"]["methodology"]
    assert summary["id"] == "clean-cooking-mecd" and summary["version"] == "2.1.0"
    assert len(summary["digest"]) == 64


async def test_a_methodology_with_an_unused_parameter_is_refused_and_not_stored(
    registry: Registry,
) -> None:
    """Issue 30's bad input: a declared parameter no formula uses is refused with its path
    (422), and no protocol is stored under the id."""
    document = copy.deepcopy(builtin_document(CLEAN_COOKING))
    document["parameters"]["NCV_baseline"] = {
        "value": 29.5,
        "unit": "TJ/Gg",
        "source": "IPCC 2006 vol. 2 table 1.2 (declared, used by nothing)",
    }
    ident = unique("unused-parameter")
    response = await registry.client.post(
        "/v1/protocols",
        json={
            "type": "Protocol",
            "id": ident,
            "name": "Unused",
            "tokenClass": "CARBON",
            "methodology": document,
        },
    )
    assert response.status_code == 422, response.text
    details = {d["field"]: d["error"] for d in response.json()["error"]["details"]}
    assert details == {
        "methodology.parameters.NCV_baseline": (
            "no formula uses this parameter: use it in a formula or remove it"
        )
    }
    assert (await registry.client.get(f"/v1/protocols/did:ixo:protocol/{ident}")).status_code == 404


async def test_a_formula_past_the_iteration_budget_is_refused_at_registration(
    registry: Registry,
) -> None:
    """Issue 31 §3: it was accepted (201), then every approval under it answered 500."""
    document = copy.deepcopy(builtin_document(CLEAN_COOKING))
    hundred = "[" + ",".join(["1"] * 100) + "]"
    last = len(document["formulas"]) - 1  # ER, the result: a double
    document["formulas"][last]["expression"] = (
        f"double({hundred}.map(a, {hundred}.map(b, 1)).size()) * ("
        + document["formulas"][last]["expression"]
        + ")"
    )
    response = await registry.client.post(
        "/v1/protocols",
        json={
            "type": "Protocol",
            "id": unique("costly-method"),
            "name": "Costly",
            "tokenClass": "CARBON",
            "methodology": document,
        },
    )
    assert response.status_code == 422, response.text
    details = {d["field"]: d["error"] for d in response.json()["error"]["details"]}
    assert "iteration budget" in details[f"methodology.formulas[{last}].expression"], details


async def test_nobody_types_a_credit_amount(registry: Registry) -> None:
    world = await build_world(registry)
    try:
        stove = await world.metered_asset()
        collection = await world.collection()
        claim_id = await submit(world, collection["id"], stove, metered_claim())
        typed = await world.oracle_client.post(
            f"/v1/claims/{claim_id}/evaluations",
            json={"status": "approved", "amount": 1_000_000_000},
        )
        assert typed.status_code == 422
        assert "credits follow from the methodology" in typed.text
        # A person's approval records what the methodology computes, nothing else (minted
        # by the issuance of the period that carries the claim).
        approved = await world.oracle_client.post(
            f"/v1/claims/{claim_id}/evaluations", json={"status": "approved"}
        )
        assert approved.status_code == 200, approved.text
        assert approved.json()["amount"] == METERED_AMOUNT
        credential = (await registry.client.get(f"/v1/claims/{claim_id}/credential")).json()
        calculation = credential["credentialSubject"]["evaluation"]["calculation"]
        assert abs(calculation["inputs"]["energy_kwh"] - 10.0) < 1e-9
        assert calculation["credits"] == {
            "token": "CARBON",
            "decimals": 6,
            "amount": METERED_AMOUNT,
        }
        verified = await registry.client.post("/v1/credentials/verify", json=credential)
        assert verified.json()["verified"] is True
        await issue_claims(world)
        token = (await registry.client.get("/v1/credits/CARBON")).json()
        assert token["decimals"] == 6 and token["minted"] >= METERED_AMOUNT
        # A stove without telemetry cannot be approved by a person either.
        silent = await world.asset()  # verified, never enrolled
        other = await submit(world, collection["id"], silent, metered_claim())
        refused = await world.oracle_client.post(
            f"/v1/claims/{other}/evaluations", json={"status": "approved"}
        )
        assert refused.status_code == 422 and "no enrolled device" in refused.text
        assert (await registry.platform.ledger.verify()).ok
    finally:
        await world.close()


async def test_a_person_cannot_approve_what_a_monitoring_period_credited(
    registry: Registry,
) -> None:
    """A submitted period holds its stoves' days: a claim over them is not approved. (A
    draft holds nothing: its figures are a draft's.)"""
    flow = await build_workflow(registry)
    world = flow.world
    try:
        stove = await flow.stove()
        collection = await world.collection(project=flow.project)
        made = await flow.draft()
        submitted = await flow.step(flow.proponent, made["id"], "submission", "submit")
        assert submitted.status_code == 200, submitted.text
        token = await registry.client.get("/v1/credits/CARBON")
        supply = token.json()["minted"] if token.status_code == 200 else 0
        claim_id = await submit(world, collection["id"], stove, metered_claim())
        refused = await world.oracle_client.post(
            f"/v1/claims/{claim_id}/evaluations", json={"status": "approved"}
        )
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"]["code"] == "double_counting"
        assert f"monitoring period {made['id']}" in refused.text
        assert (await claim(registry, claim_id))["status"] == "pending"
        token = await registry.client.get("/v1/credits/CARBON")
        assert (token.json()["minted"] if token.status_code == 200 else 0) == supply
        rejected = await world.oracle_client.post(
            f"/v1/claims/{claim_id}/evaluations",
            json={"status": "rejected", "reason": "credited by the monitoring period"},
        )
        assert rejected.status_code == 200, rejected.text
        assert (await registry.platform.ledger.verify()).ok
    finally:
        await world.close()


async def test_the_oracle_decides_signs_and_never_doubles(registry: Registry) -> None:
    world = await build_world(registry)
    oracle = registry.platform.oracle
    try:
        collection = (await world.collection())["id"]
        good_stove = await world.metered_asset()
        good = await submit(world, collection, good_stove, metered_claim(20))
        greedy = await submit(world, collection, await world.metered_asset(), metered_claim(999))
        silent_stove = await world.asset()  # verified, never enrolled
        silent = await submit(world, collection, silent_stove, metered_claim())
        unverified = await submit(
            world, collection, await world.asset(verified=False), metered_claim()
        )
        # Two oracle processes at once: each claim is decided once.
        twin = OracleService(
            registry.platform.sessionmaker,
            registry.platform.claims,
            registry.platform.protocols,
            registry.platform.credentials.issuer,
        )
        # (A shared PostgreSQL database may hold other tests' pending claims as well.)
        done = await asyncio.gather(oracle.run_once(), twin.run_once())
        assert sum(done) >= 4
        views = {c: await claim(registry, c) for c in (good, greedy, silent, unverified)}
        assert views[good]["status"] == "approved"
        assert views[good]["amount"] == METERED_AMOUNT
        assert views[greedy]["status"] == "rejected"
        assert "999 meals" in views[greedy]["reason"]
        assert views[silent]["status"] == "flagged"
        assert "no enrolled device" in views[silent]["reason"]
        assert views[unverified]["status"] == "flagged"
        assert "not verified" in views[unverified]["reason"]
        for view in views.values():
            assert len(view["evaluations"]) == 1
        decision = (await registry.client.get(f"/v1/claims/{good}/oracle-decision")).json()
        assert decision["outcome"] == "approved" and decision["amount"] == METERED_AMOUNT
        assert decision["methodology"]["id"] == "clean-cooking-mecd"
        assert len(decision["inputsDigest"]) == 64
        signed = decision["signed"]
        check = await registry.client.post("/v1/credentials/verify", json=signed)
        assert check.json()["verified"] is True
        signed["outcome"] = "rejected"
        check = await registry.client.post("/v1/credentials/verify", json=signed)
        assert check.json()["verified"] is False
        # Double counting: the same stove-period is refused at submission (one counted
        # claim per stove-month, whatever the channel), naming the approved claim.
        again = await world.operator_client.post(
            f"/v1/claim-collections/{collection}/claims",
            json={"asset": good_stove, "data": metered_claim(20)},
        )
        assert again.status_code == 409 and again.json()["error"]["code"] == "period_claimed"
        assert again.json()["error"]["details"][0]["error"] == good
        # A person overrides a flagged claim only with a recorded reason.
        bare = await world.oracle_client.post(
            f"/v1/claims/{silent}/evaluations", json={"status": "rejected"}
        )
        assert bare.status_code == 422
        overridden = await world.oracle_client.post(
            f"/v1/claims/{silent}/evaluations",
            json={"status": "rejected", "reason": "meter never installed (site visit)"},
        )
        assert overridden.status_code == 200, overridden.text
        assert overridden.json()["evaluations"][-1]["reason"].startswith("meter never")
    finally:
        await world.close()


async def test_a_claim_over_a_faulty_register_is_flagged_with_the_fault(
    registry: Registry,
) -> None:
    """Methodology 2.1.0: a register that falls 500 kWh with no reset declared is a gap in
    the data (never credited as a rise); the oracle leaves the claim to a person, naming
    the day and the fault."""
    world = await build_world(registry)
    try:
        collection = (await world.collection())["id"]
        stove = await world.metered_asset(fall_on=4)
        faulty = await submit(world, collection, stove, metered_claim(20))
        await registry.platform.oracle.run_once()
        view = await claim(registry, faulty)
        assert view["status"] == "flagged", view
        assert "the meter: register fell from" in view["reason"]
        assert "with no reset declared and no registerMax to roll over: a gap" in view["reason"]
    finally:
        await world.close()


async def test_a_crashed_oracle_is_taken_over_and_finally_flags(registry: Registry) -> None:
    world = await build_world(registry)
    oracle = registry.platform.oracle
    try:
        collection = (await world.collection())["id"]
        claim_id = await submit(world, collection, await world.metered_asset(), metered_claim())
        # An oracle leased it and died: its lease runs out, another takes over.
        assert await oracle._take(claim_id) == 1
        # Leased and not expired: nobody else takes it. (Asked of this claim alone: other tests
        # of the worker share the PostgreSQL database and may leave claims pending.)
        assert await oracle._waiting([claim_id]) == []
        past = utcnow() - timedelta(seconds=1)
        async with registry.platform.sessionmaker.begin() as session:
            await session.execute(
                update(OracleDecision)
                .where(OracleDecision.claim_id == claim_id)
                .values(lease_until=past, attempts=oracle.max_attempts)
            )
        assert await oracle.run_once() >= 1  # this claim, and any other test's left pending
        view = await claim(registry, claim_id)
        assert view["status"] == "flagged" and "stopped" in view["reason"]
        assert view["amount"] is None
        movements = (await registry.client.get("/v1/credits/CARBON/movements")).json()
        assert all(m["claim"] != claim_id for m in movements.get("items", []))
    finally:
        await world.close()


async def test_the_background_oracle_evaluates_within_seconds(make_registry: Any) -> None:
    registry = await make_registry(oracle_enabled=True, oracle_poll_seconds=0.2)
    world = await build_world(registry)
    try:
        collection = (await world.collection())["id"]
        claim_id = await submit(world, collection, await world.metered_asset(), metered_claim())
        for _ in range(100):
            if (await claim(registry, claim_id))["status"] != "pending":
                break
            await asyncio.sleep(0.1)
        view = await claim(registry, claim_id)
        assert view["status"] == "approved" and view["amount"] == METERED_AMOUNT
    finally:
        await world.close()


async def test_a_monitoring_period_credits_once_and_its_report_recomputes(
    registry: Registry,
) -> None:
    """A draft mints nothing; the period is credited once, by the registry's issuance after
    the proponent's submission and the verifier's approval; its report recomputes."""
    flow = await build_workflow(registry)
    world = flow.world
    try:
        stoves = [await flow.stove(kwh_per_day=k) for k in (1.0, 3.0)]
        silent = await world.asset(project=flow.project)  # verified, never enrolled
        path = f"/v1/domains/{flow.project}/monitoring-periods"
        body = {"from": "2026-10-01", "to": "2026-10-10"}
        token = await registry.client.get("/v1/credits/CARBON")
        before = token.json()["minted"] if token.status_code == 200 else 0
        made = await world.operator_client.post(path, json=body)
        assert made.status_code == 201, made.text
        period = made.json()
        assert period["state"] == "draft"
        # 10 kWh and 30 kWh: ER is linear below the cap, so 4 x 0.0210296753 tCO2e
        # (METERED_AMOUNT's worked figure) = 0.0841187012, in millionths rounded down once
        # for the period.
        assert period["totals"]["included"] == 2 and period["totals"]["excluded"] == 1
        report = (await registry.client.get(f"{path}/{period['id']}/report")).json()
        assert period["credits"]["amount"] == 84118, [r["usage"] for r in report["stoves"]]
        token = await registry.client.get("/v1/credits/CARBON")
        drafted = token.json()["minted"] if token.status_code == 200 else 0
        assert drafted == before  # a draft mints nothing
        again = await world.operator_client.post(path, json=body)
        assert again.status_code == 200 and again.json()["id"] == period["id"]
        overlapping = await world.operator_client.post(
            path, json={"from": "2026-10-05", "to": "2026-10-20"}
        )
        assert overlapping.status_code == 409, overlapping.text
        assert overlapping.json()["error"]["code"] == "period_overlaps"
        backwards = await world.operator_client.post(
            path, json={"from": "2026-10-10", "to": "2026-10-01"}
        )
        assert backwards.status_code == 422
        issued = await flow.through(period["id"], stoves[:1])
        assert issued["state"] == "issued"
        rerun = await world.operator_client.post(path, json=body)  # issued: as it was
        assert rerun.status_code == 200 and rerun.json()["state"] == "issued"
        supply = (await registry.client.get("/v1/credits/CARBON")).json()["minted"]
        assert supply - before == period["credits"]["amount"]  # minted once, not twice
        report = (await registry.client.get(f"{path}/{period['id']}/report")).json()
        assert {row["stove"] for row in report["stoves"]} == set(stoves)
        assert report["exclusions"] == [
            {
                **report["exclusions"][0],
                "stove": silent,
                "reason": "the stove has no enrolled device",
            }
        ]
        assert report["methodology"]["parameters"]["fNRB"]["value"] == 0.88
        text = (await registry.client.get(f"{path}/{period['id']}/report?format=csv")).text
        rows = list(csv.DictReader(io.StringIO(text)))
        assert [r["included"] for r in rows].count("yes") == 2
        assert await registry.platform.monitoring.verify(report) == []
        forged = copy.deepcopy(report)
        forged["stoves"][0]["reductions"] *= 2
        differences = await registry.platform.monitoring.verify(forged)
        assert any("edited" in d for d in differences)
        assert any("reductions" in d for d in differences)
        assert orjson.dumps(report)  # the report is plain JSON
        assert (await registry.platform.ledger.verify()).ok
    finally:
        await world.close()


async def test_from_simulated_telemetry_to_credits_and_a_verified_report(
    registry: Registry, tmp_path: Any
) -> None:
    """The simulator's households cook for 30 days through the real ingestion path; the
    oracle approves a stove's claim, a monitoring period credits the others (not that stove
    again), and the report verifies from the stored telemetry; an edited copy does not."""
    world = await build_world(registry)
    platform = registry.platform
    try:
        prefix = unique("sim")
        stoves = await simulator.ensure_stoves(platform, 6, prefix=prefix)
        for stove in stoves:
            patched = await registry.client.patch(
                f"/v1/domains/{stove.did}",
                json={"properties": {"efficiency": 0.85, "householdSize": 4}},
            )
            assert patched.status_code == 200, patched.text
            await world.govern(stove.did, "verify")
        await world.govern(simulator.SIM_PROJECT, "verify")
        totals = await simulator.simulate(
            platform, 6, 30, False, lambda *_: None, stove_list=stoves
        )
        assert totals.accepted > 0 and totals.failed == 0
        collection = await registry.client.post(
            "/v1/claim-collections",
            json={
                "project": simulator.SIM_PROJECT,
                "protocol": "did:ixo:protocol/clean-cooking-claim",
                "evaluators": [world.oracle],
            },
        )
        assert collection.status_code == 201, collection.text
        today = utcnow().replace(hour=0, minute=0, second=0, microsecond=0)
        first, last = today - timedelta(days=30), today - timedelta(days=1)
        # A claim covers days of one calendar month (the stove-month rule): the half of
        # the simulated 30 days that lies in one month, this one's or the last one's.
        month = today.replace(day=1)
        start, end = (month, today) if today.day > 15 else (first, month)
        data = {
            "reportType": "cooking",
            "periodStart": start.isoformat(),
            "periodEnd": end.isoformat(),
        }
        submitted = await registry.client.post(
            f"/v1/claim-collections/{collection.json()['id']}/claims",
            json={"asset": stoves[0].did, "data": data},
        )
        assert submitted.status_code == 201, submitted.text
        claim_id = submitted.json()["id"]
        assert await platform.oracle.run_once() >= 1
        decided = await claim(registry, claim_id)
        assert decided["status"] == "approved", decided["reason"]
        assert decided["amount"] > 0
        period = await registry.client.post(
            f"/v1/domains/{simulator.SIM_PROJECT}/monitoring-periods",
            json={"from": first.date().isoformat(), "to": last.date().isoformat()},
        )
        assert period.status_code == 201, period.text
        url = f"/v1/domains/{simulator.SIM_PROJECT}/monitoring-periods/{period.json()['id']}/report"
        report = (await registry.client.get(url)).json()
        reasons = {row["stove"]: row["reason"] for row in report["exclusions"]}
        assert "double counting" in reasons[stoves[0].did]
        assert report["totals"]["included"] >= 1 and report["credits"]["amount"] > 0
        # verify-report, as an auditor runs it, against the same database.
        saved = tmp_path / "report.json"
        saved.write_bytes(orjson.dumps(report))
        assert await platform.monitoring.verify(orjson.loads(saved.read_bytes())) == []
        edited = copy.deepcopy(report)
        edited["credits"]["amount"] += 1
        assert await platform.monitoring.verify(edited) != []
    finally:
        await world.close()


def test_run_period_and_verify_report_from_the_command_line(tmp_path: Path) -> None:
    """`twinhub oracle run-period` computes a period's draft (nothing minted; a second run
    recomputes the same draft); `verify-report` exits 0 on its report and 1, naming each
    difference, on an edited copy."""
    env = {**base_env(tmp_path), "PIN_ENCRYPTION_KEY": "cd" * 32, "COLUMNS": "250"}
    env["TWINHUB_BOOTSTRAP_API_KEY"] = BOOTSTRAP_KEY
    settings = Settings(
        environment="test",
        data_dir=Path(env["DATA_DIR"]),
        pin_encryption_key=env["PIN_ENCRYPTION_KEY"],
        log_level="warning",
        twinhub_bootstrap_api_key=BOOTSTRAP_KEY,
        oracle_enabled=False,
    )

    async def build() -> str:
        async with running_registry(settings) as registry:
            world = await build_world(registry)
            await world.collection()
            await world.metered_asset()
            await world.close()
            return world.project

    project = asyncio.run(build())
    # The period's stove-days kept beforehand, as an operator does for a deployment's
    # history; a second run finds them kept. Open days are refused.
    span = ("--from", "2026-10-01", "--to", "2026-10-10")
    kept = run_cli("oracle", "keep-digests", *span, env=env, timeout=120)
    assert kept.returncode == 0, kept.stderr
    assert "10 stove-days digested and kept, 0 already kept, over 10 days" in kept.stderr
    again = run_cli("oracle", "keep-digests", *span, env=env, timeout=120)
    assert "0 stove-days digested and kept, 10 already kept" in again.stderr, again.stderr
    today = datetime.now(UTC).date().isoformat()
    refused = run_cli("oracle", "keep-digests", "--from", today, "--to", today, env=env)
    assert refused.returncode == 2 and "must be a closed day" in refused.stderr
    args = ("oracle", "run-period", project, *span)
    made = run_cli(*args, env=env, timeout=120)
    assert made.returncode == 0, made.stderr
    period = orjson.loads(made.stdout)
    assert period["credits"]["amount"] == METERED_AMOUNT
    # On a terminal, the draft's progress on stderr: the step and the stoves read.
    again = run_cli(*args, env={**env, "FORCE_COLOR": "1"}, timeout=120)
    assert again.returncode == 0 and "nothing is minted" in again.stderr
    assert "storing the draft" in again.stderr and "1/1" in again.stderr, again.stderr
    assert orjson.loads(again.stdout)["id"] == period["id"]

    async def report() -> str:
        platform = Platform(settings)
        try:
            await platform.start()
            return await platform.monitoring.report(project, period["id"], "json")
        finally:
            await platform.stop()

    saved = tmp_path / "report.json"
    saved.write_text(asyncio.run(report()))
    intact = run_cli("oracle", "verify-report", str(saved), env=env, timeout=120)
    assert intact.returncode == 0, intact.stdout + intact.stderr
    edited = orjson.loads(saved.read_bytes())
    edited["stoves"][0]["values"]["BE"] *= 2
    saved.write_bytes(orjson.dumps(edited))
    damaged = run_cli("oracle", "verify-report", str(saved), env=env, timeout=120)
    assert damaged.returncode == 1
    assert "edited" in damaged.stdout and edited["stoves"][0]["stove"] in damaged.stdout


def test_phone_screens_show_whole_credits() -> None:
    assert whole_credits(67984, 6) == "0.067984"
    assert whole_credits(1_500_000, 6) == "1.5"
    assert whole_credits(2_000_000, 6) == "2"
    assert whole_credits(12, 0) == "12"
    assert whole_credits(0, 6) == "0"


def test_twinhub_serve_oracle_evaluates_alone(tmp_path: Path) -> None:
    """`twinhub serve oracle` runs the oracle and nothing else; it decides a pending claim
    within seconds and stops on SIGTERM."""
    env = {**base_env(tmp_path), "PIN_ENCRYPTION_KEY": "cd" * 32, "ORACLE_POLL_SECONDS": "0.2"}
    settings = Settings(
        environment="test",
        data_dir=Path(env["DATA_DIR"]),
        pin_encryption_key=env["PIN_ENCRYPTION_KEY"],
        log_level="warning",
        twinhub_bootstrap_api_key=BOOTSTRAP_KEY,
        oracle_enabled=False,
    )

    async def build() -> str:
        async with running_registry(settings) as registry:
            world = await build_world(registry)
            collection = (await world.collection())["id"]
            claim_id = (await world.approvable(collection))["id"]
            await world.close()
            return claim_id

    async def status(claim_id: str) -> dict[str, Any]:
        platform = Platform(settings)
        try:
            await platform.start()
            return await platform.claims.views.claim(claim_id)
        finally:
            await platform.stop()

    claim_id = asyncio.run(build())
    process = subprocess.Popen(
        [*TWINHUB, "serve", "oracle"],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        view = asyncio.run(status(claim_id))
        deadline = time.monotonic() + 90
        while view["status"] == "pending" and time.monotonic() < deadline:
            time.sleep(0.5)
            view = asyncio.run(status(claim_id))
        assert view["status"] == "approved" and view["amount"] == METERED_AMOUNT, view
        assert len(view["evaluations"]) == 1
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    assert "oracle started" in output


async def carry(engine: Any, name: str) -> None:
    """The built-in claim protocol carries the shipped methodology document `name`. The
    migration tests move it (0013 writes 1.0.0, 0020 moves 1.0.0 to 2.0.0) in a database
    later tests share (PostgreSQL: one a process), so each leaves a new deployment's."""
    from sqlalchemy import text

    async with engine.begin() as connection:
        await connection.execute(
            text("UPDATE protocols SET methodology = :m WHERE did = :d"),
            {"m": json.dumps(builtin_document(name)), "d": CLAIM_PROTOCOL},
        )


async def test_the_oracle_migration_goes_down_and_up_again(registry: Registry) -> None:
    """0013 on the test's backend: down to 0012 drops the oracle's tables and columns; up
    again restores them, and the built-in claim protocol carries its methodology again."""
    from alembic import command
    from sqlalchemy import Connection, inspect, text

    from twinhub.db.migrate import alembic_config

    platform = registry.platform
    await platform.stop()
    decimals = await saved_token_decimals(platform.engine)  # a downgrade forgets them
    config = alembic_config()

    def move(connection: Connection, target: str, down: bool) -> list[str]:
        config.attributes["connection"] = connection
        (command.downgrade if down else command.upgrade)(config, target)
        return inspect(connection).get_table_names()

    async with platform.engine.begin() as connection:
        tables = await connection.run_sync(move, "0012", True)
    assert "oracle_decisions" not in tables and "monitoring_periods" not in tables
    async with platform.engine.begin() as connection:
        tables = await connection.run_sync(move, "head", False)
        assert {"oracle_decisions", "monitoring_periods"} <= set(tables)
        document = await connection.scalar(
            text(
                "SELECT methodology FROM protocols"
                " WHERE did = 'did:ixo:protocol/clean-cooking-claim'"
            )
        )
        # 0013 writes 1.0.0 and 0020 moves it on: what a deployment of those days carries
        found = json.loads(document) if isinstance(document, str) else document
        assert found == builtin_document(ISSUED_2_0_0)
    await restore_token_decimals(platform.engine, decimals)
    await carry(platform.engine, CLEAN_COOKING)  # later tests' database: a new deployment
    await platform.start()


def test_verify_report_without_a_database_says_so_and_creates_none(tmp_path: Path) -> None:
    """Run from a folder with no database (SQLite) or against a PostgreSQL server without
    that database, `verify-report` stops with exit 2 naming the problem; nothing is made."""
    saved = tmp_path / "report.json"
    saved.write_bytes(orjson.dumps({"project": "did:ixo:entity/p", "period": {}}))
    data = tmp_path / "elsewhere" / "data"
    env = {**base_env(tmp_path), "DATA_DIR": str(data), "COLUMNS": "250"}
    missing = run_cli("oracle", "verify-report", str(saved), env=env, timeout=60)
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert "no twinhub database" in missing.stderr and "no database file" in missing.stderr
    assert not data.exists()
    url = "postgresql://postgres@127.0.0.1:5432/twinhub_absent_" + os.urandom(4).hex()
    away = run_cli(
        "oracle", "verify-report", str(saved), env={**env, "DATABASE_URL": url}, timeout=60
    )
    assert away.returncode == 2 and "does not answer" in away.stderr, away.stderr


async def test_the_methodology_migration_moves_the_builtin_protocols_and_back(
    registry: Registry,
) -> None:
    """0020 on the test's backend: down to 0019 gives the built-in claim protocol
    methodology 1.0.0 and the stove protocol its properties without stoveModel and meter;
    up again moves both to 2.0.0 (the document 0020 writes, shipped beside 2.1.0). A new
    deployment's protocol carries 2.1.0; an existing one keeps 2.0.0 (no revision moves it:
    docs/methodology.md, "Versions and how a project moves")."""
    from alembic import command
    from sqlalchemy import Connection, text

    from twinhub.db.migrate import alembic_config

    platform = registry.platform
    await platform.stop()
    config = alembic_config()

    def move(connection: Connection, target: str, down: bool) -> None:
        config.attributes["connection"] = connection
        (command.downgrade if down else command.upgrade)(config, target)

    def load(value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value

    async def state() -> tuple[str, dict[str, Any], dict[str, Any]]:
        async with platform.engine.begin() as connection:
            methodology = await connection.scalar(
                text("SELECT methodology FROM protocols WHERE did = :d"), {"d": CLAIM_PROTOCOL}
            )
            row = (
                await connection.execute(
                    text("SELECT properties, telemetry FROM protocols WHERE did = :d"),
                    {"d": "did:ixo:protocol/clean-cooking"},
                )
            ).one()
        return load(methodology)["version"], load(row[0]), load(row[1])["fields"]

    await carry(platform.engine, ISSUED_2_0_0)  # a deployment that 0020 moved to 2.0.0
    async with platform.engine.begin() as connection:
        await connection.run_sync(move, "0019", True)
    version, properties, fields = await state()
    assert version == "1.0.0"
    assert "stoveModel" not in properties and "meter" not in properties
    assert "meterEvent" not in fields
    async with platform.engine.begin() as connection:
        await connection.run_sync(move, "head", False)
    version, properties, fields = await state()
    assert version == "2.0.0"
    assert properties["stoveModel"] == "string" and properties["meter"] == "object"
    assert fields["meterEvent"]["enum"] == ["reset"]
    async with platform.engine.begin() as connection:
        document = load(
            await connection.scalar(
                text("SELECT methodology FROM protocols WHERE did = :d"), {"d": CLAIM_PROTOCOL}
            )
        )
    assert document == builtin_document(ISSUED_2_0_0)
    await carry(platform.engine, CLEAN_COOKING)  # later tests' database: a new deployment
    await platform.start()
