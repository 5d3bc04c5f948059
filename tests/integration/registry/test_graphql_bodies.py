"""GraphQL request bodies that are JSON but not a request object (issue 31 §4), over real
HTTP through uvicorn and the registry's ASGI stack: each is a 400 in the GraphQL error
shape (`errors`), with the registry's `error` object beside it, never a 500."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.conftest import BOOTSTRAP_KEY, Registry
from tests.support.uvicorn_served import uvicorn_served
from twinhub.registry.app import create_registry_app


@pytest.fixture
async def base_url(registry: Registry) -> AsyncIterator[str]:
    async with uvicorn_served(create_registry_app(platform=registry.platform)) as url:
        yield url


NOT_OBJECTS = ['"AAA"', "1", "true", "null", "[]", '[{"query": "{ __typename }"}]']


@pytest.mark.parametrize("body", NOT_OBJECTS)
async def test_a_json_body_that_is_not_an_object_is_a_400_graphql_error(
    base_url: str, body: str
) -> None:
    headers = {"Authorization": f"Bearer {BOOTSTRAP_KEY}", "content-type": "application/json"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=10) as client:
        response = await client.post("/graphql", content=body.encode())
        assert response.status_code == 400, response.text
        answer = response.json()
        [error] = answer["errors"]
        assert "JSON object" in error["message"], error
        assert error["extensions"]["code"] == "bad_request"
        assert answer["error"]["code"] == "bad_request"
        # The server is no worse for it: a proper request still answers.
        fine = await client.post("/graphql", json={"query": "{ __typename }"})
        assert fine.status_code == 200 and fine.json() == {"data": {"__typename": "Query"}}
