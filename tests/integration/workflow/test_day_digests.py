"""Stove-days' digests kept between drafts (services/day_digests.py), on both backends: a
draft keeps what it digested, the next draft reuses each day whose readings are the same
and digests again only the stoves with a late reading or a day not kept, giving digit for
digit what reading every reading gives; a kept row is never what a verifier checks; the
retention pruner forgets the rows of the days it prunes, and no row is kept near its
cutoff; the daily pass keeps a closed day's stove-days by itself."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import orjson
import pytest
from sqlalchemy import select

from tests.conftest import Registry
from tests.support.workflow_world import Workflow, build_workflow, send_reading
from twinhub.db.dialects import read_snapshot
from twinhub.db.models import MonitoringPeriod, TelemetryDayDigest, TelemetryDevice
from twinhub.kernel.clock import utcnow
from twinhub.mrv.evidence_bundle import verify_bundle
from twinhub.mrv.period_inputs import report_of
from twinhub.oracle import monitoring
from twinhub.services.day_digests import DayDigests, Digested, KeptDay, digest_days

START, END = date(2026, 10, 1), date(2026, 10, 10)


async def digested(registry: Registry, stoves: list[str], reuse: bool) -> Digested:
    """The period's stove-days digested as a draft does (`reuse`) or as a verifier does."""
    into = Digested()
    async with read_snapshot(registry.platform.sessionmaker) as session:
        await digest_days(session, stoves, START, END, into, reuse)
    return into


async def kept_rows(registry: Registry, stoves: list[str]) -> list[tuple[Any, ...]]:
    """The stoves' kept days, (device id, day, readings, digest), from their months' rows
    (a PostgreSQL database is shared by a module's tests)."""
    async with registry.platform.sessionmaker() as session:
        months = await session.execute(
            select(TelemetryDayDigest.device_id, TelemetryDayDigest.days)
            .join(TelemetryDevice, TelemetryDevice.id == TelemetryDayDigest.device_id)
            .where(TelemetryDevice.did.in_(stoves))
        )
        return sorted(
            (device, date.fromisoformat(day), entry[0], entry[4])
            for device, days in months
            for day, entry in days.items()
        )


async def edit_day(registry: Registry, day: date, edit: Callable[[list[Any]], Any]) -> None:
    """Every kept month holding `day` rewritten: `edit` changes the day's entry in place,
    or returns None to forget the day (as a hand in the database would)."""
    async with registry.platform.sessionmaker.begin() as session:
        for month in await session.scalars(select(TelemetryDayDigest)):
            days = {key: list(entry) for key, entry in month.days.items()}  # a new value
            if day.isoformat() in days:
                if edit(days[day.isoformat()]) is None:
                    del days[day.isoformat()]
                month.days = days


async def programme(registry: Registry) -> tuple[Workflow, list[str]]:
    flow = await build_workflow(registry)
    return flow, [await flow.stove(kwh_per_day=1.0), await flow.stove(kwh_per_day=1.4)]


async def test_a_draft_reuses_the_days_kept_and_digests_again_only_what_changed(
    registry: Registry,
) -> None:
    flow, stoves = await programme(registry)
    reference = await digested(registry, stoves, reuse=False)
    assert reference.reused == 0 and reference.fresh == []  # a verifier keeps nothing
    days = len(reference.digests)
    assert days >= 2 * 10

    drafted = await flow.draft()  # the draft keeps each closed stove-day it digested
    # Its report, made from the stoves as read, is the report of its inputs as frozen (what
    # a verifier recomputes once the period is submitted).
    async with registry.platform.sessionmaker() as session:
        row = await session.get(MonitoringPeriod, drafted["id"])
        assert row is not None and row.inputs is not None
        assert report_of(orjson.loads(row.inputs)) == orjson.loads(row.report)
    kept = await kept_rows(registry, stoves)
    assert len(kept) == days
    assert {digest for *_, digest in kept} == set(reference.digests.values())

    again = await digested(registry, stoves, reuse=True)
    assert (again.reused, again.read, again.fresh) == (days, 0, [])
    assert again.digests == reference.digests and again.seen == reference.seen

    # A late reading on a kept day: its stove is digested again, the other is not.
    await send_reading(registry, stoves[0], 99_001, "2026-10-03T12:00:00+00:00")
    late = await digested(registry, stoves, reuse=True)
    now = await digested(registry, stoves, reuse=False)
    assert late.digests == now.digests and late.seen == now.seen
    assert late.digests != reference.digests
    ours = [key for key in reference.digests if key[0] == stoves[1]]
    assert late.reused == len(ours) and late.read == days - len(ours)
    assert late.seen[stoves[0]]["2026-10-03"][-1] == [99_001, 99_001]

    # A DID with no reading in the period (no device at all here) has no day either way.
    quiet = [flow.project]
    assert (await digested(registry, quiet, reuse=True)).seen == {flow.project: {}}
    assert (await digested(registry, quiet, reuse=False)).seen == {flow.project: {}}

    # Kept anew by the next draft: then every day is reused again.
    await flow.draft()
    settled = await digested(registry, stoves, reuse=True)
    assert (settled.reused, settled.read) == (days, 0)
    assert settled.digests == now.digests


async def test_a_reading_on_a_day_with_no_kept_row_digests_its_stove_again(
    registry: Registry,
) -> None:
    flow, stoves = await programme(registry)
    await flow.draft()
    await edit_day(registry, START, lambda entry: None)
    found = await digested(registry, stoves, reuse=True)
    assert found.reused == 0  # both stoves cooked on the day no longer kept
    assert found.digests == (await digested(registry, stoves, reuse=False)).digests
    assert {row.day for row in found.fresh} >= {START}


async def test_a_kept_row_is_never_what_a_verifier_checks(registry: Registry) -> None:
    """A kept digest made wrong (a bug, a hand in the database) flows into the next draft's
    frozen inputs, which shows the rows are reused; the evidence bundle carries the
    readings themselves, and its offline check names the day."""
    flow, stoves = await programme(registry)
    period = (await flow.draft())["id"]
    forged = "sha256:" + "0" * 64

    def forge(entry: list[Any]) -> list[Any]:
        entry[4] = forged
        return entry

    await edit_day(registry, date(2026, 10, 4), forge)
    await flow.draft()
    issued = await flow.through(period, stoves)
    assert issued["state"] == "issued"
    base = f"/v1/domains/{flow.project}/monitoring-periods/{period}"
    bundle = (await flow.verifier.client.get(f"{base}/evidence")).json()
    named = [d for d in verify_bundle(bundle) if "2026-10-04 readings: frozen digest" in d]
    assert len(named) == len(stoves) and all(forged in d for d in named), verify_bundle(bundle)


async def test_the_pruner_forgets_the_days_it_prunes_and_none_is_kept_near_its_cutoff(
    registry: Registry,
) -> None:
    flow, stoves = await programme(registry)
    await flow.draft()
    assert {row[1] for row in await kept_rows(registry, stoves)} == {
        START + timedelta(days=n) for n in range(10)
    }
    pruned = await registry.platform.telemetry.store.prune(datetime(2026, 10, 5, 12, tzinfo=UTC))
    assert pruned > 0
    # The month the cutoff falls in goes whole with the months before it.
    assert await kept_rows(registry, stoves) == []

    # Retention of this many days puts the cutoff inside the period: the rows of the days
    # within KEEP_MARGIN_DAYS of it, and before, are not kept; today's day neither.
    today = utcnow().date()
    retention = (today - date(2026, 10, 7)).days
    days = DayDigests(registry.platform.sessionmaker, retention)
    assert days.keepable_from() == date(2026, 10, 9)
    async with registry.platform.sessionmaker.begin() as session:
        await session.execute(TelemetryDayDigest.__table__.delete())
    into = await digested(registry, stoves, reuse=True)  # the days left after the prune
    assert min(row.day for row in into.fresh) == date(2026, 10, 5)
    today_row = into.fresh[0]._replace(day=today)
    assert await days.keep([*into.fresh, today_row]) == 2 * 2  # 9 and 10 October, 2 stoves
    assert {row[1] for row in await kept_rows(registry, stoves)} == {date(2026, 10, 9), END}


async def test_the_daily_pass_keeps_a_closed_days_stove_days_once(registry: Registry) -> None:
    _, stoves = await programme(registry)
    reference = await digested(registry, stoves, reuse=False)
    day = date(2026, 10, 2)
    days = registry.platform.day_digests
    # Other tests' stoves may share the database: the pass's counts include theirs.
    assert (await days.fill(day, day))[1] >= 2
    assert (await days.fill(day, day))[1] == 0  # nothing left to digest
    kept = await kept_rows(registry, stoves)
    assert [row[1] for row in kept] == [day, day]
    assert {row[3] for row in kept} == {reference.digests[stove, day] for stove in stoves}

    # Running as the platform runs it: every closed day back to the period's start.
    back = (utcnow().date() - START).days
    task = asyncio.create_task(days.run(0.05, back))
    try:
        for _ in range(400):
            if len(await kept_rows(registry, stoves)) == len(reference.digests):
                break
            await asyncio.sleep(0.05)
    finally:
        task.cancel()
    assert {(row[1], row[3]) for row in await kept_rows(registry, stoves)} == {
        (when, digest) for (_, when), digest in reference.digests.items()
    }
    again = await digested(registry, stoves, reuse=True)
    assert (again.reused, again.read) == (len(reference.digests), 0)


async def test_a_large_draft_keeps_what_it_digested_as_it_goes(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A draft holds at most `_KEEP_EVERY` stove-days to keep (3 million at 100,000 stoves
    would be half a gigabyte): past it, they are kept while it still reads. Here a stove a
    chunk and every stove-day past the bound."""
    monkeypatch.setattr(monitoring, "_READINGS_CHUNK", 1)
    monkeypatch.setattr(monitoring, "_KEEP_EVERY", 1)
    kept_while_reading: list[int] = []
    keep = registry.platform.day_digests.keep

    async def counted(fresh: list[KeptDay]) -> int:
        kept_while_reading.append(len(fresh))
        return await keep(fresh)

    monkeypatch.setattr(registry.platform.day_digests, "keep", counted)
    flow, stoves = await programme(registry)
    reference = await digested(registry, stoves, reuse=False)
    await flow.draft()
    assert kept_while_reading == [10, 10]  # one stove's ten days after each chunk, none left
    assert {(row[1], row[3]) for row in await kept_rows(registry, stoves)} == {
        (when, digest) for (_, when), digest in reference.digests.items()
    }
