"""Chain node read path: GetEntity and EntityList pages against a bare grpc.aio ceiling.

Seeds a fresh SQLite registry with N entities (default 100,000, as `bench gateway` does),
starts `twinhub serve gateway` (its own node in the same process) pinned to one core, and
drives the node with h2load (nghttp2's HTTP/2 load tool, C, sending gRPC frames) from
another core:

- `Entity` (one DID), `EntityList` page 1 and page 1,000 by `pagination.key` (keyset),
  and page 1,000 by `pagination.offset` for contrast;
- the ceiling: a bare grpc.aio server answering the same Entity reply as fixed bytes,
  started on the same core in the same run after the node is stopped;
- REST: wrk GETting `/ixo/entity/{did}` on the gateway, against the direct node figure;
- paced: the Python gRPC load of `bench gateway` at a moderate rate over random DIDs, for
  p50/p99 (h2load reports no percentiles).

h2load sends one request body per run, so each h2load figure reads one DID or one page
again and again; the paced run reads random DIDs. Prints each figure, the ceiling and the
ratio; saves bench/results/node.json. Goals (issue #14): Entity and EntityList ≥ 60 % of
the ceiling, p50 < 1 ms paced, REST ≥ 80 % of the node, page 1,000 as cheap as page 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.gateway import run_grpc, seed, server_command, server_env, summary
from bench.ussd import HOST, BenchError, Server, free_port, git_revision, pick_cpus

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_RESULTS_DIR = BENCH_DIR / "results"
ENTITY = "/ixo.entity.v1beta1.Query/Entity"
ENTITY_LIST = "/ixo.entity.v1beta1.Query/EntityList"
PAGE_SIZE = 50
TARGET_CEILING_RATIO = 0.60
TARGET_REST_RATIO = 0.80
TARGET_P50_MS = 1.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of `python -m bench node`."""
    parser.add_argument("--entities", type=int, default=100_000, help="entities to seed")
    parser.add_argument("--duration", type=int, default=8, metavar="SECONDS", help="per run")
    parser.add_argument("--warmup", type=int, default=1, metavar="SECONDS", help="per run")
    parser.add_argument("--streams", type=int, default=16, help="h2load concurrent streams")
    parser.add_argument("--connections", type=int, default=8, help="wrk connections")
    parser.add_argument("--paced-rate", type=float, default=100.0, metavar="REQ_PER_S")
    parser.add_argument("--paced-seconds", type=int, default=8, metavar="SECONDS")
    parser.add_argument("--server-cpu", type=int, default=None)
    parser.add_argument("--load-cpu", type=int, default=None)
    parser.add_argument("--startup-timeout", type=float, default=120.0)
    parser.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS_DIR)
    parser.add_argument("--tag", default="", help="a label stored with the results")
    parser.add_argument(
        "--repeat", type=int, default=2, help="runs per figure; the best counts (noise only lowers)"
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        help="keep the seeded registry in this folder and reuse it when it is there already",
    )
    # Internal: the ceiling server runs as `python -m bench node --bare PORT ENTITY LIST`.
    parser.add_argument("--bare", nargs=3, default=None, help=argparse.SUPPRESS)


# ------------------------------------------------------------------------- the ceiling


def bare_main(port: int, entity_file: Path, list_file: Path) -> int:
    """A grpc.aio server that answers Entity and EntityList with fixed bytes (the node's
    own replies): what one core can serve with no work behind the call."""
    import grpc
    import uvloop

    entity_reply, list_reply = entity_file.read_bytes(), list_file.read_bytes()

    async def entity(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return entity_reply

    async def entity_list(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return list_reply

    handlers = {  # bytes in, bytes out: no (de)serialising
        "Entity": grpc.unary_unary_rpc_method_handler(entity),
        "EntityList": grpc.unary_unary_rpc_method_handler(entity_list),
    }

    async def serve() -> None:
        server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("ixo.entity.v1beta1.Query", handlers),)
        )
        server.add_insecure_port(f"{HOST}:{port}")
        await server.start()
        await server.wait_for_termination()

    uvloop.run(serve())
    return 0


def wait_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex((HOST, port)) == 0:
                return
        time.sleep(0.05)
    raise BenchError(f"nothing listens on port {port}")


# ------------------------------------------------------------------------------ loads


def grpc_frame(message: bytes) -> bytes:
    """A gRPC length-prefixed message (uncompressed)."""
    return struct.pack(">?I", False, len(message)) + message


def h2load(
    port: int,
    path: str,
    body: Path,
    seconds: int,
    warmup: int,
    streams: int,
    cpu: int,
    repeat: int = 1,
) -> dict[str, Any]:
    """The best of `repeat` h2load runs (requests/s, mean latency in ms)."""
    runs = [h2load_once(port, path, body, seconds, warmup, streams, cpu) for _ in range(repeat)]
    return max(runs, key=lambda run: run["requests_per_s"])


def h2load_once(
    port: int, path: str, body: Path, seconds: int, warmup: int, streams: int, cpu: int
) -> dict[str, Any]:
    """requests/s and mean latency (ms) of one h2load run; refuses a run with failures."""
    cmd = ["taskset", "-c", str(cpu), "h2load", "-c", "1", "-t", "1", "-m", str(streams)]
    cmd += ["-D", str(seconds), f"--warm-up-time={warmup}", "-d", str(body)]
    cmd += ["-H", "content-type: application/grpc", "-H", "te: trailers"]
    cmd.append(f"http://{HOST}:{port}{path}")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + warmup + 60)
    text = out.stdout
    rate = re.search(r"finished in [\d.]+\w*, ([\d.]+) req/s", text)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", text)
    mean = re.search(r"time for request:\s+\S+\s+\S+\s+(\S+)", text)
    if not rate or not done or int(done.group(2)) == 0 or done.group(1) != done.group(2):
        raise BenchError(f"h2load failed on {path}:\n{text[-1500:]}\n{out.stderr[-500:]}")
    return {
        "requests_per_s": float(rate.group(1)),
        "mean_ms": _ms(mean.group(1)) if mean else None,
        "requests": int(done.group(2)),
    }


def _ms(text: str) -> float:
    """A duration as h2load or wrk print it ("812us", "1.20ms", "2.5s") in ms."""
    number = float(re.sub(r"[a-z]+$", "", text))
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}
    return number * scale.get(re.sub(r"^[\d.]+", "", text), 1.0)


def wrk(port: int, path: str, seconds: int, connections: int, cpu: int) -> dict[str, Any]:
    cmd = ["taskset", "-c", str(cpu), "wrk", "-t1", f"-c{connections}", f"-d{seconds}s"]
    cmd += ["--latency", f"http://{HOST}:{port}{path}"]
    text = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60).stdout
    rate = re.search(r"Requests/sec:\s+([\d.]+)", text)
    if not rate or "Non-2xx" in text:
        raise BenchError(f"wrk failed on {path}:\n{text[-1500:]}")
    p50 = re.search(r"50%\s+(\S+)", text)
    return {"requests_per_s": float(rate.group(1)), "p50_ms": _ms(p50.group(1)) if p50 else None}


# ------------------------------------------------------------------------------ the run


def requests(dids: list[str], workdir: Path) -> dict[str, Path]:
    """The request bodies (gRPC frames) of each measured call."""
    from twinhub.chain.protos.cosmos.base.query.v1beta1.pagination_pb2 import PageRequest
    from twinhub.chain.protos.ixo.entity.v1beta1 import query_pb2 as q

    far = 1000 if len(dids) >= 1000 * PAGE_SIZE else max(1, len(dids) // PAGE_SIZE - 1)
    bodies = {
        "entity": q.QueryEntityRequest(id=dids[len(dids) // 2]),
        "list_page_1": q.QueryEntityListRequest(pagination=PageRequest(limit=PAGE_SIZE)),
        # Seeded domains are numbered from 1 in creation order, so the key of page N is
        # the sequence number of the last row of page N - 1.
        f"list_page_{far}_key": q.QueryEntityListRequest(
            pagination=PageRequest(limit=PAGE_SIZE, key=str((far - 1) * PAGE_SIZE).encode())
        ),
        f"list_page_{far}_offset": q.QueryEntityListRequest(
            pagination=PageRequest(limit=PAGE_SIZE, offset=(far - 1) * PAGE_SIZE)
        ),
    }
    files = {}
    for name, message in bodies.items():
        files[name] = workdir / f"{name}.bin"
        files[name].write_bytes(grpc_frame(message.SerializeToString()))
    return files


def node_replies(port: int, did: str) -> tuple[bytes, bytes]:
    """The node's real Entity and first-page EntityList replies, for the ceiling server."""
    import grpc

    from twinhub.chain.protos.cosmos.base.query.v1beta1.pagination_pb2 import PageRequest
    from twinhub.chain.protos.ixo.entity.v1beta1 import query_pb2 as q
    from twinhub.chain.protos.ixo.entity.v1beta1 import query_pb2_grpc

    with grpc.insecure_channel(f"{HOST}:{port}") as channel:
        stub = query_pb2_grpc.QueryStub(channel)
        one = stub.Entity(q.QueryEntityRequest(id=did), timeout=10)
        page = q.QueryEntityListRequest(pagination=PageRequest(limit=PAGE_SIZE))
        listed = stub.EntityList(page, timeout=10)
    return one.SerializeToString(), listed.SerializeToString()


def run(args: argparse.Namespace) -> int:
    """Seed, measure the node, the gateway and the ceiling; print and save."""
    if args.bare is not None:
        return bare_main(int(args.bare[0]), Path(args.bare[1]), Path(args.bare[2]))
    for tool, package in (("h2load", "nghttp2-client"), ("wrk", "wrk"), ("taskset", "util-linux")):
        if shutil.which(tool) is None:
            print(f"{tool} is missing: apt-get install -y {package}", file=sys.stderr)
            return 2
    server_cpu, load_cpu = pick_cpus(args.server_cpu, args.load_cpu)
    workdir = Path(tempfile.mkdtemp(prefix="twinhub-bench-node-"))
    data = args.data.resolve() if args.data else workdir / "data"
    seeded = data / "seeded-dids.txt"
    if seeded.exists():
        dids = seeded.read_text().split()
        print(f"reusing {len(dids):,} entities in {data}", flush=True)
    else:
        print(f"seeding {args.entities:,} entities ...", flush=True)
        dids = asyncio.run(seed(data, args.entities))
        seeded.write_text("\n".join(dids) + "\n")
    bodies = requests(dids, workdir)
    dids_file = workdir / "dids.txt"
    dids_file.write_text("\n".join(dids[:20_000]) + "\n")
    port, node_port = free_port(), free_port()
    server = Server(server_command(port, node_port, server_cpu), server_env(data), workdir, port)
    h2 = {
        "seconds": args.duration,
        "warmup": args.warmup,
        "streams": args.streams,
        "repeat": args.repeat,
    }
    node: dict[str, Any] = {}
    try:
        server.start()
        server.wait_ready(args.startup_timeout)
        replies = node_replies(node_port, dids[len(dids) // 2])
        for name, body in bodies.items():
            path = ENTITY if name == "entity" else ENTITY_LIST
            node[name] = h2load(node_port, path, body, cpu=load_cpu, **h2)
            print(f"  node {name}: {node[name]['requests_per_s']:,.0f} req/s", flush=True)
        rest_path = f"/ixo/entity/{dids[len(dids) // 2]}"
        rest = max(
            (
                wrk(port, rest_path, args.duration, args.connections, load_cpu)
                for _ in range(args.repeat)
            ),
            key=lambda run: run["requests_per_s"],
        )
        print(f"  REST entity: {rest['requests_per_s']:,.0f} req/s", flush=True)
        paced = None
        if args.paced_rate > 0:
            common = (server, server_cpu, node_port, dids_file, workdir, load_cpu)
            paced = summary(
                run_grpc(
                    *common,
                    "paced",
                    args.paced_seconds,
                    concurrency=4,
                    rate=args.paced_rate,
                    timeout=5,
                )
            )
    finally:
        server.stop()
    reply_files = [workdir / "entity-reply.bin", workdir / "list-reply.bin"]
    for file, reply in zip(reply_files, replies, strict=True):
        file.write_bytes(reply)
    bare_port = free_port()
    bare_cmd = ["taskset", "-c", str(server_cpu), sys.executable, "-m", "bench", "node"]
    bare = subprocess.Popen(
        [*bare_cmd, "--bare", str(bare_port), *map(str, reply_files)], cwd=BENCH_DIR.parent
    )
    try:
        wait_port(bare_port)
        ceilings = {
            "entity": h2load(bare_port, ENTITY, bodies["entity"], cpu=load_cpu, **h2),
            "list": h2load(bare_port, ENTITY_LIST, bodies["list_page_1"], cpu=load_cpu, **h2),
        }
    finally:
        bare.terminate()
        bare.wait(10)
    print(
        f"\nceiling (bare grpc.aio, same core, fixed replies): Entity "
        f"{ceilings['entity']['requests_per_s']:,.0f} req/s, EntityList page "
        f"{ceilings['list']['requests_per_s']:,.0f} req/s"
    )
    print(f"{'call':<24}{'req/s':>10}{'ceiling':>10}{'ratio':>8}{'goal':>8}")
    shares = {}
    for name, figures in node.items():
        top = ceilings["entity" if name == "entity" else "list"]["requests_per_s"]
        shares[name] = round(figures["requests_per_s"] / top, 3)
        goal = "" if "offset" in name else f"{TARGET_CEILING_RATIO:.0%}"
        print(
            f"{name:<24}{figures['requests_per_s']:>10,.0f}{top:>10,.0f}"
            f"{shares[name]:>8.0%}{goal:>8}"
        )
    rest_ratio = rest["requests_per_s"] / node["entity"]["requests_per_s"]
    print(
        f"REST /ixo/entity/{{id}}: {rest['requests_per_s']:,.0f} req/s = {rest_ratio:.0%} "
        f"of the direct node (goal {TARGET_REST_RATIO:.0%})"
    )
    if paced:
        print(
            f"paced {args.paced_rate:g} req/s, random DIDs: p50 {paced['p50_ms']} ms, "
            f"p99 {paced['p99_ms']} ms (goal p50 < {TARGET_P50_MS} ms)"
        )
    result = {
        "benchmark": "node",
        "tag": args.tag,
        "entities": len(dids),
        "repeat": args.repeat,
        "load_average_at_end": os.getloadavg(),  # other processes on this shared machine
        "page_size": PAGE_SIZE,
        "server_cpu": server_cpu,
        "load_cpu": load_cpu,
        "revision": git_revision(),
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "ceiling": ceilings,
        "node": {k: v | {"of_ceiling": shares[k]} for k, v in node.items()},
        "rest_entity": rest | {"of_node": round(rest_ratio, 3)},
        "paced": paced,
    }
    args.results_dir.mkdir(parents=True, exist_ok=True)
    name = f"node{'-' + args.tag if args.tag else ''}.json"
    (args.results_dir / name).write_text(json.dumps(result, indent=2) + "\n")
    print(f"saved {args.results_dir / name}")
    shutil.rmtree(workdir, ignore_errors=True)
    return 0
