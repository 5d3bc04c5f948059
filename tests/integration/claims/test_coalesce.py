"""Coalescing single calls into batches (services/coalesce.py): callers that arrive while a
batch runs go together into the next one, each gets its own result, keys never mix, a
failing batch fails only its own callers; and through the API, concurrent single claim
approvals are made in fewer ledger writes, each exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

import pytest

from tests.conftest import Registry, RegistryFactory
from tests.integration.claims.test_claims_rules import balance, customer, token_state
from tests.support.claims_world import METERED_AMOUNT, World, build_world
from tests.support.workflow_world import issue_claims
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


class Instant:
    """A batch runner that answers at once (after a yield), remembering each batch."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    async def __call__(self, key: Hashable, items: list[int]) -> list[int]:
        self.batches.append(items)
        await asyncio.sleep(0)
        return [2 * item for item in items]


async def clients(coalescer: Coalescer[int, int], count: int, rounds: int) -> list[int]:
    """`count` callers sending together, then each `rounds - 1` more items one after the
    other; caller n takes 2n extra turns of the event loop before each of those (as
    clients answered together come back at different times). Every result."""

    async def caller(n: int) -> list[int]:
        got = []
        for r in range(rounds):
            for _ in range(2 * n if r else 0):
                await asyncio.sleep(0)
            got.append(await coalescer.submit("k", 100 * n + r))
        return got

    results = await asyncio.gather(*(caller(n) for n in range(count)))
    return [item for each in results for item in each]


async def test_without_a_linger_returning_callers_split_into_small_batches() -> None:
    run = Instant()
    results = await clients(Coalescer(run, max_batch=100), count=4, rounds=3)
    assert sorted(results) == sorted(2 * (100 * n + r) for n in range(4) for r in range(3))
    assert len(run.batches) > 3  # what the linger is for


async def test_a_linger_waits_for_the_last_batch_s_callers_to_come_back() -> None:
    run = Instant()
    # A long linger that never runs out: the expected callers all come back.
    coalescer: Coalescer[int, int] = Coalescer(run, max_batch=100, linger=60)
    results = await asyncio.wait_for(clients(coalescer, count=4, rounds=3), 30)
    assert sorted(results) == sorted(2 * (100 * n + r) for n in range(4) for r in range(3))
    assert [len(batch) for batch in run.batches] == [4, 4, 4]
    assert sorted(item for batch in run.batches for item in batch) == sorted(
        100 * n + r for n in range(4) for r in range(3)
    )


async def test_a_lone_caller_never_waits_for_company() -> None:
    run = Instant()
    coalescer: Coalescer[int, int] = Coalescer(run, max_batch=100, linger=60)
    # Each call alone: the first runs at once, the next one (sent while the coalescer
    # still lingers after the first) is the one caller expected, so it runs at once too.
    for n in range(3):
        assert await asyncio.wait_for(coalescer.submit("k", n), 30) == 2 * n
    assert run.batches == [[0], [1], [2]]


async def test_a_linger_ends_when_another_key_waits_or_its_time_is_up() -> None:
    run = Instant()
    coalescer: Coalescer[int, int] = Coalescer(run, max_batch=100, linger=60)
    firsts = [asyncio.ensure_future(coalescer.submit("a", n)) for n in range(3)]
    assert await asyncio.gather(*firsts) == [0, 2, 4]
    # Three callers of "a" are expected back; another key's caller does not wait for them.
    assert await asyncio.wait_for(coalescer.submit("b", 7), 30) == 14
    assert run.batches == [[0, 1, 2], [7]]
    short: Coalescer[int, int] = Coalescer(run, max_batch=100, linger=0.01)
    firsts = [asyncio.ensure_future(short.submit("a", n)) for n in range(3)]
    assert await asyncio.gather(*firsts) == [0, 2, 4]
    # Only one of the three comes back: it runs once the linger is over.
    assert await asyncio.wait_for(short.submit("a", 5), 30) == 10
    assert run.batches[-2:] == [[0, 1, 2], [5]]


async def test_concurrent_single_approvals_are_made_together_each_once(
    registry: Registry, world: World
) -> None:
    collection = (await world.collection())["id"]
    owners = [customer() for _ in range(10)]
    claims = [(await world.approvable(collection, owner=owner))["id"] for owner in owners]
    minted = (await token_state(registry))["minted"]
    height = await registry.platform.ledger.height()
    batches, items = registry.platform.claims.evaluations.coalesced
    responses = await asyncio.gather(
        *(
            world.oracle_client.post(f"/v1/claims/{claim}/evaluations", json={"status": "approved"})
            for claim in claims
        )
    )
    assert [r.status_code for r in responses] == [200] * len(claims), [r.text for r in responses]
    assert all(r.json()["amount"] == METERED_AMOUNT for r in responses)
    after_batches, after_items = registry.platform.claims.evaluations.coalesced
    assert after_items - items == len(claims)
    assert after_batches - batches < len(claims)  # some of them went together
    metrics = (await registry.client.get("/metrics")).text
    assert f"twinhub_claim_evaluations_coalesced_total {float(after_items)}" in metrics
    assert f"twinhub_claim_evaluation_batches_total {float(after_batches)}" in metrics
    for owner in owners:
        assert await balance(registry, owner) == {"amount": 0, "retired": 0}
    assert (await token_state(registry))["minted"] == minted  # minted at issuance
    assert await registry.platform.ledger.height() == height + len(claims)
    await issue_claims(world)
    for owner in owners:
        assert await balance(registry, owner) == {"amount": METERED_AMOUNT, "retired": 0}
    assert (await token_state(registry))["minted"] == minted + len(claims) * METERED_AMOUNT
    assert (await registry.platform.ledger.verify()).ok


async def test_approvals_of_clients_in_a_closed_loop_linger_into_batches_each_once(
    make_registry: RegistryFactory,
) -> None:
    """Four oracle clients, each sending its next approval once the last is answered, with
    a linger long enough to gather them: every claim approved (and at issuance minted)
    exactly once,
    in fewer batches than approvals, and the chain intact."""
    registry = await make_registry(claims_evaluation_linger_seconds=0.1)
    world = await build_world(registry)
    try:
        assert registry.platform.claims.evaluations._coalescer.linger == 0.1
        collection = (await world.collection())["id"]
        owners = [customer() for _ in range(8)]
        claims = [(await world.approvable(collection, owner=owner))["id"] for owner in owners]
        minted = (await token_state(registry))["minted"]
        height = await registry.platform.ledger.height()
        batches, items = registry.platform.claims.evaluations.coalesced

        async def client(mine: list[str]) -> list[int]:
            codes = []
            for claim in mine:
                response = await world.oracle_client.post(
                    f"/v1/claims/{claim}/evaluations", json={"status": "approved"}
                )
                assert response.status_code != 200 or response.json()["amount"] == METERED_AMOUNT
                codes.append(response.status_code)
            return codes

        codes = await asyncio.gather(*(client(claims[n::4]) for n in range(4)))
        assert codes == [[200, 200]] * 4
        after_batches, after_items = registry.platform.claims.evaluations.coalesced
        assert after_items - items == len(claims)
        assert after_batches - batches < len(claims)
        for owner in owners:
            assert await balance(registry, owner) == {"amount": 0, "retired": 0}
        assert (await token_state(registry))["minted"] == minted
        assert await registry.platform.ledger.height() == height + len(claims)
        await issue_claims(world)
        for owner in owners:
            assert await balance(registry, owner) == {"amount": METERED_AMOUNT, "retired": 0}
        assert (await token_state(registry))["minted"] == minted + len(claims) * METERED_AMOUNT
        again = await world.oracle_client.post(
            f"/v1/claims/{claims[0]}/evaluations", json={"status": "approved"}
        )
        assert again.status_code == 409, again.text
        assert (await registry.platform.ledger.verify()).ok
    finally:
        await world.close()
