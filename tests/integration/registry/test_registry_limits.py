"""Request limits of the registry (issue 15.1): GraphQL body size, tokens, depth and
aliases, each refused with a clear error before any resolver runs."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from tests.conftest import Registry, RegistryFactory
from twinhub.registry.errors import _routes
from twinhub.registry.routes import DOMAIN_SUBRESOURCES
from twinhub.services.paging import encode_cursor


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
    assert "4096 bytes (GRAPHQL_MAX_BODY_BYTES)" in too_big.json()["error"]["message"]

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
    key = registry.settings.security.bootstrap_api_key
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


def _sample(template: str) -> str:
    """A concrete path for an OpenAPI path template (ids that need not exist)."""
    values = {"did": "did:ixo:entity/fuzz-1", "collection_id": "1", "delivery_id": "1"}
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), "x1"), template)


async def test_every_path_refuses_undeclared_methods_as_documented(
    registry: Registry,
) -> None:
    """Issue 15.6: a method the document does not list for a path answers 405 with `Allow`
    naming exactly the document's methods, whatever DID-shaped path precedes it. A DID may
    hold `/`, so `PATCH /v1/domains/x/graph` used to reach the domain's PATCH (422)."""
    document = (await registry.client.get("/openapi.json")).json()
    checked = 0
    for template, item in document["paths"].items():
        if not template.startswith("/v1/"):
            continue
        documented = sorted(m.upper() for m in item if m in {"get", "post", "patch", "delete"})
        path = _sample(template)
        options = await registry.client.options(path)
        assert options.status_code == 405, (template, options.text)
        assert options.headers["allow"] == ", ".join(documented), template
        for method in ("PATCH", "DELETE", "PUT"):
            if method not in documented:
                refused = await registry.client.request(method, path, json={})
                assert refused.status_code == 405, (template, method, refused.text)
                assert refused.json()["error"]["code"] == "method_not_allowed"
                checked += 1
    assert checked > 60


def test_sub_resources_of_a_domain_are_all_known(registry: Registry) -> None:
    """Every `/v1/domains/{did}/...` route is in DOMAIN_SUBRESOURCES, so the domain's own
    routes never shadow it (a new sub-resource must be added there)."""
    pattern = re.compile(rf"^(?:{'|'.join(DOMAIN_SUBRESOURCES)})$")
    suffixes = {
        re.sub(r"\{\w+\}", "x1", route.path.split("{did:path}/", 1)[1])
        for route in _routes(registry.app.router.routes)
        if getattr(route, "path", "").startswith("/v1/domains/{did:path}/")
    }
    assert len(suffixes) >= 10
    assert not [s for s in suffixes if not pattern.match(s)]


async def test_parameter_schemas_say_what_the_server_accepts(registry: Registry) -> None:
    """Cursors and If-Match are documented by pattern (issue 15.6): every cursor the API
    hands out matches it, and a pattern-conforming cursor is read, not refused."""
    document = (await registry.client.get("/openapi.json")).json()
    parameters = {
        (p["name"], p["in"]): p["schema"]
        for item in document["paths"].values()
        for operation in item.values()
        for p in operation.get("parameters", [])
    }
    cursor = re.compile(parameters[("cursor", "query")]["pattern"])
    if_match = re.compile(parameters[("if-match", "header")]["pattern"])
    assert parameters[("cursor", "query")]["type"] == "string"  # not "string or null"
    for seq in (0, 1, 9, 10, 99, 12345, 10**17 + 3, 10**18 - 1):
        assert cursor.match(encode_cursor(seq)), seq
    for value in ("3", '"3"', 'W/"12"', "*"):
        assert if_match.match(value), value
    for value in ("null", "", "W/x", "-1"):
        assert not if_match.match(value), value
    page = await registry.client.get("/v1/protocols", params={"limit": 1})
    next_cursor = page.json()["nextCursor"]
    assert next_cursor and cursor.match(next_cursor)
    assert (
        await registry.client.get("/v1/protocols", params={"cursor": "OTk5"})
    ).status_code == 200
    foreign = await registry.client.get("/v1/protocols", params={"cursor": "%%%"})
    assert foreign.status_code == 422
    assert foreign.json()["error"]["details"][0]["field"] == "cursor"


async def test_graphql_page_needs_no_key_and_a_body_must_be_utf8(registry: Registry) -> None:
    document = (await registry.client.get("/openapi.json")).json()
    assert {} in document["paths"]["/graphql"]["get"]["security"]  # the page: optional
    assert document["paths"]["/graphql"]["post"]["requestBody"]["required"] is True
    async with registry.as_key(None) as anonymous:
        assert (await anonymous.get("/graphql")).status_code == 200
        query = await anonymous.get("/graphql", params={"query": "{ __typename }"})
        assert query.status_code == 401
    not_utf8 = await registry.client.post(
        "/graphql", content=b'"\x9e\xff"', headers={"content-type": "application/json"}
    )
    assert not_utf8.status_code == 400, not_utf8.text
    assert not_utf8.json()["error"]["code"] == "bad_request"
