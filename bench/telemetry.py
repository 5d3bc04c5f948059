"""Telemetry benchmark (issue 12): ingestion rates, history and aggregate latency, memory.

Everything runs in ONE process pinned to one core (`--cpu`): the platform, the registry app
(reached through its real ASGI stack with httpx's ASGI transport, no sockets), the MQTT
subscriber and the load. The figures are therefore a floor for "one core for the server":
the load client's own work is charged to the same core.

1. HTTP: `--http-batches` batches of 1,000 readings (different stoves), `--concurrency` at a
   time, through `POST /v1/domains/{did}/telemetry`; readings stored per second.
2. MQTT (when the broker at `--mqtt-url` answers): `--mqtt-messages` signed QoS 1 messages
   of one reading each, published to Mosquitto and stored by the shared subscription;
   messages stored per second (publish start to last commit).
3. History: `--stoves` stoves (default 10,000) get `--other-days` days of hourly readings
   each (bulk-seeded into the readings table), one stove a year of hourly readings through
   the ingestion path; then `GET .../telemetry?from=&to=&limit=100` over random month
   windows of that stove: p50/p99.
4. Aggregates: the project of those stoves has a month of rollups kept by ingestion (device
   rows for every stove, project rows summed over all); `GET
   /v1/domains/{project}/telemetry/aggregates?interval=day` for that month: p50/p99.
5. Memory: the process's RSS before and after the floods (1 and 2).
Results go to bench/results/telemetry-<tag>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import socket
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.ussd import pinned_to, run_metadata

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
WINDOW = 800  # messages published but not yet handled, at most
GOALS = {"http": 50_000, "mqtt": 10_000, "history_p99_ms": 20, "aggregates_p99_ms": 100}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--stoves", type=int, default=10_000)
    parser.add_argument("--other-days", type=int, default=1, help="days of data per other stove")
    parser.add_argument("--http-batches", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--mqtt-messages", type=int, default=5000)
    parser.add_argument("--mqtt-url", default="mqtt://127.0.0.1:1883")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--cpu", type=int, default=None, help="core to pin to (default: first)")
    parser.add_argument("--tag", default=time.strftime("%Y%m%d-%H%M%S"))


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def hourly(start: datetime, hours: int, first_seq: int = 1) -> list[dict[str, Any]]:
    return [
        {
            "seq": first_seq + h,
            "time": (start + timedelta(hours=h)).isoformat(),
            "values": {"energyKwh": 0.1 + (h % 7) / 100, "meterKwh": 10 + h * 0.1},
        }
        for h in range(hours)
    ]


async def seed_stoves(platform: Any, count: int, project: str) -> list[str]:
    """`count` stove domains of `project`, written straight into the tables (a bench seed:
    going through the ledger would take longer than the benchmark)."""
    from sqlalchemy import func, insert, select

    from twinhub.db.models import Domain, Relationship, TelemetryDevice, utcnow

    now = utcnow()
    tag = secrets.token_hex(3)
    dids = [f"did:ixo:entity/bench-{tag}-{n:06d}" for n in range(count)]
    async with platform.sessionmaker.begin() as session:
        top = (await session.scalar(select(func.max(Domain.seq)))) or 0
        for start in range(0, count, 2000):
            chunk = dids[start : start + 2000]
            await session.execute(
                insert(Domain),
                [
                    {
                        "did": did,
                        "seq": top + start + i + 1,
                        "type": "Device",
                        "class_did": "did:ixo:protocol/clean-cooking",
                        "twin_class": "physical",
                        "controller": ["did:ixo:org/bench"],
                        "services": [],
                        "credentials": [],
                        "meta": {},
                        "properties": {},
                        "status": "active",
                        "verified": False,
                        "version": 1,
                        "created_at": now,
                        "updated_at": now,
                    }
                    for i, did in enumerate(chunk)
                ],
            )
            await session.execute(
                insert(Relationship),
                [
                    {"source_did": did, "type": "project", "target_did": project, "created_at": now}
                    for did in chunk
                ],
            )
            await session.execute(
                insert(TelemetryDevice),
                [{"did": did, "latest": {}, "readings": 0, "updated_at": now} for did in chunk],
            )
    return dids


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    import httpx

    from twinhub.db.models import TelemetryDevice
    from twinhub.logging import configure_logging
    from twinhub.platform import Platform
    from twinhub.registry.app import create_registry_app
    from twinhub.services.principals import Principal
    from twinhub.settings import Settings
    from twinhub.telemetry.schema import Reading
    from twinhub.telemetry.store import READINGS, rollup_rows

    workdir = Path(tempfile.mkdtemp(prefix="twinhub-bench-telemetry-"))
    database_url = None
    if args.database == "postgresql":
        from bench.claims import create_postgres_database

        database_url = await create_postgres_database(args.postgres_url, "tel" + args.tag[-6:])
    mqtt_on = _broker_up(args.mqtt_url)
    admin_key = secrets.token_hex(24)
    settings = Settings(
        environment="development",
        data_dir=workdir,
        database_url=database_url,
        log_level="warning",
        twinhub_bootstrap_api_key=admin_key,
        telemetry_rate_limit="100000000/minute",
        telemetry_offline_after_seconds=3600,
        registry_max_page_size=1000,
        mqtt_url=args.mqtt_url if mqtt_on else None,
        mqtt_topic_prefix=f"twinhub-bench/{args.tag}",
        mqtt_client_id=f"twinhub-bench-{args.tag}",
    )
    configure_logging("warning", "console")
    platform = Platform(settings)
    await platform.start()
    app = create_registry_app(platform=platform)
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://bench",
        headers={"Authorization": f"Bearer {admin_key}"},
        timeout=120,
    )
    result: dict[str, Any] = {"database": args.database, "stoves": args.stoves}
    try:
        actor = Principal("did:ixo:org/bench", frozenset({"admin"}))
        project = await client.post(
            "/v1/domains",
            json={"type": "Project", "class": "did:ixo:protocol/project", "metadata": {}},
        )
        project_did = project.json()["did"]
        print(f"seeding {args.stoves} stoves ...", flush=True)
        stoves = await seed_stoves(platform, args.stoves, project_did)
        rss_start = rss_mib()

        # 1. HTTP flood
        now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        writers = stoves[1 : 1 + args.http_batches]
        tokens = {did: (await platform.device_tokens.create(did, actor))[0] for did in writers}
        bodies = {
            did: json.dumps({"readings": hourly(now - timedelta(hours=1000), 1000)}).encode()
            for did in writers
        }
        gate = asyncio.Semaphore(args.concurrency)

        async def send(did: str) -> int:
            async with gate:
                response = await client.post(
                    f"/v1/domains/{did}/telemetry",
                    content=bodies[did],
                    headers={
                        "Authorization": f"Bearer {tokens[did]}",
                        "Content-Type": "application/json",
                    },
                )
            assert response.status_code == 200, response.text
            return int(response.json()["accepted"])

        started = time.perf_counter()
        stored = sum(await asyncio.gather(*(send(did) for did in writers)))
        seconds = time.perf_counter() - started
        result["http"] = {
            "readings": stored,
            "seconds": round(seconds, 3),
            "readings_per_second": round(stored / seconds),
        }
        result["rss_after_http_mib"] = round(rss_mib(), 1)
        print(f"HTTP: {stored} readings in {seconds:.2f} s = {stored / seconds:,.0f} readings/s")
        # The same flood again (new seqs, older times): growing memory would show here.
        bodies = {
            did: json.dumps(
                {"readings": hourly(now - timedelta(hours=2000), 1000, first_seq=1001)}
            ).encode()
            for did in writers
        }
        started = time.perf_counter()
        again = sum(await asyncio.gather(*(send(did) for did in writers)))
        result["http_again"] = {
            "readings_per_second": round(again / (time.perf_counter() - started))
        }
        result["rss_after_http_2_mib"] = round(rss_mib(), 1)
        print(
            f"HTTP again: {result['http_again']['readings_per_second']:,} readings/s; RSS "
            f"{result['rss_after_http_mib']} MiB after the first flood, "
            f"{result['rss_after_http_2_mib']} MiB after the second"
        )

        # 2. MQTT flood
        if mqtt_on:
            result["mqtt"] = await mqtt_flood(platform, stoves, args, actor, 10_000_000)
            result["rss_after_mqtt_1_mib"] = round(rss_mib(), 1)
            # The same flood again (new seqs): memory that keeps growing would show here.
            again = await mqtt_flood(platform, stoves, args, actor, 20_000_000)
            result["mqtt_again"] = again
            result["rss_after_mqtt_2_mib"] = round(rss_mib(), 1)
            print(
                f"MQTT again: {again['messages_per_second']:,} messages/s; RSS "
                f"{result['rss_after_mqtt_1_mib']} MiB after the first flood, "
                f"{result['rss_after_mqtt_2_mib']} MiB after the second"
            )
            print(
                f"MQTT: {result['mqtt']['messages']} messages in {result['mqtt']['seconds']} s"
                f" = {result['mqtt']['messages_per_second']:,} messages/s"
            )
        else:
            result["mqtt"] = {"skipped": f"no broker at {args.mqtt_url}"}
            print(f"MQTT: skipped (no broker at {args.mqtt_url})")
        result["rss_after_floods_mib"] = round(rss_mib(), 1)

        # 3. History among many stoves
        print(f"seeding {args.other_days} day(s) of hourly readings for every stove ...")
        ids = {}
        async with platform.sessionmaker() as session:
            from sqlalchemy import select

            for did, device_id in await session.execute(
                select(TelemetryDevice.did, TelemetryDevice.id).where(
                    TelemetryDevice.did.in_(stoves[: args.stoves])
                )
            ):
                ids[did] = device_id
        start = now - timedelta(days=400)
        others = stoves[1 + args.http_batches :]
        await platform.telemetry.store.ensure_partitions(
            [start + timedelta(days=d) for d in range(0, 402, 20)]
        )
        hours = 24 * args.other_days
        rows = []
        for did in others:
            for h in range(hours):
                rows.append(
                    {
                        "device_id": ids[did],
                        "seq": h + 1,
                        "time": start + timedelta(days=random.randrange(365), hours=h),
                        "values": {"energyKwh": 0.2},
                    }
                )
            if len(rows) >= 20_000:
                await _bulk(platform, READINGS, rows)
                rows = []
        await _bulk(platform, READINGS, rows)
        target = stoves[0]
        year = hourly(now - timedelta(days=365), 365 * 24)
        schema_numeric = ["energyKwh", "meterKwh"]
        for begin in range(0, len(year), 1000):
            readings = [
                Reading(r["seq"], datetime.fromisoformat(r["time"]), r["values"])
                for r in year[begin : begin + 1000]
            ]
            await platform.telemetry.store.store_batch(
                target, readings, schema_numeric, "meterKwh", [project_did]
            )
        await _analyze(platform)
        latencies = []
        for _ in range(args.queries):
            begin = now - timedelta(days=random.randrange(30, 365))
            params = {
                "from": begin.isoformat(),
                "to": (begin + timedelta(days=30)).isoformat(),
                "limit": "100",
            }
            t0 = time.perf_counter()
            response = await client.get(f"/v1/domains/{target}/telemetry", params=params)
            latencies.append((time.perf_counter() - t0) * 1000)
            assert response.status_code == 200 and len(response.json()["items"]) == 100
        result["history"] = _latency(latencies)
        print(
            f"history (one stove's year among {args.stoves} stoves, 100 per page): "
            f"p50 {result['history']['p50_ms']} ms, p99 {result['history']['p99_ms']} ms"
        )

        # 4. A month of daily aggregates for the whole project
        print("seeding a month of rollups for every stove and the project ...")
        month_start = (now - timedelta(days=31)).replace(hour=0)
        everyone: list[Reading] = []
        for n, did in enumerate(stoves):
            readings = [
                Reading(d, month_start + timedelta(days=d, hours=7 + n % 12), {"energyKwh": 0.5})
                for d in range(30)
            ]
            everyone += readings
            rows = [
                r for r in rollup_rows(readings, ["energyKwh"], [did]) if r["interval"] != "hour"
            ]
            await _upsert(platform, rows)
        await _upsert(platform, rollup_rows(everyone, ["energyKwh"], [project_did]))
        await _analyze(platform)
        latencies = []
        params = {
            "interval": "day",
            "from": month_start.isoformat(),
            "to": (month_start + timedelta(days=30)).isoformat(),
        }
        for _ in range(args.queries):
            t0 = time.perf_counter()
            response = await client.get(
                f"/v1/domains/{project_did}/telemetry/aggregates", params=params
            )
            latencies.append((time.perf_counter() - t0) * 1000)
        body = response.json()
        assert len(body["buckets"]) == 30, body
        day_count = body["buckets"][0]["fields"]["energyKwh"]["count"]
        assert day_count >= len(stoves), day_count
        result["aggregates"] = _latency(latencies)
        print(
            f"aggregates (30 daily buckets, project of {len(stoves)} stoves): "
            f"p50 {result['aggregates']['p50_ms']} ms, p99 {result['aggregates']['p99_ms']} ms"
        )
        result["rss_start_mib"] = round(rss_start, 1)
        result["rss_end_mib"] = round(rss_mib(), 1)
        print(
            f"memory: RSS {rss_start:.0f} MiB after seeding, {result['rss_after_http_mib']} MiB "
            f"after the HTTP flood, {result['rss_after_floods_mib']} MiB after the MQTT flood"
        )
    finally:
        await client.aclose()
        await platform.stop()
        if database_url:
            from bench.claims import drop_postgres_database

            await drop_postgres_database(args.postgres_url, database_url)
    return result


async def mqtt_flood(
    platform: Any, stoves: list[str], args: argparse.Namespace, actor: Any, first_seq: int
) -> dict[str, Any]:
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    from twinhub.telemetry.mqtt import device_properties, topic_for

    ingest = platform.mqtt
    for _ in range(200):
        if ingest.subscribed:
            break
        await asyncio.sleep(0.05)
    senders = stoves[-50:]
    tokens = {did: (await platform.device_tokens.create(did, actor))[0] for did in senders}
    now = datetime.now(UTC)
    messages = []
    for n in range(args.mqtt_messages):
        did = senders[n % len(senders)]
        seq = first_seq + n
        payload = json.dumps(
            {
                "readings": [
                    {
                        "seq": seq,
                        "time": (now - timedelta(seconds=n)).isoformat(),
                        "values": {"energyKwh": 0.1},
                    }
                ]
            }
        ).encode()
        messages.append(
            (
                topic_for(platform.settings.mqtt_topic_prefix, did),
                payload,
                device_properties(tokens[did], payload),
            )
        )
    client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    client.max_queued_messages_set(0)
    client.connect("127.0.0.1", 1883)
    client.loop_start()
    before = ingest.stored + ingest.dropped
    started = time.perf_counter()

    def publish_all() -> None:
        # Paced to what twinhub has handled: Mosquitto drops QoS 1 messages beyond its
        # per-client queue (max_queued_messages, 1,000 by default), which no subscriber sees.
        for sent, (topic, payload, properties) in enumerate(messages):
            while sent - (ingest.stored + ingest.dropped - before) > WINDOW:
                time.sleep(0.001)
            client.publish(topic, payload, qos=1, properties=properties)

    await asyncio.to_thread(publish_all)
    while ingest.stored + ingest.dropped - before < len(messages):
        if time.perf_counter() - started > 600:
            break
        await asyncio.sleep(0.01)
    seconds = time.perf_counter() - started
    client.disconnect()
    client.loop_stop()
    handled = ingest.stored + ingest.dropped - before
    return {
        "messages": handled,
        "dropped": ingest.dropped,
        "seconds": round(seconds, 3),
        "messages_per_second": round(handled / seconds),
        "stored_total": ingest.stored,
    }


async def _bulk(platform: Any, table: Any, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    from sqlalchemy import insert

    async with platform.sessionmaker.begin() as session:
        await session.execute(
            insert(table).prefix_with("OR IGNORE")
            if not platform.telemetry.store.postgres
            else insert(table),
            rows,
        )


async def _upsert(platform: Any, rows: list[dict[str, Any]]) -> None:
    async with platform.sessionmaker.begin() as session:
        await platform.telemetry.store._roll_up(session, rows)


async def _analyze(platform: Any) -> None:
    from sqlalchemy import text

    async with platform.sessionmaker.begin() as session:
        await session.execute(text("ANALYZE"))


def _latency(samples: list[float]) -> dict[str, float]:
    return {
        "queries": len(samples),
        "p50_ms": round(statistics.median(samples), 2),
        "p99_ms": round(percentile(samples, 99), 2),
    }


def _broker_up(url: str) -> bool:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 1883), 2).close()
    except OSError:
        return False
    return True


def run(args: argparse.Namespace) -> int:
    cpu = args.cpu if args.cpu is not None else sorted(os.sched_getaffinity(0))[0]
    with pinned_to(cpu):
        result = asyncio.run(bench(args))
    result["goals"] = GOALS
    result["load_average"] = os.getloadavg()
    result["meta"] = run_metadata((cpu, cpu), args.tag)
    ratios = {
        "http": result["http"]["readings_per_second"] / GOALS["http"],
        "history_p99": GOALS["history_p99_ms"] / result["history"]["p99_ms"],
        "aggregates_p99": GOALS["aggregates_p99_ms"] / result["aggregates"]["p99_ms"],
    }
    if "messages_per_second" in result["mqtt"]:
        ratios["mqtt"] = result["mqtt"]["messages_per_second"] / GOALS["mqtt"]
    result["ratio_to_goal"] = {k: round(v, 3) for k, v in ratios.items()}
    for name, ratio in result["ratio_to_goal"].items():
        print(f"  {name}: {ratio:.2f}x the goal ({'met' if ratio >= 1 else 'NOT met'})")
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"telemetry-{args.database}-{args.tag}.json"
    path.write_text(json.dumps(result, indent=2, default=str))
    print(f"saved {path.relative_to(BENCH_DIR.parent)}")
    return 0
