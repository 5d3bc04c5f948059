"""The same-run ceiling: a bare Starlette app under the same uvicorn settings as `twinhub
serve`, answering fixed replies on the paths the benchmarks drive.

Run as `python -m bench.ceiling --host H --port P`. It does no work of its own (no
validation, session, database, logging or metrics), so the server CPU per request it needs
is the floor of any Starlette/uvicorn server on this machine: the USSD and registry
benchmarks measure it pinned to the same core, with the same wrk script, right after the
real server, and report their own CPU per request as a ratio of it (ceiling CPU / twinhub
CPU: 1.0 would mean twinhub's own work costs nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

USSD_REPLY = "CON Welcome to twinhub\n1. Know more\n2. Account\n*. Exit"
DOMAIN = {
    "did": "did:ixo:entity/ceiling",
    "type": "Device",
    "class": "did:ixo:protocol/clean-cooking",
    "controller": ["did:ixo:org/ceiling"],
    "metadata": {"name": "ceiling"},
    "version": 1,
}


async def ussd(request: Request) -> Response:
    await request.body()  # read like the real endpoint does, so the socket work is the same
    return PlainTextResponse(USSD_REPLY)


async def domain(_: Request) -> Response:
    """A fixed record for any read path: the JSON a registry read renders, without the read."""
    return JSONResponse(DOMAIN)


async def health(_: Request) -> Response:
    return JSONResponse({"status": "ok"})


app = Starlette(
    routes=[
        Route("/api/ussd", ussd, methods=["POST"]),
        Route("/health", health),
        Route("/{path:path}", domain),  # any GET the read benchmarks send (DIDs, claim ids)
    ]
)


def command(host: str, port: int) -> list[str]:
    """The argv that serves the ceiling (the caller pins it with taskset)."""
    return [sys.executable, "-m", "bench.ceiling", "--host", host, "--port", str(port)]


def env() -> dict[str, str]:
    """The environment of the ceiling process: the project root on the import path."""
    root = str(Path(__file__).resolve().parent.parent)
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    try:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:  # pragma: no cover - uvicorn[standard] brings it
        pass
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_config=None,
        access_log=False,
        proxy_headers=False,
        server_header=False,
        lifespan="off",
    )
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
