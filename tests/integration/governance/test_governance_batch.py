"""A batch verification proposal larger than one chunk executes in the background, over
real HTTP on both backends: execute answers 202 after the first chunk, the proposal's
progress is polled to `executed`, a second execute starts nothing new, a failing chunk is
retried then left for a manual execute, a stopped platform's batch carries on when the
next one starts, and two platforms on one database never verify a stove twice."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import func, select
from structlog.testing import capture_logs

from tests.conftest import BOOTSTRAP_KEY, Registry, RegistryFactory, running_registry
from tests.integration.console.test_console import console, sign_in
from tests.support.claims_world import World, build_world, executed
from twinhub.db.models import LedgerTransaction
from twinhub.services.governance import GovernanceService
from twinhub.settings import Settings

CHUNK = 3
Chunk = Callable[..., Awaitable[dict[str, Any] | None]]


@pytest.fixture
async def world(make_registry: RegistryFactory) -> AsyncIterator[World]:
    made = await build_world(
        await make_registry(governance_batch_chunk=CHUNK, governance_batch_retry_seconds=0.01)
    )
    yield made
    await made.close()


async def passed_batch(world: World, stoves: int) -> tuple[int, list[str]]:
    """A batch proposal of `stoves` new unverified stoves of the project, voted through."""
    dids = [await world.asset(verified=False) for _ in range(stoves)]
    proposed = await world.group_clients[0].post(
        f"/v1/domains/{world.project}/batch-verification-proposals",
        json={"group": world.group, "domains": dids},
    )
    assert proposed.status_code == 201, proposed.text
    proposal = proposed.json()["id"]
    await world.vote_all(proposal)
    return proposal, dids


def gate_background(governance: GovernanceService, gate: asyncio.Event) -> list[int]:
    """Hold every background chunk (the runner's) until `gate` is set; the requests' own
    chunks pass. Returns the list the proposal id of each background chunk is added to."""
    original: Chunk = governance._execute_batch_chunk
    calls: list[int] = []

    async def gated(proposal_id: int, actor: Any, first: bool, authorized: bool = False) -> Any:
        if authorized:
            await gate.wait()
            calls.append(proposal_id)
        return await original(proposal_id, actor, first, authorized)

    governance._execute_batch_chunk = gated  # type: ignore[method-assign]
    return calls


async def verified_once(registry: Registry, stoves: list[str], proposal: int) -> None:
    """Every stove verified, at version 2, by exactly one `domain.verify` of the
    proposal; the ledger's chain intact."""
    for did in stoves:
        record = (await registry.client.get(f"/v1/domains/{did}")).json()
        assert record["verified"] is True and record["version"] == 2, record
    async with registry.platform.sessionmaker() as session:
        counts = dict(
            (
                await session.execute(
                    select(LedgerTransaction.subject, func.count())
                    .where(LedgerTransaction.kind == "domain.verify")
                    .where(LedgerTransaction.subject.in_(stoves))
                    .group_by(LedgerTransaction.subject)
                )
            ).all()
        )
    assert counts == dict.fromkeys(stoves, 1)
    for did in stoves[:2]:
        history = await registry.platform.ledger.history(did)
        assert [t.kind for t in history] == ["domain.create", "domain.verify"]
    report = await registry.platform.ledger.verify()
    assert report.ok, report


async def test_a_large_batch_executes_in_the_background(world: World) -> None:
    registry, member = world.registry, world.group_clients[0]
    governance = registry.platform.governance
    proposal, stoves = await passed_batch(world, 10)
    gate = asyncio.Event()
    calls = gate_background(governance, gate)
    started = await member.post(f"/v1/proposals/{proposal}/execute")
    assert started.status_code == 202, started.text
    assert started.headers["location"] == f"/v1/proposals/{proposal}"
    view = started.json()
    assert view["status"] == "passed"
    assert view["progress"] == {"done": CHUNK, "total": 10, "stopped": None}
    assert governance.batches.running(proposal)
    runner = governance.batches._runners[proposal]
    # Executing again while it runs: 202, the progress, and no second runner or chunk.
    again = await member.post(f"/v1/proposals/{proposal}/execute")
    assert again.status_code == 202, again.text
    assert again.json()["progress"] == {"done": CHUNK, "total": 10, "stopped": None}
    assert governance.batches._runners[proposal] is runner and calls == []
    polled = (await registry.client.get(f"/v1/proposals/{proposal}")).json()
    assert polled["status"] == "passed" and polled["progress"]["done"] == CHUNK
    # A non-member may not, running or not.
    outsider = await world.client("did:ixo:org/outsider-batch", "reader", "writer")
    assert (await outsider.post(f"/v1/proposals/{proposal}/execute")).status_code == 403
    gate.set()
    done = await executed(registry.client, proposal)
    assert done["progress"] == {"done": 10, "total": 10, "stopped": None} and done["executedAt"]
    assert calls == [proposal] * 3  # 3 + 3 + 1 after the request's 3: no chunk twice
    await verified_once(registry, stoves, proposal)
    assert not governance.batches.running(proposal)
    finished = await member.post(f"/v1/proposals/{proposal}/execute")
    assert finished.status_code == 409, finished.text


async def test_a_batch_of_one_chunk_executes_in_the_request(world: World) -> None:
    proposal, stoves = await passed_batch(world, CHUNK)  # exactly one chunk
    done = await world.group_clients[0].post(f"/v1/proposals/{proposal}/execute")
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "executed"
    assert done.json()["progress"] == {"done": CHUNK, "total": CHUNK, "stopped": None}
    assert not world.registry.platform.governance.batches.running(proposal)
    await verified_once(world.registry, stoves, proposal)


async def test_a_failing_chunk_is_retried_then_left_for_a_manual_execute(world: World) -> None:
    registry, member = world.registry, world.group_clients[0]
    governance = registry.platform.governance
    governance.batches.retries = 2
    original: Chunk = governance._execute_batch_chunk
    failures = {"left": 1}

    async def flaky(proposal_id: int, actor: Any, first: bool, authorized: bool = False) -> Any:
        if authorized and failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("database hiccup")
        return await original(proposal_id, actor, first, authorized)

    governance._execute_batch_chunk = flaky  # type: ignore[method-assign]
    # One failure within the retries: the batch still finishes by itself.
    proposal, stoves = await passed_batch(world, 7)
    assert (await member.post(f"/v1/proposals/{proposal}/execute")).status_code == 202
    await executed(registry.client, proposal)
    await verified_once(registry, stoves, proposal)
    # Failing past the retries: left passed and part-done; executing again carries on.
    failures["left"] = 3
    proposal, stoves = await passed_batch(world, 7)
    with capture_logs() as logs:
        assert (await member.post(f"/v1/proposals/{proposal}/execute")).status_code == 202
        await asyncio.wait_for(governance.batches._runners[proposal], 30)
    assert failures["left"] == 0
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert [e["event"] for e in warnings] == [
        "batch chunk failed; retrying",
        "batch chunk failed; retrying",
        "batch execution gave up; execute the proposal again to resume",
    ]
    assert warnings[-1]["proposal"] == proposal and warnings[-1]["attempts"] == 3
    assert all("hiccup" not in str(e) for e in warnings)  # the type, never the message
    left = (await registry.client.get(f"/v1/proposals/{proposal}")).json()
    assert left["status"] == "passed"
    progress = left["progress"]
    assert (progress["done"], progress["total"]) == (CHUNK, 7)
    # Every process's view (and the console) tells this batch waits for someone.
    assert progress["stopped"]["at"] and "gave up after 3" in progress["stopped"]["reason"]
    assert "hiccup" not in progress["stopped"]["reason"]
    async with console(registry) as browser:
        await sign_in(browser, BOOTSTRAP_KEY)
        page = await browser.get("/console/governance")
        assert f"stopped at {CHUNK}/7: gave up after 3" in page.text
    resumed = await member.post(f"/v1/proposals/{proposal}/execute")
    assert resumed.status_code == 202, resumed.text
    assert resumed.json()["progress"] == {"done": 2 * CHUNK, "total": 7, "stopped": None}
    await executed(registry.client, proposal)
    await verified_once(registry, stoves, proposal)


async def test_a_stopped_platforms_batch_carries_on_when_the_next_starts(
    settings_for: Callable[..., Settings],
) -> None:
    settings = settings_for(
        twinhub_bootstrap_api_key=BOOTSTRAP_KEY,
        governance_batch_chunk=CHUNK,
        governance_batch_retry_seconds=0.01,
    )
    async with running_registry(settings) as first:
        world = await build_world(first)
        proposal, stoves = await passed_batch(world, 10)
        gate_background(first.platform.governance, asyncio.Event())  # never opens: "crash"
        started = await world.group_clients[0].post(f"/v1/proposals/{proposal}/execute")
        assert started.status_code == 202, started.text
        assert first.platform.governance.batches.running(proposal)
        executor = started.json()["votes"][0]["voter"]  # group_clients[0] voted first
        # Passed but never executed: no restart executes it on anyone's behalf.
        untouched, _ = await passed_batch(world, 4)
        held = (await first.client.get(f"/v1/proposals/{proposal}")).json()
        assert held["status"] == "passed" and held["progress"]["done"] == CHUNK
        await world.close()
    # The platform stopped mid-batch (its runner cancelled, nothing half-written); a new
    # one on the same database carries on by itself.
    async with running_registry(settings) as second:
        done = await executed(second.client, proposal)
        assert done["progress"] == {"done": 10, "total": 10, "stopped": None}
        waiting = (await second.client.get(f"/v1/proposals/{untouched}")).json()
        assert waiting["status"] == "passed"
        assert waiting["progress"] == {"done": 0, "total": 4, "stopped": None}
        assert not second.platform.governance.batches.running(untouched)
        await verified_once(second, stoves, proposal)
        # The resumed chunks are recorded as the member who executed, as the first was.
        for did in stoves:
            history = await second.platform.ledger.history(did)
            assert [t.actor for t in history if t.kind == "domain.verify"] == [executor]


async def test_two_platforms_on_one_batch_verify_each_stove_once(
    world: World, settings_for: Callable[..., Settings]
) -> None:
    """Two processes' runners of one proposal (here two platforms on one database): the
    ledger's write lock serialises their chunks, so no stove is verified twice and the
    progress counts each once."""
    registry, member = world.registry, world.group_clients[0]
    proposal, stoves = await passed_batch(world, 20)
    settings = settings_for(twinhub_bootstrap_api_key=BOOTSTRAP_KEY, governance_batch_chunk=CHUNK)
    assert settings.storage.database_url == registry.settings.storage.database_url
    voter = (await registry.client.get(f"/v1/proposals/{proposal}")).json()["votes"][0]["voter"]
    async with running_registry(settings) as other:
        other_member = other.as_key(await other.key(voter, "reader"))
        first, second = await asyncio.gather(
            member.post(f"/v1/proposals/{proposal}/execute"),
            other_member.post(f"/v1/proposals/{proposal}/execute"),
        )
        assert {first.status_code, second.status_code} <= {200, 202, 409}, (
            first.text,
            second.text,
        )
        done = await executed(registry.client, proposal)
        runner = other.platform.governance.batches._runners.get(proposal)
        if runner is not None:  # it may still be reading the (now empty) rest
            await asyncio.wait_for(runner, 30)
        await other_member.aclose()
    assert done["progress"] == {"done": 20, "total": 20, "stopped": None}
    await verified_once(registry, stoves, proposal)


async def test_the_console_shows_a_batchs_progress(world: World) -> None:
    from tests.integration.console.test_console import console, sign_in

    registry = world.registry
    proposal, stoves = await passed_batch(world, 10)
    gate = asyncio.Event()
    gate_background(registry.platform.governance, gate)
    voter = (await registry.client.get(f"/v1/proposals/{proposal}")).json()["votes"][0]["voter"]
    async with console(registry) as browser:
        csrf = await sign_in(browser, await registry.key(voter, "reader", "writer"))
        answer = await browser.post(
            f"/console/governance/proposals/{proposal}/execution", data={"csrf": csrf}
        )
        assert answer.status_code == 303, answer.text
        assert "executing" in answer.headers["location"]
        page = await browser.get("/console/governance")
        assert page.status_code == 200
        assert f"executing: {CHUNK}/10" in page.text
        gate.set()
        await executed(registry.client, proposal)
        page = await browser.get("/console/governance")
        assert "executing:" not in page.text
    await verified_once(registry, stoves, proposal)
