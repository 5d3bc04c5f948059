"""The gateway learning its routes by reflection alone, and surviving its node going away
and coming back, through real sockets on both backends."""

from __future__ import annotations

import asyncio

import pytest
from google.protobuf import descriptor_pool

from tests.conftest import Registry, free_port, unique
from tests.integration.registry.test_registry_basics import make_domain
from tests.support.chain_gateway import gateway_settings, running_gateway, running_node
from twinhub.chain.bootstrap import build_node
from twinhub.chain.gateway import app as gateway_app


def no_compiled_descriptors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the compiled descriptor set unusable, so only reflection can give routes."""

    def refuse() -> None:
        raise AssertionError("the gateway read the compiled descriptors")

    monkeypatch.setattr(gateway_app, "compiled_source", refuse)


async def test_routes_learnt_by_reflection_alone(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_compiled_descriptors(monkeypatch)
    created = await make_domain(registry, metadata={"name": unique("org")})
    settings = gateway_settings(registry.settings, gateway_legacy_routes=True)
    async with (
        running_node(registry.platform) as node,
        running_gateway(settings, node, routes_from="reflection") as gateway,
    ):
        table = gateway.app.table
        assert table is not None and len(table) == 41  # 31 annotated routes + 10 aliases
        entity_route = next(r for r in table if r.template == "/ixo/entity/{id}")
        # The message classes come from the reflected descriptors, not twinhub's modules.
        pool = entity_route.method.request_type.DESCRIPTOR.file.pool
        assert pool is not descriptor_pool.Default()
        params = await gateway.get("/ixo/claims/params")
        assert params.status_code == 200
        assert params.json()["params"]["network_fee_percentage"] == "0.000000000000000000"
        listing = await gateway.get("/ixo/entity?pagination.limit=2&pagination.count_total=true")
        assert listing.status_code == 200 and len(listing.json()["entities"]) <= 2
        assert listing.json()["pagination"]["total"] != "0"
        did = created["did"]
        project = await gateway.get(f"/project/{did}")  # an alias, resolved on reflected methods
        assert project.json()["entity"]["id"] == did
        assert (await gateway.get("/did/did:ixo:entity/nothing-here")).status_code == 404
        swagger = (await gateway.get("/swagger/")).json()
        assert set(swagger["paths"]) == {route.template for route in table}


async def test_node_going_away_and_coming_back(registry: Registry) -> None:
    port = free_port()
    node = build_node(registry.platform)
    assert await node.start("127.0.0.1", port) == port
    settings = gateway_settings(registry.settings)
    async with running_gateway(settings, f"127.0.0.1:{port}") as gateway:
        assert (await gateway.get("/ixo/token/params")).status_code == 200
        await node.stop(0)
        for _ in range(3):  # refused at once, each time, with the fixed message
            down = await gateway.get("/ixo/token/params")
            assert down.status_code == 503, down.text
            assert down.json() == {
                "code": 14,
                "message": "the chain node is unavailable; try again shortly",
                "details": [],
            }
        assert (await gateway.get("/health")).status_code == 503
        node = build_node(registry.platform)
        assert await node.start("127.0.0.1", port) == port
        try:
            back = await gateway.get("/ixo/token/params")  # the very first request succeeds
            assert back.status_code == 200, back.text
            assert back.headers["x-cosmos-block-height"]
            assert (await gateway.get("/health")).json()["upstream"] == "serving"
        finally:
            await node.stop(0)


async def test_reflection_waits_for_a_node_that_is_down_at_start(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_compiled_descriptors(monkeypatch)
    port = free_port()
    settings = gateway_settings(registry.settings)
    async with running_gateway(settings, f"127.0.0.1:{port}", routes_from="reflection") as gateway:
        early = await gateway.get("/ixo/token/params")
        assert early.status_code == 503
        assert early.json()["code"] == 14
        assert (await gateway.get("/swagger/")).status_code == 503
        assert (await gateway.get("/health")).json()["status"] == "error"
        async with running_node(registry.platform, port):
            for _ in range(200):  # the background retry runs at most 5 s apart
                if gateway.app.table is not None:
                    break
                await asyncio.sleep(0.05)
            assert gateway.app.table is not None, "the routes were never learnt"
            learnt = await gateway.get("/ixo/token/params")
            assert learnt.status_code == 200, learnt.text
        gone = await gateway.get("/ixo/token/params")
        assert gone.status_code == 503
