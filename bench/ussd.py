"""USSD gateway benchmark: whole sessions through wrk against `twinhub serve ussd`.

Starts the server pinned to one core, drives it from wrk pinned to another, one USSD session
per connection at a time (welcome -> Know More -> Pricing -> back), in rounds until the
requested number of sessions has been driven, and samples the server's RSS between rounds so
a leak shows up as a rising line; then measures latency at a steady 5,000 requests/s.
Targets (in-memory store, one core): >= 5,000 requests/s, p99 < 10 ms at 5,000 requests/s,
memory flat after a million sessions. See bench/README.md.
"""

import argparse
import contextlib
import json
import math
import os
import resource
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import ceiling

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
LUA_SCRIPT = BENCH_DIR / "ussd_sessions.lua"
DEFAULT_RESULTS_DIR = BENCH_DIR / "results"

HOST = "127.0.0.1"
CEILING = "ceiling"  # the bare Starlette app run beside the memory store
CEILING_TARGET = 0.8  # issue #14: USSD at >= 80 % of the ceiling (CPU per request)
STEPS = ("", "1", "1*2", "1*2*0")  # one session: welcome, Know More, Pricing, back
TARGET_RPS = 5000.0
TARGET_P99_MS = 10.0
# memory counts as flat if RSS grows by at most max(2 MiB, 5 %) once the store is full
FLAT_TOLERANCE_MIB = 2.0
FLAT_TOLERANCE_FRACTION = 0.05
MAX_ROUND_SECONDS = 60
MIB = 1024 * 1024


class BenchError(Exception):
    """A store's run could not produce figures (server died, contract broken, ...)."""


# ------------------------------------------------------------------------------ options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of `python -m bench ussd`."""
    parser.add_argument(
        "--sessions",
        type=int,
        default=100_000,
        help="total sessions (4 requests each) to drive per store; the real target run is "
        "1000000 (default: %(default)s)",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="SECONDS",
        help="drive load for this many seconds per store instead of --sessions",
    )
    parser.add_argument(
        "--connections",
        type=int,
        default=64,
        help="concurrent connections = concurrent sessions; wrk gets one thread per "
        "connection to keep each session's steps in order (default: %(default)s)",
    )
    parser.add_argument(
        "--store",
        choices=("memory", "redis", "both"),
        default="both",
        help="session store(s) to benchmark; with 'both' an unreachable Redis is skipped "
        "with a warning (default: %(default)s)",
    )
    parser.add_argument(
        "--sample-every",
        type=int,
        default=None,
        metavar="SESSIONS",
        help="sample RSS (and start a new wrk round) every this many sessions "
        "(default: a tenth of --sessions, at least 1000, at most 100000)",
    )
    parser.add_argument(
        "--warmup",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="unmeasured load before the 'before' RSS sample (default: %(default)s)",
    )
    parser.add_argument(
        "--ttl",
        type=int,
        default=30,
        metavar="SECONDS",
        help="USSD_SESSION_TTL_SECONDS, short so sessions expire during long runs "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--retention",
        type=int,
        default=None,
        metavar="SECONDS",
        help="USSD_SESSION_RETENTION_SECONDS, how long expired sessions are remembered "
        "(default: the server's own, 600 s at the time of writing)",
    )
    parser.add_argument(
        "--max-sessions",
        type=int,
        default=100_000,
        help="USSD_MAX_SESSIONS, the in-memory store's cap (default: %(default)s)",
    )
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"),
        help="Redis for --store redis; keys go under a random twinhub-bench-*: prefix that is "
        "deleted afterwards (default: $BENCH_REDIS_URL or %(default)s)",
    )
    parser.add_argument(
        "--server-cpu", type=int, default=None, help="CPU for the server (default: first allowed)"
    )
    parser.add_argument(
        "--wrk-cpu", type=int, default=None, help="CPU for wrk (default: second allowed)"
    )
    parser.add_argument(
        "--timeout",
        type=int,
        default=2,
        metavar="SECONDS",
        help="wrk request timeout; slower replies count as timeout errors (default: %(default)s)",
    )
    parser.add_argument(
        "--paced-rate",
        type=float,
        default=TARGET_RPS,
        metavar="REQ_PER_S",
        help="after the full-load rounds, drive this steady rate for --paced-seconds and "
        "report its latency: the p99 target is judged there, because at full load a closed "
        "loop's latency is only connections / throughput; 0 skips it (default: %(default)g)",
    )
    parser.add_argument(
        "--paced-seconds",
        type=int,
        default=15,
        metavar="SECONDS",
        help="length of the paced phase (default: %(default)s)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="idle this long after the last round and sample RSS again, e.g. TTL+5 to see "
        "whether expiry gives memory back (default: %(default)s)",
    )
    parser.add_argument(
        "--max-errors",
        type=int,
        default=0,
        help="exit non-zero when a store has more errors than this (default: %(default)s)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="also exit non-zero when the in-memory store misses a target",
    )
    parser.add_argument(
        "--service-code", default="*384*1#", help="serviceCode field (default: %(default)s)"
    )
    parser.add_argument(
        "--ceiling",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="beside the memory store, drive a bare Starlette app (bench/ceiling.py) on the "
        "same core the same way, a round of it after each round of the store, and report "
        "twinhub's CPU per request as a ratio of it (default: on)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run for `bench all --quick`: 20,000 sessions, memory store, 2 s "
        "warm-up, 5 s paced",
    )
    add_server_options(
        parser, "ussd", "ussd-<store>.json", "keep each store's temp dir (logs, SQLite, key)"
    )


def add_server_options(
    parser: argparse.ArgumentParser, server: str, results: str, keep: str
) -> None:
    """The options every wrk-driven benchmark shares: which server, where, where results go."""
    parser.add_argument(
        "--server-cmd",
        default=None,
        help=f"run this instead of `twinhub serve {server}` (shell words; {{host}} and {{port}} "
        "are substituted), e.g. to benchmark another build",
    )
    parser.add_argument("--port", type=int, default=0, help="server port (default: a free one)")
    parser.add_argument(
        "--startup-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long to wait for GET /health to answer 200 (default: %(default)s)",
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=DEFAULT_RESULTS_DIR,
        help=f"where {results} goes (default: bench/results)",
    )
    parser.add_argument("--keep", action="store_true", help=keep)


# ------------------------------------------------------------------------------ tools


def sudo_prefix() -> str:
    """Say 'sudo ' only where the user is not root, so the printed command works as is."""
    return "" if os.geteuid() == 0 else "sudo "


def check_tools() -> str | None:
    """Return why the benchmark cannot run (missing wrk/taskset), or None when it can."""
    if shutil.which("wrk") is None:
        return f"wrk is not installed; install it with:\n    {sudo_prefix()}apt-get install -y wrk"
    if shutil.which("taskset") is None:
        return (
            "taskset (pins server and wrk to their own cores) is not installed; install it with:\n"
            f"    {sudo_prefix()}apt-get install -y util-linux"
        )
    if not LUA_SCRIPT.is_file():
        return f"missing {LUA_SCRIPT}"
    return None


def wrk_version() -> str:
    """Record which wrk produced the figures."""
    proc = subprocess.run(["wrk", "-v"], capture_output=True, text=True, check=False)
    lines = (proc.stdout + proc.stderr).splitlines()
    return lines[0].strip() if lines else ""


def git_revision() -> str | None:
    """Record which server code was measured (None before the first commit)."""
    proc = subprocess.run(
        ["git", "-C", str(REPO_DIR), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return None
    return proc.stdout.strip() or None


def run_metadata(cpus: tuple[int, int], tag: str, load_key: str = "load_cpu") -> dict[str, Any]:
    """What every result file records about its run: the cores, wrk, the code, when."""
    return {
        "server_cpu": cpus[0],
        load_key: cpus[1],
        "wrk": wrk_version(),
        "revision": git_revision(),
        "run_tag": tag,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host_cpus": os.cpu_count(),
    }


@contextlib.contextmanager
def pinned_to(cpu: int) -> Iterator[None]:
    """Run this process (a seeder or load client) on `cpu`, beside wrk, for the block."""
    affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, affinity)


def pick_cpus(server_cpu: int | None, wrk_cpu: int | None) -> tuple[int, int]:
    """Give server and wrk a core each, so the figures mean 'one core' and wrk steals none."""
    allowed = sorted(os.sched_getaffinity(0))
    if server_cpu is None:
        server_cpu = allowed[0]
    if wrk_cpu is None:
        others = [c for c in allowed if c != server_cpu]
        if not others:
            print(
                f"warning: only CPU {server_cpu} is available; wrk shares the server's core, "
                "so the figures understate the server",
                file=sys.stderr,
            )
        wrk_cpu = others[0] if others else server_cpu
    return server_cpu, wrk_cpu


def free_port() -> int:
    """Pick a port nothing listens on, so parallel or leftover servers cannot interfere."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


# ------------------------------------------------------------------------------ /proc


def _children(pid: int) -> list[int]:
    """Direct children of pid, so a server that forks workers is measured as a whole."""
    kids: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                kids += [
                    int(p) for p in Path(f"/proc/{pid}/task/{task}/children").read_text().split()
                ]
    return kids


def process_tree(pid: int) -> list[int]:
    """pid and all its descendants."""
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo += _children(p)
    return tree


def _status_kib(pid: int, key: str) -> int:
    """One kB figure of /proc/<pid>/status; 0 once the process is gone (sampling races)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def rss_mib(pid: int) -> float:
    """Resident memory of the server's process tree (VmRSS), the figure that must stay flat."""
    return sum(_status_kib(p, "VmRSS") for p in process_tree(pid)) / 1024


def hwm_mib(pid: int) -> float:
    """Peak resident memory (VmHWM) of the tree: catches spikes between our samples."""
    return sum(_status_kib(p, "VmHWM") for p in process_tree(pid)) / 1024


def cpu_seconds(pid: int) -> float:
    """User+system CPU time of the tree, to tell whether the server saturated its core."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in process_tree(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = Path(f"/proc/{p}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


# ------------------------------------------------------------------------------ server


class Server:
    """The server under test as a pinned subprocess whose logs land in its temp dir."""

    def __init__(self, cmd: list[str], env: dict[str, str], workdir: Path, port: int) -> None:
        self.cmd = cmd
        self.env = env
        self.workdir = workdir
        self.port = port
        self.stdout_path = workdir / "server.stdout.log"
        self.stderr_path = workdir / "server.stderr.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> None:
        """Start in its own session so stop() can end exactly this process group."""
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                self.cmd,
                env=self.env,
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )

    def exit_code(self) -> int | None:
        """None while running."""
        return None if self.proc is None else self.proc.poll()

    def wait_ready(self, timeout: float) -> None:
        """Block until GET /health answers 200; fail early if the process dies."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            code = self.exit_code()
            if code is not None:
                raise BenchError(f"server exited with code {code} before /health answered")
            try:
                with urllib.request.urlopen(self.base_url + "/health", timeout=2) as resp:
                    if resp.status == 200:
                        return
                    last = f"HTTP {resp.status}"
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}: {exc.read()[:200]!r}"
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            time.sleep(0.1)
        raise BenchError(f"GET /health did not answer 200 within {timeout:.0f} s (last: {last})")

    def stop(self) -> int | None:
        """SIGTERM the server's process group, SIGKILL it if it lingers; return the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        return self.proc.returncode

    def stderr_tail(self, lines: int = 40) -> str:
        """The end of the server's stderr, for failure reports."""
        try:
            text = self.stderr_path.read_text(errors="replace")
        except OSError:
            return "(no stderr file)"
        tail = text.splitlines()[-lines:]
        return "\n".join(tail) if tail else "(stderr is empty)"


def server_command(
    args: argparse.Namespace, port: int, cpu: int, store: str = "memory"
) -> list[str]:
    """`taskset -c CPU twinhub serve ussd ...` (or --server-cmd, or the bare Starlette
    ceiling), pinned to the server core."""
    if store == CEILING:
        cmd = ceiling.command(HOST, port)
    elif args.server_cmd:
        cmd = [w.format(host=HOST, port=port) for w in shlex.split(args.server_cmd)]
    else:
        twinhub = Path(sys.executable).parent / "twinhub"
        exe = str(twinhub) if twinhub.exists() else shutil.which("twinhub")
        if exe is None:
            raise BenchError("no twinhub executable next to this Python; run ./dev bench ussd")
        cmd = [exe, "serve", "ussd", "--host", HOST, "--port", str(port)]
    return ["taskset", "-c", str(cpu), *cmd]


def server_env(
    args: argparse.Namespace, data_dir: Path, redis_prefix: str | None
) -> dict[str, str]:
    """The contract's environment; a stray REDIS_URL must not turn a memory run into Redis."""
    env = dict(os.environ)
    for key in ("REDIS_URL", "REDIS_KEY_PREFIX"):
        env.pop(key, None)
    env.update(
        DATA_DIR=str(data_dir),
        ENVIRONMENT="development",
        LOG_LEVEL="warning",
        USSD_RATE_LIMIT="1000000/minute",  # the default 100/minute would throttle the benchmark
        USSD_SESSION_TTL_SECONDS=str(args.ttl),
        USSD_MAX_SESSIONS=str(args.max_sessions),
    )
    if args.retention is not None:
        env["USSD_SESSION_RETENTION_SECONDS"] = str(args.retention)
    if redis_prefix is not None:
        env.update(REDIS_URL=args.redis_url, REDIS_KEY_PREFIX=redis_prefix)
    return env


def smoke_session(base_url: str, run_tag: str, service_code: str) -> list[tuple[int, str]]:
    """Walk one session by hand first: a contract mismatch shows as readable replies."""
    replies: list[tuple[int, str]] = []
    for text in STEPS:
        body = urllib.parse.urlencode(
            {
                "sessionId": f"bench-{run_tag}-smoke",
                "serviceCode": service_code,
                "phoneNumber": "+254700000000",
                "text": text,
            }
        ).encode()
        req = urllib.request.Request(
            base_url + "/api/ussd",
            data=body,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                replies.append((resp.status, resp.read().decode(errors="replace")))
        except urllib.error.HTTPError as exc:
            replies.append((exc.code, exc.read().decode(errors="replace")))
        except (urllib.error.URLError, OSError) as exc:
            replies.append((0, f"({exc})"))
    return replies


# ------------------------------------------------------------------------------ redis


def redis_cli(url: str, *words: str) -> subprocess.CompletedProcess[str]:
    """redis-cli against url (redis-py is not a dependency of the harness)."""
    return subprocess.run(
        ["redis-cli", "-u", url, *words],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def redis_problem(url: str) -> str | None:
    """Why Redis cannot be used (None when it answers PING)."""
    if shutil.which("redis-cli") is None:
        return f"redis-cli is not installed ({sudo_prefix()}apt-get install -y redis-tools)"
    proc = redis_cli(url, "ping")
    if proc.returncode != 0 or proc.stdout.strip() != "PONG":
        return f"Redis at {url} does not answer PING: {(proc.stdout + proc.stderr).strip()}"
    return None


def redis_dbsize(url: str) -> int | None:
    """Key count of the whole db: keys the server wrote outside its prefix show up here."""
    proc = redis_cli(url, "dbsize")
    try:
        return int(proc.stdout.strip())
    except ValueError:
        return None


def redis_used_memory_mib(url: str) -> float | None:
    """Redis's own used_memory, the Redis store's share of the memory bill."""
    for line in redis_cli(url, "info", "memory").stdout.splitlines():
        if line.startswith("used_memory:"):
            return int(line.split(":")[1]) / MIB
    return None


def redis_prefix_keys(url: str, prefix: str) -> list[str]:
    """Keys under the run's prefix (prefix is [a-z0-9-:], no glob escaping needed)."""
    proc = redis_cli(url, "--scan", "--pattern", prefix + "*")
    if proc.returncode != 0:
        raise BenchError(f"redis-cli --scan failed: {(proc.stdout + proc.stderr).strip()}")
    return [k for k in proc.stdout.splitlines() if k]


def redis_delete(url: str, keys: list[str]) -> None:
    """Delete the run's keys so benchmarks leave the shared Redis as they found it."""
    for i in range(0, len(keys), 500):
        proc = redis_cli(url, "del", *keys[i : i + 500])
        if proc.returncode != 0:
            raise BenchError(f"redis-cli del failed: {(proc.stdout + proc.stderr).strip()}")


# ------------------------------------------------------------------------------ wrk rounds


@dataclass
class Round:
    """Figures of one wrk run; rounds are summed into the store's totals."""

    index: int
    seconds: float
    responses: int
    ok: int
    errors: int  # non-CON replies: non-200, END, anything else
    non200: int
    ends: int
    other: int
    sessions: int
    abandoned: int  # sessions cut mid-walk when the round ended (they expire by TTL)
    socket_errors: dict[str, int]
    wrk_latency_us: dict[str, float]
    histogram: list[list[int]]  # [low_us, high_us (-1 = open), count]
    error_samples: list[str]
    server_cpu_seconds: float
    wrk_cpu_seconds: float  # near 100 % of its core would mean wrk, not the server, is the limit
    wall_seconds: float
    total_sessions: int = 0
    rss_mib: float = 0.0

    @property
    def socket_error_count(self) -> int:
        return sum(self.socket_errors.values())

    def summary(self) -> dict[str, Any]:
        """The round without its histogram, for the JSON file."""
        data = asdict(self)
        data.pop("histogram")
        return data


def run_wrk(
    url: str,
    args: argparse.Namespace,
    wrk_cpu: int,
    seconds: int,
    round_tag: str,
    run_tag: str,
    server: Server,
    log: Path,
    rate: float = 0.0,
) -> Round:
    """One wrk run of `seconds`, every connection walking sessions tagged run/round;
    rate > 0 paces the connections to that many requests/s in total."""
    result_file = server.workdir / f"wrk-{round_tag}.json"
    env = dict(os.environ)
    env.update(
        BENCH_RUN=run_tag,
        BENCH_ROUND=round_tag,
        BENCH_SERVICE_CODE=urllib.parse.quote(args.service_code, safe=""),
        BENCH_PHONE_PREFIX=urllib.parse.quote("+2547", safe=""),
        BENCH_RESULT_FILE=str(result_file),
        BENCH_LUA_DIR=str(BENCH_DIR),
        BENCH_RATE_PER_CONN=str(rate / args.connections if rate > 0 else 0),
    )
    cmd = [
        "taskset", "-c", str(wrk_cpu), "wrk",
        "-t", str(args.connections), "-c", str(args.connections),
        "-d", f"{seconds}s", "--timeout", f"{args.timeout}s", "--latency",
        "-s", str(LUA_SCRIPT), url,
    ]  # fmt: skip
    cpu_before = cpu_seconds(server.pid)
    wrk_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    with log.open("a") as out:
        out.write(f"\n$ {shlex.join(cmd)}  # round {round_tag}\n")
        out.flush()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        deadline = started + seconds + 120
        while proc.poll() is None:
            if server.exit_code() is not None or time.monotonic() > deadline:
                # no point loading a dead server for the rest of the round: SIGINT makes wrk
                # stop early and still report (and run done())
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                break
            time.sleep(0.2)
    wall = time.monotonic() - started
    cpu = cpu_seconds(server.pid) - cpu_before
    wrk_after = resource.getrusage(resource.RUSAGE_CHILDREN)  # wrk is the only reaped child
    wrk_cpu_s = (wrk_after.ru_utime + wrk_after.ru_stime) - (
        wrk_before.ru_utime + wrk_before.ru_stime
    )
    if proc.returncode != 0 or not result_file.exists():
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise BenchError(f"wrk failed (exit {proc.returncode}); end of {log}:\n{tail}")
    data = json.loads(result_file.read_text())
    result_file.unlink()
    return Round(
        index=0,
        seconds=data["duration_us"] / 1e6,
        responses=int(data["responses"]),
        ok=int(data["ok"]),
        errors=int(data["errors"]),
        non200=int(data["non200"]),
        ends=int(data["ends"]),
        other=int(data["other"]),
        sessions=int(data["sessions"]),
        abandoned=int(data["abandoned"]),
        socket_errors={k: int(v) for k, v in data["socket_errors"].items()},
        wrk_latency_us=data["wrk_latency_us"],
        histogram=data["histogram_us"],
        error_samples=data["error_samples"],
        server_cpu_seconds=cpu,
        wrk_cpu_seconds=wrk_cpu_s,
        wall_seconds=wall,
    )


def percentiles_ms(histogram: list[list[int]], points: tuple[float, ...]) -> dict[str, float]:
    """Percentiles of the merged histogram (bucket upper bounds, so never optimistic)."""
    merged: dict[tuple[int, int], int] = {}
    for low, high, count in histogram:
        merged[(low, high)] = merged.get((low, high), 0) + count
    buckets = sorted(merged.items())
    total = sum(merged.values())
    out: dict[str, float] = {}
    for p in points:
        name = f"p{p:g}".replace(".", "")
        if total == 0:
            out[name] = float("nan")
            continue
        rank = max(1, math.ceil(p / 100 * total))
        seen = 0
        for (low, high), count in buckets:
            seen += count
            if seen >= rank:
                out[name] = (high if high >= 0 else low) / 1000
                break
    if buckets:
        (low, high), _ = buckets[-1]
        out["max"] = (high if high >= 0 else low) / 1000
    return out


# ------------------------------------------------------------------------------ one store


@dataclass
class StoreResult:
    """Everything measured for one store; what the table and the JSON file show."""

    store: str
    status: str = "ok"  # ok | failed | skipped
    reason: str = ""
    rounds: list[Round] = field(default_factory=list)
    warmup: Round | None = None
    paced: Round | None = None
    rss_before_mib: float = 0.0
    rss_after_mib: float = 0.0
    rss_peak_mib: float = 0.0
    rss_after_settle_mib: float | None = None
    smoke: list[tuple[int, str]] = field(default_factory=list)
    server_exit_code: int | None = None
    server_stderr_tail: str = ""
    redis: dict[str, Any] = field(default_factory=dict)
    workdir: str = ""

    # totals over the measured rounds
    def total(self, name: str) -> int:
        return sum(getattr(r, name) for r in self.rounds)

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.rounds)

    @property
    def sessions(self) -> int:
        return self.total("sessions")

    @property
    def responses(self) -> int:
        return self.total("responses")

    @property
    def errors(self) -> int:
        """Non-CON replies plus socket errors (connect/read/write/timeout), all phases
        after warm-up."""
        phases = [*self.rounds, *([self.paced] if self.paced else [])]
        return sum(r.errors + r.socket_error_count for r in phases)

    @property
    def paced_rps(self) -> float | None:
        return self.paced.responses / self.paced.seconds if self.paced else None

    @property
    def paced_latency_ms(self) -> dict[str, float]:
        return percentiles_ms(self.paced.histogram, (50, 90, 99, 99.9)) if self.paced else {}

    @property
    def rps(self) -> float:
        return self.responses / self.seconds if self.seconds else 0.0

    @property
    def sessions_per_s(self) -> float:
        return self.sessions / self.seconds if self.seconds else 0.0

    @property
    def latency_ms(self) -> dict[str, float]:
        hist = [b for r in self.rounds for b in r.histogram]
        return percentiles_ms(hist, (50, 90, 99, 99.9))

    def cpu_percent(self, name: str) -> float:
        """CPU seconds of server or wrk per wall second of the rounds, in % of one core."""
        wall = sum(r.wall_seconds for r in self.rounds)
        return 100 * sum(getattr(r, name) for r in self.rounds) / wall if wall else 0.0

    def flat_reference(self, max_sessions: int) -> Round | None:
        """The sample that RSS growth is measured from: at half the run at the earliest, and
        for the memory store not before it can hold USSD_MAX_SESSIONS records, since it
        legitimately grows until then. None when no round qualifies (run too short)."""
        start = self.sessions / 2
        if self.store == "memory":
            start = max(start, max_sessions)
        return next((r for r in self.rounds[:-1] if r.total_sessions >= start), None)

    def memory_flat(self, max_sessions: int) -> bool | None:
        """RSS growth from the reference sample to the end within max(2 MiB, 5 %);
        None when the run is too short to say."""
        ref = self.flat_reference(max_sessions)
        if ref is None:
            return None
        growth = self.rss_after_mib - ref.rss_mib
        return growth <= max(FLAT_TOLERANCE_MIB, FLAT_TOLERANCE_FRACTION * ref.rss_mib)

    def to_json(self, args: argparse.Namespace, extra: dict[str, Any]) -> dict[str, Any]:
        """The figures in machine-readable form, for bench/results/ussd-<store>.json."""
        socket_errors: dict[str, int] = {}
        for r in self.rounds:
            for k, v in r.socket_errors.items():
                socket_errors[k] = socket_errors.get(k, 0) + v
        return {
            "benchmark": "ussd",
            "store": self.store,
            "status": self.status,
            "reason": self.reason,
            "requests": self.responses,
            "sessions": self.sessions,
            "seconds": round(self.seconds, 3),
            "requests_per_s": round(self.rps, 1),
            "sessions_per_s": round(self.sessions_per_s, 1),
            "latency_ms": self.latency_ms,
            "paced": {
                "rate_requested": args.paced_rate,
                "requests_per_s": round(self.paced_rps or 0.0, 1),
                "latency_ms": self.paced_latency_ms,
                "round": self.paced.summary(),
            }
            if self.paced
            else None,
            "errors": {
                "total": self.errors,
                "non_con_replies": self.total("errors"),
                "non_200": self.total("non200"),
                "end_replies": self.total("ends"),
                "other_replies": self.total("other"),
                "socket": socket_errors,
                "samples": [s for r in self.rounds for s in r.error_samples][:20],
            },
            "abandoned_sessions": self.total("abandoned"),
            "server_cpu_percent": round(self.cpu_percent("server_cpu_seconds"), 1),
            "wrk_cpu_percent": round(self.cpu_percent("wrk_cpu_seconds"), 1),
            "rss_mib": {
                "before": round(self.rss_before_mib, 2),
                "after": round(self.rss_after_mib, 2),
                "peak": round(self.rss_peak_mib, 2),
                "after_settle": self.rss_after_settle_mib,
                "samples": [
                    {"sessions": r.total_sessions, "rss_mib": round(r.rss_mib, 2)}
                    for r in self.rounds
                ],
            },
            "memory_flat": self.memory_flat(args.max_sessions),
            "memory_flat_reference": (
                {"sessions": ref.total_sessions, "rss_mib": round(ref.rss_mib, 2)}
                if (ref := self.flat_reference(args.max_sessions))
                else None
            ),
            "targets": targets(self, args) if self.store == "memory" else None,
            "redis": self.redis or None,
            "warmup": self.warmup.summary() if self.warmup else None,
            "rounds": [r.summary() for r in self.rounds],
            "smoke": self.smoke,
            "server_exit_code": self.server_exit_code,
            "config": {
                "connections": args.connections,
                "sessions_requested": args.sessions,
                "duration_requested": args.duration,
                "ttl_seconds": args.ttl,
                "max_sessions": args.max_sessions,
                "retention_seconds": args.retention,
                "warmup_seconds": args.warmup,
                "paced_rate": args.paced_rate,
                "paced_seconds": args.paced_seconds,
                "timeout_seconds": args.timeout,
                "service_code": args.service_code,
                **extra,
            },
        }


def targets(result: StoreResult, args: argparse.Namespace) -> dict[str, bool | None]:
    """The in-memory store's targets, None where the run cannot tell."""
    paced_ok = None
    if result.paced is not None and result.paced_rps is not None and args.paced_rate >= TARGET_RPS:
        # judged only when the paced phase really ran at (nearly) the target rate
        at_target = result.paced_rps >= 0.97 * TARGET_RPS
        paced_ok = at_target and result.paced_latency_ms.get("p99", math.inf) < TARGET_P99_MS
    return {
        "requests_per_s>=5000": result.rps >= TARGET_RPS,
        "p99<10ms@5000req/s": paced_ok,
        "no_errors": result.errors == 0,
        "memory_flat": result.memory_flat(args.max_sessions),
    }


def round_seconds(want_sessions: float, rate: float) -> int:
    """wrk is duration-based: turn a session count into whole seconds at the observed rate."""
    if rate <= 0:
        return 5
    return int(min(MAX_ROUND_SECONDS, max(1, math.ceil(want_sessions / rate))))


def warmed_up(
    store: str,
    server: Server,
    workdir: Path,
    result: StoreResult,
    args: argparse.Namespace,
    wrk_cpu: int,
    run_tag: str,
) -> float:
    """Start `server`, check a hand-driven session gets CON replies, warm it up; the
    session rate the warm-up saw (what the first round is sized by)."""
    print(f"\n== store: {store}  (server: {shlex.join(server.cmd)}; logs in {workdir})")
    server.start()
    server.wait_ready(args.startup_timeout)
    result.smoke = smoke_session(server.base_url, run_tag, args.service_code)
    if not all(code == 200 and body.startswith("CON ") for code, body in result.smoke):
        shown = "\n".join(
            f"  text={t!r:10} -> HTTP {c}: {b[:300]!r}"
            for t, (c, b) in zip(STEPS, result.smoke, strict=True)
        )
        raise BenchError(f"a hand-driven session did not get CON replies:\n{shown}")
    rate = 0.0
    if args.warmup > 0:
        warm = run_wrk(
            server.base_url + "/api/ussd",
            args,
            wrk_cpu,
            max(1, round(args.warmup)),
            "w",
            run_tag,
            server,
            workdir / "wrk.log",
        )
        result.warmup = warm
        rate = warm.sessions / warm.seconds if warm.seconds else 0.0
        print(
            f"warm-up: {warm.seconds:.1f} s, {warm.responses / warm.seconds:,.0f} req/s, "
            f"{warm.errors + warm.socket_error_count} errors"
        )
    check_alive(server)
    result.rss_before_mib = rss_mib(server.pid)
    print(f"RSS after warm-up: {result.rss_before_mib:.1f} MiB")
    return rate


class Beside:
    """The bare Starlette ceiling (bench/ceiling.py) on the store's core, started before
    the store's rounds and driven for as long after each of them, so twinhub and its
    ceiling are measured over the same minutes: on a machine whose speed drifts, a ceiling
    measured after the store read the store's ratio anywhere from 0.57 to 1.19 in one
    hour (bench/results/2026-11-29.md)."""

    def __init__(
        self, args: argparse.Namespace, server_cpu: int, wrk_cpu: int, run_tag: str
    ) -> None:
        self.args, self.wrk_cpu, self.run_tag = args, wrk_cpu, run_tag
        self.result = StoreResult(store=CEILING)
        self.workdir = Path(tempfile.mkdtemp(prefix=f"twinhub-bench-{CEILING}-"))
        self.result.workdir = str(self.workdir)
        port = free_port()
        self.server = Server(
            server_command(args, port, server_cpu, CEILING), ceiling.env(), self.workdir, port
        )

    def start(self) -> None:
        warmed_up(
            CEILING, self.server, self.workdir, self.result, self.args, self.wrk_cpu, self.run_tag
        )

    def round(self, seconds: int) -> None:
        """One round of the ceiling, as long as the store's round just run."""
        index = len(self.result.rounds) + 1
        url = self.server.base_url + "/api/ussd"
        rnd = run_wrk(
            url,
            self.args,
            self.wrk_cpu,
            seconds,
            f"c{index}",
            self.run_tag,
            self.server,
            self.workdir / "wrk.log",
        )
        rnd.index = index
        check_alive(self.server)
        rnd.total_sessions = self.result.sessions + rnd.sessions
        rnd.rss_mib = rss_mib(self.server.pid)
        self.result.rounds.append(rnd)
        print(
            f"  ceiling round {index:3}: {rnd.responses / rnd.seconds:>9,.0f} req/s  server "
            f"{1000 * rnd.server_cpu_seconds / max(1, rnd.responses):.3f} ms CPU/req"
        )

    def stop(self, failed: str | None = None) -> StoreResult:
        """Stop the ceiling's server; its result (failed with `failed`, the store's or its
        own reason, when either did)."""
        result = self.result
        if result.rounds:
            result.rss_after_mib = rss_mib(self.server.pid)
            result.rss_peak_mib = max(hwm_mib(self.server.pid), result.rss_after_mib)
        if failed:
            result.status, result.reason = "failed", failed
        result.server_exit_code = self.server.stop()
        result.server_stderr_tail = self.server.stderr_tail()
        if result.status == "ok" and not self.args.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)
            result.workdir = ""
        return result


def bench_store(
    store: str,
    args: argparse.Namespace,
    server_cpu: int,
    wrk_cpu: int,
    run_tag: str,
    beside: Beside | None = None,
) -> StoreResult:
    """Start a fresh server for `store`, drive it in rounds, sample memory, tear down.
    `beside`: the bare ceiling, driven for as long right after each of the store's rounds
    (the machine's speed drifts within a minute: alternated, both see the same drift)."""
    result = StoreResult(store=store)
    redis_prefix = None
    if store == "redis":
        problem = redis_problem(args.redis_url)
        if problem:
            result.status = "skipped" if args.store == "both" else "failed"
            result.reason = problem
            return result
        redis_prefix = f"twinhub-bench-{run_tag}:"
        result.redis = {
            "url": args.redis_url,
            "prefix": redis_prefix,
            "dbsize_before": redis_dbsize(args.redis_url),
            "used_memory_before_mib": redis_used_memory_mib(args.redis_url),
        }

    workdir = Path(tempfile.mkdtemp(prefix=f"twinhub-bench-{store}-"))
    result.workdir = str(workdir)
    port = args.port or free_port()
    env = server_env(args, workdir, redis_prefix)
    server = Server(server_command(args, port, server_cpu, store), env, workdir, port)
    wrk_log = workdir / "wrk.log"
    url = server.base_url + "/api/ussd"
    ok = False
    try:
        rate = warmed_up(store, server, workdir, result, args, wrk_cpu, run_tag)

        every = args.sample_every or min(100_000, max(1000, args.sessions // 10))
        index = 0
        while True:
            done_sessions, done_seconds = result.sessions, result.seconds
            if args.duration is not None:
                left = args.duration - done_seconds
                if left <= 0.5:
                    break
                seconds = min(round_seconds(every, rate), max(1, round(left)))
            else:
                left = args.sessions - done_sessions
                if left <= 0:
                    break
                seconds = round_seconds(min(every, left), rate)
            index += 1
            rnd = run_wrk(url, args, wrk_cpu, seconds, str(index), run_tag, server, wrk_log)
            rnd.index = index
            check_alive(server)
            rnd.total_sessions = done_sessions + rnd.sessions
            rnd.rss_mib = rss_mib(server.pid)
            result.rounds.append(rnd)
            # size rounds by the best rate seen: a slow round then cannot make the next one
            # overshoot the sampling interval (a short round is harmless)
            rate = max(rate, rnd.sessions / rnd.seconds if rnd.seconds else 0.0)
            lat = percentiles_ms(rnd.histogram, (50, 99))
            print(
                f"round {index:3}: {rnd.total_sessions:>10,} sessions  "
                f"{rnd.responses / rnd.seconds:>9,.0f} req/s  p50 {lat['p50']:6.2f} ms  "
                f"p99 {lat['p99']:6.2f} ms  errors {rnd.errors + rnd.socket_error_count:>6}  "
                f"RSS {rnd.rss_mib:7.1f} MiB  CPU server "
                f"{100 * rnd.server_cpu_seconds / rnd.wall_seconds:3.0f} % "
                f"wrk {100 * rnd.wrk_cpu_seconds / rnd.wall_seconds:3.0f} %"
            )
            if rnd.sessions == 0:
                raise BenchError(f"round {index} completed no session; is the server stuck?")
            if beside is not None:
                beside.round(seconds)

        result.rss_after_mib = rss_mib(server.pid)
        result.rss_peak_mib = max(
            hwm_mib(server.pid), result.rss_after_mib, *(r.rss_mib for r in result.rounds)
        )
        if args.paced_rate > 0 and args.paced_seconds > 0:
            paced = run_wrk(
                url,
                args,
                wrk_cpu,
                args.paced_seconds,
                "p",
                run_tag,
                server,
                wrk_log,
                rate=args.paced_rate,
            )
            check_alive(server)
            result.paced = paced
            lat = percentiles_ms(paced.histogram, (50, 99))
            print(
                f"paced at {args.paced_rate:,.0f} req/s: achieved "
                f"{paced.responses / paced.seconds:,.0f} req/s  p50 {lat['p50']:.2f} ms  "
                f"p99 {lat['p99']:.2f} ms  errors {paced.errors + paced.socket_error_count}"
            )
        if args.settle > 0:
            time.sleep(args.settle)
            check_alive(server)
            result.rss_after_settle_mib = round(rss_mib(server.pid), 2)
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
        if redis_prefix is not None:
            cleanup_redis(args.redis_url, redis_prefix, result)
        if ok and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
            result.workdir = ""
    if result.status == "failed":
        print(f"\n!! store {store} FAILED: {result.reason}", file=sys.stderr)
        print(f"!! server exit code: {result.server_exit_code}", file=sys.stderr)
        print(f"!! server stderr ({server.stderr_path}), last lines:", file=sys.stderr)
        print(result.server_stderr_tail, file=sys.stderr)
        samples = [s for r in result.rounds for s in r.error_samples][:10]
        if samples:
            print("!! sample error replies:", *samples, sep="\n   ", file=sys.stderr)
        print(f"!! logs kept in {workdir}", file=sys.stderr)
    return result


def cleanup_redis(url: str, prefix: str, result: StoreResult) -> None:
    """Count, then delete, the run's keys; a failure here is reported, not raised, so it
    cannot hide the figures."""
    try:
        keys = redis_prefix_keys(url, prefix)
        result.redis["keys_under_prefix_at_end"] = len(keys)
        result.redis["used_memory_at_end_mib"] = redis_used_memory_mib(url)
        redis_delete(url, keys)
        result.redis["dbsize_after_cleanup"] = redis_dbsize(url)
    except (BenchError, subprocess.SubprocessError) as exc:
        result.redis["cleanup_error"] = str(exc)
        print(
            f"!! could not delete the Redis keys under {prefix}: {exc}\n"
            f"!! delete them with: redis-cli -u {url} --scan --pattern '{prefix}*' "
            f"| xargs -r redis-cli -u {url} del",
            file=sys.stderr,
        )


def check_alive(server: Server) -> None:
    """A crash under load is a finding: stop at once and report it."""
    code = server.exit_code()
    if code is not None:
        raise BenchError(f"server process exited with code {code} under load")


# ------------------------------------------------------------------------------ report


def fmt(value: float | None, spec: str) -> str:
    """Format a figure, '-' where there is none, so a missing phase does not crash the table."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, spec)


def verdict(ok: bool | None) -> str:
    """PASS/FAIL, or n/a where the run cannot tell (too short, phase skipped)."""
    return {True: "PASS", False: "FAIL", None: "n/a"}[ok]


def print_table(
    results: list[StoreResult], args: argparse.Namespace, cpus: tuple[int, int]
) -> None:
    """One column per store, one row per figure, targets beside the rows they apply to."""
    shown = [r for r in results if r.status != "skipped" and r.rounds]
    print(
        f"\nUSSD benchmark: server on CPU {cpus[0]}, wrk on CPU {cpus[1]}, "
        f"{args.connections} connections, session TTL {args.ttl} s, "
        f"USSD_MAX_SESSIONS {args.max_sessions}"
    )
    for r in results:
        if r.status != "ok":
            print(
                f"  {r.store}: {r.status.upper()} - {r.reason.splitlines()[0] if r.reason else ''}"
            )
    if not shown:
        return
    rows: list[tuple[str, list[str], str]] = [
        ("requests/s", [fmt(r.rps, ",.0f") for r in shown], f">= {TARGET_RPS:,.0f} (memory)"),
        ("sessions/s", [fmt(r.sessions_per_s, ",.0f") for r in shown], ""),
        ("full load: p50 (ms)", [fmt(r.latency_ms.get("p50"), ".2f") for r in shown], ""),
        ("full load: p90 (ms)", [fmt(r.latency_ms.get("p90"), ".2f") for r in shown], ""),
        (
            "full load: p99 (ms)",
            [fmt(r.latency_ms.get("p99"), ".2f") for r in shown],
            "queueing: p50 ~ connections / req/s",
        ),
        ("full load: p99.9 (ms)", [fmt(r.latency_ms.get("p999"), ".2f") for r in shown], ""),
        ("full load: max (ms)", [fmt(r.latency_ms.get("max"), ".1f") for r in shown], ""),
        (
            f"paced {args.paced_rate:g}/s: got req/s",
            [fmt(r.paced_rps, ",.0f") for r in shown],
            "",
        ),
        (
            f"paced {args.paced_rate:g}/s: p50 (ms)",
            [fmt(r.paced_latency_ms.get("p50"), ".2f") for r in shown],
            "",
        ),
        (
            f"paced {args.paced_rate:g}/s: p99 (ms)",
            [fmt(r.paced_latency_ms.get("p99"), ".2f") for r in shown],
            f"< {TARGET_P99_MS:g} (memory)",
        ),
        ("errors", [f"{r.errors:,}" for r in shown], "0"),
        (
            "server CPU (% of 1 core)",
            [fmt(r.cpu_percent("server_cpu_seconds"), ".0f") for r in shown],
            "~100 = CPU-bound",
        ),
        (
            "wrk CPU (% of 1 core)",
            [fmt(r.cpu_percent("wrk_cpu_seconds"), ".0f") for r in shown],
            "must stay < 100",
        ),
        ("RSS before (MiB)", [fmt(r.rss_before_mib, ".1f") for r in shown], "after warm-up"),
        ("RSS after (MiB)", [fmt(r.rss_after_mib, ".1f") for r in shown], ""),
        ("RSS peak (MiB)", [fmt(r.rss_peak_mib, ".1f") for r in shown], "VmHWM"),
    ]
    if args.settle > 0:
        rows.append(
            (
                f"RSS after {args.settle:g} s idle",
                [fmt(r.rss_after_settle_mib, ".1f") for r in shown],
                "",
            )
        )
    rows += [
        (
            "memory flat",
            [verdict(r.memory_flat(args.max_sessions)) for r in shown],
            "growth <= max(2 MiB, 5 %) once full",
        ),
        ("sessions (total)", [f"{r.sessions:,}" for r in shown], ""),
        ("requests (total)", [f"{r.responses:,}" for r in shown], ""),
        ("measured seconds", [fmt(r.seconds, ".1f") for r in shown], ""),
    ]
    width = max(len(name) for name, _, _ in rows) + 2
    col = 14
    print("".ljust(width) + "".join(r.store.rjust(col) for r in shown) + "   target")
    for name, values, note in rows:
        print(name.ljust(width) + "".join(v.rjust(col) for v in values) + f"   {note}".rstrip())
    for r in shown:
        if r.store == "memory":
            verdicts = ", ".join(f"{k} {verdict(v)}" for k, v in targets(r, args).items())
            print(f"targets (memory): {verdicts}")
        if r.redis:
            print(
                f"redis: {r.redis.get('keys_under_prefix_at_end')} keys under "
                f"{r.redis.get('prefix')} at the end (deleted), used_memory "
                f"{fmt(r.redis.get('used_memory_before_mib'), '.1f')} -> "
                f"{fmt(r.redis.get('used_memory_at_end_mib'), '.1f')} MiB, dbsize "
                f"{r.redis.get('dbsize_before')} before / {r.redis.get('dbsize_after_cleanup')} "
                "after cleanup"
            )
        errs = [s for rnd in r.rounds for s in rnd.error_samples][:5]
        if errs:
            print(f"{r.store}: sample error replies:", *errs, sep="\n  ")


def cpu_ms_per_request(result: StoreResult) -> float | None:
    """Server CPU per reply over the full-load rounds: robust to queueing and to other
    processes on the core (they delay requests but add nothing to the server's CPU time)."""
    responses = result.responses
    cpu = sum(r.server_cpu_seconds for r in result.rounds)
    return 1000 * cpu / responses if responses else None


def versus_ceiling(twinhub: StoreResult, bare: StoreResult) -> dict[str, Any]:
    """twinhub's memory store against the bare Starlette app, same core, same run."""
    ours, floor = cpu_ms_per_request(twinhub), cpu_ms_per_request(bare)
    ratio = floor / ours if ours and floor else None
    return {
        "ceiling": "bare Starlette app (bench/ceiling.py), same uvicorn settings and core",
        "twinhub_cpu_ms_per_request": round(ours or 0.0, 4),
        "ceiling_cpu_ms_per_request": round(floor or 0.0, 4),
        "ratio_cpu": round(ratio, 3) if ratio else None,
        "twinhub_requests_per_s": round(twinhub.rps, 1),
        "ceiling_requests_per_s": round(bare.rps, 1),
        "ratio_throughput": round(twinhub.rps / bare.rps, 3) if bare.rps else None,
        "target_ratio_cpu": CEILING_TARGET,
        "target_met": ratio is not None and ratio >= CEILING_TARGET,
    }


def print_ceiling(figures: dict[str, Any]) -> None:
    print(
        f"\nUSSD vs bare Starlette ceiling (same core, same run): twinhub "
        f"{figures['twinhub_cpu_ms_per_request']:.3f} ms CPU/req, ceiling "
        f"{figures['ceiling_cpu_ms_per_request']:.3f} ms -> ratio {figures['ratio_cpu']} "
        f"(target >= {CEILING_TARGET}: {'PASS' if figures['target_met'] else 'MISS'}); "
        f"throughput {figures['twinhub_requests_per_s']:,.0f} vs "
        f"{figures['ceiling_requests_per_s']:,.0f} req/s = {figures['ratio_throughput']}"
    )


def run(args: argparse.Namespace) -> int:
    """Entry point of `python -m bench ussd`; non-zero on missing tools, failures, errors."""
    problem = check_tools()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    if args.connections < 1 or args.sessions < 1:
        print("--connections and --sessions must be positive", file=sys.stderr)
        return 2
    if args.quick:
        args.sessions, args.store, args.warmup, args.paced_seconds = 20_000, "memory", 2, 5
    cpus = pick_cpus(args.server_cpu, args.wrk_cpu)
    run_tag = secrets.token_hex(4)
    stores = ["memory", "redis"] if args.store == "both" else [args.store]
    extra = run_metadata(cpus, run_tag, load_key="wrk_cpu")
    results: list[StoreResult] = []
    for store in stores:
        beside = None
        if store == "memory" and args.ceiling and not args.server_cmd:
            beside = Beside(args, cpus[0], cpus[1], run_tag)
            try:
                beside.start()
            except BenchError as exc:
                results.append(beside.stop(str(exc)))
                print(f"\n!! the ceiling FAILED: {exc}", file=sys.stderr)
                beside = None
        result = bench_store(store, args, cpus[0], cpus[1], run_tag, beside)
        results.append(result)
        if result.status == "skipped":
            print(f"\n!! store {store} SKIPPED: {result.reason}", file=sys.stderr)
            continue
        args.results_dir.mkdir(parents=True, exist_ok=True)
        written = [(result, result.to_json(args, extra))]
        if beside is not None:
            bare = beside.stop(None if result.status == "ok" else f"the {store} store failed")
            results.append(bare)
            written.append((bare, bare.to_json(args, extra)))
            if result.status == bare.status == "ok":
                written[1][1]["versus"] = extra["ceiling"] = versus_ceiling(result, bare)
                written[0] = (result, result.to_json(args, extra))
        for each, data in written:
            out = args.results_dir / f"ussd-{each.store}.json"
            out.write_text(json.dumps(data, indent=2) + "\n")
            print(f"wrote {out}")
    print_table([r for r in results if r.store != CEILING], args, cpus)
    if "ceiling" in extra:
        print_ceiling(extra["ceiling"])

    code = 0
    if any(r.status == "failed" for r in results):
        code = 1
    if args.strict and any(
        r.store == "memory" and r.status == "ok" and False in targets(r, args).values()
        for r in results
    ):
        code = 1
    return code
