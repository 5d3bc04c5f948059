"""`twinhub serve` as processes (issues 15.1 and 14.3): the USSD gateway keeps answering
quickly while hostile API traffic runs against the same served platform, and several
workers share ports, sessions (walked across workers) and rate limits (held in total)."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.conftest import REDIS_URL, new_phone, new_session_id
from tests.support.served import serving

P99_CEILING_SECONDS = 0.100  # a telecom gives a phone session a few seconds in all


def ussd(client: httpx.Client, session: str, phone: str, text: str) -> httpx.Response:
    body = {"sessionId": session, "serviceCode": "*384*1#", "phoneNumber": phone, "text": text}
    return client.post("/api/ussd", json=body)


def test_ussd_p99_stays_under_100ms_while_hostile_api_traffic_runs(tmp_path: Path) -> None:
    key = secrets.token_urlsafe(32)
    with serving(
        tmp_path / "data",
        TWINHUB_BOOTSTRAP_API_KEY=key,
        USSD_RATE_LIMIT="1000000/minute",
        REGISTRY_RATE_LIMIT="1000000/minute",
    ) as urls:
        hostile = subprocess.Popen(
            [sys.executable, "-m", "tests.support.hostile_load", urls["registry"], key, "8", "4"],
            stdout=subprocess.PIPE,
            text=True,
        )
        latencies = []
        steps = ["", "1", "0", "2", "0", "1", "1"]  # welcome, know more, back, account, ...
        with httpx.Client(base_url=urls["ussd"], timeout=10) as client:
            time.sleep(1.0)  # the attack is under way
            while hostile.poll() is None and len(latencies) < 2000:
                session, phone = new_session_id(), new_phone()
                text = ""
                for step in steps:
                    text = step if not text else f"{text}*{step}"
                    started = time.perf_counter()
                    response = ussd(client, session, phone, text if step else "")
                    latencies.append(time.perf_counter() - started)
                    assert response.status_code == 200 and response.text.startswith("CON")
                time.sleep(0.01)  # a paced stream of phones, not a flood
        out, _ = hostile.communicate(timeout=60)
        counts = json.loads(out)
    assert len(latencies) >= 200, len(latencies)
    assert sum(counts.values()) >= 50, counts  # the attack really ran...
    assert counts.get("413", 0) > 0 and counts.get("201", 0) > 0, counts
    assert not any(status.startswith("5") for status in counts), counts  # ...and hurt nothing
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    print(f"USSD p99 under hostile load: {p99 * 1000:.1f} ms over {len(latencies)} requests")
    assert p99 < P99_CEILING_SECONDS, f"USSD p99 {p99 * 1000:.1f} ms"


def test_workers_share_a_session_and_the_rate_limit(tmp_path: Path, redis_prefix: str) -> None:
    prefix = f"{redis_prefix}workers-{secrets.token_hex(3)}:"
    with serving(
        tmp_path / "data",
        "--workers",
        "2",
        REDIS_URL=REDIS_URL,
        REDIS_KEY_PREFIX=prefix,
        USSD_RATE_LIMIT="12/minute",
    ) as urls:

        def fresh() -> httpx.Client:
            """A new connection per request: the kernel spreads them over the workers."""
            return httpx.Client(base_url=urls["ussd"], timeout=10, headers={"Connection": "close"})

        answered_by = set()
        for _ in range(30):
            with fresh() as client:
                answered_by.add(client.get("/").json()["process"])
        assert len(answered_by) == 2, answered_by  # both workers take connections

        session, phone = new_session_id(), new_phone()
        walk = [
            ("", "CON Welcome"),
            ("1", "CON Know More"),
            ("1*0", "CON Welcome"),
            ("1*0*2", "CON Account Menu"),
            ("1*0*2*2", "CON Create Account"),
            ("1*0*2*2*Amina Otieno", "CON Choose a 5-digit PIN"),
        ]
        for text, expected in walk:  # each step on a new connection, so on either worker
            with fresh() as client:
                reply = ussd(client, session, phone, text)
            assert reply.status_code == 200 and reply.text.startswith(expected), (text, reply.text)

        statuses = []
        for _ in range(12):
            with fresh() as client:
                statuses.append(ussd(client, new_session_id(), new_phone(), "").status_code)
        # 12 per minute in total: the walk used 6, so 6 more pass and the rest are refused,
        # whichever worker each landed on.
        assert statuses.count(200) == 6 and statuses.count(429) == 6, statuses
