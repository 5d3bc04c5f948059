"""The chain REST gateway answering real registry data through real sockets, on both
backends: HTTP client → uvicorn (gateway) → loopback gRPC → NodeServer → platform."""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import grpc
import pytest

from tests.conftest import Registry, unique
from tests.integration.registry.test_registry_basics import make_domain
from tests.support.chain_gateway import (
    RunningGateway,
    gateway_settings,
    running_gateway,
    running_node,
)
from tests.support.claims_world import METERED_AMOUNT, World
from tests.support.workflow_world import issue_claims
from twinhub.chain.protos.cosmos.base.query.v1beta1.pagination_pb2 import PageRequest
from twinhub.chain.protos.ixo.entity.v1beta1 import query_pb2 as entity_q
from twinhub.chain.protos.ixo.entity.v1beta1 import query_pb2_grpc as entity_grpc

RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


@pytest.fixture
async def node(registry: Registry) -> AsyncIterator[str]:
    async with running_node(registry.platform) as address:
        yield address


@pytest.fixture
async def gateway(registry: Registry, node: str) -> AsyncIterator[RunningGateway]:
    async with running_gateway(gateway_settings(registry.settings), node) as running:
        yield running


async def ok(gateway: RunningGateway, path: str, registry: Registry) -> dict[str, Any]:
    """GET `path`: 200, JSON, and the block height of the ledger."""
    response = await gateway.get(path)
    assert response.status_code == 200, (path, response.text)
    assert response.headers["content-type"] == "application/json"
    height = await registry.platform.ledger.height()
    assert response.headers["x-cosmos-block-height"] == str(height), path
    return response.json()


async def test_entity_routes_answer_registry_data(
    registry: Registry, world: World, gateway: RunningGateway
) -> None:
    record = (await registry.client.get(f"/v1/domains/{world.project}")).json()
    answer = await ok(gateway, f"/ixo/entity/{world.project}", registry)
    entity = answer["entity"]
    assert entity["id"] == world.project
    assert entity["type"] == "Project"
    assert entity["entity_verified"] is True
    assert entity["status"] == 0
    assert entity["metadata"]["version_id"] == str(record["version"])
    assert RFC3339_UTC.match(entity["metadata"]["created"])
    assert entity["accounts"] == []  # empty lists are written, not left out
    assert entity["end_date"] is None  # an unset message is null
    document = answer["iidDocument"]  # IidDocument keeps its camelCase names
    assert document["id"] == world.project
    assert {"key": "class", "val": "did:ixo:protocol/project"} in document["context"]
    assert document["verificationMethod"] == [] and document["alsoKnownAs"] == ""
    linked = {(e["relationship"], e["id"]) for e in document["linkedEntity"]}
    assert ("implementedBy", world.organisation) in linked
    assert document["metadata"]["deactivated"] is False
    # The same entity through a percent-encoded DID.
    assert await ok(gateway, f"/ixo/entity/{quote(world.project, safe='')}", registry) == answer
    verified = await ok(gateway, f"/ixo/entity/{world.project}/verified", registry)
    assert verified == {"entity_verified": True}
    oracle = await ok(gateway, f"/ixo/entity/{quote(world.oracle, safe='')}/verified", registry)
    assert oracle == {"entity_verified": False}
    iid = await ok(gateway, f"/ixo/entity/{world.oracle}/iiddocument", registry)
    assert iid["iidDocument"]["controller"] == [world.oracle_operator]
    metadata = await ok(gateway, f"/ixo/entity/{world.project}/metadata", registry)
    assert metadata["entity"] == entity
    did = await ok(gateway, f"/ixo/did/dids/{world.oracle}", registry)
    assert did == iid
    params = await ok(gateway, "/ixo/entity/params", registry)
    assert set(params["params"]) == {"nftContractAddress", "nftContractMinter", "createSequence"}
    assert isinstance(params["params"]["createSequence"], str)  # uint64 as a string
    listed = await ok(gateway, "/ixo/entity?pagination.reverse=true&pagination.limit=50", registry)
    assert world.project in {e["id"] for e in listed["entities"]}
    documents = await ok(gateway, "/ixo/did/dids?pagination.limit=3", registry)
    assert len(documents["iidDocuments"]) == 3
    # Unknown ids are NOT_FOUND in the Cosmos error shape.
    missing = await gateway.get(f"/ixo/entity/did:ixo:entity/{unique('none')}")
    assert missing.status_code == 404
    body = missing.json()
    assert (
        body["code"] == 5
        and body["details"] == []
        and set(body)
        == {
            "code",
            "message",
            "details",
        }
    )
    assert missing.headers["x-cosmos-block-height"]


async def test_claims_and_token_routes_answer_registry_data(
    registry: Registry, world: World, gateway: RunningGateway
) -> None:
    _, collection, claim = await world.approved_claim()
    await issue_claims(world)  # CARBON is minted by the registry's issuance
    view = (await registry.client.get(f"/v1/claim-collections/{collection['id']}")).json()
    got = (await ok(gateway, f"/ixo/claims/collection/{collection['id']}", registry))["collection"]
    assert got["id"] == str(collection["id"])
    assert got["entity"] == world.project
    assert got["protocol"] == view["protocol"]
    assert got["state"] == "OPEN"  # enums by name
    assert got["count"] == "1" and got["approved"] == "1"  # uint64 as strings
    # Written as a gogoproto node writes them: never null.
    assert got["min_deposit_period"] == "0s"
    stages = got["payments"]
    assert set(stages) == {"submission", "evaluation", "approval", "rejection"}
    assert all(p["timeout_ns"] == "0s" and p["account"] == view["admin"] for p in stages.values())
    assert stages["approval"]["is_oracle_payment"] is True
    assert stages["submission"]["is_oracle_payment"] is False
    assert got["intents"] == "ALLOW"
    assert got["service_agent_deposit_required"] == []
    listed = await ok(
        gateway, "/ixo/claims/collections?pagination.reverse=true&pagination.limit=5", registry
    )
    assert str(collection["id"]) in {c["id"] for c in listed["collections"]}
    found = (await ok(gateway, f"/ixo/claims/claim/{claim['id']}", registry))["claim"]
    assert found["claim_id"] == claim["id"]
    assert found["collection_id"] == str(collection["id"])
    assert found["evaluation"]["status"] == "APPROVED"
    assert found["evaluation"]["oracle"] == world.oracle
    assert found["evaluation"]["amount"] == [{"denom": "CARBON", "amount": str(METERED_AMOUNT)}]
    assert RFC3339_UTC.match(found["submission_date"])
    claims = await ok(
        gateway, "/ixo/claims/claims?pagination.reverse=true&pagination.limit=1", registry
    )
    assert [c["claim_id"] for c in claims["claims"]] == [claim["id"]]
    params = (await ok(gateway, "/ixo/claims/params", registry))["params"]
    assert int(params["collection_sequence"]) > collection["id"]
    # LegacyDec: a scaled integer on the gRPC wire, decimal text in REST JSON.
    assert params["network_fee_percentage"] == "0.000000000000000000"
    token_params = await ok(gateway, "/ixo/token/params", registry)
    assert token_params == {"params": {"ixo1155_contract_code": "0"}}
    minter = registry.platform.credentials.issuer.did
    tokens = await ok(gateway, f"/ixo/token/minter/{minter}", registry)
    carbon = next(t for t in tokens["tokenDocs"] if t["name"] == "CARBON")
    minted = (await registry.client.get("/v1/credits/CARBON")).json()["minted"]
    assert carbon["supply"] == str(minted)
    assert carbon["class"] == "did:ixo:protocol/clean-cooking-claim"
    assert tokens["pagination"]["next_key"] is None  # empty bytes are null
    doc = await ok(gateway, f"/ixo/token/minter/{quote(minter, safe='')}/CARBON", registry)
    assert doc["tokenDoc"]["name"] == "CARBON"
    disputes = await ok(gateway, "/ixo/claims/disputes", registry)
    assert disputes == {"disputes": [], "pagination": {"next_key": None, "total": "0"}}
    members = await ok(gateway, f"/ixo/claims/collection/{collection['id']}/members", registry)
    oracle = next(m for m in members["member_budgets"] if m["member_address"] == world.oracle)
    assert oracle == {
        "collection_id": str(collection["id"]),
        "member_address": world.oracle,
        "period": "0s",  # non-nullable on ixo: written, never null
        "period_spend_limit": [],
        "period_spent": [],
        "period_cw20_spend_limit": [],
        "period_cw20_spent": [],
        "period_reset_at": None,
    }
    bad = await gateway.get("/ixo/claims/collection/not-a-number")
    assert bad.status_code == 400 and bad.json()["code"] == 3


async def test_a_past_height_is_refused_as_by_a_pruned_node(
    registry: Registry, world: World, gateway: RunningGateway, node: str
) -> None:
    """`x-cosmos-block-height` reaches the node, which serves only its latest state."""
    path = f"/ixo/entity/{world.project}/verified"
    latest = await registry.platform.ledger.height()
    for asked in (str(latest), "0"):  # the latest, by number or by 0
        answer = await gateway.get(path, headers={"x-cosmos-block-height": asked})
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"entity_verified": True}
        assert answer.headers["x-cosmos-block-height"] == str(latest)
    for asked, words in (
        (str(latest - 1), f"latest height: {latest}"),
        (str(latest + 5), "in the future"),
        ("ten", "whole number"),
        ("-1", "whole number"),
        ("9" * 30, "whole number"),
        ("1 2", "whole number"),
        ("", "whole number"),
    ):
        refused = await gateway.get(path, headers={"x-cosmos-block-height": asked})
        assert refused.status_code == 400, (asked, refused.text)
        assert refused.json()["code"] == 3 and words in refused.json()["message"], asked
    # Straight to the node, as a gRPC client asks.
    async with grpc.aio.insecure_channel(node) as channel:
        stub = entity_grpc.QueryStub(channel)
        request = entity_q.QueryEntityVerifiedRequest(id=world.project)
        answer = await stub.EntityVerified(
            request, metadata=(("x-cosmos-block-height", str(latest)),)
        )
        assert answer.entity_verified is True
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.EntityVerified(request, metadata=(("x-cosmos-block-height", "1"),))
        assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert f"latest height: {latest}" in (refused.value.details() or "")


async def test_pagination_edges(registry: Registry, gateway: RunningGateway, node: str) -> None:
    for _ in range(5):  # enough entities for several pages, whatever else the database holds
        await make_domain(registry, metadata={"name": unique("org")})

    async def page(query: str) -> dict[str, Any]:
        response = await gateway.get(f"/ixo/entity?{query}")
        assert response.status_code == 200, (query, response.text)
        return response.json()

    async with grpc.aio.insecure_channel(node) as channel:
        direct = entity_grpc.QueryStub(channel)

        async def grpc_ids(**page_request: Any) -> list[str]:
            answer = await direct.EntityList(
                entity_q.QueryEntityListRequest(pagination=PageRequest(**page_request))
            )
            return [e.id for e in answer.entities]

        first = await page("pagination.limit=2&pagination.count_total=true")
        ids = [e["id"] for e in first["entities"]]
        assert ids == await grpc_ids(limit=2)
        total = int(first["pagination"]["total"])
        assert total >= 5 and isinstance(first["pagination"]["total"], str)
        next_key = first["pagination"]["next_key"]
        assert next_key and base64.b64decode(next_key)
        # The next_key goes back as pagination.key, encoded or raw (a '+' read as a space).
        second = await page(f"pagination.limit=2&pagination.key={quote(next_key, safe='')}")
        expected = await grpc_ids(limit=2, key=base64.b64decode(next_key))
        assert [e["id"] for e in second["entities"]] == expected
        assert not set(expected) & set(ids)
        raw = await page(f"pagination.limit=2&pagination.key={next_key}")
        assert [e["id"] for e in raw["entities"]] == expected
        url_safe = next_key.replace("+", "-").replace("/", "_").rstrip("=")
        unpadded = await page(f"pagination.limit=2&pagination.key={url_safe}")
        assert [e["id"] for e in unpadded["entities"]] == expected
        offset = await page("pagination.offset=3&pagination.limit=2")
        assert [e["id"] for e in offset["entities"]] == await grpc_ids(offset=3, limit=2)
        backwards = await page("pagination.reverse=true&pagination.limit=3")
        newest = [e["id"] for e in backwards["entities"]]
        assert newest == await grpc_ids(reverse=True, limit=3)
        assert newest[0] != ids[0]
        default = await page("pagination.limit=0")
        assert len(default["entities"]) == min(100, total)
        assert (await page(""))["entities"] == default["entities"]
        ignored = await page("pagination.limit=2&colour=blue&pagination.shape=round")
        assert [e["id"] for e in ignored["entities"]] == ids
        json_names = await page("pagination.countTotal=true&pagination.limit=1")
        assert json_names["pagination"]["total"] == str(total)
    for query, fragment in (
        (f"pagination.key={quote(next_key, safe='')}&pagination.offset=1", "key"),
        ("pagination.limit=abc", "pagination.limit"),
        ("pagination.limit=-1", "pagination.limit"),
        ("pagination.count_total=maybe", "pagination.count_total"),
        ("pagination.key=%21%21%21", "pagination.key"),
        ("pagination.offset=18446744073709551616", "pagination.offset"),
        ("pagination=5", "pagination"),
    ):
        response = await gateway.get(f"/ixo/entity?{query}")
        assert response.status_code == 400, (query, response.text)
        assert response.json()["code"] == 3
        assert fragment in response.json()["message"]


async def test_swagger_lists_every_route_served(gateway: RunningGateway) -> None:
    response = await gateway.get("/swagger/")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.")
    table = gateway.app.table
    assert table is not None
    served = {route.template for route in table}
    assert set(document["paths"]) == served
    for required in (
        "/ixo/entity/{id}",
        "/ixo/entity/{id}/verified",
        "/ixo/entity/{id}/iiddocument",
        "/ixo/entity",
        "/ixo/did/dids/{id}",
        "/ixo/claims/collections",
        "/ixo/claims/collection/{id}",
        "/ixo/claims/claims",
        "/ixo/claims/claim/{id}",
        "/ixo/claims/params",
        "/ixo/token/params",
        "/ixo/token/minter/{minter}",
    ):
        assert required in document["paths"], required
    listing = document["paths"]["/ixo/entity"]["get"]
    names = {p["name"] for p in listing["parameters"]}
    assert {
        "pagination.key",
        "pagination.offset",
        "pagination.limit",
        "pagination.count_total",
        "pagination.reverse",
    } <= names
    one = document["paths"]["/ixo/entity/{id}"]["get"]
    assert [p["name"] for p in one["parameters"] if p["in"] == "path"] == ["id"]
    assert "ixo.entity.v1beta1.QueryEntityResponse" in document["components"]["schemas"]
    assert (await gateway.get("/swagger/openapi.json")).json() == document


async def test_verbs_other_than_get(gateway: RunningGateway) -> None:
    posted = await gateway.client.post("/ixo/entity/params", json={})
    assert posted.status_code == 405
    assert posted.json() == {
        "code": 12,
        "message": "POST is not allowed here; the gateway serves GET queries",
        "details": [],
    }
    assert posted.headers["allow"] == "GET, HEAD, OPTIONS"
    head = await gateway.client.head("/ixo/entity/params")
    assert head.status_code == 200 and head.content == b""
    unknown = await gateway.client.delete("/nowhere")
    assert unknown.status_code == 404 and unknown.json()["code"] == 5
