"""Oracle: methodology evaluations per second (stove by stove, and over a batch of stoves at
once: goal 5 us of CPU a stove-period), and a monitoring period of N stoves x D days
(default 10,000 x 30; goal 2 s, issue 33), pure and from SQLite rollups.

The period figure is split in its parts: reading the day rollups (stove_periods), learned
plausibility over every stove-day (assess) and the methodology per stove (compute_period),
under a project design document with two stove models (case 1 and case 2), each stove's
meter record, a sampled household size and the fleet's data completeness: every rule.

`--draft` (SQLite) also measures what a real draft adds to that (`MonitoringService.run`'s
work): its snapshot, which reads every raw reading of the period for the days' digests and
the sequence numbers seen (four seeded readings a stove-day), the inputs frozen and thawed
(`report_of`), and the report and inputs as the JSON text the period's row stores; then the
same draft again with the first's stove-day digests kept (services.day_digests), and the
daily pass that keeps them.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import gc
import hashlib
import itertools
import json
import random
import secrets
import sqlite3
import struct
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.postgres import create_postgres_database, drop_postgres_database
from twinhub.kernel.errors import Problems
from twinhub.mrv.builtin import builtin_methodology
from twinhub.mrv.methodology import MethodologyError
from twinhub.mrv.periods import PeriodSpec, assess_periods, compute_period
from twinhub.mrv.project_document import ProjectDocument, check_project_document
from twinhub.mrv.rollups import day_start
from twinhub.services.mrv_inputs import stove_periods
from twinhub.telemetry.wide import fields_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stoves", type=int, default=10_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--evaluations", type=int, default=20_000)
    parser.add_argument("--claims", type=int, default=200, help="claims the oracle decides")
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument(
        "--postgres-url",
        default="postgresql://postgres@127.0.0.1:5432/test",
        help="PostgreSQL server (any database on it; the run creates its own and drops it)",
    )
    parser.add_argument(
        "--profile", type=int, default=0, help="print this many lines of the period's profile"
    )
    parser.add_argument(
        "--draft",
        action="store_true",
        help="SQLite: also seed raw readings and measure a real draft's snapshot and report",
    )


def run(args: argparse.Namespace) -> int:
    figures = asyncio.run(bench(args))
    faulthandler.cancel_dump_traceback_later()  # asyncio.run came back: no hang to report
    for name, value in figures.items():
        print(f"{name}: {value}")
    return 0


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    from twinhub.platform import Platform
    from twinhub.settings import Settings

    methodology = builtin_methodology()
    figures: dict[str, Any] = {"stoves": args.stoves, "days": args.days}
    started, cpu = time.perf_counter(), time.process_time()
    late = 0
    for n in range(args.evaluations):
        try:
            methodology.evaluate({**EVALUATION, "energy_kwh": 20.0 + n % 17})
        except MethodologyError:  # past the time limit on a loaded machine: would flag
            late += 1
    wall = time.perf_counter() - started
    per_stove = (time.process_time() - cpu) / args.evaluations * 1e6
    figures["methodology evaluations/s"] = round(args.evaluations / wall)
    figures["cpu per evaluation (us)"] = round(per_stove, 1)
    figures.update(_batch(methodology, args.evaluations, per_stove))

    start = date(2026, 9, 1)
    end = start + timedelta(days=args.days - 1)
    postgres = None
    if args.database == "postgresql":
        postgres = await create_postgres_database(args.postgres_url, secrets.token_hex(3))
    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(
            environment="test",
            data_dir=Path(folder),
            database_url=postgres or f"sqlite:///{folder}/oracle.db",
            background_workers_enabled=False,
            log_level="warning",
        )
        platform = Platform(settings)
        await platform.start()
        try:
            stoves = [f"did:ixo:entity/bench-stove-{n:05d}" for n in range(args.stoves)]
            now = datetime.now(UTC)
            domains = [
                {
                    "did": did,
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
                        "stoveModel": "EPC-6L" if n % 2 else "ECO-1",
                        "meter": {**METER, "serial": f"M-{n:05d}"},
                    },
                    "status": "active",
                    "verified": True,
                    "version": 1,
                    "seq": n + 1,
                    "created_at": now,
                    "updated_at": now,
                }
                for n, did in enumerate(stoves)
            ]
            tokens = [
                {
                    "token_id": f"b{n:07d}",
                    "domain_did": did,
                    "secret_sha256": "0" * 64,
                    "label": "bench",
                    "created_by": "did:ixo:org/bench",
                    "created_at": now,
                }
                for n, did in enumerate(stoves)
            ]
            seeded = time.perf_counter()
            if postgres:
                rows = wide_rows(rollup_rows(stoves, start, args.days, lambda m: m), True)
                await _seed_postgres(postgres, domains, tokens, rows)
            else:
                rows = wide_rows(rollup_rows(stoves, start, args.days, _stamp), False)
                _seed(Path(folder) / "oracle.db", domains, tokens, rows)
                if args.draft:
                    _seed_readings(Path(folder) / "oracle.db", stoves, start, args.days)
            figures["seeding rollups (s, not measured)"] = round(time.perf_counter() - seeded, 1)
            # The seed rows (a million dicts at 10,000 stoves) are the bench's, not the
            # oracle's: kept alive, every full collection of the measured process walked
            # them. What is left is frozen as `twinhub serve` freezes its start (server.py).
            del domains, tokens, rows
            gc.collect()
            gc.freeze()
            figures.update(await _claims(platform, stoves[: args.claims], start, end))
            figures.update(await period(platform, stoves, start, end, args.profile))
            if args.draft and not postgres:
                figures.update(await draft(platform, stoves, start, end, args.profile))
        finally:
            await platform.stop()
            if postgres:
                await drop_postgres_database(args.postgres_url, postgres)
    # Twice (2026-11-28) the process never exited after its work, with no aiosqlite thread
    # left: should asyncio.run's shutdown hang again, every thread's stack is printed and
    # the process ends, so the cause can be read (bench/results/2026-11-28.md).
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)
    return figures


async def period(
    platform: Any, stoves: list[str], start: date, end: date, profile: int = 0
) -> dict[str, Any]:
    """The monitoring period of `stoves` from the seeded rollups, in its three parts, with
    the peak RSS it reached; `profile`: print that many lines of its cProfile (by own time)."""
    import cProfile
    import pstats
    import resource

    figures: dict[str, Any] = {}
    profiler = cProfile.Profile() if profile else None
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0, c0 = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    methodology = builtin_methodology()
    async with platform.sessionmaker() as session:
        periods = await stove_periods(session, stoves, start, end, methodology.reading)
    t1, c1 = time.perf_counter(), time.process_time()
    findings = assess_periods(periods)
    t2, c2 = time.perf_counter(), time.process_time()
    spec = PeriodSpec("did:ixo:entity/bench-project", start, end, "CARBON", 6)
    report = compute_period(
        spec, methodology, periods, findings, document=_document(), sampled=SAMPLED
    )
    t3, c3 = time.perf_counter(), time.process_time()
    if profiler:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(profile)
    figures["period: read rollups (s wall / cpu)"] = f"{t1 - t0:.2f} / {c1 - c0:.2f}"
    figures["period: learned plausibility (s wall / cpu)"] = f"{t2 - t1:.2f} / {c2 - c1:.2f}"
    figures["period: methodology + report (s wall / cpu)"] = f"{t3 - t2:.2f} / {c3 - c2:.2f}"
    figures["period: total wall (s)"] = round(t3 - t0, 2)
    figures["period: total cpu (s)"] = round(c3 - c0, 2)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    figures["period: peak RSS (MiB; before the period)"] = f"{peak // 1024} ({rss // 1024})"
    figures["period: stoves included"] = report["totals"]["included"]
    figures["period: credits"] = report["credits"]["amount"]
    figures["period: report digest"] = report["reportDigest"]  # same data, same digest
    return figures


async def draft(
    platform: Any, stoves: list[str], start: date, end: date, profile: int = 0
) -> dict[str, Any]:
    """What a real draft does beyond `period`, twice: first with no stove-day's digest kept
    (every raw reading read and digested), then again with the first's kept
    (services.day_digests: one small row a stove-day, checked against the day's count and
    sequence numbers); and the daily pass that keeps them, over one day of every stove.
    Each draft: the snapshot (rollups again, device identities, what is credited elsewhere,
    the days' digests and the sequence numbers seen), `report_of` (the frozen inputs thawed,
    plausibility, report), and the report and inputs as the JSON text the period's row
    keeps. The built-in claim protocol's methodology, no project document: the figures are
    for time, not credits. The two drafts must agree digit for digit."""
    import cProfile
    import pstats

    from sqlalchemy import delete

    from twinhub.db.models import TelemetryDayDigest
    from twinhub.mrv.period_inputs import report_of
    from twinhub.services.day_digests import Digested

    figures: dict[str, Any] = {}
    protocol = await platform.monitoring.protocols.get("did:ixo:protocol/clean-cooking-claim")
    profiler = cProfile.Profile() if profile else None
    first = Digested()
    made, frozen, report = await _draft(platform, protocol, stoves, start, end, first)
    figures.update({f"draft, nothing kept: {k}": v for k, v in made.items()})
    c0 = time.process_time()
    kept = await platform.day_digests.keep(first.fresh)
    figures["draft, nothing kept: the rest of its stove-days kept after (s cpu; rows)"] = (
        f"{time.process_time() - c0:.2f}; {kept}"
    )
    if profiler:
        profiler.enable()
    again = Digested()
    made, frozen_again, report_again = await _draft(platform, protocol, stoves, start, end, again)
    if profiler:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(profile)
    figures.update({f"draft, days kept: {k}": v for k, v in made.items()})
    figures["draft, days kept: stove-days reused / read"] = f"{again.reused} / {again.read}"
    if (report_again["reportDigest"], _inputs_digest(frozen_again)) != (
        report["reportDigest"],
        _inputs_digest(frozen),
    ):
        raise SystemExit("the draft from kept digests differs from the draft from the readings")
    # The drafts' reports come from the stoves as read; a verifier's, from the frozen
    # inputs thawed (mrv.period_inputs.report_of): the two must be one report.
    if report_of(frozen)["reportDigest"] != report["reportDigest"]:
        raise SystemExit("the draft's report differs from the report of its frozen inputs")
    figures["draft: stoves included"] = report["totals"]["included"]
    figures["draft: report digest (both drafts)"] = report["reportDigest"]
    # The frozen inputs but their moment: the same data gives the same digest.
    figures["draft: inputs digest (both drafts)"] = _inputs_digest(frozen)
    # The daily pass over one day of every stove, what was kept forgotten first.
    async with platform.sessionmaker.begin() as session:
        await session.execute(delete(TelemetryDayDigest))
    c0 = time.process_time()
    _, digested = await platform.day_digests.fill(end, end)
    figures["daily pass: one day of every stove (s cpu; stove-days digested)"] = (
        f"{time.process_time() - c0:.2f}; {digested}"
    )
    return figures


def _inputs_digest(frozen: dict[str, Any]) -> str:
    import orjson

    return hashlib.sha256(
        orjson.dumps({**frozen, "takenAt": None}, option=orjson.OPT_SORT_KEYS)
    ).hexdigest()


async def _draft(
    platform: Any, protocol: Any, stoves: list[str], start: date, end: date, into: Any
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """One draft's figures, frozen inputs and report (`into`: its digests, as a draft's)."""
    import resource

    import orjson

    from twinhub.db.dialects import read_snapshot
    from twinhub.oracle.monitoring import report_aside

    figures: dict[str, Any] = {}
    # How long the event loop is held at a time (what the worker's other requests wait):
    # a task asks to wake every 5 ms throughout, and each wake's lateness is kept.
    late: dict[str, list[float]] = {"snapshot": [], "report": []}
    phase = "snapshot"
    ticking = True

    async def ticker() -> None:
        while ticking:
            asked = time.perf_counter()
            await asyncio.sleep(0.005)
            late[phase].append(time.perf_counter() - asked - 0.005)

    ticks = asyncio.create_task(ticker())
    t0, c0 = time.perf_counter(), time.process_time()
    async with read_snapshot(platform.sessionmaker) as session:
        frozen, frozen_stoves = await platform.monitoring.inputs(
            session, "did:ixo:entity/bench-project", start, end, protocol, stoves, into=into
        )
    t1, c1 = time.perf_counter(), time.process_time()
    phase = "report"
    report = await report_aside(frozen, frozen_stoves)  # as MonitoringService.run does
    t2, c2 = time.perf_counter(), time.process_time()
    ticking = False
    await ticks
    stored = len(orjson.dumps(report)) + len(orjson.dumps(frozen))
    t3, c3 = time.perf_counter(), time.process_time()
    figures["snapshot, digests and seen numbers (s wall / cpu)"] = f"{t1 - t0:.2f} / {c1 - c0:.2f}"
    figures["report, from the stoves as read (s wall / cpu)"] = f"{t2 - t1:.2f} / {c2 - c1:.2f}"
    figures["report and inputs as JSON (s wall / cpu; MiB)"] = (
        f"{t3 - t2:.2f} / {c3 - c2:.2f}; {stored / 2**20:.0f}"
    )
    figures["total cpu (s; goal 2 s at 10,000 stoves x 30 days)"] = round(c3 - c0, 2)
    for part, lateness in late.items():
        lateness.sort()
        longest = lateness[-1] * 1000 if lateness else 0.0
        p99 = lateness[int(len(lateness) * 0.99)] * 1000 if lateness else 0.0
        figures[f"event loop held during {part} (ms, longest / p99)"] = f"{longest:.0f} / {p99:.0f}"
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    figures["peak RSS of the process so far (MiB)"] = peak // 1024
    return figures, frozen, report


def _seed_readings(path: Path, stoves: list[str], start: date, days: int) -> None:
    """Four raw readings a stove-day (two cooking sessions' start and end, as the seeded
    rollups count them), and each stove's device row, through the stdlib driver."""
    connection = sqlite3.connect(path)
    # A fixed receipt time, so the same data gives the same digests run after run.
    now = _stamp(datetime.combine(start + timedelta(days=days + 1), datetime.min.time(), UTC))
    with connection:
        connection.executemany(
            "INSERT INTO telemetry_devices (id, did, latest, readings, updated_at)"
            " VALUES (?, ?, '{}', ?, ?)",
            [(n + 1, did, days * 4, now) for n, did in enumerate(stoves)],
        )
        for n in range(len(stoves)):
            rows = []
            meter = 0.0
            for d in range(days):
                base = day_start(start + timedelta(days=d))
                for session, hour in enumerate((7, 18)):
                    at = base + timedelta(hours=hour)
                    seq = d * 4 + session * 2
                    started = json.dumps({"session": "start", "meterKwh": round(meter, 3)})
                    meter += 0.5
                    ended = json.dumps(
                        {"session": "end", "energyKwh": 0.5, "meterKwh": round(meter, 3)}
                    )
                    rows.append((n + 1, seq, _stamp(at), started, now))
                    rows.append((n + 1, seq + 1, _stamp(at + timedelta(minutes=40)), ended, now))
            connection.executemany(
                'INSERT INTO telemetry_readings (device_id, seq, time, "values", received_at)'
                " VALUES (?, ?, ?, ?, ?)",
                rows,
            )
    connection.close()


def rollup_rows(
    stoves: list[str], start: date, days: int, stamp: Callable[[datetime], Any]
) -> Iterator[tuple[Any, ...]]:
    """Each stove-day's three day rollups (sessions, energy, register) as telemetry_rollups
    rows, the bucket as `stamp` makes it, made one at a time: 100,000 stoves x 30 days is
    nine million rows."""
    rng = random.Random(7)
    stamps = [stamp(day_start(start + timedelta(days=d))) for d in range(days)]
    for did in stoves:
        meter = 0.0
        for stamp in stamps:
            energy = round(rng.uniform(0.6, 1.6), 3)
            first = meter + energy / 2  # the register after the morning session
            meter += energy
            yield (did, "day", stamp, "session=start", 2, 2.0, 1.0, 1.0)
            yield (did, "day", stamp, "energyKwh", 4, energy, energy / 4, energy / 4)
            yield (did, "day", stamp, "meterKwh", 2, first + meter, first, meter)


def wide_rows(rows: Iterable[tuple[Any, ...]], postgres: bool) -> Iterator[tuple[Any, ...]]:
    """Narrow rollup rows (one a field, a key's rows one after another) as the table's wide
    rows (telemetry/wide.py): the fields sorted, their cells as float64 (SQLite: the names
    joined and a blob; PostgreSQL: text[] and float8[])."""
    for (scope, interval, bucket), group in itertools.groupby(rows, key=lambda r: r[:3]):
        cells = {r[3]: (float(r[4]), r[5], r[6], r[7]) for r in group}
        names = sorted(cells)
        values = [v for name in names for v in cells[name]]
        if postgres:
            yield scope, interval, bucket, names, values
        else:
            yield (
                scope,
                interval,
                bucket,
                fields_text(names),
                struct.pack(f"<{len(values)}d", *values),
            )


def _batch(methodology: Any, count: int, per_stove: float) -> dict[str, Any]:
    """The same evaluations as one batch (Methodology.evaluate_many: the formulas as array
    operations over the stoves), against the stove-by-stove figure measured just before;
    the goal is 5 us of CPU a stove-period. The outcomes are checked equal to the last bit."""
    rows = [{**EVALUATION, "energy_kwh": 20.0 + n % 17} for n in range(count)]
    best = float("inf")
    for _ in range(3):  # the least of three: the machine is shared
        cpu = time.process_time()
        outcomes = methodology.evaluate_many(rows)
        best = min(best, (time.process_time() - cpu) / count * 1e6)
    sample = range(0, count, max(1, count // 200))
    for n in sample:
        evaluation = methodology.evaluate(rows[n])
        if repr(outcomes[n].values) != repr({s.name: s.value for s in evaluation.steps}):
            raise AssertionError(f"the batch differs from the stove-by-stove evaluation at {n}")
    return {
        "methodology batch: cpu per stove-period (us)": round(best, 2),
        "methodology batch: times faster than stove by stove": round(per_stove / best, 1),
    }


HANG_SECONDS = 120  # from the work's end to asyncio.run's return: it takes well under 1 s
EVALUATION: dict[str, Any] = {
    "case": 1,
    "project_fuel": "electricity",
    "baseline_fuel": "charcoal",
    "fuel_kg": 0.0,
    "stove_efficiency": 0.85,
    "sc_baseline": 0.0,
    "sc_project": 0.0,
    "household_size": 5,
    "days": 30,
    "meter_recorded": 1,
    "meter_overdue": 0,
    "meter_error": 0.01,
    "sample_confidence": 0.9,
    "sample_precision": 0.08,
    "fleet_share": 1.0,
}
METER = {
    "model": "EM-1",
    "accuracyClass": "1",
    "maxPermissibleError": 0.01,
    "calibratedOn": "2026-01-10",
    "calibrationDue": "2027-01-10",
    "certificate": "sha256:" + "c" * 64,
    "registerMax": 99999.9,
}
CLAIMS_GOAL = 500  # claims decided a second
CLAIM_CPU_GOAL_MS = 2.0
SAMPLED = {"householdSize": {"value": 4.6, "sampleSize": 97, "confidence": 0.9, "precision": 0.08}}


def _document() -> ProjectDocument:
    """A design document with a case 1 and a case 2 model (figures of the worked examples)."""

    def figure(value: float, unit: str) -> dict[str, Any]:
        return {
            "value": value,
            "unit": unit,
            "source": "bench",
            "year": 2026,
            "evidence": None,
            "status": "checked",
        }

    problems = Problems()
    found = check_project_document(
        {
            "methodology": {"id": "clean-cooking-mecd", "version": "2.1.0"},
            "country": "KE",
            "creditingPeriod": {"from": "2026-01-01", "to": "2032-12-31"},
            "baselineFuel": "charcoal",
            "leakage": "default",
            "parameters": {
                "fNRB": figure(0.88, "fraction"),
                "EF_grid": figure(0.5, "tCO2/MWh"),
            },
            "monitoringPlan": {"measure": "meter", "reportingIntervalHours": 24},
            "stoveModels": {
                "ECO-1": {
                    "case": 1,
                    "fuel": "electricity",
                    "efficiency": figure(0.85, "fraction"),
                    "testCertificate": "sha256:" + "a" * 64,
                },
                "EPC-6L": {
                    "case": 2,
                    "fuel": "electricity",
                    "specificConsumption": figure(1.2, "MJ/person/event"),
                    "baselineSpecificConsumption": figure(7.5, "MJ/person/event"),
                    "testCertificate": "sha256:" + "b" * 64,
                },
            },
        },
        problems,
    )
    problems.raise_if_any()
    assert found is not None
    return found


async def _claims(platform: Any, stoves: list[str], start: date, end: date) -> dict[str, Any]:
    """Whole oracle decisions (read the telemetry, corroborate, compute, sign, approve with
    its credential and mint; a ledger write per batch of ORACLE_BATCH claims) on pending
    claims of metered stoves; the goal is 500 claims/s, 2 ms of CPU a claim."""
    from sqlalchemy import text

    from twinhub.kernel.principals import Principal
    from twinhub.services.claims import CollectionSpec
    from twinhub.services.domains import DomainSpec

    admin = Principal("did:ixo:org/bench", frozenset({"admin"}))
    project = await platform.domains.create(
        DomainSpec(type="Project", protocol="did:ixo:protocol/project", local_id="bench-p"),
        admin,
    )
    oracle = await platform.domains.create(
        DomainSpec(
            type="Oracle",
            protocol="did:ixo:protocol/oracle",
            controller=["did:ixo:org/bench"],
            local_id="bench-o",
        ),
        admin,
    )
    async with platform.engine.begin() as connection:  # a bench shortcut past governance
        await connection.execute(
            text("UPDATE domains SET verified = TRUE WHERE did = :d"), {"d": project["did"]}
        )
        await connection.execute(
            text("UPDATE domains SET parent_did = :p WHERE did LIKE 'did:ixo:entity/bench-s%'"),
            {"p": project["did"]},
        )
    collection = await platform.claims.collections.create_collection(
        CollectionSpec(project["did"], "did:ixo:protocol/clean-cooking-claim", [oracle["did"]]),
        admin,
    )
    data = {
        "reportType": "cooking",
        "periodStart": datetime(start.year, start.month, start.day, tzinfo=UTC).isoformat(),
        "periodEnd": (
            datetime(end.year, end.month, end.day, tzinfo=UTC) + timedelta(days=1)
        ).isoformat(),
    }
    for did in stoves:
        await platform.claims.submissions.submit(collection["id"], data, admin, asset=did)
    t0, c0 = time.perf_counter(), time.process_time()
    decided = 0
    while True:
        done = await platform.oracle.run_once()
        if done == 0:
            break
        decided += done
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    approved = await platform.claims.collections.collection(collection["id"])
    return {
        "oracle: claims decided": decided,
        "oracle: approved": approved["counts"]["approved"],
        "oracle: claim evaluations/s (wall)": round(decided / wall, 1),
        "oracle: cpu per claim (ms)": round(cpu / max(decided, 1) * 1000, 2),
        "oracle: goal": f">= {CLAIMS_GOAL} claims/s, <= {CLAIM_CPU_GOAL_MS} ms cpu per claim",
    }


def _stamp(moment: datetime) -> str:
    """How SQLAlchemy keeps a datetime in SQLite."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def _domain_row(d: dict[str, Any], verified: Any, stamp: Callable[[Any], Any]) -> tuple[Any, ...]:
    """A seeded domain's row in DOMAIN_COLUMNS' order, `verified` and the times (`stamp`)
    as the seeding driver writes them."""
    return (
        d["did"],
        d["seq"],
        d["type"],
        d["class_did"],
        d["twin_class"],
        json.dumps(d["controller"]),
        "[]",
        "[]",
        "{}",
        json.dumps(d["properties"]),
        "active",
        verified,
        1,
        stamp(d["created_at"]),
        stamp(d["updated_at"]),
    )


async def _seed_postgres(
    url: str,
    domains: list[dict[str, Any]],
    tokens: list[dict[str, Any]],
    rows: Iterable[tuple[Any, ...]],
) -> None:
    """The same rows as `_seed`, by COPY (asyncpg's binary copy)."""
    import asyncpg

    connection = await asyncpg.connect(url)
    try:
        await connection.copy_records_to_table(
            "domains",
            columns=[*DOMAIN_COLUMNS],
            records=[_domain_row(d, True, lambda moment: moment) for d in domains],
        )
        await connection.copy_records_to_table(
            "device_tokens",
            columns=[*TOKEN_COLUMNS],
            records=[tuple(t[name] for name in TOKEN_COLUMNS) for t in tokens],
        )
        await connection.copy_records_to_table(
            "telemetry_rollups", columns=[*ROLLUP_COLUMNS], records=rows
        )
        await connection.execute("ANALYZE")  # as autovacuum would, a minute later
    finally:
        await connection.close()


DOMAIN_COLUMNS = (
    "did",
    "seq",
    "type",
    "class_did",
    "twin_class",
    "controller",
    "services",
    "credentials",
    "metadata",
    "properties",
    "status",
    "verified",
    "version",
    "created_at",
    "updated_at",
)
TOKEN_COLUMNS = ("token_id", "domain_did", "secret_sha256", "label", "created_by", "created_at")
ROLLUP_COLUMNS = ("scope", "interval", "bucket", "fields", "cells")


def _seed(
    path: Path,
    domains: list[dict[str, Any]],
    tokens: list[dict[str, Any]],
    rows: Iterable[tuple[Any, ...]],
) -> None:
    """Bulk rows through the stdlib driver: seeding is not what is measured."""
    connection = sqlite3.connect(path)
    with connection:
        connection.executemany(
            "INSERT INTO domains (did, seq, type, class_did, twin_class, controller, services,"
            " credentials, metadata, properties, status, verified, version, created_at,"
            " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [_domain_row(d, 1, _stamp) for d in domains],
        )
        connection.executemany(
            "INSERT INTO device_tokens (token_id, domain_did, secret_sha256, label, created_by,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?)",
            [
                (
                    t["token_id"],
                    t["domain_did"],
                    t["secret_sha256"],
                    t["label"],
                    t["created_by"],
                    _stamp(t["created_at"]),
                )
                for t in tokens
            ],
        )
        connection.executemany(
            'INSERT INTO telemetry_rollups (scope, "interval", bucket, fields, cells)'
            " VALUES (?, ?, ?, ?, ?)",
            rows,
        )
    connection.close()
