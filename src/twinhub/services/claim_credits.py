"""A claim's credits, read and computed: the claim's stove and its telemetry read from the
database (services.mrv_inputs), computed by the pure rules (mrv.claims, mrv.periods).

A human approval (services.claims) and the oracle (oracle.service) both record what this
computes (the issuance of the period carrying the claim mints it), so the two can never
disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import date, datetime
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from twinhub.db.models import Claim, ClaimCollection, CreditToken, Domain
from twinhub.mrv.claims import (
    DEFAULT_DECIMALS,
    ClaimComputation,
    ClaimJob,
    NotComputable,
    claim_days,
    claims_credits,
    methodology_of,
)
from twinhub.mrv.meter import Reading
from twinhub.mrv.methodology import Methodology
from twinhub.mrv.periods import StovePeriod
from twinhub.services.mrv_inputs import stove_periods, stove_seen


async def active_evaluators(
    session: AsyncSession, collections: Sequence[ClaimCollection]
) -> dict[int, str | None]:
    """Each collection's (by id) first evaluator oracle that is active: the one the oracle
    service acts as; one statement for them all."""
    wanted = sorted({did for collection in collections for did in collection.evaluators})
    rows = await session.execute(
        select(Domain.did).where(Domain.did.in_(wanted), Domain.status == "active")
    )
    active = {did for (did,) in rows}
    return {
        collection.id: next((did for did in collection.evaluators if did in active), None)
        for collection in collections
    }


# Built once: every batch of approvals asks it (a column, not the ORM's object load).
_DECIMALS = select(CreditToken.decimals).where(CreditToken.name == bindparam("token"))


async def token_decimals(session: AsyncSession, token: str) -> int:
    decimals = await session.scalar(_DECIMALS, {"token": token})
    return decimals if decimals is not None else DEFAULT_DECIMALS


async def compute_claim(
    session: AsyncSession,
    claim: Claim,
    methodology_document: dict[str, Any] | None,
    token: str,
    project: str,
    now: datetime,
) -> ClaimComputation:
    """The claim's credits from its stove's telemetry, or NotComputable with the reason."""
    (result,) = await compute_claims(
        session, [ClaimJob(claim.asset_did, claim.data, methodology_document, token, project)], now
    )
    if isinstance(result, NotComputable):
        raise result
    return result


async def compute_claims(
    session: AsyncSession, jobs: Sequence[ClaimJob], now: datetime
) -> list[ClaimComputation | NotComputable]:
    """Each job's credits (or why there are none), in order. Claims over the same days
    read their stoves' telemetry in one go (stove_periods), so an oracle approving a month
    of a programme's claims reads a handful of statements, not one set per claim."""
    return [result for result, _ in await compute_claims_read(session, jobs, now)]


async def compute_claims_read(
    session: AsyncSession, jobs: Sequence[ClaimJob], now: datetime
) -> list[tuple[ClaimComputation | NotComputable, StovePeriod | None]]:
    """`compute_claims`, each result with the stove's period its telemetry was read into
    (None when nothing was read): the oracle's plausibility checks look at the same days."""
    results: list[ClaimComputation | NotComputable | None] = [None] * len(jobs)
    read: list[StovePeriod | None] = [None] * len(jobs)
    methodologies: dict[int, Methodology] = {}
    by_document: dict[int, Methodology] = {}  # the jobs keep their documents alive meanwhile
    by_days: dict[tuple[date, date, Reading], list[int]] = {}  # by days and reading
    for index, job in enumerate(jobs):
        try:
            if job.methodology is None:
                raise NotComputable(
                    f"the protocol names the token {job.token} but no methodology: nothing "
                    "computes its credits"
                )
            # Jobs of one protocol share its document: digested once, not once a claim.
            compiled = by_document.get(id(job.methodology))
            if compiled is None:
                compiled = by_document[id(job.methodology)] = methodology_of(job.methodology)
            methodologies[index] = compiled
            if job.asset is None:
                raise NotComputable("the claim names no stove (asset) whose telemetry would count")
            days = claim_days(job.data, now)
        except NotComputable as error:
            results[index] = error
            continue
        by_days.setdefault((*days, methodologies[index].reading), []).append(index)
    decimals = {
        token: await token_decimals(session, token)
        for token in dict.fromkeys(jobs[i].token for group in by_days.values() for i in group)
    }
    for (start, end, reading), members in by_days.items():
        stoves = [s for s in (jobs[i].asset for i in members) if s is not None]
        periods = await stove_periods(session, stoves, start, end, reading)
        # Which readings the figures came from, kept with an approval for its evidence:
        # exact when the session reads one snapshot (db.dialects.read_snapshot).
        seen = await stove_seen(session, stoves, start, end)
        periods = [replace(period, seen=seen.get(period.stove, {})) for period in periods]
        computed = claims_credits(
            [(jobs[i], methodologies[i], stove) for i, stove in zip(members, periods, strict=True)],
            start,
            end,
            decimals,
        )
        for index, stove, result in zip(members, periods, computed, strict=True):
            read[index] = stove
            results[index] = result
    return [
        (result, stove) for result, stove in zip(results, read, strict=True) if result is not None
    ]
