"""The console at programme scale: server time of every console page over a programme of
30,000 stoves (tests/support/large_programme.py: the demo, plus 30,000 stoves in ten
regions with their households, claims, problems and telemetry), against a bare Starlette
page measured in the same run.

Each page is asked through the registry app's own ASGI stack in this process (httpx's
ASGI transport: no sockets, so what is timed is the server's work: routing, session,
queries, template), signed in as an admin; `--repeat` times each, after one warm-up.
Printed per page: median and slowest wall ms, CPU ms per request, the page's size, and the
median as a multiple of the ceiling (a bare Starlette route returning a fixed page of the
same size through the same transport). Goal (issue #32): every page under 300 ms on the
server at 30,000 stoves. Pinned to one core. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import secrets
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bench.ussd import pinned_to, run_metadata

GOAL_MS = 300.0
RESULTS = Path(__file__).resolve().parent / "results"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stoves", type=int, default=30_000)
    parser.add_argument("--repeat", type=int, default=7, help="timed requests per page")
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--cpu", type=int, default=None, help="core to pin to (default: first)")
    parser.add_argument("--tag", default=time.strftime("%Y%m%d-%H%M%S"))


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def pages(p: Any) -> list[tuple[str, str]]:
    project = quote(p.project, safe=":/")
    demo = quote(p.demo_project, safe=":/")
    return [
        ("dashboard", "/console/"),
        ("dashboard of the project", f"/console/?did={project}"),
        ("stoves", "/console/stoves"),
        ("stoves of the project, page 600", f"/console/stoves?project={project}&page=600"),
        ("stoves by name", "/console/stoves?sort=name&dir=desc"),
        ("stoves filtered", "/console/stoves?region=Eastern&verified=yes&online=yes"),
        ("stoves searched", "/console/stoves?q=SC-12345"),
        ("stoves by last reading", "/console/stoves?sort=seen&dir=desc"),
        ("households", "/console/households"),
        ("households of a region", "/console/households?region=Lusaka&sort=name"),
        ("claims queue", "/console/claims"),
        ("claims, all", "/console/claims?status=&sort=submitted&dir=desc"),
        ("support", "/console/support"),
        ("events", "/console/events"),
        ("events of a type, page 500", "/console/events?type=domain.created&page=500"),
        ("webhooks", "/console/webhooks"),
        ("API keys", "/console/keys"),
        ("projects", "/console/projects"),
        ("project page", f"/console/twins/{project}"),
        ("stove page", f"/console/twins/{quote(p.first_stove, safe=':/')}"),
        ("periods", f"/console/projects/{demo}/periods"),
        ("surveys", "/console/surveys"),
        ("governance", "/console/governance"),
        ("map", "/console/map"),
        ("map of the project", f"/console/map?did={project}"),
        ("map of a box", "/console/map?bbox=-16.2,27.6,-14.6,29.0"),
    ]


def ceiling_app(body: str) -> Any:
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    async def page(_: Any) -> Any:
        return HTMLResponse(body)

    return Starlette(routes=[Route("/{path:path}", page)])


async def timed(client: Any, path: str, repeat: int) -> dict[str, Any]:
    began, cpu = time.perf_counter(), _cpu()
    answer = await client.get(path)  # warm-up (templates compiled, caches filled)
    first = ((time.perf_counter() - began) * 1000, (_cpu() - cpu) * 1000)
    walls, cpus = [], []
    for _ in range(repeat):
        began, cpu = time.perf_counter(), _cpu()
        answer = await client.get(path)
        walls.append((time.perf_counter() - began) * 1000)
        cpus.append((_cpu() - cpu) * 1000)
    return {
        "status": answer.status_code,
        "bytes": len(answer.content),
        "median_ms": round(statistics.median(walls), 2),
        "max_ms": round(max(walls), 2),
        "cpu_ms": round(statistics.median(cpus), 2),
        # The warm-up: what a page's first asking costs (its caches empty, e.g. the map's
        # places; templates compiled on the first page only).
        "first_ms": round(first[0], 2),
        "first_cpu_ms": round(first[1], 2),
    }


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    import httpx
    from asgi_lifespan import LifespanManager
    from tests.support.large_programme import build_large_programme

    from twinhub.logging import configure_logging
    from twinhub.registry.app import create_registry_app
    from twinhub.settings import Settings

    configure_logging("warning", "console")
    workdir = Path(tempfile.mkdtemp(prefix="twinhub-bench-console-"))
    url = f"sqlite:///{workdir / 'twinhub.db'}"
    if args.database == "postgresql":
        from bench.postgres import create_postgres_database

        url = await create_postgres_database(args.postgres_url, "con" + args.tag[-6:])
    began = time.monotonic()
    programme = await asyncio.to_thread(build_large_programme, url, args.stoves)
    built = round(time.monotonic() - began, 1)
    print(f"built the programme ({args.stoves:,} stoves) in {built} s: {programme.steps}")
    if args.database == "postgresql":
        # As bench claims does: the local server runs no autovacuum, and tables never
        # analysed since their bulk load are planned as if empty.
        import asyncpg

        connection = await asyncpg.connect(url)
        try:
            await connection.execute("ANALYZE")
        finally:
            await connection.close()
        print("ANALYZE done")
    settings = Settings(
        environment="test",
        database_url=url,
        data_dir=workdir,
        redis_url=None,
        log_level="warning",
        oracle_enabled=False,
        background_workers_enabled=False,
        pin_encryption_key=secrets.token_hex(32),
        registry_rate_limit="1000000/minute",
    )
    result: dict[str, Any] = {
        "database": args.database,
        "stoves": args.stoves,
        "build_seconds": built,
        "goal_ms": GOAL_MS,
        "pages": {},
    }
    app = create_registry_app(settings=settings)
    try:
        async with (
            LifespanManager(app, startup_timeout=120) as manager,
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=manager.app), base_url="http://bench"
            ) as client,
        ):
            form = await client.get("/console/sign-in")
            token = re.search(r'name="csrf" value="([^"]+)"', form.text)
            assert token is not None, form.text[:500]
            signed = await client.post(
                "/console/sign-in",
                data={"csrf": token.group(1), "api_key": programme.admin_key, "next": "/console/"},
            )
            assert signed.status_code == 303, signed.text[:500]
            sizes = []
            for name, path in pages(programme):
                figures = await timed(client, path, args.repeat)
                if figures["status"] != 200:
                    raise SystemExit(f"{name}: {figures['status']} for {path}")
                result["pages"][name] = {"path": path, **figures}
                sizes.append(figures["bytes"])
        body = "<!doctype html><p>" + "x" * max(int(statistics.median(sizes)) - 20, 0)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=ceiling_app(body)), base_url="http://bench"
        ) as bare:
            result["ceiling"] = await timed(bare, "/console/stoves", max(args.repeat, 20))
    finally:
        if args.database == "postgresql":
            from bench.postgres import drop_postgres_database

            await drop_postgres_database(args.postgres_url, url)
    return result


def report(result: dict[str, Any]) -> bool:
    ceiling = result["ceiling"]["median_ms"]
    print(
        f"\nconsole pages, {result['stoves']:,} stoves on {result['database']} "
        f"(bare Starlette page of the median size: {ceiling} ms, "
        f"{result['ceiling']['cpu_ms']} ms CPU)"
    )
    print(
        f"{'page':36} {'median':>8} {'max':>8} {'cpu':>7} {'first':>7} {'kB':>6} {'x bare':>7}"
        "  goal"
    )
    met = True
    for name, p in result["pages"].items():
        ok = p["median_ms"] < result["goal_ms"]
        met &= ok
        print(
            f"{name:36} {p['median_ms']:8.1f} {p['max_ms']:8.1f} {p['cpu_ms']:7.1f} "
            f"{p.get('first_ms', 0):7.1f} "
            f"{p['bytes'] / 1000:6.1f} {p['median_ms'] / max(ceiling, 0.001):7.0f}  "
            f"{'met' if ok else 'MISSED'}"
        )
    slowest = max(result["pages"].items(), key=lambda item: item[1]["median_ms"])
    print(
        f"slowest: {slowest[0]} at {slowest[1]['median_ms']} ms (goal < {result['goal_ms']:.0f} "
        f"ms): {'met' if met else 'missed'}"
    )
    return met


def run(args: argparse.Namespace) -> int:
    cpu = args.cpu if args.cpu is not None else sorted(os.sched_getaffinity(0))[0]
    with pinned_to(cpu):
        result = asyncio.run(bench(args))
    result["run"] = run_metadata((cpu, cpu), args.tag)
    result["load_average"] = os.getloadavg()
    met = report(result)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"console-{args.database}.json"
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out}")
    return 0 if met else 1
