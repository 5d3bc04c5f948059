"""The node's read path (services/read_model.py, the per-version message cache) answers
exactly what the domain service answers, and never a stale answer: after a write the
next query shows it. Both backends (SQLite takes the direct path, PostgreSQL the
services), so the two paths are held to one result."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from tests.chain_gateway import running_node
from tests.claims_world import World
from tests.conftest import Registry
from twinhub.chain.node.common import Servicer
from twinhub.chain.node.entity import entity_message, iid_document
from twinhub.chain.protos.cosmos.base.query.v1beta1.pagination_pb2 import PageRequest
from twinhub.chain.protos.ixo.entity.v1beta1 import query_pb2 as entity_q
from twinhub.chain.protos.ixo.entity.v1beta1 import query_pb2_grpc as entity_grpc
from twinhub.chain.protos.ixo.iid.v1beta1 import query_pb2 as iid_q
from twinhub.chain.protos.ixo.iid.v1beta1 import query_pb2_grpc as iid_grpc
from twinhub.services.domains import DomainFilter
from twinhub.services.paging import Window
from twinhub.services.read_model import ReadModel


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
                row = await reads.domain_row(did)
                assert row is not None and row.version == expected["version"]
                assert await reads.domain(row) == expected, did
        if reads.fast:
            page = await reads.domain_page(Window(limit=500, count_total=True))
            service_page = await registry.platform.domains.window(
                DomainFilter(), Window(limit=500, count_total=True)
            )
            assert [r.did for r in page.items] == [r["did"] for r in service_page.items]
            assert page.total == service_page.total
            for row, record in zip(page.items, service_page.items, strict=True):
                assert entity_message(row.record()) == entity_message(record)
        types = await reads.types_of([world.organisation, world.project])
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
