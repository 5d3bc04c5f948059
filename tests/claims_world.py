"""A verified programme built over HTTP, for claims tests: organisation, project (verified
by a real proposal and vote), oracle, assets, a claim collection, and keys for each role."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.conftest import Registry, unique

CLAIM_PROTOCOL = "did:ixo:protocol/clean-cooking-claim"


@dataclass
class World:
    registry: Registry
    operator: str  # DID controlling the organisation and project
    operator_client: httpx.AsyncClient
    oracle: str  # oracle domain DID
    oracle_operator: str  # DID controlling the oracle
    oracle_client: httpx.AsyncClient
    organisation: str
    project: str
    group: str
    group_clients: list[httpx.AsyncClient]
    opened: list[httpx.AsyncClient] = field(default_factory=list)

    async def client(self, did: str, *roles: str) -> httpx.AsyncClient:
        client = self.registry.as_key(await self.registry.key(did, *roles))
        self.opened.append(client)
        return client

    async def close(self) -> None:
        for client in self.opened:
            await client.aclose()

    async def domain(self, client: httpx.AsyncClient, body: dict[str, Any]) -> str:
        response = await client.post("/v1/domains", json=body)
        assert response.status_code == 201, response.text
        return response.json()["did"]

    async def asset(self, owner: str | None = None, project: str | None = None) -> str:
        """A stove of the project; `owner` (a DID) becomes its first controller."""
        controller = [owner, self.operator] if owner else [self.operator]
        return await self.domain(
            self.operator_client,
            {
                "type": "Device",
                "class": "did:ixo:protocol/clean-cooking",
                "metadata": {"name": unique("stove")},
                "properties": {"fuelType": "lpg", "serialNumber": unique("sn")},
                "controller": controller,
                "relationships": {"project": [project or self.project]},
            },
        )

    async def project_domain(self, verified: bool) -> str:
        did = await self.domain(
            self.operator_client,
            {
                "type": "Project",
                "class": "did:ixo:protocol/project",
                "metadata": {"name": unique("project")},
                "relationships": {"implementedBy": [self.organisation]},
            },
        )
        if verified:
            await self.govern(did, "verify")
        return did

    async def govern(self, did: str, action: str) -> None:
        """Propose, vote yes with every member, execute: the only way `verified` changes."""
        proposed = await self.group_clients[0].post(
            f"/v1/domains/{did}/verification-proposals",
            json={"group": self.group, "action": action, "evidence": {"audit": "site visit"}},
        )
        assert proposed.status_code == 201, proposed.text
        proposal = proposed.json()["id"]
        for client in self.group_clients:
            voted = await client.post(f"/v1/proposals/{proposal}/votes", json={"option": "yes"})
            if voted.status_code == 409:  # passed already with the earlier votes
                break
            assert voted.status_code == 200, voted.text
        executed = await self.group_clients[0].post(f"/v1/proposals/{proposal}/execute")
        assert executed.status_code == 200, executed.text

    async def approved_claim(
        self, owner: str | None = None
    ) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """A stove of `owner` (a new customer by default), a new collection, and a fuel
        claim on it the oracle approved for 4 credits: (stove, collection, claim)."""
        stove = await self.asset(owner=owner or f"did:ixo:customer/{unique('c')}")
        collection = await self.collection()
        submitted = await self.operator_client.post(
            f"/v1/claim-collections/{collection['id']}/claims",
            json={"asset": stove, "data": {"reportType": "fuel", "fuelKg": 2.5}},
        )
        assert submitted.status_code == 201, submitted.text
        evaluated = await self.oracle_client.post(
            f"/v1/claims/{submitted.json()['id']}/evaluations",
            json={"status": "approved", "amount": 4},
        )
        assert evaluated.status_code == 200, evaluated.text
        return stove, collection, evaluated.json()

    async def collection(self, project: str | None = None, **extra: Any) -> dict[str, Any]:
        response = await self.operator_client.post(
            "/v1/claim-collections",
            json={
                "project": project or self.project,
                "protocol": CLAIM_PROTOCOL,
                "evaluators": [self.oracle],
                **extra,
            },
        )
        assert response.status_code == 201, response.text
        return response.json()


async def compliance_group(registry: Registry, members: list[str], needed: int) -> str:
    """A governance group (made by the admin) where `needed` yes votes pass; its DID."""
    group = await registry.client.post(
        "/v1/governance/groups",
        json={
            "id": unique("compliance"),
            "name": "Compliance",
            "members": [{"did": m, "weight": 1} for m in members],
            "threshold": {"kind": "absolute_count", "value": needed},
            "votingPeriodSeconds": 3600,
        },
    )
    assert group.status_code == 201, group.text
    return group.json()["did"]


async def build_world(registry: Registry) -> World:
    operator = f"did:ixo:org/{unique('operator')}"
    oracle_operator = f"did:ixo:org/{unique('oracle-op')}"
    members = [f"did:ixo:org/{unique('member')}" for _ in range(2)]
    world = World(
        registry=registry,
        operator=operator,
        operator_client=registry.as_key(await registry.key(operator, "reader", "writer")),
        oracle="",
        oracle_operator=oracle_operator,
        oracle_client=registry.as_key(await registry.key(oracle_operator, "reader", "writer")),
        organisation="",
        project="",
        group=await compliance_group(registry, members, needed=2),
        group_clients=[registry.as_key(await registry.key(m, "reader", "writer")) for m in members],
    )
    world.opened += [world.operator_client, world.oracle_client, *world.group_clients]
    world.organisation = await world.domain(
        world.operator_client,
        {
            "type": "Organisation",
            "class": "did:ixo:protocol/organisation",
            "metadata": {"name": unique("org")},
        },
    )
    world.oracle = await world.domain(
        world.oracle_client,
        {"type": "Oracle", "class": "did:ixo:protocol/oracle", "metadata": {"name": "Oracle"}},
    )
    world.project = await world.project_domain(verified=True)
    return world
