"""Slow clients: USSD latency while slow-header connections attack every HTTP port.

Starts `twinhub serve` (USSD, registry, node and REST gateway, default guard settings unless
given), then opens `--slow` connections from 127.0.0.2 to each of the registry, gateway and
USSD ports that send their headers one byte at a time, and meanwhile drives USSD welcome
screens from 127.0.0.1 (another client address: the per-address cap is the attacker's).
Reports USSD p50/p99 without and with the attack, and how the slow connections ended:
refused at once (beyond HTTP_MAX_CONNECTIONS_PER_CLIENT), closed at the header deadline
(HTTP_HEADER_TIMEOUT_SECONDS), or still held at the end (the defect: none may be).
Target (issue 31.6): USSD p99 < 150 ms during the attack. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_P99_MS = 150.0
ATTACKER = "127.0.0.2"  # Linux answers the whole 127/8 on loopback
REQUEST = b"POST /api/ussd HTTP/1.1\r\nHost: twinhub\r\nX-Slow: " + b"a" * 2000 + b"\r\n\r\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--slow", type=int, default=300, help="slow connections per port")
    parser.add_argument("--seconds", type=float, default=20.0, help="attack length")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between bytes")
    parser.add_argument("--header-timeout", type=float, default=None, help="override")
    parser.add_argument("--cap", type=int, default=None, help="override the per-client cap")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(url: str, seconds: float = 120) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer")


class _Attack:
    """Slow-header connections to one port; how each ended, in seconds after opening."""

    def __init__(self, port: int, count: int, interval: float) -> None:
        self.port, self.count, self.interval = port, count, interval
        self.ended: list[tuple[float, bytes]] = []
        self.held = 0
        self.failed_to_connect = 0

    def run(self, seconds: float) -> None:
        selector = selectors.DefaultSelector()
        sent: dict[socket.socket, int] = {}
        received: dict[socket.socket, bytes] = {}
        opened: dict[socket.socket, float] = {}
        for _ in range(self.count):
            sock = socket.socket()
            try:
                sock.bind((ATTACKER, 0))
                sock.settimeout(5)
                sock.connect(("127.0.0.1", self.port))
            except OSError:
                self.failed_to_connect += 1
                sock.close()
                continue
            sock.setblocking(False)
            sent[sock], received[sock], opened[sock] = 0, b"", time.monotonic()
            selector.register(sock, selectors.EVENT_READ)

        def close(sock: socket.socket) -> None:
            selector.unregister(sock)
            sock.close()
            self.ended.append((time.monotonic() - opened.pop(sock), received.pop(sock)))
            sent.pop(sock)

        end = time.monotonic() + seconds
        next_send = time.monotonic()
        while sent and time.monotonic() < end:
            for key, _ in selector.select(timeout=0.05):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    data = sock.recv(4096)
                except (ConnectionResetError, BlockingIOError):
                    data = b""
                if data:
                    received[sock] += data
                else:
                    close(sock)
            if time.monotonic() >= next_send:
                next_send += self.interval
                for sock in list(sent):
                    if sent[sock] >= len(REQUEST) - 1:
                        continue
                    try:
                        sock.send(REQUEST[sent[sock] : sent[sock] + 1])
                        sent[sock] += 1
                    except (BrokenPipeError, ConnectionResetError):
                        close(sock)
        self.held = len(sent)
        for sock in list(sent):
            sock.close()

    def summary(self, deadline: float) -> dict[str, Any]:
        refused = [t for t, answer in self.ended if answer.startswith(b"HTTP/1.1 503")]
        timed_out = [t for t, answer in self.ended if answer.startswith(b"HTTP/1.1 408")]
        return {
            "connections": self.count,
            "not_connected": self.failed_to_connect,
            "refused_503": len(refused),
            "closed_408": len(timed_out),
            "closed_otherwise": len(self.ended) - len(refused) - len(timed_out),
            "held_at_end": self.held,
            "longest_held_s": round(max((t for t, _ in self.ended), default=0.0), 2),
            "deadline_s": deadline,
        }


def _ussd_latencies(port: int, until: threading.Event | float) -> list[float]:
    """USSD welcome screens, one after the other on a kept-alive connection, from
    127.0.0.1 (a new session each), until the event is set or the time has passed."""
    import http.client

    latencies: list[float] = []
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    n = 0

    def done() -> bool:
        if isinstance(until, threading.Event):
            return until.is_set()
        return time.monotonic() >= until

    while not done():
        n += 1
        body = json.dumps(
            {
                "sessionId": f"bench-{os.getpid()}-{n}",
                "serviceCode": "*384*1#",
                "phoneNumber": f"+2547{n % 100_000_000:08d}",
                "text": "",
            }
        )
        started = time.perf_counter()
        connection.request("POST", "/api/ussd", body, {"Content-Type": "application/json"})
        answer = connection.getresponse()
        text = answer.read()
        latencies.append(time.perf_counter() - started)
        if answer.status != 200 or not text.startswith(b"CON"):
            raise RuntimeError(f"USSD answered {answer.status}: {text[:200]!r}")
        time.sleep(0.01)  # a paced stream of phones, not a flood
    connection.close()
    return latencies


def _percentiles(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    if not ordered:
        return {"requests": 0}

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000, 2)

    return {"requests": len(ordered), "p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": at(1.0)}


def run(args: argparse.Namespace) -> int:
    ports = {name: _free_port() for name in ("PORT", "REGISTRY_PORT", "NODE_PORT", "GATEWAY_PORT")}
    env = {
        **os.environ,
        **{name: str(port) for name, port in ports.items()},
        "LOG_LEVEL": "warning",
        "USSD_RATE_LIMIT": "1000000/minute",
    }
    env.pop("REDIS_URL", None)
    if args.header_timeout is not None:
        env["HTTP_HEADER_TIMEOUT_SECONDS"] = str(args.header_timeout)
    if args.cap is not None:
        env["HTTP_MAX_CONNECTIONS_PER_CLIENT"] = str(args.cap)
    if args.header_timeout is None or args.cap is None:
        from twinhub.settings import Settings

        server_settings = Settings().server
    deadline = args.header_timeout or server_settings.http_header_timeout_seconds
    cap = args.cap if args.cap is not None else server_settings.http_max_connections_per_client
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="twinhub-slowloris-") as data:
        env["DATA_DIR"] = data
        server = subprocess.Popen(
            [sys.executable, "-m", "twinhub", "serve"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait(f"http://127.0.0.1:{ports['PORT']}/health")
            _wait(f"http://127.0.0.1:{ports['REGISTRY_PORT']}/health")
            _wait(f"http://127.0.0.1:{ports['GATEWAY_PORT']}/health")
            quiet = _ussd_latencies(ports["PORT"], time.monotonic() + 5)
            attacks = {
                name: _Attack(ports[setting], args.slow, args.interval)
                for name, setting in (
                    ("registry", "REGISTRY_PORT"),
                    ("gateway", "GATEWAY_PORT"),
                    ("ussd", "PORT"),
                )
            }
            threads = [
                threading.Thread(target=a.run, args=(args.seconds,), daemon=True)
                for a in attacks.values()
            ]
            stop = threading.Event()
            for thread in threads:
                thread.start()
            measuring: list[list[float]] = []
            measurer = threading.Thread(
                target=lambda: measuring.append(_ussd_latencies(ports["PORT"], stop)),
                daemon=True,
            )
            measurer.start()
            for thread in threads:
                thread.join()
            stop.set()
            measurer.join()
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
    during = _percentiles(measuring[0] if measuring else [])
    result = {
        "benchmark": "slowloris",
        "load_average_at_start": round(load, 2),
        "settings": {"header_timeout_s": deadline, "per_client_cap": cap},
        "slow_connections_per_port": args.slow,
        "attack_seconds": args.seconds,
        "ussd_quiet": _percentiles(quiet),
        "ussd_during_attack": during,
        "ports": {name: attack.summary(deadline) for name, attack in attacks.items()},
        "target_p99_ms": TARGET_P99_MS,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "slowloris.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    held = sum(a.held for a in attacks.values())
    p99 = float(during.get("p99_ms", 0.0))
    met = held == 0 and 0 < p99 < TARGET_P99_MS
    print(
        f"USSD p99 {p99:.1f} ms during {len(attacks)} x {args.slow} slow connections "
        f"(quiet: {result['ussd_quiet'].get('p99_ms')} ms); held at the end: {held}; "
        f"load average at start {load:.2f}: {'met' if met else 'MISSED'} (< {TARGET_P99_MS} ms)"
    )
    return 0 if met else 1
