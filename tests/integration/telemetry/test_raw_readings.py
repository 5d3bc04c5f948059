"""A period's raw readings read through the driver (services.mrv_inputs.stove_readings,
the dialects' `raw_readings`) are exactly what the ORM's read of the same rows gives, on
both backends: times with and without microseconds, text SQLAlchemy wrote in another shape,
values the json module reads otherwise than orjson, readings from signed batches (a
receipt) and from unsigned ones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from tests.conftest import Registry
from tests.integration.telemetry.test_telemetry_evidence import SEED, send_signed
from tests.support.telemetry_world import build_farm
from twinhub.db.models import TelemetryDevice, TelemetryReading
from twinhub.mrv.period_inputs import reading_row, readings_digest, stored_readings_digest
from twinhub.mrv.rollups import day_start
from twinhub.security.device_signatures import device_public_key, sign_batch
from twinhub.services.mrv_inputs import stored_readings, stove_readings


async def orm_readings(
    session: AsyncSession, stoves: list[str], low: datetime, high: datetime
) -> dict[str, list[dict[str, Any]]]:
    """The reference: the readings as the ORM reads them (typed columns), made rows by
    `reading_row`, as stove_readings made them before it read through the driver."""
    found: dict[str, list[dict[str, Any]]] = {did: [] for did in stoves}
    rows = await session.execute(
        select(
            TelemetryDevice.did,
            TelemetryReading.seq,
            TelemetryReading.time,
            TelemetryReading.values,
            TelemetryReading.received_at,
            TelemetryReading.receipt_id,
        )
        .join(TelemetryDevice, TelemetryDevice.id == TelemetryReading.device_id)
        .where(
            TelemetryDevice.did.in_(stoves),
            TelemetryReading.time >= low,
            TelemetryReading.time < high,
        )
        .order_by(TelemetryDevice.did, TelemetryReading.time, TelemetryReading.seq)
    )
    for did, seq, time, values, received, receipt in rows:
        row = reading_row(seq, time, values or {})
        row["receivedAt"] = received.astimezone(UTC).isoformat() if received else None
        row["receipt"] = receipt
        found[did].append(row)
    return found


async def test_the_driver_read_gives_what_the_orm_read_gives(registry: Registry) -> None:
    farm = await build_farm(registry)
    stoves = [await farm.stove(), await farm.stove()]
    base = datetime.now(UTC).replace(hour=6, minute=0, second=0, microsecond=0) - timedelta(days=2)
    plain = [
        {"seq": 1, "time": base.isoformat(), "values": {"energyKwh": 0.5, "meterKwh": 1.0}},
        {
            "seq": 2,
            "time": (base + timedelta(minutes=30, microseconds=500)).isoformat(),
            "values": {"session": "start", "meterKwh": 12.345},
        },
        {
            "seq": 3,
            "time": (base + timedelta(hours=20)).isoformat(),
            "values": {"session": "end", "energyKwh": 1e-7, "meterKwh": 13},
        },
    ]
    response = await farm.send(stoves[0], plain)
    assert response.status_code == 200 and response.json()["accepted"] == 3, response.text
    # A device with a key: its readings name the signed batch they came in.
    client = registry.client
    enrolled = await client.post(
        f"/v1/domains/{stoves[1]}/device-key", json={"publicKey": device_public_key(SEED)}
    )
    assert enrolled.status_code == 200, enrolled.text
    body = {
        "readings": [
            {"seq": 7, "time": (base + timedelta(hours=1)).isoformat(), "values": {"energyKwh": 2}}
        ]
    }
    stored = await send_signed(farm, stoves[1], body, sign_batch(SEED, body))
    assert stored.status_code == 200 and stored.json()["accepted"] == 1, stored.text
    engine = registry.platform.engine
    async with engine.begin() as connection:
        if engine.dialect.name == "sqlite":
            # Text of another shape than SQLAlchemy's own (no microseconds), and values the
            # json module reads otherwise than orjson (a number past 64 bits, NaN).
            await connection.execute(
                text("UPDATE telemetry_readings SET time = substr(time, 1, 19) WHERE seq = 1")
            )
            await connection.execute(
                text(
                    'UPDATE telemetry_readings SET "values" = '
                    '\'{"energyKwh": 123456789012345678901234, "x": NaN}\' WHERE seq = 3'
                )
            )
        else:
            await connection.execute(
                text(
                    'UPDATE telemetry_readings SET "values" = '
                    "'{\"energyKwh\": 123456789012345678901234}'::jsonb WHERE seq = 3"
                )
            )
    low, high = (
        day_start(base.date() - timedelta(days=1)),
        day_start(base.date() + timedelta(days=2)),
    )
    async with registry.platform.sessionmaker() as session:
        expected = await orm_readings(session, stoves, low, high)
        found = await stove_readings(
            session, stoves, base.date() - timedelta(days=1), base.date() + timedelta(days=1)
        )
    assert [len(found[s]) for s in stoves] == [3, 1]
    assert found == expected
    assert found[stoves[1]][0]["receipt"] is not None
    assert found[stoves[0]][1]["time"].endswith(".000500+00:00")
    assert found[stoves[0]][2]["values"]["energyKwh"] == 123456789012345678901234
    assert type(found[stoves[0]][2]["values"]["energyKwh"]) is int


async def test_a_day_digested_from_the_stored_text_is_the_day_digested_from_the_readings(
    registry: Registry,
) -> None:
    """What a draft digests (`stored_readings`, the values' text) and what the evidence
    checks digest (`stove_readings`, the values read) give one digest a stove-day, on both
    backends' text (PostgreSQL's jsonb writes its own spacing), with a reading whose values
    are JSON null read as an empty object by both."""
    farm = await build_farm(registry)
    stove = await farm.stove()
    base = datetime.now(UTC).replace(hour=5, minute=0, second=0, microsecond=0) - timedelta(days=2)
    readings = [
        {
            "seq": seq,
            "time": (base + timedelta(hours=seq * 5, microseconds=seq % 2)).isoformat(),
            "values": {"session": "end", "energyKwh": seq / 4, "meterKwh": float(seq)},
        }
        for seq in range(1, 9)
    ]
    response = await farm.send(stove, readings)
    assert response.status_code == 200 and response.json()["accepted"] == 8, response.text
    engine = registry.platform.engine
    null = "'null'" if engine.dialect.name == "sqlite" else "'null'::jsonb"
    async with engine.begin() as connection:
        await connection.execute(
            text(f'UPDATE telemetry_readings SET "values" = {null} WHERE seq = 4')
        )
    start, end = base.date(), base.date() + timedelta(days=2)
    async with registry.platform.sessionmaker() as session:
        parsed = (await stove_readings(session, [stove], start, end))[stove]
        stored = (await stored_readings(session, [stove], start, end))[stove]
    assert [r["seq"] for r in parsed] == [r[0] for r in stored] == list(range(1, 9))
    days = sorted({r["time"][:10] for r in parsed})
    assert len(days) >= 2
    for day in days:
        assert stored_readings_digest([r for r in stored if r[1][:10] == day]) == readings_digest(
            [r for r in parsed if r["time"][:10] == day]
        )
