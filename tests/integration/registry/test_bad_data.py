"""Bad data is never an outage (issue 31 §1). A reading dated 0001-01-01, a NUL in a
query or path parameter, a cursor past its column's 32 or 64 bits, a time PostgreSQL or
Python cannot hold: each is refused as that request's own 4xx, on PostgreSQL and SQLite,
and the database is never marked down for it (before: "database unreachable", and every
caller answered 503 for about 1.5 s)."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.conftest import BOOTSTRAP_KEY, Registry, RegistryFactory
from tests.support.telemetry_world import Farm, build_farm

NUL = "a\x00b"
TIMES = ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59-13:00", "1969-12-31T23:59:59Z"]
INTEGERS = [str(2**31), str(2**63), str(2**64), str(-(2**63) - 1)]


def cursor(number: int) -> str:
    return base64.urlsafe_b64encode(str(number).encode()).decode().rstrip("=")


CURSORS = [cursor(2**31), cursor(2**40), cursor(2**63)]
# Event streams answer a valid request with a stream that never ends (their parameters
# are the list's, walked there).
STREAMS = {"/v1/events/stream", "/v1/domains/{did}/events"}


@pytest.fixture
async def farm(make_registry: RegistryFactory) -> AsyncIterator[Farm]:
    # No past limit on readings' clocks: a reading dated 0001-01-01 is then no longer
    # quarantined by the clock rule, and reached PostgreSQL's partitions.
    registry = await make_registry(telemetry_past_skew_days=0)
    made = await build_farm(registry)
    await made.stove()
    yield made


def client_of(registry: Registry) -> httpx.AsyncClient:
    """The admin's client, answering an unhandled exception as the server would (500)."""
    transport = httpx.ASGITransport(app=registry.asgi, raise_app_exceptions=False)
    return httpx.AsyncClient(
        transport=transport,
        base_url="http://registry.test",
        headers={"Authorization": f"Bearer {BOOTSTRAP_KEY}"},
    )


def kinds(schema: dict[str, Any]) -> set[str]:
    found = {schema.get("type", "")} | {s.get("type", "") for s in schema.get("anyOf", [])}
    return {kind for kind in found if kind}


def hostile_requests(spec: dict[str, Any], did: str) -> Iterator[tuple[str, dict[str, str]]]:
    """Every GET route of the OpenAPI document, with each of its query and path
    parameters in turn given each hostile value of its type; the others a real twin."""
    for path, item in spec["paths"].items():
        operation = item.get("get")
        if operation is None or path == "/graphql" or path in STREAMS:
            continue
        parameters = [p for p in operation.get("parameters", []) if p["in"] in ("query", "path")]
        for parameter in parameters:
            schema = parameter.get("schema", {})
            if "integer" in kinds(schema):
                values = INTEGERS
            elif schema.get("format") == "date-time" or parameter["name"] in ("from", "to"):
                values = [*TIMES, NUL]
            elif parameter["name"] in ("cursor", "after"):
                values = [*CURSORS, NUL]
            elif "string" in kinds(schema):
                values = [NUL]
            else:
                continue
            for value in values:
                url = path
                for other in parameters:
                    if other["in"] == "path":
                        given = value.replace("\x00", "%00") if other is parameter else did
                        url = url.replace("{" + other["name"] + "}", given)
                query = {parameter["name"]: value} if parameter["in"] == "query" else {}
                yield url, query


async def test_every_parameter_refuses_bad_values_for_that_request_only(farm: Farm) -> None:
    registry = farm.registry
    database = registry.platform.database
    async with client_of(registry) as client:
        spec = (await client.get("/openapi.json")).json()
        asked = 0
        for url, query in hostile_requests(spec, farm.stoves[0]):
            response = await client.get(url, params=query)
            asked += 1
            # A value within its column's range may well be found (a cursor past 2^31 on
            # a BIGINT sequence): what may never happen is a 5xx, or the database marked
            # down for anyone else.
            assert response.status_code < 500, (url, query, response.text)
            assert database.healthy, (url, query)
        assert asked > 100  # the document's routes were all walked
        # The issue's own examples, each named in the answer.
        for url, query, field in [
            ("/v1/claims", {"asset": NUL}, "asset"),
            ("/v1/support/problems", {"stove": NUL}, "stove"),
            ("/v1/domains/did:ixo:a%00b/summary", {}, "path"),
            ("/v1/claim-collections", {"cursor": cursor(2**40)}, "cursor"),
            ("/v1/credit-movements", {"cursor": cursor(2**31)}, "cursor"),
        ]:
            response = await client.get(url, params=query)
            assert response.status_code == 422, response.text
            fields = [d["field"] for d in response.json()["error"]["details"]]
            assert field in fields, response.text


async def test_a_reading_dated_year_one_is_refused_alone_with_its_reason(farm: Farm) -> None:
    stove = farm.stoves[0]
    now = datetime.now(UTC) - timedelta(minutes=1)
    good = {"seq": 1, "time": now.isoformat(), "values": {"energyKwh": 0.1}}
    bad = [
        {"seq": 2, "time": "0001-01-01T00:00:00Z", "values": {"energyKwh": 0.1}},
        {"seq": 3, "time": "9999-12-31T23:59:59-13:00", "values": {"energyKwh": 0.1}},
    ]
    response = await farm.send(stove, [good, *bad])
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["accepted"] == 1
    reasons = {r["field"]: r["error"] for r in body["rejections"]}
    assert set(reasons) == {"readings[1].time", "readings[2].time"}
    assert all("1970 to 2099" in reason for reason in reasons.values()), reasons
    alone = await farm.send(stove, bad[:1])
    assert alone.status_code == 422, alone.text
    assert farm.registry.platform.database.healthy


async def test_a_refused_value_in_a_body_is_that_requests_4xx(farm: Farm) -> None:
    """Text with a NUL in a body's JSON (which PostgreSQL's jsonb and text refuse), and a
    number past its column's range: 4xx, and the database stays up."""
    registry = farm.registry
    async with client_of(registry) as client:
        for metadata in ({"name": NUL}, {"name": "ok", NUL: 1}, {"list": ["x", [NUL]]}):
            response = await client.post(
                "/v1/domains",
                json={
                    "type": "Organisation",
                    "class": "did:ixo:protocol/organisation",
                    "metadata": metadata,
                },
            )
            assert 400 <= response.status_code < 500, response.text
            assert registry.platform.database.healthy
        patched = await client.patch(
            f"/v1/domains/{farm.stoves[0]}", json={"validFrom": "0001-01-01T00:00:00+01:00"}
        )
        assert patched.status_code == 422, patched.text
        assert registry.platform.database.healthy


async def test_graphql_refuses_bad_values_in_its_own_shape(farm: Farm) -> None:
    registry = farm.registry
    async with client_of(registry) as client:

        async def ask(query: str, **variables: Any) -> dict[str, Any]:
            response = await client.post("/graphql", json={"query": query, "variables": variables})
            assert response.status_code in (200, 400), response.text
            return response.json()

        literal = await ask('{ claims(asset: "a\\u0000b") { nodes { id } } }')
        assert "NUL" in literal["errors"][0]["message"], literal
        for query, variables in [
            ("query($a: String) { claims(asset: $a) { nodes { id } } }", {"a": NUL}),
            ("query($id: String!) { entity(id: $id) { id } }", {"id": NUL}),
            (
                "query($f: EntityFilter) { entities(filter: $f) { totalCount } }",
                {"f": {"type": NUL}},
            ),
        ]:
            answer = await ask(query, **variables)
            assert answer["errors"][0]["extensions"]["code"] == "validation_failed", answer
        for after in CURSORS:
            answer = await ask("query($c: String) { entities(after: $c) { totalCount } }", c=after)
            assert "errors" not in answer or answer["errors"][0]["extensions"]["code"] == (
                "validation_failed"
            ), answer
        for moment in TIMES[:2]:
            answer = await ask(
                "query($id: String!, $to: DateTime) { summary(id: $id, to: $to) { domain } }",
                id=farm.project,
                to=moment,
            )
            assert answer["errors"], answer
            assert "Internal error" not in answer["errors"][0]["message"], answer
    assert registry.platform.database.healthy


async def test_the_node_answers_bad_values_invalid_argument_not_unavailable(farm: Farm) -> None:
    import grpc

    from twinhub.chain.bootstrap import build_node
    from twinhub.chain.protos.cosmos.base.query.v1beta1.pagination_pb2 import PageRequest
    from twinhub.chain.protos.ixo.claims.v1beta1 import query_pb2 as claims_q
    from twinhub.chain.protos.ixo.claims.v1beta1 import query_pb2_grpc as claims_grpc
    from twinhub.chain.protos.ixo.entity.v1beta1 import query_pb2 as entity_q
    from twinhub.chain.protos.ixo.entity.v1beta1 import query_pb2_grpc as entity_grpc

    node = build_node(farm.registry.platform)
    port = await node.start("127.0.0.1", 0)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            entity, claims = entity_grpc.QueryStub(channel), claims_grpc.QueryStub(channel)
            calls = [
                entity.Entity(entity_q.QueryEntityRequest(id="did:ixo:entity/a\x00b")),
                claims.Claim(claims_q.QueryClaimRequest(id="a\x00b")),
                entity.EntityList(
                    entity_q.QueryEntityListRequest(
                        pagination=PageRequest(key=str(2**63).encode(), limit=5)
                    )
                ),
            ]
            for call in calls:
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await call
                code = refused.value.code()
                assert code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND), (
                    code,
                    refused.value.details(),
                )
            found = await entity.Entity(entity_q.QueryEntityRequest(id=farm.stoves[0]))
            assert found.entity.id == farm.stoves[0]
    finally:
        await node.stop(0)
    assert farm.registry.platform.database.healthy
