"""The node's read path (services/read_model.py, the per-version message cache) answers
exactly what the domain service answers, and never a stale answer: after a write the
next query shows it. Both backends (SQLite takes the direct path, PostgreSQL the
services), so the two paths are held to one result."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import grpc
import pytest

from tests.conftest import BACKENDS, Registry
from tests.support.chain_gateway import running_node
from tests.support.claims_world import World
from twinhub.chain.node.answers import Dispatcher
from twinhub.chain.node.common import Servicer, VersionCache
from twinhub.chain.node.entity import EntityQuery, IidQuery, entity_message, iid_document
from twinhub.chain.protos.cosmos.base.query.v1beta1.pagination_pb2 import PageRequest
from twinhub.chain.protos.ixo.entity.v1beta1 import query_pb2 as entity_q
from twinhub.chain.protos.ixo.entity.v1beta1 import query_pb2_grpc as entity_grpc
from twinhub.chain.protos.ixo.iid.v1beta1 import query_pb2 as iid_q
from twinhub.chain.protos.ixo.iid.v1beta1 import query_pb2_grpc as iid_grpc
from twinhub.platform import Platform
from twinhub.services.domains import DomainFilter
from twinhub.services.paging import Window
from twinhub.services.read_model import ReadModel

POSTGRESQL = next(b for b in BACKENDS if b.database == "postgresql")


@pytest.fixture
async def channel(registry: Registry) -> AsyncIterator[grpc.aio.Channel]:
    async with (
        running_node(registry.platform) as address,
        grpc.aio.insecure_channel(address) as opened,
    ):
        yield opened


async def test_read_model_records_are_the_services_records(
    registry: Registry, world: World
) -> None:
    """Field for field, for domains with edges, services, controllers, a verified flag
    and a deactivated one."""
    gone = await world.asset()
    assert (await registry.client.delete(f"/v1/domains/{gone}")).status_code in (200, 204)
    reads = ReadModel(registry.platform)
    assert reads.fast  # a file SQLite database and PostgreSQL both have the direct path
    try:
        dids = [world.organisation, world.project, world.oracle, gone]
        for did in dids:
            expected = await registry.platform.domains.get(did)
            if reads.fast:
                row = await reads.domains.domain_row(did)
                assert row is not None and row.version == expected["version"]
                assert await reads.domains.domain(row) == expected, did
        if reads.fast:
            page = await reads.domains.domain_page(Window(limit=500, count_total=True))
            service_page = await registry.platform.domains.window(
                DomainFilter(), Window(limit=500, count_total=True)
            )
            assert [r.did for r in page.items] == [r["did"] for r in service_page.items]
            assert page.total == service_page.total
            for row, record in zip(page.items, service_page.items, strict=True):
                assert entity_message(row.record()) == entity_message(record)
        types = await reads.domains.types_of([world.organisation, world.project])
        assert types == {world.organisation: "Organisation", world.project: "Project"}
        assert await reads.height() == await registry.platform.ledger.height()
    finally:
        reads.close()


async def test_a_write_is_seen_by_the_next_query(
    registry: Registry, world: World, channel: grpc.aio.Channel
) -> None:
    """The cached messages and the cached height never outlive the version they were
    built for."""
    entity = entity_grpc.QueryStub(channel)
    iid = iid_grpc.QueryStub(channel)
    did = world.organisation
    before_call = entity.Entity(entity_q.QueryEntityRequest(id=did))
    before = await before_call
    height_before = int(dict(await before_call.initial_metadata())["x-cosmos-block-height"])
    # Newest first: the shared database of a whole test run holds many older entities.
    newest = entity_q.QueryEntityListRequest(pagination=PageRequest(reverse=True))
    listed = await entity.EntityList(newest)
    assert did in {e.id for e in listed.entities}
    # Read again, the page comes from the built messages: the same answer.
    assert await entity.EntityList(newest) == listed
    documents = iid_q.QueryIidDocumentsRequest(pagination=PageRequest(limit=3, reverse=True))
    assert await iid.IidDocuments(documents) == await iid.IidDocuments(documents)
    changed = await world.operator_client.patch(
        f"/v1/domains/{did}", json={"metadata": {"name": "Renamed Co-op"}}
    )
    assert changed.status_code == 200, changed.text
    target = await world.asset()
    related = await world.operator_client.post(
        f"/v1/domains/{did}/relationships", json={"type": "owns", "target": target}
    )
    assert related.status_code in (200, 201), related.text
    after_call = entity.Entity(entity_q.QueryEntityRequest(id=did))
    after = await after_call
    height_after = int(dict(await after_call.initial_metadata())["x-cosmos-block-height"])
    assert height_after > height_before
    assert height_after == await registry.platform.ledger.height()
    assert int(after.entity.metadata.version_id) == int(before.entity.metadata.version_id) + 2
    linked = {(e.relationship, e.id) for e in after.iidDocument.linkedEntity}
    assert ("owns", target) in linked
    document = (await iid.IidDocument(iid_q.QueryIidDocumentRequest(id=did))).iidDocument
    assert document == after.iidDocument
    record = await registry.platform.domains.get(did)
    types = await registry.platform.domains.types_of([e["target"] for e in record["relationships"]])
    assert after.entity == entity_message(record)
    assert after.iidDocument == iid_document(record, types)
    again = await entity.EntityList(newest)
    version = next(e.metadata.version_id for e in again.entities if e.id == did)
    assert version == after.entity.metadata.version_id


def test_servicers_share_one_read_model_when_given(registry: Registry) -> None:
    reads = ReadModel(registry.platform)
    servicer = Servicer(registry.platform, reads)
    assert servicer.reads is reads


async def test_entity_answers_are_the_services_answers_byte_for_byte(
    registry: Registry, world: World
) -> None:
    """`Entity` and `EntityList` on the read model answer bytes joined from items encoded
    once per version (common.encoded_field): the same bytes as the services' messages
    serialised, page by page, built or not, and with the items pushed out between reads."""
    from tests.integration.chain.test_node_claims_reads import ServiceReads, reply

    platform = registry.platform
    renamed = await world.asset()
    changed = await world.operator_client.patch(
        f"/v1/domains/{renamed}", json={"metadata": {"name": "renamed stove"}}
    )
    assert changed.status_code == 200, changed.text
    gone = await world.asset()
    assert (await registry.client.delete(f"/v1/domains/{gone}")).status_code in (200, 204)
    fast_reads, service_reads = ReadModel(platform), ServiceReads(platform)
    fast, old = entity_dispatcher(platform, fast_reads), entity_dispatcher(platform, service_reads)
    tiny = entity_dispatcher(platform, fast_reads, messages=2)
    path = "/ixo.entity.v1beta1.Query/"
    try:
        compared = 0
        for reverse in (False, True):  # forwards from the oldest, backwards from the newest
            page = PageRequest(limit=2, reverse=reverse)
            for _ in range(30):
                asked = entity_q.QueryEntityListRequest(pagination=page).SerializeToString()
                for _twice in range(2):  # then from the built items
                    status, body = await reply(fast, path + "EntityList", asked)
                    assert status == "OK"
                    assert (status, body) == await reply(old, path + "EntityList", asked)
                    assert (status, body) == await reply(tiny, path + "EntityList", asked)
                listed = entity_q.QueryEntityListResponse.FromString(body)
                compared += len(listed.entities)
                if not listed.pagination.next_key:
                    break
                page = PageRequest(limit=2, reverse=reverse, key=listed.pagination.next_key)
        assert compared >= 10  # both ways, a few pages each
        singles = [
            entity_q.QueryEntityListRequest(pagination=PageRequest(**options))
            for options in (
                {},
                {"limit": 2, "offset": 1},
                {"limit": 3, "count_total": True, "reverse": True},
                {"key": b"1", "offset": 1},  # refused alike
                {"key": b"x"},
                {"limit": 1001},
            )
        ]
        asks = [(path + "EntityList", s.SerializeToString()) for s in singles]
        iid = "/ixo.iid.v1beta1.Query/"
        for single in singles[:3]:  # IidDocuments pages walk the same keys (domain_page)
            documents = iid_q.QueryIidDocumentsRequest(pagination=single.pagination)
            asks.append((iid + "IidDocuments", documents.SerializeToString()))
        for did in (renamed, gone, world.organisation, world.project, "did:ixo:nope", ""):
            request = entity_q.QueryEntityRequest(id=did).SerializeToString()
            asks.append((path + "Entity", request))
            document = iid_q.QueryIidDocumentRequest(id=did).SerializeToString()
            asks.append((iid + "IidDocument", document))
        for method, asked in asks * 2:  # the second time from the built items
            expected = await reply(old, method, asked)
            assert await reply(fast, method, asked) == expected, (method, asked)
            assert await reply(tiny, method, asked) == expected, (method, asked)
    finally:
        await fast_reads.aclose()
        await service_reads.aclose()


def entity_dispatcher(platform: Platform, reads: ReadModel, messages: int = 20_000) -> Dispatcher:
    """A node's dispatcher for the entity and IID services keeping no answers and at most
    `messages` built messages and items."""
    found = Dispatcher(reads, 0)
    shared = (platform, reads, VersionCache(messages))
    found.add(EntityQuery(*shared), entity_q.DESCRIPTOR.services_by_name["Query"])
    found.add(IidQuery(*shared), iid_q.DESCRIPTOR.services_by_name["Query"])
    return found


async def test_a_servicer_registered_the_generated_way_answers_messages(
    registry: Registry, world: World
) -> None:
    """Methods that answer their serialised message (bytes) still serve a generated
    handler, which serialises a message: `query` parses the bytes back, so the client
    reads what the node's own server answers."""
    platform = registry.platform
    reads = ReadModel(platform)
    server = grpc.aio.server()
    entity_grpc.add_QueryServicer_to_server(EntityQuery(platform, reads), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    node = entity_dispatcher(platform, reads)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as opened:
            stub = entity_grpc.QueryStub(opened)
            single = entity_q.QueryEntityRequest(id=world.organisation)
            page = entity_q.QueryEntityListRequest(pagination=PageRequest(limit=2, reverse=True))
            for call, request, path in (
                (stub.Entity, single, "Entity"),
                (stub.EntityList, page, "EntityList"),
            ):
                expected = await node.answer(
                    f"/ixo.entity.v1beta1.Query/{path}", request.SerializeToString()
                )
                answered = call(request)
                assert (await answered).SerializeToString() == expected.body
                height = dict(await answered.initial_metadata())["x-cosmos-block-height"]
                assert int(height) == expected.height
    finally:
        await server.stop(0)
        await reads.aclose()


async def test_a_page_is_kept_under_its_print_until_a_row_of_it_changes(
    registry: Registry, world: World
) -> None:
    """A page's joined items are kept under its print (`Servicer.page`): asked again, no
    row is read; after a write to one of its entities the print differs and the page is
    built again, equal to the services' answer byte for byte."""
    from tests.integration.chain.test_node_claims_reads import ServiceReads, reply

    platform = registry.platform
    stove = await world.asset()  # the newest entity: on the newest page
    fast_reads, service_reads = ReadModel(platform), ServiceReads(platform)
    fast, old = entity_dispatcher(platform, fast_reads), entity_dispatcher(platform, service_reads)
    keys_read = 0
    domain_keys = fast_reads.domains.domain_keys

    async def counted(window: Window) -> object:
        nonlocal keys_read
        keys_read += 1
        return await domain_keys(window)

    fast_reads.domains.domain_keys = counted  # type: ignore[method-assign]
    path = "/ixo.entity.v1beta1.Query/EntityList"
    newest = entity_q.QueryEntityListRequest(pagination=PageRequest(limit=5, reverse=True))
    asked = newest.SerializeToString()
    try:
        first = await reply(fast, path, asked)
        assert first == await reply(old, path, asked) and first[0] == "OK"
        assert stove in {
            e.id for e in entity_q.QueryEntityListResponse.FromString(first[1]).entities
        }
        assert keys_read == 1
        assert await reply(fast, path, asked) == first and keys_read == 1  # kept: no rows read
        changed = await world.operator_client.patch(
            f"/v1/domains/{stove}", json={"metadata": {"name": "renamed stove"}}
        )
        assert changed.status_code == 200, changed.text
        after = await reply(fast, path, asked)
        assert keys_read == 2 and after != first
        assert after == await reply(old, path, asked)
        # A page asking for the count still counts (the items are kept, not the total).
        counted_page = entity_q.QueryEntityListRequest(
            pagination=PageRequest(limit=5, reverse=True, count_total=True)
        ).SerializeToString()
        assert await reply(fast, path, counted_page) == await reply(old, path, counted_page)
    finally:
        await fast_reads.aclose()
        await service_reads.aclose()


@pytest.mark.parametrize("backend", [POSTGRESQL], ids=str, indirect=True)
async def test_the_records_pool_sends_no_reset_after_each_read(
    registry: Registry, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL (SQLite reads its file directly) the read model's own pool gives a
    connection back without asyncpg's reset statement, a round trip per read: its
    connections hold no session state."""

    resets: list[object] = []
    real = asyncpg.connection.Connection.reset

    async def counted(self: asyncpg.Connection, **options: Any) -> None:
        resets.append(self)
        await real(self, **options)

    monkeypatch.setattr(asyncpg.connection.Connection, "reset", counted)
    reads = ReadModel(registry.platform)
    try:
        for _ in range(5):
            row = await reads.domains.domain_row(world.project)
            assert row is not None
            assert await reads.domains.domain(row) == await registry.platform.domains.get(
                world.project
            )
        assert await reads.domains.domain_row("did:ixo:entity/not-there") is None
    finally:
        reads.close()
    assert resets == []
