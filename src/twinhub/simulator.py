"""A device simulator: clean-cooking households driven through the real ingestion paths.

Each stove cooks breakfast and supper (and lunch at weekends), reporting session start and
end, energy, its cumulative meter, temperature and battery. Some stoves go offline for a few
days and then send their buffer as one late batch; one stove in fifty has a faulty meter
(its readings are rejected); some batches are sent twice (stored once). Everything is
deterministic in (stove, day), so a second run of the same days adds nothing.

Readings go over HTTP (the registry app, in process through its ASGI stack, or a server at a
URL) or over MQTT (signed messages to the broker that twinhub subscribes to).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from twinhub.kernel.errors import NotFound
from twinhub.kernel.principals import Principal
from twinhub.services.domains import DomainSpec

SIM_OPERATOR = "did:ixo:org/sim-operator"
SIM_ORGANISATION = "did:ixo:entity/sim-organisation"
SIM_PROJECT = "did:ixo:entity/sim-project"
STOVE_PROTOCOL = "did:ixo:protocol/clean-cooking"
WINDOW = 500  # messages published and not yet handled, at most
STALLED_SECONDS = 30.0  # MQTT: a subscriber that handles nothing for this long is waited no more
EPOCH = datetime(2020, 1, 1, tzinfo=UTC)
Progress = Callable[[int, int], None]


@dataclass
class Totals:
    batches: int = 0
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    failed: int = 0  # requests answered with an error (rate limit, ...)

    def add(self, answer: dict[str, Any]) -> None:
        self.accepted += answer.get("accepted", 0)
        self.duplicates += answer.get("duplicates", 0)
        self.rejected += answer.get("rejected", 0)


@dataclass
class Stove:
    did: str
    token: str
    number: int
    meter: float = 0.0
    buffer: list[dict[str, Any]] = field(default_factory=list)

    @property
    def faulty(self) -> bool:
        return self.number % 50 == 7

    def offline_on(self, day: int) -> bool:
        """One stove in ten is away for four days of every three weeks."""
        return self.number % 10 == 3 and day % 21 in (10, 11, 12, 13)


def day_readings(stove: Stove, day: datetime) -> list[dict[str, Any]]:
    """One household's day: meals as cooking sessions, a battery report."""
    index = (day - EPOCH).days
    rng = random.Random(f"{stove.number}:{index}")  # noqa: S311 (a simulation, not a secret)
    meals = [(6.5, 0.5), (18.5, 0.8)]
    if day.weekday() >= 5:
        meals.insert(1, (12.5, 0.6))
    readings: list[dict[str, Any]] = []
    seq = index * 100

    def add(hours: float, values: dict[str, Any]) -> None:
        nonlocal seq
        seq += 1
        moment = day + timedelta(hours=hours)
        readings.append({"seq": seq, "time": moment.isoformat(), "values": values})

    for start, mean_kwh in meals:
        if rng.random() < 0.1:
            continue  # a meal eaten out
        begin = start + rng.uniform(-0.5, 0.5)
        add(begin, {"session": "start", "temperatureC": round(rng.uniform(18, 30), 1)})
        used = 0.0
        for step in (1, 2):
            energy = round(max(0.05, rng.gauss(mean_kwh / 3, 0.05)), 3)
            used += energy
            add(
                begin + step * 0.25,
                {"energyKwh": energy, "temperatureC": round(rng.uniform(120, 260), 1)},
            )
        last = round(max(0.05, rng.gauss(mean_kwh / 3, 0.05)), 3)
        used += last
        stove.meter = round(stove.meter + used, 3)
        meter = -5.0 if stove.faulty and rng.random() < 0.5 else stove.meter
        values: dict[str, Any] = {"session": "end", "energyKwh": last, "meterKwh": meter}
        if stove.faulty:
            values["faultCode"] = "meter"
        add(begin + 0.75, values)
    add(21.0, {"batteryPct": round(rng.uniform(40, 100), 1)})
    return readings


async def ensure_stoves(platform: Any, count: int, prefix: str = "sim-stove") -> list[Stove]:
    """The simulation's organisation, project and stoves (made once), each with a fresh
    device token."""
    actor = Principal(SIM_OPERATOR, frozenset({"writer"}))

    async def domain(spec: DomainSpec) -> None:
        try:
            await platform.domains.get(f"did:ixo:entity/{spec.local_id}")
        except NotFound:
            await platform.domains.create(spec, actor)

    await domain(
        DomainSpec(
            type="Organisation",
            protocol="did:ixo:protocol/organisation",
            metadata={"name": "Simulated stove operator"},
            controller=[SIM_OPERATOR],
            local_id="sim-organisation",
        )
    )
    await domain(
        DomainSpec(
            type="Project",
            protocol="did:ixo:protocol/project",
            metadata={"name": "Simulated clean cooking"},
            controller=[SIM_OPERATOR],
            relationships={"implementedBy": [SIM_ORGANISATION]},
            local_id="sim-project",
        )
    )
    stoves = []
    for n in range(1, count + 1):
        local = f"{prefix}-{n:05d}"
        await domain(
            DomainSpec(
                type="Device",
                protocol=STOVE_PROTOCOL,
                metadata={"name": f"Simulated stove {n}"},
                controller=[SIM_OPERATOR],
                relationships={"project": [SIM_PROJECT]},
                local_id=local,
            )
        )
        did = f"did:ixo:entity/{local}"
        token, _ = await platform.device_tokens.create(did, actor, "simulator")
        stoves.append(Stove(did, token, n))
    return stoves


def plan(
    stoves: list[Stove], days: int, today: datetime
) -> list[list[tuple[Stove, list[dict[str, Any]]]]]:
    """Per day, the batches each stove sends (offline stoves buffer; some batches twice)."""
    first = today - timedelta(days=days)
    schedule = []
    for d in range(days):
        day = first + timedelta(days=d)
        index = (day - EPOCH).days
        sends = []
        for stove in stoves:
            stove.buffer += day_readings(stove, day)
            if stove.offline_on(index) and d < days - 1:
                continue  # away: it keeps its readings and sends them late
            batch, stove.buffer = stove.buffer, []
            sends.append((stove, batch))
            if (stove.number + index) % 7 == 0:
                sends.append((stove, batch))  # a retry after a lost answer: a duplicate
        schedule.append(sends)
    return schedule


async def send_http(
    client: httpx.AsyncClient,
    schedule: list[list[tuple[Stove, list[dict[str, Any]]]]],
    progress: Progress,
    concurrency: int = 8,
) -> Totals:
    totals = Totals()
    total = sum(len(day) for day in schedule)
    done = 0
    gate = asyncio.Semaphore(concurrency)

    async def one(stove: Stove, batch: list[dict[str, Any]]) -> None:
        nonlocal done
        async with gate:
            response = await client.post(
                f"/v1/domains/{stove.did}/telemetry",
                json={"readings": batch},
                headers={"Authorization": f"Bearer {stove.token}"},
            )
        totals.batches += 1
        body = response.json()
        if response.status_code == 200:
            totals.add(body)
        elif response.status_code == 422:
            totals.rejected += len(body["error"]["details"])
        else:
            totals.failed += 1
        done += 1
        progress(done, total)

    for day in schedule:
        # A stove's batches of one day in order (a duplicate after its original).
        by_stove: dict[str, list[list[dict[str, Any]]]] = {}
        for stove, batch in day:
            by_stove.setdefault(stove.did, []).append(batch)
        stoves = {stove.did: stove for stove, _ in day}

        async def sequence(stove: Stove, batches: list[list[dict[str, Any]]]) -> None:
            for batch in batches:
                await one(stove, batch)

        await asyncio.gather(*(sequence(stoves[did], b) for did, b in by_stove.items()))
    return totals


async def send_mqtt(
    platform: Any,
    schedule: list[list[tuple[Stove, list[dict[str, Any]]]]],
    progress: Progress,
    stalled_seconds: float = STALLED_SECONDS,
) -> Totals:
    """Publish every batch as a signed QoS 1 message and store them through a subscriber of
    this run's own; wait until it has handled them all (stored or dropped), or until it has
    handled nothing for `stalled_seconds` (a running server of the same shared group takes
    its share: the rest is reported as not handled here, never waited for forever).

    The subscriber's broker session is clean and named for this run alone: it ends with
    the run, so a second run finds no session of the first still taking a share."""
    import secrets
    from urllib.parse import urlsplit

    import gmqtt

    from twinhub.telemetry.mqtt import MqttIngest, device_properties, topic_for

    settings = platform.settings
    assert settings.telemetry.mqtt_url is not None, "MQTT_URL is not set"
    ingest = MqttIngest(
        settings.telemetry,
        platform.telemetry,
        platform.device_tokens,
        f"twinhub-simulate-{secrets.token_hex(6)}",
        persistent=False,
    )
    running = asyncio.create_task(ingest.run(), name="simulate-mqtt")
    for _ in range(200):
        if ingest.subscribed:
            break
        await asyncio.sleep(0.05)
    url = urlsplit(settings.telemetry.mqtt_url.get_secret_value())
    tls = url.scheme in ("mqtts", "ssl")
    client = gmqtt.Client(None)
    client.stop_reconnect()
    if url.username:
        client.set_auth_credentials(url.username, url.password)
    before = platform.telemetry.counters.copy()
    sent = 0
    total = sum(len(day) for day in schedule)
    loop = asyncio.get_running_loop()

    def handled() -> int:
        return ingest.stored + ingest.dropped

    async def wait_below(outstanding: int) -> None:
        """Until at most `outstanding` messages are unhandled, or nothing moves."""
        last, moved_at = handled(), loop.time()
        while sent - handled() > outstanding and loop.time() - moved_at < stalled_seconds:
            progress(handled(), total)
            await asyncio.sleep(0.01)
            if handled() != last:
                last, moved_at = handled(), loop.time()

    try:
        await client.connect(
            url.hostname or "127.0.0.1", url.port or (8883 if tls else 1883), ssl=tls
        )
        try:
            for day in schedule:
                for stove, batch in day:
                    payload = json.dumps({"readings": batch}).encode()
                    topic = topic_for(settings.telemetry.mqtt_topic_prefix, stove.did)
                    properties = device_properties(stove.token, payload)
                    while True:
                        try:
                            client.publish(topic, payload, qos=1, user_property=properties)
                            break
                        except OverflowError:  # the broker's Receive Maximum: wait for PUBACKs
                            await asyncio.sleep(0.005)
                    sent += 1
                    # Stay within the broker's per-client queue (Mosquitto drops QoS 1
                    # messages beyond max_queued_messages, which no subscriber would see).
                    await wait_below(WINDOW)
            await wait_below(0)
            progress(handled(), total)
        finally:
            await client.disconnect()
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    after = platform.telemetry.counters
    return Totals(
        batches=sent,
        accepted=after["accepted"] - before["accepted"],
        duplicates=after["duplicates"] - before["duplicates"],
        rejected=after["rejected"] - before["rejected"],
        failed=sent - handled(),
    )


async def simulate(
    platform: Any,
    stoves: int,
    days: int,
    over_mqtt: bool,
    progress: Progress,
    url: str | None = None,
    stove_list: list[Stove] | None = None,
    until: datetime | None = None,
) -> Totals:
    """Make (or find) `stoves` stoves and drive `days` days of their telemetry, the last
    of them the day before `until` (midnight UTC; today's by default)."""
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    devices = stove_list if stove_list is not None else await ensure_stoves(platform, stoves)
    today = until or datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    schedule = plan(devices, days, today)
    if over_mqtt:
        return await send_mqtt(platform, schedule, progress)
    if url:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            return await send_http(client, schedule, progress)
    from twinhub.registry.app import create_registry_app

    app = create_registry_app(platform=platform)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://twinhub") as client:
        return await send_http(client, schedule, progress)
