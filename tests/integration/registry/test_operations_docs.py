"""The GraphQL page's sample (docs/graphql.md) runs as written (the docs stay true)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Registry
from tests.support.claims_world import build_world
from tests.support.workflow_world import issue_claims

GRAPHQL_PAGE = (Path(__file__).resolve().parents[3] / "docs" / "graphql.md").read_text()


async def test_the_readme_graphql_sample_answers(registry: Registry) -> None:
    query = GRAPHQL_PAGE.split("```graphql", 1)[1].split("```", 1)[0]
    world = await build_world(registry)
    try:
        stove, _, approved = await world.approved_claim()
        await issue_claims(world)  # its credits: minted by the registry's issuance
    finally:
        await world.close()
    answer = await registry.client.post(
        "/graphql", json={"query": query, "variables": {"project": world.project}}
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert "errors" not in body, body["errors"]
    data = body["data"]
    assert data["project"]["entityVerified"] is True
    assert (
        stove in [node["id"] for node in data["stoves"]["nodes"]]
        or data["stoves"]["pageInfo"]["hasNextPage"]
    )
    assert (
        approved["id"] in [c["id"] for c in data["approved"]["nodes"]]
        or len(data["approved"]["nodes"]) == 5
    )
    assert int(data["creditClass"]["minted"]) >= 4
