"""A verified programme built over HTTP, for claims tests: organisation, project (verified
by a real proposal and vote), oracle, assets, a claim collection, and keys for each role."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from tests.conftest import Registry, unique

CLAIM_PROTOCOL = "did:ixo:protocol/clean-cooking-claim"
METERED_START = datetime(2026, 10, 1, tzinfo=UTC)
METERED_DAYS = 10
# The register rises 10 kWh over 10 days, household 5, efficiency 0.85, no design document
# stored (the methodology's defaults, docs/methodology.md): no meter record, so the +/-5 %
# default meter error: 9.5 kWh in the baseline, 0.00014535 TJ of charcoal displaced,
# BE 0.0276490003, PE 0.0105 x 0.525 = 0.0055125, ER (0.0221365003) x 0.95 = 0.0210296753
# tCO2e, in millionths.
METERED_AMOUNT = 21029


def metered_claim(meals: int = 20) -> dict[str, Any]:
    """A cooking claim over the metered days."""
    end = METERED_START + timedelta(days=METERED_DAYS)
    return {
        "reportType": "cooking",
        "mealsCooked": meals,
        "periodStart": METERED_START.isoformat(),
        "periodEnd": end.isoformat(),
    }


async def executed(client: httpx.AsyncClient, proposal: int, seconds: float = 30) -> dict[str, Any]:
    """Poll a proposal executing in the background until it is executed (or fail after
    `seconds`); its view."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        response = await client.get(f"/v1/proposals/{proposal}")
        assert response.status_code == 200, response.text
        view = response.json()
        if view["status"] == "executed":
            return view
        assert view["status"] == "passed", view
        assert asyncio.get_running_loop().time() < deadline, f"still executing: {view}"
        await asyncio.sleep(0.02)


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
    cooked: int = 0  # stoves cooked so far: each of the next seven gets a swing of its own
    # Each project's verification workflow, once a test issued its claims
    # (workflow_world.issue_claims): project -> Workflow.
    workflows: dict[str, Any] = field(default_factory=dict)

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

    async def asset(
        self, owner: str | None = None, project: str | None = None, verified: bool = True
    ) -> str:
        """A stove of the project; `owner` (a DID) becomes its first controller. Verified
        by governance (a batch proposal naming it) unless `verified` is False: only a
        verified stove's claims are approved."""
        controller = [owner, self.operator] if owner else [self.operator]
        did = await self.domain(
            self.operator_client,
            {
                "type": "Device",
                "class": "did:ixo:protocol/clean-cooking",
                "metadata": {"name": unique("stove")},
                "properties": {
                    "fuelType": "electric",
                    "serialNumber": unique("sn"),
                    "efficiency": 0.85,
                    "householdSize": 5,
                },
                "controller": controller,
                "relationships": {"project": [project or self.project]},
            },
        )
        if verified:
            await self.verify_batch(project or self.project, domains=[did])
        return did

    async def verify_batch(self, project: str, **selection: Any) -> dict[str, Any]:
        """Propose verifying the project's stoves (`domains` or a `protocol` filter), vote
        yes with every member, execute; the executed proposal."""
        proposed = await self.group_clients[0].post(
            f"/v1/domains/{project}/batch-verification-proposals",
            json={"group": self.group, "evidence": {"audit": "enrolment"}, **selection},
        )
        assert proposed.status_code == 201, proposed.text
        proposal = proposed.json()["id"]
        await self.vote_all(proposal)
        started = await self.group_clients[0].post(f"/v1/proposals/{proposal}/execute")
        if started.status_code == 202:  # more than one chunk: it runs in the background
            return await executed(self.registry.client, proposal)
        assert started.status_code == 200, started.text
        return started.json()

    async def vote_all(self, proposal: int) -> None:
        for client in self.group_clients:
            voted = await client.post(f"/v1/proposals/{proposal}/votes", json={"option": "yes"})
            if voted.status_code == 409:  # passed already with the earlier votes
                break
            assert voted.status_code == 200, voted.text

    async def metered_asset(
        self,
        owner: str | None = None,
        project: str | None = None,
        kwh_per_day: float = 1.0,
        days: int = METERED_DAYS,
        fall_on: int | None = None,
    ) -> str:
        """A stove verified by governance, enrolled, that cooked twice a day from
        METERED_START for `days` days using `kwh_per_day`: its claims' credits compute.
        `fall_on`: the day (from 0) its register falls 500 kWh with no reset declared."""
        stove = await self.asset(owner, project)  # verified by a batch proposal
        await self.cook(stove, kwh_per_day, days, fall_on)
        return stove

    async def cook(
        self, stove: str, kwh_per_day: float, days: int = METERED_DAYS, fall_on: int | None = None
    ) -> None:
        token = await self.registry.client.post(
            f"/v1/domains/{stove}/device-tokens", json={"label": "meter"}
        )
        assert token.status_code == 201, token.text
        readings = []
        meter = 0.0
        # Days differ a little (a household never cooks the same energy twice), in pairs
        # that cancel, so ten days still sum to 10 x kwh_per_day; each stove its own swing.
        # (By order, not by the DID's digits: five stoves of one test drawn from seven swings
        # by their DIDs all shared one with another about one run in forty, and the
        # plausibility rules then flagged every one of them as a clone.)
        swing = 0.02 + (self.cooked % 7) * 0.01
        self.cooked += 1
        for day in range(days):
            base = METERED_START + timedelta(days=day)
            today = kwh_per_day * (1 + (swing if day % 2 == 0 else -swing))
            shift = 500.0 if fall_on is not None and day < fall_on else 0.0  # the fault
            for hour in (7, 18):
                seq = day * 100 + hour
                meter += today / 2
                at = base + timedelta(hours=hour)
                readings.append(  # the meter reports its register with every reading
                    {
                        "seq": seq,
                        "time": at.isoformat(),
                        "values": {
                            "session": "start",
                            "meterKwh": round(shift + meter - today / 2, 6),
                        },
                    }
                )
                readings.append(
                    {
                        "seq": seq + 1,
                        "time": (at + timedelta(minutes=45)).isoformat(),
                        "values": {
                            "session": "end",
                            "energyKwh": today / 2,
                            "meterKwh": round(shift + meter, 6),
                        },
                    }
                )
        async with self.registry.as_key(token.json()["token"]) as device:
            sent = await device.post(f"/v1/domains/{stove}/telemetry", json={"readings": readings})
        assert sent.status_code in (200, 202), sent.text

    async def approved_claim(
        self, owner: str | None = None
    ) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """A metered stove of `owner` (a new customer by default), a new collection, and a
        cooking claim on it the oracle approved: (stove, collection, claim). The credits
        are what the methodology computes (METERED_AMOUNT for the default stove)."""
        stove = await self.metered_asset(owner=owner or f"did:ixo:customer/{unique('c')}")
        collection = await self.collection()
        submitted = await self.operator_client.post(
            f"/v1/claim-collections/{collection['id']}/claims",
            json={"asset": stove, "data": metered_claim()},
        )
        assert submitted.status_code == 201, submitted.text
        evaluated = await self.oracle_client.post(
            f"/v1/claims/{submitted.json()['id']}/evaluations", json={"status": "approved"}
        )
        assert evaluated.status_code == 200, evaluated.text
        return stove, collection, evaluated.json()

    async def approvable(
        self, collection: int, owner: str | None = None, client: httpx.AsyncClient | None = None
    ) -> dict[str, Any]:
        """A claim whose credits compute (METERED_AMOUNT): a new metered stove of `owner`,
        a cooking claim over its metered days, submitted by `client` (the operator)."""
        stove = await self.metered_asset(owner=owner)
        submitted = await (client or self.operator_client).post(
            f"/v1/claim-collections/{collection}/claims",
            json={"asset": stove, "data": metered_claim()},
        )
        assert submitted.status_code == 201, submitted.text
        return submitted.json()

    async def transfer_and_retire(self, owner: str, amount: int, retire: int) -> httpx.AsyncClient:
        """The admin (as custodian) moves `amount` CARBON of `owner` to a new buyer, who
        retires `retire` of it; the buyer's client."""
        buyer = f"did:ixo:org/{unique('buyer')}"
        moved = await self.registry.client.post(
            "/v1/credits/CARBON/transfers", json={"from": owner, "to": buyer, "amount": amount}
        )
        assert moved.status_code == 201, moved.text
        buyer_client = await self.client(buyer, "reader", "writer")
        retired = await buyer_client.post(
            "/v1/credits/CARBON/retirements", json={"amount": retire, "reason": "2026 offset"}
        )
        assert retired.status_code == 201, retired.text
        return buyer_client

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
