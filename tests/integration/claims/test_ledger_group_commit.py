"""Group commit: many concurrent writers share database transactions, and still no write is
lost, doubled or reordered. A write that fails rolls back alone, a cancelled one leaves no
batch hanging, two processes (two platforms on one database) keep one chain; after all of
it the hash chain verifies and the tables reconcile with the replayed ledger. SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from tests.conftest import (
    BOOTSTRAP_KEY,
    Backend,
    Registry,
    fresh_postgres_database,
    running_registry,
    unique,
)
from twinhub.db.models import Domain, LedgerTransaction
from twinhub.kernel.errors import Conflict
from twinhub.kernel.principals import Principal
from twinhub.services.domains import DomainSpec
from twinhub.services.ledger import Ledger
from twinhub.services.ledger_state import reconcile
from twinhub.settings import Settings

ACTOR = Principal("did:ixo:org/group-commit", frozenset({"writer"}))


class Refused(Exception):
    """Raised inside a write's body on purpose."""


@pytest.fixture
async def registry(
    settings_for: Callable[..., Settings], backend: Backend
) -> AsyncIterator[Registry]:
    """A registry on a database of its own (PostgreSQL: a fresh one), so reconciling it
    sees only this test's writes, whatever other tests did to the shared database."""
    async with AsyncExitStack() as stack:
        overrides: dict[str, Any] = {"twinhub_bootstrap_api_key": BOOTSTRAP_KEY}
        if backend.database == "postgresql":
            overrides["database_url"] = await stack.enter_async_context(
                fresh_postgres_database("group_commit")
            )
        yield await stack.enter_async_context(running_registry(settings_for(**overrides)))


def device(local_id: str | None = None) -> DomainSpec:
    return DomainSpec(
        type="Device",
        protocol="did:ixo:protocol/clean-cooking",
        metadata={"name": unique("stove")},
        properties={"fuelType": "lpg", "serialNumber": unique("sn")},
        local_id=local_id,
    )


async def transactions(registry: Registry, after: int) -> list[LedgerTransaction]:
    async with registry.platform.sessionmaker() as session:
        rows = await session.scalars(
            select(LedgerTransaction)
            .where(LedgerTransaction.height > after)
            .order_by(LedgerTransaction.height)
        )
        return list(rows)


async def assert_sound(registry: Registry) -> None:
    report = await registry.platform.ledger.verify()
    assert report.ok, report
    assert await reconcile(registry.platform.sessionmaker) == []


async def test_many_concurrent_creates_none_lost_none_doubled(registry: Registry) -> None:
    platform = registry.platform
    start = await platform.ledger.height()
    clashing = unique("clash")
    specs = [device() for _ in range(300)] + [device(clashing) for _ in range(20)]
    results = await asyncio.gather(
        *(platform.domains.create(spec, ACTOR) for spec in specs), return_exceptions=True
    )
    created = [r["did"] for r in results if isinstance(r, dict)]
    failed = [r for r in results if not isinstance(r, dict)]
    assert len(created) == 301 and len(set(created)) == 301  # 300 + one of the 20 clashes
    assert len(failed) == 19 and all(isinstance(e, Conflict) for e in failed), failed[:3]
    rows = await transactions(registry, start)
    assert [row.height for row in rows] == list(range(start + 1, start + 302))  # no gap
    assert Counter(row.subject for row in rows) == Counter(created)  # each exactly once
    async with platform.sessionmaker() as session:
        stored = set(await session.scalars(select(Domain.did).where(Domain.did.in_(created))))
    assert stored == set(created)
    await assert_sound(registry)


async def test_a_failing_write_rolls_back_alone(registry: Registry) -> None:
    """Writes that raise after appending sit in the same batches as writes that succeed:
    theirs vanish (rows and transactions), the others commit with contiguous heights."""
    ledger: Ledger = registry.platform.ledger
    start = await ledger.height()

    async def one(n: int) -> int:
        async with ledger.write() as write:
            transaction = await write.append("test.note", f"did:ixo:test/{n}", "t", {"n": n})
            if n % 3 == 0:
                raise Refused(n)
            return transaction.height

    results = await asyncio.gather(*(one(n) for n in range(90)), return_exceptions=True)
    refused = [r for r in results if isinstance(r, Refused)]
    heights = sorted(r for r in results if isinstance(r, int))
    assert len(refused) == 30 and len(heights) == 60
    assert heights == list(range(start + 1, start + 61))
    rows = await transactions(registry, start)
    kept = sorted(int(row.subject.rsplit("/", 1)[1]) for row in rows)
    assert kept == [n for n in range(90) if n % 3]
    await assert_sound(registry)


async def test_batches_larger_than_the_cap_are_split(registry: Registry) -> None:
    ledger: Ledger = registry.platform.ledger
    ledger.max_batch = 7
    start = await ledger.height()

    async def one(n: int) -> None:
        async with ledger.write() as write:
            await write.append("test.note", f"did:ixo:test/cap-{n}", "t", {"n": n})

    await asyncio.gather(*(one(n) for n in range(50)))
    assert await ledger.height() == start + 50
    await assert_sound(registry)


async def test_cancelled_writers_leave_no_batch_open(registry: Registry) -> None:
    """Writers cancelled while queued (a client gone) must not leave the open batch waiting
    for them: the writes before them still commit and return."""
    ledger: Ledger = registry.platform.ledger
    start = await ledger.height()
    release = asyncio.Event()

    async def slow(n: int) -> int:
        async with ledger.write() as write:
            transaction = await write.append("test.note", f"did:ixo:test/slow-{n}", "t", {})
            await release.wait()
            return transaction.height

    async def queued(n: int) -> None:
        async with ledger.write() as write:
            await write.append("test.note", f"did:ixo:test/gone-{n}", "t", {})

    first = asyncio.create_task(slow(0))
    await asyncio.sleep(0.05)  # holds the turn, its batch open
    doomed = [asyncio.create_task(queued(n)) for n in range(5)]
    await asyncio.sleep(0.05)
    for task in doomed:
        task.cancel()
    release.set()
    assert await asyncio.wait_for(first, 10) == start + 1
    for task in doomed:
        with pytest.raises(asyncio.CancelledError):
            await task
    assert await ledger.height() == start + 1
    # And the ledger keeps working afterwards.
    assert (await asyncio.wait_for(slow(1), 10)) == start + 2
    await assert_sound(registry)


async def test_two_platforms_on_one_database_keep_one_chain(registry: Registry) -> None:
    """Two processes' ledgers (two engines) interleave batches through the database's own
    lock (PostgreSQL: the head row; SQLite: BEGIN IMMEDIATE) without forking the chain."""
    async with running_registry(registry.settings) as other:
        start = await registry.platform.ledger.height()
        creates: list[Any] = []
        for platform in (registry.platform, other.platform):
            creates += [platform.domains.create(device(), ACTOR) for _ in range(60)]
        results = await asyncio.gather(*creates)
    rows = await transactions(registry, start)
    assert [row.height for row in rows] == list(range(start + 1, start + 121))
    assert {row.subject for row in rows} == {r["did"] for r in results}
    await assert_sound(registry)


async def test_a_write_failing_at_its_flush_fails_alone(registry: Registry) -> None:
    """A row the database refuses (a duplicate key) surfaces when the write ends, whether it
    opened its batch or joined one, and the ledger carries on with the next write."""
    platform = registry.platform
    taken = (await platform.domains.create(device(), ACTOR))["did"]
    ledger: Ledger = platform.ledger
    start = await ledger.height()

    async def duplicate() -> None:
        async with ledger.write() as write:
            write.session.add(
                Domain(
                    did=taken,
                    seq=await write.next_seq(Domain.seq),
                    type="Device",
                    class_did="did:ixo:protocol/clean-cooking",
                    twin_class="physical",
                    controller=[],
                    services=[],
                    credentials=[],
                    meta={},
                    properties={},
                )
            )
            await write.append("test.note", taken, "t", {})

    for _ in range(2):  # alone in its batch
        with pytest.raises(IntegrityError):
            await duplicate()
    results = await asyncio.gather(  # in the middle of batches
        *(duplicate() for _ in range(5)),
        *(platform.domains.create(device(), ACTOR) for _ in range(10)),
        return_exceptions=True,
    )
    assert sum(isinstance(r, IntegrityError) for r in results) == 5
    assert sum(isinstance(r, dict) for r in results) == 10
    assert await ledger.height() == start + 10
    await assert_sound(registry)


def metric(text: str, name: str) -> int:
    """A sample's value in Prometheus text, by its full name."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    raise AssertionError(f"{name} is not in /metrics")


async def test_commits_and_their_writes_are_counted(registry: Registry) -> None:
    """`/metrics` counts committed batches and the writes in them (their ratio is the mean
    batch size the benchmark reports); a refused write is in neither."""
    ledger: Ledger = registry.platform.ledger
    ledger.max_batch = 7

    async def counters() -> tuple[int, int]:
        text = (await registry.client.get("/metrics")).text
        commits = metric(text, "twinhub_ledger_commits_total")
        writes = metric(text, "twinhub_ledger_writes_committed_total")
        assert (commits, writes) == (ledger.commits, ledger.committed_writes)
        return commits, writes

    async def one(n: int) -> None:
        async with ledger.write() as write:
            await write.append("test.note", f"did:ixo:test/count-{n}", "t", {"n": n})
            if n % 10 == 9:
                raise Refused(n)

    commits, writes = await counters()
    await one(0)  # alone: one batch of one write
    assert await counters() == (commits + 1, writes + 1)
    await asyncio.gather(*(one(n) for n in range(1, 51)), return_exceptions=True)
    after_commits, after_writes = await counters()
    assert after_writes == writes + 1 + 45  # 50 writers, 5 of them refused
    assert 1 + 45 // 7 <= after_commits - commits - 1 < 45  # batched, none above the cap
    with pytest.raises(Refused):
        await one(9)  # refused alone: nothing is committed
    assert await counters() == (after_commits, after_writes)
