"""The node's kept answers (chain/node/answers.py) on both backends: a repeated query is
answered from the kept bytes, and any write drops them, so the next query (gRPC or REST
through the in-process gateway) shows it: entities, claims and tokens alike."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
import pytest

from tests.conftest import Registry, unique
from tests.support.chain_gateway import gateway_settings, running_gateway
from tests.support.claims_world import METERED_AMOUNT, World, build_world, metered_claim
from tests.support.workflow_world import issue_claims
from twinhub.chain.bootstrap import build_node
from twinhub.chain.node import NodeServer, one_batch
from twinhub.chain.node.answers import Answer, AnswerCache, local_node
from twinhub.chain.protos.ixo.claims.v1beta1 import query_pb2 as claims_q
from twinhub.chain.protos.ixo.claims.v1beta1 import query_pb2_grpc as claims_grpc
from twinhub.chain.protos.ixo.entity.v1beta1 import query_pb2 as entity_q
from twinhub.chain.protos.ixo.entity.v1beta1 import query_pb2_grpc as entity_grpc
from twinhub.chain.protos.ixo.token.v1beta1 import query_pb2 as token_q
from twinhub.chain.protos.ixo.token.v1beta1 import query_pb2_grpc as token_grpc
from twinhub.services.read_model import ReadModel

ENTITY = "/ixo.entity.v1beta1.Query/Entity"


@dataclass
class Served:
    world: World
    server: NodeServer
    address: str


@pytest.fixture
async def served(registry: Registry) -> AsyncIterator[Served]:
    """A verified programme and a node on loopback answering from the same registry."""
    world = await build_world(registry)
    server = build_node(registry.platform)
    try:
        port = await server.start("127.0.0.1", 0)
        yield Served(world, server, f"127.0.0.1:{port}")
    finally:
        await server.stop(0)
        await world.close()


async def _height(call: grpc.aio.UnaryUnaryCall) -> int:
    return int(dict(await call.initial_metadata())["x-cosmos-block-height"])


async def test_a_kept_answer_is_dropped_by_the_next_write(
    registry: Registry, served: Served
) -> None:
    world, server, address = served.world, served.server, served.address
    request = entity_q.QueryEntityRequest(id=world.organisation)
    async with grpc.aio.insecure_channel(address) as channel:
        entity = entity_grpc.QueryStub(channel)
        first_call = entity.Entity(request)
        first = await first_call
        height = await _height(first_call)
        # The same answer object twice: kept, not rebuilt. (On PostgreSQL the version is the
        # cluster's snapshot, which other sessions' commits move too: hence a few tries.)
        for _ in range(20):
            kept = await server.dispatcher.answer(ENTITY, request.SerializeToString())
            if kept is await server.dispatcher.answer(ENTITY, request.SerializeToString()):
                break
        else:
            raise AssertionError("no answer was kept")
        assert kept.body == first.SerializeToString() and kept.height == height
        again = entity.Entity(request)
        assert await again == first and await _height(again) == height
        # A kept answer is still judged against the height a client asks for.
        with pytest.raises(grpc.aio.AioRpcError) as past:
            await entity.Entity(request, metadata=(("x-cosmos-block-height", str(height - 1)),))
        assert past.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        renamed = await world.operator_client.patch(
            f"/v1/domains/{world.organisation}", json={"metadata": {"name": unique("renamed")}}
        )
        assert renamed.status_code == 200, renamed.text
        after_call = entity.Entity(request)
        after = await after_call
        assert int(after.entity.metadata.version_id) == int(first.entity.metadata.version_id) + 1
        assert await _height(after_call) == await registry.platform.ledger.height() > height
        fresh = await server.dispatcher.answer(ENTITY, request.SerializeToString())
        assert fresh is not kept and fresh.body == after.SerializeToString()


async def test_claims_and_tokens_answers_follow_writes(registry: Registry, served: Served) -> None:
    world, address = served.world, served.address
    minter = registry.platform.credentials.issuer.did
    await world.approved_claim()
    await issue_claims(world)  # CARBON exists from here on
    collection = await world.collection()
    async with grpc.aio.insecure_channel(address) as channel:
        claims = claims_grpc.QueryStub(channel)
        tokens = token_grpc.QueryStub(channel)
        asked = claims_q.QueryCollectionRequest(id=str(collection["id"]))
        assert (await claims.Collection(asked)).collection.count == 0
        assert (await claims.Collection(asked)).collection.count == 0  # kept
        carbon = token_q.QueryTokenDocRequest(minter=minter, contract_address="CARBON")
        before = await tokens.TokenDoc(carbon)
        assert await tokens.TokenDoc(carbon) == before  # kept
        stove = await world.metered_asset()
        submitted = await world.operator_client.post(
            f"/v1/claim-collections/{collection['id']}/claims",
            json={"asset": stove, "data": metered_claim()},
        )
        assert submitted.status_code == 201, submitted.text
        assert (await claims.Collection(asked)).collection.count == 1
        evaluated = await world.oracle_client.post(
            f"/v1/claims/{submitted.json()['id']}/evaluations",
            json={"status": "approved"},
        )
        assert evaluated.status_code == 200, evaluated.text
        got = (await claims.Collection(asked)).collection
        assert (got.count, got.approved) == (1, 1)
        assert await tokens.TokenDoc(carbon) == before  # an approval mints nothing
        await issue_claims(world)
        after = await tokens.TokenDoc(carbon)
        assert int(after.tokenDoc.supply) == int(before.tokenDoc.supply) + METERED_AMOUNT


async def test_the_gateway_in_the_same_process_calls_the_node_directly(
    registry: Registry, served: Served
) -> None:
    world, server, address = served.world, served.server, served.address
    assert local_node(address) is server.dispatcher
    path = f"/ixo/entity/{world.project}"
    async with running_gateway(gateway_settings(registry.settings), address) as gateway:
        first = await gateway.get(path)
        assert first.status_code == 200, first.text
        height = int(first.headers["x-cosmos-block-height"])
        # The gateway's JSON is kept with the node's answer: the in-process path was taken.
        kept = [a for a in _answers(server) if a.json is not None]
        assert [a.json for a in kept] == [first.content]
        second = await gateway.get(path)
        assert second.content == first.content
        assert int(second.headers["x-cosmos-block-height"]) == height
        missing = await gateway.get(f"/ixo/entity/did:ixo:entity/{unique('none')}")
        assert missing.status_code == 404 and missing.json()["code"] == 5
        assert int(missing.headers["x-cosmos-block-height"]) == height
        stale = await gateway.get(path, headers={"x-cosmos-block-height": str(height - 1)})
        assert stale.status_code == 400 and "latest height" in stale.json()["message"]
        renamed = await world.operator_client.patch(
            f"/v1/domains/{world.project}", json={"metadata": {"name": unique("renamed")}}
        )
        assert renamed.status_code == 200, renamed.text
        after = await gateway.get(path)
        version = int(first.json()["entity"]["metadata"]["version_id"])
        assert int(after.json()["entity"]["metadata"]["version_id"]) == version + 1
        assert int(after.headers["x-cosmos-block-height"]) > height
    await server.stop(0)
    assert local_node(address) is None


def _answers(server: NodeServer) -> list[Answer]:
    cache = server.dispatcher.cache
    assert cache is not None
    return list(cache._items.values())


async def test_the_database_version_moves_with_every_commit(
    registry: Registry, served: Served
) -> None:
    world = served.world
    reads = ReadModel(registry.platform)
    try:
        first = await reads.version()
        assert first is not None  # a file SQLite database or PostgreSQL: answers are kept
        await world.asset()
        second = await reads.version()
        assert second != first
        assert await reads.height(second) == await registry.platform.ledger.height()
        # Concurrent queries share state reads on PostgreSQL: one round trip serves all
        # that arrived before it began. (Other sessions of the cluster, or this process's
        # background work, may commit meanwhile, so the versions seen are not compared.)
        before = reads._pg_started
        seen = await asyncio.gather(*(reads.version() for _ in range(20)))
        assert all(version is not None for version in seen)
        if registry.settings.storage.resolved_database_url.startswith("postgresql"):
            assert reads._pg_started - before <= 3  # 20 without sharing
    finally:
        await reads.aclose()


def test_the_answer_cache_is_bounded_and_keeps_one_version() -> None:
    cache = AnswerCache(max_bytes=3 * (100 + 3 + 200))
    for name in (b"one", b"two", b"six"):
        cache.put(None, ("/m", name), Answer(b"x" * 100, 1))  # no version: nothing kept
    assert len(cache) == 0
    assert cache.get(7, ("/m", b"one")) is None  # version 7 begins
    for name in (b"one", b"two", b"six", b"ten"):
        cache.put(7, ("/m", name), Answer(b"x" * 100, 1))
    assert len(cache) == 3 and cache.get(7, ("/m", b"one")) is None  # the oldest went
    assert cache.get(7, ("/m", b"ten")) is not None
    assert cache.get(8, ("/m", b"ten")) is None and len(cache) == 0  # a new version
    cache.put(7, ("/m", b"one"), Answer(b"x", 1))  # an answer of an older version
    assert len(cache) == 0


async def _exchanges(address: str, did: str, height: int) -> list[tuple[object, ...]]:
    """What a client sees of a few node calls: status, details, headers, trailers, body."""
    asks: list[tuple[bytes, tuple[tuple[str, str], ...]]] = [
        (entity_q.QueryEntityRequest(id=did).SerializeToString(), ()),
        (entity_q.QueryEntityRequest(id="did:ixo:entity:nobody").SerializeToString(), ()),
        (
            entity_q.QueryEntityRequest(id=did).SerializeToString(),
            (("x-cosmos-block-height", str(height)),),
        ),
        (
            entity_q.QueryEntityRequest(id=did).SerializeToString(),
            (("x-cosmos-block-height", str(height + 1000)),),
        ),
        (b"\xff\xff", ()),  # not a message
    ]
    seen: list[tuple[object, ...]] = []
    async with grpc.aio.insecure_channel(address) as channel:
        entity = channel.unary_unary(ENTITY)  # bytes in, bytes out
        for body, metadata in asks:
            call = entity(body, metadata=metadata)
            try:
                answer: bytes | None = await call
            except grpc.aio.AioRpcError:
                answer = None
            headers = tuple((k, v) for k, v in await call.initial_metadata() if k.startswith("x-"))
            trailers = tuple(await call.trailing_metadata())
            seen.append((await call.code(), await call.details(), headers, trailers, answer))
    return seen


async def test_one_batch_and_grpcs_own_path_answer_alike(
    registry: Registry, served: Served
) -> None:
    """The node sends header, answer and status in one batch (one_batch.py); grpc's public
    path (the header's own send first) must give a client exactly the same."""
    height = await registry.platform.ledger.height()
    assert one_batch.installed()  # the pinned grpc has the internals one_batch needs
    together = await _exchanges(served.address, served.world.organisation, height)
    one_batch.uninstall()
    try:
        apart = await _exchanges(served.address, served.world.organisation, height)
    finally:
        assert one_batch.install()
    assert together == apart
    codes = [seen[0] for seen in together]
    assert codes == [
        grpc.StatusCode.OK,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.OK,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.INVALID_ARGUMENT,
    ]
    assert all(seen[2][0][0] == "x-cosmos-block-height" for seen in together)
    assert together[0][4] is not None and together[0][4] == together[2][4]


async def test_node_one_batch_false_keeps_grpcs_public_path(registry: Registry) -> None:
    """NODE_ONE_BATCH=false: the node's handlers are made without taking grpc's internals."""
    from twinhub.chain.node.answers import Dispatcher

    dispatcher = Dispatcher(ReadModel(registry.platform), 0)
    one_batch.uninstall()
    try:
        assert dispatcher.generic_handlers(one_send=False)
        assert not one_batch.installed()
        assert dispatcher.generic_handlers(one_send=True)
        assert one_batch.installed()
    finally:
        one_batch.install()
