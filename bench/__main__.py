"""Dispatch ``python -m bench <benchmark> [options]`` to one benchmark module.

Each benchmark module exposes ``add_arguments(parser)`` and ``run(args) -> int``, so adding
one (registry, gateway, ...) is one entry in ``BENCHMARKS`` and this file stays small.
"""

import argparse
import importlib
import sys

# subcommand -> (module, one-line help)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "ussd": ("bench.ussd", "USSD gateway: whole sessions through wrk, in-memory and Redis store"),
    "registry": (
        "bench.registry",
        "registry API on SQLite: creates/s while growing to 1k/10k/100k, reads through wrk",
    ),
    "claims": (
        "bench.claims",
        "claims: submissions, evaluations (credential + mint) and reads per second, "
        "with 1k and 100k claims stored (--claims N, --database sqlite|postgresql)",
    ),
    "telemetry": (
        "bench.telemetry",
        "telemetry: HTTP readings/s, MQTT messages/s, history p99 among 10k stoves, "
        "a month of project aggregates, memory under flood (--database sqlite|postgresql)",
    ),
    "gateway": (
        "bench.gateway",
        "chain REST gateway: GET /ixo/entity/{id} via the gateway vs direct gRPC, 100k entities",
    ),
}


def main(argv: list[str] | None = None) -> int:
    """Parse the subcommand and hand over, so each benchmark owns its own options."""
    parser = argparse.ArgumentParser(
        prog="python -m bench", description="twinhub benchmarks (see bench/README.md)."
    )
    sub = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    runners = {}
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
    args = parser.parse_args(argv)
    return runners[args.benchmark](args)


if __name__ == "__main__":
    sys.exit(main())
