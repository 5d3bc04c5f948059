"""Telemetry as evidence (issue 29 §6, issue 30 §6), on both backends: device keys and
signed batches kept with their signatures and receipt times, readings whose time cannot
be trusted quarantined (no rollup, no partition), and evidence holds the retention job
honours."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import orjson
import pytest
from sqlalchemy import func, select, text

from tests.conftest import Registry, unique
from tests.integration.registry.test_registry_rules import error_of
from tests.support.telemetry_world import STOVE, Farm, at, build_farm
from twinhub.db.models import TelemetryDevice, TelemetryQuarantine, TelemetryReceipt
from twinhub.security.device_signatures import device_public_key, sign_batch, verify_batch
from twinhub.services.evidence import evidence_readings, hold_evidence, release_evidence

SEED = bytes(range(32))
OTHER_SEED = bytes(range(1, 33))


@pytest.fixture
async def farm(registry: Registry) -> AsyncIterator[Farm]:
    yield await build_farm(registry)


async def send_signed(farm: Farm, did: str, body: dict[str, Any], signature: str | None) -> Any:
    """POST a batch as a device formats it (its own spacing and key order), signed."""
    raw = json.dumps(body, indent=1, sort_keys=False).encode()
    headers = {"Content-Type": "application/json"}
    if signature is not None:
        headers["Device-Signature"] = signature
    async with farm.device(did) as client:
        return await client.post(f"/v1/domains/{did}/telemetry", content=raw, headers=headers)


async def count(registry: Registry, did: str) -> int:
    return (await registry.client.get(f"/v1/domains/{did}/state")).json()["readings"]


async def test_a_device_with_a_key_signs_every_batch_and_its_signature_is_kept(
    farm: Farm,
) -> None:
    stove = await farm.stove()
    client = farm.registry.client
    bad = await client.post(f"/v1/domains/{stove}/device-key", json={"publicKey": "z6Mknope"})
    assert error_of(bad, 422)["details"][0]["field"] == "publicKey"
    key = device_public_key(SEED)
    enrolled = await client.post(f"/v1/domains/{stove}/device-key", json={"publicKey": key})
    assert enrolled.status_code == 200, enrolled.text
    assert enrolled.json()["current"]["publicKey"] == key
    now = datetime.now(UTC)
    body = {"readings": [{"values": {"energyKwh": 0.5}, "time": at(now, -2), "seq": 1}]}
    # Unsigned, or signed by another key, or a signed batch altered: refused, nothing stored.
    unsigned = error_of(await send_signed(farm, stove, body, None), 403, "bad_signature")
    assert key in unsigned["message"]
    assert unsigned["details"][0]["field"] == "Device-Signature"
    forged = await send_signed(farm, stove, body, sign_batch(OTHER_SEED, body))
    assert "does not verify" in error_of(forged, 403, "bad_signature")["message"]
    altered = {"readings": [{**body["readings"][0], "values": {"energyKwh": 5.0}}]}
    assert (await send_signed(farm, stove, altered, sign_batch(SEED, body))).status_code == 403
    assert await count(farm.registry, stove) == 0
    # Signed over the canonical form: the device's own formatting does not matter.
    stored = await send_signed(farm, stove, body, sign_batch(SEED, body))
    assert stored.status_code == 200 and stored.json()["accepted"] == 1, stored.text
    export = (await client.get(f"/v1/domains/{stove}/telemetry")).json()
    item = export["items"][0]
    assert item["seq"] == 1 and item["values"] == {"energyKwh": 0.5}
    received = datetime.fromisoformat(item["receivedAt"])
    assert abs((received - datetime.now(UTC)).total_seconds()) < 60
    receipt = export["receipts"][str(item["receipt"])]
    (signature,) = receipt["signatures"]
    assert signature["type"] == "ed25519-jcs" and signature["publicKey"] == key
    assert "RFC 8785" in signature["check"]
    # Anyone holding the export checks it again, without twinhub.
    assert verify_batch(key, orjson.loads(receipt["payload"]), signature["value"])
    # Rotated: the old key's batches are refused, the listing keeps both keys.
    rotated = await client.post(
        f"/v1/domains/{stove}/device-key", json={"publicKey": device_public_key(OTHER_SEED)}
    )
    assert [k["revokedAt"] is None for k in rotated.json()["keys"]] == [True, False]
    body2 = {"readings": [{"seq": 2, "time": at(now, -1), "values": {"energyKwh": 0.5}}]}
    assert (await send_signed(farm, stove, body2, sign_batch(SEED, body2))).status_code == 403
    assert (await send_signed(farm, stove, body2, sign_batch(OTHER_SEED, body2))).status_code == 200
    # Withdrawn: the device sends unsigned again; a signature then is an error, not ignored.
    assert (await client.delete(f"/v1/domains/{stove}/device-key")).json()["current"] is None
    body3 = {"readings": [{"seq": 3, "time": at(now, -0.5), "values": {"energyKwh": 0.5}}]}
    signed_anyway = await send_signed(farm, stove, body3, sign_batch(OTHER_SEED, body3))
    assert error_of(signed_anyway, 422)["details"][0]["field"] == "Device-Signature"
    assert (await farm.send(stove, body3["readings"])).status_code == 200
    # The evidence of the device's days: which readings came signed, and by what.
    async with farm.registry.platform.sessionmaker() as session:
        evidence = await evidence_readings(
            session, stove, now.date() - timedelta(days=1), now.date()
        )
    assert [r["seq"] for r in evidence["readings"]] == [1, 2, 3]
    assert evidence["signed"] == 2 and evidence["readings"][2]["receipt"] is None
    assert {s["publicKey"] for r in evidence["receipts"].values() for s in r["signatures"]} == {
        key,
        device_public_key(OTHER_SEED),
    }


async def test_readings_with_untrustworthy_times_are_quarantined_never_rolled_up(
    farm: Farm,
) -> None:
    registry = farm.registry
    enrolled = datetime.now(UTC) - timedelta(days=20)
    created = await registry.client.post(
        "/v1/domains",
        json={
            "type": "Device",
            "class": STOVE,
            "id": unique("stove"),
            "metadata": {"name": "stove"},
            "relationships": {"project": [farm.project]},
            "validFrom": enrolled.isoformat(),
        },
    )
    assert created.status_code == 201, created.text
    stove = created.json()["did"]
    token = await registry.client.post(f"/v1/domains/{stove}/device-tokens", json={})
    farm.tokens[stove] = token.json()["token"]
    now = datetime.now(UTC)
    batch = [
        {"seq": 1, "time": "1970-01-01T00:00:00Z", "values": {"energyKwh": 1.0}},
        {"seq": 2, "time": at(now, 3), "values": {"energyKwh": 1.0}},
        {"seq": 3, "time": at(enrolled, -1), "values": {"energyKwh": 1.0}},
        {"seq": 4, "time": at(now, -1), "values": {"energyKwh": 0.5}},
    ]
    body = (await farm.send(stove, batch)).json()
    assert (body["accepted"], body["rejected"], body["quarantined"]) == (1, 0, 3)
    reasons = {q["seq"]: q["reason"] for q in body["quarantines"]}
    assert reasons == {
        1: "before the device's enrolment",
        2: "ahead of its receipt time",
        3: "before the device's enrolment",
    }
    # Sent again: stored once, still quarantined, never in the readings.
    again = (await farm.send(stove, batch)).json()
    assert again["quarantined"] == 3 and again["duplicates"] == 1
    listed = (await registry.client.get(f"/v1/domains/{stove}/telemetry/quarantine")).json()
    assert sorted(item["seq"] for item in listed["items"]) == [1, 2, 3]
    assert all(item["receivedAt"] and item["values"] for item in listed["items"])
    history = (await registry.client.get(f"/v1/domains/{stove}/telemetry")).json()
    assert [item["seq"] for item in history["items"]] == [4]
    for scope in (stove, farm.project):
        months = await registry.client.get(
            f"/v1/domains/{scope}/telemetry/aggregates",
            params={"interval": "month", "from": "1970-01-01T00:00:00Z"},
        )
        buckets = months.json()["buckets"]
        assert [b["fields"]["energyKwh"]["sum"] for b in buckets] == [0.5]
    counters = (await registry.client.get("/v1/telemetry/rejections")).json()["counters"]
    assert counters["quarantined"] == 6
    metrics = (await registry.client.get("/metrics")).text
    assert 'twinhub_telemetry_readings_total{outcome="quarantined"} 6.0' in metrics
    engine = registry.platform.engine
    async with engine.connect() as connection:
        stored = await connection.scalar(
            select(func.count())
            .select_from(TelemetryQuarantine)
            .where(TelemetryQuarantine.device_did == stove)
        )
        assert stored == 3
        if engine.dialect.name == "postgresql":
            partitions = await connection.scalars(
                text(
                    "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                    " JOIN pg_class p ON p.oid = i.inhparent"
                    " WHERE p.relname = 'telemetry_readings'"
                )
            )
            months = {name[-6:] for name in partitions}
            assert "197001" not in months and f"{now:%Y%m}" in months
    # A device with no enrolment date still has the past limit (TELEMETRY_PAST_SKEW_DAYS).
    plain = await farm.stove()
    old = await farm.send(
        plain, [{"seq": 1, "time": "1970-01-01T00:00:00Z", "values": {"energyKwh": 1}}]
    )
    assert old.json()["quarantines"][0]["reason"] == "too long before its receipt time"


async def test_retention_deletes_unheld_readings_and_keeps_held_ones(farm: Farm) -> None:
    registry = farm.registry
    platform = registry.platform
    held, loose = await farm.stove(), await farm.stove()
    old = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0) - timedelta(
        days=100
    )
    recent = datetime.now(UTC) - timedelta(days=2)
    for stove in (held, loose):
        readings = [
            {"seq": 1, "time": old.isoformat(), "values": {"energyKwh": 1.0}},
            {"seq": 2, "time": (old + timedelta(days=1)).isoformat(), "values": {"energyKwh": 1.0}},
            {"seq": 3, "time": recent.isoformat(), "values": {"energyKwh": 1.0}},
        ]
        assert (await farm.send(stove, readings)).json()["accepted"] == 3
    async with platform.sessionmaker.begin() as session:
        until = await hold_evidence(
            session,
            "monitoring-period:test",
            [held],
            old.date(),
            old.date(),  # the first old day only
            crediting_period_end=date(2031, 12, 31),
            years=2,
        )
    assert until == date(2033, 12, 31)

    async def seqs(stove: str) -> list[int]:
        items = (await registry.client.get(f"/v1/domains/{stove}/telemetry")).json()["items"]
        return [item["seq"] for item in items]

    store = platform.telemetry.store
    assert await store.prune(datetime.now(UTC) - timedelta(days=30)) >= 3
    assert await seqs(held) == [1, 3]  # the held day stays, the unheld old day goes
    assert await seqs(loose) == [3]
    async with platform.sessionmaker.begin() as session:
        assert await release_evidence(session, "monitoring-period:test") == 1
    await store.prune(datetime.now(UTC) - timedelta(days=30))
    assert await seqs(held) == [3]


async def test_an_mqtt_style_receipt_row_is_dropped_with_its_last_reading(farm: Farm) -> None:
    """Receipts go with the last reading they carry (the retention job keeps none alone)."""
    stove = await farm.stove()
    key = device_public_key(SEED)
    await farm.registry.client.post(f"/v1/domains/{stove}/device-key", json={"publicKey": key})
    old = datetime.now(UTC) - timedelta(days=100)
    body = {"readings": [{"seq": 1, "time": old.isoformat(), "values": {"energyKwh": 1.0}}]}
    assert (await send_signed(farm, stove, body, sign_batch(SEED, body))).status_code == 200
    engine = farm.registry.platform.engine

    async def receipts() -> int:
        async with engine.connect() as connection:
            return await connection.scalar(
                select(func.count())
                .select_from(TelemetryReceipt)
                .join(TelemetryDevice, TelemetryDevice.id == TelemetryReceipt.device_id)
                .where(TelemetryDevice.did == stove)
            )

    assert await receipts() == 1
    await farm.registry.platform.telemetry.store.prune(datetime.now(UTC) - timedelta(days=30))
    assert await receipts() == 0
