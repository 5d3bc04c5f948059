"""Claims benchmark: submissions, evaluations and reads with a small and a large claim store.

Starts `twinhub serve registry` (fresh DATA_DIR; SQLite, or a PostgreSQL database of its own
with `--database postgresql`) pinned to one core and drives it from another. Builds a
verified programme over HTTP (organisation, project verified by a governance proposal, votes
and execution, an oracle, `--assets` electric stoves with household size and tested
efficiency, verified by one batch proposal, each enrolled with a device token, and a claim
collection on the built-in claim protocol `did:ixo:protocol/clean-cooking-claim`, whose
methodology computes an approval's credits from the stove's telemetry). Then, for each store
size (`--small`, default 1,000, then `--claims`, default 100,000), it seeds claims through
the service layer in this process (`ClaimService.submit`, the code path of the API minus
HTTP), each naming its own (stove, calendar month) period (a stove-month is counted once),
and measures with wrk: `GET /v1/claims/{id}`, the collection's first page and a page from a
deep cursor (at exactly that many claims), then claim submissions
(`POST /v1/claim-collections/{id}/claims`, each on a stove-month no other claim names),
approvals (`POST /v1/claims/{id}/evaluations {"status": "approved"}`: the methodology
computes the credits from the stove-month's telemetry, the credential is signed, the
stove-days are held; nothing is minted: the claim's credits come with the issuance of its
project's next monitoring period, which this bench does not run) and rejections, each at
full load and paced at a low rate, and prints how the figures change from the small store
to the large one. Telemetry is ingested in this process (`TelemetryService`, as
`POST /v1/domains/{did}/telemetry` does) before each approval phase, for exactly the
stove-months of the claims that phase may approve.
See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import calendar
import contextlib
import importlib.util
import json
import os
import resource
import secrets
import shlex
import shutil
import sys
import tempfile
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from bench.postgres import create_postgres_database, drop_postgres_database
from bench.registry import (
    AUTO_PACED_FRACTION,
    BENCH_DIR,
    CEILING_TARGET,
    NOISE_WARN_PERCENT,
    Ctx,
    ReadRun,
    db_mib,
    measure_ceiling,
    nice_rate,
    print_ceiling,
    run_wrk,
    server_command,
    server_env,
    versus_ceiling,
)
from bench.ussd import (
    BenchError,
    Server,
    add_server_options,
    check_alive,
    cpu_seconds,
    fmt,
    free_port,
    hwm_mib,
    pick_cpus,
    pinned_to,
    rss_mib,
    run_metadata,
    sudo_prefix,
    verdict,
)

if TYPE_CHECKING:
    import httpx

    from twinhub.platform import Platform
    from twinhub.services.device_tokens import DeviceCredential

WRITE_SCRIPT = BENCH_DIR / "claims_writes.lua"
READ_SCRIPT = BENCH_DIR / "registry_reads.lua"
DEFAULT_RESULTS_DIR = BENCH_DIR / "results"
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"

# The built-in claim protocol: periodic (periodStart/periodEnd: one counted claim per stove and
# calendar month) and carrying the clean-cooking methodology that computes approvals' credits.
CLAIM_PROTOCOL = "did:ixo:protocol/clean-cooking-claim"
STOVE_PROPERTIES = {"fuelType": "electric", "efficiency": 0.85, "householdSize": 5}
KWH_PER_SESSION = 1.0  # one cooking session a day, within max_kwh_per_session
EXTRA_METERED_DAYS = 2  # cooking days in a metered month beyond the methodology's minimum
# Claim periods are calendar months: seeded claims take the months from last month back to
# January SEED_FLOOR_YEAR, submissions through wrk the months before that, back to
# SUBMIT_FLOOR_YEAR, so no two claims ever name the same stove-month.
SEED_FLOOR_YEAR = 1900
SUBMIT_FLOOR_YEAR = 1000
FLAT_FACTOR = 1.5  # server CPU per request at the large store: at most this times the small
LIST_PAGE = 50  # page size of the measured lists
WALK_PAGE = 500  # page size of the cursor walk (the server's largest)
MIB = 1024 * 1024

# operation -> label; writes first, then reads (measured first at each size)
OPS: dict[str, str] = {
    "submit": "submit claim",
    "approve": "approve (+credential, days)",
    "reject": "reject",
    "get": "GET claim",
    "list": "list first page",
    "list_deep": "list deep cursor",
}
WRITES = ("submit", "approve", "reject")
WRITE_TARGETS = {"approve": 1000}  # issue #14: approvals (credential, held days) per second
READS = ("get", "list", "list_deep")
OP_REQUESTS: dict[str, str] = {
    "submit": 'POST /v1/claim-collections/{id}/claims {"id", "asset", "data": {"reportType", '
    '"mealsCooked", "periodStart", "periodEnd"}} (a stove-month no other claim names)',
    "approve": 'POST /v1/claims/{id}/evaluations {"status": "approved"} (credits computed by '
    "the methodology from the stove-month's telemetry, credential signed, stove-days held; "
    "minted later, by the issuance of the period carrying the claim)",
    "reject": 'POST /v1/claims/{id}/evaluations {"status": "rejected", "reason": ...}',
    "get": "GET /v1/claims/{id} (random known claim)",
    "list": f"GET /v1/claims?collection={{id}}&limit={LIST_PAGE}",
    "list_deep": f"GET /v1/claims?collection={{id}}&limit={LIST_PAGE}&cursor=<second half>",
}
EVALUATIONS: dict[str, tuple[dict[str, Any], str]] = {  # op -> (body, expected in the reply)
    # approvals also expect the amount the smoke approval computed (see Bench.expect)
    "approve": ({"status": "approved"}, '"status":"approved"'),
    "reject": (
        {"status": "rejected", "reason": "bench: meals not evidenced"},
        '"status":"rejected"',
    ),
}


# ------------------------------------------------------------------------------ options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of `python -m bench claims`."""
    parser.add_argument(
        "--ceiling",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="after the last size, drive a bare Starlette app (bench/ceiling.py) with the "
        "GET-claim paths on the same core; report the CPU-per-request ratio (default: on)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run for `bench all --quick`: 1,000 claims, one size, 5 s runs, 1 s "
        "warm-up, no paced phases",
    )
    parser.add_argument(
        "--claims",
        type=int,
        default=100_000,
        metavar="N",
        help="claims stored for the large-store measurements (default: %(default)s)",
    )
    parser.add_argument(
        "--small",
        type=int,
        default=1000,
        metavar="N",
        help="claims stored for the small-store measurements, made first; 0 measures the "
        "large store only (default: %(default)s)",
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
        default=os.environ.get("BENCH_POSTGRES_URL", DEFAULT_POSTGRES_URL),
        help="PostgreSQL server (any database on it; the run creates its own) "
        "(default: $BENCH_POSTGRES_URL or %(default)s)",
    )
    parser.add_argument(
        "--assets",
        type=int,
        default=300,
        help="stoves of the project the claims are about (default: %(default)s)",
    )
    parser.add_argument(
        "--connections",
        type=int,
        default=8,
        help="wrk connections (one thread each) (default: %(default)s)",
    )
    parser.add_argument(
        "--duration",
        type=int,
        default=10,
        metavar="SECONDS",
        help="length of each full-load measurement (default: %(default)s)",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=2,
        metavar="SECONDS",
        help="unmeasured load before each operation's measurement (default: %(default)s)",
    )
    parser.add_argument(
        "--paced-rate",
        type=float,
        default=None,
        metavar="REQ_PER_S",
        help="offered load of the paced phases, for every operation and size; default: per "
        "operation, a quarter of its throughput at the first size; 0 skips",
    )
    parser.add_argument(
        "--paced-seconds",
        type=int,
        default=15,
        metavar="SECONDS",
        help="length of each paced phase (default: %(default)s)",
    )
    parser.add_argument(
        "--bulk-claims",
        type=int,
        default=10_000,
        metavar="N",
        help="claims approved through POST /v1/claims/evaluations at each size (metered, "
        "seeded for it); 0 skips the bulk phase (default: %(default)s)",
    )
    parser.add_argument(
        "--bulk-size",
        type=int,
        default=1000,
        metavar="N",
        help="evaluations per bulk request (at most the server's CLAIMS_EVALUATION_BATCH_MAX, "
        "default 1,000) (default: %(default)s)",
    )
    parser.add_argument(
        "--bulk-concurrency",
        type=int,
        default=2,
        help="bulk requests in flight: one fills the ledger's turn while the next is read "
        "and computed (default: %(default)s)",
    )
    parser.add_argument(
        "--seed-concurrency",
        type=int,
        default=4,
        help="ClaimService.submit calls in flight while seeding; they share the ledger's "
        "write lock, so more only helps PostgreSQL overlap round trips (default: %(default)s)",
    )
    parser.add_argument(
        "--progress-every",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="print a progress line this often while seeding (default: %(default)s)",
    )
    parser.add_argument(
        "--server-cpu", type=int, default=None, help="CPU for the server (default: first allowed)"
    )
    parser.add_argument(
        "--wrk-cpu",
        type=int,
        default=None,
        help="CPU for wrk and for this harness (seeding) (default: second allowed)",
    )
    parser.add_argument(
        "--timeout",
        type=int,
        default=5,
        metavar="SECONDS",
        help="request timeout; slower replies count as errors (default: %(default)s)",
    )
    parser.add_argument(
        "--max-errors",
        type=int,
        default=0,
        help="exit non-zero when the run has more errors than this (default: %(default)s)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="also exit non-zero when a cost is not flat (server CPU per request at the large "
        f"store above {FLAT_FACTOR:g}x the small)",
    )
    add_server_options(
        parser,
        "registry",
        "claims-<database>.json",
        "keep the temp dir (SQLite file, logs, id files) and the PostgreSQL database",
    )


def check_tools(args: argparse.Namespace) -> str | None:
    """Why the benchmark cannot run (missing tools or modules), or None when it can."""
    if shutil.which("wrk") is None:
        return f"wrk is not installed; install it with:\n    {sudo_prefix()}apt-get install -y wrk"
    if shutil.which("taskset") is None:
        return f"taskset is not installed:\n    {sudo_prefix()}apt-get install -y util-linux"
    for module in ("httpx", "twinhub", *(["asyncpg"] if args.database == "postgresql" else [])):
        if importlib.util.find_spec(module) is None:
            return f"{module} is missing from this Python; run ./dev bench claims"
    for script in (WRITE_SCRIPT, READ_SCRIPT):
        if not script.is_file():
            return f"missing {script}"
    return None


# ------------------------------------------------------------------------------ periods


def month_index(year: int, month: int) -> int:
    """A calendar month as one number (months since January of year 0), so months count."""
    return year * 12 + month - 1


def month_period(index: int) -> dict[str, str]:
    """The claim data naming the whole calendar month `index` (UTC) as its period. The wrk
    script (bench/claims_writes.lua) formats its submissions' periods the same way."""
    year, month = divmod(index, 12)
    after_year, after_month = divmod(index + 1, 12)
    return {
        "periodStart": f"{year:04d}-{month + 1:02d}-01T00:00:00Z",
        "periodEnd": f"{after_year:04d}-{after_month + 1:02d}-01T00:00:00Z",
    }


class OutOfMonths(BenchError):
    """More claims than distinct (stove, calendar month) periods in their range."""


@dataclass(frozen=True)
class MonthSlots:
    """Which (stove, calendar month) each claim names, so that no two claims name the same
    stove-month (the claim protocol counts one claim per stove and month: a second one is
    refused with 409 period_claimed).

    Seed slot n (seeded claims and the smoke test's, in order) is stove n % assets in the
    month n // assets months before `last` (last month): the first claims, the ones
    evaluations take first, name the most recent months. Seeds reach back to January of
    `seed_floor_year`. Submission slot i (wrk's) is stove i % assets in the month
    i // assets months before that floor, down to January of `submit_floor_year`: the two
    ranges never meet. Stoves are indices into the programme's list."""

    assets: int
    last: int  # month_index of the newest month a claim may name (last month)
    seed_floor_year: int = SEED_FLOOR_YEAR
    submit_floor_year: int = SUBMIT_FLOOR_YEAR

    @classmethod
    def before(cls, now: datetime, assets: int) -> MonthSlots:
        """Slots ending with the calendar month (UTC) before `now`'s."""
        moment = now.astimezone(UTC)
        return cls(assets, month_index(moment.year, moment.month) - 1)

    @property
    def seed_months(self) -> int:
        return self.last - month_index(self.seed_floor_year, 1) + 1

    @property
    def seed_capacity(self) -> int:
        return self.seed_months * self.assets

    @property
    def submission_top(self) -> int:
        """The newest month a submission names: the month before the seeds' oldest."""
        return month_index(self.seed_floor_year, 1) - 1

    @property
    def submission_capacity(self) -> int:
        return (self.submission_top - month_index(self.submit_floor_year, 1) + 1) * self.assets

    def seed(self, slot: int) -> tuple[int, int]:
        """(stove index, month index) of seed slot `slot`."""
        if not 0 <= slot < self.seed_capacity:
            raise OutOfMonths(
                f"seed slot {slot:,} is past the {self.seed_capacity:,} stove-months from "
                f"{self.seed_months:,} months x {self.assets:,} stoves (back to January "
                f"{self.seed_floor_year}); run with more --assets"
            )
        return slot % self.assets, self.last - slot // self.assets

    def submission(self, slot: int) -> tuple[int, int]:
        """(stove index, month index) of submission slot `slot` (what the wrk script sends)."""
        if not 0 <= slot < self.submission_capacity:
            raise OutOfMonths(
                f"submission slot {slot:,} is past the {self.submission_capacity:,} "
                f"stove-months before January {self.seed_floor_year}; run with more --assets"
            )
        return slot % self.assets, self.submission_top - slot // self.assets

    def check_seeds(self, claims: int) -> None:
        """Fail early when `claims` seeded claims (plus the smoke test's two) do not fit."""
        needed = claims + 2
        if needed > self.seed_capacity:
            least = -(-needed // self.seed_months)
            raise OutOfMonths(
                f"{claims:,} claims on {self.assets:,} stoves need {-(-needed // self.assets):,} "
                f"calendar months per stove, but only {self.seed_months:,} lie between last "
                f"month and January {self.seed_floor_year} (one claim per stove and month): "
                f"run with --assets {least:,} or more, or fewer --claims"
            )


# ------------------------------------------------------------------------------ state


@dataclass
class Programme:
    """The verified programme the claims belong to, built over HTTP."""

    operator: str  # controls the organisation, the project and the stoves; submits
    operator_key: str
    oracle_operator: str  # controls the oracle; evaluates
    oracle_key: str
    group: str = ""
    organisation: str = ""
    oracle: str = ""
    project: str = ""
    proposal: int = 0
    collection: int = 0
    assets: list[str] = field(default_factory=list)
    devices: dict[str, DeviceCredential] = field(default_factory=dict)  # stove -> its token
    metered_days: int = 0  # cooking days of a metered stove-month
    amount: int = 0  # what an approval computes (smallest unit): the smoke approval's


@dataclass
class Store:
    """What the harness knows of the claims: every id (for GETs), the pending seeded ones in
    the order they were made (evaluations take the oldest first: those name the most recent
    months), each seeded claim's stove-month slot, which of those have telemetry, and the
    cursor walk. Claims submitted through wrk are known (read) but never evaluated."""

    slots: MonthSlots
    known: list[str] = field(default_factory=list)
    pending: deque[str] = field(default_factory=deque)
    seed_slots: dict[str, int] = field(default_factory=dict)  # seeded claim -> seed slot
    metered: set[int] = field(default_factory=set)  # seed slots whose telemetry is stored
    next_seed: int = 1
    next_slot: int = 0  # the next seed slot
    next_submission: int = 0  # the next submission slot (wrk)
    unrecorded: int = 0  # submissions in flight when a wrk run ended: made or not
    walk_cursors: list[str] = field(default_factory=list)
    walk_positions: list[int] = field(default_factory=list)
    walk_seen: set[str] = field(default_factory=set)

    def claim_slot(self) -> tuple[int, int, int]:
        """The next seed slot: (slot, stove index, month index)."""
        slot = self.next_slot
        stove, month = self.slots.seed(slot)
        self.next_slot += 1
        return slot, stove, month

    def add(self, claim_id: str, slot: int | None = None) -> None:
        """A claim now stored; a seeded one (with its slot) is pending for evaluation."""
        self.known.append(claim_id)
        if slot is not None:
            self.seed_slots[claim_id] = slot
            self.pending.append(claim_id)

    def take(self, ids: set[str]) -> None:
        """Evaluated (or sent for evaluation): no longer pending."""
        if ids:
            self.pending = deque(i for i in self.pending if i not in ids)


@dataclass
class SeedStep:
    """Claims made in this process through ClaimService.submit."""

    purpose: str  # "store" | "pending for <op>"
    target: int  # claims stored at the end
    seeded: int = 0
    seconds: float = 0.0
    harness_cpu_seconds: float = 0.0
    progress: list[dict[str, float]] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.seeded / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "purpose": self.purpose,
            "target": self.target,
            "seeded": self.seeded,
            "seconds": round(self.seconds, 2),
            "claims_per_s": round(self.rate, 1),
            "harness_cpu_ms_per_claim": round(1000 * self.harness_cpu_seconds / self.seeded, 3)
            if self.seeded
            else None,
            "progress": self.progress,
        }


@dataclass
class OpResult:
    """One operation at one store size: full load, then paced."""

    op: str
    full: ReadRun
    paced: ReadRun | None = None
    stored: int = 0  # claims in the store when the full-load run started

    @property
    def runs(self) -> list[ReadRun]:
        return [self.full, *([self.paced] if self.paced else [])]

    def to_json(self) -> dict[str, Any]:
        return {
            "request": OP_REQUESTS[self.op],
            "claims_stored_at_start": self.stored,
            "full": self.full.to_json(),
            "paced": self.paced.to_json() if self.paced else None,
        }


@dataclass
class SizeResult:
    """Everything measured at one store size."""

    size: int
    seed: SeedStep
    topups: list[SeedStep] = field(default_factory=list)
    walk: dict[str, Any] = field(default_factory=dict)
    ops: dict[str, OpResult] = field(default_factory=dict)
    counts_after: dict[str, int] = field(default_factory=dict)
    analyzed: bool = False  # PostgreSQL: ANALYZE ran after seeding
    bulk: dict[str, Any] = field(default_factory=dict)  # POST /v1/claims/evaluations
    get_ceiling: ReadRun | None = None  # the bare ceiling, run right after GET claim
    rss_mib: float = 0.0
    db_mib: float = 0.0

    @property
    def errors(self) -> int:
        return sum(r.all_errors for o in self.ops.values() for r in o.runs) + int(
            self.bulk.get("errors", 0)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "seed": self.seed.to_json(),
            "pending_topups": [t.to_json() for t in self.topups],
            "walk": self.walk,
            "analyzed_after_seeding": self.analyzed,
            "ops": {op: result.to_json() for op, result in self.ops.items()},
            "bulk_approvals": self.bulk,
            "collection_counts_after": self.counts_after,
            "errors": self.errors,
            "rss_mib": round(self.rss_mib, 2),
            "db_mib": round(self.db_mib, 2),
        }


@dataclass
class RunResult:
    status: str = "ok"  # ok | failed
    reason: str = ""
    ceiling: dict[str, Any] = field(default_factory=dict)  # GET claim vs bare Starlette
    write_targets: dict[str, Any] = field(default_factory=dict)  # writes/s vs issue #14
    database: str = "sqlite"
    sizes: list[SizeResult] = field(default_factory=list)
    paced_rates: dict[str, float] = field(default_factory=dict)
    programme: dict[str, Any] = field(default_factory=dict)
    rss_peak_mib: float = 0.0
    server_exit_code: int | None = None
    server_stderr_tail: str = ""
    workdir: str = ""

    @property
    def errors(self) -> int:
        return sum(s.errors for s in self.sizes)


# ------------------------------------------------------------------------------ platform


def bench_keys() -> dict[str, str]:
    """Keys the server and this process share, so credentials verify and no key file is
    generated (and no warning printed) in either."""
    return {
        "PIN_ENCRYPTION_KEY": secrets.token_hex(32),
        "CREDENTIAL_ISSUER_KEY": secrets.token_hex(32),
    }


def open_platform(
    workdir: Path, database_url: str | None, api_key: str, keys: dict[str, str]
) -> Platform:
    """The platform over the server's database, in this process: the seeder and the key
    maker. Not started: the server has migrated the schema and made the protocols."""
    from twinhub.platform import Platform
    from twinhub.settings import Settings

    settings = Settings(
        environment="development",
        data_dir=workdir,
        database_url=database_url,
        redis_url=None,
        log_level="warning",
        twinhub_bootstrap_api_key=api_key,
        pin_encryption_key=keys["PIN_ENCRYPTION_KEY"],
        credential_issuer_key=keys["CREDENTIAL_ISSUER_KEY"],
        # The seeded claims' telemetry is history back to SEED_FLOOR_YEAR, backfilled now:
        # the clock rule's past limit would quarantine it (0: no limit).
        telemetry_past_skew_days=0,
    )
    return Platform(settings)


async def analyze(platform: Platform) -> str | None:
    """PostgreSQL: refresh the planner's statistics after bulk seeding, as autovacuum would
    (a minute later, or never where it is off); without them it plans a list of 100,000
    claims as if the table were empty. Returns the server's autovacuum setting."""
    if platform.engine.dialect.name != "postgresql":
        return None
    from sqlalchemy import text

    async with platform.engine.connect() as conn:
        setting = str(await conn.scalar(text("SHOW autovacuum")))
        await conn.execute(text("ANALYZE"))
        await conn.commit()
    return setting


async def database_mib(platform: Platform, workdir: Path) -> float:
    """The database on disk: SQLite file + WAL, or PostgreSQL's pg_database_size."""
    if platform.engine.dialect.name == "sqlite":
        return db_mib(workdir)
    from sqlalchemy import text

    async with platform.engine.connect() as conn:
        size = await conn.scalar(text("SELECT pg_database_size(current_database())"))
    return float(size or 0) / MIB


# ------------------------------------------------------------------------------ programme


async def call(
    client: httpx.AsyncClient, method: str, path: str, expect: int, body: Any = None
) -> Any:
    """One request of the setup; anything but `expect` is a broken contract."""
    import httpx

    try:
        reply = await client.request(method, path, json=body)
    except httpx.HTTPError as exc:
        raise BenchError(f"{method} {path} failed: {type(exc).__name__}: {exc}") from None
    if reply.status_code != expect:
        raise BenchError(f"{method} {path} -> HTTP {reply.status_code}: {reply.text[:400]}")
    return reply.json()


async def build_programme(
    server: Server, api_key: str, platform: Platform, assets: int, tag: str
) -> Programme:
    """Organisation, oracle, project verified by proposal + votes + execution, stoves
    (verified by a batch proposal) and a collection without quota on the built-in claim
    protocol, all through the API (keys are made like `twinhub keys create`), and a device
    token for each stove (through the service)."""
    import httpx

    from twinhub.kernel.principals import Principal

    roles = ["reader", "writer"]
    operator = f"did:ixo:org/bench-operator-{tag}"
    oracle_operator = f"did:ixo:org/bench-oracle-{tag}"
    members = [f"did:ixo:org/bench-member{i}-{tag}" for i in (1, 2)]
    keys = {
        did: (await platform.api_keys.create(did, roles, label="bench claims"))[0]
        for did in (operator, oracle_operator, *members)
    }
    prog = Programme(operator, keys[operator], oracle_operator, keys[oracle_operator])
    operator_principal = Principal(operator, frozenset(roles))

    def client(key: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30
        )

    async with (
        client(api_key) as admin,
        client(prog.operator_key) as op,
        client(prog.oracle_key) as oracle_op,
        client(keys[members[0]]) as member1,
        client(keys[members[1]]) as member2,
    ):
        group = await call(
            admin,
            "POST",
            "/v1/governance/groups",
            201,
            {
                "id": f"bench-compliance-{tag}",
                "name": "Compliance (bench)",
                "members": [{"did": m, "weight": 1} for m in members],
                "threshold": {"kind": "absolute_count", "value": 2},
                "votingPeriodSeconds": 3600,
            },
        )
        prog.group = group["did"]
        organisation = {
            "type": "Organisation",
            "class": "did:ixo:protocol/organisation",
            "metadata": {"name": f"Bench Cookstoves {tag}"},
        }
        prog.organisation = (await call(op, "POST", "/v1/domains", 201, organisation))["did"]
        oracle = {"type": "Oracle", "class": "did:ixo:protocol/oracle", "metadata": {"name": "MRV"}}
        prog.oracle = (await call(oracle_op, "POST", "/v1/domains", 201, oracle))["did"]
        project = {
            "type": "Project",
            "class": "did:ixo:protocol/project",
            "metadata": {"name": f"Bench clean cooking {tag}"},
            "relationships": {"implementedBy": [prog.organisation]},
        }
        prog.project = (await call(op, "POST", "/v1/domains", 201, project))["did"]
        proposal = await call(
            member1,
            "POST",
            f"/v1/domains/{prog.project}/verification-proposals",
            201,
            {"group": prog.group, "action": "verify", "evidence": {"audit": "bench site visit"}},
        )
        prog.proposal = proposal["id"]
        for member in (member1, member2):
            vote = {"option": "yes"}
            await call(member, "POST", f"/v1/proposals/{prog.proposal}/votes", 200, vote)
        executed = await call(member1, "POST", f"/v1/proposals/{prog.proposal}/execute", 200)
        verified = await call(admin, "GET", f"/v1/domains/{prog.project}", 200)
        if executed.get("status") != "executed" or not verified.get("verified"):
            raise BenchError(f"the project was not verified: {str(executed)[:300]}")

        limit = asyncio.Semaphore(16)

        async def stove(index: int) -> str:
            body = {
                "type": "Device",
                "class": "did:ixo:protocol/clean-cooking",
                "metadata": {"name": f"Stove {index}"},
                "properties": {**STOVE_PROPERTIES, "serialNumber": f"BENCH-{tag}-{index}"},
                "controller": [f"did:ixo:customer/bench-{tag}-{index}", operator],
                "relationships": {"project": [prog.project]},
            }
            async with limit:
                return str((await call(op, "POST", "/v1/domains", 201, body))["did"])

        prog.assets = list(await asyncio.gather(*(stove(i) for i in range(assets))))
        # Only verified stoves' claims are approved: one batch proposal verifies them all.
        batch = await call(
            member1,
            "POST",
            f"/v1/domains/{prog.project}/batch-verification-proposals",
            201,
            {"group": prog.group, "protocol": "did:ixo:protocol/clean-cooking"},
        )
        for member in (member1, member2):
            await call(member, "POST", f"/v1/proposals/{batch['id']}/votes", 200, {"option": "yes"})
        await call(member1, "POST", f"/v1/proposals/{batch['id']}/execute", 200)
        # Every stove gets a device token (enrolled: its telemetry counts), made like
        # `POST /v1/domains/{did}/device-tokens` makes it, in this process.
        for did in prog.assets:
            token, _ = await platform.device_tokens.create(did, operator_principal, "bench meter")
            credential = await platform.device_tokens.authenticate(token)
            if credential is None:
                raise BenchError(f"the device token of {did} does not authenticate")
            prog.devices[did] = credential
        protocol = await platform.protocols.get(CLAIM_PROTOCOL)
        document = protocol.effective_methodology
        if document is None or not {"periodStart", "periodEnd"} <= set(
            protocol.effective_properties
        ):
            raise BenchError(f"{CLAIM_PROTOCOL} has no methodology or no reporting period")
        from twinhub.mrv.claims import methodology_of

        least = int(methodology_of(document).rule_values().get("min_active_days", 0))
        prog.metered_days = least + EXTRA_METERED_DAYS
        collection = await call(
            op,
            "POST",
            "/v1/claim-collections",
            201,
            {"project": prog.project, "protocol": CLAIM_PROTOCOL, "evaluators": [prog.oracle]},
        )
        prog.collection = collection["id"]
    return prog


async def smoke(
    server: Server, api_key: str, platform: Platform, prog: Programme, store: Store, tag: str
) -> None:
    """By hand first, so a broken contract shows as one readable reply: one claim on a
    metered stove-month submitted and approved (the methodology computes an amount > 0, the
    credential verifies and carries it, nothing is minted yet: the claim awaits issuance),
    and one rejected. Sets `prog.amount`, what every bench approval must then compute."""
    import httpx

    headers = {"Authorization": f"Bearer {prog.operator_key}"}
    async with (
        httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=30) as op,
        httpx.AsyncClient(
            base_url=server.base_url,
            headers={"Authorization": f"Bearer {prog.oracle_key}"},
            timeout=30,
        ) as oracle,
        httpx.AsyncClient(
            base_url=server.base_url, headers={"Authorization": f"Bearer {api_key}"}, timeout=30
        ) as admin,
    ):
        made = []
        for n in (1, 2):
            slot, stove, month = store.claim_slot()
            claim = await call(
                op,
                "POST",
                f"/v1/claim-collections/{prog.collection}/claims",
                201,
                {
                    "id": f"smoke-{n}",
                    "asset": prog.assets[stove],
                    "data": {"reportType": "cooking", "mealsCooked": 3, **month_period(month)},
                },
            )
            made.append(claim["id"])
            store.known.append(claim["id"])
            store.seed_slots[claim["id"]] = slot
        await meter(platform, prog, store, made[:1])
        replies = []
        for claim_id, op_name in zip(made, ("approve", "reject"), strict=True):
            body = EVALUATIONS[op_name][0]
            reply = await call(oracle, "POST", f"/v1/claims/{claim_id}/evaluations", 200, body)
            if reply.get("status") != body["status"]:
                raise BenchError(f"evaluation of {claim_id} answered {str(reply)[:300]}")
            replies.append(reply)
        amount = replies[0].get("amount")
        if not isinstance(amount, int) or amount <= 0:
            raise BenchError(f"the approval computed no credits: {str(replies[0])[:400]}")
        prog.amount = amount
        credential = await call(admin, "GET", f"/v1/claims/{made[0]}/credential", 200)
        checked = await call(admin, "POST", "/v1/credentials/verify", 200, credential)
        if not checked.get("verified"):
            raise BenchError(f"the approval's credential does not verify: {checked}")
        evaluation = credential.get("credentialSubject", {}).get("evaluation", {})
        if evaluation.get("amount") != amount or "calculation" not in evaluation:
            raise BenchError(
                f"the credential does not carry the computed {amount}: {str(evaluation)[:300]}"
            )
        # the owner is the stove's first controller (see build_programme)
        stove = prog.assets.index(str(replies[0]["asset"]))
        owner = f"did:ixo:customer/bench-{tag}-{stove}"
        balances = (await call(admin, "GET", f"/v1/balances/{owner}", 200))["balances"]
        if any(b.get("token") == "CARBON" and b.get("amount") for b in balances):
            raise BenchError(
                f"the approval minted CARBON to the stove's owner {owner} (credits come with "
                f"issuance): {balances}"
            )
        if (replies[0].get("credits") or {}).get("state") != "awaiting issuance":
            raise BenchError(f"the approved claim does not await issuance: {replies[0]}")


# ------------------------------------------------------------------------------ seeding


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def stored_claims(platform: Platform, prog: Programme) -> int:
    """Claims in the collection, from its counters (kept in the same write as each claim)."""
    return int(
        (await platform.claims.collections.collection(prog.collection))["counts"]["submitted"]
    )


async def seed(
    platform: Platform,
    prog: Programme,
    store: Store,
    args: argparse.Namespace,
    target: int,
    purpose: str,
) -> SeedStep:
    """Submit claims through ClaimService.submit (what the API route calls) until the store
    holds `target`; ids seed-0000001, ... in order, each on the next seed slot's stove and
    calendar month (MonthSlots)."""
    from twinhub.kernel.principals import Principal

    step = SeedStep(purpose=purpose, target=target)
    needed = target - await stored_claims(platform, prog)
    if needed <= 0:
        return step
    agent = Principal(prog.operator, frozenset({"reader", "writer"}))
    state = {"issued": 0, "done": 0}
    started, cpu0 = time.monotonic(), _cpu_self()

    async def worker() -> None:
        while state["issued"] < needed:
            state["issued"] += 1
            n = store.next_seed
            store.next_seed += 1
            claim_id = f"seed-{n:07d}"
            slot, stove, month = store.claim_slot()
            await platform.claims.submissions.submit(
                prog.collection,
                {"reportType": "cooking", "mealsCooked": n % 9 + 1, **month_period(month)},
                agent,
                asset=prog.assets[stove],
                claim_id=claim_id,
            )
            store.add(claim_id, slot)
            state["done"] += 1

    async def report() -> None:
        last_t, last_done = started, 0
        while True:
            await asyncio.sleep(args.progress_every)
            now, done = time.monotonic(), state["done"]
            rate, avg = (done - last_done) / (now - last_t), done / (now - started)
            eta = (needed - done) / avg if avg else 0
            step.progress.append(
                {"seconds": round(now - started, 1), "seeded": done, "claims_per_s": round(rate)}
            )
            print(
                f"  seeding {done:>9,}/{needed:,} ({purpose})  {rate:5,.0f}/s now  "
                f"{avg:5,.0f}/s avg  ~{eta:4.0f} s left",
                flush=True,
            )
            last_t, last_done = now, done

    reporter = asyncio.create_task(report())
    try:
        await asyncio.gather(*(worker() for _ in range(max(1, args.seed_concurrency))))
    except BenchError:
        raise
    except Exception as exc:  # a service error here is a finding, not noise
        raise BenchError(f"seeding failed: {type(exc).__name__}: {exc}") from exc
    finally:
        reporter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reporter
    step.seeded = state["done"]
    step.seconds = time.monotonic() - started
    step.harness_cpu_seconds = _cpu_self() - cpu0
    return step


def month_readings(month: int, days: int) -> list[dict[str, Any]]:
    """A stove's readings for one calendar month: one cooking session a day on the first
    `days` days (a start, and an end with the energy used), like tests/support/claims_world.py's
    `cook`. Seqs are unique per stove across months (the store keeps a device's seqs); the
    meter's register (the measure the methodology credits) rises by each session's energy,
    from a value that grows with the month so later months continue it."""
    year, index = divmod(month, 12)
    readings: list[dict[str, Any]] = []
    register = month * 31 * KWH_PER_SESSION
    for day in range(days):
        seq = month * 100 + day * 2
        at = datetime(year, index + 1, day + 1, 18, tzinfo=UTC)
        start = {"session": "start", "meterKwh": round(register, 6)}
        readings.append({"seq": seq, "time": at.isoformat(), "values": start})
        register += KWH_PER_SESSION
        end = at.replace(minute=45)
        values = {"session": "end", "energyKwh": KWH_PER_SESSION, "meterKwh": round(register, 6)}
        readings.append({"seq": seq + 1, "time": end.isoformat(), "values": values})
    # The meter reports its register every day, cooked on or not (the methodology's
    # missing-data rule counts days without a register reading).
    for day in range(days, calendar.monthrange(year, index + 1)[1]):
        at = datetime(year, index + 1, day + 1, 12, tzinfo=UTC)
        values = {"meterKwh": round(register, 6)}
        readings.append({"seq": month * 100 + day * 2, "time": at.isoformat(), "values": values})
    return readings


async def meter(platform: Platform, prog: Programme, store: Store, claim_ids: list[str]) -> int:
    """Store the telemetry of the seeded claims' stove-months that have none yet, through
    TelemetryService (what `POST /v1/domains/{did}/telemetry` calls after authenticating the
    device token): a batch per stove, committed a few stoves at a time. Returns how many
    stove-months were metered."""
    todo: dict[int, list[int]] = {}  # stove index -> months
    slots = []
    for claim_id in claim_ids:
        slot = store.seed_slots.get(claim_id)
        if slot is None or slot in store.metered:
            continue
        stove, month = store.slots.seed(slot)
        todo.setdefault(stove, []).append(month)
        slots.append(slot)
    limit = platform.settings.telemetry.batch_size
    rounds: list[list[tuple[str, list[dict[str, Any]]]]] = []
    for stove, months in todo.items():
        did = prog.assets[stove]
        readings = [r for m in months for r in month_readings(m, prog.metered_days)]
        for i, offset in enumerate(range(0, len(readings), limit)):
            if len(rounds) <= i:
                rounds.append([])
            rounds[i].append((did, readings[offset : offset + limit]))
    telemetry = platform.telemetry
    try:
        for batches in rounds:  # a stove at most once per commit
            for offset in range(0, len(batches), 50):
                prepared = [
                    await telemetry.prepare(
                        did, prog.devices[did], {"readings": readings}, "bench", admitted=True
                    )
                    for did, readings in batches[offset : offset + 50]
                ]
                for result in await telemetry.commit(prepared):
                    if result.rejected:
                        raise BenchError(f"telemetry readings rejected: {result.as_record()}")
    except BenchError:
        raise
    except Exception as exc:
        raise BenchError(f"storing telemetry failed: {type(exc).__name__}: {exc}") from exc
    store.metered.update(slots)
    return len(slots)


# ------------------------------------------------------------------------------ wrk runs


def read_ids(prefix: Path) -> list[str]:
    """The per-thread id files a write run left (<prefix>-<thread>.txt), then delete them."""
    ids: list[str] = []
    for path in sorted(prefix.parent.glob(prefix.name + "-*.txt")):
        ids += [line for line in path.read_text().splitlines() if line]
        path.unlink()
    return ids


def busy_seconds(run: ReadRun) -> None:
    """When threads ran out of claims to evaluate, take the rate over the time they were busy
    (first request sent .. last reply), not over wrk's whole duration."""
    first, last = run.extra.get("first_us", 0), run.extra.get("last_us", 0)
    if run.extra.get("exhausted") and last > first:
        run.seconds = (last - first) / 1e6


@dataclass
class Bench:
    """The run's moving parts, so the measurement steps stay small."""

    ctx: Ctx
    platform: Platform
    prog: Programme
    store: Store
    result: RunResult
    size_index: int = 0
    last: bool = False  # the last store size: the one compared with the bare ceiling
    stored_at_last_run: int = 0  # claims in the store when the last wrk run started

    @property
    def args(self) -> argparse.Namespace:
        return self.ctx.args

    async def wrk(
        self,
        op: str,
        phase: str,
        input_file: Path,
        seconds: int,
        rate: float = 0.0,
        env: dict[str, str] | None = None,
        script: Path = READ_SCRIPT,
    ) -> ReadRun:
        self.stored_at_last_run = await stored_claims(self.platform, self.prog)
        run = await asyncio.to_thread(
            run_wrk, self.ctx, op, phase, input_file, seconds, rate, script, env
        )
        check_alive(self.ctx.server)
        return run

    async def coalesced(self) -> tuple[float, float]:
        """The server's counts of coalesced single evaluations (/metrics): batches, items."""
        import httpx

        headers = {"Authorization": f"Bearer {self.ctx.api_key}"}
        async with httpx.AsyncClient(
            base_url=self.ctx.server.base_url, headers=headers, timeout=30
        ) as client:
            text = (await client.get("/metrics")).text
        found = dict.fromkeys(("batches", "items"), 0.0)
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name == "twinhub_claim_evaluation_batches_total":
                found["batches"] = float(value)
            elif name == "twinhub_claim_evaluations_coalesced_total":
                found["items"] = float(value)
        return found["batches"], found["items"]

    def show(self, op: str, phase: str, run: ReadRun, rate: float = 0.0) -> None:
        lat = run.latency_ms()
        head = f"paced {rate:5,.0f}/s" if phase == "paced" else "full load"
        cpu = run.cpu_ms_per_request
        print(
            f"  {OPS[op]:27} {head:15} {run.rps:7,.0f} req/s  p50 {lat['p50']:7.2f} ms  "
            f"p99 {lat['p99']:7.2f} ms  server CPU {fmt(cpu, '.2f')} ms/req  errors "
            f"{run.all_errors}  others on server core "
            f"{100 * run.foreign_cpu_seconds / max(run.wall_seconds, 1e-9):3.0f} %"
            + ("  (ran out of pending claims)" if run.extra.get("exhausted") else "")
            + (
                f"  {run.extra['evaluations_per_batch']} per coalesced batch"
                if run.extra.get("evaluations_per_batch")
                else ""
            ),
            flush=True,
        )

    def paced_rate(self, op: str, full: ReadRun) -> float:
        """The first size fixes each operation's paced rate, so sizes meet the same load."""
        if op not in self.result.paced_rates:
            wanted = self.args.paced_rate
            self.result.paced_rates[op] = (
                nice_rate(AUTO_PACED_FRACTION * full.rps) if wanted is None else wanted
            )
        return self.result.paced_rates[op]

    async def phases(
        self,
        op: str,
        run_phase: Callable[[str, int, float], Awaitable[ReadRun]],
    ) -> OpResult:
        """Warm-up, full load, paced, through `run_phase(phase, seconds, rate)`."""
        args = self.args
        if args.warmup > 0:
            await run_phase("warmup", args.warmup, 0.0)
        full = await run_phase("full", args.duration, 0.0)
        self.show(op, "full", full)
        result = OpResult(op=op, full=full, stored=self.stored_at_last_run)
        rate = self.paced_rate(op, full)
        if rate > 0 and args.paced_seconds > 0:
            result.paced = await run_phase("paced", args.paced_seconds, rate)
            self.show(op, "paced", result.paced, rate)
        return result

    # -- reads -----------------------------------------------------------------------------
    def list_path(self, cursor: str | None = None, limit: int = LIST_PAGE) -> str:
        params: dict[str, str | int] = {"collection": self.prog.collection, "limit": limit}
        if cursor:
            params["cursor"] = cursor
        return "/v1/claims?" + urlencode(params)

    async def walk(self) -> dict[str, Any]:
        """Page through the collection with the largest page, resuming where the previous
        size's walk stopped: every claim must be listed once; gives the deep cursors."""
        import httpx

        store = self.store
        started, pages = time.monotonic(), 0
        cursor = store.walk_cursors[-1] if store.walk_cursors else None
        position = store.walk_positions[-1] if store.walk_positions else 0
        headers = {"Authorization": f"Bearer {self.ctx.api_key}"}
        async with httpx.AsyncClient(
            base_url=self.ctx.server.base_url, headers=headers, timeout=60
        ) as client:
            while True:
                page = await call(client, "GET", self.list_path(cursor, WALK_PAGE), 200)
                pages += 1
                store.walk_seen.update(item["id"] for item in page["items"])
                position += len(page["items"])
                cursor = page.get("nextCursor")
                if not cursor:
                    break
                store.walk_cursors.append(cursor)
                store.walk_positions.append(position)
        known = set(store.known)
        unknown = store.walk_seen - known
        walk = {
            "pages": pages,
            "seconds": round(time.monotonic() - started, 2),
            "listed": len(store.walk_seen),
            "missing_from_list": len(known - store.walk_seen),
            "unknown_in_list": len(unknown),
        }
        if walk["missing_from_list"] or len(unknown) > store.unrecorded:
            raise BenchError(f"cursor paging of the collection is inconsistent: {walk}")
        for claim_id in sorted(unknown):  # made by a submission whose reply wrk did not read
            store.add(claim_id)
        return walk

    async def reads(self, at: SizeResult) -> None:
        workdir, store = self.ctx.workdir, self.store
        total = len(store.walk_seen)
        deep = [
            c
            for c, pos in zip(store.walk_cursors, store.walk_positions, strict=True)
            if pos >= total / 2
        ] or store.walk_cursors[-1:]
        files = {op: workdir / f"paths-{op}.txt" for op in READS}
        files["get"].write_text("".join(f"/v1/claims/{i}\n" for i in store.known))
        files["list"].write_text(self.list_path() + "\n")
        files["list_deep"].write_text(
            "".join(self.list_path(c) + "\n" for c in deep) if deep else self.list_path() + "\n"
        )
        for op in READS:

            async def phase(name: str, seconds: int, rate: float, op: str = op) -> ReadRun:
                return await self.wrk(op, name, files[op], seconds, rate)

            at.ops[op] = await self.phases(op, phase)
            if op == "get" and self.args.ceiling and self.last:
                # The bare ceiling right after GET claim, on the same paths: measured over the
                # same minutes, not after every write phase (bench/registry.ceiling_beside).
                at.get_ceiling = await asyncio.to_thread(measure_ceiling, self.ctx, files["get"])

    # -- writes ----------------------------------------------------------------------------
    async def submissions(self, at: SizeResult) -> None:
        assets = self.ctx.workdir / "assets.txt"
        assets.write_text("".join(a + "\n" for a in self.prog.assets))

        async def phase(name: str, seconds: int, rate: float) -> ReadRun:
            label = f"s{self.size_index}{name[0]}"  # unique per size and phase
            out = self.ctx.workdir / f"ids-submit-{label}"
            store = self.store
            env = {
                "BENCH_MODE": "submit",
                "BENCH_AUTH": f"Bearer {self.prog.operator_key}",
                "BENCH_PATH": f"/v1/claim-collections/{self.prog.collection}/claims",
                "BENCH_ID_PREFIX": label,
                "BENCH_IDS_OUT": str(out),
                "BENCH_THREADS": str(self.args.connections),
                # submission slot i = base + (n - 1) * threads + (thread - 1): MonthSlots
                "BENCH_SLOT_BASE": str(store.next_submission),
                "BENCH_MONTH_TOP": str(store.slots.submission_top),
            }
            run = await self.wrk("submit", name, assets, seconds, rate, env, WRITE_SCRIPT)
            made = read_ids(out)
            for claim_id in made:
                store.add(claim_id)  # known (read), never evaluated: it has no telemetry
            store.unrecorded += int(run.extra.get("sent", 0)) - run.responses
            store.next_submission += int(run.extra.get("max_n", 0)) * self.args.connections
            store.slots.submission(max(0, store.next_submission - 1))  # still in range?
            return run

        at.ops["submit"] = await self.phases("submit", phase)

    def pending_needed(self, op: str, at: SizeResult, seconds: int, rate: float) -> int:
        """Claims one evaluation phase may use up: twice the best rate seen, plus slack."""
        if rate > 0:
            return int(rate * seconds * 1.5) + 4 * self.args.connections
        seen = [at.ops["submit"].full.rps] if "submit" in at.ops else []
        seen += [s.ops[op].full.rps for s in self.result.sizes if op in s.ops]
        return int(2 * max([50.0, *seen]) * seconds) + 4 * self.args.connections

    def expect(self, op: str, expect: str) -> str:
        """What a good reply contains (tab-separated, all required): an approval also the
        amount the smoke approval computed, and a credential. Every seeded stove-month has
        the same telemetry and household, so the methodology computes the same credits."""
        if op != "approve":
            return expect
        return f'{expect}\t"amount":{self.prog.amount},"credential":"'

    async def evaluations(self, op: str, at: SizeResult) -> None:
        body, expect = EVALUATIONS[op]

        async def phase(name: str, seconds: int, rate: float) -> ReadRun:
            need = self.pending_needed(op, at, seconds, rate)
            if len(self.store.pending) < need:
                stored = await stored_claims(self.platform, self.prog)
                topup = await seed(
                    self.platform,
                    self.prog,
                    self.store,
                    self.args,
                    stored + need - len(self.store.pending),
                    f"pending for {op}",
                )
                at.topups.append(topup)
                print(
                    f"  seeded {topup.seeded:,} more pending claims for {op} ({name}) in "
                    f"{topup.seconds:.1f} s: store {topup.target:,}",
                    flush=True,
                )
            ids = list(self.store.pending)[:need]
            if op == "approve":  # what the methodology reads: each stove-month's telemetry
                started = time.monotonic()
                metered = await meter(self.platform, self.prog, self.store, ids)
                if metered:
                    print(
                        f"  stored telemetry of {metered:,} stove-months for approve ({name}) "
                        f"in {time.monotonic() - started:.1f} s",
                        flush=True,
                    )
            ids_file = self.ctx.workdir / f"pending-{op}.txt"
            ids_file.write_text("".join(i + "\n" for i in ids))
            out = self.ctx.workdir / f"ids-{op}-{self.size_index}{name[0]}"
            env = {
                "BENCH_MODE": "evaluate",
                "BENCH_AUTH": f"Bearer {self.prog.oracle_key}",
                "BENCH_BODY": json.dumps(body, separators=(",", ":")),
                "BENCH_EXPECT": self.expect(op, expect),
                "BENCH_IDS_OUT": str(out),
                "BENCH_THREADS": str(self.args.connections),
            }
            before = await self.coalesced()
            run = await self.wrk(op, name, ids_file, seconds, rate, env, WRITE_SCRIPT)
            after = await self.coalesced()
            batches, items = after[0] - before[0], after[1] - before[1]
            # How many single evaluations each batch carried (services/coalesce.py).
            run.extra["coalesced_batches"] = batches
            run.extra["evaluations_per_batch"] = round(items / batches, 2) if batches else None
            self.store.take(set(read_ids(out)))
            busy_seconds(run)
            return run

        at.ops[op] = await self.phases(op, phase)

    async def bulk_approvals(self, at: SizeResult) -> None:
        """Approve `--bulk-claims` pending, metered claims through POST /v1/claims/evaluations,
        `--bulk-size` per request, `--bulk-concurrency` in flight: approvals per second and
        the server's CPU per approval. Every item must come back approved with the smoke
        approval's amount and a credential."""
        import httpx

        args, store = self.args, self.store
        wanted = args.bulk_claims
        if wanted <= 0:
            return
        if len(store.pending) < wanted:
            stored = await stored_claims(self.platform, self.prog)
            topup = await seed(
                self.platform,
                self.prog,
                store,
                args,
                stored + wanted - len(store.pending),
                "pending for bulk approvals",
            )
            at.topups.append(topup)
        ids = list(store.pending)[:wanted]
        started = time.monotonic()
        metered = await meter(self.platform, self.prog, store, ids)
        print(
            f"  bulk approvals: {len(ids):,} pending claims, telemetry of {metered:,} "
            f"stove-months stored in {time.monotonic() - started:.1f} s",
            flush=True,
        )
        store.take(set(ids))
        chunks = [ids[i : i + args.bulk_size] for i in range(0, len(ids), args.bulk_size)]
        pid = self.ctx.server.pid
        errors: list[str] = []
        headers = {"Authorization": f"Bearer {self.prog.oracle_key}"}

        async def send(client: httpx.AsyncClient, queue: deque[list[str]]) -> None:
            while queue:
                chunk = queue.popleft()
                body = {"evaluations": [{"claim": c, "status": "approved"} for c in chunk]}
                reply = await call(client, "POST", "/v1/claims/evaluations", 200, body)
                for item in reply["results"]:
                    if (
                        item.get("status") != "approved"
                        or item.get("amount") != self.prog.amount
                        or not item.get("credential")
                    ):
                        errors.append(str(item)[:300])

        queue = deque(chunks)
        async with httpx.AsyncClient(
            base_url=self.ctx.server.base_url, headers=headers, timeout=600
        ) as client:
            cpu0, t0 = cpu_seconds(pid), time.monotonic()
            await asyncio.gather(
                *(send(client, queue) for _ in range(max(1, args.bulk_concurrency)))
            )
            wall, cpu = time.monotonic() - t0, cpu_seconds(pid) - cpu0
        check_alive(self.ctx.server)
        at.bulk = {
            "request": "POST /v1/claims/evaluations",
            "approvals": len(ids),
            "per_request": args.bulk_size,
            "in_flight": args.bulk_concurrency,
            "seconds": round(wall, 2),
            "approvals_per_s": round(len(ids) / wall, 1),
            "server_cpu_ms_per_approval": round(1000 * cpu / len(ids), 3),
            "target_per_s": WRITE_TARGETS["approve"],
            "errors": len(errors),
            "first_errors": errors[:5],
        }
        print(
            f"  bulk approvals ({args.bulk_size} per request, {args.bulk_concurrency} in "
            f"flight): {len(ids):,} in {wall:.1f} s = {len(ids) / wall:,.0f}/s, server CPU "
            f"{1000 * cpu / len(ids):.3f} ms per approval; errors {len(errors)}",
            flush=True,
        )


# ------------------------------------------------------------------------------ the run


async def bench_sizes(bench: Bench, sizes: list[int]) -> None:
    """Seed to each size, then reads (at exactly that size), submissions, evaluations."""
    platform, prog, store, ctx = bench.platform, bench.prog, bench.store, bench.ctx
    for index, size in enumerate(sizes):
        bench.size_index, bench.last = index, index == len(sizes) - 1
        stored = await stored_claims(platform, prog)
        print(f"\n-- {size:,} claims: seeding from {stored:,}", flush=True)
        step = await seed(platform, prog, store, bench.args, size, "store")
        at = SizeResult(size=size, seed=step)
        bench.result.sizes.append(at)
        if step.seeded:
            print(
                f"  seeded {step.seeded:,} claims in {step.seconds:.1f} s: {step.rate:,.0f}/s "
                f"(ClaimService.submit in this process; harness CPU "
                f"{1000 * step.harness_cpu_seconds / step.seeded:.2f} ms/claim)",
                flush=True,
            )
        autovacuum = await analyze(platform)
        if autovacuum is not None:
            at.analyzed = True
            print(f"  ANALYZE done (the server's autovacuum is {autovacuum})", flush=True)
        at.walk = await bench.walk()
        print(
            f"  collection walked in {at.walk['pages']} pages / {at.walk['seconds']:.1f} s: "
            f"{at.walk['listed']:,} claims listed, none missing",
            flush=True,
        )
        await bench.reads(at)
        await bench.submissions(at)
        for op in ("approve", "reject"):
            await bench.evaluations(op, at)
        await bench.bulk_approvals(at)
        at.counts_after = (await platform.claims.collections.collection(prog.collection))["counts"]
        at.rss_mib = rss_mib(ctx.server.pid)
        at.db_mib = await database_mib(platform, ctx.workdir)
        print(
            f"  collection now: {at.counts_after['submitted']:,} claims, "
            f"{at.counts_after['approved']:,} approved, {at.counts_after['rejected']:,} "
            f"rejected; server RSS {at.rss_mib:.1f} MiB, database {at.db_mib:.1f} MiB",
            flush=True,
        )


async def bench_async(
    args: argparse.Namespace, sizes: list[int], cpus: tuple[int, int], tag: str
) -> RunResult:
    """Start a fresh server (and database), build the programme, measure, tear down."""
    result = RunResult(database=args.database)
    workdir = Path(tempfile.mkdtemp(prefix="twinhub-bench-claims-"))
    result.workdir = str(workdir)
    api_key = secrets.token_urlsafe(36)
    (workdir / "api-key").write_text(api_key + "\n")
    keys = bench_keys()
    database_url = None
    port = args.port or free_port()
    env = server_env(workdir, api_key)
    env.update(keys)
    # The claim oracle would evaluate (approve, or flag for want of telemetry) the pending
    # claims on its own, on the measured core; the approvals measured here are the API's.
    # `./dev bench oracle` measures the oracle.
    env["ORACLE_ENABLED"] = "false"
    server: Server | None = None
    platform = None
    ok = False
    try:
        if args.database == "postgresql":
            database_url = await create_postgres_database(args.postgres_url, tag)
            env["DATABASE_URL"] = database_url
            print(f"database {database_url.rsplit('/', 1)[1]} created", flush=True)
        server = Server(server_command(args, port, cpus[0]), env, workdir, port)
        ctx = Ctx(args, server, api_key, cpus[0], cpus[1], workdir, workdir / "wrk.log")
        print(
            f"\n== claims on {args.database}  (server: {shlex.join(server.cmd)}; files in "
            f"{workdir})",
            flush=True,
        )
        server.start()
        server.wait_ready(args.startup_timeout)
        platform = open_platform(workdir, database_url, api_key, keys)
        started = time.monotonic()
        prog = await build_programme(server, api_key, platform, args.assets, tag)
        store = Store(slots=MonthSlots.before(datetime.now(UTC), len(prog.assets)))
        await smoke(server, api_key, platform, prog, store, tag)
        result.programme = {
            "project": prog.project,
            "verified_by_proposal": prog.proposal,
            "group": prog.group,
            "oracle": prog.oracle,
            "collection": prog.collection,
            "assets": len(prog.assets),
            "protocol": CLAIM_PROTOCOL,
            "metered_days_per_stove_month": prog.metered_days,
            "kwh_per_day": KWH_PER_SESSION,
            "stove_properties": STOVE_PROPERTIES,
            "approval_amount": prog.amount,
            "seconds": round(time.monotonic() - started, 1),
        }
        print(
            f"  programme: project {prog.project} verified by proposal {prog.proposal}, oracle "
            f"{prog.oracle}, {len(prog.assets)} stoves, collection {prog.collection}; one "
            f"claim approved by hand (the methodology computed {prog.amount} CARBON in its "
            f"smallest unit from {prog.metered_days} metered days; credential verifies, "
            "awaiting issuance, nothing minted) and one rejected "
            f"({result.programme['seconds']:.1f} s)",
            flush=True,
        )
        bench = Bench(ctx, platform, prog, store, result)
        await bench_sizes(bench, sizes)
        last = result.sizes[-1]
        for op, target in WRITE_TARGETS.items():
            got = last.ops[op].full.rps
            result.write_targets[op] = {
                "requests_per_s": round(got, 1),
                "target_per_s": target,
                "ratio": round(got / target, 3),
                "server_cpu_ms_per_request": round(last.ops[op].full.cpu_ms_per_request or 0, 3),
            }
            print(
                f"\n{OPS[op]}: {got:,.0f}/s against the target {target:,}/s -> {got / target:.3f}",
                flush=True,
            )
        if last.bulk:
            got = last.bulk["approvals_per_s"]
            target = WRITE_TARGETS["approve"]
            result.write_targets["approve_bulk"] = {
                "approvals_per_s": got,
                "target_per_s": target,
                "ratio": round(got / target, 3),
                "server_cpu_ms_per_approval": last.bulk["server_cpu_ms_per_approval"],
                "per_request": last.bulk["per_request"],
            }
            print(
                f"bulk approvals (POST /v1/claims/evaluations, {last.bulk['per_request']} per "
                f"request): {got:,.0f}/s against the target {target:,}/s -> {got / target:.3f}",
                flush=True,
            )
        if args.ceiling and last.get_ceiling is not None:
            result.ceiling = versus_ceiling(
                "GET claim", last.ops["get"].full, last.get_ceiling, CEILING_TARGET
            )
            print_ceiling(result.ceiling)
        result.rss_peak_mib = max([hwm_mib(server.pid), *(s.rss_mib for s in result.sizes)])
        if result.errors > args.max_errors:
            result.status = "failed"
            result.reason = f"{result.errors} errors (allowed: {args.max_errors})"
        ok = result.status == "ok"
    except BenchError as exc:
        result.status = "failed"
        result.reason = str(exc)
    finally:
        if platform is not None:
            await platform.stop()
        if server is not None:
            result.server_exit_code = server.stop()
            result.server_stderr_tail = server.stderr_tail()
        if database_url is not None:
            if args.keep:
                print(f"kept database {database_url}", flush=True)
            else:
                await drop_postgres_database(args.postgres_url, database_url)
        if ok and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
            result.workdir = ""
    if result.status == "failed":
        print(f"\n!! claims benchmark FAILED: {result.reason}", file=sys.stderr)
        print(f"!! server exit code: {result.server_exit_code}", file=sys.stderr)
        print("!! server stderr, last lines:", file=sys.stderr)
        print(result.server_stderr_tail, file=sys.stderr)
        print(f"!! files kept in {workdir}", file=sys.stderr)
    return result


# ------------------------------------------------------------------------------ report


def ratios(result: RunResult) -> dict[str, dict[str, float | None]]:
    """Large store / small store, per operation: throughput, server CPU per request, p99."""
    if len(result.sizes) < 2:
        return {}
    small, large = result.sizes[0], result.sizes[-1]
    out: dict[str, dict[str, float | None]] = {}

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(b / a, 2) if a and b else None

    for op in OPS:
        if op not in small.ops or op not in large.ops:
            continue
        a, b = small.ops[op], large.ops[op]
        out[op] = {
            "requests_per_s": ratio(a.full.rps, b.full.rps),
            "server_cpu_per_request": ratio(a.full.cpu_ms_per_request, b.full.cpu_ms_per_request),
            "p99_full": ratio(a.full.latency_ms()["p99"], b.full.latency_ms()["p99"]),
            "p99_paced": ratio(
                a.paced.latency_ms()["p99"] if a.paced else None,
                b.paced.latency_ms()["p99"] if b.paced else None,
            ),
        }
    return out


def targets(result: RunResult) -> dict[str, bool | None]:
    """Costs stay flat (server CPU per request, large / small <= FLAT_FACTOR); no errors."""
    verdicts: dict[str, bool | None] = {}
    found = ratios(result)
    for op in OPS:
        r = found.get(op, {}).get("server_cpu_per_request")
        verdicts[f"{op}_cost_flat"] = None if r is None else r <= FLAT_FACTOR
    verdicts["no_errors"] = result.errors == 0 if result.sizes else None
    return verdicts


def noise_percent(result: RunResult) -> float:
    """The largest share of the server's core other processes took during a measurement."""
    shares = [
        100 * r.foreign_cpu_seconds / r.wall_seconds
        for s in result.sizes
        for o in s.ops.values()
        for r in o.runs
        if r.wall_seconds
    ]
    return max(shares, default=0.0)


def print_table(result: RunResult, args: argparse.Namespace, cpus: tuple[int, int]) -> None:
    """One column per store size, one row per figure; then large/small ratios."""
    shown = result.sizes
    print(
        f"\nClaims benchmark ({result.database}): server on CPU {cpus[0]}, load on CPU "
        f"{cpus[1]}; {args.connections} wrk connections, {args.duration} s full load, "
        f"{args.paced_seconds} s paced"
    )
    if result.status != "ok":
        print(f"  FAILED - {result.reason.splitlines()[0] if result.reason else ''}")
    if not shown:
        return

    def cell(fn: Callable[[SizeResult], Any], spec: str) -> list[str]:
        values = []
        for s in shown:
            try:
                values.append(fmt(fn(s), spec))
            except (KeyError, AttributeError, ZeroDivisionError, TypeError):
                values.append("-")
        return values

    def lat(op: str, phase: str, p: str) -> Callable[[SizeResult], Any]:
        return lambda s: getattr(s.ops[op], phase).latency_ms()[p]

    rows: list[tuple[str, list[str], str]] = [
        ("claims stored (seeded to)", [f"{s.size:,}" for s in shown], "reads run at this size"),
        (
            "seeding: claims/s",
            cell(lambda s: s.seed.rate or None, ",.0f"),
            "ClaimService.submit in-process",
        ),
    ]
    for op, label in OPS.items():
        rate = result.paced_rates.get(op, 0)
        rows.append((f"{label}: claims stored", cell(lambda s, o=op: s.ops[o].stored, ",d"), ""))
        rows += [
            ("  req/s", cell(lambda s, o=op: s.ops[o].full.rps, ",.0f"), "full load"),
            (
                "  server CPU ms/req",
                cell(lambda s, o=op: s.ops[o].full.cpu_ms_per_request, ".2f"),
                "cost; flat if nothing is O(n)",
            ),
            ("  p50 (ms)", cell(lat(op, "full", "p50"), ".2f"), "full load (queueing)"),
            ("  p99 (ms)", cell(lat(op, "full", "p99"), ".2f"), "full load (queueing)"),
        ]
        if rate:
            rows += [
                (
                    f"  paced {rate:g}/s: got req/s",
                    cell(lambda s, o=op: s.ops[o].paced.rps, ",.0f"),
                    "",
                ),
                (f"  paced {rate:g}/s: p50 (ms)", cell(lat(op, "paced", "p50"), ".2f"), ""),
                (
                    f"  paced {rate:g}/s: p99 (ms)",
                    cell(lat(op, "paced", "p99"), ".2f"),
                    "≈ service time",
                ),
            ]
    rows += [
        (
            "others on server core % (max)",
            cell(
                lambda s: max(
                    100 * r.foreign_cpu_seconds / r.wall_seconds
                    for o in s.ops.values()
                    for r in o.runs
                ),
                ".0f",
            ),
            "noise: should be ~0",
        ),
        ("errors", [f"{s.errors:,}" for s in shown], "0"),
        ("claims stored at the end", cell(lambda s: s.counts_after["submitted"], ",d"), ""),
        ("server RSS (MiB)", cell(lambda s: s.rss_mib, ".1f"), "after the size's runs"),
        ("database (MiB)", cell(lambda s: s.db_mib, ".1f"), ""),
    ]
    width = max(len(name) for name, _, _ in rows) + 2
    col = 14
    print("store".ljust(width) + "".join(f"{s.size:,}".rjust(col) for s in shown))
    for name, values, note in rows:
        print(name.ljust(width) + "".join(v.rjust(col) for v in values) + f"   {note}".rstrip())
    found = ratios(result)
    if found:
        print(f"large / small store ({shown[-1].size:,} / {shown[0].size:,} claims seeded):")
        for op, r in found.items():
            print(
                f"  {OPS[op]:28} req/s {fmt(r['requests_per_s'], '.2f')}x, server CPU per "
                f"request {fmt(r['server_cpu_per_request'], '.2f')}x, p99 paced "
                f"{fmt(r['p99_paced'], '.2f')}x, p99 full load {fmt(r['p99_full'], '.2f')}x"
            )
    verdicts = ", ".join(f"{k} {verdict(v)}" for k, v in targets(result).items())
    print(f"checks: {verdicts}")
    samples = [x for s in shown for o in s.ops.values() for r in o.runs for x in r.error_samples]
    if samples:
        print("sample error replies:", *samples[:6], sep="\n  ")
    noise = noise_percent(result)
    if noise > NOISE_WARN_PERCENT:
        print(
            f"WARNING: other processes took up to {noise:.0f} % of the server's core (CPU "
            f"{cpus[0]}) during a measurement; throughput is understated and latency includes "
            "waiting for the CPU. Server CPU per request is still the cost."
        )


def to_json(result: RunResult, args: argparse.Namespace, extra: dict[str, Any]) -> dict[str, Any]:
    """The figures in machine-readable form, for bench/results/claims-<database>.json."""
    return {
        "benchmark": "claims",
        "database": result.database,
        "status": result.status,
        "reason": result.reason,
        "requests": OP_REQUESTS,
        "programme": result.programme,
        "sizes": [s.to_json() for s in result.sizes],
        "paced_rates": result.paced_rates,
        "ratio_large_to_small": ratios(result),
        "versus_ceiling": result.ceiling,
        "write_targets": result.write_targets,
        "checks": targets(result),
        "errors": result.errors,
        "max_foreign_cpu_percent_on_server_core": round(noise_percent(result), 1),
        "rss_peak_mib": round(result.rss_peak_mib, 2),
        "server_exit_code": result.server_exit_code,
        "server_stderr_tail": result.server_stderr_tail if result.status != "ok" else "",
        "workdir": result.workdir,
        "config": {
            "claims": args.claims,
            "small": args.small,
            "assets": args.assets,
            "connections": args.connections,
            "duration_seconds": args.duration,
            "warmup_seconds": args.warmup,
            "paced_rate": args.paced_rate,
            "paced_seconds": args.paced_seconds,
            "seed_concurrency": args.seed_concurrency,
            "timeout_seconds": args.timeout,
            **extra,
        },
    }


def run(args: argparse.Namespace) -> int:
    """Entry point of `python -m bench claims`; non-zero on missing tools or failures."""
    if args.quick:
        args.claims, args.small, args.duration, args.warmup, args.paced_rate = 1000, 0, 5, 1, 0
        args.bulk_claims = min(args.bulk_claims, 4000)
    problem = check_tools(args)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    if args.claims < 1 or args.small < 0 or (args.small and args.small >= args.claims):
        print("--claims must be positive and larger than --small (0 skips it)", file=sys.stderr)
        return 2
    if args.connections < 1 or args.duration < 1 or args.assets < 1:
        print("--connections, --duration and --assets must be positive", file=sys.stderr)
        return 2
    try:
        bulk = max(0, args.bulk_claims) * len([n for n in (args.small, args.claims) if n])
        MonthSlots.before(datetime.now(UTC), args.assets).check_seeds(args.claims + bulk)
    except OutOfMonths as exc:
        print(exc, file=sys.stderr)
        return 2
    sizes = [s for s in (args.small, args.claims) if s]
    cpus = pick_cpus(args.server_cpu, args.wrk_cpu)
    tag = secrets.token_hex(4)
    extra = run_metadata(cpus, tag)
    with pinned_to(cpus[1]):  # the seeder runs in this process
        runner: Callable[[Awaitable[RunResult]], RunResult] = asyncio.run  # type: ignore[assignment]
        with contextlib.suppress(ImportError):
            import uvloop

            runner = uvloop.run  # about 20 % faster seeding than the default loop
        result = runner(bench_async(args, sizes, cpus, tag))
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / f"claims-{args.database}.json"
    out.write_text(json.dumps(to_json(result, args, extra), indent=2) + "\n")
    print_table(result, args, cpus)
    print(f"wrote {out}")
    if result.status == "failed":
        return 1
    if args.strict and False in targets(result).values():
        return 1
    return 0
