"""Scale (issue 33 §3): a programme of 100,000 stoves with a week of hourly readings, loaded
into PostgreSQL through the real HTTP ingestion path, and what that size costs.

Not in the quick set: at its defaults it posts 16.8 million readings (700,000 batches of a
day each), about a quarter of an hour on a 2-core machine. The server (platform, registry
app under uvicorn on a loopback port) runs in this process, pinned to one core; the load
(`bench.telemetry.LoadProcess`: keep-alive HTTP connections) to another. Stoves, their
project link and their device tokens are seeded straight into the tables (registering
100,000 twins through the ledger is the registry benchmark's subject, not this one's);
every reading goes through `POST /v1/domains/{did}/telemetry` with the stove's own token:
parsed, checked against the stove's schema and clock rules, stored, receipted and rolled up.

Reported:
- readings per second over the whole load, with the server's and PostgreSQL's CPU per 1,000
  readings (the same-run ceiling is `./dev bench telemetry`'s: this is a size test);
- storage: the readings' and receipts' tables, the rollups (rows and bytes per interval),
  per stove and per stove-year (the week scaled to 365 days);
- a monitoring period over the week at that size: reading the day rollups, learned
  plausibility, the methodology and the report (as `./dev bench oracle`'s period).
Results go to bench/results/scale-<tag>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import secrets
import tempfile
import time
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.oracle import METER, SAMPLED, _document
from bench.telemetry import (
    LoadProcess,
    db_cpu_seconds,
    http_flood,
    serve,
)
from bench.ussd import pick_cpus, pinned_to, run_metadata

RESULTS_DIR = Path(__file__).resolve().parent / "results"
COOKING_HOURS = (6, 12, 18)  # a session starts at these hours of each day


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--stoves", type=int, default=100_000)
    parser.add_argument("--days", type=int, default=7, help="days of hourly readings per stove")
    parser.add_argument(
        "--batch-hours", type=int, default=168, help="readings per HTTP batch (a device's post)"
    )
    parser.add_argument(
        "--chunk", type=int, default=2_000, help="stoves whose batches are built at once"
    )
    parser.add_argument("--concurrency", type=int, default=4, help="HTTP connections")
    parser.add_argument("--cpu", type=int, default=None, help="server core (default: first)")
    parser.add_argument("--load-cpu", type=int, default=None, help="load core (default: another)")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--tag", default=time.strftime("%Y%m%d-%H%M%S"))


def run(args: argparse.Namespace) -> int:
    import uvloop

    server_cpu, load_cpu = pick_cpus(args.cpu, args.load_cpu)
    with pinned_to(server_cpu), asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        result = runner.run(bench(args, load_cpu))
    result["meta"] = run_metadata((server_cpu, load_cpu), args.tag)
    RESULTS_DIR.mkdir(exist_ok=True)
    out = RESULTS_DIR / f"scale-{args.tag}.json"
    out.write_text(json.dumps(result, indent=2, default=str))
    print(f"results: {out}")
    return 0


def stove_batch(
    first_day: datetime, hours: range, register: float
) -> tuple[list[dict[str, Any]], float]:
    """One stove's hourly readings for `hours` (counted from `first_day`'s midnight): three
    cooking sessions a day, the meter's register on every reading. Returns the readings and
    the register after them."""
    readings = []
    for hour in hours:
        cooking = hour % 24 in COOKING_HOURS
        energy = 0.35 + (hour % 5) * 0.02 if cooking else 0.0
        register = round(register + energy, 3)
        values: dict[str, Any] = {"energyKwh": energy, "meterKwh": register}
        if cooking:
            values["session"] = "start"
        moment = first_day + timedelta(hours=hour)
        readings.append({"seq": hour + 1, "time": moment.isoformat(), "values": values})
    return readings, register


def period_methodology(days: int) -> tuple[Any, int | None]:
    """The built-in methodology, its minimum of active days at most `days`; and the minimum
    it had when that was lowered (None: unchanged)."""
    import copy

    from twinhub.kernel.errors import Problems
    from twinhub.mrv.builtin import CLEAN_COOKING, builtin_document
    from twinhub.mrv.methodology import compile_methodology

    document = copy.deepcopy(builtin_document(CLEAN_COOKING))
    rule = document["rules"]["min_active_days"]
    lowered = None
    if rule["value"] > days:
        lowered, rule["value"] = rule["value"], days
    problems = Problems()
    methodology = compile_methodology(document, problems)
    problems.raise_if_any("The bench's methodology does not compile.")
    return methodology, lowered


async def seed_programme(platform: Any, stoves: list[str], project: str, since: datetime) -> dict:
    """The stoves (with the design document's models and a meter record), their link to the
    project, their telemetry rows and one device token each; returns did -> token."""
    from sqlalchemy import func, insert, select

    from twinhub.db.models import DeviceToken, Domain, Relationship, TelemetryDevice
    from twinhub.services.api_keys import _digest

    tokens: dict[str, str] = {}
    async with platform.sessionmaker.begin() as session:
        top = (await session.scalar(select(func.max(Domain.seq)))) or 0
        for start in range(0, len(stoves), 2000):
            chunk = stoves[start : start + 2000]
            secrets_ = {did: secrets.token_urlsafe(24) for did in chunk}
            ids = {did: f"s{start + i:09d}" for i, did in enumerate(chunk)}
            tokens.update({did: f"thd_{ids[did]}_{secrets_[did]}" for did in chunk})
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
                        "properties": {
                            "efficiency": 0.85,
                            "householdSize": 5,
                            "stoveModel": "EPC-6L" if (start + i) % 2 else "ECO-1",
                            "meter": {**METER, "serial": f"M-{start + i:06d}"},
                        },
                        "status": "active",
                        "verified": True,
                        "version": 1,
                        "created_at": since,
                        "updated_at": since,
                    }
                    for i, did in enumerate(chunk)
                ],
            )
            await session.execute(
                insert(Relationship),
                [
                    {
                        "source_did": did,
                        "type": "project",
                        "target_did": project,
                        "created_at": since,
                    }
                    for did in chunk
                ],
            )
            await session.execute(
                insert(TelemetryDevice),
                [{"did": did, "latest": {}, "readings": 0, "updated_at": since} for did in chunk],
            )
            await session.execute(
                insert(DeviceToken),
                [
                    {
                        "token_id": ids[did],
                        "domain_did": did,
                        "secret_sha256": _digest(secrets_[did]),
                        "label": "bench",
                        "created_by": "did:ixo:org/bench",
                        "created_at": since,
                    }
                    for did in chunk
                ],
            )
    return tokens


async def storage(database_url: str) -> dict[str, Any]:
    """Bytes of the telemetry tables (partitions summed into their parent) and the rollups'
    rows per interval."""
    import asyncpg

    url = database_url.replace("postgresql+asyncpg://", "postgresql://")
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("ANALYZE")
        rows = await conn.fetch(
            """
            SELECT coalesce(parent.relname, c.relname) AS name,
                   sum(pg_total_relation_size(c.oid))::bigint AS bytes
              FROM pg_class c
              LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
              LEFT JOIN pg_class parent ON parent.oid = i.inhparent
             WHERE c.relkind = 'r' AND c.relname LIKE 'telemetry%'
             GROUP BY 1 ORDER BY 1
            """
        )
        intervals = await conn.fetch(
            'SELECT "interval", count(*) AS n FROM telemetry_rollups GROUP BY 1 ORDER BY 1'
        )
        readings = await conn.fetchval("SELECT count(*) FROM telemetry_readings")
    finally:
        await conn.close()
    return {
        "tables_bytes": {row["name"]: row["bytes"] for row in rows},
        "rollup_rows": {row["interval"]: row["n"] for row in intervals},
        "readings": readings,
    }


async def bench(args: argparse.Namespace, load_cpu: int) -> dict[str, Any]:
    from bench.postgres import create_postgres_database, drop_postgres_database
    from twinhub.logging import configure_logging
    from twinhub.mrv.periods import PeriodSpec, compute_period
    from twinhub.mrv.plausibility import assess
    from twinhub.platform import Platform
    from twinhub.registry.app import create_registry_app
    from twinhub.services.mrv_inputs import stove_periods
    from twinhub.settings import Settings

    database_url = await create_postgres_database(args.postgres_url, "scale" + args.tag[-6:])
    workdir = Path(tempfile.mkdtemp(prefix="twinhub-bench-scale-"))
    admin_key = secrets.token_hex(24)
    settings = Settings(
        environment="development",
        data_dir=workdir,
        database_url=database_url,
        log_level="warning",
        twinhub_bootstrap_api_key=admin_key,
        telemetry_rate_limit="100000000/minute",
        registry_request_timeout_seconds=300,
        database_statement_timeout_seconds=300,
        database_connect_timeout_seconds=60,
        database_health_interval_seconds=30,
        background_workers_enabled=False,
    )
    configure_logging("warning", "console")
    platform = Platform(settings)
    await platform.start()
    app = create_registry_app(platform=platform)
    server, task, port = await serve(app)
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    first_day = today - timedelta(days=args.days)
    result: dict[str, Any] = {
        "database": "postgresql",
        "stoves": args.stoves,
        "days": args.days,
        "batch_hours": args.batch_hours,
    }
    load: LoadProcess | None = None
    try:
        import httpx

        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://bench",
            headers={"Authorization": f"Bearer {admin_key}"},
        ) as client:
            answer = await client.post(
                "/v1/domains",
                json={"type": "Project", "class": "did:ixo:protocol/project", "metadata": {}},
            )
            answer.raise_for_status()
            project = answer.json()["did"]
        stoves = [f"did:ixo:entity/scale-{args.tag[-6:]}-{n:06d}" for n in range(args.stoves)]
        t0 = time.perf_counter()
        tokens = await seed_programme(platform, stoves, project, first_day - timedelta(days=1))
        result["seed_seconds"] = round(time.perf_counter() - t0, 1)
        print(
            f"seeded {args.stoves:,} stoves with tokens in {result['seed_seconds']} s", flush=True
        )
        gc.collect()
        gc.freeze()
        load = LoadProcess(load_cpu)
        await load.ready()
        registers = dict.fromkeys(stoves, 100.0)
        total = {"readings": 0, "seconds": 0.0, "cpu": 0.0, "db_cpu": 0.0}
        hours_total = args.days * 24
        db0 = await db_cpu_seconds(database_url)
        started = time.perf_counter()
        for offset in range(0, len(stoves), args.chunk):
            chunk = stoves[offset : offset + args.chunk]
            for first_hour in range(0, hours_total, args.batch_hours):
                hours = range(first_hour, min(first_hour + args.batch_hours, hours_total))
                jobs = []
                for did in chunk:
                    readings, registers[did] = stove_batch(first_day, hours, registers[did])
                    body = json.dumps({"readings": readings}).encode()
                    jobs.append((f"/v1/domains/{did}/telemetry", body, tokens[did]))
                figures = await http_flood(load, port, jobs, args, None)
                total["readings"] += figures["readings"]
                total["seconds"] += figures["seconds"]
                total["cpu"] += (
                    figures["server_cpu_ms_per_1000_readings"] * figures["readings"] / 1e6
                )
            done = min(offset + args.chunk, len(stoves))
            rate = total["readings"] / max(total["seconds"], 1e-9)
            print(
                f"  {done:,} of {args.stoves:,} stoves loaded, {total['readings']:,} readings, "
                f"{rate:,.0f} readings/s",
                flush=True,
            )
        wall = time.perf_counter() - started
        db_cpu = await db_cpu_seconds(database_url) - db0
        result["ingestion"] = {
            "readings": total["readings"],
            "posting_seconds": round(total["seconds"], 1),
            "readings_per_second": round(total["readings"] / max(total["seconds"], 1e-9)),
            "wall_seconds_with_batch_building": round(wall, 1),
            "server_cpu_us_per_reading": round(total["cpu"] / max(total["readings"], 1) * 1e6, 2),
            "postgres_cpu_us_per_reading": round(db_cpu / max(total["readings"], 1) * 1e6, 2),
        }
        print(
            f"ingestion: {result['ingestion']['readings_per_second']:,} readings/s over "
            f"{result['ingestion']['posting_seconds']} s of posting; server "
            f"{result['ingestion']['server_cpu_us_per_reading']} us CPU per reading, "
            f"PostgreSQL {result['ingestion']['postgres_cpu_us_per_reading']} us"
        )
        sizes = await storage(database_url)
        result["storage"] = sizes
        scale = 365 / args.days / args.stoves
        per_year = {name: round(b * scale) for name, b in sizes["tables_bytes"].items()}
        result["bytes_per_stove_year"] = per_year
        result["bytes_per_stove_year_total"] = sum(per_year.values())
        print(f"readings stored: {sizes['readings']:,}; rollup rows: {sizes['rollup_rows']}")
        for name, b in sizes["tables_bytes"].items():
            print(
                f"  {name}: {b / 2**20:,.0f} MiB, {per_year[name] / 1024:,.0f} KiB per stove-year"
            )
        print(
            f"  total: {result['bytes_per_stove_year_total'] / 2**20:,.2f} MiB per stove-year "
            f"(the week scaled to 365 days)"
        )

        # the monitoring period over the loaded week, at this size; a week is shorter than the
        # methodology's minimum of active days (10), which would exclude every stove: the
        # bench lowers that one rule to the period's length and says so
        methodology, lowered = period_methodology(args.days)
        if lowered:
            print(f"(the methodology's min_active_days lowered from {lowered} to {args.days})")
        result["period_min_active_days_lowered_from"] = lowered
        start: date = first_day.date()
        end: date = start + timedelta(days=args.days - 1)
        t0, c0 = time.perf_counter(), time.process_time()
        async with platform.sessionmaker() as session:
            periods = await stove_periods(session, stoves, start, end, methodology.reading)
        t1, c1 = time.perf_counter(), time.process_time()
        findings = assess(day for p in periods for day in p.days)
        t2 = time.perf_counter()
        spec = PeriodSpec(project, start, end, "CARBON", 6)
        report = compute_period(
            spec, methodology, periods, findings, document=_document(), sampled=SAMPLED
        )
        t3 = time.perf_counter()
        result["period"] = {
            "read_rollups_s": round(t1 - t0, 2),
            "read_rollups_cpu_s": round(c1 - c0, 2),
            "plausibility_s": round(t2 - t1, 2),
            "methodology_and_report_s": round(t3 - t2, 2),
            "total_s": round(t3 - t0, 2),
            "included": report["totals"]["included"],
            "credits": report["credits"]["amount"],
            "exclusions": dict(
                Counter(row["reason"] for row in report["exclusions"]).most_common(5)
            ),
        }
        print(
            f"monitoring period, {args.stoves:,} stoves x {args.days} days: "
            f"{result['period']['total_s']} s (rollups {result['period']['read_rollups_s']} s, "
            f"plausibility {result['period']['plausibility_s']} s, methodology and report "
            f"{result['period']['methodology_and_report_s']} s); "
            f"{result['period']['included']:,} stoves included, "
            f"{result['period']['credits']:,} credits"
        )
        for reason, count in result["period"]["exclusions"].items():
            print(f"  excluded, {count:,} stoves: {reason}")
    finally:
        if load is not None:
            load.close()
        server.should_exit = True
        await asyncio.gather(task, return_exceptions=True)
        await platform.stop()
        if not args.keep:
            await drop_postgres_database(args.postgres_url, database_url)
    return result
