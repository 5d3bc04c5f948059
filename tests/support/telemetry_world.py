"""A small programme for telemetry tests: an organisation, its project, stoves, tokens."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from tests.conftest import Registry, unique

STOVE = "did:ixo:protocol/clean-cooking"


@dataclass
class Farm:
    registry: Registry
    organisation: str
    project: str
    stoves: list[str] = field(default_factory=list)
    tokens: dict[str, str] = field(default_factory=dict)

    async def stove(self) -> str:
        body = {
            "type": "Device",
            "class": STOVE,
            "id": unique("stove"),
            "metadata": {"name": "stove"},
            "relationships": {"project": [self.project]},
        }
        response = await self.registry.client.post("/v1/domains", json=body)
        assert response.status_code == 201, response.text
        did = response.json()["did"]
        created = await self.registry.client.post(
            f"/v1/domains/{did}/device-tokens", json={"label": "meter board"}
        )
        assert created.status_code == 201, created.text
        self.stoves.append(did)
        self.tokens[did] = created.json()["token"]
        return did

    def device(self, did: str, token: str | None = None) -> httpx.AsyncClient:
        return self.registry.as_key(token or self.tokens[did])

    async def send(
        self, did: str, readings: list[dict[str, Any]], token: str | None = None
    ) -> httpx.Response:
        async with self.device(did, token) as client:
            return await client.post(f"/v1/domains/{did}/telemetry", json={"readings": readings})


async def build_farm(registry: Registry) -> Farm:
    client = registry.client
    org = await client.post(
        "/v1/domains",
        json={
            "type": "Organisation",
            "class": "did:ixo:protocol/organisation",
            "id": unique("org"),
            "metadata": {"name": "Jiko"},
        },
    )
    assert org.status_code == 201, org.text
    organisation = org.json()["did"]
    project = await client.post(
        "/v1/domains",
        json={
            "type": "Project",
            "class": "did:ixo:protocol/project",
            "id": unique("project"),
            "metadata": {"name": "Cooking"},
            "relationships": {"implementedBy": [organisation]},
        },
    )
    assert project.status_code == 201, project.text
    return Farm(registry, organisation, project.json()["did"])


def at(base: datetime, hours: float) -> str:
    return (base + timedelta(hours=hours)).isoformat()


def day_start(days_ago: int) -> datetime:
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return today - timedelta(days=days_ago)
