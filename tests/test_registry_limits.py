"""Request limits of the registry (issue 15.1): GraphQL body size, tokens, depth and
aliases, each refused with a clear error before any resolver runs."""

from __future__ import annotations

from tests.conftest import RegistryFactory


async def test_graphql_limits_refuse_hostile_documents_clearly(
    make_registry: RegistryFactory,
) -> None:
    registry = await make_registry(
        graphql_max_body_bytes=4096, graphql_max_depth=1, graphql_max_tokens=200
    )
    fine = await registry.client.post("/graphql", json={"query": "{ __typename }"})
    assert fine.status_code == 200 and fine.json()["data"] == {"__typename": "Query"}

    too_big = await registry.client.post("/graphql", json={"query": "{ __typename }" + " " * 5000})
    assert too_big.status_code == 413, too_big.text
    assert too_big.json()["error"]["code"] == "too_large"
    assert "4096 bytes" in too_big.json()["error"]["message"]

    many_tokens = "{ " + " ".join(f"a{i}: __typename" for i in range(100)) + " }"
    response = await registry.client.post("/graphql", json={"query": many_tokens})
    assert response.status_code == 200
    assert "more than 200 tokens" in response.json()["errors"][0]["message"]

    deep = "{ entities { pageInfo { hasNextPage } nodes { id } } }"
    response = await registry.client.post("/graphql", json={"query": deep})
    assert "exceeds maximum operation depth of 1" in response.json()["errors"][0]["message"], (
        response.text
    )

    aliases = "{ " + " ".join(f"a{i}: __typename" for i in range(21)) + " }"
    roomy = await make_registry(graphql_max_tokens=5000)
    response = await roomy.client.post("/graphql", json={"query": aliases})
    assert "21 aliases found. Allowed: 20" in response.json()["errors"][0]["message"], response.text

    # The registry's own body limit is untouched by the GraphQL one.
    body = {
        "type": "Organisation",
        "protocol": "did:ixo:protocol/organisation",
        "metadata": {"name": "Big Co-op", "notes": "x" * 8000},
    }
    created = await registry.client.post("/v1/domains", json=body)
    assert created.status_code == 201, created.text
