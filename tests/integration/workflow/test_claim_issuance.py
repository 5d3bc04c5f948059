"""The per-stove claim path obeys the verification gate (issue #29 §3): an oracle's approval
is a draft figure that mints nothing; the claim rides its project's next monitoring period,
whose submission carries it (one period only), whose corrections release it, and whose
issuance mints its credits to the claim's owner once, in the issuance's own write; the
evidence bundle carries the claim's credential and `verify-evidence` checks it."""

from __future__ import annotations

import asyncio
import copy
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import select

from tests.conftest import BACKENDS, Registry
from tests.support.claims_world import METERED_AMOUNT, METERED_DAYS, METERED_START, World
from tests.support.cli import verify_evidence_offline
from tests.support.workflow_world import Workflow, issue_claims, send_reading, workflow_of
from twinhub.db.models import Claim
from twinhub.mrv.evidence_bundle import verify_bundle

sqlite_only = pytest.mark.parametrize("backend", [BACKENDS[0]], indirect=True, ids=str)
LAST_DAY = METERED_START.date() + timedelta(days=METERED_DAYS - 1)


async def balance(registry: Registry, owner: str) -> int:
    rows = await registry.platform.credits.balances(owner)
    return sum(row["amount"] for row in rows if row["token"] == "CARBON")


async def claim(world: World, claim_id: str) -> dict[str, Any]:
    found = await world.operator_client.get(f"/v1/claims/{claim_id}")
    assert found.status_code == 200, found.text
    return found.json()


async def report(flow: Workflow, period: int) -> dict[str, Any]:
    found = await flow.proponent.client.get(
        f"/v1/domains/{flow.project}/monitoring-periods/{period}/report"
    )
    assert found.status_code == 200, found.text
    return found.json()


async def day_period(flow: Workflow, day: date) -> int:
    return int((await flow.draft(day.isoformat(), day.isoformat()))["id"])


@sqlite_only
async def test_an_approved_claim_is_minted_by_the_issuance_that_carries_it(
    registry: Registry, world: World
) -> None:
    owner = "did:ixo:customer/gate-holder"
    stove, _, approved = await world.approved_claim(owner=owner)
    # The approval: a figure and the oracle's credential, nothing minted.
    assert approved["status"] == "approved" and approved["amount"] == METERED_AMOUNT
    assert approved["credits"] == {"state": "awaiting issuance", "period": None, "issuedAt": None}
    assert await balance(registry, owner) == 0
    credential = (await world.operator_client.get(f"/v1/claims/{approved['id']}/credential")).json()

    flow = await workflow_of(world)
    # Two drafts after the claim's last day both name it; it rides the first submitted.
    first = await day_period(flow, LAST_DAY + timedelta(days=1))
    second = await day_period(flow, LAST_DAY + timedelta(days=2))
    before = await day_period(flow, LAST_DAY - timedelta(days=1))  # ends before the claim
    for period in (first, second):
        (carried,) = (await report(flow, period))["claims"]
        assert carried["claim"] == approved["id"] and carried["stove"] == stove
        assert carried["owner"] == owner and carried["amount"] == METERED_AMOUNT
        assert carried["token"] == "CARBON" and carried["to"] == LAST_DAY.isoformat()
    assert "claims" not in await report(flow, before)  # a report without claims: no key

    submitted = await flow.step(flow.proponent, first, "submission", "submit")
    assert submitted.status_code == 200, submitted.text
    assert (await claim(world, approved["id"]))["credits"]["period"] == first
    twice = await flow.step(flow.proponent, second, "submission", "submit")
    assert twice.status_code == 409 and f"carried by monitoring period {first}" in twice.text

    # Corrections release it (still approved, awaiting issuance); it rides again.
    corrected = await flow.step(
        flow.verifier,
        first,
        "verification",
        "verification",
        outcome="corrections",
        findings=["the meter record is missing a page"],
        sampledStoves=[stove],
    )
    assert corrected.status_code == 200, corrected.text
    released = await claim(world, approved["id"])
    assert released["status"] == "approved"
    assert released["credits"] == {"state": "awaiting issuance", "period": None, "issuedAt": None}
    assert await balance(registry, owner) == 0

    issued = await flow.through(first, [stove])
    assert issued["state"] == "issued"
    assert await balance(registry, owner) == METERED_AMOUNT  # exactly the figure, once
    done = await claim(world, approved["id"])
    assert done["credits"]["state"] == "issued" and done["credits"]["period"] == first
    movements = await registry.client.get(f"/v1/credit-movements?token=CARBON&holder={owner}")
    assert movements.status_code == 200, movements.text
    mints = [m for m in movements.json()["items"] if m["kind"] == "mint" and m["to"] == owner]
    assert [(m["amount"], m["claim"]) for m in mints] == [(METERED_AMOUNT, approved["id"])]
    # Issued: no later period carries it.
    assert "claims" not in await report(flow, await day_period(flow, LAST_DAY + timedelta(days=3)))

    # The issuance names the claim's recipient; the bundle carries its credential.
    base = f"/v1/domains/{flow.project}/monitoring-periods/{first}"
    chain = (await flow.verifier.client.get(f"{base}/chain")).json()["items"]
    (line,) = chain[-1]["credentialSubject"]["claims"]
    assert line["recipient"] == owner and line["amount"] == METERED_AMOUNT
    bundle = (await flow.verifier.client.get(f"{base}/evidence")).json()
    assert bundle["claimCredentials"] == [credential]
    assert verify_bundle(bundle) == []
    forged = copy.deepcopy(bundle)
    forged["claimCredentials"][0]["credentialSubject"]["evaluation"]["amount"] += 1
    problems = verify_bundle(forged)
    assert any(approved["id"] in p and "credential" in p for p in problems), problems
    inflated = copy.deepcopy(bundle)
    inflated["report"]["claims"][0]["amount"] += 1
    assert any("report" in p and "claims" in p for p in verify_bundle(inflated))
    assert (await registry.platform.ledger.verify()).ok


async def test_concurrent_issuances_mint_a_carried_claim_once(
    registry: Registry, world: World
) -> None:
    owner = "did:ixo:customer/gate-race"
    _, _, approved = await world.approved_claim(owner=owner)
    flow = await workflow_of(world)
    # Two periods carrying the same claim, submitted at once: one carries it.
    first = await day_period(flow, LAST_DAY + timedelta(days=1))
    second = await day_period(flow, LAST_DAY + timedelta(days=2))
    submissions = await asyncio.gather(
        flow.step(flow.proponent, first, "submission", "submit"),
        flow.step(flow.proponent, second, "submission", "submit"),
    )
    statuses = sorted(r.status_code for r in submissions)
    assert statuses == [200, 409], [r.text for r in submissions]
    carrier = (await claim(world, approved["id"]))["credits"]["period"]
    assert carrier in (first, second)
    stoves = [r["stove"] for r in (await report(flow, carrier))["exclusions"]]
    verified = await flow.step(
        flow.verifier,
        carrier,
        "verification",
        "verification",
        outcome="approved",
        findings=["ok"],
        sampledStoves=stoves[:1],
    )
    assert verified.status_code == 200, verified.text
    issuances = await asyncio.gather(
        flow.step(flow.registry, carrier, "issuance", "issuance"),
        flow.step(flow.registry, carrier, "issuance", "issuance"),
    )
    assert sorted(r.status_code for r in issuances) in ([200, 409], [200, 422])
    assert await balance(registry, owner) == METERED_AMOUNT
    assert (await claim(world, approved["id"]))["credits"]["state"] == "issued"
    # And through the shared helper: nothing left to issue for this project.
    with pytest.raises(AssertionError, match="carries no claim"):
        await issue_claims(world)
    assert await balance(registry, owner) == METERED_AMOUNT


@sqlite_only
async def test_verify_evidence_recomputes_a_carried_claim_from_the_bundle_alone(
    registry: Registry, world: World, tmp_path: Path
) -> None:
    """A carried claim's figure is recomputed from what the approval computed it from (its
    stove's facts and day figures, kept with the claim) by the oracle's own rule, and those
    day figures from the stove's readings; a changed reading, input or amount is named by
    claim, stove and field. The CLI reads only the file."""
    stove, _, approved = await world.approved_claim()
    flow = await workflow_of(world)
    period = await day_period(flow, LAST_DAY + timedelta(days=1))
    issued = await flow.through(period, [stove])
    assert issued["state"] == "issued"
    base = f"/v1/domains/{flow.project}/monitoring-periods/{period}"
    bundle = (await flow.verifier.client.get(f"{base}/evidence")).json()
    name = f"claims[{approved['id']}] {stove}"
    inputs = bundle["claimInputs"][approved["id"]]
    assert inputs["stove"] == stove and len(inputs["days"]) == METERED_DAYS
    assert len(bundle["claimReadings"][approved["id"]]) == METERED_DAYS * 4
    assert len(bundle["claimMethodologies"]) == 1
    assert verify_bundle(bundle) == []

    # A reading changed: the day it belongs to no longer gives the kept figure.
    reading = copy.deepcopy(bundle)
    row = next(r for r in reading["claimReadings"][approved["id"]] if "energyKwh" in r["values"])
    row["values"]["energyKwh"] += 1
    problems = verify_bundle(reading)
    assert any(p.startswith(f"{name} {row['time'][:10]} energy:") for p in problems), problems
    # A kept day figure changed: the recomputed calculation differs from the signed one.
    figure = copy.deepcopy(bundle)
    figure["claimInputs"][approved["id"]]["days"][0]["meter_delta"] += 1
    problems = verify_bundle(figure)
    assert any(p.startswith(f"{name} inputsDigest:") for p in problems), problems
    assert any(p.startswith(f"{name} usage:") for p in problems), problems
    # The amount changed in the report: named with both values.
    amount = copy.deepcopy(bundle)
    amount["report"]["claims"][0]["amount"] += 5
    problems = verify_bundle(amount)
    expected = f"{name} amount: the report says {METERED_AMOUNT + 5}, the inputs give "
    assert f"{expected}{METERED_AMOUNT}" in problems, problems
    # Inputs missing, or a methodology not in the bundle: said, not skipped.
    missing = copy.deepcopy(bundle)
    del missing["claimInputs"][approved["id"]]
    assert f"{name}: the bundle has no inputs to recompute its figure from" in verify_bundle(
        missing
    )
    missing["claimInputs"] = bundle["claimInputs"]
    missing["claimMethodologies"] = {}
    assert any(p.startswith(f"{name} methodology:") for p in verify_bundle(missing))

    # As an auditor runs it: no database, no network.
    intact, damaged = await verify_evidence_offline(tmp_path, bundle, reading)
    assert intact.returncode == 0, intact.stdout + intact.stderr
    assert damaged.returncode == 1, damaged.stdout + damaged.stderr
    assert f"{name} {row['time'][:10]} energy" in damaged.stdout
    assert not (tmp_path / "nowhere").exists()


async def test_a_reading_in_flight_when_the_claim_was_computed_is_late_for_it(
    registry: Registry, world: World
) -> None:
    """A reading received before an approval computed its claim but committed after (its
    receipt time earlier than the approval's) was not behind the claim's figure: the bundle
    leaves it out of the claim's readings, which the kept inputs name exactly (`seen`),
    and checks. A cut by receipt time would put it in, and the figures would differ."""
    stove, _, approved = await world.approved_claim()
    async with registry.platform.sessionmaker() as session:
        kept, evaluated_at = (
            await session.execute(
                select(Claim.inputs, Claim.evaluated_at).where(Claim.id == approved["id"])
            )
        ).one()
    assert set(orjson.loads(kept)["seen"]) == {
        (METERED_START.date() + timedelta(days=n)).isoformat() for n in range(METERED_DAYS)
    }
    day = (METERED_START + timedelta(days=1, hours=12)).isoformat()
    await send_reading(registry, stove, 99_003, day, evaluated_at)
    flow = await workflow_of(world)
    period = await day_period(flow, LAST_DAY + timedelta(days=1))
    assert (await flow.through(period, [stove]))["state"] == "issued"
    base = f"/v1/domains/{flow.project}/monitoring-periods/{period}"
    bundle = (await flow.verifier.client.get(f"{base}/evidence")).json()
    carried = bundle["claimReadings"][approved["id"]]
    assert len(carried) == METERED_DAYS * 4
    assert 99_003 not in [r["seq"] for r in carried]
    assert verify_bundle(bundle) == []
    # A reading left out of the claim's readings, or one put in that was not read: named
    # by the day and the sequence numbers, beside the figures it changes.
    name = f"claims[{approved['id']}] {stove}"
    for change in ("drop", "add"):
        changed = copy.deepcopy(bundle)
        rows = changed["claimReadings"][approved["id"]]
        if change == "drop":
            moved = rows.pop(0)
        else:
            moved = {**rows[0], "seq": 99_004}
            rows.append(moved)
        problems = verify_bundle(changed)
        expected = f"{name} {moved['time'][:10]} readings: read from sequence numbers "
        assert any(p.startswith(expected) for p in problems), problems
