"""Every rule of the registry API (interface A), with its error: auth and roles, protocols,
domains and entities, reads and filters, the graph, changes and versions, idempotency, the
one error shape, body limits and the OpenAPI description.

The happy paths live in test_registry_basics.py; here are the boundaries, mostly as tables.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import secrets
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from sqlalchemy import text

import twinhub.services.api_keys as api_keys_module
from tests.conftest import (
    BACKENDS,
    BOOTSTRAP_KEY,
    Registry,
    RegistryFactory,
    backend_values,
    running_registry,
    unique,
)
from tests.integration.registry.test_registry_basics import make_domain, make_protocol
from tests.support.cli import base_env, run_cli
from twinhub.registry.app import create_registry_app
from twinhub.registry.routes import create_router, hot_router
from twinhub.registry.routes import router as v1_router
from twinhub.registry.routes_admin import router as admin_router
from twinhub.registry.routes_claims import router as claims_router
from twinhub.registry.routes_customers import router as customers_router
from twinhub.registry.routes_events import router as events_router
from twinhub.registry.routes_governance import router as governance_router
from twinhub.registry.routes_oracle import router as oracle_router
from twinhub.registry.routes_retirements import router as retirements_router
from twinhub.registry.routes_summaries import router as summaries_router
from twinhub.registry.routes_support import router as support_router
from twinhub.registry.routes_surveys import router as surveys_router
from twinhub.registry.routes_telemetry import router as telemetry_router
from twinhub.registry.routes_workflow import router as workflow_router
from twinhub.services.api_keys import BOOTSTRAP_PRINCIPAL
from twinhub.settings import Settings

ORG = "did:ixo:protocol/organisation"
PROJECT = "did:ixo:protocol/project"
ORACLE = "did:ixo:protocol/oracle"
DEVICE = "did:ixo:protocol/device"
TWIN_CLASSES = {"physical", "cognitive", "system", "oracle"}
BEYOND_64_BITS = "OTIyMzM3MjAzNjg1NDc3NTgwOA"  # a cursor naming 2**63


# -- one running registry per backend for this module -------------------------------------
@pytest.fixture(scope="module", params=BACKENDS, ids=str)
def module_settings(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Settings:
    """Synchronous, so that it may ask for the session's async database fixtures."""
    values = backend_values(request.param, tmp_path_factory.mktemp("registry"), request)
    return Settings(**values, twinhub_bootstrap_api_key=BOOTSTRAP_KEY)


@pytest.fixture(scope="module")
async def registry(module_settings: Settings) -> AsyncIterator[Registry]:
    """Overrides conftest's per-test registry: one app per backend serves this whole module,
    so that hundreds of table rows cost requests, not app starts. Tests only rely on data
    they made themselves (unique DIDs, controllers and slugs); tests that need other
    settings use `make_registry`."""
    async with running_registry(module_settings) as registry:
        yield registry


# -- helpers -------------------------------------------------------------------------------
def error_of(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    """The error object of a response, after checking the one shape every error has."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"code", "message", "details"}, error
    assert isinstance(error["code"], str) and error["code"]
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["details"], list)
    for detail in error["details"]:
        assert set(detail) == {"field", "error"}, detail
        assert isinstance(detail["field"], str) and isinstance(detail["error"], str)
    if code is not None:
        assert error["code"] == code, error
    return error


def fields_of(response: httpx.Response) -> list[str]:
    """The fields a 422 names, one detail per field."""
    error = error_of(response, 422, "validation_failed")
    return [detail["field"] for detail in error["details"]]


def did_of(principal: str) -> str:
    return f"did:ixo:org/{unique(principal)}"


async def count_domains(registry: Registry, **filters: str) -> int:
    response = await registry.client.get("/v1/domains", params={**filters, "count": "true"})
    assert response.status_code == 200, response.text
    return response.json()["total"]


async def every_page(client: httpx.AsyncClient, path: str, **params: Any) -> list[dict]:
    """Follow nextCursor to the end; every item of every page, in order."""
    items: list[dict] = []
    cursor = None
    for _ in range(1000):
        query = {**params, **({"cursor": cursor} if cursor else {})}
        response = await client.get(path, params=query)
        assert response.status_code == 200, response.text
        page = response.json()
        items += page["items"]
        cursor = page["nextCursor"]
        if cursor is None:
            return items
    raise AssertionError("pagination never ended")


async def make_entity(registry: Registry, protocol: str, **fields: Any) -> dict:
    body = {"type": "Device", "protocol": protocol, **fields}
    response = await registry.client.post("/v1/entities", json=body)
    assert response.status_code == 201, response.text
    return response.json()


# -- auth ----------------------------------------------------------------------------------
ROUTES_NEEDING_A_KEY = [
    ("GET", "/v1/protocols", None),
    ("GET", "/v1/protocols/did:ixo:protocol/organisation", None),
    ("POST", "/v1/protocols", {"type": "Protocol", "name": "x"}),
    ("GET", "/v1/domains", None),
    ("POST", "/v1/domains", {"type": "Organisation", "class": ORG}),
    ("POST", "/v1/entities", {"type": "Organisation", "protocol": ORG}),
    ("GET", "/v1/domains/did:ixo:entity/nobody", None),
    ("PATCH", "/v1/domains/did:ixo:entity/nobody", {"metadata": {}}),
    ("DELETE", "/v1/domains/did:ixo:entity/nobody", None),
    ("GET", "/v1/domains/did:ixo:entity/nobody/history", None),
    ("GET", "/v1/domains/did:ixo:entity/nobody/graph", None),
    (
        "POST",
        "/v1/domains/did:ixo:entity/nobody/relationships",
        {"type": "x", "target": "did:ixo:entity/y"},
    ),
]


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer thk_000000000000_notasecret",
        "Bearer " + secrets.token_urlsafe(32),
        "Bearer bootstrap-wrong",
        "Basic dXNlcjpwYXNz",
        "thk_000000000000_noscheme",
        "Bearer",
    ],
    ids=["missing", "unknown", "random", "wrong-bootstrap", "basic", "no-scheme", "empty"],
)
async def test_every_v1_route_needs_a_known_key(
    registry: Registry, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    async with registry.as_key(None) as anonymous:
        for method, path, body in ROUTES_NEEDING_A_KEY:
            response = await anonymous.request(method, path, json=body, headers=headers)
            error_of(response, 401, "unauthorized")
            assert response.headers["www-authenticate"].lower().startswith("bearer"), path


async def test_a_revoked_key_gets_401_at_once_in_process(registry: Registry) -> None:
    token, view = await registry.platform.api_keys.create(did_of("revoked"), ["writer"])
    async with registry.as_key(token) as client:
        assert (await client.get("/v1/domains")).status_code == 200  # now cached
        assert await registry.platform.api_keys.revoke(view.key_id)
        error_of(await client.get("/v1/domains"), 401, "unauthorized")
        error_of(await client.post("/v1/domains", json={"type": "Organisation", "class": ORG}), 401)
    assert not await registry.platform.api_keys.revoke(view.key_id)  # already revoked


async def test_a_key_whose_secret_is_wrong_is_unknown(registry: Registry) -> None:
    token = await registry.key(did_of("tamper"), "admin")
    prefix, key_id, _secret = token.split("_", 2)
    async with registry.as_key(f"{prefix}_{key_id}_{secrets.token_urlsafe(32)}") as forged:
        error_of(await forged.get("/v1/domains"), 401, "unauthorized")
    async with registry.as_key(token) as genuine:
        assert (await genuine.get("/v1/domains")).status_code == 200


async def test_reader_may_only_get(registry: Registry) -> None:
    org = await make_domain(registry)
    did = org["did"]
    reader_did = did_of("reader")
    token = await registry.key(reader_did, "reader")
    async with registry.as_key(token) as reader:
        for path in (
            "/v1/protocols",
            f"/v1/protocols/{ORG}",
            "/v1/domains",
            f"/v1/domains/{did}",
            f"/v1/domains/{did}/history",
            f"/v1/domains/{did}/graph",
        ):
            assert (await reader.get(path)).status_code == 200, path
        writes = [
            reader.post("/v1/protocols", json={"type": "Protocol", "id": unique("r")}),
            reader.post("/v1/domains", json={"type": "Organisation", "class": ORG}),
            reader.post("/v1/entities", json={"type": "Organisation", "protocol": ORG}),
            reader.patch(f"/v1/domains/{did}", json={"metadata": {"a": 1}}),
            reader.delete(f"/v1/domains/{did}"),
            reader.post(
                f"/v1/domains/{did}/relationships",
                json={"type": "partner", "target": org["membershipGroup"]},
            ),
        ]
        for response in await asyncio.gather(*writes):
            error_of(response, 403, "forbidden")
    # A reader made a controller still may not write: the role decides first.
    await registry.client.patch(f"/v1/domains/{did}", json={"controller": [reader_did]})
    async with registry.as_key(token) as reader:
        error_of(await reader.patch(f"/v1/domains/{did}", json={"metadata": {"a": 1}}), 403)
    assert (await registry.client.get(f"/v1/domains/{did}")).json()["version"] == 2


async def test_writer_may_create_everything_and_read(registry: Registry) -> None:
    writer_did = did_of("writer")
    token = await registry.key(writer_did, "writer")
    async with registry.as_key(token) as writer:
        protocol = await writer.post("/v1/protocols", json={"type": "Protocol", "id": unique("w")})
        assert protocol.status_code == 201, protocol.text
        domain = await writer.post("/v1/domains", json={"type": "Organisation", "class": ORG})
        assert domain.status_code == 201, domain.text
        entity = await writer.post("/v1/entities", json={"type": "Project", "protocol": PROJECT})
        assert entity.status_code == 201, entity.text
        assert domain.json()["controller"] == [writer_did]
        assert entity.json()["controller"] == [writer_did]
        assert (await writer.get(f"/v1/domains/{domain.json()['did']}")).status_code == 200


async def test_only_a_controller_or_an_admin_may_change_a_domain(registry: Registry) -> None:
    owner, stranger, admin = did_of("owner"), did_of("stranger"), did_of("admin")
    owner_key = await registry.key(owner, "writer")
    stranger_key = await registry.key(stranger, "writer")
    admin_key = await registry.key(admin, "admin")
    target = await make_domain(registry, type="Project", **{"class": PROJECT})
    async with (
        registry.as_key(owner_key) as owner_client,
        registry.as_key(stranger_key) as stranger_client,
        registry.as_key(admin_key) as admin_client,
    ):
        created = await owner_client.post(
            "/v1/domains", json={"type": "Organisation", "class": ORG, "metadata": {"name": "O"}}
        )
        assert created.status_code == 201, created.text
        did = created.json()["did"]
        url = f"/v1/domains/{did}"
        assert created.json()["controller"] == [owner]
        error_of(await stranger_client.patch(url, json={"metadata": {"x": 1}}), 403, "forbidden")
        error_of(await stranger_client.delete(url), 403, "forbidden")
        error_of(
            await stranger_client.post(
                f"{url}/relationships", json={"type": "implements", "target": target["did"]}
            ),
            403,
            "forbidden",
        )
        assert (await owner_client.get(url)).json()["version"] == 1  # nothing changed
        assert (await owner_client.patch(url, json={"metadata": {"x": 1}})).status_code == 200
        assert (await admin_client.patch(url, json={"metadata": {"x": 2}})).status_code == 200
        # Hand control to the stranger: now they may, the owner may not.
        moved = await owner_client.patch(url, json={"controller": [stranger]})
        assert moved.status_code == 200, moved.text
        assert moved.json()["controller"] == [stranger]
        error_of(await owner_client.patch(url, json={"metadata": {"x": 3}}), 403, "forbidden")
        related = await stranger_client.post(
            f"{url}/relationships", json={"type": "implements", "target": target["did"]}
        )
        assert related.status_code == 200, related.text
        assert (await stranger_client.delete(url)).status_code == 200
    # The controller index follows the change.
    assert await count_domains(registry, controller=stranger) >= 1
    listed = (await registry.client.get("/v1/domains", params={"controller": owner})).json()
    assert did not in {item["did"] for item in listed["items"]}


async def test_the_bootstrap_key_is_an_admin_from_start(registry: Registry) -> None:
    created = await make_domain(registry)
    assert created["controller"] == [BOOTSTRAP_PRINCIPAL]
    other = did_of("someone")
    token = await registry.key(other, "writer")
    async with registry.as_key(token) as writer:
        theirs = await writer.post("/v1/domains", json={"type": "Project", "class": PROJECT})
    url = f"/v1/domains/{theirs.json()['did']}"
    assert (await registry.client.patch(url, json={"metadata": {"by": "admin"}})).status_code == 200
    assert (await registry.client.delete(url)).status_code == 200


async def test_api_keys_are_stored_hashed(registry: Registry) -> None:
    token = await registry.key(did_of("hashed"), "reader", "writer")
    _prefix, key_id, secret = token.split("_", 2)
    async with registry.platform.engine.connect() as connection:
        rows = (await connection.execute(text("SELECT * FROM api_keys"))).mappings().all()
    ours = [row for row in rows if row["key_id"] == key_id]
    assert len(ours) == 1
    assert ours[0]["secret_sha256"] == hashlib.sha256(secret.encode()).hexdigest()
    dumped = repr([dict(row) for row in rows])
    assert secret not in dumped and token not in dumped
    views = await registry.platform.api_keys.list()
    assert secret not in repr(views)
    assert sorted(next(v for v in views if v.key_id == key_id).roles) == ["reader", "writer"]


@pytest.mark.parametrize(
    ("principal", "roles"),
    [("not-a-did", ["writer"]), ("did:ixo:org/x", []), ("did:ixo:org/x", ["root"])],
)
async def test_api_key_requests_are_checked(
    registry: Registry, principal: str, roles: list[str]
) -> None:
    from twinhub.kernel.errors import Invalid

    with pytest.raises(Invalid):
        await registry.platform.api_keys.create(principal, roles)


def cli_env(tmp_path: Path) -> dict[str, str]:
    return {**base_env(tmp_path), "PIN_ENCRYPTION_KEY": "ab" * 32, "COLUMNS": "250"}


def settings_of(env: dict[str, str]) -> Settings:
    return Settings(
        environment="test",
        data_dir=Path(env["DATA_DIR"]),
        pin_encryption_key=env["PIN_ENCRYPTION_KEY"],
        log_level="warning",
    )


async def cli(*args: str, env: dict[str, str]) -> Any:
    return await asyncio.to_thread(run_cli, *args, env=env)


async def test_keys_cli_create_list_revoke(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = cli_env(tmp_path)
    principal = "did:ixo:org/cli-operator"
    # Refused requests run beside the good one, each in a data folder of its own.
    created, bad_role, bad_principal = await asyncio.gather(
        cli("keys", "create", principal, "--role", "writer", "--label", "ops", env=env),
        cli("keys", "create", "did:ixo:org/x", "--role", "root", env=cli_env(tmp_path / "r")),
        cli("keys", "create", "nobody", "--role", "reader", env=cli_env(tmp_path / "p")),
    )
    assert bad_role.returncode == 2 and bad_role.stdout == ""
    assert "roles" in bad_role.stderr
    assert bad_principal.returncode == 2 and bad_principal.stdout == ""
    assert "principal" in bad_principal.stderr

    assert created.returncode == 0, created.stderr
    lines = created.stdout.splitlines()
    assert len(lines) == 1, created.stdout  # the token, and nothing else, on stdout
    token = lines[0]
    _prefix, key_id, secret = token.split("_", 2)
    assert token.startswith("thk_") and len(secret) >= 32
    assert key_id in created.stderr and secret not in created.stderr

    app = create_registry_app(settings=settings_of(env))
    async with (
        LifespanManager(app) as manager,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=manager.app),
            base_url="http://registry.test",
            headers={"Authorization": f"Bearer {token}"},
        ) as client,
    ):
        listing = asyncio.ensure_future(cli("keys", "list", env=env))
        made = await client.post("/v1/domains", json={"type": "Project", "class": PROJECT})
        assert made.status_code == 201, made.text
        assert made.json()["controller"] == [principal]
        listed = await listing
        assert listed.returncode == 0, listed.stderr
        assert key_id in listed.stdout and principal in listed.stdout
        assert "active" in listed.stdout and "ops" in listed.stdout
        assert secret not in listed.stdout + listed.stderr

        revoked = await cli("keys", "revoke", key_id, env=env)
        assert revoked.returncode == 0, revoked.stderr
        # This process cached the key; the cache lasts at most 5 s. Let 6 s pass for it.
        real = api_keys_module.time.monotonic
        monkeypatch.setattr(
            api_keys_module, "time", SimpleNamespace(monotonic=lambda: real() + 6.0)
        )
        error_of(await client.get("/v1/domains"), 401, "unauthorized")
        error_of(await client.post("/v1/domains", json={"type": "Project", "class": PROJECT}), 401)

    again, listed = await asyncio.gather(
        cli("keys", "revoke", key_id, env=env), cli("keys", "list", env=env)
    )
    assert again.returncode == 1
    assert "revoked" in listed.stdout and secret not in listed.stdout


# -- protocols -----------------------------------------------------------------------------
ALL_TYPES = {
    "s": "string",
    "n": "number",
    "i": "integer",
    "b": "boolean",
    "o": "object",
    "a": "array",
    "t": "date-time",
}


async def test_protocol_accepts_every_type_name(registry: Registry) -> None:
    created = await make_protocol(registry, properties=ALL_TYPES, required=["s", "t"])
    assert created["properties"] == ALL_TYPES
    assert created["required"] == ["s", "t"]
    assert created["effective"]["properties"] == ALL_TYPES


def protocol_body(**fields: Any) -> dict[str, Any]:
    return {"type": "Protocol", "id": unique("p"), "name": unique("A protocol"), **fields}


PROTOCOL_PROBLEMS = [
    ({"properties": {"x": "float"}}, ["properties.x"]),
    ({"properties": {"x": "String"}}, ["properties.x"]),
    ({"properties": {"x": "datetime"}}, ["properties.x"]),
    ({"properties": {"x": ""}}, ["properties.x"]),
    ({"properties": {"1x": "string"}}, ["properties.1x"]),
    ({"properties": {"x": 5}}, ["properties.x"]),
    ({"required": ["missing"]}, ["required[0]"]),
    ({"properties": {"a": "string"}, "required": ["a", "b"]}, ["required[1]"]),
    ({"id": "Bad-Slug"}, ["id"]),
    ({"id": "-leading"}, ["id"]),
    ({"id": "trailing-"}, ["id"]),
    ({"id": "under_score"}, ["id"]),
    ({"id": "a" * 65}, ["id"]),
    ({"id": "with space"}, ["id"]),
    ({"id": ""}, ["id"]),
    ({"extends": "did:ixo:protocol/does-not-exist"}, ["extends"]),
    ({"extends": "not a did"}, ["extends"]),
    ({"twinClass": "spiritual"}, ["twinClass"]),
    ({"entityType": "1Device"}, ["entityType"]),
    ({"relationships": {"verifier": "123"}}, ["relationships.verifier"]),
    ({"relationships": {"1bad": "Oracle"}}, ["relationships.1bad"]),
    ({"services": [{"id": "ingest", "type": "T", "endpoint": "https://a.example"}]}, None),
    ({"services": [{"id": "#i", "type": "T", "endpoint": "not a url"}]}, None),
    (
        {
            "services": [
                {"id": "#i", "type": "T", "endpoint": "https://a.example"},
                {"id": "#i", "type": "T", "endpoint": "https://b.example"},
            ]
        },
        ["services[1].id"],
    ),
    ({"name": "n" * 201}, ["name"]),
    ({"type": "Domain"}, ["type"]),
    ({"colour": "red"}, ["colour"]),
]


@pytest.mark.parametrize(("fields", "expected"), PROTOCOL_PROBLEMS)
async def test_protocol_rules(
    registry: Registry, fields: dict[str, Any], expected: list[str] | None
) -> None:
    body = protocol_body(**fields)
    response = await registry.client.post("/v1/protocols", json=body)
    problems = fields_of(response)
    if expected is None:
        assert len(problems) == 1 and problems[0].startswith("services"), problems
    else:
        assert problems == expected
    if "id" in body and isinstance(body["id"], str) and body["id"]:
        missing = await registry.client.get(f"/v1/protocols/did:ixo:protocol/{body['id']}")
        assert missing.status_code == 404


async def test_protocol_reports_every_problem_at_once(registry: Registry) -> None:
    response = await registry.client.post(
        "/v1/protocols",
        json={
            "type": "Protocol",
            "id": "Not_A_Slug",
            "properties": {"ok": "string", "bad": "decimal"},
            "required": ["ok", "ghost"],
            "extends": "did:ixo:protocol/ghost-parent",
        },
    )
    problems = fields_of(response)
    assert sorted(problems) == sorted(["id", "extends", "properties.bad", "required[1]"])
    assert len(problems) == len(set(problems))


async def test_protocol_slug_comes_from_the_id_or_the_name(registry: Registry) -> None:
    tag = secrets.token_hex(3)
    named = await registry.client.post(
        "/v1/protocols", json={"type": "Protocol", "name": f"Clean Cooking (Kenya) {tag}"}
    )
    assert named.status_code == 201, named.text
    assert named.json()["did"] == f"did:ixo:protocol/clean-cooking-kenya-{tag}"
    assert named.json()["name"] == f"Clean Cooking (Kenya) {tag}"
    accented = await registry.client.post(
        "/v1/protocols", json={"type": "Protocol", "name": f"Jikó Bora {tag}"}
    )
    assert accented.json()["did"] == f"did:ixo:protocol/jiko-bora-{tag}"
    slug = unique("chosen")
    chosen = await registry.client.post(
        "/v1/protocols", json={"type": "Protocol", "id": slug, "name": "Anything at all"}
    )
    assert chosen.json()["did"] == f"did:ixo:protocol/{slug}"
    assert chosen.headers["location"] == f"/v1/protocols/did:ixo:protocol/{slug}"
    # A duplicate through the name is a conflict too, and the first stays as it was.
    duplicate = await registry.client.post(
        "/v1/protocols",
        json={
            "type": "Protocol",
            "name": f"Clean cooking kenya {tag}",
            "properties": {"a": "string"},
        },
    )
    error_of(duplicate, 409, "conflict")
    first = await registry.client.get(f"/v1/protocols/did:ixo:protocol/clean-cooking-kenya-{tag}")
    assert first.json()["properties"] == {}
    for name in ("!!!", "東京"):
        unsluggable = await registry.client.post(
            "/v1/protocols", json={"type": "Protocol", "name": name}
        )
        assert fields_of(unsluggable) == ["id"], name
    nameless = await registry.client.post("/v1/protocols", json={"type": "Protocol"})
    assert "name" in fields_of(nameless)


async def test_protocol_extends_a_parent_and_the_child_wins(registry: Registry) -> None:
    parent = await make_protocol(
        registry,
        twinClass="physical",
        properties={"a": "string", "b": "number", "when": "date-time"},
        required=["a"],
        relationships={"verifier": "Oracle", "operator": "Organisation"},
        services=[
            {"id": "#x", "type": "Ingest", "endpoint": "https://parent.example/x"},
            {"id": "#y", "type": "Dash", "endpoint": "https://parent.example/y"},
        ],
    )
    child = await make_protocol(
        registry,
        entityType=None,
        extends=parent["did"],
        properties={"b": "integer", "c": "boolean"},
        required=["c", "when"],  # a parent's property may be required by the child
        relationships={"verifier": "Organisation", "owner": "Organisation"},
        services=[{"id": "#x", "type": "Ingest2", "endpoint": "https://child.example/x"}],
    )
    assert child["extends"] == parent["did"]
    assert child["properties"] == {"b": "integer", "c": "boolean"}  # its own, as sent
    effective = child["effective"]
    assert effective["properties"] == {
        "a": "string",
        "b": "integer",
        "when": "date-time",
        "c": "boolean",
    }
    assert set(effective["required"]) == {"a", "c", "when"}
    assert len(effective["required"]) == 3
    assert effective["relationships"] == {
        "verifier": "Organisation",
        "operator": "Organisation",
        "owner": "Organisation",
    }
    services = {s["id"]: s for s in effective["services"]}
    assert set(services) == {"#x", "#y"}
    assert services["#x"]["endpoint"] == "https://child.example/x"
    assert services["#y"]["endpoint"] == "https://parent.example/y"
    assert effective["twinClass"] == "physical" and effective["entityType"] == "Device"
    grandchild = await make_protocol(
        registry, entityType=None, extends=child["did"], properties={"d": "array"}, required=["b"]
    )
    assert set(grandchild["effective"]["required"]) == {"a", "b", "c", "when"}
    assert grandchild["effective"]["properties"]["b"] == "integer"
    fetched = (await registry.client.get(f"/v1/protocols/{grandchild['did']}")).json()
    assert fetched["effective"] == grandchild["effective"]

    # Entities of the grandchild obey everything inherited.
    bad = await registry.client.post(
        "/v1/entities",
        json={"type": "Device", "protocol": grandchild["did"], "properties": {"b": 1.5}},
    )
    assert sorted(fields_of(bad)) == sorted(
        ["properties.b", "properties.a", "properties.c", "properties.when"]
    )
    good = await make_entity(
        registry,
        grandchild["did"],
        properties={"a": "x", "b": 2, "c": True, "when": "2024-05-01T10:00:00Z"},
    )
    assert good["twinClass"] == "physical"
    assert good["inheritedServices"] == ["#x", "#y"]
    assert {s["id"]: s["endpoint"] for s in good["services"]}["#x"] == "https://child.example/x"
    wrong_kind = await registry.client.post(
        "/v1/entities", json={"type": "Oracle", "protocol": grandchild["did"]}
    )
    assert "type" in fields_of(wrong_kind)


async def test_protocol_list_pages_cover_everything_once(registry: Registry) -> None:
    mine = {(await make_protocol(registry))["did"] for _ in range(3)}
    first = await registry.client.get("/v1/protocols", params={"limit": 2})
    assert first.status_code == 200
    assert len(first.json()["items"]) == 2 and first.json()["nextCursor"]
    total = first.json()["total"]
    items = await every_page(registry.client, "/v1/protocols", limit=2)
    dids = [item["did"] for item in items]
    assert len(dids) == len(set(dids)) == total
    assert mine <= set(dids)
    assert "did:ixo:protocol/organisation" in dids
    assert all("effective" in item for item in items)
    for params in (
        {"cursor": "***"},
        {"cursor": "LTE"},
        {"cursor": BEYOND_64_BITS},
        {"limit": 0},
        {"limit": "many"},
    ):
        error_of(await registry.client.get("/v1/protocols", params=params), 422)


# -- domains -------------------------------------------------------------------------------
async def test_a_created_domain_is_the_whole_record(registry: Registry) -> None:
    controllers = [did_of("c1"), "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"]
    body = {
        "type": "Project",
        "class": PROJECT,
        "metadata": {"name": "Stoves for Kisumu", "tags": ["a", "b"], "nested": {"k": 1}},
        "properties": {"country": "KE", "startDate": "2024-01-01T00:00:00Z"},
        "controller": controllers,
        "services": [{"id": "#ingest", "type": "DataIngestion", "endpoint": "wss://x.example/s"}],
        "verifiableCredential": [{"type": "Certification", "issuer": "did:ixo:org/certifier"}],
    }
    response = await registry.client.post("/v1/domains", json=body)
    assert response.status_code == 201, response.text
    record = response.json()
    expected_keys = {
        "did",
        "type",
        "class",
        "protocol",
        "twinClass",
        "controller",
        "services",
        "inheritedServices",
        "verifiableCredential",
        "metadata",
        "properties",
        "relationships",
        "membershipGroup",
        "parent",
        "validFrom",
        "validUntil",
        "status",
        "verified",
        "version",
        "createdAt",
        "updatedAt",
    }
    assert expected_keys <= set(record), expected_keys - set(record)
    assert record["type"] == "Project"
    assert record["class"] == record["protocol"] == PROJECT
    assert record["controller"] == controllers
    assert record["services"] == body["services"]
    assert record["inheritedServices"] == []
    assert record["verifiableCredential"] == body["verifiableCredential"]
    assert record["metadata"] == body["metadata"]
    assert record["properties"] == body["properties"]
    assert record["relationships"] == [] and record["membershipGroup"] is None
    assert record["validFrom"] is None and record["validUntil"] is None
    assert record["status"] == "active" and record["verified"] is False
    assert record["version"] == 1
    created, updated = (datetime.fromisoformat(record[k]) for k in ("createdAt", "updatedAt"))
    assert created.tzinfo is not None and created == updated
    assert abs((datetime.now(UTC) - created).total_seconds()) < 60
    fetched = await registry.client.get(f"/v1/domains/{record['did']}")
    assert fetched.json() == record
    assert fetched.headers["etag"] == '"1"'


def domain_body(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "Project", "class": PROJECT, "metadata": {"name": "P"}}
    for name, value in fields.items():
        if value is None:
            body.pop(name, None)
        else:
            body[name] = value
    return body


SERVICE = {"id": "#a", "type": "T", "endpoint": "https://a.example"}

DOMAIN_PROBLEMS = [
    pytest.param({"class": None}, ["class"], id="neither-class-nor-protocol"),
    pytest.param({"class": "organisation"}, ["class"], id="class-not-a-did"),
    pytest.param({"class": "did:ixo:protocol/ghost"}, ["class"], id="class-unknown"),
    pytest.param({"type": "1Project"}, ["type"], id="type-malformed"),
    pytest.param({"type": ""}, ["type"], id="type-empty"),
    pytest.param({"type": "Oracle"}, ["type"], id="type-not-the-protocols"),
    pytest.param({"id": "Upper"}, ["id"], id="id-upper"),
    pytest.param({"id": "a_b"}, ["id"], id="id-underscore"),
    pytest.param({"id": "x" * 65}, ["id"], id="id-too-long"),
    pytest.param({"controller": "operator"}, ["controller[0]"], id="controller-not-a-did"),
    pytest.param(
        {"controller": ["did:ixo:org/a", "did:ixo"]}, ["controller[1]"], id="controller-2nd-bad"
    ),
    pytest.param(
        {"controller": ["did:ixo:org/a", "did:ixo:org/a"]}, ["controller"], id="controller-twice"
    ),
    pytest.param({"controller": 5}, None, id="controller-number"),
    pytest.param(
        {"services": [{**SERVICE, "id": "a"}]}, ["services[0].id"], id="service-id-no-hash"
    ),
    pytest.param(
        {"services": [{**SERVICE, "endpoint": "a.example"}]},
        ["services[0].endpoint"],
        id="service-endpoint-relative",
    ),
    pytest.param(
        {"services": [{**SERVICE, "type": ""}]}, ["services[0].type"], id="service-type-empty"
    ),
    pytest.param(
        {"services": [SERVICE, {**SERVICE, "endpoint": "https://b.example"}]},
        ["services[1].id"],
        id="service-ids-twice",
    ),
    pytest.param({"services": [{"id": "#a", "type": "T"}]}, None, id="service-no-endpoint"),
    pytest.param({"services": [{**SERVICE, "extra": 1}]}, None, id="service-unknown-field"),
    pytest.param(
        {"verifiableCredential": [{"type": "Cert", "issuer": "certifier"}]},
        ["verifiableCredential[0].issuer"],
        id="credential-issuer-not-a-did",
    ),
    pytest.param(
        {"verifiableCredential": [{"type": "", "issuer": "did:ixo:org/c"}]},
        ["verifiableCredential[0].type"],
        id="credential-type-empty",
    ),
    pytest.param({"verifiableCredential": [{"type": "Cert"}]}, None, id="credential-no-issuer"),
    pytest.param(
        {"validFrom": "2030-01-01T00:00:00Z", "validUntil": "2029-12-31T23:59:59Z"},
        ["validUntil"],
        id="until-before-from",
    ),
    pytest.param(
        {"validFrom": "2030-01-01T00:00:00Z", "validUntil": "2030-01-01T00:00:00Z"},
        ["validUntil"],
        id="until-equals-from",
    ),
    pytest.param(
        # naive from is 02:00 UTC; until is 01:00 UTC
        {"validFrom": "2030-01-01T02:00:00", "validUntil": "2030-01-01T03:00:00+02:00"},
        ["validUntil"],
        id="naive-from-is-utc",
    ),
    pytest.param({"validFrom": "next tuesday"}, ["validFrom"], id="from-not-iso"),
    pytest.param({"validUntil": "2030-13-01T00:00:00Z"}, ["validUntil"], id="until-bad-month"),
    pytest.param({"metadata": {"name": ""}}, ["metadata.name"], id="name-empty"),
    pytest.param({"metadata": {"name": "n" * 201}}, ["metadata.name"], id="name-too-long"),
    pytest.param({"metadata": {"name": 7}}, ["metadata.name"], id="name-not-text"),
    pytest.param({"metadata": "P"}, ["metadata"], id="metadata-not-object"),
    pytest.param(
        {"relationships": {"implementedBy": "did:ixo:entity/ghost"}},
        ["relationships.implementedBy[0]"],
        id="relationship-unknown-target",
    ),
    pytest.param(
        {"relationships": {"implementedBy": "ghost"}},
        ["relationships.implementedBy[0]"],
        id="relationship-target-not-a-did",
    ),
    pytest.param({"relationships": {"implementedBy": 5}}, None, id="relationship-number"),
    pytest.param({"colour": "red"}, ["colour"], id="unknown-field"),
    pytest.param({"verified": True}, ["verified"], id="verified-is-not-for-callers"),
    pytest.param({"status": "deactivated"}, ["status"], id="status-is-not-for-callers"),
    pytest.param({"did": "did:ixo:entity/mine"}, ["did"], id="did-is-minted"),
    pytest.param({"version": 7}, ["version"], id="version-is-not-for-callers"),
]


@pytest.mark.parametrize(("fields", "expected"), DOMAIN_PROBLEMS)
async def test_domain_rules(
    registry: Registry, fields: dict[str, Any], expected: list[str] | None
) -> None:
    controller = did_of("rules")
    body = domain_body(**fields)
    body.setdefault("controller", controller)
    before = await count_domains(registry)
    response = await registry.client.post("/v1/domains", json=body)
    problems = fields_of(response)
    if expected is None:
        assert problems, response.text
        key = next(iter(fields))
        assert all(p.startswith(key) for p in problems), problems
    else:
        assert problems == expected
    assert await count_domains(registry) == before  # nothing was created


async def test_domain_reports_every_problem_at_once(registry: Registry) -> None:
    response = await registry.client.post(
        "/v1/domains",
        json={
            "type": "Project",
            "class": PROJECT,
            "id": "Bad Id",
            "controller": ["nope"],
            "services": [SERVICE, SERVICE],
            "verifiableCredential": [{"type": "Cert", "issuer": "nobody"}],
            "metadata": {"name": ""},
            "properties": {"country": 254, "colour": "red"},
            "relationships": {"implementedBy": "did:ixo:entity/ghost"},
        },
    )
    problems = fields_of(response)
    assert sorted(problems) == sorted(
        [
            "id",
            "controller[0]",
            "services[1].id",
            "verifiableCredential[0].issuer",
            "metadata.name",
            "properties.country",
            "properties.colour",
            "relationships.implementedBy[0]",
        ]
    )


@pytest.mark.parametrize(
    "names",
    [
        {"class": PROJECT},
        {"protocol": PROJECT},
        {"class": PROJECT, "protocol": PROJECT},
    ],
    ids=["class", "protocol", "both-agree"],
)
async def test_class_or_protocol_or_both(registry: Registry, names: dict[str, str]) -> None:
    response = await registry.client.post(
        "/v1/domains", json={"type": "Project", "metadata": {"name": "P"}, **names}
    )
    assert response.status_code == 201, response.text
    assert response.json()["class"] == response.json()["protocol"] == PROJECT


@pytest.mark.parametrize(
    ("controller", "expected"),
    [
        ("did:ixo:org/solo", ["did:ixo:org/solo"]),
        (["did:ixo:org/a", "did:web:example.org"], ["did:ixo:org/a", "did:web:example.org"]),
        (None, [BOOTSTRAP_PRINCIPAL]),
    ],
    ids=["string", "list", "absent"],
)
async def test_controller_is_a_did_or_a_list_or_the_caller(
    registry: Registry, controller: Any, expected: list[str]
) -> None:
    body = domain_body(controller=controller)
    response = await registry.client.post("/v1/domains", json=body)
    assert response.status_code == 201, response.text
    assert response.json()["controller"] == expected


async def test_validity_timestamps_are_kept_in_utc(registry: Registry) -> None:
    created = await make_domain(
        registry, validFrom="2024-01-01T00:00:00Z", validUntil="2030-01-01T00:00:00+03:00"
    )
    assert datetime.fromisoformat(created["validFrom"]) == datetime(2024, 1, 1, tzinfo=UTC)
    until = datetime.fromisoformat(created["validUntil"])
    assert until == datetime(2029, 12, 31, 21, tzinfo=UTC)
    assert until.utcoffset() is not None
    # The ledger keeps the record as the table holds it (UTC), so replaying it reconciles.
    [transaction] = await registry.platform.ledger.history(created["did"])
    assert transaction.payload["record"]["validUntil"] == "2029-12-31T21:00:00+00:00"


async def test_naive_timestamps_are_read_as_utc(registry: Registry) -> None:
    created = await make_domain(
        registry, validFrom="2030-01-01T08:30:00", validUntil="2031-01-01T00:00:00.250000"
    )
    valid_from = datetime.fromisoformat(created["validFrom"])
    valid_until = datetime.fromisoformat(created["validUntil"])
    assert valid_from == datetime(2030, 1, 1, 8, 30, tzinfo=UTC)
    assert valid_until == datetime(2031, 1, 1, 0, 0, 0, 250000, tzinfo=UTC)
    fetched = (await registry.client.get(f"/v1/domains/{created['did']}")).json()
    assert datetime.fromisoformat(fetched["validFrom"]) == valid_from
    assert datetime.fromisoformat(fetched["validFrom"]).utcoffset().total_seconds() == 0
    patched = await registry.client.patch(
        f"/v1/domains/{created['did']}", json={"validFrom": "2030-06-01T00:00:00"}
    )
    assert patched.status_code == 200, patched.text
    assert datetime.fromisoformat(patched.json()["validFrom"]) == datetime(2030, 6, 1, tzinfo=UTC)


async def test_a_chosen_id_names_the_did_once(registry: Registry) -> None:
    slug = unique("jiko")
    first = await make_domain(registry, id=slug)
    assert first["did"] == f"did:ixo:entity/{slug}"
    before = await count_domains(registry)
    again = await registry.client.post(
        "/v1/domains", json={"type": "Organisation", "class": ORG, "id": slug}
    )
    error_of(again, 409, "conflict")
    assert await count_domains(registry) == before  # no stray membership group either
    entity = await registry.client.post(
        "/v1/entities", json={"type": "Project", "protocol": PROJECT, "id": slug}
    )
    error_of(entity, 409, "conflict")
    kept = (await registry.client.get(f"/v1/domains/{first['did']}")).json()
    assert kept["type"] == "Organisation" and kept["version"] == 1


async def test_a_domain_twice_related_to_one_target_is_not_a_duplicate_domain(
    registry: Registry,
) -> None:
    """Naming one target twice under a role must not be reported as 'domain exists'."""
    org = await make_domain(registry)
    response = await registry.client.post(
        "/v1/domains",
        json=domain_body(relationships={"implementedBy": [org["did"], org["did"]]}),
    )
    assert response.status_code in (201, 422), response.text
    if response.status_code == 201:
        edges = [r for r in response.json()["relationships"] if r["type"] == "implementedBy"]
        assert edges == [{"type": "implementedBy", "target": org["did"]}]
    else:
        assert fields_of(response) == ["relationships.implementedBy[1]"]


@pytest.mark.parametrize(
    ("entity_type", "protocol", "twin_class"),
    [
        ("Organisation", ORG, "cognitive"),
        ("Project", PROJECT, "cognitive"),
        ("Device", DEVICE, "physical"),
        ("Oracle", ORACLE, "oracle"),
        ("Request", "did:ixo:protocol/request", "system"),
        ("Vehicle", "did:ixo:protocol/asset", "physical"),
    ],
)
async def test_every_domain_has_a_twin_class(
    registry: Registry, entity_type: str, protocol: str, twin_class: str
) -> None:
    record = await make_domain(registry, type=entity_type, **{"class": protocol})
    assert record["twinClass"] == twin_class


@pytest.mark.parametrize(
    ("entity_type", "twin_class"),
    [
        ("Sensor", "physical"),
        ("Cooperative", "cognitive"),
        ("Evaluator", "oracle"),
        ("Pact", "system"),
    ],
)
async def test_twin_class_follows_the_type_when_the_protocol_names_none(
    registry: Registry, entity_type: str, twin_class: str
) -> None:
    protocol = await make_protocol(registry, entityType=None)
    record = await make_entity(registry, protocol["did"], type=entity_type)
    assert record["twinClass"] == twin_class


# -- entities ------------------------------------------------------------------------------
TYPE_CASES = [
    ("string", "x", True),
    ("string", "", True),
    ("string", 5, False),
    ("string", None, False),
    ("string", ["x"], False),
    ("number", 1, True),
    ("number", 1.5, True),
    ("number", -0.25, True),
    ("number", 0, True),
    ("number", True, False),
    ("number", "1.5", False),
    ("number", None, False),
    ("integer", 3, True),
    ("integer", -3, True),
    ("integer", 0, True),
    ("integer", 2**53, True),
    ("integer", 1.5, False),
    ("integer", True, False),
    ("integer", "3", False),
    ("boolean", True, True),
    ("boolean", False, True),
    ("boolean", 0, False),
    ("boolean", "true", False),
    ("object", {}, True),
    ("object", {"lat": 1.2}, True),
    ("object", [], False),
    ("object", "{}", False),
    ("array", [], True),
    ("array", [1, "a"], True),
    ("array", {}, False),
    ("array", "a,b", False),
    ("date-time", "2024-05-01T10:00:00Z", True),
    ("date-time", "2024-05-01T10:00:00+03:00", True),
    ("date-time", "2024-05-01T10:00:00.123456Z", True),
    ("date-time", "yesterday", False),
    ("date-time", "2024-13-01T00:00:00Z", False),
    ("date-time", "2024-02-30T00:00:00Z", False),
    ("date-time", "", False),
    ("date-time", 1714557600, False),
    ("date-time", None, False),
]


@pytest.mark.parametrize(
    ("type_name", "value", "ok"),
    TYPE_CASES,
    ids=[f"{t}-{v!r}-{'ok' if ok else 'bad'}" for t, v, ok in TYPE_CASES],
)
async def test_entity_property_types(
    registry: Registry, type_name: str, value: Any, ok: bool
) -> None:
    protocol = await make_protocol(registry, properties={"p": type_name})
    response = await registry.client.post(
        "/v1/entities",
        json={"type": "Device", "protocol": protocol["did"], "properties": {"p": value}},
    )
    if ok:
        assert response.status_code == 201, response.text
        assert response.json()["properties"] == {"p": value}
    else:
        assert fields_of(response) == ["properties.p"]


async def test_entity_reports_one_detail_per_property(registry: Registry) -> None:
    protocol = await make_protocol(
        registry, properties={**ALL_TYPES, "must": "string"}, required=["must"]
    )
    wrong = {
        "s": 1,
        "n": "1",
        "i": 1.5,
        "b": "yes",
        "o": [],
        "a": {},
        "t": "soon",
        "unknown": 1,
    }
    response = await registry.client.post(
        "/v1/entities",
        json={"type": "Device", "protocol": protocol["did"], "properties": wrong},
    )
    problems = fields_of(response)
    assert sorted(problems) == sorted([f"properties.{name}" for name in [*wrong, "must"]]), problems


async def test_entity_type_must_match_the_protocol(registry: Registry) -> None:
    protocol = await make_protocol(registry)  # entityType Device
    wrong = await registry.client.post(
        "/v1/entities", json={"type": "Oracle", "protocol": protocol["did"]}
    )
    assert fields_of(wrong) == ["type"]
    for spelling in ("Device", "device", "DEVICE"):
        await make_entity(registry, protocol["did"], type=spelling)
    organisation = await registry.client.post(
        "/v1/entities", json={"type": "Organization", "protocol": ORG}
    )
    assert organisation.status_code == 201, organisation.text  # US spelling of the same kind


async def test_an_entity_names_its_protocol(registry: Registry) -> None:
    missing = await registry.client.post("/v1/entities", json={"type": "Device"})
    assert "protocol" in fields_of(missing)
    unknown = await registry.client.post(
        "/v1/entities", json={"type": "Device", "protocol": "did:ixo:protocol/ghost"}
    )
    assert fields_of(unknown) == ["class"] or fields_of(unknown) == ["protocol"]


# -- reads ---------------------------------------------------------------------------------
async def test_inherited_services_are_resolved_and_own_entries_win(registry: Registry) -> None:
    parent = await make_protocol(
        registry,
        services=[{"id": "#archive", "type": "Archive", "endpoint": "ipfs://archive"}],
    )
    protocol = await make_protocol(
        registry,
        extends=parent["did"],
        services=[
            {"id": "#ingest", "type": "DataIngestion", "endpoint": "https://proto.example/in"},
            {"id": "#dash", "type": "Dashboard", "endpoint": "https://proto.example/dash"},
        ],
    )
    own = {"id": "#ingest", "type": "DataIngestion", "endpoint": "https://mine.example/in"}
    created = await make_entity(registry, protocol["did"], services=[own])
    for record in (
        created,
        (await registry.client.get(f"/v1/domains/{created['did']}")).json(),
        (await registry.client.get("/v1/domains", params={"class": protocol["did"]})).json()[
            "items"
        ][0],
    ):
        services = {s["id"]: s["endpoint"] for s in record["services"]}
        assert services == {
            "#ingest": "https://mine.example/in",
            "#dash": "https://proto.example/dash",
            "#archive": "ipfs://archive",
        }
        assert sorted(record["inheritedServices"]) == ["#archive", "#dash"]
        assert record["services"][0] == own  # own entries first
    bare = await make_entity(registry, protocol["did"])
    assert sorted(bare["inheritedServices"]) == ["#archive", "#dash", "#ingest"]


async def test_list_filters(registry: Registry) -> None:
    controller = did_of("filters")
    second = did_of("second")
    token = await registry.key(controller, "writer")
    physical = await make_protocol(registry, twinClass="physical")
    oracle = await make_protocol(registry, entityType="Oracle", twinClass="oracle")
    async with registry.as_key(token) as writer:

        async def create(body: dict[str, Any]) -> str:
            response = await writer.post("/v1/domains", json=body)
            assert response.status_code == 201, response.text
            return response.json()["did"]

        d1 = await create({"type": "Device", "class": physical["did"]})
        d2 = await create({"type": "Device", "class": physical["did"]})
        d3 = await create(
            {"type": "Oracle", "class": oracle["did"], "controller": [controller, second]}
        )
        org = await create({"type": "Organisation", "class": ORG, "metadata": {"name": "F"}})
        assert (await writer.delete(f"/v1/domains/{d2}")).status_code == 200
    group = (await registry.client.get(f"/v1/domains/{org}")).json()["membershipGroup"]

    cases: list[tuple[dict[str, str], set[str]]] = [
        ({"controller": controller}, {d1, d2, d3, org, group}),
        ({"controller": second}, {d3}),
        ({"controller": controller, "class": physical["did"]}, {d1, d2}),
        ({"controller": controller, "protocol": physical["did"]}, {d1, d2}),
        ({"class": oracle["did"]}, {d3}),
        ({"controller": controller, "status": "deactivated"}, {d2}),
        ({"controller": controller, "status": "active"}, {d1, d3, org, group}),
        ({"controller": controller, "twinClass": "physical"}, {d1, d2}),
        ({"controller": controller, "twinClass": "oracle"}, {d3}),
        ({"controller": controller, "twinClass": "cognitive"}, {org, group}),
        ({"controller": controller, "twinClass": "system"}, set()),
        ({"controller": controller, "type": "Group"}, {group}),
        ({"controller": controller, "type": "Device", "status": "active"}, {d1}),
        ({"parent": org}, {group}),
        ({"controller": controller, "verified": "false"}, {d1, d2, d3, org, group}),
        ({"controller": controller, "verified": "true"}, set()),
        ({"controller": did_of("nobody")}, set()),
    ]
    for params, expected in cases:
        response = await registry.client.get("/v1/domains", params={**params, "count": "true"})
        assert response.status_code == 200, (params, response.text)
        page = response.json()
        assert {item["did"] for item in page["items"]} == expected, params
        assert page["total"] == len(expected), params
        assert page["nextCursor"] is None, params
    plain = (await registry.client.get("/v1/domains", params={"controller": controller})).json()
    assert plain["total"] is None  # counting is asked for


async def test_domain_pages_cover_everything_once(registry: Registry) -> None:
    controller = did_of("pages")
    made = set()
    for _ in range(5):
        made.add(
            (
                await make_domain(
                    registry, type="Project", controller=controller, **{"class": PROJECT}
                )
            )["did"]
        )
    items = await every_page(registry.client, "/v1/domains", controller=controller, limit=2)
    dids = [item["did"] for item in items]
    assert sorted(dids) == sorted(made)
    first = (
        await registry.client.get("/v1/domains", params={"controller": controller, "limit": 2})
    ).json()
    assert len(first["items"]) == 2 and first["nextCursor"]
    # Unfiltered, every domain there is appears once, with a known twin class.
    everything = await every_page(registry.client, "/v1/domains", limit=500)
    everything_dids = [item["did"] for item in everything]
    assert len(everything_dids) == len(set(everything_dids)) == await count_domains(registry)
    assert made <= set(everything_dids)
    assert {item["twinClass"] for item in everything} <= TWIN_CLASSES


async def test_page_size_is_capped(make_registry: RegistryFactory) -> None:
    registry = await make_registry(registry_max_page_size=3, registry_page_size=2)
    controller = did_of("cap")
    for _ in range(4):
        await make_domain(registry, type="Project", controller=controller, **{"class": PROJECT})
    default = (await registry.client.get("/v1/domains", params={"controller": controller})).json()
    assert len(default["items"]) == 2
    asked = (
        await registry.client.get("/v1/domains", params={"controller": controller, "limit": 100})
    ).json()
    assert len(asked["items"]) == 3 and asked["nextCursor"]
    protocols = (await registry.client.get("/v1/protocols", params={"limit": 100})).json()
    assert len(protocols["items"]) == 3


@pytest.mark.parametrize(
    "params",
    [
        {"cursor": "!!!"},
        {"cursor": "bm90LWEtbnVtYmVy"},  # base64 of 'not-a-number'
        {"cursor": "LTE"},  # base64 of '-1'
        {"cursor": "%%%"},
        {"limit": 0},
        {"limit": -1},
        {"limit": "ten"},
        {"verified": "perhaps"},
        {"count": "maybe"},
        {"cursor": BEYOND_64_BITS},
    ],
    ids=str,
)
async def test_bad_list_parameters_are_422(registry: Registry, params: dict[str, Any]) -> None:
    error_of(await registry.client.get("/v1/domains", params=params), 422, "validation_failed")


# -- graph ---------------------------------------------------------------------------------
async def test_relationships_added_later_are_checked(registry: Registry) -> None:
    org = await make_domain(registry)
    project = await make_domain(registry, type="Project", **{"class": PROJECT})
    device = await make_domain(registry, type="Device", **{"class": DEVICE})
    url = f"/v1/domains/{project['did']}/relationships"

    added = await registry.client.post(url, json={"type": "implementedBy", "target": org["did"]})
    assert added.status_code == 200, added.text
    assert added.json()["version"] == 2
    assert {"type": "implementedBy", "target": org["did"]} in added.json()["relationships"]

    error_of(
        await registry.client.post(url, json={"type": "implementedBy", "target": org["did"]}),
        409,
        "conflict",
    )
    unknown = await registry.client.post(
        url, json={"type": "implementedBy", "target": "did:ixo:entity/ghost"}
    )
    assert fields_of(unknown) == ["relationships.implementedBy[0]"]
    wrong_kind = await registry.client.post(
        url, json={"type": "implementedBy", "target": device["did"]}
    )
    assert fields_of(wrong_kind) == ["relationships.implementedBy[0]"]
    assert fields_of(await registry.client.post(url, json={"type": "1bad", "target": org["did"]}))
    assert fields_of(await registry.client.post(url, json={"type": "partner"}))
    assert fields_of(
        await registry.client.post(url, json={"type": "partner", "target": org["did"], "x": 1})
    )
    undeclared = await registry.client.post(url, json={"type": "partner", "target": device["did"]})
    assert undeclared.status_code == 200, undeclared.text  # roles the protocol does not name
    stale = await registry.client.post(
        url, json={"type": "sibling", "target": device["did"]}, headers={"If-Match": '"1"'}
    )
    error_of(stale, 412, "precondition_failed")
    garbage = await registry.client.post(
        url, json={"type": "sibling", "target": device["did"]}, headers={"If-Match": "soon"}
    )
    assert fields_of(garbage) == ["If-Match"]
    current = (await registry.client.get(f"/v1/domains/{project['did']}")).json()
    assert current["version"] == 3
    assert len(current["relationships"]) == 2

    retired = await make_domain(registry)
    await registry.client.delete(f"/v1/domains/{retired['did']}")
    to_retired = await registry.client.post(
        url, json={"type": "implementedBy", "target": retired["did"]}
    )
    assert fields_of(to_retired) == ["relationships.implementedBy[0]"]
    error_of(
        await registry.client.post(
            "/v1/domains/did:ixo:entity/ghost/relationships",
            json={"type": "partner", "target": org["did"]},
        ),
        404,
        "not_found",
    )
    error_of(
        await registry.client.post(
            f"/v1/domains/{retired['did']}/relationships",
            json={"type": "partner", "target": org["did"]},
        ),
        409,
        "conflict",
    )


async def test_graph_depth(registry: Registry) -> None:
    protocol = await make_protocol(registry, entityType=None)
    chain = [await make_entity(registry, protocol["did"], type="Link")]
    for _ in range(6):
        chain.append(
            await make_entity(
                registry,
                protocol["did"],
                type="Link",
                relationships={"next": chain[-1]["did"]},
            )
        )
    chain.reverse()  # chain[0] -> chain[1] -> ... -> chain[6]
    dids = [node["did"] for node in chain]
    url = f"/v1/domains/{dids[0]}/graph"
    for depth in range(6):
        response = await registry.client.get(url, params={"depth": depth})
        assert response.status_code == 200, response.text
        graph = response.json()
        assert graph["root"] == dids[0] and graph["depth"] == depth
        assert {node["did"] for node in graph["nodes"]} == set(dids[: depth + 1]), depth
        edges = {(e["source"], e["type"], e["target"]) for e in graph["edges"]}
        assert len(graph["edges"]) == depth
        assert edges == {(dids[i], "next", dids[i + 1]) for i in range(depth)}
    default = (await registry.client.get(url)).json()
    assert default["depth"] == 1 and len(default["nodes"]) == 2
    # Edges are followed both ways.
    middle = (await registry.client.get(f"/v1/domains/{dids[3]}/graph", params={"depth": 1})).json()
    assert {node["did"] for node in middle["nodes"]} == {dids[2], dids[3], dids[4]}
    node = next(n for n in middle["nodes"] if n["did"] == dids[3])
    assert node["type"] == "Link" and node["status"] == "active" and node["verified"] is False
    for depth in (6, -1, "deep", 100):
        error_of(await registry.client.get(url, params={"depth": depth}), 422)
    error_of(await registry.client.get("/v1/domains/did:ixo:entity/ghost/graph"), 404)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/domains", {"type": "Organisation", "class": ORG}),
        ("/v1/domains", {"type": "Organization", "protocol": ORG}),
        ("/v1/entities", {"type": "Organisation", "protocol": ORG, "metadata": {"name": "E"}}),
        ("/v1/domains", {"type": "organisation", "class": "did:ixo:protocol/asset"}),
    ],
    ids=["class", "us-spelling", "entity", "other-protocol"],
)
async def test_every_organisation_has_a_membership_group(
    registry: Registry, path: str, body: dict[str, Any]
) -> None:
    response = await registry.client.post(path, json=body)
    assert response.status_code == 201, response.text
    org = response.json()
    group_did = org["membershipGroup"]
    assert group_did and group_did != org["did"]
    assert {"type": "membershipGroup", "target": group_did} in org["relationships"]
    group = (await registry.client.get(f"/v1/domains/{group_did}")).json()
    assert group["type"] == "Group" and group["parent"] == org["did"]
    assert group["controller"] == org["controller"]
    name = org["metadata"].get("name") or org["did"]
    assert group["metadata"]["name"] == f"{name} members"
    graph = (await registry.client.get(f"/v1/domains/{org['did']}/graph")).json()
    assert {"source": org["did"], "type": "membershipGroup", "target": group_did} in graph["edges"]
    parented = (await registry.client.get("/v1/domains", params={"parent": org["did"]})).json()
    assert [item["did"] for item in parented["items"]] == [group_did]


async def test_other_types_get_no_membership_group(registry: Registry) -> None:
    project = await make_domain(registry, type="Project", **{"class": PROJECT})
    assert project["membershipGroup"] is None
    assert project["relationships"] == []


# -- changes -------------------------------------------------------------------------------
IF_MATCH = [
    ('"1"', 200),
    ("1", 200),
    ('W/"1"', 200),
    ("*", 200),
    (' "1" ', 200),
    ('"2"', 412),
    ("2", 412),
    ('W/"0"', 412),
    ("abc", 422),
    ('""', 422),
    ('"1.0"', 422),
    ("-1", 422),
    ("W/", 422),
    ('"one"', 422),
]


@pytest.mark.parametrize(("if_match", "status"), IF_MATCH, ids=[v for v, _ in IF_MATCH])
@pytest.mark.parametrize("method", ["PATCH", "DELETE"])
async def test_if_match(registry: Registry, method: str, if_match: str, status: int) -> None:
    org = await make_domain(registry)
    url = f"/v1/domains/{org['did']}"
    body = {"metadata": {"website": "https://x.example"}} if method == "PATCH" else None
    response = await registry.client.request(method, url, json=body, headers={"If-Match": if_match})
    after = (await registry.client.get(url)).json()
    if status == 200:
        assert response.status_code == 200, response.text
        assert response.headers["etag"] == '"2"'
        assert after["version"] == 2
    else:
        if status == 412:
            error_of(response, 412, "precondition_failed")
        else:
            assert fields_of(response) == ["If-Match"]
        assert after["version"] == 1 and after["status"] == "active"


async def test_merge_patch_on_metadata_and_properties(registry: Registry) -> None:
    protocol = await make_protocol(
        registry,
        properties={"serial": "string", "efficiency": "number", "note": "string"},
        required=["serial"],
    )
    entity = await make_entity(
        registry,
        protocol["did"],
        metadata={"name": "Stove", "website": "https://a.example", "tags": ["x"]},
        properties={"serial": "S-1", "efficiency": 0.3, "note": "new"},
    )
    url = f"/v1/domains/{entity['did']}"
    patched = await registry.client.patch(
        url,
        json={"metadata": {"website": None, "tags": ["y"], "colour": "red"}},
        headers={"content-type": "application/merge-patch+json"},
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["metadata"] == {"name": "Stove", "tags": ["y"], "colour": "red"}
    patched = await registry.client.patch(url, json={"properties": {"note": None, "efficiency": 1}})
    assert patched.status_code == 200, patched.text
    assert patched.json()["properties"] == {"serial": "S-1", "efficiency": 1}
    assert patched.json()["metadata"]["name"] == "Stove"  # absent fields stay
    assert patched.json()["version"] == 3

    for change, fields in [
        ({"serial": None}, ["properties.serial"]),
        ({"efficiency": "high"}, ["properties.efficiency"]),
        ({"efficiency": True}, ["properties.efficiency"]),
        ({"ghost": 1}, ["properties.ghost"]),
        ({"serial": 5, "ghost": 1}, ["properties.serial", "properties.ghost"]),
    ]:
        response = await registry.client.patch(url, json={"properties": change})
        assert sorted(fields_of(response)) == sorted(fields), change
    unchanged = (await registry.client.get(url)).json()
    assert unchanged["version"] == 3
    assert unchanged["properties"] == {"serial": "S-1", "efficiency": 1}


async def test_merge_patch_merges_nested_objects(registry: Registry) -> None:
    """RFC 7396: objects merge recursively, and a null anywhere removes that key."""
    org = await make_domain(
        registry, metadata={"name": "N", "address": {"street": "Moi Ave", "city": "Kisumu"}}
    )
    url = f"/v1/domains/{org['did']}"
    response = await registry.client.patch(
        url, json={"metadata": {"address": {"city": "Nairobi", "street": None, "zip": "00100"}}}
    )
    assert response.status_code == 200, response.text
    assert response.json()["metadata"] == {
        "name": "N",
        "address": {"city": "Nairobi", "zip": "00100"},
    }


PATCH_PROBLEMS = [
    pytest.param({"verified": True}, ["verified"], id="verified"),
    pytest.param({"status": "active"}, ["status"], id="status"),
    pytest.param({"status": "deactivated"}, ["status"], id="status-deactivated"),
    pytest.param({"type": "Project"}, ["type"], id="type"),
    pytest.param({"class": PROJECT}, ["class"], id="class"),
    pytest.param({"protocol": PROJECT}, ["protocol"], id="protocol"),
    pytest.param({"did": "did:ixo:entity/other"}, ["did"], id="did"),
    pytest.param({"version": 9}, ["version"], id="version"),
    pytest.param({"relationships": {"a": "b"}}, ["relationships"], id="relationships"),
    pytest.param({"controller": ["nope"]}, ["controller[0]"], id="controller-not-did"),
    pytest.param({"controller": []}, ["controller"], id="controller-empty"),
    pytest.param({"services": [SERVICE, SERVICE]}, ["services[1].id"], id="services-twice"),
    pytest.param(
        {"verifiableCredential": [{"type": "C", "issuer": "x"}]},
        ["verifiableCredential[0].issuer"],
        id="credential-issuer",
    ),
    pytest.param(
        {"validFrom": "2030-01-01T00:00:00Z", "validUntil": "2029-01-01T00:00:00Z"},
        ["validUntil"],
        id="until-before-from",
    ),
    pytest.param({"metadata": {"name": ""}}, ["metadata.name"], id="metadata-name-empty"),
    pytest.param({"metadata": {"name": 5}}, ["metadata.name"], id="metadata-name-number"),
    pytest.param({"metadata": "x"}, ["metadata"], id="metadata-not-object"),
]


@pytest.mark.parametrize(("change", "expected"), PATCH_PROBLEMS)
async def test_patch_rules(registry: Registry, change: dict[str, Any], expected: list[str]) -> None:
    org = await make_domain(registry)
    url = f"/v1/domains/{org['did']}"
    response = await registry.client.patch(url, json=change)
    assert fields_of(response) == expected
    after = (await registry.client.get(url)).json()
    assert after["version"] == 1
    assert after["verified"] is False and after["status"] == "active"
    assert after["metadata"] == org["metadata"]


async def test_patch_other_fields(registry: Registry) -> None:
    org = await make_domain(registry)
    url = f"/v1/domains/{org['did']}"
    service = {"id": "#api", "type": "API", "endpoint": "https://api.example"}
    credential = {"type": "Audit", "issuer": "did:ixo:org/auditor"}
    response = await registry.client.patch(
        url,
        json={
            "services": [service],
            "verifiableCredential": [credential],
        },
    )
    assert response.status_code == 200, response.text
    record = response.json()
    assert record["services"] == [service]
    assert record["verifiableCredential"] == [credential]
    assert record["createdAt"] == org["createdAt"]
    assert datetime.fromisoformat(record["updatedAt"]) >= datetime.fromisoformat(org["updatedAt"])


async def test_patch_sets_and_clears_validity(registry: Registry) -> None:
    org = await make_domain(registry)
    url = f"/v1/domains/{org['did']}"
    both = await registry.client.patch(
        url, json={"validFrom": "2030-01-01T00:00:00Z", "validUntil": "2031-01-01T00:00:00Z"}
    )
    assert both.status_code == 200, both.text
    early = await registry.client.patch(url, json={"validUntil": "2029-01-01T00:00:00Z"})
    assert fields_of(early) == ["validUntil"]  # checked against the kept validFrom
    cleared = await registry.client.patch(
        url, json={"validFrom": None, "validUntil": "2040-01-01T00:00:00Z"}
    )
    assert cleared.status_code == 200, cleared.text
    assert cleared.json()["validFrom"] is None
    until = datetime.fromisoformat(cleared.json()["validUntil"])
    assert until == datetime(2040, 1, 1, tzinfo=UTC)
    assert cleared.json()["version"] == 3


async def test_delete_deactivates_and_keeps_the_record(registry: Registry) -> None:
    org = await make_domain(registry)
    url = f"/v1/domains/{org['did']}"
    gone = await registry.client.delete(url)
    assert gone.status_code == 200
    assert gone.json()["status"] == "deactivated" and gone.json()["version"] == 2
    assert gone.json()["metadata"] == org["metadata"]
    kept = await registry.client.get(url)
    assert kept.status_code == 200 and kept.json()["status"] == "deactivated"
    error_of(await registry.client.patch(url, json={"metadata": {"a": 1}}), 409, "conflict")
    error_of(
        await registry.client.patch(url, json={"metadata": {"a": 1}}, headers={"If-Match": "*"}),
        409,
    )
    error_of(await registry.client.delete(url), 409, "conflict")
    assert (await registry.client.get(url)).json()["version"] == 2
    retired = await every_page(
        registry.client, "/v1/domains", controller=BOOTSTRAP_PRINCIPAL, status="deactivated"
    )
    assert org["did"] in {item["did"] for item in retired}


async def test_history_and_earlier_versions(registry: Registry) -> None:
    actor = did_of("historian")
    token = await registry.key(actor, "writer")
    target = await make_domain(registry, type="Project", **{"class": PROJECT})
    async with registry.as_key(token) as writer:
        created = (
            await writer.post(
                "/v1/domains",
                json={"type": "Organisation", "class": ORG, "metadata": {"name": "v1"}},
            )
        ).json()
        url = f"/v1/domains/{created['did']}"
        v2 = await writer.patch(url, json={"metadata": {"name": "v2"}})
        v3 = await writer.post(
            f"{url}/relationships", json={"type": "implements", "target": target["did"]}
        )
    v4 = await registry.client.patch(url, json={"metadata": {"name": "v4"}})
    v5 = await registry.client.delete(url)
    assert [r.status_code for r in (v2, v3, v4, v5)] == [200, 200, 200, 200]

    history = (await registry.client.get(f"{url}/history")).json()["items"]
    assert [entry["version"] for entry in history] == [1, 2, 3, 4, 5]
    heights = [entry["height"] for entry in history]
    assert heights == sorted(heights) and len(set(heights)) == 5
    assert [entry["kind"] for entry in history] == [
        "domain.create",
        "domain.update",
        "domain.relate",
        "domain.update",
        "domain.deactivate",
    ]
    assert [entry["actor"] for entry in history] == [actor] * 3 + [BOOTSTRAP_PRINCIPAL] * 2
    assert len({entry["txHash"] for entry in history}) == 5
    names = ["v1", "v2", "v2", "v4", "v4"]
    for entry, name in zip(history, names, strict=True):
        assert entry["record"]["metadata"]["name"] == name
        earlier = await registry.client.get(url, params={"version": entry["version"]})
        assert earlier.status_code == 200, earlier.text
        assert earlier.json()["version"] == entry["version"]
        assert earlier.json()["metadata"]["name"] == name
        assert earlier.json()["relationships"] == entry["record"]["relationships"]
    assert (await registry.client.get(url, params={"version": 4})).json()["status"] == "active"
    assert (await registry.client.get(url, params={"version": 5})).json()["status"] == "deactivated"
    current = (await registry.client.get(url)).json()
    assert (await registry.client.get(url, params={"version": 5})).json() == current
    error_of(await registry.client.get(url, params={"version": 6}), 404, "not_found")
    error_of(await registry.client.get(url, params={"version": 0}), 422)
    error_of(await registry.client.get(url, params={"version": "latest"}), 422)
    error_of(await registry.client.get("/v1/domains/did:ixo:entity/ghost/history"), 404)
    error_of(
        await registry.client.get("/v1/domains/did:ixo:entity/ghost", params={"version": 1}), 404
    )


# -- idempotency ---------------------------------------------------------------------------
async def test_idempotent_repeat_returns_the_first_answer_and_creates_once(
    registry: Registry,
) -> None:
    controller = did_of("idem")
    body = {
        "type": "Organisation",
        "class": ORG,
        "controller": controller,
        "metadata": {"name": "I"},
    }
    headers = {"Idempotency-Key": unique("k")}
    total_before = await count_domains(registry)
    first = await registry.client.post("/v1/domains", json=body, headers=headers)
    assert first.status_code == 201, first.text
    assert "idempotent-replayed" not in first.headers
    for _ in range(3):
        again = await registry.client.post("/v1/domains", json=body, headers=headers)
        assert again.status_code == 201
        assert again.json() == first.json()
        assert again.headers["idempotent-replayed"] == "true"
        assert again.headers["location"] == first.headers["location"]
    assert await count_domains(registry, controller=controller) == 2  # organisation + group
    assert await count_domains(registry) == total_before + 2
    without = await registry.client.post("/v1/domains", json=body)
    assert without.status_code == 201 and without.json()["did"] != first.json()["did"]


async def test_idempotency_on_protocols_entities_and_relationships(registry: Registry) -> None:
    slug = unique("idem")
    protocol_body_ = {"type": "Protocol", "id": slug, "properties": {"a": "string"}}
    key = {"Idempotency-Key": unique("k")}
    first = await registry.client.post("/v1/protocols", json=protocol_body_, headers=key)
    again = await registry.client.post("/v1/protocols", json=protocol_body_, headers=key)
    assert first.status_code == again.status_code == 201, again.text
    assert again.json() == first.json() and again.headers["idempotent-replayed"] == "true"

    entity_key = {"Idempotency-Key": unique("k")}
    entity = {"type": "Device", "protocol": f"did:ixo:protocol/{slug}", "properties": {"a": "x"}}
    one = await registry.client.post("/v1/entities", json=entity, headers=entity_key)
    two = await registry.client.post("/v1/entities", json=entity, headers=entity_key)
    assert one.status_code == two.status_code == 201
    assert one.json()["did"] == two.json()["did"]
    assert await count_domains(registry, **{"class": f"did:ixo:protocol/{slug}"}) == 1

    org = await make_domain(registry)
    edge_key = {"Idempotency-Key": unique("k")}
    url = f"/v1/domains/{one.json()['did']}/relationships"
    edge = {"type": "operator", "target": org["did"]}
    related = await registry.client.post(url, json=edge, headers=edge_key)
    replayed = await registry.client.post(url, json=edge, headers=edge_key)
    assert related.status_code == replayed.status_code == 200, replayed.text
    assert replayed.json() == related.json() and replayed.headers["idempotent-replayed"] == "true"
    assert (await registry.client.get(f"/v1/domains/{one.json()['did']}")).json()["version"] == 2
    # The same key on another route is another request.
    other_route = await registry.client.post("/v1/domains", json=edge, headers=edge_key)
    error_of(other_route, 422, "validation_failed")


async def test_a_refused_request_does_not_use_up_the_key(registry: Registry) -> None:
    controller = did_of("refused")
    key = {"Idempotency-Key": unique("k")}
    shape = await registry.client.post(
        "/v1/domains", json={"type": "Project", "class": PROJECT, "colour": 1}, headers=key
    )
    assert fields_of(shape) == ["colour"]
    rule = await registry.client.post(
        "/v1/domains", json={"type": "Project", "class": "did:ixo:protocol/ghost"}, headers=key
    )
    assert fields_of(rule) == ["class"]
    slug = unique("taken")
    await make_domain(registry, id=slug, type="Project", **{"class": PROJECT})
    conflict = await registry.client.post(
        "/v1/domains", json={"type": "Project", "class": PROJECT, "id": slug}, headers=key
    )
    error_of(conflict, 409, "conflict")
    good_body = {"type": "Project", "class": PROJECT, "controller": controller}
    good = await registry.client.post("/v1/domains", json=good_body, headers=key)
    assert good.status_code == 201, good.text
    assert "idempotent-replayed" not in good.headers
    replay = await registry.client.post("/v1/domains", json=good_body, headers=key)
    assert replay.headers["idempotent-replayed"] == "true"
    different = await registry.client.post(
        "/v1/domains", json={**good_body, "metadata": {"name": "x"}}, headers=key
    )
    error_of(different, 422, "validation_failed")
    assert await count_domains(registry, controller=controller) == 1


async def test_idempotency_keys_belong_to_one_principal(registry: Registry) -> None:
    first_did, second_did = did_of("one"), did_of("two")
    key = {"Idempotency-Key": unique("shared")}
    body = {"type": "Project", "class": PROJECT}
    async with (
        registry.as_key(await registry.key(first_did, "writer")) as first,
        registry.as_key(await registry.key(second_did, "writer")) as second,
    ):
        a = await first.post("/v1/domains", json=body, headers=key)
        b = await second.post("/v1/domains", json=body, headers=key)
        c = await second.post("/v1/domains", json={**body, "metadata": {"name": "c"}}, headers=key)
    assert a.status_code == b.status_code == 201
    assert "idempotent-replayed" not in b.headers
    # Another key of the first principal is the same principal: it gets the first answer.
    async with registry.as_key(await registry.key(first_did, "writer")) as first_again:
        d = await first_again.post("/v1/domains", json=body, headers=key)
    assert d.status_code == 201 and d.headers["idempotent-replayed"] == "true"
    assert d.json() == a.json()
    assert a.json()["did"] != b.json()["did"]
    assert a.json()["controller"] == [first_did] and b.json()["controller"] == [second_did]
    error_of(c, 422)  # second's key now stands for second's first body


@pytest.mark.parametrize("key", ["", "k" * 201], ids=["empty", "too-long"])
async def test_idempotency_key_length(registry: Registry, key: str) -> None:
    controller = did_of("len")
    response = await registry.client.post(
        "/v1/domains",
        json={"type": "Project", "class": PROJECT, "controller": controller},
        headers={"Idempotency-Key": key},
    )
    assert fields_of(response) == ["Idempotency-Key"]
    assert await count_domains(registry, controller=controller) == 0


# -- errors --------------------------------------------------------------------------------
GHOST = "did:ixo:entity/ghost"
JSON = {"content-type": "application/json"}
ERRORS = [
    pytest.param(
        "POST",
        "/v1/domains",
        {"content": b"{not json", "headers": JSON},
        400,
        "malformed_json",
        id="post-domain-malformed",
    ),
    pytest.param(
        "POST",
        "/v1/protocols",
        {"content": b'{"type": "Protocol",', "headers": JSON},
        400,
        "malformed_json",
        id="post-protocol-malformed",
    ),
    pytest.param(
        "POST",
        "/v1/entities",
        {"content": b'{"type": "\xc3\x28"}', "headers": JSON},
        400,
        None,
        id="post-entity-not-utf8",
    ),
    pytest.param(
        "POST", "/v1/domains", {"json": []}, 422, "validation_failed", id="post-domain-array"
    ),
    pytest.param(
        "POST",
        "/v1/domains",
        {"json": "Organisation"},
        422,
        "validation_failed",
        id="post-domain-string",
    ),
    pytest.param("GET", f"/v1/domains/{GHOST}", {}, 404, "not_found", id="get-unknown-domain"),
    pytest.param(
        "GET",
        "/v1/protocols/did:ixo:protocol/ghost",
        {},
        404,
        "not_found",
        id="get-unknown-protocol",
    ),
    pytest.param(
        "PATCH",
        f"/v1/domains/{GHOST}",
        {"json": {"metadata": {}}},
        404,
        "not_found",
        id="patch-unknown",
    ),
    pytest.param("DELETE", f"/v1/domains/{GHOST}", {}, 404, "not_found", id="delete-unknown"),
    pytest.param("GET", f"/v1/domains/{GHOST}/history", {}, 404, "not_found", id="history-unknown"),
    pytest.param("GET", f"/v1/domains/{GHOST}/graph", {}, 404, "not_found", id="graph-unknown"),
    pytest.param("GET", "/v1/nothing-here", {}, 404, "not_found", id="unknown-v1-route"),
    pytest.param("GET", "/nothing-here", {}, 404, "not_found", id="unknown-route"),
    pytest.param("PUT", "/v1/domains", {"json": {}}, 405, "method_not_allowed", id="put-domains"),
    pytest.param("DELETE", "/v1/protocols", {}, 405, "method_not_allowed", id="delete-protocols"),
    pytest.param(
        "PATCH",
        "/v1/protocols/did:ixo:protocol/project",
        {"json": {}},
        405,
        "method_not_allowed",
        id="patch-protocol",
    ),
    pytest.param(
        "POST",
        "/v1/protocols",
        {"json": {"type": "Protocol", "id": "organisation"}},
        409,
        "conflict",
        id="duplicate-protocol",
    ),
]


@pytest.mark.parametrize(("method", "path", "kwargs", "status", "code"), ERRORS)
async def test_errors_share_one_shape(
    registry: Registry,
    method: str,
    path: str,
    kwargs: dict[str, Any],
    status: int,
    code: str | None,
) -> None:
    before = await count_domains(registry) if method == "POST" else None
    response = await registry.client.request(method, path, **kwargs)
    error_of(response, status, code)
    if before is not None:
        assert await count_domains(registry) == before


def lenient(registry: Registry) -> httpx.AsyncClient:
    """The admin client, except that a server crash comes back as its 500 response."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=registry.asgi, raise_app_exceptions=False),
        base_url="http://registry.test",
        headers={"Authorization": f"Bearer {BOOTSTRAP_KEY}"},
    )


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400"])
async def test_numbers_json_cannot_carry_are_refused(registry: Registry, literal: str) -> None:
    """NaN and Infinity are not JSON, and 1e400 is no finite number: refuse, store nothing."""
    controller = did_of("odd")
    body = (
        f'{{"type": "Project", "class": "{PROJECT}", "controller": "{controller}", '
        f'"metadata": {{"n": {literal}}}}}'
    )
    async with lenient(registry) as client:
        response = await client.post("/v1/domains", content=body.encode(), headers=JSON)
    assert response.status_code in (400, 422), (response.status_code, response.text)
    error_of(response, response.status_code)
    assert await count_domains(registry, controller=controller) == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [("metadata", 10**30), ("metadata", -(2**64)), ("properties", 2**64)],
    ids=["metadata-1e30", "metadata-minus-2e64", "integer-property-2e64"],
)
async def test_integers_beyond_64_bits_are_kept_or_refused(
    registry: Registry, field: str, value: int
) -> None:
    protocol = await make_protocol(registry, properties={"n": "integer"})
    body = {"type": "Device", "protocol": protocol["did"], field: {"n": value}}
    async with lenient(registry) as client:
        response = await client.post("/v1/entities", json=body)
    assert response.status_code in (201, 422), (response.status_code, response.text)
    if response.status_code == 201:
        fetched = await registry.client.get(f"/v1/domains/{response.json()['did']}")
        assert fetched.json()[field] == {"n": value}
    else:
        assert fields_of(response)
    assert (await registry.platform.ledger.verify()).ok


@pytest.mark.parametrize(
    "change",
    [{"metadata": {"name": "Jiko\x00Co-op"}}, {"metadata": {"note\x00": 1}}],
    ids=["in-a-value", "in-a-key"],
)
async def test_nul_characters_are_kept_or_refused(registry: Registry, change: dict) -> None:
    controller = did_of("nul")
    body = {"type": "Project", "class": PROJECT, "controller": controller, **change}
    async with lenient(registry) as client:
        response = await client.post("/v1/domains", json=body)
    assert response.status_code in (201, 422), (response.status_code, response.text)
    if response.status_code == 201:
        assert response.json()["metadata"] == change["metadata"]
    else:
        assert await count_domains(registry, controller=controller) == 0


@pytest.mark.parametrize(
    "metadata",
    ['{"name": "Jiko\\ud800"}', '{"\\udfff": 1}', '{"tags": ["ok", "\\udbff\\u0041"]}'],
    ids=["in-a-value", "in-a-key", "in-a-list"],
)
async def test_lone_surrogates_are_refused_not_a_crash(registry: Registry, metadata: str) -> None:
    """JSON may escape half a UTF-16 pair; that is no text and cannot be stored: 422."""
    controller = did_of("surrogate")
    body = (
        f'{{"type": "Project", "class": "{PROJECT}", "controller": "{controller}", '
        f'"metadata": {metadata}}}'
    )
    async with lenient(registry) as client:
        response = await client.post("/v1/domains", content=body.encode(), headers=JSON)
        [detail] = error_of(response, 422, "validation_failed")["details"]
        assert "surrogate" in detail["error"] and "metadata" in detail["error"]
        # A whole pair is one character, and is kept.
        paired = body.replace("\\ud800", "\\ud83d\\udd25").replace("\\udfff", "\\ud83d\\udd25")
        paired = paired.replace("\\udbff\\u0041", "\\ud83d\\udd25")
        kept = await client.post("/v1/domains", content=paired.encode(), headers=JSON)
    assert kept.status_code == 201, kept.text
    assert "\U0001f525" in str(kept.json()["metadata"])
    assert await count_domains(registry, controller=controller) == 1
    assert (await registry.platform.ledger.verify()).ok


async def test_a_nul_character_in_a_path_or_a_query_is_refused(registry: Registry) -> None:
    """No database column holds a NUL (issue 31 §1): refused before any route reads it."""
    async with lenient(registry) as client:
        for path in (
            "/v1/domains/did:ixo:entity/jiko%00coop",
            "/v1/domains/did:ixo:entity/jiko%00coop/history",
            "/v1/domains/did:ixo:entity/jiko%00coop/graph",
            "/v1/protocols/did:ixo:protocol/stove%00",
        ):
            error = error_of(await client.get(path), 422, "validation_failed")
            assert error["details"] == [
                {"field": "path", "error": "must not contain a NUL character"}
            ]
        listed = await client.get("/v1/domains", params={"controller": "did:ixo:org/a\x00b"})
        error = error_of(listed, 422, "validation_failed")
        assert [d["field"] for d in error["details"]] == ["controller"]


async def test_bodies_over_the_limit_are_413(make_registry: RegistryFactory) -> None:
    registry = await make_registry(registry_max_body_bytes=2048)
    controller = did_of("limit")

    def body_of_size(size: int) -> bytes:
        start = b'{"type": "Project", "class": "' + PROJECT.encode() + b'", "controller": "'
        start += controller.encode() + b'", "metadata": {"pad": "'
        end = b'"}}'
        return start + b"x" * (size - len(start) - len(end)) + end

    at_limit = await registry.client.post("/v1/domains", content=body_of_size(2048), headers=JSON)
    assert at_limit.status_code == 201, at_limit.text
    over = await registry.client.post("/v1/domains", content=body_of_size(2049), headers=JSON)
    error_of(over, 413, "too_large")
    patch = await registry.client.patch(
        f"/v1/domains/{at_limit.json()['did']}",
        json={"metadata": {"pad": "x" * 4000}},
    )
    error_of(patch, 413, "too_large")
    async with registry.as_key(None) as anonymous:
        error_of(await anonymous.post("/v1/protocols", content=b"x" * 5000, headers=JSON), 413)
    assert await count_domains(registry, controller=controller) == 1


async def test_streamed_bodies_over_the_limit_are_413(make_registry: RegistryFactory) -> None:
    """Without Content-Length (chunked), the limit holds all the same."""
    registry = await make_registry(registry_max_body_bytes=2048)

    async def chunks() -> Any:
        yield b'{"type": "Project", "class": "did:ixo:protocol/project", "metadata": {"pad": "'
        for _ in range(10):
            yield b"x" * 500
        yield b'"}}'

    response = await registry.client.post("/v1/domains", content=chunks(), headers=JSON)
    assert "content-length" not in response.request.headers
    error_of(response, 413, "too_large")


# -- OpenAPI -------------------------------------------------------------------------------
async def test_openapi_describes_every_route_with_auth_and_errors(registry: Registry) -> None:
    async with registry.as_key(None) as anonymous:
        docs = await anonymous.get("/docs")
        spec_response = await anonymous.get("/openapi.json")
    assert docs.status_code == 200
    assert docs.headers["content-type"].startswith("text/html")
    assert "/openapi.json" in docs.text
    assert spec_response.status_code == 200
    spec = spec_response.json()
    schemes = spec["components"]["securitySchemes"]
    bearer = [
        name for name, s in schemes.items() if s["type"] == "http" and s["scheme"] == "bearer"
    ]
    assert len(bearer) == 1

    expected: set[tuple[str, str]] = set()
    routers = [
        hot_router,
        create_router,
        v1_router,
        governance_router,
        claims_router,
        summaries_router,
        telemetry_router,
        events_router,
        admin_router,
        customers_router,
        oracle_router,
        workflow_router,
        support_router,
        surveys_router,
        workflow_router,
        retirements_router,
    ]
    # Anyone checks a retirement certificate: no key asked (routes_retirements.py).
    public = {
        ("get", "/v1/retirements/{retirement_id}/certificate"),
        ("post", "/v1/retirement-certificates/verification"),
    }
    for route in [r for router in routers for r in router.routes]:
        if getattr(route, "path", "").startswith("/v1/"):
            for method in route.methods - {"HEAD"}:
                expected.add((method.lower(), re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path)))
    assert len(expected) >= 12
    documented = {
        (method, path)
        for path, operations in spec["paths"].items()
        for method in operations
        if path.startswith("/v1/")
    }
    assert expected == documented
    for method, path in sorted(expected):
        operation = spec["paths"][path][method]
        if (method, path) in public:
            assert "security" not in operation, (method, path)
            continue
        assert {bearer[0]: []} in operation.get("security", []), (method, path)
        responses = set(operation["responses"])
        assert {"400", "401", "403", "404", "422"} <= responses, (method, path, responses)
        assert any(code.startswith("2") for code in responses)
        if method == "post":
            assert "409" in responses and "413" in responses, (method, path)
    assert "412" in spec["paths"]["/v1/domains/{did}"]["patch"]["responses"]
