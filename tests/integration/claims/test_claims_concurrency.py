"""Claims and credits under concurrent requests, on both backends: nothing is lost, nothing
counted twice, no quota or balance overrun, exactly one credential per approved claim.
(Concurrent votes are covered by the governance tests.)"""

from __future__ import annotations

import asyncio
from collections import Counter

import httpx
from sqlalchemy import func, select

from tests.conftest import Registry, unique
from tests.integration.claims.test_claims_rules import (
    balance,
    claim_of,
    claims_in,
    counts,
    customer,
    error_of,
    evaluated,
    movements_of,
    outcome,
    submit,
    token_state,
)
from tests.support.claims_world import METERED_AMOUNT, World, metered_claim
from tests.support.workflow_world import build_workflow, issue_claims
from twinhub.db.models import Credential, CreditMovement


def statuses(responses: list[httpx.Response]) -> Counter[int]:
    return Counter(r.status_code for r in responses)


async def rows(registry: Registry, model: type, *where: object) -> int:
    async with registry.platform.sessionmaker() as session:
        return await session.scalar(select(func.count()).select_from(model).where(*where)) or 0


async def test_concurrent_submissions_stop_exactly_at_the_quota(
    registry: Registry, world: World
) -> None:
    collection = (await world.collection(quota=20))["id"]
    responses = await asyncio.gather(
        *(
            submit(
                world.operator_client, collection, data={"reportType": "cooking", "mealsCooked": i}
            )
            for i in range(30)
        )
    )
    assert statuses(responses) == {201: 20, 409: 10}, [r.text for r in responses]
    for refused in (r for r in responses if r.status_code == 409):
        assert "quota" in error_of(refused, 409, "conflict")["message"]
    accepted = {r.json()["id"] for r in responses if r.status_code == 201}
    assert (await counts(registry, collection))["submitted"] == 20
    assert {c["id"] for c in await claims_in(registry, collection)} == accepted
    assert (await registry.platform.ledger.verify()).ok


async def test_concurrent_submissions_of_one_id_make_one_claim(
    registry: Registry, world: World
) -> None:
    collection = (await world.collection())["id"]
    chosen = unique("meter-reading")
    responses = await asyncio.gather(
        *(
            submit(
                world.operator_client,
                collection,
                id=chosen,
                data={"reportType": "cooking", "mealsCooked": i},
            )
            for i in range(10)
        )
    )
    assert statuses(responses) == {201: 1, 409: 9}, [r.text for r in responses]
    winner = next(r.json() for r in responses if r.status_code == 201)
    assert (await claim_of(registry, chosen))["data"] == winner["data"]
    assert (await counts(registry, collection))["submitted"] == 1
    assert [c["id"] for c in await claims_in(registry, collection)] == [chosen]


async def test_concurrent_retries_with_one_idempotency_key_make_one_claim(
    registry: Registry, world: World
) -> None:
    collection = (await world.collection())["id"]
    headers = {"Idempotency-Key": unique("retry")}
    responses = await asyncio.gather(
        *(submit(world.operator_client, collection, headers=headers) for _ in range(10))
    )
    assert set(statuses(responses)) <= {201, 409}, [r.text for r in responses]
    for busy in (r for r in responses if r.status_code == 409):
        error_of(busy, 409)  # the first is still running: retry later
        assert busy.headers["retry-after"] == "1"
    made = {r.json()["id"] for r in responses if r.status_code == 201}
    assert len(made) == 1
    replayed = await submit(world.operator_client, collection, headers=headers)
    assert replayed.status_code == 201 and replayed.json()["id"] in made
    assert (await counts(registry, collection))["submitted"] == 1
    assert [c["id"] for c in await claims_in(registry, collection)] == list(made)


async def test_concurrent_approvals_issue_one_credential_and_issuance_mints_once(
    registry: Registry, world: World
) -> None:
    owner = customer()
    collection = (await world.collection())["id"]
    claim = (await world.approvable(collection, owner=owner))["id"]
    minted = (await token_state(registry))["minted"]
    responses = await asyncio.gather(
        *(
            world.oracle_client.post(f"/v1/claims/{claim}/evaluations", json={"status": "approved"})
            for _ in range(10)
        )
    )
    assert statuses(responses) == {200: 1, 409: 9}, [r.text for r in responses]
    for refused in (r for r in responses if r.status_code == 409):
        error_of(refused, 409, "conflict")
    view = await claim_of(registry, claim)
    assert view["status"] == "approved" and len(view["evaluations"]) == 1
    assert await rows(registry, Credential, Credential.claim_id == claim) == 1
    # The approval is a draft figure: nothing minted until the registry's issuance.
    assert view["credits"]["state"] == "awaiting issuance"
    assert await rows(registry, CreditMovement, CreditMovement.claim_id == claim) == 0
    assert await balance(registry, owner) == {"amount": 0, "retired": 0}
    assert (await token_state(registry))["minted"] == minted
    tally = await counts(registry, collection)
    assert (tally["evaluated"], tally["approved"], tally["pending"]) == (1, 1, 0)
    await issue_claims(world)
    assert await rows(registry, CreditMovement, CreditMovement.claim_id == claim) == 1
    assert await balance(registry, owner) == {"amount": METERED_AMOUNT, "retired": 0}
    assert [m["kind"] for m in await movements_of(registry, owner)] == ["mint"]
    assert (await token_state(registry))["minted"] == minted + METERED_AMOUNT
    assert (await registry.platform.ledger.verify()).ok


async def test_concurrent_different_outcomes_leave_exactly_one(
    registry: Registry, world: World
) -> None:
    collection = (await world.collection())["id"]
    claim = (await world.approvable(collection))["id"]
    final = ["approved", "rejected", "disputed", "invalidated"] * 3
    responses = await asyncio.gather(
        *(
            world.oracle_client.post(f"/v1/claims/{claim}/evaluations", json=outcome(status))
            for status in final
        )
    )
    assert statuses(responses) == {200: 1, 409: len(final) - 1}, [r.text for r in responses]
    won = next(r.json()["status"] for r in responses if r.status_code == 200)
    view = await claim_of(registry, claim)
    assert view["status"] == won and [e["status"] for e in view["evaluations"]] == [won]
    tally = await counts(registry, collection)
    assert tally["evaluated"] == 1 and tally["pending"] == 0
    assert {s: tally[s] for s in set(final)} == {s: int(s == won) for s in set(final)}
    credentials = await rows(registry, Credential, Credential.claim_id == claim)
    assert credentials == int(won == "approved")


async def owner_of_ten(registry: Registry, world: World) -> tuple[str, httpx.AsyncClient]:
    """A new holder of exactly 10 CARBON millionths (an approved claim about its stove,
    issued, the rest passed on), and its client."""
    owner = customer()
    collection = (await world.collection())["id"]
    claim = (await world.approvable(collection, owner=owner))["id"]
    await evaluated(world.oracle_client, claim, "approved")
    await issue_claims(world)
    client = await world.client(owner, "reader", "writer")
    rest = await client.post(
        "/v1/credits/CARBON/transfers",
        json={"to": f"did:ixo:org/{unique('sink')}", "amount": METERED_AMOUNT - 10},
    )
    assert rest.status_code == 201, rest.text
    assert await balance(registry, owner) == {"amount": 10, "retired": 0}
    return owner, client


async def test_concurrent_transfers_never_overdraw(registry: Registry, world: World) -> None:
    owner, owner_client = await owner_of_ten(registry, world)
    recipient = f"did:ixo:org/{unique('buyer')}"
    before = await token_state(registry)
    responses = await asyncio.gather(
        *(
            owner_client.post("/v1/credits/CARBON/transfers", json={"to": recipient, "amount": 1})
            for _ in range(20)
        )
    )
    assert statuses(responses) == {201: 10, 409: 10}, [r.text for r in responses]
    for refused in (r for r in responses if r.status_code == 409):
        error_of(refused, 409, "insufficient_credits")
    assert await balance(registry, owner) == {"amount": 0, "retired": 0}
    assert await balance(registry, recipient) == {"amount": 10, "retired": 0}
    after = await token_state(registry)
    assert after["supply"] == before["supply"] == after["held"]
    assert after["minted"] == before["minted"] and after["retired"] == before["retired"]
    moves = await movements_of(registry, recipient)
    assert [m["kind"] for m in moves] == ["transfer"] * 10
    assert len({m["ledgerHeight"] for m in moves}) == 10
    assert (await registry.platform.ledger.verify()).ok


async def test_concurrent_transfers_and_retirements_keep_the_supply(
    registry: Registry, world: World
) -> None:
    owner, owner_client = await owner_of_ten(registry, world)
    recipient = f"did:ixo:org/{unique('buyer')}"
    before = await token_state(registry)
    # The owner and its custodian (an admin) both spend the same balance at once.
    requests = []
    for i in range(12):
        requests.append(
            owner_client.post("/v1/credits/CARBON/transfers", json={"to": recipient, "amount": 1})
        )
        requests.append(
            registry.client.post(
                "/v1/credits/CARBON/retirements",
                json={"from": owner, "amount": 1, "reason": f"offset {i}"},
            )
        )
    responses = await asyncio.gather(*requests)
    assert statuses(responses) == {201: 10, 409: 14}, [r.text for r in responses]
    done = Counter(r.json()["kind"] for r in responses if r.status_code == 201)
    assert await balance(registry, owner) == {"amount": 0, "retired": done["retire"]}
    assert await balance(registry, recipient) == {"amount": done["transfer"], "retired": 0}
    after = await token_state(registry)
    assert after["retired"] == before["retired"] + done["retire"]
    assert after["supply"] == before["supply"] - done["retire"] == after["held"]
    assert after["supply"] == after["minted"] - after["retired"]
    assert (await registry.platform.ledger.verify()).ok


async def test_a_revocation_racing_submissions_cuts_them_cleanly(
    registry: Registry, world: World
) -> None:
    collection = (await world.collection())["id"]
    proposed = await world.group_clients[0].post(
        f"/v1/domains/{world.project}/verification-proposals",
        json={"group": world.group, "action": "revoke"},
    )
    assert proposed.status_code == 201, proposed.text
    proposal = proposed.json()["id"]
    for client in world.group_clients:
        voted = await client.post(f"/v1/proposals/{proposal}/votes", json={"option": "yes"})
        assert voted.status_code == 200, voted.text
    assert voted.json()["status"] == "passed"
    execute = world.group_clients[0].post(f"/v1/proposals/{proposal}/execute")
    submissions = [
        submit(world.operator_client, collection, data={"reportType": "cooking", "mealsCooked": i})
        for i in range(10)
    ]
    executed, *responses = await asyncio.gather(execute, *submissions)
    assert executed.status_code == 200, executed.text
    accepted = [r for r in responses if r.status_code == 201]
    refused = [r for r in responses if r.status_code != 201]
    for response in refused:
        error_of(response, 409, "domain_not_verified")
    assert (await counts(registry, collection))["submitted"] == len(accepted)
    # Every accepted claim was written before the revocation, none after it.
    history = await registry.platform.ledger.history(world.project)
    revoked_at = next(t.height for t in history if t.kind == "domain.revoke")
    submitted_at = [t.height for t in history if t.kind == "claims.submit"]
    assert len(submitted_at) == len(accepted)
    assert all(height < revoked_at for height in submitted_at)
    error_of(await submit(world.operator_client, collection), 409, "domain_not_verified")


async def test_many_evaluators_approve_many_claims_each_once(
    registry: Registry, world: World
) -> None:
    """Approvals compute their credits before the ledger's turn: under many concurrent
    evaluators each claim is still approved once, with one credential (and, at the
    issuance, one mint), and the writes that lose the race leave nothing behind."""
    collection = (await world.collection())["id"]
    owners = [customer() for _ in range(6)]
    claims = [(await world.approvable(collection, owner=owner))["id"] for owner in owners]
    minted = (await token_state(registry))["minted"]
    height = await registry.platform.ledger.height()
    requests = [
        world.oracle_client.post(f"/v1/claims/{claim}/evaluations", json={"status": "approved"})
        for _ in range(4)
        for claim in claims
    ]
    responses = await asyncio.gather(*requests)
    assert statuses(responses) == {200: len(claims), 409: 3 * len(claims)}, [
        r.text for r in responses
    ]
    approved = [r.json() for r in responses if r.status_code == 200]
    assert sorted(view["id"] for view in approved) == sorted(claims)
    for view in approved:
        assert view["amount"] == METERED_AMOUNT and len(view["evaluations"]) == 1
    for claim, owner in zip(claims, owners, strict=True):
        assert await rows(registry, Credential, Credential.claim_id == claim) == 1
        assert await rows(registry, CreditMovement, CreditMovement.claim_id == claim) == 0
        assert await balance(registry, owner) == {"amount": 0, "retired": 0}
    assert (await token_state(registry))["minted"] == minted  # minted at issuance
    tally = await counts(registry, collection)
    assert (tally["evaluated"], tally["approved"], tally["pending"]) == (6, 6, 0)
    # One ledger transaction per approval (its evaluation); none for a refused one.
    assert await registry.platform.ledger.height() == height + len(claims)
    await issue_claims(world)
    for claim, owner in zip(claims, owners, strict=True):
        assert await rows(registry, CreditMovement, CreditMovement.claim_id == claim) == 1
        assert await balance(registry, owner) == {"amount": METERED_AMOUNT, "retired": 0}
    assert (await token_state(registry))["minted"] == minted + len(claims) * METERED_AMOUNT
    assert (await registry.platform.ledger.verify()).ok


async def test_approvals_racing_a_monitoring_period_never_credit_a_stove_twice(
    registry: Registry, world: World
) -> None:
    """A monitoring period's submission (which holds its stoves' days) and approvals of
    their claims, at once: each stove is credited by the period or by its claim, never
    both; a refused approval mints nothing and leaves its claim pending; a refused
    submission holds nothing and leaves the period a draft."""
    flow = await build_workflow(registry, world=world)
    collection = (await world.collection(project=flow.project))["id"]
    claims = []
    for _ in range(5):
        stove = await flow.stove()
        submitted = await world.operator_client.post(
            f"/v1/claim-collections/{collection}/claims",
            json={"asset": stove, "data": metered_claim()},
        )
        assert submitted.status_code == 201, submitted.text
        claims.append(submitted.json()["id"])
    stoves = {claim: (await claim_of(registry, claim))["asset"] for claim in claims}
    minted = (await token_state(registry))["minted"]
    draft = await flow.draft()
    assert draft["totals"]["included"] >= 1  # (stoves cooking alike may be flagged as clones)
    period = flow.step(flow.proponent, draft["id"], "submission", "submit")
    approvals = [
        world.oracle_client.post(f"/v1/claims/{claim}/evaluations", json={"status": "approved"})
        for claim in claims
    ]
    made, *responses = await asyncio.gather(period, *approvals)
    assert made.status_code in (200, 409), made.text
    credited: set[str] = set()
    if made.status_code == 200:
        report = await world.operator_client.get(
            f"/v1/domains/{flow.project}/monitoring-periods/{draft['id']}/report"
        )
        assert report.status_code == 200, report.text
        credited = {row["stove"] for row in report.json()["stoves"]}
    else:  # an approval won meanwhile: the submission is refused, nothing held
        error_of(made, 409, "double_counting")
        view = await world.operator_client.get(
            f"/v1/domains/{flow.project}/monitoring-periods/{draft['id']}"
        )
        assert view.json()["state"] == "draft"
    approved = 0
    for claim, response in zip(claims, responses, strict=True):
        view = await claim_of(registry, claim)
        if response.status_code == 200:
            approved += 1
            assert view["status"] == "approved"
            assert stoves[claim] not in credited, f"{stoves[claim]} credited twice"
        else:
            assert error_of(response, 409, "double_counting")
            assert view["status"] == "pending" and view["evaluations"] == []
            assert stoves[claim] in credited
            assert await rows(registry, Credential, Credential.claim_id == claim) == 0
            assert await rows(registry, CreditMovement, CreditMovement.claim_id == claim) == 0
    # Neither a submission nor an approval mints (the registry's issuance does).
    assert (await token_state(registry))["minted"] == minted
    if approved:  # the approved claims ride the project's next period: minted once there
        world.workflows[flow.project] = flow
        await issue_claims(world, flow.project)
        assert (await token_state(registry))["minted"] == minted + approved * METERED_AMOUNT
    assert (await registry.platform.ledger.verify()).ok
