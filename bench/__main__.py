"""Dispatch ``python -m bench <benchmark> [options]`` to one benchmark module.

Each benchmark module exposes ``add_arguments(parser)`` and ``run(args) -> int``, so adding
one (registry, gateway, ...) is one entry in ``BENCHMARKS`` and this file stays small.
"""

import argparse
import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"

# subcommand -> (module, one-line help)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "ussd": ("bench.ussd", "USSD gateway: whole sessions through wrk, in-memory and Redis store"),
    "registry": (
        "bench.registry",
        "registry API on SQLite: creates/s while growing to 1k/10k/100k, reads through wrk",
    ),
    "claims": (
        "bench.claims",
        "claims: submissions, evaluations (credential + held stove-days) and reads per second, "
        "with 1k and 100k claims stored (--claims N, --database sqlite|postgresql)",
    ),
    "telemetry": (
        "bench.telemetry",
        "telemetry: HTTP readings/s, MQTT messages/s, history p99 among 10k stoves, "
        "a month of project aggregates, memory under flood (--database sqlite|postgresql)",
    ),
    "oracle": (
        "bench.oracle",
        "oracle: methodology evaluations/s, a monitoring period of 10,000 stoves x 30 days "
        "(rollups read from SQLite, learned plausibility, methodology, report)",
    ),
    "gateway": (
        "bench.gateway",
        "chain REST gateway: GET /ixo/entity/{id} via the gateway vs direct gRPC, 100k entities",
    ),
    "node": (
        "bench.node",
        "chain node read path: Entity and EntityList pages (h2load) vs a bare grpc.aio "
        "ceiling on the same core, REST vs node (wrk), paced p50",
    ),
    "scale": (
        "bench.scale",
        "scale: 100,000 stoves with a week of hourly readings into PostgreSQL through HTTP "
        "ingestion; readings/s, storage per stove-year, rollup sizes, a monitoring period",
    ),
    "verify": (
        "bench.verify",
        "batch stove verification: one governance proposal verifying 100k stoves in chunks",
    ),
    "slowloris": (
        "bench.slowloris",
        "slow clients: USSD p99 while slow-header connections attack every HTTP port",
    ),
    "console": (
        "bench.console",
        "console pages' server time over a 30,000-stove programme vs a bare Starlette page",
    ),
}


# `all --quick`: the benchmarks of the short set and their arguments for a short run; the
# whole set stays under five minutes on a 2-core machine (the chain gateway has no --quick of
# its own, hence its sizes). The others (telemetry, oracle, node) run only in `all` without
# --quick, or alone.
QUICK_ARGS: dict[str, list[str]] = {
    "ussd": ["--quick"],
    "registry": ["--quick"],
    "claims": ["--quick"],
    "gateway": ["--entities", "2000", "--duration", "5", "--warmup", "1", "--paced-seconds", "3"],
    "verify": ["--stoves", "5000"],
}


def run_all(quick: bool, runners: dict[str, Any], parsers: dict[str, Any]) -> int:
    """Every benchmark in turn (each prints its figure, ceiling and ratio and saves its
    JSON); a summary of the statuses and times goes to bench/results/all.json."""
    names = [name for name in BENCHMARKS if name in QUICK_ARGS] if quick else list(BENCHMARKS)
    skipped = [name for name in BENCHMARKS if name not in names]
    summary: dict[str, Any] = {"quick": quick, "benchmarks": {}, "not_run": skipped}
    started = time.monotonic()
    code = 0
    if skipped:
        print(f"all --quick runs {', '.join(names)}; not {', '.join(skipped)} (run those alone)")
    for name in names:
        args = parsers[name].parse_args(QUICK_ARGS[name] if quick else [])
        print(f"\n######## {name} ({' '.join(QUICK_ARGS[name]) if quick else 'defaults'})")
        began = time.monotonic()
        result = runners[name](args)
        seconds = round(time.monotonic() - began, 1)
        summary["benchmarks"][name] = {"exit_status": result, "seconds": seconds}
        code = code or result
    summary["seconds"] = round(time.monotonic() - started, 1)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "all.json").write_text(json.dumps(summary, indent=2) + "\n")
    print("\n######## all:", summary["seconds"], "s")
    for name, figures in summary["benchmarks"].items():
        print(f"  {name:10} exit {figures['exit_status']}  {figures['seconds']:7.1f} s")
    return code


def main(argv: list[str] | None = None) -> int:
    """Parse the subcommand and hand over, so each benchmark owns its own options."""
    parser = argparse.ArgumentParser(
        prog="python -m bench", description="twinhub benchmarks (see bench/README.md)."
    )
    sub = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    everything = sub.add_parser(
        "all",
        help="every benchmark in turn; --quick for the short set (under five minutes)",
        description="Run every benchmark in turn and summarise in bench/results/all.json.",
    )
    everything.add_argument("--quick", action="store_true", help="short runs of each")
    runners: dict[str, Any] = {}
    parsers: dict[str, Any] = {}
    for name, (module_name, help_text) in BENCHMARKS.items():
        module = importlib.import_module(module_name)
        sub_parser = sub.add_parser(
            name,
            help=help_text,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(sub_parser)
        runners[name] = module.run
        parsers[name] = sub_parser
    args = parser.parse_args(argv)
    if args.benchmark == "all":
        return run_all(args.quick, runners, parsers)
    return runners[args.benchmark](args)


if __name__ == "__main__":
    sys.exit(main())
