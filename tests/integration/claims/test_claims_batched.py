"""Submissions made together (services.claims: one deferred ledger write a batch of them):
each is still checked on its own, in order, against the table and the batch's rows not yet
written, so a refused one fails alone with the error it would get alone, and the batch's
counts, members and ledger are those of the submissions made one by one. SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.conftest import Registry, unique
from tests.integration.claims.test_claims_rules import DATA, counts, submitted
from tests.integration.claims.test_ledger_group_commit import assert_sound, transactions
from tests.support.claims_world import World
from twinhub.kernel.errors import Conflict, Forbidden, Invalid
from twinhub.kernel.principals import Principal
from twinhub.services.claims import PeriodClaimed

JANUARY = {"periodStart": "2026-01-01T00:00:00Z", "periodEnd": "2026-02-01T00:00:00Z"}
FEBRUARY = {"periodStart": "2026-02-01T00:00:00Z", "periodEnd": "2026-03-01T00:00:00Z"}


def writer(did: str, *roles: str) -> Principal:
    return Principal(did, frozenset({"reader", "writer", *roles}))


async def test_refused_submissions_fail_alone_in_one_batch(
    registry: Registry, world: World
) -> None:
    platform = registry.platform
    submissions = platform.claims.submissions
    stoves = [await world.asset(verified=False) for _ in range(3)]
    collection = (await world.collection())["id"]
    stored = await submitted(
        world.operator_client, collection, id=unique("stored"), asset=stoves[1], data=DATA
    )
    before, height = await counts(registry, collection), await platform.ledger.height()
    operator, admin = writer(world.operator), writer(f"did:ixo:org/{unique('admin')}", "admin")
    chosen = unique("chosen")
    calls: list[tuple[Principal, dict[str, Any]]] = [
        (operator, {"claim_id": chosen, "asset": stoves[0], "data": {**DATA, **JANUARY}}),
        (operator, {"asset": stoves[0], "data": {**DATA, **JANUARY}}),  # the batch's period
        (operator, {"asset": stoves[1], "data": DATA}),  # the stored claim's period
        (operator, {"claim_id": chosen, "asset": stoves[2], "data": DATA}),  # the batch's id
        (operator, {"claim_id": stored["id"], "data": DATA}),  # a stored claim's id
        (operator, {"asset": stoves[2], "data": {**DATA, "mealsCooked": 5000}}),  # protocol
        (operator, {"asset": "did:ixo:entity/nowhere", "data": DATA}),
        (writer(f"did:ixo:org/{unique('stranger')}"), {"asset": stoves[2], "data": DATA}),
        (admin, {"asset": stoves[2], "data": {**DATA, **FEBRUARY}}),
        (admin, {"data": DATA}),  # about the project: no stove-period
        (operator, {"asset": stoves[1], "data": {**DATA, **FEBRUARY}}),
    ]
    batches, items = submissions.coalesced
    results = await asyncio.gather(
        *(submissions.submit(collection, actor=actor, **call) for actor, call in calls),
        return_exceptions=True,
    )
    # Nothing awaited before they queued: they were made as one batch.
    assert submissions.coalesced == (batches + 1, items + len(calls))
    made = [r for r in results if isinstance(r, dict)]
    assert made[0]["id"] == chosen
    assert [i for i, r in enumerate(results) if isinstance(r, dict)] == [0, 8, 9, 10]
    kinds = [type(r) for r in results]
    refusals = [PeriodClaimed, PeriodClaimed, Conflict, Conflict, Invalid, Invalid, Forbidden]
    assert kinds[1:8] == refusals
    in_batch, in_table = results[1], results[2]
    assert isinstance(in_batch, PeriodClaimed) and isinstance(in_table, PeriodClaimed)
    assert [p.error for p in in_batch.details] == [chosen]  # the batch's own claim
    assert [p.error for p in in_table.details] == [stored["id"]]
    assert str(results[3]) == f"A claim {chosen} exists already."
    assert str(results[4]) == f"A claim {stored['id']} exists already."
    assert str(results[6]) == "The claim's asset is unknown."
    # Each refusal is the one a submission made alone gets.
    for index in (1, 2, 4, 5, 6, 7):
        actor, call = calls[index]
        try:
            await submissions.submit(collection, actor=actor, **call)
        except Exception as alone:  # compared below
            assert type(alone) is type(results[index]) and str(alone) == str(results[index])
            assert getattr(alone, "details", None) == getattr(results[index], "details", None)
        else:
            raise AssertionError(f"submission {index} was accepted alone")
    after = await counts(registry, collection)
    assert after["submitted"] == before["submitted"] + 4
    for view in made:
        assert await platform.claims.views.claim(view["id"]) | {"evaluations": []} == view | {
            "evaluations": []
        }
    # One ledger transaction per claim made, none for the refused; the new agent joined once.
    written = await transactions(registry, height)
    assert [t.kind for t in written] == ["claims.submit"] * 4
    assert await platform.collection_members.member(collection, admin.did)
    await assert_sound(registry)


async def test_an_ordinary_write_after_a_batch_sees_its_claims_and_counts(
    registry: Registry, world: World
) -> None:
    """An evaluation queued behind a batch of submissions, in the same ledger batch, finds
    the claims and the collection's count as if they were written one by one."""
    platform = registry.platform
    stoves = [await world.asset(verified=False) for _ in range(6)]
    collection = (await world.collection())["id"]
    pending = await submitted(world.operator_client, collection, data=DATA)
    operator = writer(world.operator)
    oracle = writer(world.oracle_operator)
    commits = platform.ledger.commits
    results = await asyncio.gather(
        *(
            platform.claims.submissions.submit(collection, {**DATA, **JANUARY}, operator, stove)
            for stove in stoves
        ),
        platform.claims.evaluations.evaluate(
            pending["id"], "rejected", oracle, reason="rejected: meter readings checked"
        ),
    )
    assert all(r["status"] == "pending" for r in results[:-1])
    assert results[-1]["status"] == "rejected"
    assert platform.ledger.commits - commits <= 2
    after = await counts(registry, collection)
    assert (after["submitted"], after["evaluated"], after["rejected"]) == (7, 1, 1)
    await assert_sound(registry)
