"""Gateway configuration through real sockets on both backends: route prefix, legacy
aliases, disabled methods, API keys, CORS, rate limit, upstream deadline, metrics, health."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.conftest import Registry, unique
from tests.integration.registry.test_registry_basics import make_domain
from tests.support.chain_gateway import gateway_settings, running_gateway, running_node


@pytest.fixture
async def node(registry: Registry) -> AsyncIterator[str]:
    async with running_node(registry.platform) as address:
        yield address


async def test_route_prefix_and_legacy_aliases(registry: Registry, node: str) -> None:
    did = (await make_domain(registry, metadata={"name": unique("org")}))["did"]
    settings = gateway_settings(
        registry.settings, gateway_route_prefix="chain", gateway_legacy_routes=True
    )
    async with running_gateway(settings, node) as gateway:
        entity = await gateway.get(f"/chain/entity/{did}")
        assert entity.status_code == 200 and entity.json()["entity"]["id"] == did
        verified = await gateway.get(f"/chain/entity/{did}/verified")
        assert verified.json() == {"entity_verified": False}
        moved = await gateway.get(f"/ixo/entity/{did}")  # a prefix this deployment dropped
        assert moved.status_code == 404 and moved.json()["code"] == 5
        # The amino-era routes have no prefix; the others follow it.
        project = await gateway.get(f"/project/{did}")
        assert project.json() == entity.json()
        document = await gateway.get(f"/did/{did}")
        assert document.json()["iidDocument"]["id"] == did
        assert (await gateway.get("/chain/entity/config")).json()["params"].keys() == {
            "nftContractAddress",
            "nftContractMinter",
            "createSequence",
        }
        token = await gateway.get("/chain/token/config")
        assert token.json() == {"params": {"ixo1155_contract_code": "0"}}
        collections = await gateway.get("/chain/collection?pagination.limit=1")
        assert collections.status_code == 200 and "collections" in collections.json()
        assert (await gateway.get("/chain/claim")).status_code == 200
        assert (await gateway.get("/chain/dispute")).json()["disputes"] == []
        assert (await gateway.get("/chain/collection/999999999")).status_code == 404
        assert (await gateway.get(f"/chain/claim/{unique('no-claim')}")).status_code == 404
        assert (await gateway.get(f"/chain/dispute/{unique('proof')}")).status_code == 404
        paths = set((await gateway.get("/swagger/")).json()["paths"])
        assert {"/chain/collection/{id}", "/did/{id}", "/project/{id}", "/chain/entity/{id}"} <= (
            paths
        )
        assert not any(path.startswith("/ixo/") for path in paths)
    async with running_gateway(gateway_settings(registry.settings), node) as plain:
        assert (await plain.get(f"/did/{did}")).status_code == 404  # aliases are off by default
        assert (await plain.get("/ixo/collection")).status_code == 404
        assert (await plain.get("/ixo/entity/config")).status_code == 404
        paths = set((await plain.get("/swagger/")).json()["paths"])
        assert "/did/{id}" not in paths and "/ixo/entity/{id}" in paths


async def test_disabled_methods_answer_501(registry: Registry, node: str) -> None:
    settings = gateway_settings(
        registry.settings,
        gateway_disabled_methods="ixo.claims.v1beta1.Query/DisputeList, "
        "ixo.entity.v1beta1.Query/EntityList",
    )
    async with running_gateway(settings, node) as gateway:
        for path in ("/ixo/claims/disputes", "/ixo/entity?pagination.limit=1"):
            response = await gateway.get(path)
            assert response.status_code == 501, path
            assert response.json()["code"] == 12
            assert "disabled" in response.json()["message"]
        assert (await gateway.get("/ixo/claims/params")).status_code == 200


async def test_api_keys_gate_every_route(registry: Registry, node: str) -> None:
    settings = gateway_settings(registry.settings, gateway_api_keys="key-one,key-two")
    async with running_gateway(settings, node) as gateway:
        bare = await gateway.get("/ixo/claims/params")
        assert bare.status_code == 401
        assert bare.json()["code"] == 16 and bare.json()["details"] == []
        assert bare.headers["www-authenticate"].startswith("Bearer")
        assert (await gateway.get("/nowhere")).status_code == 401  # no route map for strangers
        assert (await gateway.get("/swagger/")).status_code == 401
        basic = await gateway.get("/ixo/claims/params", headers={"Authorization": "Basic a2V5"})
        assert basic.status_code == 401
        wrong = await gateway.get("/ixo/claims/params", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 403 and wrong.json()["code"] == 7
        for key in ("key-one", "key-two"):
            good = await gateway.get(
                "/ixo/claims/params", headers={"Authorization": f"Bearer {key}"}
            )
            assert good.status_code == 200, good.text
        swagger = await gateway.get("/swagger/", headers={"Authorization": "Bearer key-one"})
        assert swagger.json()["security"] == [{"bearer": []}]
        # Probes stay open.
        assert (await gateway.get("/health")).status_code == 200
        assert (await gateway.get("/metrics")).status_code == 200


async def test_cors_grants_only_listed_origins(registry: Registry, node: str) -> None:
    listed, other = "https://explorer.example", "https://evil.example"
    async with running_gateway(gateway_settings(registry.settings), node) as closed:
        response = await closed.get("/ixo/token/params", headers={"Origin": listed})
        assert response.status_code == 200
        assert "access-control-allow-origin" not in response.headers
        preflight = await closed.client.options(
            "/ixo/token/params",
            headers={"Origin": listed, "Access-Control-Request-Method": "GET"},
        )
        assert "access-control-allow-origin" not in preflight.headers
    settings = gateway_settings(registry.settings, gateway_cors_origins=listed)
    async with running_gateway(settings, node) as gateway:
        granted = await gateway.get("/ixo/token/params", headers={"Origin": listed})
        assert granted.headers["access-control-allow-origin"] == listed
        assert "x-cosmos-block-height" in granted.headers["access-control-expose-headers"]
        assert granted.headers["vary"] == "Origin"
        refused = await gateway.get("/ixo/token/params", headers={"Origin": other})
        assert refused.status_code == 200
        assert "access-control-allow-origin" not in refused.headers
        assert refused.headers["vary"] == "Origin"  # caches must key on Origin (issue 15.6)
        long_path = await gateway.get("/ixo/entity/" + "a" * 9000)
        assert long_path.status_code == 414
        assert long_path.json() == {
            "code": 3,
            "message": "the path is longer than 8192 bytes",
            "details": [],
        }
        preflight = await gateway.client.options(
            "/ixo/token/params",
            headers={"Origin": listed, "Access-Control-Request-Method": "GET"},
        )
        assert preflight.status_code == 204
        assert preflight.headers["access-control-allow-origin"] == listed
        assert preflight.headers["access-control-allow-methods"] == "GET, OPTIONS"
        allowed = preflight.headers["access-control-allow-headers"].lower().split(", ")
        assert "x-cosmos-block-height" in allowed  # a browser may ask for a height
        for origin, method in ((other, "GET"), (listed, "POST")):
            denied = await gateway.client.options(
                "/ixo/token/params",
                headers={"Origin": origin, "Access-Control-Request-Method": method},
            )
            assert "access-control-allow-methods" not in denied.headers, (origin, method)
        errors = await gateway.get("/nowhere", headers={"Origin": listed})
        assert errors.headers["access-control-allow-origin"] == listed  # readable errors


async def test_rate_limit_answers_429(registry: Registry, node: str) -> None:
    settings = gateway_settings(registry.settings, gateway_rate_limit="3/minute")
    async with running_gateway(settings, node) as gateway:
        statuses = [(await gateway.get("/ixo/token/params")).status_code for _ in range(4)]
        assert statuses == [200, 200, 200, 429]
        limited = await gateway.get("/ixo/token/params")
        assert limited.json()["code"] == 8 and int(limited.headers["retry-after"]) >= 1
        assert (await gateway.get("/health")).status_code == 200  # probes are not limited


async def test_upstream_deadline_is_504(registry: Registry, node: str) -> None:
    # A deadline no call can meet: the call is over before the node can answer.
    settings = gateway_settings(registry.settings, gateway_upstream_timeout_seconds=1e-6)
    async with running_gateway(settings, node) as gateway:
        response = await gateway.get("/ixo/claims/params")
        assert response.status_code == 504
        assert response.json() == {
            "code": 4,
            "message": "the chain node did not answer in time",
            "details": [],
        }


async def test_metrics_and_health(registry: Registry, node: str) -> None:
    async with running_gateway(gateway_settings(registry.settings), node) as gateway:
        await gateway.get("/ixo/token/params")
        await gateway.get("/nowhere")
        health = await gateway.get("/health")
        assert health.json() == {"status": "ok", "upstream": "serving", "routes": 31}
        text = (await gateway.get("/metrics")).text
        assert (
            'twinhub_gateway_requests_total{route="ixo.token.v1beta1.Query/Params",status="200"}'
            in text
        )
        assert 'twinhub_gateway_requests_total{route="unmatched",status="404"}' in text
        assert "twinhub_gateway_request_seconds_bucket" in text
