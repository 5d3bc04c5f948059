"""The registry API's core journeys over HTTP: protocols, domains, entities, reads, changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from tests.conftest import Backend, Registry, RegistryFactory, running_registry, unique
from twinhub.registry.app import _included_routers


async def make_protocol(registry: Registry, **fields: object) -> dict:
    body = {"type": "Protocol", "id": unique("stove"), "entityType": "Device", **fields}
    response = await registry.client.post("/v1/protocols", json=body)
    assert response.status_code == 201, response.text
    return response.json()


async def make_domain(registry: Registry, **fields: object) -> dict:
    body = {"type": "Organisation", "class": "did:ixo:protocol/organisation", **fields}
    body.setdefault("metadata", {"name": "Jiko Co-op"})
    response = await registry.client.post("/v1/domains", json=body)
    assert response.status_code == 201, response.text
    return response.json()


async def test_builtin_protocols_exist_on_a_fresh_platform(
    backend: Backend, make_registry: RegistryFactory, tmp_path: Path
) -> None:
    # The tests' databases are copies of one a start has already seen (tests/conftest.py):
    # on SQLite this platform starts on an empty file, as a new installation does.
    empty = {"database_url": f"sqlite:///{tmp_path / 'new.db'}"}
    registry = await make_registry(**(empty if backend.database == "sqlite" else {}))
    for slug in ("organisation", "project", "device", "clean-cooking", "oracle", "asset"):
        response = await registry.client.get(f"/v1/protocols/did:ixo:protocol/{slug}")
        assert response.status_code == 200, slug
        assert response.json()["did"] == f"did:ixo:protocol/{slug}"


async def test_register_a_protocol_and_read_it_back(registry: Registry) -> None:
    slug = unique("stove")
    created = await make_protocol(
        registry,
        id=slug,
        name="Improved cookstove",
        properties={"serialNumber": "string", "efficiency": "number"},
        required=["serialNumber"],
        relationships={"verifier": "Oracle"},
    )
    assert created["did"] == f"did:ixo:protocol/{slug}"
    fetched = (await registry.client.get(f"/v1/protocols/{created['did']}")).json()
    assert fetched["properties"] == {"serialNumber": "string", "efficiency": "number"}
    assert fetched["relationships"] == {"verifier": "Oracle"}
    again = await registry.client.post(
        "/v1/protocols", json={"type": "Protocol", "id": slug, "name": "x"}
    )
    assert again.status_code == 409


async def test_the_seed_quick_start_body_creates_a_domain(registry: Registry) -> None:
    body = {
        "type": "Organisation",
        "protocol": "did:ixo:protocol/organisation",
        "metadata": {"name": "Clean Cooking Co-op"},
    }
    response = await registry.client.post("/v1/domains", json=body)
    assert response.status_code == 201, response.text
    record = response.json()
    assert record["did"].startswith("did:ixo:entity/")
    assert record["class"] == record["protocol"] == "did:ixo:protocol/organisation"
    assert record["verified"] is False
    assert record["version"] == 1
    assert record["status"] == "active"
    assert record["twinClass"] == "cognitive"
    assert response.headers["location"] == f"/v1/domains/{record['did']}"


async def test_organisation_gets_a_membership_group(registry: Registry) -> None:
    org = await make_domain(registry)
    group_did = org["membershipGroup"]
    assert group_did
    group = (await registry.client.get(f"/v1/domains/{group_did}")).json()
    assert group["type"] == "Group"
    assert group["parent"] == org["did"]
    assert group["metadata"]["name"] == "Jiko Co-op members"


async def test_class_and_protocol_must_agree(registry: Registry) -> None:
    response = await registry.client.post(
        "/v1/domains",
        json={
            "type": "Project",
            "class": "did:ixo:protocol/project",
            "protocol": "did:ixo:protocol/organisation",
        },
    )
    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["field"] == "class"


async def test_entity_properties_are_checked_against_the_protocol(registry: Registry) -> None:
    protocol = await make_protocol(
        registry,
        properties={"serialNumber": "string", "efficiency": "number", "installedAt": "date-time"},
        required=["serialNumber"],
    )
    bad = await registry.client.post(
        "/v1/entities",
        json={
            "type": "Device",
            "protocol": protocol["did"],
            "properties": {"efficiency": "high", "colour": "red", "installedAt": "yesterday"},
        },
    )
    assert bad.status_code == 422
    details = {d["field"]: d["error"] for d in bad.json()["error"]["details"]}
    assert set(details) == {
        "properties.efficiency",
        "properties.colour",
        "properties.installedAt",
        "properties.serialNumber",
    }
    good = await registry.client.post(
        "/v1/entities",
        json={
            "type": "Device",
            "protocol": protocol["did"],
            "properties": {"serialNumber": "JK-1", "efficiency": 0.42},
        },
    )
    assert good.status_code == 201, good.text
    assert good.json()["twinClass"] == "physical"


async def test_protocol_roles_must_point_at_the_declared_kind(registry: Registry) -> None:
    protocol = await make_protocol(registry, relationships={"verifier": "Oracle"})
    org = await make_domain(registry)
    wrong = await registry.client.post(
        "/v1/entities",
        json={
            "type": "Device",
            "protocol": protocol["did"],
            "relationships": {"verifier": org["did"]},
        },
    )
    assert wrong.status_code == 422
    assert wrong.json()["error"]["details"][0]["field"] == "relationships.verifier[0]"
    oracle = await make_domain(
        registry, type="Oracle", **{"class": "did:ixo:protocol/oracle"}, metadata={"name": "Eval"}
    )
    right = await registry.client.post(
        "/v1/entities",
        json={
            "type": "Device",
            "protocol": protocol["did"],
            "relationships": {"verifier": oracle["did"]},
        },
    )
    assert right.status_code == 201, right.text
    assert {"type": "verifier", "target": oracle["did"]} in right.json()["relationships"]


async def test_patch_with_if_match_and_history(registry: Registry) -> None:
    org = await make_domain(registry)
    url = f"/v1/domains/{org['did']}"
    changed = await registry.client.patch(
        url, json={"metadata": {"website": "https://jiko.example"}}, headers={"If-Match": '"1"'}
    )
    assert changed.status_code == 200, changed.text
    assert changed.headers["etag"] == '"2"'
    assert changed.json()["metadata"] == {"name": "Jiko Co-op", "website": "https://jiko.example"}
    stale = await registry.client.patch(
        url, json={"metadata": {"name": "Other"}}, headers={"If-Match": '"1"'}
    )
    assert stale.status_code == 412
    history = (await registry.client.get(f"{url}/history")).json()["items"]
    assert [entry["version"] for entry in history] == [1, 2]
    assert history[0]["record"]["metadata"] == {"name": "Jiko Co-op"}
    earlier = (await registry.client.get(url, params={"version": 1})).json()
    assert earlier["metadata"] == {"name": "Jiko Co-op"}


async def test_deactivate_instead_of_delete(registry: Registry) -> None:
    org = await make_domain(registry)
    url = f"/v1/domains/{org['did']}"
    gone = await registry.client.delete(url)
    assert gone.status_code == 200
    assert gone.json()["status"] == "deactivated"
    assert (await registry.client.get(url)).json()["status"] == "deactivated"
    assert (await registry.client.patch(url, json={"metadata": {"a": 1}})).status_code == 409


async def test_errors_share_one_shape(registry: Registry) -> None:
    malformed = await registry.client.post(
        "/v1/domains", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert malformed.status_code == 400
    assert malformed.json()["error"]["code"] == "malformed_json"
    unknown = await registry.client.get("/v1/domains/did:ixo:entity/nobody")
    assert unknown.status_code == 404
    assert set(unknown.json()["error"]) == {"code", "message", "details"}
    anonymous = registry.as_key(None)
    response = await anonymous.get("/v1/domains")
    assert response.status_code == 401
    await anonymous.aclose()


async def test_reader_cannot_write(registry: Registry) -> None:
    token = await registry.key("did:ixo:org/auditor", "reader")
    reader = registry.as_key(token)
    assert (await reader.get("/v1/protocols")).status_code == 200
    response = await reader.post(
        "/v1/domains", json={"type": "Organisation", "class": "did:ixo:protocol/organisation"}
    )
    assert response.status_code == 403
    await reader.aclose()


async def test_idempotency_key_creates_once(registry: Registry) -> None:
    body = {"type": "Organisation", "class": "did:ixo:protocol/organisation"}
    headers = {"Idempotency-Key": unique("key")}
    first = await registry.client.post("/v1/domains", json=body, headers=headers)
    second = await registry.client.post("/v1/domains", json=body, headers=headers)
    assert first.status_code == second.status_code == 201
    assert first.json() == second.json()
    assert second.headers["idempotent-replayed"] == "true"
    different = await registry.client.post(
        "/v1/domains", json={**body, "metadata": {"name": "x"}}, headers=headers
    )
    assert different.status_code == 422


# What a domain's read returns that a write takes: the rest (did, version, status, ...)
# is the registry's own.
WRITABLE = (
    "type",
    "protocol",
    "metadata",
    "properties",
    "controller",
    "services",
    "verifiableCredential",
    "relationships",
    "validFrom",
    "validUntil",
)


async def test_what_a_read_returns_can_be_written_back(registry: Registry) -> None:
    """Relationships read as a list of {type, target} and are written as a map or as that
    list; an entity and a domain copied from their reads come back the same."""
    protocol = await make_protocol(registry, relationships={"verifier": "Oracle"})
    oracle = await make_domain(
        registry, type="Oracle", **{"class": "did:ixo:protocol/oracle"}, metadata={"name": "E"}
    )
    org = await make_domain(registry)
    original = await registry.client.post(
        "/v1/entities",
        json={
            "type": "Device",
            "protocol": protocol["did"],
            "metadata": {"name": "Jiko 1"},
            "relationships": {"verifier": oracle["did"], "operator": [org["did"]]},
            "services": [{"id": "#ingest", "type": "DataIngestion", "endpoint": "https://x.org"}],
            "validFrom": "2026-01-01T00:00:00Z",
        },
    )
    assert original.status_code == 201, original.text
    read = (await registry.client.get(f"/v1/domains/{original.json()['did']}")).json()
    assert isinstance(read["relationships"], list)
    for path in ("/v1/entities", "/v1/domains"):
        copied = await registry.client.post(path, json={k: read[k] for k in WRITABLE})
        assert copied.status_code == 201, (path, copied.text)
        again = (await registry.client.get(f"/v1/domains/{copied.json()['did']}")).json()
        assert {k: again[k] for k in WRITABLE} == {k: read[k] for k in WRITABLE}
    # The list is checked as the map is: a role pointing at the wrong kind is refused.
    wrong = await registry.client.post(
        "/v1/entities",
        json={
            "type": "Device",
            "protocol": protocol["did"],
            "relationships": [{"type": "verifier", "target": org["did"]}],
        },
    )
    assert wrong.status_code == 422
    assert wrong.json()["error"]["details"][0]["field"] == "relationships.verifier[0]"
    malformed = await registry.client.post(
        "/v1/entities",
        json={"type": "Device", "protocol": protocol["did"], "relationships": [{"type": "x"}]},
    )
    assert malformed.status_code == 422


async def test_a_protocol_read_can_be_written_back(registry: Registry) -> None:
    read = await make_protocol(
        registry,
        name="Stove",
        properties={"serialNumber": "string"},
        required=["serialNumber"],
        relationships={"verifier": "Oracle"},
        services=[{"id": "#ingest", "type": "DataIngestion", "endpoint": "https://x.org"}],
    )
    fields = ("type", "name", "entityType", "twinClass", "properties", "required")
    body = {k: read[k] for k in (*fields, "relationships", "services", "extends")}
    copied = await registry.client.post("/v1/protocols", json=body | {"id": unique("copy")})
    assert copied.status_code == 201, copied.text
    assert {k: copied.json()[k] for k in body} == body


async def test_a_governance_group_read_can_be_written_back(registry: Registry) -> None:
    body = {
        "name": unique("Compliance"),
        "members": [{"did": "did:ixo:org/a", "weight": 2}, {"did": "did:ixo:org/b", "weight": 1}],
        "threshold": {"kind": "absolute_count", "value": 2, "quorum": None},
        "votingPeriodSeconds": 3600,
    }
    made = await registry.client.post("/v1/governance/groups", json=body)
    assert made.status_code == 201, made.text
    read = (await registry.client.get(f"/v1/governance/groups/{made.json()['did']}")).json()
    again = {k: read[k] for k in (*body, "default")} | {"id": unique("copy")}
    copied = await registry.client.post("/v1/governance/groups", json=again)
    assert copied.status_code == 201, copied.text
    assert {k: copied.json()[k] for k in body} == {k: read[k] for k in body}


async def test_graph(registry: Registry) -> None:
    org = await make_domain(registry)
    project = await make_domain(
        registry,
        type="Project",
        **{"class": "did:ixo:protocol/project"},
        metadata={"name": "Stoves for Kisumu"},
        relationships={"implementedBy": org["did"]},
    )
    graph = (
        await registry.client.get(f"/v1/domains/{project['did']}/graph", params={"depth": 2})
    ).json()
    dids = {node["did"] for node in graph["nodes"]}
    assert {project["did"], org["did"], org["membershipGroup"]} <= dids
    assert {"source": project["did"], "type": "implementedBy", "target": org["did"]} in graph[
        "edges"
    ]


async def test_metrics_label_routes_by_template_not_by_did(registry: Registry) -> None:
    org = await make_domain(registry)
    await registry.client.get(f"/v1/domains/{org['did']}")
    await registry.client.get("/v1/domains/did:ixo:entity/nobody")
    text = (await registry.client.get("/metrics")).text
    assert 'route="/v1/domains/{did:path}",status="200"' in text
    assert 'route="/v1/domains/{did:path}",status="404"' in text
    assert org["did"] not in text


async def test_rate_limit_per_principal(make_registry) -> None:
    registry = await make_registry(registry_rate_limit="3/minute")
    for _ in range(3):
        assert (await registry.client.get("/v1/protocols")).status_code == 200
    limited = await registry.client.get("/v1/protocols")
    assert limited.status_code == 429
    assert limited.json()["error"]["code"] == "rate_limited"
    assert "REGISTRY_RATE_LIMIT" in limited.json()["error"]["message"]  # the setting to raise
    assert 1 <= int(limited.headers["retry-after"]) <= 60
    other = registry.as_key(await registry.key("did:ixo:org/other", "reader"))
    assert (await other.get("/v1/protocols")).status_code == 200  # a budget of its own
    await other.aclose()
    assert (await registry.client.get("/health")).status_code == 200  # probes are not limited


async def test_routes_are_prepared_at_start_not_by_the_first_request(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FastAPI builds a router's route state (about 200 pydantic adapters for this API) when
    a request first walks it; the app does that walk at start-up, so no client's request
    pays hundreds of ms of CPU on the event loop (seconds on a busy machine)."""
    built: list[object] = []
    original = TypeAdapter.__init__

    def counting(self: TypeAdapter, *args: Any, **kwargs: Any) -> None:
        built.append(args[0] if args else None)
        original(self, *args, **kwargs)

    monkeypatch.setattr(TypeAdapter, "__init__", counting)
    for path in ("/v1/domains?limit=1", "/v1/protocols/did:ixo:protocol/device", "/v1/claims"):
        answer = await registry.client.get(path)
        assert answer.status_code == 200, answer.text
    assert built == []
    # Another app in this process shares the prepared routers: its start builds none.
    async with running_registry(registry.settings, registry.platform):
        assert built == []
    # The check can see adapters being built: an app whose routers are included afresh
    # prepares them during its start-up.
    _included_routers.cache_clear()
    async with running_registry(registry.settings, registry.platform):
        assert len(built) > 50
