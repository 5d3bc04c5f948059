"""The benchmarks' same-run ceiling (bench/ceiling.py) answers what the USSD and read
benchmarks check for (a `CON` reply, HTTP 200 on any GET), and the ratio is ceiling over
twinhub CPU per request, so a cheaper twinhub scores higher."""

from __future__ import annotations

import httpx
from bench import ceiling
from bench.registry import ReadRun, versus_ceiling


async def test_the_ceiling_answers_like_the_servers_it_stands_for() -> None:
    transport = httpx.ASGITransport(app=ceiling.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://ceiling.test") as client:
        ussd = await client.post("/api/ussd", data={"sessionId": "s", "text": ""})
        assert ussd.status_code == 200 and ussd.text.startswith("CON ")
        read = await client.get("/v1/domains/did:ixo:entity/device-123")
        assert read.status_code == 200 and read.json()["did"].startswith("did:ixo:")
        assert (await client.get("/v1/claims/abc")).status_code == 200
        assert (await client.get("/health")).json() == {"status": "ok"}


def run(cpu_seconds: float, responses: int) -> ReadRun:
    return ReadRun(
        endpoint="get",
        phase="full",
        rate_requested=0,
        seconds=10,
        responses=responses,
        ok=responses,
        errors=0,
        body_bytes=0,
        socket_errors={},
        wrk_latency_us={},
        histogram=[],
        error_samples=[],
        server_cpu_seconds=cpu_seconds,
        wrk_cpu_seconds=1,
        foreign_cpu_seconds=0,
        wall_seconds=10,
    )


def test_the_ratio_is_ceiling_cpu_over_twinhub_cpu() -> None:
    figures = versus_ceiling("GET by DID", run(10, 10_000), run(10, 40_000), 0.5)
    assert figures["twinhub_cpu_ms_per_request"] == 1.0
    assert figures["ceiling_cpu_ms_per_request"] == 0.25
    assert figures["ratio_cpu"] == 0.25 and figures["target_met"] is False
    assert figures["ratio_throughput"] == 0.25
    assert versus_ceiling("x", run(10, 30_000), run(10, 40_000), 0.5)["target_met"] is True
