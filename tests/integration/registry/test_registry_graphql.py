"""GraphQL status queries at /graphql over HTTP: the ixo-indexer entity shape, filters,
pagination, and the same API-key rules as /v1."""

from __future__ import annotations

import base64
import hashlib
import secrets
from datetime import UTC, datetime
from typing import Any

import httpx

from tests.conftest import Registry, unique
from tests.integration.registry.test_registry_basics import make_domain, make_protocol
from twinhub.kernel.principals import Principal
from twinhub.services.api_keys import BOOTSTRAP_PRINCIPAL
from twinhub.services.domains import DomainSpec

ENTITY_FIELDS = """
    id type status registryStatus entityVerified startDate endDate controller
    context service linkedEntity metadata registryMetadata protocol twinClass properties
    version createdAt updatedAt parent membershipGroup inheritedServices
"""
ENTITY = f"query Entity($id: String!) {{ entity(id: $id) {{ {ENTITY_FIELDS} }} }}"
ENTITIES = """
query Entities($filter: EntityFilter, $first: Int, $after: String) {
  entities(filter: $filter, first: $first, after: $after) {
    nodes { id type status entityVerified controller twinClass }
    pageInfo { hasNextPage endCursor }
    totalCount
  }
}
"""


async def post(client: httpx.AsyncClient, query: str, **variables: Any) -> httpx.Response:
    return await client.post("/graphql", json={"query": query, "variables": variables})


async def data(registry: Registry, query: str, **variables: Any) -> dict[str, Any]:
    """The `data` of a query the admin client sends, asserting it raised no error."""
    response = await post(registry.client, query, **variables)
    assert response.status_code == 200, response.text
    body = response.json()
    assert "errors" not in body, body
    return body["data"]


async def entities(registry: Registry, **variables: Any) -> dict[str, Any]:
    return (await data(registry, ENTITIES, **variables))["entities"]


def new_controller() -> str:
    """A controller DID of this test alone, so filters see only this test's domains."""
    return f"did:ixo:org/{unique('operator')}"


async def make_device(registry: Registry, protocol: str, operator: str, **fields: Any) -> dict:
    fields.setdefault("controller", [operator])
    fields.setdefault("metadata", {"name": unique("stove")})
    return await make_domain(registry, type="Device", **{"class": protocol}, **fields)


# -- one entity ------------------------------------------------------------------------------
async def test_entity_by_id_in_the_ixo_shape(registry: Registry) -> None:
    protocol = await make_protocol(
        registry,
        relationships={"verifier": "Oracle"},
        properties={"serialNumber": "string"},
        services=[
            {"id": "#ingest", "type": "DataIngestion", "endpoint": "https://ingest.example/v1"},
            {"id": "#status", "type": "Status", "endpoint": "https://protocol.example/status"},
        ],
    )
    oracle = await make_domain(
        registry, type="Oracle", **{"class": "did:ixo:protocol/oracle"}, metadata={"name": "Eval"}
    )
    controller = new_controller()
    # Made through the service: /v1 cannot take validFrom/validUntil at the moment (its
    # `as_utc` validator receives pydantic's ValidationInfo instead of the value).
    device = await registry.platform.domains.create(
        DomainSpec(
            type="Device",
            protocol=protocol["did"],
            metadata={"name": "Stove JK-1"},
            properties={"serialNumber": "JK-1"},
            controller=[controller, "did:ixo:org/field-team"],
            services=[
                {"id": "#status", "type": "Status", "endpoint": "https://own.example/status"}
            ],
            relationships={"verifier": [oracle["did"]]},
            valid_from=datetime(2025, 1, 1, tzinfo=UTC),
            valid_until=datetime(2030, 6, 30, 12, tzinfo=UTC),
        ),
        Principal(BOOTSTRAP_PRINCIPAL, frozenset({"admin"})),
    )
    entity = (await data(registry, ENTITY, id=device["did"]))["entity"]
    assert entity["id"] == device["did"]
    assert entity["type"] == "Device"
    assert entity["status"] == 0
    assert entity["registryStatus"] == "active"
    assert entity["entityVerified"] is False
    assert datetime.fromisoformat(entity["startDate"]) == datetime(2025, 1, 1, tzinfo=UTC)
    assert datetime.fromisoformat(entity["endDate"]) == datetime(2030, 6, 30, 12, tzinfo=UTC)
    assert entity["controller"] == [controller, "did:ixo:org/field-team"]
    assert entity["context"] == [{"key": "class", "val": protocol["did"]}]
    # Its own #status wins over the protocol's; #ingest is inherited.
    assert entity["service"] == [
        {"id": "#status", "type": "Status", "serviceEndpoint": "https://own.example/status"},
        {"id": "#ingest", "type": "DataIngestion", "serviceEndpoint": "https://ingest.example/v1"},
    ]
    assert entity["inheritedServices"] == ["#ingest"]
    assert entity["linkedEntity"] == [
        {"type": "Oracle", "id": oracle["did"], "relationship": "verifier", "service": ""}
    ]
    assert entity["metadata"] == {
        "name": device["metadata"]["name"],
        "versionId": "1",
        "created": device["createdAt"],
        "updated": device["updatedAt"],
        "deactivated": False,
    }
    assert entity["registryMetadata"] == device["metadata"]
    assert entity["protocol"] == protocol["did"]
    assert entity["twinClass"] == "physical"
    assert entity["properties"] == {"serialNumber": "JK-1"}
    assert entity["version"] == 1
    assert datetime.fromisoformat(entity["createdAt"]) == datetime.fromisoformat(
        device["createdAt"]
    )
    assert entity["parent"] is None
    assert entity["membershipGroup"] is None


async def test_an_organisation_links_its_membership_group(registry: Registry) -> None:
    org = await make_domain(registry, metadata={"name": "Jiko Co-op", "created": "1999"})
    entity = (await data(registry, ENTITY, id=org["did"]))["entity"]
    group = org["membershipGroup"]
    assert entity["membershipGroup"] == group
    assert entity["linkedEntity"] == [
        {"type": "Group", "id": group, "relationship": "membershipGroup", "service": ""}
    ]
    assert entity["twinClass"] == "cognitive"
    # ixo's `created` wins in `metadata`; the domain's own value stays in registryMetadata.
    assert entity["metadata"]["created"] == org["createdAt"]
    assert entity["registryMetadata"] == {"name": "Jiko Co-op", "created": "1999"}
    member_group = (await data(registry, ENTITY, id=group))["entity"]
    assert member_group["type"] == "Group"
    assert member_group["parent"] == org["did"]


async def test_unknown_entity_is_null(registry: Registry) -> None:
    assert await data(registry, ENTITY, id="did:ixo:entity/nobody-here") == {"entity": None}
    assert await data(registry, ENTITY, id="not a did") == {"entity": None}


async def test_a_deactivated_domain_has_ixo_status_1(registry: Registry) -> None:
    org = await make_domain(registry)
    gone = await registry.client.delete(f"/v1/domains/{org['did']}")
    assert gone.status_code == 200, gone.text
    entity = (await data(registry, ENTITY, id=org["did"]))["entity"]
    assert entity["status"] == 1
    assert entity["registryStatus"] == "deactivated"
    assert entity["metadata"]["deactivated"] is True
    assert entity["metadata"]["versionId"] == "2"
    assert entity["version"] == 2


# -- lists -----------------------------------------------------------------------------------
async def test_entities_filters(registry: Registry) -> None:
    protocol = await make_protocol(registry)
    controller = new_controller()
    devices = [await make_device(registry, protocol["did"], controller) for _ in range(2)]
    org = await make_domain(registry, controller=[controller])
    mine = {"controller": controller}
    everything = await entities(registry, filter=mine)
    assert {n["id"] for n in everything["nodes"]} == {
        *(d["did"] for d in devices),
        org["did"],
        org["membershipGroup"],  # made with the organisation's controllers
    }
    assert everything["totalCount"] == 4
    assert all(controller in n["controller"] for n in everything["nodes"])

    by_type = await entities(registry, filter={**mine, "type": "Device"})
    assert [n["id"] for n in by_type["nodes"]] == [d["did"] for d in devices]
    assert by_type["totalCount"] == 2

    physical = await entities(registry, filter={**mine, "twinClass": "physical"})
    assert {n["id"] for n in physical["nodes"]} == {d["did"] for d in devices}
    assert {n["twinClass"] for n in physical["nodes"]} == {"physical"}

    by_protocol = await entities(registry, filter={"protocol": protocol["did"]})
    assert {n["id"] for n in by_protocol["nodes"]} == {d["did"] for d in devices}

    verified = await entities(registry, filter={**mine, "entityVerified": True})
    assert verified == {
        "nodes": [],
        "pageInfo": {"hasNextPage": False, "endCursor": None},
        "totalCount": 0,
    }
    assert (await entities(registry, filter={**mine, "verified": False}))["totalCount"] == 4
    contradictory = await post(
        registry.client, ENTITIES, filter={"verified": True, "entityVerified": False}
    )
    assert "disagree" in contradictory.json()["errors"][0]["message"]

    gone = await registry.client.delete(f"/v1/domains/{devices[0]['did']}")
    assert gone.status_code == 200, gone.text
    closed = await entities(registry, filter={**mine, "status": 1})
    assert [(n["id"], n["status"]) for n in closed["nodes"]] == [(devices[0]["did"], 1)]
    assert (await entities(registry, filter={**mine, "status": 0}))["totalCount"] == 3
    assert (await entities(registry, filter={**mine, "status": 2}))["totalCount"] == 0


async def test_pagination_round_trip(registry: Registry) -> None:
    protocol = await make_protocol(registry)
    controller = new_controller()
    made = [(await make_device(registry, protocol["did"], controller))["did"] for _ in range(5)]
    seen: list[str] = []
    pages, after = 0, None
    while True:
        page = await entities(registry, filter={"controller": controller}, first=2, after=after)
        pages += 1
        assert page["totalCount"] == 5
        seen += [n["id"] for n in page["nodes"]]
        if not page["pageInfo"]["hasNextPage"]:
            assert page["pageInfo"]["endCursor"] is None
            break
        after = page["pageInfo"]["endCursor"]
        assert after
        assert pages < 5, "pagination does not end"
    assert pages == 3
    assert seen == made  # each exactly once, in registration order


async def test_first_defaults_to_the_page_size_and_is_capped(make_registry: Any) -> None:
    registry = await make_registry(registry_page_size=2, registry_max_page_size=3)
    protocol = await make_protocol(registry)
    controller = new_controller()
    for _ in range(4):
        await make_device(registry, protocol["did"], controller)
    mine = {"controller": controller}
    assert len((await entities(registry, filter=mine))["nodes"]) == 2
    capped = await entities(registry, filter=mine, first=100)
    assert len(capped["nodes"]) == 3
    assert capped["pageInfo"]["hasNextPage"] is True
    too_few = (await post(registry.client, ENTITIES, first=0)).json()
    assert too_few["data"] is None
    assert too_few["errors"][0]["message"] == "first must be at least 1."


async def test_a_bad_cursor_is_a_graphql_error(registry: Registry) -> None:
    not_ours = base64.urlsafe_b64encode(b"not-a-number").decode()
    # Past the BIGINT range: the database itself would fail on it.
    too_big = base64.urlsafe_b64encode(str(2**63).encode()).decode()
    for cursor in ("%%%", not_ours, "LTE", too_big):  # LTE is base64 of -1
        response = await post(registry.client, ENTITIES, after=cursor)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["data"] is None
        [error] = body["errors"]
        assert error["message"] == "The cursor is not one this API gave out."
        assert error["extensions"]["code"] == "validation_failed"
        assert error["path"] == ["entities"]


async def test_a_nul_character_is_a_graphql_error_before_anything_runs(
    registry: Registry,
) -> None:
    """PostgreSQL refuses NUL in text: found by the GraphQL fuzzing as an internal error."""
    as_variable = await post(
        registry.client, "query($id: String!) { entity(id: $id) { id } }", id="did:x\x00y"
    )
    as_literal = await post(registry.client, '{ summary(id: "did:x\\u0000y") { stoves } }')
    for response in (as_variable, as_literal):
        assert response.status_code == 200, response.text
        body = response.json()
        # Refused as the caller's mistake (kernel.bounds), never run against the database.
        assert not any((body.get("data") or {}).values()), body
        assert body["errors"] and all("NUL" in e["message"] for e in body["errors"]), body
        assert all(e["extensions"]["code"] == "validation_failed" for e in body["errors"])
    # The registry still answers (nothing was taken for an outage).
    assert (await data(registry, '{ entity(id: "did:ixo:entity/none") { id } }')) == {
        "entity": None
    }


async def test_an_internal_failure_is_masked(registry: Registry, monkeypatch: Any) -> None:
    async def broken(*_: Any, **__: Any) -> dict[str, Any]:
        raise RuntimeError("connection to db.internal:5432 refused")

    monkeypatch.setattr(registry.platform.domains, "get", broken)
    response = await post(registry.client, ENTITY, id="did:ixo:entity/x")
    assert response.status_code == 200
    [error] = response.json()["errors"]
    assert error["message"] == "Internal error; logged."
    assert "db.internal" not in response.text


# -- keys ------------------------------------------------------------------------------------
async def test_without_a_key_401(registry: Registry) -> None:
    anonymous = registry.as_key(None)
    try:
        response = await post(anonymous, ENTITY, id="did:ixo:entity/x")
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthorized"
        assert set(response.json()["error"]) == {"code", "message", "details"}
        assert response.headers["www-authenticate"].startswith("Bearer")
        # A GET that carries a query needs the key as well.
        by_get = await anonymous.get("/graphql", params={"query": '{ entity(id: "x") { id } }'})
        assert by_get.status_code == 401
    finally:
        await anonymous.aclose()


async def test_an_unknown_key_401(registry: Registry) -> None:
    for token in ("thk_000000000000_" + secrets.token_urlsafe(32), "nonsense"):
        stranger = registry.as_key(token)
        try:
            response = await post(stranger, ENTITY, id="did:ixo:entity/x")
            assert response.status_code == 401
            assert response.json()["error"]["message"] == "The API key is unknown or revoked."
        finally:
            await stranger.aclose()


async def test_reader_and_writer_keys_may_query(registry: Registry) -> None:
    org = await make_domain(registry)
    for role in ("reader", "writer"):
        client = registry.as_key(await registry.key("did:ixo:org/auditor", role))
        try:
            response = await post(
                client, "query($id: String!) { entity(id: $id) { id } }", id=org["did"]
            )
            assert response.status_code == 200, (role, response.text)
            assert response.json() == {"data": {"entity": {"id": org["did"]}}}
        finally:
            await client.aclose()


async def test_a_key_without_reader_or_writer_role_403(registry: Registry) -> None:
    # Keys are made with admin, writer or reader only, so store one as an older release might
    # have: with a role the registry no longer grants.
    from twinhub.db.models import ApiKey

    key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
    async with registry.platform.sessionmaker.begin() as session:
        session.add(
            ApiKey(
                key_id=key_id,
                secret_sha256=hashlib.sha256(secret.encode()).hexdigest(),
                principal="did:ixo:org/retired",
                roles=["auditor"],
                label="",
            )
        )
    client = registry.as_key(f"thk_{key_id}_{secret}")
    try:
        response = await post(client, ENTITY, id="did:ixo:entity/x")
        assert response.status_code == 403, response.text
        assert response.json()["error"]["code"] == "forbidden"
    finally:
        await client.aclose()


# -- the GraphQL endpoint itself -------------------------------------------------------------
async def test_a_malformed_query_is_a_graphql_error(registry: Registry) -> None:
    response = await post(registry.client, "{ entity(id: ) { id ")
    assert response.status_code in (200, 400)
    [error] = response.json()["errors"]
    assert error["message"].startswith("Syntax Error")
    unknown = await post(registry.client, '{ entity(id: "x") { nonsense } }')
    assert "Cannot query field 'nonsense'" in unknown.json()["errors"][0]["message"]


async def test_a_body_that_is_not_json_gets_the_registry_error_shape(registry: Registry) -> None:
    response = await registry.client.post(
        "/graphql", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": "bad_request",
        "message": "Unable to parse request body as JSON",
        "details": [],
    }


async def test_aliases_are_limited(registry: Registry) -> None:
    fan_out = " ".join(
        f'a{n}: entities(first: 1, filter: {{type: "Device"}}) {{ totalCount }}' for n in range(21)
    )
    response = await post(registry.client, f"{{ {fan_out} }}")
    assert response.json()["data"] is None
    assert "aliases" in response.json()["errors"][0]["message"]
    within = " ".join(
        f'a{n}: entities(first: 1, filter: {{type: "Device"}}) {{ totalCount }}' for n in range(3)
    )
    assert set(await data(registry, f"{{ {within} }}")) == {"a0", "a1", "a2"}


async def test_introspection_describes_the_entity(registry: Registry) -> None:
    found = await data(
        registry,
        '{ __type(name: "Entity") { fields { name } } __schema { queryType { fields { name } } } }',
    )
    fields = {f["name"] for f in found["__type"]["fields"]}
    assert set(ENTITY_FIELDS.split()) <= fields
    assert {f["name"] for f in found["__schema"]["queryType"]["fields"]} == {
        "entity",
        "entities",
        "claim",
        "claims",
        "balances",
        "creditClass",
        "summary",
        "telemetryState",
        "events",
    }


async def test_graphiql_opens_without_a_key(registry: Registry) -> None:
    anonymous = registry.as_key(None)
    try:
        page = await anonymous.get("/graphql", headers={"accept": "text/html"})
        assert page.status_code == 200
        assert "graphiql" in page.text.lower()
        # Its scripts come from the package, never a CDN (it must work offline).
        assert "unpkg.com" not in page.text and "https://" not in page.text
        assert "/console/static/vendor/graphiql-3.8.3/graphiql.min.js" in page.text
    finally:
        await anonymous.aclose()
