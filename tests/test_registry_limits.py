"""Request limits of the registry (issue 15.1): GraphQL body size, tokens, depth and
aliases, each refused with a clear error before any resolver runs."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.conftest import RegistryFactory


async def test_graphql_limits_refuse_hostile_documents_clearly(
    make_registry: RegistryFactory,
) -> None:
    registry = await make_registry(
        graphql_max_body_bytes=4096, graphql_max_depth=1, graphql_max_tokens=200
    )
    fine = await registry.client.post("/graphql", json={"query": "{ __typename }"})
    assert fine.status_code == 200 and fine.json()["data"] == {"__typename": "Query"}

    too_big = await registry.client.post("/graphql", json={"query": "{ __typename }" + " " * 5000})
    assert too_big.status_code == 413, too_big.text
    assert too_big.json()["error"]["code"] == "too_large"
    assert "4096 bytes" in too_big.json()["error"]["message"]

    many_tokens = "{ " + " ".join(f"a{i}: __typename" for i in range(100)) + " }"
    response = await registry.client.post("/graphql", json={"query": many_tokens})
    assert response.status_code == 200
    assert "more than 200 tokens" in response.json()["errors"][0]["message"]

    deep = "{ entities { pageInfo { hasNextPage } nodes { id } } }"
    response = await registry.client.post("/graphql", json={"query": deep})
    assert "exceeds maximum operation depth of 1" in response.json()["errors"][0]["message"], (
        response.text
    )

    aliases = "{ " + " ".join(f"a{i}: __typename" for i in range(21)) + " }"
    roomy = await make_registry(graphql_max_tokens=5000)
    response = await roomy.client.post("/graphql", json={"query": aliases})
    assert "21 aliases found. Allowed: 20" in response.json()["errors"][0]["message"], response.text

    # The registry's own body limit is untouched by the GraphQL one.
    body = {
        "type": "Organisation",
        "protocol": "did:ixo:protocol/organisation",
        "metadata": {"name": "Big Co-op", "notes": "x" * 8000},
    }
    created = await registry.client.post("/v1/domains", json=body)
    assert created.status_code == 201, created.text


async def test_failed_api_key_attempts_are_limited_per_address(
    make_registry: RegistryFactory,
) -> None:
    registry = await make_registry(api_key_failure_limit="3/minute")
    async with registry.as_key("not-a-key-" + "x" * 30) as guesser:
        statuses = [(await guesser.get("/v1/protocols")).status_code for _ in range(5)]
        assert statuses == [401, 401, 401, 429, 429], statuses
        refused = await guesser.get("/v1/protocols")
        assert int(refused.headers["retry-after"]) > 0
        assert refused.json()["error"]["code"] == "rate_limited"
    assert (await registry.client.get("/v1/protocols")).status_code == 200  # a real key


async def test_a_client_gone_mid_body_leaves_no_traceback(
    make_registry: RegistryFactory, caplog: pytest.LogCaptureFixture
) -> None:
    registry = await make_registry()
    key = registry.settings.twinhub_bootstrap_api_key
    assert key is not None
    messages = iter(
        [
            {"type": "http.request", "body": b'{"type": "Organ', "more_body": True},
            {"type": "http.disconnect"},
        ]
    )
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return next(messages, {"type": "http.disconnect"})

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    for declared in (True, False):  # with a Content-Length, and streamed (chunked)
        messages = iter(
            [
                {"type": "http.request", "body": b'{"type": "Organ', "more_body": True},
                {"type": "http.disconnect"},
            ]
        )
        headers = [
            (b"authorization", f"Bearer {key.get_secret_value()}".encode()),
            (b"content-type", b"application/json"),
        ]
        if declared:
            headers.append((b"content-length", b"400"))
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/v1/domains",
            "raw_path": b"/v1/domains",
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 40000),
            "server": ("registry.test", 80),
            "state": {},
        }
        with caplog.at_level(logging.WARNING):
            await registry.asgi(scope, receive, send)
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert all(m.get("status", 400) < 500 for m in sent if m["type"] == "http.response.start")


async def test_405_names_every_method_the_path_serves(make_registry: RegistryFactory) -> None:
    """Issue 15.6: `Allow` lists what the OpenAPI document lists for the path."""
    registry = await make_registry()
    response = await registry.client.put("/v1/domains")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, POST"
    assert response.json()["error"]["code"] == "method_not_allowed"
