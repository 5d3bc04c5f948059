"""A monitoring period through the verification workflow, over HTTP on both backends:
draft (nothing minted) -> submitted by the proponent's key -> verified by an accredited
verifier's -> issued by the registry's, minted once; every refusal of issue 29's "Bad
input" changes nothing; the evidence bundle checks offline."""

from __future__ import annotations

import asyncio
import copy
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import select

from tests.conftest import BACKENDS, Registry
from tests.integration.console.test_console import console, sign_in
from tests.support.claims_world import METERED_AMOUNT, metered_claim
from tests.support.cli import run_cli, verify_evidence_offline
from tests.support.workflow_world import (
    Actor,
    accredit,
    actor,
    build_workflow,
    meter_record,
    project_document,
    send_reading,
)
from twinhub.db.models import MonitoringPeriod
from twinhub.kernel.errors import Invalid
from twinhub.mrv.evidence_bundle import verify_bundle
from twinhub.security.device_signatures import device_public_key, sign_batch

# The rules without a race run on SQLite alone (cheap); the concurrent cases run on both.
sqlite_only = pytest.mark.parametrize("backend", [BACKENDS[0]], indirect=True, ids=str)


async def minted(registry: Registry) -> int:
    token = await registry.client.get("/v1/credits/CARBON")
    return token.json()["minted"] if token.status_code == 200 else 0


async def balance(registry: Registry, owner: str) -> int:
    rows = await registry.platform.credits.balances(owner)
    return sum(row["amount"] for row in rows if row["token"] == "CARBON")


def error(response: Any, status: int) -> str:
    assert response.status_code == status, response.text
    return response.json()["error"]["code"]


async def test_a_period_goes_from_draft_to_issued_through_the_roles(
    registry: Registry, tmp_path: Path
) -> None:
    flow = await build_workflow(registry)
    stove = await flow.stove()
    # The meter also signs a batch (its key enrolled with its twin): the bundle keeps it.
    seed = bytes(range(32))
    enrolled = await registry.client.post(
        f"/v1/domains/{stove}/device-key", json={"publicKey": device_public_key(seed)}
    )
    assert enrolled.status_code == 200, enrolled.text
    batch = {
        "readings": [
            {"seq": 5_000, "time": "2026-10-05T12:00:00+00:00", "values": {"energyKwh": 0.0}}
        ]
    }
    token = await registry.client.post(f"/v1/domains/{stove}/device-tokens", json={})
    async with registry.as_key(token.json()["token"]) as device:
        sent = await device.post(
            f"/v1/domains/{stove}/telemetry",
            json=batch,
            headers={"Device-Signature": sign_batch(seed, batch)},
        )
    assert sent.status_code in (200, 202), sent.text
    before = await minted(registry)
    draft = await flow.draft()
    assert draft["state"] == "draft" and draft["credits"]["amount"] == METERED_AMOUNT
    assert await minted(registry) == before  # a draft mints nothing
    period = draft["id"]
    base = f"/v1/domains/{flow.project}/monitoring-periods/{period}"

    # Bad input: an issuance without verification; the verifier before submission.
    early = await flow.step(flow.registry, period, "issuance", "issuance")
    assert error(early, 409) == "conflict" and "only a verified period" in early.text
    # The admin cannot issue: no registry role, whatever its powers.
    admin = await registry.client.post(f"{base}/credential-request", json={"step": "issuance"})
    assert error(admin, 403) == "forbidden"

    submitted = await flow.step(flow.proponent, period, "submission", "submit")
    assert submitted.status_code == 200, submitted.text
    assert submitted.json()["state"] == "submitted"
    again = await flow.step(flow.proponent, period, "submission", "submit")
    assert error(again, 409) == "conflict" and "submitted" in again.text

    # A verifier not accredited for the project is refused.
    stranger = await actor(registry, flow.world, "verifier")
    refused = await stranger.client.post(
        f"{base}/credential-request",
        json={"step": "verification", "outcome": "approved", "sampledStoves": [stove]},
    )
    assert error(refused, 403) == "forbidden" and "not accredited" in refused.text
    # The proponent's own key cannot verify, even accredited as a verifier.
    # The proponent's own key cannot verify, even given the verifier role and accredited.
    both = Actor(flow.proponent.key, await flow.world.client(flow.proponent.did, "verifier"))
    await accredit(flow, both, flow.project)
    own = await both.client.post(
        f"{base}/credential-request",
        json={"step": "verification", "outcome": "approved", "sampledStoves": [stove]},
    )
    assert error(own, 403) == "forbidden" and "proponent's own key" in own.text
    # A workflow role is held by a did:key only (the key that signs is the one named).
    with pytest.raises(Invalid, match="API key request") as refused_key:
        await registry.platform.api_keys.create("did:ixo:org/someone", ["verifier"])
    assert "did:key" in refused_key.value.details[0].error

    # The verifier opens the sampled stove's raw readings.
    opened = await flow.verifier.client.get(f"{base}/readings", params={"stove": stove})
    assert opened.status_code == 200, opened.text
    assert len(opened.json()["readings"]) == 41 and len(opened.json()["days"]) == 10

    # A signed credential whose content was changed after signing is refused.
    base_request = {
        "step": "verification",
        "outcome": "approved",
        "findings": ["ok"],
        "sampledStoves": [stove],
    }
    signed = await flow.signed(flow.verifier, f"{base}/credential-request", base_request)
    forged = copy.deepcopy(signed)
    forged["credentialSubject"]["findings"] = ["nothing was checked"]
    tampered = await flow.verifier.client.post(f"{base}/verification", json={"credential": forged})
    assert error(tampered, 422) == "validation_failed" and "proof" in tampered.text
    verified = await flow.verifier.client.post(f"{base}/verification", json={"credential": signed})
    assert verified.status_code == 200, verified.text
    assert verified.json()["state"] == "verified"
    assert await minted(registry) == before  # verified: still nothing minted

    # Two concurrent issuances mint once.
    first, second = await asyncio.gather(
        flow.step(flow.registry, period, "issuance", "issuance"),
        flow.step(flow.registry, period, "issuance", "issuance"),
    )
    statuses = sorted([first.status_code, second.status_code])
    assert statuses in ([200, 409], [200, 422]), (first.text, second.text)
    assert await minted(registry) == before + METERED_AMOUNT
    assert await balance(registry, flow.proponent.did) == METERED_AMOUNT
    later = await flow.step(flow.registry, period, "issuance", "issuance")
    assert later.status_code == 409 and "issued already" in later.text
    assert await minted(registry) == before + METERED_AMOUNT

    chain = (await flow.verifier.client.get(f"{base}/chain")).json()["items"]
    kinds = [c["type"][1] for c in chain]
    assert kinds == [
        "MonitoringSubmissionCredential",
        "MonitoringVerificationCredential",
        "CreditIssuanceCredential",
    ]
    assert [c["issuer"] for c in chain] == [
        flow.proponent.did,
        flow.verifier.did,
        flow.registry.did,
    ]

    # The evidence bundle recomputes offline; a changed figure is named.
    bundle = (await flow.verifier.client.get(f"{base}/evidence")).json()
    assert verify_bundle(bundle) == []
    assert bundle["signedReadings"] == 1 and len(bundle["receipts"]) == 1
    assert set(bundle["dids"]) == {flow.proponent.did, flow.verifier.did, flow.registry.did}
    forged_receipt = copy.deepcopy(bundle)
    (receipt,) = forged_receipt["receipts"].values()
    receipt["payload"] = receipt["payload"].replace("0.0", "9.0")
    assert any("signature does not verify" in d for d in verify_bundle(forged_receipt))
    edited = copy.deepcopy(bundle)
    edited["frozenInputs"]["stoves"][0]["days"][0]["energy"] += 1
    differences = verify_bundle(edited)
    assert any(stove in d and "energy" in d for d in differences), differences
    # As an auditor runs it: `twinhub oracle verify-evidence`, no database, no network.
    edited["chain"][-1]["credentialSubject"]["credits"]["amount"] += 1
    intact, damaged = await verify_evidence_offline(tmp_path, bundle, edited)
    assert intact.returncode == 0, intact.stdout + intact.stderr
    assert damaged.returncode == 1, damaged.stdout + damaged.stderr
    assert f"{stove} " in damaged.stdout and "energy" in damaged.stdout
    assert "issuance.proof" in damaged.stdout  # the changed credential no longer verifies
    assert not (tmp_path / "nowhere").exists()  # no database was made
    assert (await registry.platform.ledger.verify()).ok


@sqlite_only
async def test_unvalidated_and_placeholder_projects_issue_nothing(registry: Registry) -> None:
    flow = await build_workflow(registry, validated=False)
    await flow.stove()
    period = (await flow.draft())["id"]
    unvalidated = await flow.proponent.client.post(
        f"/v1/domains/{flow.project}/monitoring-periods/{period}/credential-request",
        json={"step": "submission"},
    )
    assert error(unvalidated, 409) == "project_not_validated"
    assert flow.project in unvalidated.text
    # An admin cannot accredit either.
    admin = await registry.client.post(
        f"/v1/domains/{flow.project}/credential-request",
        json={"step": "accreditation", "verifier": flow.verifier.did},
    )
    assert error(admin, 403) == "forbidden"
    await accredit(flow, flow.verifier, flow.project)
    placeholder = {
        "EF_grid": {
            "value": 0.5,
            "unit": "tCO2/MWh",
            "source": "none yet",
            "year": 2024,
            "evidence": None,
            "status": "placeholder",
        }
    }
    from tests.support.workflow_world import validate

    await validate(flow, project_document(**placeholder))
    blocked = await flow.proponent.client.post(
        f"/v1/domains/{flow.project}/monitoring-periods/{period}/credential-request",
        json={"step": "submission"},
    )
    assert error(blocked, 409) == "placeholder_parameter"
    assert "parameters.EF_grid" in blocked.text
    view = await flow.verifier.client.get(f"/v1/domains/{flow.project}/project-document")
    assert view.json()["placeholders"] == ["parameters.EF_grid"]
    # The console's documents page says so where the proponent looks.
    async with console(registry) as browser:
        await sign_in(browser, await registry.key(flow.proponent.did, "proponent", "reader"))
        page = await browser.get(f"/console/projects/{flow.project}/documents")
        assert page.status_code == 200, page.text
        assert 'id="placeholders"' in page.text and "parameters.EF_grid" in page.text
        assert "Placeholders block issuance" in page.text


@sqlite_only
async def test_attachments_are_stored_by_their_hash(registry: Registry) -> None:
    flow = await build_workflow(registry, validated=False)
    # A project with no stoves: its period is refused with the reason, never made at zero.
    empty = await flow.world.operator_client.post(
        f"/v1/domains/{flow.project}/monitoring-periods",
        json={"from": "2026-10-01", "to": "2026-10-10"},
    )
    assert error(empty, 409) == "conflict" and "no active stoves" in empty.text
    content = b"calibration certificate 42"
    wrong = "sha256:" + "0" * 64
    refused = await flow.proponent.client.post(f"/v1/attachments?digest={wrong}", content=content)
    assert error(refused, 422) == "validation_failed" and "does not match" in refused.text
    missing = await flow.proponent.client.get(f"/v1/attachments/{wrong}")
    assert missing.status_code == 404
    document = project_document()
    document["stoveModels"]["EPC-6L"]["testCertificate"] = wrong
    uncited = await flow.proponent.client.post(
        f"/v1/domains/{flow.project}/project-document", json={"document": document}
    )
    assert error(uncited, 422) == "validation_failed" and wrong in uncited.text
    # A model whose case names a figure the document does not fix (case 2 without the
    # stoves' specific consumption), and a document without a country's figures: the
    # paths, nothing stored.
    case_two = project_document()
    case_two["stoveModels"]["EPC-6L"]["case"] = 2
    unfixed = await flow.proponent.client.post(
        f"/v1/domains/{flow.project}/project-document", json={"document": case_two}
    )
    assert error(unfixed, 422) == "validation_failed"
    faults = {d["field"]: d["error"] for d in unfixed.json()["error"]["details"]}
    at = "document.stoveModels.EPC-6L"
    assert faults[f"{at}.specificConsumption"] == "case 2 needs the model's specificConsumption"
    assert faults[f"{at}.efficiency"] == "not used by case 2"
    bare = project_document()
    del bare["parameters"]["fNRB"]  # Kenya: not in the country defaults table
    unset = await flow.proponent.client.post(
        f"/v1/domains/{flow.project}/project-document", json={"document": bare}
    )
    assert error(unset, 422) == "validation_failed" and "no fNRB for KE" in unset.text
    stored = await flow.proponent.client.get(f"/v1/domains/{flow.project}/project-document")
    assert stored.status_code == 404, stored.text  # none of them was stored


@sqlite_only
async def test_stoves_the_document_cannot_credit_are_excluded_with_the_reason(
    registry: Registry,
) -> None:
    """Issue 30's bad input: a meter with no calibration record, a stove naming a model the
    project's document does not fix, one naming none: each excluded with its reason in the
    report and on the console's period page, nothing minted; a bad meter record is refused
    when written (422 with the field's path), the stove's record unchanged."""
    flow = await build_workflow(registry)
    good = await flow.stove()
    # Each cooks its own amount: stoves whose days repeat another's are flagged as clones.
    no_meter, unknown, unnamed = [await flow.stove(kwh_per_day=k) for k in (1.3, 1.7, 2.1)]
    patches = {
        no_meter: {"meter": None},
        unknown: {"stoveModel": "XL-9"},
        unnamed: {"stoveModel": None},
    }
    for stove, properties in patches.items():
        patched = await flow.world.operator_client.patch(
            f"/v1/domains/{stove}", json={"properties": properties}
        )
        assert patched.status_code == 200, patched.text
    before = await registry.client.get(f"/v1/domains/{no_meter}")
    broken = {**meter_record(no_meter), "calibrationDue": "soon", "maxPermissibleError": 2}
    refused = await flow.world.operator_client.patch(
        f"/v1/domains/{no_meter}", json={"properties": {"meter": broken}}
    )
    assert error(refused, 422) == "validation_failed"
    fields = {d["field"] for d in refused.json()["error"]["details"]}
    assert fields == {"properties.meter.calibrationDue", "properties.meter.maxPermissibleError"}
    assert (await registry.client.get(f"/v1/domains/{no_meter}")).json() == before.json()
    created = await flow.world.operator_client.post(
        "/v1/domains",
        json={
            "type": "Device",
            "class": "did:ixo:protocol/clean-cooking",
            "properties": {"serialNumber": "sn-bad-meter", "meter": {"model": "EM-1"}},
            "relationships": {"project": [flow.project]},
        },
    )
    assert error(created, 422) == "validation_failed"
    assert "properties.meter.calibratedOn" in created.text

    minted_before = await minted(registry)
    draft = await flow.draft()
    base = f"/v1/domains/{flow.project}/monitoring-periods/{draft['id']}"
    report = (await flow.verifier.client.get(f"{base}/report")).json()
    assert draft["credits"]["amount"] == METERED_AMOUNT  # the good stove's alone
    reasons = {row["stove"]: row["reason"] for row in report["exclusions"]}
    assert reasons == {
        no_meter: "the meter has no calibration record (properties.meter)",
        unknown: "stove model 'XL-9' is not in the project's design document",
        unnamed: "the stove names no model (properties.stoveModel) of the project's document",
    }
    assert [row["stove"] for row in report["stoves"]] == [good]
    assert await minted(registry) == minted_before  # a draft mints nothing
    async with console(registry) as browser:
        await sign_in(browser, await registry.key(flow.verifier.did, "verifier"))
        page = await browser.get(f"/console/projects/{flow.project}/periods/{draft['id']}")
        assert page.status_code == 200, page.text
        for stove, reason in reasons.items():
            assert stove in page.text and reason.replace("'", "&#39;") in page.text


@sqlite_only
async def test_corrections_send_a_period_back_to_draft_with_its_findings(
    registry: Registry,
) -> None:
    flow = await build_workflow(registry)
    stove = await flow.stove()
    period = (await flow.draft())["id"]
    assert (await flow.step(flow.proponent, period, "submission", "submit")).status_code == 200
    asked = await flow.step(
        flow.verifier,
        period,
        "verification",
        "verification",
        outcome="corrections",
        findings=["household size unconfirmed"],
        sampledStoves=[stove],
    )
    assert asked.status_code == 200, asked.text
    view = asked.json()
    assert view["state"] == "draft"
    assert view["findings"][0]["findings"] == ["household size unconfirmed"]
    # Its days are free again: recomputed and submitted anew, then issued.
    redone = await flow.draft()
    assert redone["id"] == period and redone["findings"] == view["findings"]
    issued = await flow.through(period, [stove])
    assert issued["state"] == "issued"
    # Late data: a reading for a day of the issued period is stored and reported as late;
    # the frozen inputs and the issued report do not move.
    base = f"/v1/domains/{flow.project}/monitoring-periods/{period}"
    report = (await flow.verifier.client.get(f"{base}/report")).json()
    assert (await flow.verifier.client.get(f"{base}/late-data")).json()["late"] == []
    await send_reading(registry, stove, 99_001, "2026-10-01T12:00:00+00:00")
    late = (await flow.verifier.client.get(f"{base}/late-data")).json()
    assert late["creditLateData"] is False
    fields = {(row["stove"], row["day"], row["field"]) for row in late["late"]}
    assert (stove, "2026-10-01", "energy") in fields, late
    assert (await flow.verifier.client.get(f"{base}/report")).json() == report
    assert await registry.platform.monitoring.verify(report) == []
    # The bundle carries what the snapshot saw, and the late reading apart: it still checks.
    bundle = (await flow.verifier.client.get(f"{base}/evidence")).json()
    assert [r["seq"] for r in bundle["lateReadings"][stove]] == [99_001]
    assert verify_bundle(bundle) == []


async def test_a_reading_in_flight_when_the_draft_read_is_late_data(registry: Registry) -> None:
    """A reading received before the draft's snapshot was taken but committed after it had
    read (an ingest in flight at that moment: its receipt time is earlier than the
    snapshot's, yet the snapshot never saw it) is late data for the period: the evidence
    bundle carries it apart, names exactly the readings the frozen days came from, and
    checks. (The frozen rows keep which readings they saw, `seen`; a cut by receipt time
    would put this one behind the days and the bundle would fail its digests.)"""
    flow = await build_workflow(registry)
    stove = await flow.stove()
    period = (await flow.draft())["id"]
    base = f"/v1/domains/{flow.project}/monitoring-periods/{period}"
    async with registry.platform.sessionmaker() as session:
        frozen = orjson.loads(
            await session.scalar(
                select(MonitoringPeriod.inputs).where(MonitoringPeriod.id == period)
            )
        )
    (row,) = frozen["stoves"]
    assert set(row["seen"]) == {day["day"] for day in row["days"]}
    taken_at = datetime.fromisoformat(frozen["takenAt"])
    await send_reading(registry, stove, 99_002, "2026-10-02T12:00:00+00:00", taken_at)
    assert (await flow.through(period, [stove]))["state"] == "issued"
    bundle = (await flow.verifier.client.get(f"{base}/evidence")).json()
    assert [r["seq"] for r in bundle["lateReadings"][stove]] == [99_002]
    assert 99_002 not in [r["seq"] for r in bundle["readings"][stove]]
    assert verify_bundle(bundle) == []


async def test_one_stove_day_one_credit_across_projects(registry: Registry) -> None:
    """A stove linked to two projects: of two concurrent submissions over its days, one
    holds them; the other is told which period did."""
    flow = await build_workflow(registry)
    other = await build_workflow(registry, world=flow.world)
    stove = await flow.stove()
    linked = await flow.world.operator_client.post(
        f"/v1/domains/{stove}/relationships",
        json={"type": "project", "target": other.project},
    )
    assert linked.status_code in (200, 201), linked.text
    first = (await flow.draft())["id"]
    second = (await other.draft())["id"]
    results = await asyncio.gather(
        flow.step(flow.proponent, first, "submission", "submit"),
        other.step(other.proponent, second, "submission", "submit"),
    )
    codes = sorted(r.status_code for r in results)
    assert codes == [200, 409], [r.text for r in results]
    loser = next(r for r in results if r.status_code == 409)
    assert loser.json()["error"]["code"] == "double_counting"
    winner = first if results[0].status_code == 200 else second
    assert f"monitoring period {winner}" in loser.text
    body = orjson.loads(loser.content)
    assert stove in body["error"]["message"]
    # The losing project's draft, recomputed, leaves the stove out and says who holds it;
    # the stove's history stays with the device, whichever project lists it now.
    losing = other if winner == first else flow
    again = await losing.draft()
    report = (
        await losing.world.operator_client.get(
            f"/v1/domains/{losing.project}/monitoring-periods/{again['id']}/report"
        )
    ).json()
    reasons = {row["stove"]: row["reason"] for row in report["exclusions"]}
    assert f"monitoring period {winner}" in reasons[stove], reasons
    # Nor can a claim in the other project credit the stove's days again.
    collection = await losing.world.collection(project=losing.project)
    claimed = await losing.world.operator_client.post(
        f"/v1/claim-collections/{collection['id']}/claims",
        json={"asset": stove, "data": metered_claim()},
    )
    assert claimed.status_code == 201, claimed.text
    approval = await losing.world.oracle_client.post(
        f"/v1/claims/{claimed.json()['id']}/evaluations", json={"status": "approved"}
    )
    assert error(approval, 409) == "double_counting"
    assert f"monitoring period {winner}" in approval.text


def test_keys_new_writes_a_key_only_its_owner_reads(tmp_path: Path) -> None:
    """`twinhub keys new FILE` prints the key's did:key and keeps the seed in FILE (mode
    600); it never overwrites a key."""
    file = tmp_path / "verifier.key"
    made = run_cli("keys", "new", str(file), env={"DATA_DIR": str(tmp_path / "data")})
    assert made.returncode == 0, made.stderr
    did = made.stdout.strip()
    assert did.startswith("did:key:z6Mk")
    assert file.stat().st_mode & 0o777 == 0o600
    from twinhub.security.signing import Issuer

    assert Issuer(bytes.fromhex(orjson.loads(file.read_bytes())["seed"])).did == did
    again = run_cli("keys", "new", str(file), env={"DATA_DIR": str(tmp_path / "data")})
    assert again.returncode == 2 and "cannot write" in again.stderr
    assert Issuer(bytes.fromhex(orjson.loads(file.read_bytes())["seed"])).did == did


async def test_a_draft_reads_its_raw_readings_a_chunk_of_stoves_at_a_time(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot's digests and seen sequence numbers are the same whether the stoves'
    raw readings are read all at once or one stove at a time (oracle.monitoring's chunks)."""
    from datetime import date

    from twinhub.db.dialects import read_snapshot
    from twinhub.oracle import monitoring

    flow = await build_workflow(registry)
    for kwh in (1.0, 1.3, 1.7):
        await flow.stove(kwh_per_day=kwh)
    platform = registry.platform
    protocol = await platform.monitoring.protocols.get("did:ixo:protocol/clean-cooking-claim")
    frozen = []
    for chunk in (1, 500):
        monkeypatch.setattr(monitoring, "_READINGS_CHUNK", chunk)
        async with read_snapshot(platform.sessionmaker) as session:
            made = await platform.monitoring.inputs(
                session, flow.project, date(2026, 10, 1), date(2026, 10, 10), protocol
            )
        frozen.append({**made.frozen, "takenAt": None})
    assert frozen[0] == frozen[1]
    stoves = frozen[0]["stoves"]
    assert len(stoves) == 3 and all(len(row["seen"]) == 10 for row in stoves)
    digests = [day["readings"] for row in stoves for day in row["days"]]
    assert len(digests) == 30 and len(set(digests)) == 30
