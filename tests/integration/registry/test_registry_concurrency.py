"""Many writers at once: creates, changes, relationships and idempotent retries racing each
other on both backends, and (PostgreSQL) two app instances sharing one database. Whatever
the interleaving, nothing is lost or doubled, versions count every write once, and the
ledger stays one contiguous hash chain."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from tests.conftest import Backend, Registry, RegistryFactory, unique
from tests.integration.registry.test_registry_basics import make_domain

PROJECT = "did:ixo:protocol/project"
ORG = "did:ixo:protocol/organisation"


def controller_did() -> str:
    return f"did:ixo:org/{unique('race')}"


async def count(registry: Registry, **filters: str) -> int:
    response = await registry.client.get("/v1/domains", params={**filters, "count": "true"})
    assert response.status_code == 200, response.text
    return response.json()["total"]


async def chain_after(registry: Registry, height: int) -> list[dict[str, Any]]:
    """Ledger rows above `height`, in order (raw SQL, so the test trusts no service code)."""
    async with registry.platform.engine.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT height, tx_hash, prev_hash, kind, subject FROM ledger_transactions "
                "WHERE height > :height ORDER BY height"
            ),
            {"height": height},
        )
        return [dict(row) for row in rows.mappings()]


async def assert_one_contiguous_chain(registry: Registry, start: int, appended: int) -> list[dict]:
    """Exactly `appended` transactions above `start`, heights start+1.., each pointing at the
    one before; and the whole ledger verifies."""
    rows = await chain_after(registry, start)
    assert [row["height"] for row in rows] == list(range(start + 1, start + appended + 1))
    if start:
        previous = await registry.platform.ledger.transaction(start)
        assert rows[0]["prev_hash"] == previous.tx_hash
    for before, after in itertools.pairwise(rows):
        assert after["prev_hash"] == before["tx_hash"]
    assert len({row["tx_hash"] for row in rows}) == len(rows)
    assert await registry.platform.ledger.height() == start + appended
    report = await registry.platform.ledger.verify()
    assert report.ok, report
    return rows


async def test_thirty_concurrent_creates(registry: Registry) -> None:
    controller = controller_did()
    total_before = await count(registry)
    height_before = await registry.platform.ledger.height()
    responses = await asyncio.gather(
        *(
            registry.client.post(
                "/v1/domains",
                json={
                    "type": "Project",
                    "class": PROJECT,
                    "controller": controller,
                    "metadata": {"name": f"P{i}"},
                },
            )
            for i in range(30)
        )
    )
    assert [r.status_code for r in responses] == [201] * 30, [r.text for r in responses]
    dids = {r.json()["did"] for r in responses}
    assert len(dids) == 30
    assert {r.json()["metadata"]["name"] for r in responses} == {f"P{i}" for i in range(30)}
    assert await count(registry, controller=controller) == 30
    assert await count(registry) == total_before + 30
    rows = await assert_one_contiguous_chain(registry, height_before, 30)
    assert {row["subject"] for row in rows} == dids
    assert {row["kind"] for row in rows} == {"domain.create"}
    # Listing in pages still yields each exactly once.
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"controller": controller, "limit": 7}
        if cursor:
            params["cursor"] = cursor
        page = (await registry.client.get("/v1/domains", params=params)).json()
        seen += [item["did"] for item in page["items"]]
        cursor = page["nextCursor"]
        if not cursor:
            break
    assert sorted(seen) == sorted(dids)


async def test_concurrent_organisations_each_get_their_own_group(registry: Registry) -> None:
    controller = controller_did()
    height_before = await registry.platform.ledger.height()
    responses = await asyncio.gather(
        *(
            registry.client.post(
                "/v1/domains",
                json={"type": "Organisation", "class": ORG, "controller": controller},
            )
            for _ in range(12)
        )
    )
    assert [r.status_code for r in responses] == [201] * 12, [r.text for r in responses]
    groups = {r.json()["membershipGroup"] for r in responses}
    assert len(groups) == 12 and None not in groups
    assert await count(registry, controller=controller) == 24
    assert await count(registry, controller=controller, type="Group") == 12
    await assert_one_contiguous_chain(registry, height_before, 24)


async def test_concurrent_patches_with_one_if_match_let_exactly_one_through(
    registry: Registry,
) -> None:
    org = await make_domain(registry)
    url = f"/v1/domains/{org['did']}"
    height_before = await registry.platform.ledger.height()
    responses = await asyncio.gather(
        *(
            registry.client.patch(
                url, json={"metadata": {"winner": i}}, headers={"If-Match": '"1"'}
            )
            for i in range(10)
        )
    )
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] + [412] * 9, [r.text for r in responses]
    winner = next(r for r in responses if r.status_code == 200).json()
    for loser in (r for r in responses if r.status_code == 412):
        assert loser.json()["error"]["code"] == "precondition_failed"
    final = (await registry.client.get(url)).json()
    assert final["version"] == 2
    assert final["metadata"]["winner"] == winner["metadata"]["winner"]
    history = (await registry.client.get(f"{url}/history")).json()["items"]
    assert [entry["version"] for entry in history] == [1, 2]
    await assert_one_contiguous_chain(registry, height_before, 1)


async def test_concurrent_patches_without_if_match_all_apply(registry: Registry) -> None:
    org = await make_domain(registry)
    url = f"/v1/domains/{org['did']}"
    height_before = await registry.platform.ledger.height()
    responses = await asyncio.gather(
        *(registry.client.patch(url, json={"metadata": {f"k{i}": i}}) for i in range(10))
    )
    assert [r.status_code for r in responses] == [200] * 10, [r.text for r in responses]
    assert sorted(r.json()["version"] for r in responses) == list(range(2, 12))
    final = (await registry.client.get(url)).json()
    assert final["version"] == 11
    assert {f"k{i}": i for i in range(10)}.items() <= final["metadata"].items()  # none lost
    history = (await registry.client.get(f"{url}/history")).json()["items"]
    assert [entry["version"] for entry in history] == list(range(1, 12))
    heights = [entry["height"] for entry in history]
    assert heights == sorted(set(heights))
    await assert_one_contiguous_chain(registry, height_before, 10)


async def test_concurrent_changes_of_many_domains(registry: Registry) -> None:
    """Patches, relationships and deactivations of different domains interleave freely."""
    orgs = [await make_domain(registry) for _ in range(4)]
    projects = [await make_domain(registry, type="Project", **{"class": PROJECT}) for _ in range(4)]
    height_before = await registry.platform.ledger.height()
    work = []
    for org, project in zip(orgs, projects, strict=True):
        org_url, project_url = f"/v1/domains/{org['did']}", f"/v1/domains/{project['did']}"
        work += [
            registry.client.patch(org_url, json={"metadata": {"a": 1}}),
            registry.client.patch(org_url, json={"metadata": {"b": 2}}),
            registry.client.post(
                f"{project_url}/relationships",
                json={"type": "implementedBy", "target": org["did"]},
            ),
            registry.client.post(
                f"{org_url}/relationships", json={"type": "implements", "target": project["did"]}
            ),
            registry.client.patch(project_url, json={"properties": {"country": "KE"}}),
        ]
    responses = await asyncio.gather(*work)
    assert [r.status_code for r in responses] == [200] * len(work), [r.text for r in responses]
    for org, project in zip(orgs, projects, strict=True):
        org_now = (await registry.client.get(f"/v1/domains/{org['did']}")).json()
        project_now = (await registry.client.get(f"/v1/domains/{project['did']}")).json()
        assert org_now["version"] == 4 and project_now["version"] == 3
        assert {"a": 1, "b": 2}.items() <= org_now["metadata"].items()
        assert {"type": "implements", "target": project["did"]} in org_now["relationships"]
        assert project_now["relationships"] == [{"type": "implementedBy", "target": org["did"]}]
        assert project_now["properties"] == {"country": "KE"}
    await assert_one_contiguous_chain(registry, height_before, len(work))


async def test_concurrent_identical_relationships_add_one_edge(registry: Registry) -> None:
    org = await make_domain(registry)
    project = await make_domain(registry, type="Project", **{"class": PROJECT})
    url = f"/v1/domains/{project['did']}/relationships"
    responses = await asyncio.gather(
        *(
            registry.client.post(url, json={"type": "implementedBy", "target": org["did"]})
            for _ in range(8)
        )
    )
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] + [409] * 7, [r.text for r in responses]
    final = (await registry.client.get(f"/v1/domains/{project['did']}")).json()
    assert final["version"] == 2
    assert final["relationships"] == [{"type": "implementedBy", "target": org["did"]}]


async def test_concurrent_deactivations_happen_once(registry: Registry) -> None:
    org = await make_domain(registry)
    url = f"/v1/domains/{org['did']}"
    responses = await asyncio.gather(*(registry.client.delete(url) for _ in range(6)))
    assert sorted(r.status_code for r in responses) == [200] + [409] * 5
    history = (await registry.client.get(f"{url}/history")).json()["items"]
    assert [entry["kind"] for entry in history] == ["domain.create", "domain.deactivate"]


async def test_concurrent_protocols_with_one_slug(registry: Registry) -> None:
    slug = unique("race")
    responses = await asyncio.gather(
        *(
            registry.client.post(
                "/v1/protocols",
                json={"type": "Protocol", "id": slug, "properties": {f"p{i}": "string"}},
            )
            for i in range(6)
        )
    )
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201] + [409] * 5, [r.text for r in responses]
    winner = next(r for r in responses if r.status_code == 201).json()
    stored = (await registry.client.get(f"/v1/protocols/did:ixo:protocol/{slug}")).json()
    assert stored["properties"] == winner["properties"]


async def test_concurrent_posts_with_one_idempotency_key_create_once(registry: Registry) -> None:
    controller = controller_did()
    body = {"type": "Project", "class": PROJECT, "controller": controller}
    headers = {"Idempotency-Key": unique("race")}
    total_before = await count(registry)
    responses = await asyncio.gather(
        *(registry.client.post("/v1/domains", json=body, headers=headers) for _ in range(10))
    )
    created = [r for r in responses if r.status_code == 201]
    busy = [r for r in responses if r.status_code == 409]
    assert len(created) + len(busy) == 10, [r.text for r in responses]
    assert created, "at least the first request is answered"
    assert len({r.json()["did"] for r in created}) == 1
    assert sum("idempotent-replayed" not in r.headers for r in created) == 1
    for response in busy:
        assert response.json()["error"]["code"] == "conflict"
        assert int(response.headers["retry-after"]) >= 1
    assert await count(registry, controller=controller) == 1
    assert await count(registry) == total_before + 1
    retry = await registry.client.post("/v1/domains", json=body, headers=headers)
    assert retry.status_code == 201
    assert retry.json()["did"] == created[0].json()["did"]
    assert retry.headers["idempotent-replayed"] == "true"


# Two processes on one SQLite file are not a supported deployment: PostgreSQL only.
@pytest.mark.parametrize("backend", [Backend("postgresql", "redis")], indirect=True, ids=str)
async def test_two_app_instances_keep_one_chain(
    backend: Backend, make_registry: RegistryFactory
) -> None:
    first = await make_registry()
    second = await make_registry()
    assert first.settings.storage.database_url == second.settings.storage.database_url
    controller = controller_did()
    shared = await make_domain(first)
    url = f"/v1/domains/{shared['did']}"
    height_before = await first.platform.ledger.height()
    clients: list[httpx.AsyncClient] = [first.client, second.client]

    creates = [
        clients[i % 2].post(
            "/v1/domains", json={"type": "Project", "class": PROJECT, "controller": controller}
        )
        for i in range(20)
    ]
    patches = [clients[i % 2].patch(url, json={"metadata": {f"k{i}": i}}) for i in range(10)]
    guarded = [
        clients[i % 2].patch(url, json={"metadata": {"guarded": i}}, headers={"If-Match": "1"})
        for i in range(4)
    ]
    responses = await asyncio.gather(*creates, *patches, *guarded)
    create_answers, patch_answers = responses[:20], responses[20:30]
    guarded_answers = responses[30:]
    assert [r.status_code for r in create_answers] == [201] * 20
    assert [r.status_code for r in patch_answers] == [200] * 10
    # Version 1 may have been passed by the unguarded patches: at most one guarded one wins.
    assert sorted(r.status_code for r in guarded_answers) in ([200, 412, 412, 412], [412] * 4)
    guarded_wins = sum(r.status_code == 200 for r in guarded_answers)

    assert len({r.json()["did"] for r in create_answers}) == 20
    final = (await second.client.get(url)).json()
    assert final["version"] == 1 + 10 + guarded_wins
    assert {f"k{i}": i for i in range(10)}.items() <= final["metadata"].items()
    history = (await first.client.get(f"{url}/history")).json()["items"]
    assert [entry["version"] for entry in history] == list(range(1, final["version"] + 1))
    assert await count(first, controller=controller) == 20
    appended = 20 + 10 + guarded_wins
    await assert_one_contiguous_chain(first, height_before, appended)
    report = await second.platform.ledger.verify()
    assert report.ok and report.height == height_before + appended
