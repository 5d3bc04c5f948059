"""The oracle decides claims in batches: each claim of a batch exactly as it decided them
one by one (a claim a batch-mate's approval double counts waits for it), and a crash
in the middle of a batch decides nothing twice.

Real database (SQLite and PostgreSQL), real HTTP through the ASGI stack."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from tests.conftest import Registry, fresh_postgres_database
from tests.support.claims_world import METERED_AMOUNT, World, build_world, metered_claim
from twinhub.db.models import Evaluation, OracleDecision
from twinhub.kernel.clock import utcnow
from twinhub.oracle.service import Decision, OracleService

# What each claim of a set is: the set's claims are submitted in this order.
ROLES = ("good", "greedy", "modest", "silent", "unverified", "twin-first", "twin-second")


@pytest.fixture(scope="module")
async def postgres_url() -> AsyncIterator[str]:
    """A PostgreSQL database of this module's own."""
    async with fresh_postgres_database("batch") as url:
        yield url


async def submit(world: World, collection: int, stove: str, data: dict[str, Any]) -> str:
    response = await world.operator_client.post(
        f"/v1/claim-collections/{collection}/claims", json={"asset": stove, "data": data}
    )
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def same_device(world: World, stove: str) -> str:
    """Another verified, metered stove of the project that is the same device as `stove`:
    its serial number written another way (`sn-1a2b` and `SN 1A2B` are one device)."""
    serial = (await world.registry.client.get(f"/v1/domains/{stove}")).json()["properties"][
        "serialNumber"
    ]
    twin = await world.domain(
        world.operator_client,
        {
            "type": "Device",
            "class": "did:ixo:protocol/clean-cooking",
            "metadata": {"name": "twin"},
            "properties": {
                "fuelType": "electric",
                "serialNumber": serial.upper().replace("-", " "),
                "efficiency": 0.85,
                "householdSize": 5,
            },
            "controller": [world.operator],
            "relationships": {"project": [world.project]},
        },
    )
    await world.verify_batch(world.project, domains=[twin])
    await world.cook(twin, 1.0)
    return twin


async def claim_set(world: World, collection: int) -> dict[str, str]:
    """One claim of each role (role -> claim id), submitted in ROLES' order."""
    first_twin = await world.metered_asset()
    stoves = {
        "good": await world.metered_asset(),
        "greedy": await world.metered_asset(),
        "modest": await world.metered_asset(),
        "silent": await world.asset(),  # verified, never enrolled
        "unverified": await world.asset(verified=False),
        "twin-first": first_twin,
        "twin-second": await same_device(world, first_twin),
    }
    meals = {"greedy": 999, "modest": 2}
    return {
        role: await submit(world, collection, stoves[role], metered_claim(meals.get(role, 20)))
        for role in ROLES
    }


async def decisions(registry: Registry, claims: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Each role's claim and oracle decision, with the set's own identifiers (claim ids,
    stove DIDs) replaced by their roles so that two sets compare."""
    found = {}
    for role, claim_id in claims.items():
        view = (await registry.client.get(f"/v1/claims/{claim_id}")).json()
        decided = (await registry.client.get(f"/v1/claims/{claim_id}/oracle-decision")).json()
        text = "\n".join(decided["reasons"])
        for other, other_id in claims.items():
            text = text.replace(other_id, f"<{other}>")
        text = text.replace(view["asset"], "<stove>")
        found[role] = {
            "status": view["status"],
            "amount": view["amount"],
            "evaluations": len(view["evaluations"]),
            "outcome": decided["outcome"],
            "decided amount": decided["amount"],
            "reasons": text,
        }
    return found


async def test_a_batch_decides_each_claim_as_one_by_one(registry: Registry) -> None:
    world = await build_world(registry)
    oracle = registry.platform.oracle
    try:
        collection = (await world.collection())["id"]
        alone, together = await claim_set(world, collection), await claim_set(world, collection)
        for claim_id in alone.values():  # one by one, in submission order
            assert await oracle.run_claims([claim_id]) == 1
        assert await oracle.run_claims(list(together.values())) == len(ROLES)  # one batch
        one_by_one = await decisions(registry, alone)
        batched = await decisions(registry, together)
        assert batched == one_by_one
        # And what that is: every rule the oracle applies.
        assert one_by_one["good"]["status"] == "approved"
        assert one_by_one["good"]["amount"] == METERED_AMOUNT
        assert one_by_one["greedy"]["status"] == "rejected"
        assert "999 meals" in one_by_one["greedy"]["reasons"]
        assert one_by_one["modest"]["status"] == "flagged"
        assert "under" in one_by_one["modest"]["reasons"]
        assert "no enrolled device" in one_by_one["silent"]["reasons"]
        assert "not verified" in one_by_one["unverified"]["reasons"]
        # One stove-day, one credit: the batch-mate on the same device waited for the
        # first's approval and was rejected naming it, as one by one.
        assert one_by_one["twin-first"]["status"] == "approved"
        assert one_by_one["twin-second"]["status"] == "rejected"
        assert "credited already by claim <twin-first>" in one_by_one["twin-second"]["reasons"]
        assert all(d["evaluations"] == 1 for d in [*one_by_one.values(), *batched.values()])
    finally:
        await world.close()


class CrashingOracle(OracleService):
    """An oracle process that dies in its second ledger write of a batch, once the write's
    evaluations are made and its decisions signed, before the commit."""

    writes = 0

    async def _record(self, session: AsyncSession, decisions: dict[str, Decision]) -> None:
        await super()._record(session, decisions)
        self.writes += 1
        if self.writes == 2:
            raise RuntimeError("the oracle process died")


async def test_a_crash_in_a_batch_decides_nothing_twice(registry: Registry) -> None:
    world = await build_world(registry)
    platform = registry.platform
    try:
        collection = (await world.collection())["id"]
        claims = await claim_set(world, collection)
        crashing = CrashingOracle(
            platform.sessionmaker, platform.claims, platform.protocols, platform.credentials.issuer
        )
        with pytest.raises(RuntimeError, match="died"):
            # First write: every claim but the device's second one (it waits for the
            # first's approval); the second write, with that one, dies.
            await crashing.run_claims(list(claims.values()))
        second = claims["twin-second"]
        view = (await registry.client.get(f"/v1/claims/{second}")).json()
        assert view["status"] == "pending" and view["evaluations"] == []
        decided = (await registry.client.get(f"/v1/claims/{claims['good']}")).json()
        assert decided["status"] == "approved"
        # The dead oracle's lease holds: nobody decides the claim meanwhile, and the
        # claims decided before the crash are not decided again.
        oracle = platform.oracle
        assert await oracle.run_claims(list(claims.values())) == 0
        async with platform.sessionmaker.begin() as session:
            await session.execute(
                update(OracleDecision)
                .where(OracleDecision.claim_id == second)
                .values(lease_until=utcnow() - timedelta(seconds=1))
            )
        assert await oracle.run_claims(list(claims.values())) == 1
        view = (await registry.client.get(f"/v1/claims/{second}")).json()
        assert view["status"] == "rejected" and "credited already" in view["reason"]
        async with platform.sessionmaker() as session:
            evaluations = dict(
                (
                    await session.execute(
                        select(Evaluation.claim_id, func.count())
                        .where(Evaluation.claim_id.in_(list(claims.values())))
                        .group_by(Evaluation.claim_id)
                    )
                ).all()
            )
            attempts = await session.scalar(
                select(OracleDecision.attempts).where(OracleDecision.claim_id == second)
            )
        assert evaluations == dict.fromkeys(claims.values(), 1)
        assert attempts == 2
    finally:
        await world.close()


async def test_a_claim_decided_without_a_lease_gets_its_signed_decision(
    registry: Registry,
) -> None:
    """A direct call (`decide`, no lease taken): the decision row is made with the
    evaluation, in the same write."""
    world = await build_world(registry)
    try:
        collection = (await world.collection())["id"]
        claim_id = await submit(world, collection, await world.metered_asset(), metered_claim())
        reply = await registry.platform.oracle.decide(claim_id)
        assert reply is not None and reply["status"] == "approved"
        decided = (await registry.client.get(f"/v1/claims/{claim_id}/oracle-decision")).json()
        assert decided["state"] == "decided" and decided["outcome"] == "approved"
        assert decided["amount"] == METERED_AMOUNT and decided["attempts"] == 1
        check = await registry.client.post("/v1/credentials/verify", json=decided["signed"])
        assert check.json()["verified"] is True
        assert await registry.platform.oracle.run_claims([claim_id]) == 0  # decided once
    finally:
        await world.close()
