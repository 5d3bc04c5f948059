"""The workflow's own limits, through the real ASGI stack: evidence attachments have a body
limit of their own (REGISTRY_MAX_ATTACHMENT_BYTES, above the API's 1 MiB, on that route
alone), and the public retirement-certificate routes, which need no key, are limited per
client address (REGISTRY_CERTIFICATE_RATE_LIMIT)."""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import AsyncIterator

from tests.conftest import RegistryFactory

MIB = 1024 * 1024


def sha256(content: bytes) -> str:
    return "sha256:" + hashlib.sha256(content).hexdigest()


async def test_attachments_have_their_own_body_limit(make_registry: RegistryFactory) -> None:
    registry = await make_registry(registry_max_attachment_bytes=3 * MIB)
    client = registry.client  # an admin may store evidence
    two = os.urandom(2 * MIB)  # over REGISTRY_MAX_BODY_BYTES (1 MiB), within the setting
    stored = await client.post(f"/v1/attachments?digest={sha256(two)}", content=two)
    assert stored.status_code == 201, stored.text
    assert stored.json()["size"] == 2 * MIB
    fetched = await client.get(f"/v1/attachments/{sha256(two)}")
    assert fetched.status_code == 200 and fetched.content == two

    over = os.urandom(3 * MIB + 1)
    refused = await client.post(f"/v1/attachments?digest={sha256(over)}", content=over)
    assert refused.status_code == 413, refused.text
    body = refused.json()["error"]
    assert body["code"] == "too_large" and "REGISTRY_MAX_ATTACHMENT_BYTES" in body["message"]
    assert str(3 * MIB) in body["message"]

    # Streamed with no Content-Length: counted as it arrives, refused the same way.
    async def chunks() -> AsyncIterator[bytes]:
        for offset in range(0, len(over), MIB):
            yield over[offset : offset + MIB]

    streamed = await client.post(f"/v1/attachments?digest={sha256(over)}", content=chunks())
    assert streamed.status_code == 413, streamed.text
    assert "REGISTRY_MAX_ATTACHMENT_BYTES" in streamed.text
    missing = await client.get(f"/v1/attachments/{sha256(over)}")
    assert missing.status_code == 404  # nothing of it was stored

    # Every other route keeps the API's limit, and says which setting it is.
    elsewhere = await client.post(
        "/v1/domains", content=b"{" + b" " * (2 * MIB) + b"}", headers={"content-type": "json"}
    )
    assert elsewhere.status_code == 413, elsewhere.text
    assert "REGISTRY_MAX_BODY_BYTES" in elsewhere.json()["error"]["message"]


async def test_public_certificate_routes_are_limited_per_address(
    make_registry: RegistryFactory,
) -> None:
    registry = await make_registry(
        registry_certificate_rate_limit="3/minute", trust_proxy_enabled=True
    )

    # Addresses of this test alone: with Redis the counters outlive the app.
    here, there = (f"10.{secrets.randbelow(250)}.{secrets.randbelow(250)}.{n}" for n in (7, 8))

    def at(address: str) -> dict[str, str]:
        return {"x-forwarded-for": address}

    async with registry.as_key(None) as anyone:  # public: no API key
        for _ in range(2):
            unknown = await anyone.get("/v1/retirements/99999/certificate", headers=at(here))
            assert unknown.status_code == 404, unknown.text
        checked = await anyone.post(
            "/v1/retirement-certificates/verification",
            json={"certificate": {"type": ["VerifiableCredential"]}},
            headers=at(here),
        )
        assert checked.status_code != 429, checked.text
        # The fourth request of the minute from that address, on either route: 429.
        for route in ("get", "post"):
            if route == "get":
                limited = await anyone.get("/v1/retirements/99999/certificate", headers=at(here))
            else:
                limited = await anyone.post(
                    "/v1/retirement-certificates/verification",
                    json={"certificate": {}},
                    headers=at(here),
                )
            assert limited.status_code == 429, limited.text
            assert limited.json()["error"]["code"] == "rate_limited"
            assert int(limited.headers["retry-after"]) >= 1
        # Another address has its own allowance; keyed routes are not counted here.
        other = await anyone.get("/v1/retirements/99999/certificate", headers=at(there))
        assert other.status_code == 404, other.text
    keyed = await registry.client.get("/v1/credits/CARBON", headers=at(here))
    assert keyed.status_code in (200, 404), keyed.text
