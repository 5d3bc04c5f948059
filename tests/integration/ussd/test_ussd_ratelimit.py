"""Rate limiting: USSD_RATE_LIMIT per client IP, 429 with Retry-After, proxy awareness."""

from __future__ import annotations

from tests.conftest import Gateway, GatewayFactory, new_phone, new_session_id


async def _burst(gateway: Gateway, count: int, forwarded_for: str | None = None) -> list[int]:
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
    statuses = []
    for _ in range(count):
        response = await gateway.client.post(
            "/api/ussd",
            json={
                "sessionId": new_session_id(),
                "serviceCode": "*384#",
                "phoneNumber": new_phone(),
                "text": "",
            },
            headers=headers,
        )
        statuses.append(response.status_code)
    return statuses


async def test_default_limit_is_100_per_minute(make_gateway: GatewayFactory) -> None:
    gateway = await make_gateway()
    assert gateway.settings.ussd.rate_limit == "100/minute"
    statuses = await _burst(gateway, 101)
    assert statuses[:100] == [200] * 100
    assert statuses[100] == 429


async def test_over_the_limit_gets_429_with_retry_after(make_gateway: GatewayFactory) -> None:
    gateway = await make_gateway(ussd_rate_limit="3/minute")
    assert await _burst(gateway, 3) == [200, 200, 200]
    response = await gateway.client.post("/api/ussd", json={})
    assert response.status_code == 429
    assert 1 <= int(response.headers["retry-after"]) <= 60
    assert response.text.startswith("END ")
    listed = await gateway.client.get("/api/ussd/sessions")
    assert listed.status_code == 429
    assert listed.json()["error"]["code"] == "rate_limited"


async def test_health_probes_are_not_rate_limited(make_gateway: GatewayFactory) -> None:
    gateway = await make_gateway(ussd_rate_limit="2/minute")
    await _burst(gateway, 3)
    for path in ("/health", "/", "/metrics"):
        assert (await gateway.client.get(path)).status_code == 200, path


async def test_forwarded_for_is_ignored_unless_proxy_is_trusted(
    make_gateway: GatewayFactory,
) -> None:
    gateway = await make_gateway(ussd_rate_limit="2/minute")
    statuses = await _burst(gateway, 3, forwarded_for="198.51.100.1")
    statuses += await _burst(gateway, 1, forwarded_for="198.51.100.2")
    assert statuses == [200, 200, 429, 429]  # one socket peer, one budget


async def test_behind_a_trusted_proxy_each_real_client_has_its_own_budget(
    make_gateway: GatewayFactory,
) -> None:
    gateway = await make_gateway(ussd_rate_limit="2/minute", trust_proxy_enabled=True)
    assert await _burst(gateway, 3, forwarded_for="198.51.100.1") == [200, 200, 429]
    assert await _burst(gateway, 2, forwarded_for="198.51.100.2") == [200, 200]
    # The proxy appends the address it saw; what the client wrote to the left is ignored.
    spoofed = await _burst(gateway, 1, forwarded_for="198.51.100.9, 198.51.100.1")
    assert spoofed == [429]


async def test_bare_number_means_per_minute(make_gateway: GatewayFactory) -> None:
    gateway = await make_gateway(ussd_rate_limit="2")
    assert gateway.settings.ussd.rate_limit == "2/minute"
    assert await _burst(gateway, 3) == [200, 200, 429]
