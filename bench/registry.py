"""Registry benchmark: grow the registry through its API and check that reads stay flat.

Starts `twinhub serve registry` (fresh DATA_DIR, so a fresh SQLite file) pinned to one core
and drives it from another. For each size in ascending order (default 1,000, 10,000,
100,000) it grows the registry to that many domains with concurrent `POST /v1/domains`
(cumulative: 1k, then 9k more, then 90k more; 90 % clean-cooking devices, 5 % projects,
5 % organisations, each of which also gets a membership-group domain) and reports
creates/s; then it measures, with wrk, `GET /v1/domains/{did}` of random existing DIDs, a
`type=Project` list and a `class=clean-cooking` list from a cursor deep in the list, each at
full load with a few connections and at a paced low rate (where latency is service time,
not queueing). Targets: reads stay flat as the registry grows (p99 at the largest size
within 1.5x of the smallest, for GET and the filtered lists), GET p99 < 5 ms on SQLite.
See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import math
import os
import random
import resource
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

# Shared machinery of the USSD benchmark (server process, pinning, /proc, histograms,
# table formatting).
from bench import ceiling
from bench.ussd import (
    HOST,
    BenchError,
    Server,
    add_server_options,
    check_alive,
    cpu_seconds,
    fmt,
    free_port,
    hwm_mib,
    percentiles_ms,
    pick_cpus,
    pinned_to,
    rss_mib,
    run_metadata,
    sudo_prefix,
    verdict,
)

BENCH_DIR = Path(__file__).resolve().parent
LUA_SCRIPT = BENCH_DIR / "registry_reads.lua"
CREATES_SCRIPT = BENCH_DIR / "registry_creates.lua"
DEFAULT_RESULTS_DIR = BENCH_DIR / "results"

CLEAN_COOKING = "did:ixo:protocol/clean-cooking"
ORGANISATION = "did:ixo:protocol/organisation"
PROJECT = "did:ixo:protocol/project"
FUELS = ("charcoal", "lpg", "wood", "ethanol", "biogas")

TARGET_GET_P99_MS = 5.0
FLAT_FACTOR = 1.5  # p99 at the largest size may be at most this times p99 at the smallest
AUTO_PACED_FRACTION = 0.25  # auto paced rate: this share of the smallest size's throughput
WALK_PAGE = 500  # page size of the cursor walk (the server clamps to its own maximum)
MIB = 1024 * 1024
CEILING_TARGET = 0.5  # issue #14: GET by DID at >= 50 % of the bare Starlette ceiling
LIST_CEILING_TARGET = 0.3  # issue #33: each list page at >= 30 % of it
NOISE_WARN_PERCENT = 10.0  # warn when other processes took more of the server's core

# endpoint key -> how the table and the JSON name it
ENDPOINTS: dict[str, str] = {
    "get": "GET by DID",
    "list_type": "list type=Project",
    "list_class": "list class deep",
}
ENDPOINT_PATHS: dict[str, str] = {
    "get": "/v1/domains/{did}  (random existing DIDs)",
    "list_type": "/v1/domains?type=Project&limit=50",
    "list_class": "/v1/domains?class=did:ixo:protocol/clean-cooking&limit=50&cursor=<from the "
    "second half of the list>",
}


# ------------------------------------------------------------------------------ options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of `python -m bench registry`."""
    parser.add_argument(
        "--sizes",
        default="1000,10000,100000",
        help="registry sizes (domains created through POST) to measure at, ascending; "
        "creates are cumulative (default: %(default)s)",
    )
    parser.add_argument(
        "--database",
        choices=("sqlite", "postgresql"),
        default="sqlite",
        help="the server's database: a fresh SQLite file, or a database created on "
        "--postgres-url's server and dropped at the end (default: %(default)s)",
    )
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"),
        help="PostgreSQL server for --database postgresql (any database on it; the run "
        "creates its own) (default: $BENCH_POSTGRES_URL or %(default)s)",
    )
    parser.add_argument(
        "--ceiling",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="at the last size, drive a bare Starlette app (bench/ceiling.py) with the "
        "GET-by-DID paths on the same core, right after each read endpoint's full-load run and "
        "as long; report each endpoint's CPU-per-request ratio to it (default: on)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run for `bench all --quick`: 2,000 domains, 5 s reads, 1 s warm-up, "
        "no paced phases",
    )
    parser.add_argument(
        "--connections",
        type=int,
        default=8,
        help="wrk connections for the reads (one thread each); a moderate number, since on "
        "one core more only adds queueing (default: %(default)s)",
    )
    parser.add_argument(
        "--create-concurrency",
        type=int,
        default=16,
        help="POST /v1/domains requests in flight while growing (default: %(default)s)",
    )
    parser.add_argument(
        "--create-client",
        choices=("wrk", "python"),
        default="wrk",
        help="what sends the creates: wrk with bench/registry_creates.lua (one connection "
        "per request in flight), or this harness's httpx client, which saturates its core "
        "near 500 creates/s (default: %(default)s)",
    )
    parser.add_argument(
        "--duration",
        type=int,
        default=10,
        metavar="SECONDS",
        help="length of each full-load read measurement (default: %(default)s)",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=2,
        metavar="SECONDS",
        help="unmeasured load before each endpoint's measurement (default: %(default)s)",
    )
    parser.add_argument(
        "--paced-rate",
        type=float,
        default=None,
        metavar="REQ_PER_S",
        help="offered load of the paced read phases, the same for every size and endpoint; "
        "default: per endpoint, a quarter of the throughput it reached at the smallest size "
        "(then kept for the larger sizes, so sizes are compared at the same load); 0 skips",
    )
    parser.add_argument(
        "--paced-seconds",
        type=int,
        default=15,
        metavar="SECONDS",
        help="length of each paced read phase (default: %(default)s)",
    )
    parser.add_argument(
        "--progress-every",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="print a progress line this often while creating (default: %(default)s)",
    )
    parser.add_argument(
        "--server-cpu", type=int, default=None, help="CPU for the server (default: first allowed)"
    )
    parser.add_argument(
        "--wrk-cpu",
        type=int,
        default=None,
        help="CPU for wrk and for this harness's create client (default: second allowed)",
    )
    parser.add_argument(
        "--timeout",
        type=int,
        default=5,
        metavar="SECONDS",
        help="request timeout (wrk and creates); slower replies count as errors "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--max-errors",
        type=int,
        default=0,
        help="exit non-zero when the run has more errors than this (default: %(default)s)",
    )
    parser.add_argument(
        "--strict", action="store_true", help="also exit non-zero when a target is missed"
    )
    add_server_options(
        parser,
        "registry",
        "registry.json",
        "keep the temp dir (SQLite file, logs, DID lists) even when the run succeeds",
    )


def parse_sizes(text: str) -> list[int]:
    """`1000,10k,1e5` -> [1000, 10000, 100000]; sizes must grow, since creates accumulate."""
    sizes = []
    for word in text.replace("_", "").split(","):
        word = word.strip().lower()
        if not word:
            continue
        scale = 1000 if word.endswith("k") else 1
        sizes.append(int(float(word.removesuffix("k")) * scale))
    if not sizes or any(s < 1 for s in sizes) or sizes != sorted(set(sizes)):
        raise ValueError(f"--sizes must be positive and strictly ascending, got {text!r}")
    return sizes


def check_tools() -> str | None:
    """Why the benchmark cannot run (missing wrk/taskset/httpx), or None when it can."""
    if shutil.which("wrk") is None:
        return f"wrk is not installed; install it with:\n    {sudo_prefix()}apt-get install -y wrk"
    if shutil.which("taskset") is None:
        return (
            "taskset (pins server and load to their own cores) is not installed; install it "
            f"with:\n    {sudo_prefix()}apt-get install -y util-linux"
        )
    if importlib.util.find_spec("httpx") is None:
        return "httpx (the create client) is missing from this Python; run ./dev bench registry"
    for script in (LUA_SCRIPT, CREATES_SCRIPT):
        if not script.is_file():
            return f"missing {script}"
    return None


# ------------------------------------------------------------------------------ server


def server_command(args: argparse.Namespace, port: int, cpu: int) -> list[str]:
    """`taskset -c CPU twinhub serve registry ...` (or --server-cmd), pinned to its core."""
    if args.server_cmd:
        cmd = [w.format(host=HOST, port=port) for w in shlex.split(args.server_cmd)]
    else:
        twinhub = Path(sys.executable).parent / "twinhub"
        exe = str(twinhub) if twinhub.exists() else shutil.which("twinhub")
        if exe is None:
            raise BenchError("no twinhub executable next to this Python; run ./dev bench registry")
        cmd = [exe, "serve", "registry", "--host", HOST, "--port", str(port)]
    return ["taskset", "-c", str(cpu), *cmd]


def server_env(data_dir: Path, api_key: str) -> dict[str, str]:
    """The contract's environment; a stray DATABASE_URL must not send the run to PostgreSQL."""
    env = dict(os.environ)
    for key in ("DATABASE_URL", "REDIS_URL", "REDIS_KEY_PREFIX"):
        env.pop(key, None)
    env.update(
        DATA_DIR=str(data_dir),
        ENVIRONMENT="development",
        LOG_LEVEL="warning",
        TWINHUB_BOOTSTRAP_API_KEY=api_key,
        # One admin key drives the whole load; the default per-principal limit would throttle it.
        REGISTRY_RATE_LIMIT="100000000/minute",
    )
    return env


def db_mib(data_dir: Path) -> float:
    """Size of the SQLite database with its WAL, to relate figures to the file's growth."""
    return sum(p.stat().st_size for p in data_dir.glob("twinhub.db*") if p.is_file()) / MIB


# ------------------------------------------------------------------------------ creates


def create_body(index: int, run_tag: str) -> tuple[str, dict[str, Any]]:
    """The index-th domain of the mix: 5 % organisations, 5 % projects, 90 % devices.

    Deterministic in the index, so every run (and every size) has the same mix."""
    if index % 20 == 0:
        return "organisation", {
            "type": "Organisation",
            "class": ORGANISATION,
            "metadata": {"name": f"Bench Org {index}"},
            "properties": {"legalName": f"Bench Org {index} Ltd", "country": "KE"},
        }
    if index % 20 == 10:
        return "project", {
            "type": "Project",
            "class": PROJECT,
            "metadata": {"name": f"Bench Project {index}"},
            "properties": {"country": "KE", "methodology": "clean-cooking"},
        }
    return "device", {
        "type": "Device",
        "class": CLEAN_COOKING,
        "metadata": {"name": f"Stove {index}"},
        "properties": {
            "serialNumber": f"S-{run_tag}-{index}",
            "fuelType": FUELS[index % len(FUELS)],
        },
    }


@dataclass
class Registry:
    """What the client knows about the registry it grew: DIDs by kind, and the cursor walk."""

    devices: list[str] = field(default_factory=list)
    organisations: list[str] = field(default_factory=list)
    projects: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)  # membership groups of organisations
    next_index: int = 0  # the next create_body index
    walk_cursors: list[str] = field(default_factory=list)  # nextCursor of each walked page
    walk_positions: list[int] = field(default_factory=list)  # devices before each cursor
    walk_seen: set[str] = field(default_factory=set)

    @property
    def created(self) -> int:
        """Domains created through POST (membership groups come on top)."""
        return len(self.devices) + len(self.organisations) + len(self.projects)

    def all_dids(self) -> list[str]:
        return [*self.devices, *self.organisations, *self.projects, *self.groups]

    def add(self, kind: str, record: dict[str, Any]) -> None:
        """File a 201 reply's DID under its kind (and an organisation's group)."""
        {"device": self.devices, "organisation": self.organisations, "project": self.projects}[
            kind
        ].append(record["did"])
        if kind == "organisation" and record.get("membershipGroup"):
            self.groups.append(record["membershipGroup"])


@dataclass
class GrowStep:
    """One growth step: from the previous size to `size`, through concurrent POSTs."""

    size: int
    created: int = 0
    errors: int = 0
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    server_cpu_seconds: float = 0.0
    client_cpu_seconds: float = 0.0
    foreign_cpu_seconds: float = 0.0  # other processes on the server's core
    progress: list[dict[str, float]] = field(default_factory=list)
    error_samples: list[str] = field(default_factory=list)
    histogram: list[list[int]] = field(default_factory=list)  # wrk's, instead of latencies_ms
    ledger_commits: int | None = None  # group commits during the step (/metrics)
    database_cpu_seconds: float | None = None  # PostgreSQL's backends of the run's database
    ledger_writes: int | None = None  # ledger writes they committed

    @property
    def writes_per_commit(self) -> float | None:
        """The ledger's mean batch size: how many creates shared each commit."""
        if not self.ledger_commits or self.ledger_writes is None:
            return None
        return self.ledger_writes / self.ledger_commits

    @property
    def creates_per_s(self) -> float:
        return self.created / self.seconds if self.seconds else 0.0

    @property
    def database_ms_per_create(self) -> float | None:
        """PostgreSQL's own CPU per create (its backends; not counted as the server's)."""
        if self.database_cpu_seconds is None or not self.created:
            return None
        return 1000 * self.database_cpu_seconds / self.created

    @property
    def cpu_ms_per_create(self) -> float | None:
        """Server CPU per successful create: its cost, independent of queueing and noise."""
        return 1000 * self.server_cpu_seconds / self.created if self.created else None

    def latency_ms(self) -> dict[str, float]:
        """p50/p99 of the POSTs (closed loop: mostly concurrency / creates per second)."""
        if self.histogram:
            return {k: round(v, 2) for k, v in percentiles_ms(self.histogram, (50, 90, 99)).items()}
        if not self.latencies_ms:
            return {}
        ordered = sorted(self.latencies_ms)

        def pick(p: float) -> float:
            return round(ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)], 2)

        return {"p50": pick(50), "p90": pick(90), "p99": pick(99), "max": round(ordered[-1], 2)}

    def to_json(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "created": self.created,
            "errors": self.errors,
            "seconds": round(self.seconds, 2),
            "creates_per_s": round(self.creates_per_s, 1),
            "server_cpu_ms_per_create": round(self.cpu_ms_per_create or 0.0, 3),
            "database_cpu_ms_per_create": round(self.database_ms_per_create, 3)
            if self.database_ms_per_create is not None
            else None,
            "ledger_commits": self.ledger_commits,
            "ledger_writes_committed": self.ledger_writes,
            "ledger_writes_per_commit": round(self.writes_per_commit, 2)
            if self.writes_per_commit
            else None,
            "latency_ms": self.latency_ms(),
            "server_cpu_percent": round(100 * self.server_cpu_seconds / self.seconds, 1)
            if self.seconds
            else None,
            "client_cpu_percent": round(100 * self.client_cpu_seconds / self.seconds, 1)
            if self.seconds
            else None,
            "foreign_cpu_percent_on_server_core": round(
                100 * self.foreign_cpu_seconds / self.seconds, 1
            )
            if self.seconds
            else None,
            "progress": self.progress,
            "error_samples": self.error_samples,
        }


def core_busy_seconds(cpu: int) -> float:
    """Busy time of one core from /proc/stat: minus the server's own CPU time it shows how
    much other processes took from the server's core (the noise behind a bad p99)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith(f"cpu{cpu} "):
                # user nice system idle iowait irq softirq steal ...
                ticks = [int(v) for v in line.split()[1:9]]
                busy = sum(ticks) - ticks[3] - ticks[4]
                return busy / os.sysconf("SC_CLK_TCK")
    return 0.0


def _cpu_self() -> float:
    """CPU seconds of this process (the create client), to show it was not the limit."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def grow(ctx: Ctx, registry: Registry, size: int, tag: str) -> GrowStep:
    """POST domains with --create-concurrency requests in flight until `size` exist; failed
    creates are retried with the next index so the size is reached, and counted as errors."""
    import httpx  # here, not at the top: `python -m bench ussd` must not need it

    server, api_key, args = ctx.server, ctx.api_key, ctx.args
    step = GrowStep(size=size)
    needed = size - registry.created
    if needed <= 0:
        return step
    state = {"ok": 0, "errors": 0, "in_flight": 0, "streak": 0}  # streak: errors in a row
    failure: list[str] = []
    started = time.monotonic()
    server_cpu0, client_cpu0 = cpu_seconds(server.pid), _cpu_self()
    core0 = core_busy_seconds(ctx.server_cpu)

    async def worker(client: httpx.AsyncClient) -> None:
        while not failure and state["ok"] + state["in_flight"] < needed:
            index = registry.next_index
            registry.next_index += 1
            kind, body = create_body(index, tag)
            state["in_flight"] += 1
            sent = time.perf_counter()
            problem = None
            try:
                reply = await client.post("/v1/domains", content=json.dumps(body))
                if reply.status_code == 201:
                    registry.add(kind, reply.json())
                else:
                    problem = f"POST #{index} ({kind}) -> {reply.status_code} {reply.text[:300]}"
            except (httpx.HTTPError, ValueError, KeyError) as exc:
                problem = f"POST #{index} ({kind}) -> {type(exc).__name__}: {exc}"
            step.latencies_ms.append((time.perf_counter() - sent) * 1000)
            state["in_flight"] -= 1
            if problem is None:
                state["ok"] += 1
                state["streak"] = 0
                continue
            state["errors"] += 1
            state["streak"] += 1
            if len(step.error_samples) < 10:
                step.error_samples.append(problem)
            if state["streak"] >= 200 or (state["errors"] >= 50 and state["errors"] > state["ok"]):
                failure.append(f"creates are failing ({state['errors']} errors, {state['ok']} ok)")

    async def report() -> None:
        last_t, last_ok, last_cpu, last_core = started, 0, server_cpu0, core0
        while True:
            await asyncio.sleep(args.progress_every)
            if server.exit_code() is not None:
                failure.append(f"server process exited with code {server.exit_code()}")
                return
            now, ok = time.monotonic(), state["ok"]
            cpu, core = cpu_seconds(server.pid), core_busy_seconds(ctx.server_cpu)
            span = now - last_t
            rate, avg = (ok - last_ok) / span, ok / (now - started)
            server_pct = 100 * (cpu - last_cpu) / span
            others_pct = max(0.0, 100 * (core - last_core - (cpu - last_cpu)) / span)
            step.progress.append(
                {
                    "seconds": round(now - started, 1),
                    "domains": registry.created,
                    "creates_per_s": round(rate, 1),
                    "server_cpu_percent": round(server_pct, 1),
                    "foreign_cpu_percent_on_server_core": round(others_pct, 1),
                }
            )
            print(
                f"  creates {registry.created:>9,}/{size:,}  {rate:6,.0f}/s now  "
                f"{avg:6,.0f}/s avg  errors {state['errors']}  server CPU {server_pct:3.0f} %  "
                f"others on its core {others_pct:3.0f} %  RSS {rss_mib(server.pid):.0f} MiB",
                flush=True,
            )
            last_t, last_ok, last_cpu, last_core = now, ok, cpu, core

    limits = httpx.Limits(
        max_connections=args.create_concurrency, max_keepalive_connections=args.create_concurrency
    )
    async with httpx.AsyncClient(
        base_url=server.base_url,
        headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"},
        timeout=httpx.Timeout(args.timeout),
        limits=limits,
    ) as client:
        reporter = asyncio.create_task(report())
        try:
            await asyncio.gather(*(worker(client) for _ in range(args.create_concurrency)))
        finally:
            reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reporter
    step.seconds = time.monotonic() - started
    step.server_cpu_seconds = cpu_seconds(server.pid) - server_cpu0
    step.client_cpu_seconds = _cpu_self() - client_cpu0
    step.foreign_cpu_seconds = max(
        0.0, core_busy_seconds(ctx.server_cpu) - core0 - step.server_cpu_seconds
    )
    step.created, step.errors = state["ok"], state["errors"]
    if failure:
        samples = "\n  ".join(step.error_samples[:5])
        raise BenchError(f"{failure[0]}; sample replies:\n  {samples}")
    return step


def grow_wrk(ctx: Ctx, registry: Registry, size: int, tag: str) -> GrowStep:
    """POST domains with wrk (bench/registry_creates.lua), one connection per request in
    flight, until `size` exist: each wrk thread makes its share and stops, and the harness
    stops wrk once every share is in. A failed create counts as an error and its thread
    goes on with its next index (as `grow` does)."""
    step = GrowStep(size=size)
    needed = size - registry.created
    if needed <= 0:
        return step
    threads = ctx.args.create_concurrency
    prefix = ctx.workdir / f"created-{size}"
    files = [Path(f"{prefix}-{t}.txt") for t in range(1, threads + 1)]
    last_look = [0.0]

    def finished() -> bool:
        if time.monotonic() - last_look[0] < 0.5:
            return False
        last_look[0] = time.monotonic()
        lines = 0
        for path in files:
            with contextlib.suppress(OSError), path.open("rb") as f:
                lines += sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(65536), b""))
        return lines >= needed

    env = {
        "BENCH_THREADS": str(threads),
        "BENCH_INDEX_BASE": str(registry.next_index),
        "BENCH_TARGET": str(needed),
        "BENCH_RUN_TAG": tag,
        "BENCH_IDS_OUT": str(prefix),
    }
    empty = ctx.workdir / "no-paths.txt"
    empty.write_text("-\n")
    seconds = 60 + needed // 100  # an upper bound: wrk is stopped once the creates are in
    core0 = core_busy_seconds(ctx.server_cpu)
    run = run_wrk(
        ctx, f"create-{size}", "full", empty, seconds, script=CREATES_SCRIPT,
        env_extra=env, connections=threads, finished=finished,
    )  # fmt: skip
    registry.next_index += int(run.extra.get("max_n", 0)) * threads
    for path in files:
        for line in path.read_text().splitlines():
            kind, did, group = line.split("\t")
            registry.add(kind, {"did": did, "membershipGroup": group or None})
        path.unlink()
    first, last = run.extra.get("first_us", 0), run.extra.get("last_us", 0)
    step.seconds = (last - first) / 1e6 if last > first else run.wall_seconds
    step.created, step.errors = run.ok, run.all_errors
    step.server_cpu_seconds = run.server_cpu_seconds
    step.client_cpu_seconds = run.wrk_cpu_seconds
    step.foreign_cpu_seconds = max(
        0.0, core_busy_seconds(ctx.server_cpu) - core0 - run.server_cpu_seconds
    )
    step.histogram = run.histogram
    step.error_samples = run.error_samples
    if step.created < needed:
        samples = "\n  ".join(step.error_samples[:5])
        raise BenchError(
            f"wrk made {step.created:,} of {needed:,} creates ({step.errors} errors); sample "
            f"replies:\n  {samples}"
        )
    return step


class DatabaseCpu:
    """CPU of PostgreSQL's backends serving one database, summed over a stretch of time.

    Backends come and go (the pool's overflow connections close when the load drops), so a
    before/after reading would lose those that ended; a thread looks at /proc every 0.2 s
    (a backend's process title names its database) and keeps each backend's last reading.
    A backend first seen during the stretch counts from zero."""

    def __init__(self, database: str) -> None:
        self._title = f" {database} ".encode()
        self._first: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _look(self, first: bool) -> None:
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if self._title not in f.read().replace(b"\0", b" ") + b" ":
                        continue
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            self._first.setdefault(pid, cpu if first else 0.0)
            self._last[pid] = cpu

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self._look(first=False)

    def __enter__(self) -> DatabaseCpu:
        self._look(first=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._look(first=False)

    @property
    def seconds(self) -> float:
        return sum(self._last[pid] - self._first[pid] for pid in self._last)


def ledger_counters(server: Server) -> tuple[int, int] | None:
    """(group commits, writes committed) from the server's /metrics, None where the
    server does not publish them."""
    try:
        with urllib.request.urlopen(server.base_url + "/metrics", timeout=30) as resp:
            text = resp.read().decode()
    except (urllib.error.URLError, OSError):
        return None
    values: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("twinhub_ledger_commits_total", "twinhub_ledger_writes_committed_total"):
            values[name] = int(float(value))
    if len(values) < 2:
        return None
    return values["twinhub_ledger_commits_total"], values["twinhub_ledger_writes_committed_total"]


# ------------------------------------------------------------------------------ API checks


def api_get(server: Server, api_key: str, path: str, timeout: float = 60) -> dict[str, Any]:
    """One authenticated GET through urllib; any non-200 is a broken contract."""
    req = urllib.request.Request(
        server.base_url + path, headers={"Authorization": f"Bearer {api_key}"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            data: dict[str, Any] = json.loads(resp.read())
            return data
    except urllib.error.HTTPError as exc:
        raise BenchError(f"GET {path} -> HTTP {exc.code}: {exc.read()[:300]!r}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise BenchError(f"GET {path} failed: {exc}") from None


def list_path(params: dict[str, str | int]) -> str:
    return "/v1/domains?" + urllib.parse.urlencode(params)


def smoke(server: Server, api_key: str, registry: Registry) -> None:
    """Read back one created domain and both lists by hand first, so a contract mismatch
    shows as one readable reply instead of a million wrk errors."""
    did = registry.devices[0]
    record = api_get(server, api_key, f"/v1/domains/{did}")
    if record.get("did") != did:
        raise BenchError(f"GET /v1/domains/{did} returned another record: {str(record)[:300]}")
    for params in ({"type": "Project", "limit": 50}, {"class": CLEAN_COOKING, "limit": 50}):
        page = api_get(server, api_key, list_path(params))
        if not isinstance(page.get("items"), list) or "nextCursor" not in page:
            raise BenchError(f"GET {list_path(params)} has no items/nextCursor: {str(page)[:300]}")


def walk_class_list(server: Server, api_key: str, registry: Registry) -> dict[str, Any]:
    """Page through the clean-cooking list with the largest page, resuming where the walk
    of the previous size stopped (cursors of an append-only list stay valid); gives cursors
    deep in the list and checks that paging returns every device exactly once."""
    started, pages = time.monotonic(), 0
    cursor = registry.walk_cursors[-1] if registry.walk_cursors else None
    position = registry.walk_positions[-1] if registry.walk_positions else 0
    while True:
        params: dict[str, str | int] = {"class": CLEAN_COOKING, "limit": WALK_PAGE}
        if cursor:
            params["cursor"] = cursor
        page = api_get(server, api_key, list_path(params))
        pages += 1
        items = page["items"]
        registry.walk_seen.update(item["did"] for item in items)
        position += len(items)
        cursor = page.get("nextCursor")
        if not cursor:
            break
        registry.walk_cursors.append(cursor)
        registry.walk_positions.append(position)
    devices = set(registry.devices)
    return {
        "pages": pages,
        "seconds": round(time.monotonic() - started, 2),
        "devices_listed": len(registry.walk_seen),
        "missing_from_list": len(devices - registry.walk_seen),
        "unknown_in_list": len(registry.walk_seen - devices),
        "cursors": len(registry.walk_cursors),
    }


def deep_cursors(registry: Registry) -> list[str | None]:
    """Cursors from the second half of the clean-cooking list (all of them, so the reads
    do not hit one cached page); the first page (None) while the list is under one walk
    page long."""
    total = len(registry.devices)
    deep: list[str | None] = [
        c
        for c, pos in zip(registry.walk_cursors, registry.walk_positions, strict=True)
        if pos >= total / 2
    ]
    return deep or registry.walk_cursors[-1:] or [None]


# ------------------------------------------------------------------------------ wrk reads


@dataclass
class ReadRun:
    """Figures of one wrk run against one endpoint."""

    endpoint: str
    phase: str  # warmup | full | paced
    rate_requested: float
    seconds: float
    responses: int
    ok: int
    errors: int  # non-200 replies
    body_bytes: int
    socket_errors: dict[str, int]
    wrk_latency_us: dict[str, float]
    histogram: list[list[int]]  # [low_us, high_us (-1 = open), count]
    error_samples: list[str]
    server_cpu_seconds: float
    wrk_cpu_seconds: float
    foreign_cpu_seconds: float  # other processes on the server's core
    wall_seconds: float
    extra: dict[str, Any] = field(default_factory=dict)  # the script's other result fields

    @property
    def rps(self) -> float:
        return self.responses / self.seconds if self.seconds else 0.0

    @property
    def all_errors(self) -> int:
        return self.errors + sum(self.socket_errors.values())

    @property
    def cpu_ms_per_request(self) -> float | None:
        """Server CPU per reply: the cost of one read, unaffected by queueing or by other
        processes taking the core (they delay a request but do not add to its CPU time)."""
        return 1000 * self.server_cpu_seconds / self.responses if self.responses else None

    def latency_ms(self) -> dict[str, float]:
        return percentiles_ms(self.histogram, (50, 90, 99, 99.9))

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("histogram")
        data.update(
            requests_per_s=round(self.rps, 1),
            latency_ms=self.latency_ms(),
            server_cpu_percent=round(100 * self.server_cpu_seconds / self.wall_seconds, 1),
            server_cpu_ms_per_request=round(self.cpu_ms_per_request or 0.0, 3),
            wrk_cpu_percent=round(100 * self.wrk_cpu_seconds / self.wall_seconds, 1),
            foreign_cpu_percent_on_server_core=round(
                100 * self.foreign_cpu_seconds / self.wall_seconds, 1
            ),
        )
        return data


@dataclass
class Ctx:
    """What every wrk run needs: the server, the key, the cores, where files go."""

    args: argparse.Namespace
    server: Server
    api_key: str
    server_cpu: int
    wrk_cpu: int
    workdir: Path
    log: Path


def run_wrk(
    ctx: Ctx,
    endpoint: str,
    phase: str,
    paths_file: Path,
    seconds: int,
    rate: float = 0.0,
    script: Path = LUA_SCRIPT,
    env_extra: dict[str, str] | None = None,
    connections: int | None = None,
    finished: Callable[[], bool] | None = None,
) -> ReadRun:
    """One wrk run of `seconds` GETting random lines of paths_file; rate > 0 paces the
    connections to that many requests/s in total. Another `script` with the same result
    contract (bench/claims_writes.lua) may be run instead, with `env_extra` on top, and
    other than --connections connections; wrk is stopped early once `finished()` is true."""
    args = ctx.args
    connections = connections or args.connections
    result_file = ctx.workdir / f"wrk-{endpoint}-{phase}.json"
    env = dict(os.environ)
    env.update(
        BENCH_PATHS_FILE=str(paths_file),
        BENCH_AUTH=f"Bearer {ctx.api_key}",
        BENCH_RESULT_FILE=str(result_file),
        BENCH_LUA_DIR=str(BENCH_DIR),
        BENCH_RATE_PER_CONN=str(rate / connections if rate > 0 else 0),
        BENCH_SEED=str(random.randrange(1, 1_000_000)),
    )
    env.update(env_extra or {})
    cmd = [
        "taskset", "-c", str(ctx.wrk_cpu), "wrk",
        "-t", str(connections), "-c", str(connections),
        "-d", f"{seconds}s", "--timeout", f"{args.timeout}s", "--latency",
        "-s", str(script), ctx.server.base_url,
    ]  # fmt: skip
    cpu_before = cpu_seconds(ctx.server.pid)
    core_before = core_busy_seconds(ctx.server_cpu)
    wrk_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    with ctx.log.open("a") as out:
        out.write(f"\n$ {shlex.join(cmd)}  # {endpoint} {phase} rate={rate:g}\n")
        out.flush()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        deadline = started + seconds + 60
        while proc.poll() is None:
            done = finished is not None and finished()
            if done or ctx.server.exit_code() is not None or time.monotonic() > deadline:
                proc.send_signal(signal.SIGINT)  # wrk stops early and still runs done()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                break
            time.sleep(0.2)
    wall = time.monotonic() - started
    cpu = cpu_seconds(ctx.server.pid) - cpu_before
    foreign = max(0.0, core_busy_seconds(ctx.server_cpu) - core_before - cpu)
    wrk_after = resource.getrusage(resource.RUSAGE_CHILDREN)  # wrk is the only reaped child
    wrk_cpu_s = (wrk_after.ru_utime + wrk_after.ru_stime) - (
        wrk_before.ru_utime + wrk_before.ru_stime
    )
    if proc.returncode != 0 or not result_file.exists():
        tail = "\n".join(ctx.log.read_text(errors="replace").splitlines()[-15:])
        raise BenchError(f"wrk failed (exit {proc.returncode}); end of {ctx.log}:\n{tail}")
    data = json.loads(result_file.read_text())
    result_file.unlink()
    return ReadRun(
        endpoint=endpoint,
        phase=phase,
        rate_requested=rate,
        seconds=data["duration_us"] / 1e6,
        responses=int(data["responses"]),
        ok=int(data["ok"]),
        errors=int(data["errors"]),
        body_bytes=int(data["body_bytes"]),
        socket_errors={k: int(v) for k, v in data["socket_errors"].items()},
        wrk_latency_us=data["wrk_latency_us"],
        histogram=data["histogram_us"],
        error_samples=data["error_samples"],
        server_cpu_seconds=cpu,
        wrk_cpu_seconds=wrk_cpu_s,
        foreign_cpu_seconds=foreign,
        wall_seconds=wall,
        extra={k: v for k, v in data.items() if k not in _WRK_RESULT_FIELDS},
    )


# what ReadRun takes from a wrk script's result file; the rest goes to ReadRun.extra
_WRK_RESULT_FIELDS = {
    "duration_us", "wrk_requests", "socket_errors", "wrk_status_errors", "responses", "ok",
    "errors", "body_bytes", "threads", "wrk_latency_us", "histogram_us", "error_samples",
}  # fmt: skip


def nice_rate(value: float) -> float:
    """Two significant digits, at least 1/s: a paced rate that reads well in the table."""
    if value < 1:
        return 1.0
    return float(f"{value:.2g}")


@dataclass
class Reads:
    """One endpoint at one size: full load, then paced."""

    full: ReadRun
    paced: ReadRun | None = None
    ceiling: ReadRun | None = None  # the bare ceiling, run right after `full`

    @property
    def runs(self) -> list[ReadRun]:
        return [self.full, *([self.paced] if self.paced else [])]

    @property
    def basis(self) -> ReadRun:
        """The run the latency targets are judged on: paced where it ran (service time),
        else full load."""
        return self.paced or self.full


def measure_reads(
    ctx: Ctx,
    files: dict[str, Path],
    paced_rates: dict[str, float],
    beside: Callable[[], ReadRun] | None = None,
) -> dict[str, Reads]:
    """Each endpoint: warm-up, full load (and the ceiling `beside` it, as long), paced; the
    first size fixes the auto paced rates."""
    args = ctx.args
    out: dict[str, Reads] = {}
    for endpoint, label in ENDPOINTS.items():
        if args.warmup > 0:
            run_wrk(ctx, endpoint, "warmup", files[endpoint], args.warmup)
            check_alive(ctx.server)
        full = run_wrk(ctx, endpoint, "full", files[endpoint], args.duration)
        check_alive(ctx.server)
        lat = full.latency_ms()
        print(
            f"  {label:18} full load ({args.connections} conn): {full.rps:7,.0f} req/s  "
            f"p50 {lat['p50']:7.2f} ms  p99 {lat['p99']:7.2f} ms  errors {full.all_errors}  "
            f"server CPU {100 * full.server_cpu_seconds / full.wall_seconds:3.0f} %  "
            f"others on its core {100 * full.foreign_cpu_seconds / full.wall_seconds:3.0f} %",
            flush=True,
        )
        reads = Reads(full=full, ceiling=beside() if beside is not None else None)
        if reads.ceiling is not None:
            bare = reads.ceiling
            print(
                f"  {'  bare ceiling':18} right after:       {bare.rps:7,.0f} req/s  server CPU "
                f"{fmt(bare.cpu_ms_per_request, '.3f')} ms/req",
                flush=True,
            )
        if endpoint not in paced_rates:
            wanted = args.paced_rate
            paced_rates[endpoint] = (
                nice_rate(AUTO_PACED_FRACTION * full.rps) if wanted is None else wanted
            )
        rate = paced_rates[endpoint]
        if rate > 0 and args.paced_seconds > 0:
            paced = run_wrk(ctx, endpoint, "paced", files[endpoint], args.paced_seconds, rate)
            check_alive(ctx.server)
            lat = paced.latency_ms()
            print(
                f"  {label:18} paced {rate:7,.0f}/s:      {paced.rps:7,.0f} req/s  "
                f"p50 {lat['p50']:7.2f} ms  p99 {lat['p99']:7.2f} ms  errors {paced.all_errors}  "
                f"others on server core "
                f"{100 * paced.foreign_cpu_seconds / paced.wall_seconds:3.0f} %",
                flush=True,
            )
            reads.paced = paced
        out[endpoint] = reads
    return out


@contextlib.contextmanager
def ceiling_beside(ctx: Ctx, paths: Path) -> Iterator[Callable[[], ReadRun]]:
    """A bare Starlette app (bench/ceiling.py) pinned to the server's core, started and
    warmed up: each call drives it at full load with the same wrk script and paths, as
    long as one of twinhub's runs (what a request costs when the server does nothing).
    Called right after each of twinhub's runs, both are measured over the same minutes: on
    a machine whose speed drifts, a ceiling measured once at the end moved the ratios more
    than any change did (bench/results/2026-11-29.md)."""
    port = free_port()
    workdir = ctx.workdir / "ceiling"
    workdir.mkdir(exist_ok=True)
    command = ["taskset", "-c", str(ctx.server_cpu), *ceiling.command(HOST, port)]
    server = Server(command, ceiling.env(), workdir, port)
    bare = replace(ctx, server=server)
    try:
        server.start()
        server.wait_ready(ctx.args.startup_timeout)
        if ctx.args.warmup > 0:
            run_wrk(bare, "ceiling", "warmup", paths, ctx.args.warmup)
        yield lambda: run_wrk(bare, "ceiling", "full", paths, ctx.args.duration)
    finally:
        server.stop()


def measure_ceiling(ctx: Ctx, paths: Path) -> ReadRun:
    """One full-load run of the bare ceiling (`ceiling_beside`)."""
    with ceiling_beside(ctx, paths) as run:
        return run()


def versus_ceiling(label: str, ours: ReadRun, bare: ReadRun, target: float) -> dict[str, Any]:
    """One endpoint against the ceiling: CPU per request, throughput, and the ratios."""
    mine, floor = ours.cpu_ms_per_request, bare.cpu_ms_per_request
    ratio = floor / mine if mine and floor else None
    return {
        "endpoint": label,
        "ceiling": "bare Starlette app (bench/ceiling.py), same uvicorn settings, core, wrk",
        "twinhub_cpu_ms_per_request": round(mine or 0.0, 4),
        "ceiling_cpu_ms_per_request": round(floor or 0.0, 4),
        "ratio_cpu": round(ratio, 3) if ratio else None,
        "twinhub_requests_per_s": round(ours.rps, 1),
        "ceiling_requests_per_s": round(bare.rps, 1),
        "ratio_throughput": round(ours.rps / bare.rps, 3) if bare.rps else None,
        "ceiling_errors": bare.all_errors,
        "target_ratio_cpu": target,
        "target_met": ratio is not None and ratio >= target,
    }


def print_ceiling(figures: dict[str, Any]) -> None:
    print(
        f"\n{figures['endpoint']} vs bare Starlette ceiling (same core, same run): twinhub "
        f"{figures['twinhub_cpu_ms_per_request']:.3f} ms CPU/req, ceiling "
        f"{figures['ceiling_cpu_ms_per_request']:.3f} ms -> ratio {figures['ratio_cpu']} "
        f"(target >= {figures['target_ratio_cpu']}: "
        f"{'PASS' if figures['target_met'] else 'MISS'}); throughput "
        f"{figures['twinhub_requests_per_s']:,.0f} vs {figures['ceiling_requests_per_s']:,.0f} "
        f"req/s = {figures['ratio_throughput']}",
        flush=True,
    )


# ------------------------------------------------------------------------------ one size


@dataclass
class SizeResult:
    """Everything measured at one registry size."""

    size: int
    grow: GrowStep
    rows_total: int | None = None  # domains the API counts (POSTed + membership groups)
    walk: dict[str, Any] = field(default_factory=dict)
    reads: dict[str, Reads] = field(default_factory=dict)
    rss_after_grow_mib: float = 0.0
    rss_after_reads_mib: float = 0.0
    db_mib: float = 0.0
    deep_cursors: int = 0

    @property
    def read_errors(self) -> int:
        return sum(r.all_errors for reads in self.reads.values() for r in reads.runs)

    def to_json(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "domains_counted_by_api": self.rows_total,
            "grow": self.grow.to_json(),
            "class_list_walk": self.walk,
            "deep_cursors": self.deep_cursors,
            "reads": {
                endpoint: {
                    "path": ENDPOINT_PATHS[endpoint],
                    "full": reads.full.to_json(),
                    "paced": reads.paced.to_json() if reads.paced else None,
                }
                for endpoint, reads in self.reads.items()
            },
            "read_errors": self.read_errors,
            "rss_mib": {
                "after_grow": round(self.rss_after_grow_mib, 2),
                "after_reads": round(self.rss_after_reads_mib, 2),
            },
            "db_mib": round(self.db_mib, 2),
        }


@dataclass
class RunResult:
    status: str = "ok"  # ok | failed
    reason: str = ""
    ceiling: dict[str, Any] = field(default_factory=dict)  # GET by DID vs bare Starlette
    list_ceilings: list[dict[str, Any]] = field(default_factory=list)  # the lists vs it
    sizes: list[SizeResult] = field(default_factory=list)
    paced_rates: dict[str, float] = field(default_factory=dict)
    rss_peak_mib: float = 0.0
    server_exit_code: int | None = None
    server_stderr_tail: str = ""
    workdir: str = ""

    @property
    def errors(self) -> int:
        return sum(s.grow.errors + s.read_errors for s in self.sizes)


def write_paths(workdir: Path, registry: Registry) -> dict[str, Path]:
    """The wrk scripts' inputs at this size: one request path per line."""
    files = {endpoint: workdir / f"paths-{endpoint}.txt" for endpoint in ENDPOINTS}
    files["get"].write_text("".join(f"/v1/domains/{did}\n" for did in registry.all_dids()))
    files["list_type"].write_text(list_path({"type": "Project", "limit": 50}) + "\n")
    class_paths = []
    for cursor in deep_cursors(registry):
        params: dict[str, str | int] = {"class": CLEAN_COOKING, "limit": 50}
        if cursor:
            params["cursor"] = cursor
        class_paths.append(list_path(params) + "\n")
    files["list_class"].write_text("".join(class_paths))
    return files


def bench(args: argparse.Namespace, sizes: list[int], cpus: tuple[int, int], tag: str) -> RunResult:
    """Start a fresh server, grow it size by size, measure reads at each, tear down."""
    result = RunResult()
    workdir = Path(tempfile.mkdtemp(prefix="twinhub-bench-registry-"))
    result.workdir = str(workdir)
    api_key = secrets.token_urlsafe(36)  # 48 characters; the server wants 32 or more
    (workdir / "api-key").write_text(api_key + "\n")
    port = args.port or free_port()
    env = server_env(workdir, api_key)
    database_url = None
    if args.database == "postgresql":
        from bench.postgres import create_postgres_database

        database_url = asyncio.run(create_postgres_database(args.postgres_url, "reg_" + tag))
        env["DATABASE_URL"] = database_url
        print(f"database {database_url.rsplit('/', 1)[1]} created", flush=True)
    server = Server(server_command(args, port, cpus[0]), env, workdir, port)
    ctx = Ctx(args, server, api_key, cpus[0], cpus[1], workdir, workdir / "wrk.log")
    registry = Registry()
    ok = False
    try:
        print(f"\n== registry  (server: {shlex.join(server.cmd)}; files in {workdir})", flush=True)
        server.start()
        server.wait_ready(args.startup_timeout)
        for size in sizes:
            print(f"\n-- size {size:,}: growing from {registry.created:,}", flush=True)
            before = ledger_counters(server)
            with contextlib.ExitStack() as stack:
                database = (
                    stack.enter_context(DatabaseCpu(database_url.rsplit("/", 1)[1]))
                    if database_url
                    else None
                )
                if args.create_client == "wrk":
                    step = grow_wrk(ctx, registry, size, tag)
                else:
                    step = asyncio.run(grow(ctx, registry, size, tag))
            check_alive(server)
            if database is not None:
                step.database_cpu_seconds = database.seconds
            after = ledger_counters(server)
            if before and after:
                step.ledger_commits = after[0] - before[0]
                step.ledger_writes = after[1] - before[1]
            at = SizeResult(size=size, grow=step, rss_after_grow_mib=rss_mib(server.pid))
            result.sizes.append(at)
            lat = step.latency_ms()
            print(
                f"  grew by {step.created:,} in {step.seconds:.1f} s: "
                f"{step.creates_per_s:,.0f} creates/s  p50 {lat.get('p50', math.nan):.1f} ms  "
                f"p99 {lat.get('p99', math.nan):.1f} ms  errors {step.errors}  server CPU "
                f"{100 * step.server_cpu_seconds / max(step.seconds, 1e-9):.0f} %  client CPU "
                f"{100 * step.client_cpu_seconds / max(step.seconds, 1e-9):.0f} %  others on "
                f"server core {100 * step.foreign_cpu_seconds / max(step.seconds, 1e-9):.0f} %",
                flush=True,
            )
            print(
                f"  server CPU {fmt(step.cpu_ms_per_create, '.3f')} ms/create, ledger "
                f"{fmt(step.writes_per_commit, '.1f')} writes/commit "
                f"({fmt(step.ledger_commits, ',d')} commits), {args.create_client} client",
                flush=True,
            )
            if size == sizes[0]:
                smoke(server, api_key, registry)
            counted = api_get(server, api_key, list_path({"limit": 1, "count": "true"}))
            at.rows_total = counted.get("total")
            at.walk = walk_class_list(server, api_key, registry)
            print(
                f"  API counts {fmt(at.rows_total, ',d')} domains; class list walked in "
                f"{at.walk['pages']} pages / {at.walk['seconds']:.1f} s, "
                f"{at.walk['missing_from_list']} devices missing, "
                f"{at.walk['unknown_in_list']} unknown",
                flush=True,
            )
            if at.walk["missing_from_list"] or at.walk["unknown_in_list"]:
                raise BenchError(f"cursor paging of the class list is inconsistent: {at.walk}")
            files = write_paths(workdir, registry)
            at.deep_cursors = len([c for c in deep_cursors(registry) if c])
            with (
                ceiling_beside(ctx, files["get"])
                if args.ceiling and size == sizes[-1]
                else contextlib.nullcontext(None)
            ) as beside:
                at.reads = measure_reads(ctx, files, result.paced_rates, beside)
            at.rss_after_reads_mib = rss_mib(server.pid)
            at.db_mib = db_mib(workdir)
            print(
                f"  RSS {at.rss_after_reads_mib:.1f} MiB, database {at.db_mib:.1f} MiB",
                flush=True,
            )
        result.rss_peak_mib = max(
            [hwm_mib(server.pid), *(s.rss_after_reads_mib for s in result.sizes)]
        )
        if args.ceiling and result.sizes:
            last = result.sizes[-1].reads
            get = last["get"]
            assert get.ceiling is not None
            result.ceiling = versus_ceiling("GET by DID", get.full, get.ceiling, CEILING_TARGET)
            print_ceiling(result.ceiling)
            for op in ("list_type", "list_class"):
                bare = last[op].ceiling
                assert bare is not None
                versus = versus_ceiling(ENDPOINTS[op], last[op].full, bare, LIST_CEILING_TARGET)
                result.list_ceilings.append(versus)
                print_ceiling(versus)
        if result.errors > args.max_errors:
            result.status = "failed"
            result.reason = f"{result.errors} errors (allowed: {args.max_errors})"
        ok = result.status == "ok"
    except BenchError as exc:
        result.status = "failed"
        result.reason = str(exc)
    finally:
        result.server_exit_code = server.stop()
        result.server_stderr_tail = server.stderr_tail()
        if database_url is not None and not args.keep:
            from bench.postgres import drop_postgres_database

            asyncio.run(drop_postgres_database(args.postgres_url, database_url))
        if ok and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
            result.workdir = ""
    if result.status == "failed":
        print(f"\n!! registry benchmark FAILED: {result.reason}", file=sys.stderr)
        print(f"!! server exit code: {result.server_exit_code}", file=sys.stderr)
        print(f"!! server stderr ({server.stderr_path}), last lines:", file=sys.stderr)
        print(result.server_stderr_tail, file=sys.stderr)
        print(f"!! files kept in {workdir}", file=sys.stderr)
    return result


# ------------------------------------------------------------------------------ report


def targets(result: RunResult) -> dict[str, bool | None]:
    """The registry's targets, None where the run cannot tell (one size, no reads)."""
    measured = [s for s in result.sizes if len(s.reads) == len(ENDPOINTS)]
    verdicts: dict[str, bool | None] = {}
    for endpoint in ENDPOINTS:
        if len(measured) < 2:
            verdicts[f"{endpoint}_p99_flat"] = None
            continue
        first = measured[0].reads[endpoint].basis.latency_ms()["p99"]
        last = measured[-1].reads[endpoint].basis.latency_ms()["p99"]
        verdicts[f"{endpoint}_p99_flat"] = last <= FLAT_FACTOR * first
    get_p99 = [s.reads["get"].basis.latency_ms()["p99"] for s in measured]
    verdicts["get_p99<5ms"] = all(p < TARGET_GET_P99_MS for p in get_p99) if get_p99 else None
    verdicts["no_errors"] = result.errors == 0
    return verdicts


def p99_ratios(result: RunResult) -> dict[str, dict[str, float | None]]:
    """Largest size / smallest size of p99 (both phases: the flatness figure) and of server
    CPU per request (the same question, immune to queueing and to other processes)."""
    measured = [s for s in result.sizes if len(s.reads) == len(ENDPOINTS)]
    out: dict[str, dict[str, float | None]] = {}
    if len(measured) < 2:
        return out
    for endpoint in ENDPOINTS:
        first, last = measured[0].reads[endpoint], measured[-1].reads[endpoint]
        ratios: dict[str, float | None] = {}
        cpu_a, cpu_b = first.full.cpu_ms_per_request, last.full.cpu_ms_per_request
        ratios["server_cpu_per_request"] = round(cpu_b / cpu_a, 2) if cpu_a and cpu_b else None
        for phase in ("full", "paced"):
            a, b = getattr(first, phase), getattr(last, phase)
            if a is None or b is None:
                ratios[phase] = None
                continue
            p_a, p_b = a.latency_ms()["p99"], b.latency_ms()["p99"]
            ratios[phase] = round(p_b / p_a, 2) if p_a else None
        out[endpoint] = ratios
    return out


def print_table(result: RunResult, args: argparse.Namespace, cpus: tuple[int, int]) -> None:
    """One column per size, one row per figure, targets beside the rows they apply to."""
    shown = result.sizes
    print(
        f"\nRegistry benchmark ({'PostgreSQL' if args.database == 'postgresql' else 'SQLite'}): "
        f"server on CPU {cpus[0]}, load on CPU {cpus[1]}; "
        f"creates with {args.create_concurrency} in flight, reads with {args.connections} "
        f"wrk connections for {args.duration} s, paced for {args.paced_seconds} s"
    )
    if result.status != "ok":
        print(f"  FAILED - {result.reason.splitlines()[0] if result.reason else ''}")
    if not shown:
        return

    def cell(fn: Any, spec: str) -> list[str]:
        values = []
        for s in shown:
            try:
                values.append(fmt(fn(s), spec))
            except (KeyError, AttributeError, ZeroDivisionError):
                values.append("-")
        return values

    def lat(endpoint: str, phase: str, p: str) -> Any:
        return lambda s: getattr(s.reads[endpoint], phase).latency_ms()[p]

    rows: list[tuple[str, list[str], str]] = [
        ("domains created (POST)", [f"{s.size:,}" for s in shown], ""),
        ("domains counted by API", cell(lambda s: s.rows_total, ",d"), "+ 1 group per org"),
        ("creates/s (this step)", cell(lambda s: s.grow.creates_per_s, ",.0f"), ""),
        (
            "create p50 / p99 (ms)",
            [
                f"{fmt(s.grow.latency_ms().get('p50'), '.1f')} / "
                f"{fmt(s.grow.latency_ms().get('p99'), '.1f')}"
                for s in shown
            ],
            f"{args.create_concurrency} in flight",
        ),
        (
            "create: server CPU ms/create",
            cell(lambda s: s.grow.cpu_ms_per_create, ".2f"),
            "cost; flat if nothing is O(n)",
        ),
        (
            "create: PostgreSQL CPU ms/create",
            cell(lambda s: s.grow.database_ms_per_create, ".2f"),
            "its backends, on either core",
        ),
        (
            "create: ledger writes/commit",
            cell(lambda s: s.grow.writes_per_commit, ".1f"),
            "group commit's mean batch",
        ),
        (
            "create: server CPU %",
            cell(lambda s: 100 * s.grow.server_cpu_seconds / s.grow.seconds, ".0f"),
            "~100 = CPU-bound",
        ),
        (
            "create: client CPU %",
            cell(lambda s: 100 * s.grow.client_cpu_seconds / s.grow.seconds, ".0f"),
            "must stay < 100",
        ),
        (
            "create: others on server core %",
            cell(lambda s: 100 * s.grow.foreign_cpu_seconds / s.grow.seconds, ".0f"),
            "noise: should be ~0",
        ),
    ]
    for endpoint, label in ENDPOINTS.items():
        rate = result.paced_rates.get(endpoint, 0)
        flat_note = f"p99 flat: last <= {FLAT_FACTOR:g}x first"
        rows += [
            (f"{label}: req/s", cell(lambda s, e=endpoint: s.reads[e].full.rps, ",.0f"), ""),
            (
                f"{label}: server CPU ms/req",
                cell(lambda s, e=endpoint: s.reads[e].full.cpu_ms_per_request, ".3f"),
                "cost; flat if nothing is O(n)",
            ),
            (f"{label}: p50 (ms)", cell(lat(endpoint, "full", "p50"), ".2f"), ""),
            (
                f"{label}: p99 (ms)",
                cell(lat(endpoint, "full", "p99"), ".2f"),
                "full load (queueing)" if rate else flat_note,
            ),
        ]
        if rate:
            p99_note = flat_note + (f"; < {TARGET_GET_P99_MS:g} ms" if endpoint == "get" else "")
            rows += [
                (
                    f"  paced {rate:g}/s: got req/s",
                    cell(lambda s, e=endpoint: s.reads[e].paced.rps, ",.0f"),
                    "",
                ),
                (f"  paced {rate:g}/s: p50 (ms)", cell(lat(endpoint, "paced", "p50"), ".2f"), ""),
                (
                    f"  paced {rate:g}/s: p99 (ms)",
                    cell(lat(endpoint, "paced", "p99"), ".2f"),
                    p99_note,
                ),
            ]
    rows += [
        (
            "read server CPU %",
            cell(
                lambda s: (
                    100
                    * sum(r.full.server_cpu_seconds for r in s.reads.values())
                    / sum(r.full.wall_seconds for r in s.reads.values())
                ),
                ".0f",
            ),
            "full load; ~100 = CPU-bound",
        ),
        (
            "read: others on server core %",
            cell(
                lambda s: (
                    100
                    * sum(r.foreign_cpu_seconds for x in s.reads.values() for r in x.runs)
                    / sum(r.wall_seconds for x in s.reads.values() for r in x.runs)
                ),
                ".0f",
            ),
            "noise: should be ~0",
        ),
        ("errors", [f"{s.grow.errors + s.read_errors:,}" for s in shown], "0"),
        ("server RSS (MiB)", cell(lambda s: s.rss_after_reads_mib, ".1f"), "after the reads"),
        ("database (MiB)", cell(lambda s: s.db_mib, ".1f"), "twinhub.db + WAL"),
    ]
    width = max(len(name) for name, _, _ in rows) + 2
    col = 14
    print("size".ljust(width) + "".join(f"{s.size:,}".rjust(col) for s in shown) + "   target")
    for name, values, note in rows:
        print(name.ljust(width) + "".join(v.rjust(col) for v in values) + f"   {note}".rstrip())
    ratios = p99_ratios(result)
    if ratios:
        print(f"largest / smallest size ({shown[-1].size:,} / {shown[0].size:,}):")
        for e, r in ratios.items():
            print(
                f"  {ENDPOINTS[e]:18}  p99 paced {fmt(r['paced'], '.2f')}x, p99 full load "
                f"{fmt(r['full'], '.2f')}x, server CPU per request "
                f"{fmt(r['server_cpu_per_request'], '.2f')}x"
            )
    verdicts = ", ".join(f"{k} {verdict(v)}" for k, v in targets(result).items())
    basis = "paced" if result.paced_rates and all(result.paced_rates.values()) else "full load"
    print(f"targets (latency judged at {basis}): {verdicts}")
    samples = [x for s in shown for x in s.grow.error_samples][:5]
    samples += [
        x
        for s in shown
        for reads in s.reads.values()
        for r in (reads.full, reads.paced)
        if r
        for x in r.error_samples
    ][:5]
    if samples:
        print("sample error replies:", *samples, sep="\n  ")
    noise = noise_percent(result)
    if noise > NOISE_WARN_PERCENT:
        print(
            f"WARNING: other processes took up to {noise:.0f} % of the server's core (CPU "
            f"{cpus[0]}) during a measurement; throughput is understated and latency includes "
            "waiting for the CPU. Rerun on a quiet machine before trusting the verdicts."
        )


def noise_percent(result: RunResult) -> float:
    """The largest share of the server's core that other processes took during any create
    step or read run: above a few % the latency figures include waiting for the CPU."""
    shares = [
        100 * s.grow.foreign_cpu_seconds / s.grow.seconds for s in result.sizes if s.grow.seconds
    ]
    shares += [
        100 * r.foreign_cpu_seconds / r.wall_seconds
        for s in result.sizes
        for reads in s.reads.values()
        for r in reads.runs
        if r.wall_seconds
    ]
    return max(shares, default=0.0)


def to_json(
    result: RunResult, args: argparse.Namespace, sizes: list[int], extra: dict[str, Any]
) -> dict[str, Any]:
    """The figures in machine-readable form, for bench/results/registry.json."""
    return {
        "benchmark": "registry",
        "status": result.status,
        "reason": result.reason,
        "endpoints": ENDPOINT_PATHS,
        "sizes": [s.to_json() for s in result.sizes],
        "paced_rates": result.paced_rates,
        "ratio_largest_to_smallest": p99_ratios(result),
        "targets": targets(result),
        "versus_ceiling": result.ceiling,
        "lists_versus_ceiling": result.list_ceilings,
        "errors": result.errors,
        "max_foreign_cpu_percent_on_server_core": round(noise_percent(result), 1),
        "rss_peak_mib": round(result.rss_peak_mib, 2),
        "server_exit_code": result.server_exit_code,
        "server_stderr_tail": result.server_stderr_tail if result.status != "ok" else "",
        "workdir": result.workdir,
        "config": {
            "sizes": sizes,
            "connections": args.connections,
            "create_concurrency": args.create_concurrency,
            "create_client": args.create_client,
            "database": args.database,
            "duration_seconds": args.duration,
            "warmup_seconds": args.warmup,
            "paced_rate": args.paced_rate,
            "paced_seconds": args.paced_seconds,
            "timeout_seconds": args.timeout,
            "mix": "5% Organisation (+ membership group), 5% Project, 90% clean-cooking Device",
            **extra,
        },
    }


def run(args: argparse.Namespace) -> int:
    """Entry point of `python -m bench registry`; non-zero on missing tools or failures."""
    problem = check_tools()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    if args.quick:
        args.sizes, args.duration, args.warmup, args.paced_rate = "2000", 5, 1, 0
    try:
        sizes = parse_sizes(args.sizes)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.connections < 1 or args.create_concurrency < 1 or args.duration < 1:
        print(
            "--connections, --create-concurrency and --duration must be positive", file=sys.stderr
        )
        return 2
    cpus = pick_cpus(args.server_cpu, args.wrk_cpu)
    tag = secrets.token_hex(4)
    extra = run_metadata(cpus, tag)
    with pinned_to(cpus[1]):  # the create client runs in this process
        result = bench(args, sizes, cpus, tag)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    name = "registry.json" if args.database == "sqlite" else f"registry-{args.database}.json"
    out = args.results_dir / name
    out.write_text(json.dumps(to_json(result, args, sizes, extra), indent=2) + "\n")
    print_table(result, args, cpus)
    print(f"wrote {out}")
    if result.status == "failed":
        return 1
    if args.strict and False in targets(result).values():
        return 1
    return 0
