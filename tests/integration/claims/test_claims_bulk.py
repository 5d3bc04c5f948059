"""Many evaluations in one request (POST /v1/claims/evaluations), on both backends: each is
made or refused on its own, exactly as one evaluation would be; a refused one leaves no
trace; every approval computes its credits and issues its credential, and mints nothing:
the issuance of the period carrying the claim mints it once; the ledger stays whole."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from sqlalchemy import delete, func, select

from tests.conftest import Registry, RegistryFactory
from tests.integration.claims.test_claims_rules import (
    balance,
    claim_of,
    counts,
    customer,
    error_of,
    movements_of,
    token_state,
)
from tests.support.claims_world import METERED_AMOUNT, World, build_world
from tests.support.workflow_world import issue_claims
from twinhub.db.models import Claim, ClaimCollection, Credential, CreditMovement
from twinhub.kernel.errors import Conflict
from twinhub.kernel.principals import Principal
from twinhub.services.claims import EvaluationRequest
from twinhub.services.ledger_state import reconcile

PATH = "/v1/claims/evaluations"


async def rows(registry: Registry, model: type, *where: object) -> int:
    async with registry.platform.sessionmaker() as session:
        return await session.scalar(select(func.count()).select_from(model).where(*where)) or 0


async def bulk(client: httpx.AsyncClient, *items: dict[str, Any]) -> dict[str, Any]:
    response = await client.post(PATH, json={"evaluations": list(items)})
    assert response.status_code == 200, response.text
    reply = response.json()
    assert [r["index"] for r in reply["results"]] == list(range(len(items)))
    assert reply["evaluated"] + reply["refused"] == len(items)
    return reply


def approve(claim: str) -> dict[str, Any]:
    return {"claim": claim, "status": "approved"}


async def test_a_batch_makes_each_evaluation_or_refuses_it_alone(
    registry: Registry, world: World
) -> None:
    collection = (await world.collection())["id"]
    owners = [customer() for _ in range(3)]
    good = [(await world.approvable(collection, owner=owner))["id"] for owner in owners]
    done = (await world.approvable(collection))["id"]
    first = await bulk(world.oracle_client, approve(done))
    assert first["evaluated"] == 1 and first["results"][0]["status"] == "approved"
    to_reject = (await world.approvable(collection))["id"]
    minted = (await token_state(registry))["minted"]
    height = await registry.platform.ledger.height()

    reply = await bulk(
        world.oracle_client,
        approve(good[0]),
        approve("no-such-claim"),
        approve(done),  # approved already
        {"claim": to_reject, "status": "rejected"},  # a rejection says why
        approve(good[1]),
        {"claim": to_reject, "status": "rejected", "reason": "meter tampered"},
        {"claim": good[2], "status": "approved", "amount": 5},  # nobody names an amount
        approve(good[2]),
    )
    results = reply["results"]
    assert (reply["evaluated"], reply["refused"]) == (4, 4)
    for index in (0, 4, 7):
        item = results[index]
        assert item["status"] == "approved" and item["amount"] == METERED_AMOUNT, item
        assert item["token"] == "CARBON" and item["credential"].startswith("urn:uuid:")
        assert "error" not in item
    assert results[1]["error"]["code"] == "not_found"
    assert results[2]["error"]["code"] == "conflict"
    assert "is approved" in results[2]["error"]["message"]
    assert results[3]["error"]["code"] == "validation_failed"
    assert [d["field"] for d in results[3]["error"]["details"]] == ["reason"]
    assert results[5]["status"] == "rejected" and results[5]["amount"] is None
    assert results[5]["credential"] is None
    assert [d["field"] for d in results[6]["error"]["details"]] == ["amount"]

    for claim, owner, index in zip(good, owners, (0, 4, 7), strict=True):
        view = await claim_of(registry, claim)
        assert view["status"] == "approved" and len(view["evaluations"]) == 1
        assert view["credential"] == results[index]["credential"]
        assert view["credits"]["state"] == "awaiting issuance"
        assert await balance(registry, owner) == {"amount": 0, "retired": 0}
        credential = await world.oracle_client.get(f"/v1/claims/{claim}/credential")
        checked = await registry.client.post("/v1/credentials/verify", json=credential.json())
        assert checked.json()["verified"] is True, checked.text
    assert (await claim_of(registry, to_reject))["status"] == "rejected"
    assert (await token_state(registry))["minted"] == minted  # nothing until issuance
    tally = await counts(registry, collection)
    assert (tally["approved"], tally["rejected"], tally["pending"]) == (4, 1, 0)
    # One transaction per evaluation made; none refused.
    assert await registry.platform.ledger.height() == height + 3 + 1
    await issue_claims(world)  # the four approved (`done` too), once each
    for owner in owners:
        assert await balance(registry, owner) == {"amount": METERED_AMOUNT, "retired": 0}
        assert [m["kind"] for m in await movements_of(registry, owner)] == ["mint"]
    assert (await token_state(registry))["minted"] == minted + 4 * METERED_AMOUNT
    assert (await registry.platform.ledger.verify()).ok


async def test_a_batch_where_everything_is_refused_writes_nothing(
    registry: Registry, world: World
) -> None:
    collection = (await world.collection())["id"]
    claim = (await world.approvable(collection))["id"]
    height = await registry.platform.ledger.height()
    outsider = await world.client(customer(), "reader", "writer")
    reply = await bulk(outsider, approve(claim), approve("nope"))
    assert reply["evaluated"] == 0
    assert [r["error"]["code"] for r in reply["results"]] == ["forbidden", "not_found"]
    assert await registry.platform.ledger.height() == height
    assert (await claim_of(registry, claim))["status"] == "pending"


async def test_a_batch_above_the_limit_or_malformed_is_refused_whole(
    make_registry: RegistryFactory,
) -> None:
    registry = await make_registry(claims_evaluation_batch_max=2)
    world = await build_world(registry)
    try:
        collection = (await world.collection())["id"]
        claims = [(await world.approvable(collection))["id"] for _ in range(3)]
        too_many = await world.oracle_client.post(
            PATH, json={"evaluations": [approve(c) for c in claims]}
        )
        error = error_of(too_many, 413, "too_large")
        assert error["details"] == [{"field": "evaluations", "error": "at most 2"}]
        malformed = await world.oracle_client.post(
            PATH, json={"evaluations": [approve(claims[0]), {"claim": claims[1], "status": "ok"}]}
        )
        fields = [d["field"] for d in error_of(malformed, 422, "validation_failed")["details"]]
        assert fields == ["evaluations.1.status"]
        empty = await world.oracle_client.post(PATH, json={"evaluations": []})
        error_of(empty, 422, "validation_failed")
        for claim in claims:
            assert (await claim_of(registry, claim))["status"] == "pending"
        reader = await world.client(world.oracle_operator, "reader")
        assert (
            await reader.post(PATH, json={"evaluations": [approve(claims[0])]})
        ).status_code == 403
    finally:
        await world.close()


async def test_a_claim_named_twice_or_doubling_a_stove_in_one_batch_is_refused(
    registry: Registry, world: World
) -> None:
    """The batch checks each approval against the ones before it: the same claim twice, or
    a second claim over the same stove-days (a pair the stove-month rule of submission
    would refuse today, as stored before it), credit the stove once."""
    owner = customer()
    collection = (await world.collection())["id"]
    claim = (await world.approvable(collection, owner=owner))["id"]
    twin = f"{claim}-twin"
    async with registry.platform.sessionmaker.begin() as session:
        original = await session.get(Claim, claim)
        assert original is not None
        top = await session.scalar(select(func.max(Claim.seq)))
        session.add(
            Claim(
                id=twin,
                seq=(top or 0) + 1,
                period=None,  # stored before the stove-month rule
                collection_id=original.collection_id,
                agent=original.agent,
                asset_did=original.asset_did,
                data=dict(original.data),
                status="pending",
                submitted_at=original.submitted_at,
            )
        )
        row = await session.get(ClaimCollection, collection)
        assert row is not None
        row.count += 1
    try:
        minted = (await token_state(registry))["minted"]
        reply = await bulk(world.oracle_client, approve(claim), approve(claim), approve(twin))
        first, again, doubled = reply["results"]
        assert first["status"] == "approved"
        assert again["error"]["code"] == "conflict"
        assert doubled["error"]["code"] == "double_counting"
        assert f"credited already by claim {claim}" in doubled["error"]["message"]
        assert (await claim_of(registry, twin))["status"] == "pending"
        assert await rows(registry, Credential, Credential.claim_id == twin) == 0
        assert await rows(registry, CreditMovement, CreditMovement.claim_id == twin) == 0
        assert await balance(registry, owner) == {"amount": 0, "retired": 0}  # at issuance
        assert (await token_state(registry))["minted"] == minted
        assert (await registry.platform.ledger.verify()).ok
    finally:  # the run's PostgreSQL database is shared: leave no row the ledger never made
        async with registry.platform.sessionmaker.begin() as session:
            await session.execute(delete(Claim).where(Claim.id == twin))
            row = await session.get(ClaimCollection, collection)
            assert row is not None
            row.count -= 1
    assert await reconcile(registry.platform.sessionmaker) == []  # as the ledger has it


async def test_a_flagged_claim_overridden_in_a_batch_keeps_its_history(
    registry: Registry, world: World
) -> None:
    collection = (await world.collection())["id"]
    claim = (await world.approvable(collection))["id"]
    flagged = await bulk(
        world.oracle_client, {"claim": claim, "status": "flagged", "reason": "odd meter"}
    )
    assert flagged["results"][0]["status"] == "flagged"
    unreasoned = await bulk(world.oracle_client, approve(claim))
    assert unreasoned["results"][0]["error"]["code"] == "validation_failed"
    reply = await bulk(
        world.oracle_client,
        {"claim": claim, "status": "approved", "reason": "site visit confirmed the meter"},
    )
    assert reply["results"][0]["amount"] == METERED_AMOUNT
    view = await claim_of(registry, claim)
    assert [e["status"] for e in view["evaluations"]] == ["flagged", "approved"]
    tally = await counts(registry, collection)
    assert (tally["flagged"], tally["approved"], tally["evaluated"]) == (0, 1, 1)


async def test_concurrent_batches_and_single_evaluations_approve_each_claim_once(
    registry: Registry, world: World
) -> None:
    """Overlapping batches and single evaluations at once: each claim is approved by
    exactly one of them, with one credential (and at issuance one mint); the rest are
    refused."""
    collection = (await world.collection())["id"]
    owners = [customer() for _ in range(8)]
    claims = [(await world.approvable(collection, owner=owner))["id"] for owner in owners]
    minted = (await token_state(registry))["minted"]
    height = await registry.platform.ledger.height()
    batches = [
        world.oracle_client.post(PATH, json={"evaluations": [approve(c) for c in order]})
        for order in (claims, claims[::-1], claims[2:] + claims[:2])
    ]
    singles = [
        world.oracle_client.post(f"/v1/claims/{claim}/evaluations", json={"status": "approved"})
        for claim in claims
    ]
    responses = await asyncio.gather(*batches, *singles)
    made: list[str] = []
    for response in responses[: len(batches)]:
        assert response.status_code == 200, response.text
        for item in response.json()["results"]:
            if "error" in item:
                assert item["error"]["code"] == "conflict", item
            else:
                made.append(item["claim"])
    for claim, response in zip(claims, responses[len(batches) :], strict=True):
        if response.status_code == 200:
            made.append(claim)
        else:
            error_of(response, 409, "conflict")
    assert sorted(made) == sorted(claims)
    for claim, owner in zip(claims, owners, strict=True):
        assert await rows(registry, Credential, Credential.claim_id == claim) == 1
        assert await rows(registry, CreditMovement, CreditMovement.claim_id == claim) == 0
        assert await balance(registry, owner) == {"amount": 0, "retired": 0}
    assert (await token_state(registry))["minted"] == minted
    assert await registry.platform.ledger.height() == height + len(claims)
    await issue_claims(world)
    for claim, owner in zip(claims, owners, strict=True):
        assert await rows(registry, CreditMovement, CreditMovement.claim_id == claim) == 1
        assert await balance(registry, owner) == {"amount": METERED_AMOUNT, "retired": 0}
    assert (await token_state(registry))["minted"] == minted + len(claims) * METERED_AMOUNT
    assert (await registry.platform.ledger.verify()).ok


async def test_a_write_refusing_after_its_evaluations_undoes_them_whole(
    registry: Registry, world: World
) -> None:
    """The oracle and the monitoring period make their evaluations inside a ledger write
    of their own, then write beside them (the signed decision, the period's row): a write
    that refuses after its evaluations were made (a period that found the stove credited
    meanwhile) rolls everything of it back, credentials and credits included."""
    owners = [customer(), customer()]
    collection = (await world.collection())["id"]
    claims = [(await world.approvable(collection, owner=owner))["id"] for owner in owners]
    minted = (await token_state(registry))["minted"]
    height = await registry.platform.ledger.height()
    service = registry.platform.claims.evaluations
    actor = Principal(world.oracle_operator, frozenset({"reader", "writer"}))

    with pytest.raises(Conflict, match="meanwhile"):
        async with service.write() as write:
            for claim in claims:
                made = await service.evaluate_within(
                    write, EvaluationRequest(claim, "approved"), actor
                )
                assert made["status"] == "approved"  # the evaluation was made in the write
            raise Conflict("the period credited this stove meanwhile")
    for claim, owner in zip(claims, owners, strict=True):
        view = await claim_of(registry, claim)
        assert view["status"] == "pending" and view["evaluations"] == []
        assert await rows(registry, Credential, Credential.claim_id == claim) == 0
        assert await rows(registry, CreditMovement, CreditMovement.claim_id == claim) == 0
        assert await balance(registry, owner) == {"amount": 0, "retired": 0}
    assert (await token_state(registry))["minted"] == minted
    assert await registry.platform.ledger.height() == height
    assert (await counts(registry, collection))["pending"] == 2
    # A refused evaluation raises its error, and the write changes nothing of the claim.
    with pytest.raises(Conflict, match="only pending or flagged"):
        async with service.write() as write:
            await service.evaluate_within(
                write, EvaluationRequest(claims[1], "rejected", "no"), actor
            )
            await service.evaluate_within(
                write, EvaluationRequest(claims[1], "approved", "again"), actor
            )
    assert (await claim_of(registry, claims[1]))["status"] == "pending"
