"""Collection members and agent deposits on the node (over a real loopback gRPC socket) and
through the REST gateway, on both backends: who is a member, their budgets and deposits,
Cosmos paging, and that concurrent first claims of one agent make one member."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from urllib.parse import quote

import grpc
import pytest
from alembic import command
from sqlalchemy import Connection, inspect

from tests.conftest import Backend, Registry, RegistryFactory, fresh_postgres_database
from tests.support.chain_gateway import (
    RunningGateway,
    gateway_settings,
    running_gateway,
    running_node,
)
from tests.support.claims_world import World, build_world
from twinhub.chain.protos.cosmos.base.query.v1beta1.pagination_pb2 import PageRequest
from twinhub.chain.protos.ixo.claims.v1beta1 import query_pb2 as q
from twinhub.chain.protos.ixo.claims.v1beta1 import query_pb2_grpc as claims_grpc
from twinhub.db.migrate import alembic_config
from twinhub.db.models import AgentDeposit
from twinhub.services.paging import Window


@pytest.fixture
async def node(registry: Registry) -> AsyncIterator[str]:
    async with running_node(registry.platform) as address:
        yield address


@pytest.fixture
async def claims(node: str) -> AsyncIterator[claims_grpc.QueryStub]:
    async with grpc.aio.insecure_channel(node) as channel:
        yield claims_grpc.QueryStub(channel)


async def _submit(world: World, collection: int, stove: str, month: int = 1) -> str:
    """A fuel report of the stove for `month` of 2026 (a stove-month is counted once)."""
    period = {
        "periodStart": f"2026-{month:02d}-01T00:00:00Z",
        "periodEnd": f"2026-{month:02d}-15T00:00:00Z",
    }
    answer = await world.operator_client.post(
        f"/v1/claim-collections/{collection}/claims",
        json={"asset": stove, "data": {"reportType": "fuel", "fuelKg": 1.5, **period}},
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["agent"])


async def test_evaluators_and_submitters_are_members(
    registry: Registry, world: World, claims: claims_grpc.QueryStub
) -> None:
    collection = (await world.collection())["id"]
    ident = str(collection)
    listed = await claims.CollectionMemberList(
        q.QueryCollectionMemberListRequest(collectionId=ident)
    )
    assert [m.member_address for m in listed.member_budgets] == [world.oracle]  # opened
    stove = await world.asset()
    # Five first claims of one agent at once: every one is accepted, one member results.
    agents = await asyncio.gather(*(_submit(world, collection, stove, m) for m in range(1, 6)))
    agent = agents[0]
    assert set(agents) == {agent}
    listed = await claims.CollectionMemberList(
        q.QueryCollectionMemberListRequest(
            collectionId=ident, pagination=PageRequest(count_total=True)
        )
    )
    assert [m.member_address for m in listed.member_budgets] == [world.oracle, agent]
    assert listed.pagination.total == 2
    one = (
        await claims.CollectionMember(
            q.QueryCollectionMemberRequest(collectionId=ident, memberAddress=agent)
        )
    ).member_budget
    assert one.collection_id == ident and one.HasField("period") and one.period.seconds == 0
    assert list(one.period_spend_limit) == [] and not one.HasField("period_reset_at")
    # Keyset pages: one member per page, the second page after the first's key.
    first = await claims.CollectionMemberList(
        q.QueryCollectionMemberListRequest(collectionId=ident, pagination=PageRequest(limit=1))
    )
    second = await claims.CollectionMemberList(
        q.QueryCollectionMemberListRequest(
            collectionId=ident, pagination=PageRequest(limit=1, key=first.pagination.next_key)
        )
    )
    assert [m.member_address for m in (*first.member_budgets, *second.member_budgets)] == [
        world.oracle,
        agent,
    ]
    assert second.pagination.next_key == b""
    for request, code in (
        (q.QueryCollectionMemberRequest(collectionId=ident, memberAddress="did:ixo:org/x"), 5),
        (q.QueryCollectionMemberRequest(collectionId="999999", memberAddress=agent), 5),
        (q.QueryCollectionMemberRequest(collectionId=ident), 3),
        (q.QueryCollectionMemberRequest(collectionId="x", memberAddress=agent), 3),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await claims.CollectionMember(request)
        assert refused.value.code().value[0] == code, request


async def test_deposits_of_agent_members(
    registry: Registry, world: World, claims: claims_grpc.QueryStub
) -> None:
    collection = (await world.collection())["id"]
    ident = str(collection)
    agent = await _submit(world, collection, await world.asset())
    balance = (
        await claims.AgentDepositBalance(
            q.QueryAgentDepositBalanceRequest(collectionId=ident, agentAddress=agent)
        )
    ).balance
    assert balance.agent_address == agent and list(balance.amount) == []  # none required
    with pytest.raises(grpc.aio.AioRpcError) as evaluator:
        await claims.AgentDepositBalance(
            q.QueryAgentDepositBalanceRequest(collectionId=ident, agentAddress=world.oracle)
        )
    assert evaluator.value.code() is grpc.StatusCode.NOT_FOUND  # evaluators deposit nothing
    until = datetime(2031, 1, 1, tzinfo=UTC)
    async with registry.platform.sessionmaker.begin() as session:
        session.add(
            AgentDeposit(
                collection_id=collection,
                agent=agent,
                denom="uixo",
                amount=250,
                withdrawable_at=until,
            )
        )
    listed = await claims.AgentDepositBalanceList(
        q.QueryAgentDepositBalanceListRequest(collectionId=ident)
    )
    assert [
        (b.agent_address, [(c.denom, c.amount) for c in b.amount]) for b in listed.balances
    ] == [(agent, [("uixo", "250")])]
    assert listed.balances[0].withdrawable_at.ToDatetime(tzinfo=UTC) == until


async def test_member_routes_through_the_gateway(
    registry: Registry, world: World, node: str
) -> None:
    collection = (await world.collection())["id"]
    agent = await _submit(world, collection, await world.asset())
    settings = gateway_settings(registry.platform.settings)
    gateway: RunningGateway
    async with running_gateway(settings, node) as gateway:
        member = await gateway.get(f"/ixo/claims/collection/{collection}/member/{agent}")
        assert member.status_code == 200, member.text
        assert member.json()["member_budget"]["member_address"] == agent
        assert member.json()["member_budget"]["period"] == "0s"
        deposit = await gateway.get(
            f"/ixo/claims/collection/{collection}/deposit/{quote(agent, safe='')}"
        )
        assert deposit.status_code == 200, deposit.text
        assert deposit.json()["balance"] == {
            "collection_id": str(collection),
            "agent_address": agent,
            "amount": [],
            "withdrawable_at": None,
        }
        deposits = (await gateway.get(f"/ixo/claims/collection/{collection}/deposits")).json()
        assert [b["agent_address"] for b in deposits["balances"]] == [agent]
        stranger = await gateway.get(f"/ixo/claims/collection/{collection}/member/did:ixo:org/z")
        assert stranger.status_code == 404 and stranger.json()["code"] == 5


def _migrate(connection: Connection, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    if revision == "head":
        command.upgrade(config, revision)
    else:
        command.downgrade(config, revision)


async def test_migration_backfills_members_and_goes_both_ways(
    backend: Backend, make_registry: RegistryFactory
) -> None:
    """0008 on a database that already has collections and claims: down to 0007 drops the
    tables, up again rebuilds the members from the evaluators and the claims' agents."""
    async with contextlib.AsyncExitStack() as stack:
        overrides = {}
        if backend.database == "postgresql":
            url = await stack.enter_async_context(fresh_postgres_database("members"))
            overrides["database_url"] = url
        registry = await make_registry(**overrides)
        world = await build_world(registry)
        stack.push_async_callback(world.close)
        collection = (await world.collection())["id"]
        agent = await _submit(world, collection, await world.asset())
        members = registry.platform.collection_members
        before = (await members.members_window(collection, Window())).items
        engine = registry.platform.engine
        async with engine.begin() as connection:
            await connection.run_sync(_migrate, "0007")
        async with engine.connect() as connection:
            tables = await connection.run_sync(lambda c: inspect(c).get_table_names())
        assert "collection_members" not in tables and "agent_deposits" not in tables
        async with engine.begin() as connection:
            await connection.run_sync(_migrate, "head")
        after = (await members.members_window(collection, Window())).items
        assert [(m.member, m.role) for m in after] == [
            (world.oracle, "evaluator"),
            (agent, "agent"),
        ]
        assert [(m.member, m.role) for m in before] == [(m.member, m.role) for m in after]
