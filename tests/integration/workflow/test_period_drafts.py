"""A monitoring period drafted in the background, over HTTP on both backends: a draft
that outlasts ORACLE_DRAFT_WAIT_SECONDS is answered 202 with a job whose Location shows
its progress, then its period (the same period a waited-for draft makes) or the error the
request would have answered; refusals before any computing stay immediate; a job whose
process stopped reads stopped; asking again while it drafts answers the same job."""

from __future__ import annotations

import asyncio
import html
import re
from datetime import date, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from tests.conftest import Registry, RegistryFactory
from tests.integration.console.test_console import console, sign_in
from tests.support.workflow_world import Workflow, build_workflow
from twinhub.db.models import LedgerTransaction, PeriodDraft
from twinhub.kernel.clock import utcnow
from twinhub.kernel.principals import Principal
from twinhub.oracle import monitoring

SPAN = {"from": "2026-10-01", "to": "2026-10-10"}


def operator(flow: Workflow) -> Principal:
    """The project's operator, as its API key makes it (a writer controlling it)."""
    return Principal(flow.world.operator, frozenset({"writer", "reader"}))


async def drafted(client: httpx.AsyncClient, location: str) -> dict[str, Any]:
    """The job at `location` once it has ended (polled as a client would)."""
    for _ in range(300):
        job = await client.get(location)
        assert job.status_code == 200, job.text
        if job.json()["state"] != "drafting":
            return job.json()
        await asyncio.sleep(0.05)
    raise AssertionError(f"the draft at {location} never ended")


async def test_a_draft_past_the_wait_is_a_job_that_ends_with_the_same_period(
    make_registry: RegistryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = await make_registry(oracle_draft_wait_seconds=0)
    flow = await build_workflow(registry)
    for kwh in (1.0, 1.4):
        await flow.stove(kwh_per_day=kwh)
    client = flow.world.operator_client
    path = f"/v1/domains/{flow.project}/monitoring-periods"

    # Asked twice at once (a retry, a double click): one job, one draft. The draft waits
    # until both are answered: a loaded machine once let the first draft end before the
    # second request was read, and a second draft of an ended one is a new job.
    gate = asyncio.Event()
    run = registry.platform.monitoring.run

    async def gated(*args: Any, **kwargs: Any) -> Any:
        await gate.wait()
        return await run(*args, **kwargs)

    monkeypatch.setattr(registry.platform.monitoring, "run", gated)
    started, twice = await asyncio.gather(
        client.post(path, json=SPAN), client.post(path, json=SPAN)
    )
    gate.set()
    assert started.status_code == twice.status_code == 202, (started.text, twice.text)
    assert twice.json()["id"] == started.json()["id"]
    assert started.headers["Retry-After"] == "2"
    location = started.headers["Location"]
    job = started.json()
    assert location == f"{path}/drafts/{job['id']}"
    assert job["state"] == "drafting" and job["project"] == flow.project
    assert (job["from"], job["to"]) == (SPAN["from"], SPAN["to"])

    ended = await drafted(client, location)
    assert ended["state"] == "done" and ended["error"] is None, ended
    assert ended["step"] == "done" and ended["progress"] == {"done": 2, "total": 2}
    period = await client.get(f"{path}/{ended['period']}")
    assert period.status_code == 200 and period.json()["state"] == "draft"
    assert [p["id"] for p in (await client.get(path)).json()["items"]] == [ended["period"]]
    async with registry.platform.sessionmaker() as session:
        written = await session.scalar(
            select(func.count())
            .select_from(LedgerTransaction)
            .where(
                LedgerTransaction.kind == "period.draft",
                LedgerTransaction.subject == flow.project,
            )
        )
    assert written == 1  # drafted once, not once a request

    # The same draft, waited for: the same figures, recomputed in place.
    again, created = await registry.platform.monitoring.run(
        flow.project, date(2026, 10, 1), date(2026, 10, 10), operator(flow)
    )
    assert not created and again["id"] == ended["period"]
    assert again["reportDigest"] == period.json()["reportDigest"]


async def test_a_refusal_is_immediate_or_the_jobs_error(
    make_registry: RegistryFactory,
) -> None:
    registry = await make_registry(oracle_draft_wait_seconds=0)
    flow = await build_workflow(registry, validated=False)
    client = flow.world.operator_client
    path = f"/v1/domains/{flow.project}/monitoring-periods"
    # Refused before computing: answered at once, however short the wait.
    backwards = await client.post(path, json={"from": "2026-10-10", "to": "2026-10-01"})
    assert backwards.status_code == 422, backwards.text
    assert backwards.json()["error"]["code"] == "validation_failed"
    reader = await flow.world.client(flow.verifier.did, "reader")
    forbidden = await reader.post(path, json=SPAN)
    assert forbidden.status_code == 403, forbidden.text
    # Refused once computed (no stove has data): the job ends with the request's error.
    started = await client.post(path, json=SPAN)
    assert started.status_code == 202, started.text
    ended = await drafted(client, started.headers["Location"])
    assert ended["state"] == "failed" and ended["period"] is None
    assert ended["error"]["code"] == "conflict"
    assert "no active stoves" in ended["error"]["message"]
    listed = await client.get(path)
    assert listed.json()["items"] == []  # nothing stored by the failed draft


async def test_a_stale_job_reads_stopped_and_a_fresh_one_is_answered_again(
    registry: Registry,
) -> None:
    flow = await build_workflow(registry)
    await flow.stove()
    client = flow.world.operator_client
    path = f"/v1/domains/{flow.project}/monitoring-periods"
    platform = registry.platform
    stale = platform.settings.oracle.draft_stale_seconds
    now = utcnow()
    rows = {
        "stopped": now - timedelta(seconds=stale + 5),
        "fresh": now,
    }
    async with platform.sessionmaker() as session, session.begin():
        for name, updated in rows.items():
            session.add(
                PeriodDraft(
                    id=(name * 32)[:32].encode().hex()[:32],
                    project_did=flow.project,
                    start=date(2026, 10, 1),
                    end=date(2026, 10, 10),
                    actor=flow.world.operator,
                    state="drafting",
                    step="reading",
                    done=500,
                    total=2000,
                    created_at=updated,
                    updated_at=updated,
                )
            )
    ids = {name: (name * 32)[:32].encode().hex()[:32] for name in rows}
    stopped = await client.get(f"{path}/drafts/{ids['stopped']}")
    assert stopped.status_code == 200, stopped.text
    assert stopped.json()["state"] == "failed"
    assert stopped.json()["error"]["code"] == "draft_stopped"
    fresh = await client.get(f"{path}/drafts/{ids['fresh']}")
    assert fresh.json()["state"] == "drafting"
    assert fresh.json()["progress"] == {"done": 500, "total": 2000}
    # The project's periods page shows both, as a person reads them.
    async with console(registry) as browser:
        await sign_in(browser, await registry.key(flow.proponent.did, "proponent", "reader"))
        page = await browser.get(f"/console/projects/{flow.project}/periods")
    assert page.status_code == 200, page.text
    shown = {
        name: html.unescape(re.sub(r"<[^>]+>", "", page.text.split(f'id="draft-{ids[name]}">')[1]))
        for name in ids
    }
    assert "drafting reading the stoves' readings, 500 of 2,000 stoves read" in shown["fresh"]
    assert "failed The process drafting this period stopped" in shown["stopped"]
    # Asked again while it drafts: the same job, nothing new started.
    again = await client.post(path, json=SPAN)
    assert again.status_code == 202, again.text
    assert again.json()["id"] == ids["fresh"]
    assert again.headers["Location"] == f"{path}/drafts/{ids['fresh']}"
    assert (await client.get(path)).json()["items"] == []
    # No such job, or another project's: 404 alike; a malformed id: 422.
    missing = await client.get(f"{path}/drafts/{'0' * 32}")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    elsewhere = f"/v1/domains/{flow.world.organisation}/monitoring-periods"
    other = await client.get(f"{elsewhere}/drafts/{ids['fresh']}")
    assert other.status_code == 404, other.text
    malformed = await client.get(f"{path}/drafts/NOT-A-JOB")
    assert malformed.status_code in (404, 422), malformed.text


async def test_a_draft_tells_its_progress_a_chunk_of_stoves_at_a_time(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    flow = await build_workflow(registry)
    for kwh in (1.0, 1.2, 1.5):
        await flow.stove(kwh_per_day=kwh)
    monkeypatch.setattr(monitoring, "_READINGS_CHUNK", 1)
    heard: list[tuple[str, int, int]] = []

    async def progress(step: str, done: int, total: int) -> None:
        heard.append((step, done, total))

    view, created = await registry.platform.monitoring.run(
        flow.project, date(2026, 10, 1), date(2026, 10, 10), operator(flow), progress
    )
    assert created and view["state"] == "draft"
    assert heard == [
        ("reading", 0, 3),
        ("reading", 1, 3),
        ("reading", 2, 3),
        ("computing", 3, 3),
        ("storing", 3, 3),
    ]
