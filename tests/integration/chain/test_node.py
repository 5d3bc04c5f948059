"""The gRPC node over a real loopback socket, on both backends: ixo's query services answer
from the registry, with Cosmos pagination, statuses, reflection, health and the height."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from tests.conftest import Registry, unique
from tests.support.claims_world import METERED_AMOUNT, World
from tests.support.workflow_world import issue_claims
from twinhub.chain.bootstrap import build_node
from twinhub.chain.protos.cosmos.base.query.v1beta1.pagination_pb2 import PageRequest
from twinhub.chain.protos.ixo.claims.v1beta1 import claims_pb2
from twinhub.chain.protos.ixo.claims.v1beta1 import query_pb2 as claims_q
from twinhub.chain.protos.ixo.claims.v1beta1 import query_pb2_grpc as claims_grpc
from twinhub.chain.protos.ixo.entity.v1beta1 import query_pb2 as entity_q
from twinhub.chain.protos.ixo.entity.v1beta1 import query_pb2_grpc as entity_grpc
from twinhub.chain.protos.ixo.iid.v1beta1 import query_pb2 as iid_q
from twinhub.chain.protos.ixo.iid.v1beta1 import query_pb2_grpc as iid_grpc
from twinhub.chain.protos.ixo.token.v1beta1 import query_pb2 as token_q
from twinhub.chain.protos.ixo.token.v1beta1 import query_pb2_grpc as token_grpc


@pytest.fixture
async def channel(registry: Registry) -> AsyncIterator[grpc.aio.Channel]:
    node = build_node(registry.platform)
    port = await node.start("127.0.0.1", 0)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as opened:
        yield opened
    await node.stop(0)


async def test_entity_and_iid_answer_from_the_registry(
    registry: Registry, world: World, channel: grpc.aio.Channel
) -> None:
    entity = entity_grpc.QueryStub(channel)
    call = entity.Entity(entity_q.QueryEntityRequest(id=world.project))
    answer = await call
    assert answer.entity.id == world.project
    assert answer.entity.entity_verified is True
    assert answer.entity.type == "Project"
    assert answer.iidDocument.context[0].key == "class"
    assert answer.iidDocument.context[0].val == "did:ixo:protocol/project"
    linked = {(e.relationship, e.id, e.type) for e in answer.iidDocument.linkedEntity}
    assert ("implementedBy", world.organisation, "Organisation") in linked
    height = dict(await call.initial_metadata())["x-cosmos-block-height"]
    assert int(height) == await registry.platform.ledger.height()
    record = (await registry.client.get(f"/v1/domains/{world.project}")).json()
    assert answer.entity.metadata.version_id == str(record["version"])
    verified = await entity.EntityVerified(entity_q.QueryEntityVerifiedRequest(id=world.oracle))
    assert verified.entity_verified is False
    iid = await iid_grpc.QueryStub(channel).IidDocument(
        iid_q.QueryIidDocumentRequest(id=world.oracle)
    )
    assert iid.iidDocument.controller == [world.oracle_operator]
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await entity.Entity(entity_q.QueryEntityRequest(id="did:ixo:entity/" + unique("none")))
    assert missing.value.code() is grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.aio.AioRpcError) as empty:
        await entity.Entity(entity_q.QueryEntityRequest(id=""))
    assert empty.value.code() is grpc.StatusCode.INVALID_ARGUMENT


async def test_entity_list_pages_the_cosmos_way(world: World, channel: grpc.aio.Channel) -> None:
    entity = entity_grpc.QueryStub(channel)
    everything = await entity.EntityList(
        entity_q.QueryEntityListRequest(pagination=PageRequest(limit=1000, count_total=True))
    )
    assert everything.pagination.total == len(everything.entities) >= 4
    ids = [e.id for e in everything.entities]
    first = await entity.EntityList(
        entity_q.QueryEntityListRequest(pagination=PageRequest(limit=2))
    )
    assert [e.id for e in first.entities] == ids[:2] and first.pagination.next_key
    second = await entity.EntityList(
        entity_q.QueryEntityListRequest(
            pagination=PageRequest(key=first.pagination.next_key, limit=2)
        )
    )
    assert [e.id for e in second.entities] == ids[2:4]
    offset = await entity.EntityList(
        entity_q.QueryEntityListRequest(pagination=PageRequest(offset=1, limit=2))
    )
    assert [e.id for e in offset.entities] == ids[1:3]
    backwards = await entity.EntityList(
        entity_q.QueryEntityListRequest(pagination=PageRequest(reverse=True, limit=3))
    )
    assert [e.id for e in backwards.entities] == ids[::-1][:3]
    default = await entity.EntityList(entity_q.QueryEntityListRequest())
    assert len(default.entities) == min(100, len(ids))
    with pytest.raises(grpc.aio.AioRpcError) as both:
        await entity.EntityList(
            entity_q.QueryEntityListRequest(pagination=PageRequest(key=b"3", offset=1))
        )
    assert both.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.aio.AioRpcError) as foreign:
        await entity.EntityList(entity_q.QueryEntityListRequest(pagination=PageRequest(key=b"zz")))
    assert foreign.value.code() is grpc.StatusCode.INVALID_ARGUMENT


async def test_claims_and_tokens_answer_from_the_registry(
    registry: Registry, world: World, channel: grpc.aio.Channel
) -> None:
    owner = f"did:ixo:customer/{unique('c')}"
    stove, collection, claim = await world.approved_claim(owner)
    await issue_claims(world)  # CARBON is minted by the registry's issuance
    claims = claims_grpc.QueryStub(channel)
    found = (await claims.Claim(claims_q.QueryClaimRequest(id=claim["id"]))).claim
    assert found.claim_id == claim["id"] and found.collection_id == str(collection["id"])
    assert claim["asset"] == stove
    assert found.evaluation.status == claims_pb2.APPROVED
    assert found.evaluation.oracle == world.oracle
    assert found.evaluation.verification_proof == claim["credential"]
    assert [(c.denom, c.amount) for c in found.evaluation.amount] == [
        ("CARBON", str(METERED_AMOUNT))
    ]
    got = (
        await claims.Collection(claims_q.QueryCollectionRequest(id=str(collection["id"])))
    ).collection
    assert got.entity == world.project and got.count == 1 and got.approved == 1
    assert got.state == claims_pb2.OPEN
    listed = await claims.ClaimList(
        claims_q.QueryClaimListRequest(pagination=PageRequest(reverse=True, limit=1))
    )
    assert listed.claims[0].claim_id == claim["id"]  # the newest first
    params = await claims.Params(claims_q.QueryParamsRequest())
    assert params.params.collection_sequence > collection["id"]
    with pytest.raises(grpc.aio.AioRpcError) as bad:
        await claims.Collection(claims_q.QueryCollectionRequest(id="one"))
    assert bad.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.aio.AioRpcError) as no_collection:
        await claims.CollectionMemberList(claims_q.QueryCollectionMemberListRequest())
    assert no_collection.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    tokens = token_grpc.QueryStub(channel)
    minter = registry.platform.credentials.issuer.did
    docs = await tokens.TokenList(token_q.QueryTokenListRequest(minter=minter))
    carbon = next(t for t in docs.tokenDocs if t.name == "CARBON")
    supply = (await registry.client.get("/v1/credits/CARBON")).json()
    assert carbon.supply == str(supply["minted"])
    assert getattr(carbon, "class") == "did:ixo:protocol/clean-cooking-claim"
    other = await tokens.TokenList(token_q.QueryTokenListRequest(minter="did:ixo:org/nobody"))
    assert list(other.tokenDocs) == []


async def test_reflection_and_health(registry: Registry, channel: grpc.aio.Channel) -> None:
    status = await health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(service="ixo.entity.v1beta1.Query")
    )
    assert status.status == health_pb2.HealthCheckResponse.SERVING
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)

    async def ask() -> Any:
        yield reflection_pb2.ServerReflectionRequest(list_services="")

    names = set()
    async for response in stub.ServerReflectionInfo(ask()):
        names |= {s.name for s in response.list_services_response.service}
    assert {"ixo.entity.v1beta1.Query", "ixo.claims.v1beta1.Query"} <= names
