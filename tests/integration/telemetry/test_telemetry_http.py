"""Telemetry over HTTP on both backends (issue 12, points 1-3, 5-7 and the bad inputs):
device tokens, protocol-declared telemetry, batch ingestion with dedupe by seq, state,
history paging, aggregates from rollups, and every bad input with its JSON error."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from tests.conftest import Registry, RegistryFactory
from tests.integration.registry.test_registry_rules import error_of
from tests.support.telemetry_world import Farm, at, build_farm, day_start


@pytest.fixture
async def farm(registry: Registry) -> AsyncIterator[Farm]:
    yield await build_farm(registry)


async def test_the_stove_protocol_declares_its_telemetry(registry: Registry) -> None:
    response = await registry.client.get("/v1/protocols/did:ixo:protocol/clean-cooking")
    fields = response.json()["telemetry"]["fields"]
    assert fields["meterKwh"]["cumulative"] is True
    assert {"session", "energyKwh", "fuelKg", "temperatureC", "batteryPct", "faultCode"} <= set(
        fields
    )


async def test_a_protocol_declaration_is_checked(registry: Registry) -> None:
    bad = {
        "type": "Protocol",
        "name": "Meter",
        "twinClass": "physical",
        "telemetry": {
            "fields": {
                "a": {"type": "number", "cumulative": True},
                "b": {"type": "integer", "cumulative": True},
                "c": {"type": "string", "min": 1},
                "d": {"type": "complex"},
                "e": {"type": "number", "min": 5, "max": 1},
            }
        },
    }
    error = error_of(await registry.client.post("/v1/protocols", json=bad), 422)
    fields = {d["field"] for d in error["details"]}
    assert {
        "telemetry.fields",
        "telemetry.fields.c.min",
        "telemetry.fields.d.type",
        "telemetry.fields.e",
    } <= fields
    good = {**bad, "telemetry": {"fields": {"flow": {"type": "number", "unit": "l/min"}}}}
    created = await registry.client.post("/v1/protocols", json=good)
    assert created.status_code == 201, created.text
    assert created.json()["effective"]["telemetry"] == good["telemetry"]


async def test_tokens_are_shown_once_listed_rotated_and_revoked(farm: Farm) -> None:
    stove = await farm.stove()
    client = farm.registry.client
    listed = (await client.get(f"/v1/domains/{stove}/device-tokens")).json()["items"]
    assert len(listed) == 1 and "token" not in listed[0] and listed[0]["revokedAt"] is None
    old = farm.tokens[stove]
    now = datetime.now(UTC)
    assert (
        await farm.send(stove, [{"seq": 1, "time": at(now, -1), "values": {"batteryPct": 90}}])
    ).status_code == 200
    rotated = await client.post(f"/v1/domains/{stove}/device-tokens/{listed[0]['id']}/rotate")
    assert rotated.status_code == 200, rotated.text
    new = rotated.json()["token"]
    farm.registry.platform.device_tokens._cache.clear()
    error_of(
        await farm.send(stove, [{"seq": 2, "time": at(now, -1), "values": {"batteryPct": 1}}], old),
        401,
    )
    assert (
        await farm.send(stove, [{"seq": 2, "time": at(now, -1), "values": {"batteryPct": 1}}], new)
    ).status_code == 200
    revoked = await client.delete(f"/v1/domains/{stove}/device-tokens/{rotated.json()['id']}")
    assert revoked.json()["revokedAt"] is not None
    error_of(
        await farm.send(stove, [{"seq": 3, "time": at(now, -1), "values": {"batteryPct": 1}}], new),
        401,
    )
    # Only physical twins have devices; only controllers enrol them.
    error_of(await client.post(f"/v1/domains/{farm.project}/device-tokens"), 409)
    stranger = farm.registry.as_key(await farm.registry.key("did:ixo:org/stranger", "writer"))
    async with stranger:
        error_of(await stranger.post(f"/v1/domains/{stove}/device-tokens"), 403)
    # A device token is not an API key: it reads nothing.
    async with farm.device(stove, new) as device:
        error_of(await device.get(f"/v1/domains/{stove}"), 401)


async def test_a_batch_is_stored_once_per_seq_and_counted(farm: Farm) -> None:
    stove = await farm.stove()
    base = datetime.now(UTC) - timedelta(hours=5)
    batch = [
        {"seq": i, "time": at(base, i / 10), "values": {"energyKwh": 0.5, "meterKwh": 10 + i / 2}}
        for i in range(1, 11)
    ]
    first = await farm.send(stove, batch)
    assert first.json() == {
        "accepted": 10,
        "duplicates": 0,
        "rejected": 0,
        "rejections": [],
        "quarantined": 0,
        "quarantines": [],
    }
    # The same batch again, plus a repeated seq with another time, plus two new readings.
    again = [
        *batch,
        {"seq": 3, "time": at(base, 3), "values": {"energyKwh": 9}},
        {"seq": 11, "time": at(base, 1.1), "values": {"energyKwh": 0.5}},
        {"seq": 11, "time": at(base, 1.1), "values": {"energyKwh": 0.5}},
    ]
    second = (await farm.send(stove, again)).json()
    assert (second["accepted"], second["duplicates"], second["rejected"]) == (1, 12, 0)
    history = await farm.registry.client.get(
        f"/v1/domains/{stove}/telemetry", params={"limit": 100}
    )
    items = history.json()["items"]
    assert [r["seq"] for r in items] == list(range(1, 12))
    assert sum(r["values"]["energyKwh"] for r in items) == pytest.approx(5.5)


async def test_bad_readings_are_rejected_with_index_and_reason(farm: Farm) -> None:
    stove = await farm.stove()
    now = datetime.now(UTC)
    batch = [
        {"seq": 1, "time": at(now, -1), "values": {"energyKwh": 1.0}},  # fine
        {"seq": 2, "time": at(now, -1), "values": {"energyKwh": "lots"}},  # wrong type
        {"seq": 3, "time": at(now, -1), "values": {"batteryPct": 140}},  # out of range
        {"seq": 4, "time": at(now, -1), "values": {"humidity": 3}},  # unknown field
        {"seq": 5, "values": {"energyKwh": 1}},  # missing time
        {"seq": 6, "time": "2026-01-01 10:00", "values": {"energyKwh": 1}},  # not RFC 3339
        {"seq": 7, "time": at(now, 2), "values": {"energyKwh": 1}},  # future: quarantined
        {"seq": -1, "time": at(now, -1), "values": {"energyKwh": 1}},  # bad seq
        {"time": at(now, -1), "values": {"energyKwh": 1}},  # missing seq
        {"seq": 8, "time": at(now, -1), "values": {"faultCode": "exploded"}},  # not in enum
        {"seq": 9, "time": at(now, -1), "values": {}},  # no values
        {"seq": 10, "time": at(now, -1), "values": {"energyKwh": 1}, "extra": 1},  # unknown
        "not a reading",
        {"seq": 11, "time": at(now - timedelta(days=40), 0), "values": {"energyKwh": 2.0}},  # late
    ]
    body = (await farm.send(stove, batch)).json()
    assert (body["accepted"], body["duplicates"], body["rejected"]) == (2, 0, 11)
    assert body["quarantined"] == 1 and body["quarantines"][0]["seq"] == 7
    assert body["quarantines"][0]["reason"] == "ahead of its receipt time"
    reasons = {r["index"]: r for r in body["rejections"]}
    assert reasons[1]["field"] == "readings[1].values.energyKwh"
    assert "above the maximum" in reasons[2]["error"]
    assert reasons[3]["field"] == "readings[3].values.humidity"
    assert reasons[4]["field"] == "readings[4].time" and reasons[4]["error"] == "required"
    assert "RFC 3339" in reasons[5]["error"]
    assert 6 not in reasons
    assert reasons[7]["field"] == "readings[7].seq" and reasons[8]["field"] == "readings[8].seq"
    assert "expected one of" in reasons[9]["error"]
    assert reasons[10]["field"] == "readings[10].values"
    assert reasons[11]["field"] == "readings[11].extra"
    assert reasons[12]["field"] == "readings[12]"
    history = await farm.registry.client.get(f"/v1/domains/{stove}/telemetry")
    assert [r["seq"] for r in history.json()["items"]] == [11, 1]  # the late one is oldest
    # Nothing valid at all: a 422 in the API's error shape, one detail per reading.
    error = error_of(await farm.send(stove, batch[1:4]), 422, "validation_failed")
    assert [d["field"] for d in error["details"]] == [
        "readings[0].values.energyKwh",
        "readings[1].values.batteryPct",
        "readings[2].values.humidity",
    ]


async def test_bad_requests_get_json_errors(make_registry: RegistryFactory) -> None:
    registry = await make_registry(telemetry_batch_size=5, telemetry_rate_limit="4/minute")
    farm = await build_farm(registry)
    stove, other = await farm.stove(), await farm.stove()
    url = f"/v1/domains/{stove}/telemetry"
    reading = {"seq": 1, "time": at(datetime.now(UTC), -1), "values": {"energyKwh": 1}}
    async with farm.device(stove) as device:
        error_of(await device.post(url, content=b"{not json"), 400, "malformed_json")
        error_of(await device.post(url, json=[reading]), 422)
        error_of(await device.post(url, json={"readings": [reading], "x": 1}), 422)
        error_of(await device.post(url, json={"readings": []}), 422)
    error_of(await farm.send(stove, [reading] * 6), 413, "too_large")
    # Another device's token, no token, an API key instead of a device token.
    error_of(await farm.send(stove, [reading], farm.tokens[other]), 403, "forbidden")
    async with registry.as_key(None) as anonymous:
        error_of(await anonymous.post(url, json={"readings": [reading]}), 401)
    async with registry.as_key("thd_nope_nope") as forged:
        error_of(await forged.post(url, json={"readings": [reading]}), 401)
    error_of(await registry.client.post(url, json={"readings": [reading]}), 401)
    # An oversized body never reaches the handler.
    async with farm.device(stove) as device:
        huge = b'{"readings": [' + b" " * 2_000_000 + b"]}"
        error_of(await device.post(url, content=huge), 413)
    # The flood: the stove's own limit (4/minute, 5 requests above spent) answers 429,
    # while another stove still writes.
    flooded = await farm.send(stove, [reading])
    error_of(flooded, 429, "rate_limited")
    assert int(flooded.headers["Retry-After"]) >= 1
    assert (await farm.send(other, [reading])).status_code == 200
    rejections = (await registry.client.get("/v1/telemetry/rejections")).json()
    assert any(r["reason"] == "rate limited" for r in rejections["items"])
    relayed = registry.settings.storage.redis_url is not None
    assert rejections["live"] == {"relayed": relayed, "dropped": 0, "relayDropped": 0}
    reader = registry.as_key(await registry.key("did:ixo:org/reader", "reader"))
    async with reader:
        error_of(await reader.get("/v1/telemetry/rejections"), 403)


async def test_state_history_and_aggregates_add_up(farm: Farm) -> None:
    stoves = [await farm.stove(), await farm.stove()]
    day = day_start(3)
    # Stove 0: 3 readings in hour 8 and 1 in hour 18 of one day; stove 1: 2 readings.
    await farm.send(
        stoves[0],
        [
            {"seq": 1, "time": at(day, 8.0), "values": {"session": "start", "meterKwh": 100.0}},
            {"seq": 2, "time": at(day, 8.5), "values": {"energyKwh": 0.4, "temperatureC": 80}},
            {"seq": 3, "time": at(day, 8.9), "values": {"energyKwh": 0.6, "meterKwh": 101.0}},
            {"seq": 4, "time": at(day, 18.0), "values": {"energyKwh": 1.5, "meterKwh": 102.5}},
        ],
    )
    await farm.send(
        stoves[1],
        [
            {"seq": 1, "time": at(day, 8.2), "values": {"energyKwh": 2.0, "meterKwh": 50}},
            {"seq": 2, "time": at(day + timedelta(days=1), 7), "values": {"energyKwh": 1.0}},
        ],
    )
    client = farm.registry.client
    hourly = (
        await client.get(
            f"/v1/domains/{stoves[0]}/telemetry/aggregates",
            params={"interval": "hour", "from": day.isoformat(), "to": at(day, 24)},
        )
    ).json()
    assert [b["start"] for b in hourly["buckets"]] == [at(day, 8), at(day, 18)]
    energy = hourly["buckets"][0]["fields"]["energyKwh"]
    assert energy == {"count": 2, "sum": 1.0, "min": 0.4, "max": 0.6, "mean": 0.5}
    assert hourly["buckets"][0]["fields"]["meterKwh"]["max"] == 101.0
    # The project sums its stoves: day 1 has 1.0 + 1.5 + 2.0 kWh in four readings.
    daily = (
        await client.get(
            f"/v1/domains/{farm.project}/telemetry/aggregates", params={"interval": "day"}
        )
    ).json()
    first, second = daily["buckets"]
    assert first["start"] == day.isoformat()
    assert first["fields"]["energyKwh"]["count"] == 4
    assert first["fields"]["energyKwh"]["sum"] == pytest.approx(4.5)
    assert second["fields"]["energyKwh"]["sum"] == pytest.approx(1.0)
    organisation = (
        await client.get(
            f"/v1/domains/{farm.organisation}/telemetry/aggregates", params={"interval": "month"}
        )
    ).json()
    assert sum(b["fields"]["energyKwh"]["sum"] for b in organisation["buckets"]) == pytest.approx(
        5.5
    )
    # State: the newest value of each field, the meter, offline (3 days quiet).
    state = (await client.get(f"/v1/domains/{stoves[0]}/state")).json()
    assert state["meterField"] == "meterKwh" and state["meterTotal"] == 102.5
    assert state["latest"]["temperatureC"]["value"] == 80
    assert state["latest"]["session"]["value"] == "start"
    assert state["lastSeq"] == 4 and state["online"] is False and state["readings"] == 4
    # A late reading older than what the twin holds changes no latest value.
    await farm.send(stoves[0], [{"seq": 5, "time": at(day, 1), "values": {"meterKwh": 99.0}}])
    assert (await client.get(f"/v1/domains/{stoves[0]}/state")).json()["meterTotal"] == 102.5
    await farm.send(
        stoves[0], [{"seq": 6, "time": at(datetime.now(UTC), -0.01), "values": {"batteryPct": 50}}]
    )
    assert (await client.get(f"/v1/domains/{stoves[0]}/state")).json()["online"] is True
    # History pages in time order with a cursor; from/to bound it.
    seen: list[int] = []
    cursor = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await client.get(f"/v1/domains/{stoves[0]}/telemetry", params=params)).json()
        seen += [r["seq"] for r in page["items"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == [5, 1, 2, 3, 4, 6]
    bounded = await client.get(
        f"/v1/domains/{stoves[0]}/telemetry", params={"from": at(day, 8.4), "to": at(day, 9)}
    )
    assert [r["seq"] for r in bounded.json()["items"]] == [2, 3]
    error_of(await client.get(f"/v1/domains/{stoves[0]}/telemetry", params={"cursor": "@@"}), 422)
    error_of(
        await client.get(f"/v1/domains/{stoves[0]}/telemetry", params={"from": "yesterday"}), 422
    )
    error_of(
        await client.get(
            f"/v1/domains/{stoves[0]}/telemetry/aggregates", params={"interval": "week"}
        ),
        422,
    )
    error_of(await client.get("/v1/domains/did:ixo:entity/nobody/state"), 404)


async def test_a_deactivated_twin_refuses_its_next_batch_at_once(farm: Farm) -> None:
    """The twin's facts are cached between batches; its deactivation's committed event
    (the bus, platform.HANDLERS) drops them, so the very next batch is refused."""
    stove = await farm.stove()
    base = datetime.now(UTC) - timedelta(hours=2)
    sent = await farm.send(stove, [{"seq": 1, "time": at(base, 0), "values": {"energyKwh": 1}}])
    assert sent.status_code == 200, sent.text
    gone = await farm.registry.client.delete(f"/v1/domains/{stove}")
    assert gone.json()["status"] == "deactivated"
    refused = await farm.send(stove, [{"seq": 2, "time": at(base, 1), "values": {"energyKwh": 1}}])
    assert refused.status_code == 409, refused.text
    assert "deactivated" in refused.json()["error"]["message"]
