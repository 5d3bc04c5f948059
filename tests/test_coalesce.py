"""Coalescing single calls into batches (services/coalesce.py): callers that arrive while a
batch runs go together into the next one, each gets its own result, keys never mix, a
failing batch fails only its own callers; and through the API, concurrent single claim
approvals are made in fewer ledger writes, each exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

import pytest

from tests.claims_world import METERED_AMOUNT, World
from tests.conftest import Registry
from tests.test_claims_rules import balance, customer, token_state
from twinhub.services.coalesce import Coalescer


class Recorder:
    """A batch runner that remembers each batch and answers each item doubled."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.batches: list[tuple[Hashable, list[int]]] = []
        self.fail_on = fail_on
        self.release = asyncio.Event()

    async def __call__(self, key: Hashable, items: list[int]) -> list[int]:
        self.batches.append((key, items))
        await self.release.wait()
        if self.fail_on is not None and self.fail_on in items:
            raise RuntimeError(f"batch with {self.fail_on} failed")
        return [2 * item for item in items]


async def test_callers_arriving_during_a_batch_share_the_next_one() -> None:
    run = Recorder()
    coalescer: Coalescer[int, int] = Coalescer(run, max_batch=3)
    first = asyncio.ensure_future(coalescer.submit("a", 1))
    await asyncio.sleep(0)  # the first batch starts alone, at once
    rest = [asyncio.ensure_future(coalescer.submit("a", n)) for n in range(2, 7)]
    other = asyncio.ensure_future(coalescer.submit("b", 100))
    await asyncio.sleep(0)
    run.release.set()
    assert await first == 2
    assert await asyncio.gather(*rest) == [4, 6, 8, 10, 12]
    assert await other == 200
    assert run.batches == [("a", [1]), ("a", [2, 3, 4]), ("a", [5, 6]), ("b", [100])]
    assert (coalescer.batches, coalescer.items) == (4, 7)


async def test_a_failing_batch_fails_only_its_callers() -> None:
    run = Recorder(fail_on=3)
    coalescer: Coalescer[int, int] = Coalescer(run, max_batch=2)
    calls = [asyncio.ensure_future(coalescer.submit("k", n)) for n in range(1, 6)]
    await asyncio.sleep(0)
    run.release.set()
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert results[0] == 2 and results[1] == 4
    assert all(isinstance(r, RuntimeError) for r in results[2:4])
    assert results[4] == 10
    # and the coalescer keeps working afterwards
    assert await coalescer.submit("k", 7) == 14


async def test_a_cancelled_caller_does_not_stop_its_batch() -> None:
    run = Recorder()
    coalescer: Coalescer[int, int] = Coalescer(run, max_batch=10)
    blocker = asyncio.ensure_future(coalescer.submit("k", 1))
    await asyncio.sleep(0)
    leaving = asyncio.ensure_future(coalescer.submit("k", 2))
    staying = asyncio.ensure_future(coalescer.submit("k", 3))
    await asyncio.sleep(0)
    leaving.cancel()
    run.release.set()
    assert await blocker == 2 and await staying == 6
    with pytest.raises(asyncio.CancelledError):
        await leaving
    assert run.batches == [("k", [1]), ("k", [2, 3])]  # 2 was made all the same


async def test_concurrent_single_approvals_are_made_together_each_once(
    registry: Registry, world: World
) -> None:
    collection = (await world.collection())["id"]
    owners = [customer() for _ in range(10)]
    claims = [(await world.approvable(collection, owner=owner))["id"] for owner in owners]
    minted = (await token_state(registry))["minted"]
    height = await registry.platform.ledger.height()
    batches, items = registry.platform.claims.coalesced
    responses = await asyncio.gather(
        *(
            world.oracle_client.post(f"/v1/claims/{claim}/evaluations", json={"status": "approved"})
            for claim in claims
        )
    )
    assert [r.status_code for r in responses] == [200] * len(claims), [r.text for r in responses]
    assert all(r.json()["amount"] == METERED_AMOUNT for r in responses)
    after_batches, after_items = registry.platform.claims.coalesced
    assert after_items - items == len(claims)
    assert after_batches - batches < len(claims)  # some of them went together
    metrics = (await registry.client.get("/metrics")).text
    assert f"twinhub_claim_evaluations_coalesced_total {float(after_items)}" in metrics
    assert f"twinhub_claim_evaluation_batches_total {float(after_batches)}" in metrics
    for owner in owners:
        assert await balance(registry, owner) == {"amount": METERED_AMOUNT, "retired": 0}
    assert (await token_state(registry))["minted"] == minted + len(claims) * METERED_AMOUNT
    assert await registry.platform.ledger.height() == height + 2 * len(claims)
    assert (await registry.platform.ledger.verify()).ok
