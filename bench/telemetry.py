"""Telemetry benchmark (issue 12): ingestion rates, history and aggregate latency, memory.

The server (platform, registry app under uvicorn with httptools on a loopback port, the MQTT
subscriber) runs in this process, pinned to one core (`--cpu`); the load (HTTP batches over
keep-alive connections, MQTT publishing) runs in a separate process pinned to another core
(`--load-cpu`), so the server's figures are the server's. PostgreSQL, when used, runs where
the OS puts it, except that the backends serving the run's database are kept off the
server's core during the HTTP floods (`--no-pin-database` leaves them be): their CPU is
read from /proc and reported apart.

Every ingestion figure comes with a same-run ceiling and CPU per 1,000 readings/messages
(CPU of this process over the flood: a machine-independent cost, unlike the rate on a shared
machine):
- HTTP ceiling: the same batches to a bare Starlette endpoint in this process (same uvicorn
  settings) that only parses the body with twinhub's parser and answers counts.
- MQTT ceiling: the same messages, same publishers, to a bare consumer in this process on
  twinhub's own MQTT connection (gmqtt, shared subscription) that only parses each payload
  and acknowledges it at once. The
  publishers' and (on this machine) the broker's CPU per 1,000 messages are printed beside
  both, so a flood bound by them rather than by the consumer shows.
- PostgreSQL: the flood's rows by raw asyncpg COPY into a temporary table (the database's
  own write ceiling).

1. HTTP: `--http-batches` batches of 1,000 readings (different stoves), `--concurrency`
   connections, through `POST /v1/domains/{did}/telemetry`; readings stored per second.
2. MQTT (when the broker at `--mqtt-url` answers and `--mqtt-messages` is not 0):
   `--mqtt-messages` signed QoS 1 messages of one reading each, published to Mosquitto by
   `--mqtt-publishers` processes (each device's messages from one of them, in order;
   packets encoded beforehand and written to a plain socket, each process keeping the
   broker's Receive Maximum in flight) and stored by the shared subscription; messages
   stored per second (publish start to last commit). Messages that never arrive (the
   broker dropped them) are reported, not waited for.
3. History: `--stoves` stoves (default 10,000) get `--other-days` days of hourly readings
   each (bulk-seeded into the readings table), one stove a year of hourly readings through
   the ingestion path; then `GET .../telemetry?from=&to=&limit=100` over random month
   windows of that stove: p50/p99.
4. Aggregates: the project of those stoves has a month of rollups kept by ingestion (device
   rows for every stove, project rows summed over all); `GET
   /v1/domains/{project}/telemetry/aggregates?interval=day` for that month: p50/p99.
5. Memory: the process's RSS before and after the floods (1 and 2).
`--skip-reads` stops after 1, 2 and 5. Results go to bench/results/telemetry-<db>-<tag>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing
import os
import random
import secrets
import socket
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.ussd import pick_cpus, pinned_to, run_metadata

try:  # twinhub's own parser of telemetry bodies, so the ceilings parse alike
    from twinhub.mrv.telemetry_schema import loads
except ImportError:  # pragma: no cover - before the parser existed
    loads = json.loads

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
WINDOW = 800  # messages published but not yet handled, at most
RESERVE = 25  # what one publisher process claims of the window at a time
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
    parser.add_argument(
        "--mqtt-publishers",
        type=int,
        default=4,
        help="publisher processes (on the load core; each keeps the broker's Receive Maximum "
        "in flight)",
    )
    parser.add_argument(
        "--no-pin-database",
        dest="pin_database",
        action="store_false",
        help="leave PostgreSQL's backends where the OS puts them (default: off the server "
        "core during the HTTP floods)",
    )
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--cpu", type=int, default=None, help="server core (default: first)")
    parser.add_argument("--load-cpu", type=int, default=None, help="load core (default: another)")
    parser.add_argument(
        "--skip-reads", action="store_true", help="ingestion only: no history or aggregates"
    )
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

    from twinhub.db.models import Domain, Relationship, TelemetryDevice
    from twinhub.kernel.clock import utcnow

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


async def bench(
    args: argparse.Namespace, load_cpu: int, db_cpus: set[int] | None = None
) -> dict[str, Any]:
    """The run; `db_cpus`: the cores PostgreSQL's backends of the run's database are kept
    on during the floods (None: where the OS puts them)."""
    import httpx

    from twinhub.db.models import TelemetryDevice
    from twinhub.kernel.principals import Principal
    from twinhub.logging import configure_logging
    from twinhub.mrv.telemetry_schema import Reading
    from twinhub.platform import Platform
    from twinhub.registry.app import create_registry_app
    from twinhub.settings import Settings
    from twinhub.telemetry.rows import rollup_rows
    from twinhub.telemetry.store import READINGS

    workdir = Path(tempfile.mkdtemp(prefix="twinhub-bench-telemetry-"))
    database_url = None
    if args.database == "postgresql":
        from bench.postgres import create_postgres_database

        database_url = await create_postgres_database(args.postgres_url, "tel" + args.tag[-6:])
    mqtt_on = args.mqtt_messages > 0 and _broker_up(args.mqtt_url)
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
        # A loaded shared machine: measure throughput rather than time out (concurrent
        # batches of one project wait for its rollup rows; see bench/README.md).
        registry_request_timeout_seconds=300,
        database_statement_timeout_seconds=120,
        database_connect_timeout_seconds=60,  # the health probe waits for a pooled connection
        database_health_interval_seconds=30,
        mqtt_url=args.mqtt_url if mqtt_on else None,
        mqtt_topic_prefix=f"twinhub-bench/{args.tag}",
        mqtt_client_id=f"twinhub-bench-{args.tag}",
    )
    configure_logging("warning", "console")
    platform = Platform(settings)
    await platform.start()
    app = create_registry_app(platform=platform)
    real_server, real_task, real_port = await serve(app)
    bare_server, bare_task, bare_port = await serve(bare_app())
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://bench",
        headers={"Authorization": f"Bearer {admin_key}"},
        timeout=120,
    )
    result: dict[str, Any] = {
        "database": args.database,
        "stoves": args.stoves,
        "mqtt_publishers": args.mqtt_publishers,
    }
    loads: list[LoadProcess] = []
    pinner = BackendPinner(database_url if db_cpus else None, db_cpus or set())
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
        # As `twinhub serve` does once started (server.py): what is loaded so far lives as
        # long as the process, out of the collector's reach, so full collections stay short.
        gc.collect()
        gc.freeze()

        # 1. HTTP flood: the load process (other core) posts real HTTP to the real server
        now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        writers = stoves[1 : 1 + args.http_batches]
        tokens = {did: (await platform.device_tokens.create(did, actor))[0] for did in writers}
        await pinner.start()
        if pinner.database_url:
            result["database_cpus"] = sorted(pinner.cpus)
            print(
                f"PostgreSQL's backends of this run kept on CPU {sorted(pinner.cpus)} "
                "during the HTTP floods"
            )
        # The first load process posts the HTTP batches; all of them publish MQTT.
        loads = LoadProcess.several(load_cpu, max(1, args.mqtt_publishers) if mqtt_on else 1)
        load = loads[0]
        for one in loads:
            await one.ready()

        def jobs(first_seq: int, hours_back: int) -> list[tuple[str, bytes, str]]:
            return [
                (
                    f"/v1/domains/{did}/telemetry",
                    json.dumps(
                        {"readings": hourly(now - timedelta(hours=hours_back), 1000, first_seq)}
                    ).encode(),
                    tokens[did],
                )
                for did in writers
            ]

        flood = jobs(1, 1000)
        result["http_ceiling"] = await http_flood(load, bare_port, flood, args, None)
        store = platform.telemetry.store
        result["http"] = await http_flood(load, real_port, flood, args, database_url, store)
        result["rss_after_http_mib"] = round(rss_mib(), 1)
        _report("HTTP", result["http"], result["http_ceiling"], "readings")
        # The same flood again (new seqs, older times): growing memory would show here.
        result["http_again"] = await http_flood(
            load, real_port, jobs(1001, 2000), args, database_url, store
        )
        result["rss_after_http_2_mib"] = round(rss_mib(), 1)
        _report("HTTP again", result["http_again"], result["http_ceiling"], "readings")
        print(
            f"RSS {result['rss_after_http_mib']} MiB after the first HTTP flood, "
            f"{result['rss_after_http_2_mib']} MiB after the second"
        )
        if database_url:
            result["copy_ceiling"] = await copy_ceiling(database_url, flood)
            print(
                f"raw COPY into a temporary table (same rows, one connection): "
                f"{result['copy_ceiling']['rows_per_second']:,} rows/s"
            )

        # 2. MQTT flood: PostgreSQL goes back to every core, since the publishers need the
        # load core (pinned beside them, it lowered the MQTT rate by a third).
        await pinner.stop()
        if mqtt_on:
            ingest = platform.mqtt
            for _ in range(200):
                if ingest.subscribed:
                    break
                await asyncio.sleep(0.05)
            senders = stoves[-50:]
            mqtt_tokens = {
                did: (await platform.device_tokens.create(did, actor))[0] for did in senders
            }
            bare = BareConsumer(args.mqtt_url, f"twinhub-bench-bare/{args.tag}")
            await bare.start()
            try:
                result["mqtt_ceiling"] = await mqtt_flood(
                    loads,
                    bare.counter,
                    mqtt_messages(
                        bare.prefix, senders, mqtt_tokens, args.mqtt_messages, 10_000_000
                    ),
                    args.mqtt_url,
                    None,
                )
            finally:
                await bare.stop()
            ceiling = result["mqtt_ceiling"]
            print(
                f"MQTT ceiling (bare consumer, {len(loads)} publisher processes): "
                f"{ceiling['messages_per_second']:,} messages/s, "
                f"{ceiling['server_cpu_ms_per_1000_messages']} ms CPU per 1,000 messages"
                + _senders(ceiling, "messages")
            )

            def handled() -> int:
                return ingest.stored + ingest.dropped

            async def flood(first_seq: int) -> dict[str, Any]:
                messages = mqtt_messages(
                    settings.telemetry.mqtt_topic_prefix,
                    senders,
                    mqtt_tokens,
                    args.mqtt_messages,
                    first_seq,
                )
                groups = getattr(ingest, "groups", 0)
                figures = await mqtt_flood(loads, handled, messages, args.mqtt_url, database_url)
                if groups := getattr(ingest, "groups", 0) - groups:  # one transaction each
                    figures["messages_per_group"] = round(figures["messages"] / groups, 1)
                    print(f"  {figures['messages_per_group']} messages per group (transaction)")
                return figures

            result["mqtt"] = await flood(10_000_000)
            result["mqtt"]["dropped_total"] = ingest.dropped
            result["rss_after_mqtt_1_mib"] = round(rss_mib(), 1)
            _report("MQTT", result["mqtt"], result["mqtt_ceiling"], "messages")
            # The same flood again (new seqs): memory that keeps growing would show here.
            result["mqtt_again"] = await flood(20_000_000)
            result["rss_after_mqtt_2_mib"] = round(rss_mib(), 1)
            _report("MQTT again", result["mqtt_again"], result["mqtt_ceiling"], "messages")
            print(
                f"RSS {result['rss_after_mqtt_1_mib']} MiB after the first MQTT flood, "
                f"{result['rss_after_mqtt_2_mib']} MiB after the second"
            )
        elif args.mqtt_messages > 0:
            result["mqtt"] = {"skipped": f"no broker at {args.mqtt_url}"}
            print(f"MQTT: skipped (no broker at {args.mqtt_url})")
        else:
            result["mqtt"] = {"skipped": "--mqtt-messages 0"}
        for one in loads:
            one.close()
        loads = []
        await pinner.stop()
        result["rss_after_floods_mib"] = round(rss_mib(), 1)
        if args.skip_reads:
            return result

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
        for one in loads:  # after a failure: the floods' processes and the pinning end here
            one.close()
        await pinner.stop()
        await client.aclose()
        real_server.should_exit = bare_server.should_exit = True
        await asyncio.gather(real_task, bare_task, return_exceptions=True)
        await platform.stop()
        if database_url:
            from bench.postgres import drop_postgres_database

            await drop_postgres_database(args.postgres_url, database_url)
    return result


# -- the load process (the other core) -----------------------------------------------------
class LoadProcess:
    """A separate process pinned to the load core: it posts the HTTP batches and publishes the
    MQTT messages, so the server's core does only the server's work. Commands go over a pipe.
    Several of them publish one MQTT flood together (one paho client publishes fewer
    messages a second than the goal); shared memory paces them all: `progress` is how many
    messages the consumer has handled, `sent[i]` how many process i has published, and
    together they keep at most WINDOW in flight (Mosquitto drops QoS 1 messages beyond a
    client's queue of 1,000)."""

    def __init__(self, cpu: int, progress: Any = None, sent: Any = None, index: int = 0) -> None:
        context = multiprocessing.get_context("spawn")
        self.progress = progress if progress is not None else context.Value("q", 0, lock=False)
        self.sent = sent if sent is not None else context.Array("q", 1, lock=False)
        self.conn, child = context.Pipe()
        self.process = context.Process(
            target=_load_main, args=(child, cpu, self.progress, self.sent, index), daemon=True
        )
        self.process.start()

    @classmethod
    def several(cls, cpu: int, count: int) -> list[LoadProcess]:
        """`count` load processes on `cpu` that share one pacing window."""
        context = multiprocessing.get_context("spawn")
        progress = context.Value("q", 0, lock=False)
        sent = context.Array("q", count, lock=False)
        return [cls(cpu, progress, sent, index) for index in range(count)]

    async def ready(self) -> None:
        self.conn.send(("ping",))
        await asyncio.to_thread(self.conn.recv)

    async def ask(self, *command: Any) -> Any:
        self.conn.send(command)
        return await asyncio.to_thread(self.conn.recv)

    def close(self) -> None:
        if self.process.is_alive():
            self.conn.send(("stop",))
            self.process.join(10)


def _load_main(conn: Any, cpu: int, progress: Any, sent: Any, index: int) -> None:
    os.sched_setaffinity(0, {cpu})
    while True:
        command = conn.recv()
        if command[0] == "stop":
            return
        if command[0] == "ping":
            conn.send(("pong",))
        elif command[0] == "http":
            _load_http(conn, *command[1:])
        elif command[0] == "mqtt":
            _load_mqtt(conn, progress, sent, index, *command[1:])


def _load_http(conn: Any, port: int, jobs: list[tuple[str, bytes, str]], workers: int) -> None:
    import http.client
    import queue
    import threading

    todo: queue.SimpleQueue[tuple[str, bytes, str]] = queue.SimpleQueue()
    for job in jobs:
        todo.put(job)
    accepted: list[int] = []
    errors: list[str] = []
    go = threading.Event()

    def worker() -> None:
        client = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        go.wait()
        while True:
            try:
                path, body, token = todo.get_nowait()
            except queue.Empty:
                break
            client.request(
                "POST",
                path,
                body,
                {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )
            response = client.getresponse()
            answer = response.read()
            if response.status != 200:
                errors.append(f"{response.status} {answer[:300]!r}")
                continue
            accepted.append(int(json.loads(answer)["accepted"]))
        client.close()

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for thread in threads:
        thread.start()
    conn.send(("ready",))
    conn.recv()
    started = time.perf_counter()
    go.set()
    for thread in threads:
        thread.join()
    conn.send(("done", sum(accepted), time.perf_counter() - started, errors[:5]))


def _load_mqtt(
    conn: Any,
    progress: Any,
    sent: Any,
    index: int,
    url: str,
    messages: list[tuple[str, bytes, list[Any]]],
) -> None:
    """Publish `messages` (QoS 1) over a plain socket, packets encoded before "go": a
    paho client costs about 150 µs of CPU a message, four times the bare consumer, so
    with paho the publishers, not the broker or the consumer, set the ceiling."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 1883), 10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    client_id = f"twinhub-bench-pub-{os.getpid()}-{index}".encode()
    # CONNECT: MQTT 5, clean start, keep alive 60 s, no properties.
    sock.sendall(_packet(0x10, b"\x00\x04MQTT\x05\x02\x00\x3c\x00" + _utf8(client_id)))
    reader = _PacketReader(sock)
    kind, body = reader.next()
    if kind != 0x20 or body[1] != 0:
        raise RuntimeError(f"the broker refused the publisher: {kind:#x} {body[:2]!r}")
    receive_maximum = _receive_maximum(body)  # the broker's: more in flight is an error
    packets = [
        _publish(topic, payload, pairs, n % 65535 + 1)
        for n, (topic, payload, pairs) in enumerate(messages)
    ]
    conn.send(("ready",))
    conn.recv()
    started = time.perf_counter()
    # Each process reserves a few messages of the window at a time (counted in `sent` before
    # they go out, so the others see them at once): the publishers together keep at most
    # WINDOW, plus a reservation each when they look at the same moment, in flight.
    budget = in_flight = acknowledged = 0
    position = 0
    while acknowledged < len(packets):
        batch = []
        while position < len(packets) and in_flight < receive_maximum:
            if budget <= 0:
                budget = min(RESERVE, WINDOW - (sum(sent) - progress.value))
                if budget <= 0:
                    break
                sent[index] += budget
            batch.append(packets[position])
            position += 1
            in_flight += 1
            budget -= 1
        if batch:
            sock.sendall(b"".join(batch))
        if in_flight:
            acks = reader.pubacks()
            in_flight -= acks
            acknowledged += acks
        else:
            time.sleep(0.0005)
    sent[index] -= budget  # reserved, not used
    conn.send(("done", time.perf_counter() - started))
    conn.recv()  # the consumer has them all: disconnect
    sock.sendall(_packet(0xE0, b""))
    sock.close()


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        value, digit = value >> 7, value & 0x7F
        out.append(digit | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _utf8(data: bytes) -> bytes:
    return len(data).to_bytes(2, "big") + data


def _packet(first: int, body: bytes) -> bytes:
    return bytes([first]) + _varint(len(body)) + body


def _publish(topic: str, payload: bytes, pairs: list[tuple[str, str]], mid: int) -> bytes:
    """A QoS 1 PUBLISH with user properties (MQTT 5)."""
    properties = b"".join(
        b"\x26" + _utf8(name.encode()) + _utf8(value.encode()) for name, value in pairs
    )
    head = _utf8(topic.encode()) + mid.to_bytes(2, "big") + _varint(len(properties))
    return _packet(0x32, head + properties + payload)


def _receive_maximum(connack: bytes) -> int:
    """The Receive Maximum of a CONNACK's properties (65,535 when absent)."""
    length, at = 0, 2
    shift = 0
    while True:
        byte = connack[at]
        at += 1
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    end = at + length
    sizes = {
        0x01: 1,
        0x17: 1,
        0x19: 1,
        0x24: 1,
        0x25: 1,
        0x28: 1,
        0x29: 1,
        0x2A: 1,
        0x13: 2,
        0x21: 2,
        0x22: 2,
        0x11: 4,
        0x27: 4,
    }
    while at < end:
        ident = connack[at]
        at += 1
        if ident == 0x21:
            return int.from_bytes(connack[at : at + 2], "big")
        if ident in sizes:
            at += sizes[ident]
        elif ident == 0x26:  # user property: two strings
            at += 2 + int.from_bytes(connack[at : at + 2], "big")
            at += 2 + int.from_bytes(connack[at : at + 2], "big")
        else:  # a string or binary data
            at += 2 + int.from_bytes(connack[at : at + 2], "big")
    return 65_535


class _PacketReader:
    """MQTT packets from a socket: the CONNACK, then PUBACKs counted."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def _split(self) -> tuple[int, bytes] | None:
        buffer = self.buffer
        length, at, shift = 0, 1, 0
        while True:
            if at >= len(buffer):
                return None
            byte = buffer[at]
            at += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if len(buffer) < at + length:
            return None
        self.buffer = buffer[at + length :]
        return buffer[0] & 0xF0, buffer[at : at + length]

    def next(self) -> tuple[int, bytes]:
        while (found := self._split()) is None:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            self.buffer += chunk
        return found

    def pubacks(self) -> int:
        """Wait for data, and count the PUBACKs it completes."""
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        self.buffer += chunk
        count = 0
        while (found := self._split()) is not None:
            if found[0] == 0x40:
                count += 1
        return count


# -- measuring -------------------------------------------------------------------------------
async def db_cpu_seconds(database_url: str | None) -> float:
    """CPU seconds spent so far by the PostgreSQL backends serving the run's database (read
    from /proc: the server runs on this machine); 0 without PostgreSQL."""
    if not database_url:
        return 0.0
    import asyncpg

    conn = await asyncpg.connect(database_url)
    try:
        pids = await conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid()"
        )
    finally:
        await conn.close()
    return sum(_process_cpu(pid) for (pid,) in pids)


def _process_cpu(pid: int) -> float:
    """utime + stime of a process, in seconds (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _figures(units: int, seconds: float, cpu: float, db_cpu: float, unit: str) -> dict[str, Any]:
    return {
        unit: units,
        "seconds": round(seconds, 3),
        f"{unit}_per_second": round(units / seconds) if seconds else 0,
        f"server_cpu_ms_per_1000_{unit}": round(cpu / max(units, 1) * 1e6, 2),
        f"db_cpu_ms_per_1000_{unit}": round(db_cpu / max(units, 1) * 1e6, 2),
    }


def _report(name: str, figures: dict[str, Any], ceiling: dict[str, Any], unit: str) -> None:
    rate, cpu = figures[f"{unit}_per_second"], figures[f"server_cpu_ms_per_1000_{unit}"]
    top, top_cpu = ceiling[f"{unit}_per_second"], ceiling[f"server_cpu_ms_per_1000_{unit}"]
    figures["versus_ceiling"] = {
        "rate": round(rate / top, 3) if top else None,
        "cpu": round(top_cpu / cpu, 3) if cpu else None,
    }
    db = figures[f"db_cpu_ms_per_1000_{unit}"]
    loop_cpu = figures.get(f"loop_cpu_ms_per_1000_{unit}")
    grouped = figures.get("batches_per_transaction")
    print(
        f"{name}: {figures[unit]} {unit} in {figures['seconds']} s = {rate:,} {unit}/s; "
        f"server CPU {cpu} ms per 1,000 {unit}"
        + (f" (+ PostgreSQL {db} ms)" if db else "")
        + (
            f" [event loop {loop_cpu} ms, other threads {round(cpu - loop_cpu, 2)} ms]"
            if loop_cpu is not None
            else ""
        )
        + (f"; {grouped} batches per transaction" if grouped else "")
        + _senders(figures, unit)
        + f"; bare ceiling {top:,}/s, {top_cpu} ms per 1,000: rate ratio "
        f"{figures['versus_ceiling']['rate']}, CPU ratio {figures['versus_ceiling']['cpu']}"
    )


def _senders(figures: dict[str, Any], unit: str) -> str:
    """The MQTT publishers' and broker's CPU over a flood, when measured: which of them,
    if any, was the bound."""
    publishers = figures.get(f"publisher_cpu_ms_per_1000_{unit}")
    if publishers is None:
        return ""
    broker = figures.get(f"broker_cpu_ms_per_1000_{unit}")
    return f"; publishers {publishers} ms, broker " + (
        f"{broker} ms per 1,000" if broker is not None else "not on this machine"
    )


async def http_flood(
    load: LoadProcess,
    port: int,
    jobs: list[tuple[str, bytes, str]],
    args: argparse.Namespace,
    database_url: str | None,
    store: Any = None,
) -> dict[str, Any]:
    """POST every job from the load process; figures of the server process only. The
    server's CPU is also split: its event loop's thread, and the rest (on SQLite mostly
    aiosqlite's thread, where SQLite itself runs); `store` (twinhub's telemetry store, None
    for the bare endpoint) gives the transactions the batches took."""
    await load.ask("http", port, jobs, args.concurrency)  # connected, waiting for "go"
    transactions = getattr(store, "transactions", 0)  # (the code before had no count)
    db0, cpu0, loop0 = await db_cpu_seconds(database_url), time.process_time(), time.thread_time()
    load.conn.send(("go",))
    _, accepted, seconds, errors = await asyncio.to_thread(load.conn.recv)
    cpu, loop_cpu = time.process_time() - cpu0, time.thread_time() - loop0
    db = await db_cpu_seconds(database_url) - db0
    if errors:
        raise RuntimeError(f"the server refused batches: {errors}")
    figures = _figures(accepted, seconds, cpu, db, "readings")
    figures["loop_cpu_ms_per_1000_readings"] = round(loop_cpu / max(accepted, 1) * 1e6, 2)
    if transactions := getattr(store, "transactions", 0) - transactions:
        figures["batches_per_transaction"] = round(len(jobs) / transactions, 2)
    return figures


def mqtt_messages(
    prefix: str, senders: list[str], tokens: dict[str, str], count: int, first_seq: int
) -> list[tuple[str, bytes, list[tuple[str, str]]]]:
    from twinhub.services.device_tokens import sign
    from twinhub.telemetry.mqtt import KEY_ID, SIGNATURE, topic_for

    now = datetime.now(UTC)
    messages = []
    for n in range(count):
        did = senders[n % len(senders)]
        payload = json.dumps(
            {
                "readings": [
                    {
                        "seq": first_seq + n,
                        "time": (now - timedelta(seconds=n)).isoformat(),
                        "values": {"energyKwh": 0.1},
                    }
                ]
            }
        ).encode()
        token = tokens[did]
        pairs = [(KEY_ID, token.split("_")[1]), (SIGNATURE, sign(token, payload))]
        messages.append((topic_for(prefix, did), payload, pairs))
    return messages


async def mqtt_flood(
    loads: list[LoadProcess],
    handled: Callable[[], int],
    messages: list[tuple[str, bytes, list[Any]]],
    url: str,
    database_url: str | None,
) -> dict[str, Any]:
    """Publish from the load processes (each device's messages from one of them, in their
    order); time from the first publish to the last message the consumer handled (stored,
    or dropped and counted)."""
    before = handled()
    shares: list[list[tuple[str, bytes, list[Any]]]] = [[] for _ in loads]
    publisher: dict[str, int] = {}
    for message in messages:
        topic = message[0]
        if topic not in publisher:
            publisher[topic] = len(publisher) % len(loads)
        shares[publisher[topic]].append(message)
    loads[0].progress.value = 0
    for n in range(len(loads)):
        loads[0].sent[n] = 0
    for load, share in zip(loads, shares, strict=True):
        load.conn.send(("mqtt", url, share))
    for load in loads:
        await asyncio.to_thread(load.conn.recv)  # connected, waiting for "go"
    others = {"publishers": [load.process.pid for load in loads], "broker": broker_pids(url)}
    db0, cpu0, loop0 = await db_cpu_seconds(database_url), time.process_time(), time.thread_time()
    others0 = {name: sum(map(_process_cpu, pids)) for name, pids in others.items()}
    started = time.perf_counter()
    for load in loads:
        load.conn.send(("go",))
    # Figures up to the last message handled, not over the wait for lost ones (the server's
    # background tasks would count against the messages).
    moved, last, cpu, loop_cpu = time.perf_counter(), 0, 0.0, 0.0
    while (done := handled() - before) < len(messages):
        loads[0].progress.value = done
        if done != last:
            moved, last = time.perf_counter(), done
            cpu, loop_cpu = time.process_time() - cpu0, time.thread_time() - loop0
        elif time.perf_counter() - moved > 10:  # lost by the broker: say so, stop waiting
            print(f"  MQTT: {len(messages) - done} messages never arrived; stopped waiting")
            break
        await asyncio.sleep(0.002)
    else:
        moved = time.perf_counter()
        cpu, loop_cpu = time.process_time() - cpu0, time.thread_time() - loop0
    seconds = moved - started
    others_cpu = {
        name: sum(map(_process_cpu, pids)) - others0[name] for name, pids in others.items()
    }
    db = await db_cpu_seconds(database_url) - db0
    for load in loads:
        await asyncio.to_thread(load.conn.recv)  # published
    for load in loads:
        load.conn.send(("disconnect",))
    figures = _figures(handled() - before, seconds, cpu, db, "messages")
    figures["loop_cpu_ms_per_1000_messages"] = round(
        loop_cpu / max(figures["messages"], 1) * 1e6, 2
    )
    figures["publisher_cpu_ms_per_1000_messages"] = round(
        others_cpu["publishers"] / max(figures["messages"], 1) * 1e6, 2
    )
    if others["broker"]:
        figures["broker_cpu_ms_per_1000_messages"] = round(
            others_cpu["broker"] / max(figures["messages"], 1) * 1e6, 2
        )
    return figures


def broker_pids(url: str) -> list[int]:
    """The processes of a Mosquitto broker on this machine, when `url` is a loopback one
    (their CPU says whether the broker bounded a flood); none otherwise."""
    from urllib.parse import urlsplit

    if (urlsplit(url).hostname or "127.0.0.1") not in ("127.0.0.1", "localhost", "::1"):
        return []
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as comm:
                    if comm.read().strip() == "mosquitto":
                        pids.append(int(entry))
            except OSError:  # gone
                continue
    return pids


class BackendPinner:
    """Keeps PostgreSQL's backends that serve the run's database on `cpus` (off the server's
    core) during the HTTP floods: looked up every quarter second, since the pool opens
    connections as the floods need them. Only this run's backends move: other users of the
    same PostgreSQL are left where they are. (Not during the MQTT floods: there the
    publishers need the load core, and PostgreSQL pinned beside them lowered the rate.)"""

    def __init__(self, database_url: str | None, cpus: set[int]) -> None:
        self.database_url = database_url
        self.cpus = cpus
        self.pinned: set[int] = set()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self.database_url and self.cpus:
            await self._pin_once()
            self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(0.25)
            await self._pin_once()

    async def _pin_once(self) -> None:
        import asyncpg

        conn = await asyncpg.connect(self.database_url)
        try:
            rows = await conn.fetch(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            )
        finally:
            await conn.close()
        for (pid,) in rows:
            if pid in self.pinned:
                continue
            try:
                os.sched_setaffinity(pid, self.cpus)
            except OSError:  # gone, or not ours to move: leave it
                continue
            self.pinned.add(pid)

    async def stop(self) -> None:
        """Stop pinning, and give the pinned backends every core again."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        everywhere = set(range(os.cpu_count() or 1))
        for pid in self.pinned:
            try:
                os.sched_setaffinity(pid, everywhere)
            except OSError:  # gone
                continue
        self.pinned.clear()


class BareConsumer:
    """The MQTT ceiling: a minimal consumer on twinhub's own connection (gmqtt, QoS 1
    messages taken as they are decoded, shared subscription, same broker and publishers):
    it parses each payload and acknowledges it at once, one PUBACK a message."""

    def __init__(self, url: str, prefix: str) -> None:
        from urllib.parse import urlsplit

        self.url = urlsplit(url)
        self.prefix = prefix
        self.count = 0
        self.subscribed = False

    def counter(self) -> int:
        return self.count

    async def start(self) -> None:
        from twinhub.telemetry.mqtt import RECEIVE_MAXIMUM, OneConnection

        def take(client: Any, mid: int, topic: Any, payload: bytes, properties: Any) -> None:
            loads(payload)
            self.count += 1
            client.acknowledge([mid])

        def on_subscribe(*_: Any) -> None:
            self.subscribed = True

        client = OneConnection(
            None, take=take, optimistic_acknowledgement=False, receive_maximum=RECEIVE_MAXIMUM
        )
        client.on_subscribe = on_subscribe
        await client.connect(self.url.hostname or "127.0.0.1", self.url.port or 1883)
        client.subscribe(f"$share/bare/{self.prefix}/#", qos=1)
        self.client = client
        for _ in range(200):
            if self.subscribed:
                break
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        await self.client.disconnect()


def bare_app() -> Any:
    """The HTTP ceiling: the telemetry path on a bare Starlette app that only parses the
    body (with twinhub's parser) and answers counts, served like the real one."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def telemetry(request: Request) -> JSONResponse:
        body = loads(await request.body())
        return JSONResponse(
            {"accepted": len(body["readings"]), "duplicates": 0, "rejected": 0, "rejections": []}
        )

    return Starlette(
        routes=[Route("/v1/domains/{did:path}/telemetry", telemetry, methods=["POST"])]
    )


async def copy_ceiling(database_url: str, jobs: list[tuple[str, bytes, str]]) -> dict[str, Any]:
    """The database's own ceiling in this run: the flood's rows by asyncpg COPY into a
    temporary table (no index), one COPY per batch."""
    import asyncpg

    batches = []
    for n, (_, body, _) in enumerate(jobs):
        batches.append(
            [
                (n, r["seq"], datetime.fromisoformat(r["time"]), json.dumps(r["values"]))
                for r in json.loads(body)["readings"]
            ]
        )
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            "CREATE TEMP TABLE copy_ceiling (device_id int, seq bigint, time timestamptz,"
            " values jsonb)"
        )
        started = time.perf_counter()
        for rows in batches:
            await conn.copy_records_to_table("copy_ceiling", records=rows)
        seconds = time.perf_counter() - started
    finally:
        await conn.close()
    rows_total = sum(len(rows) for rows in batches)
    return {
        "rows": rows_total,
        "seconds": round(seconds, 3),
        "rows_per_second": round(rows_total / seconds),
    }


async def serve(app: Any) -> tuple[Any, asyncio.Task[None], int]:
    """`app` under uvicorn (httptools, no access log, like `twinhub serve`) in this process,
    on a free loopback port."""
    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            server_header=False,
            lifespan="off",
            http="httptools",
        )
    )
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:  # noqa: ASYNC110 - uvicorn offers no event to wait on
        await asyncio.sleep(0.01)
    return server, task, sock.getsockname()[1]


async def _bulk(platform: Any, table: Any, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    from sqlalchemy import insert

    async with platform.sessionmaker.begin() as session:
        await session.execute(
            insert(table).prefix_with("OR IGNORE")
            if platform.engine.dialect.name != "postgresql"
            else insert(table),
            rows,
        )


async def _upsert(platform: Any, rows: list[dict[str, Any]]) -> None:
    from twinhub.telemetry.rows import as_records, merge_rollups

    async with platform.sessionmaker.begin() as session:
        await platform.telemetry.store.add_rollups(session, as_records(merge_rollups(rows)))


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
    import uvloop

    cpu, load_cpu = pick_cpus(args.cpu, args.load_cpu)
    db_cpus = set(os.sched_getaffinity(0)) - {cpu}
    load_before = os.getloadavg()
    with pinned_to(cpu), asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        result = runner.run(bench(args, load_cpu, db_cpus if args.pin_database else None))
    result["goals"] = GOALS
    result["load_average"] = {"before": load_before, "after": os.getloadavg()}
    result["meta"] = run_metadata((cpu, load_cpu), args.tag)
    ratios = {"http": result["http"]["readings_per_second"] / GOALS["http"]}
    if "history" in result:
        ratios["history_p99"] = GOALS["history_p99_ms"] / result["history"]["p99_ms"]
        ratios["aggregates_p99"] = GOALS["aggregates_p99_ms"] / result["aggregates"]["p99_ms"]
    if "messages_per_second" in result.get("mqtt", {}):
        ratios["mqtt"] = result["mqtt"]["messages_per_second"] / GOALS["mqtt"]
    result["ratio_to_goal"] = {k: round(v, 3) for k, v in ratios.items()}
    for name, ratio in result["ratio_to_goal"].items():
        print(f"  {name}: {ratio:.2f}x the goal ({'met' if ratio >= 1 else 'NOT met'})")
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"telemetry-{args.database}-{args.tag}.json"
    path.write_text(json.dumps(result, indent=2, default=str))
    print(f"saved {path.relative_to(BENCH_DIR.parent)}")
    return 0
