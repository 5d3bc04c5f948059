"""A claim's credits, read and computed: the claim's stove and its telemetry read from the
database (services.mrv_inputs), computed by the pure rules (mrv.claims, mrv.periods).

A human approval (services.claims) and the oracle (oracle.service) both record what this
computes (the issuance of the period carrying the claim mints it), so the two can never
disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from twinhub.db.models import Claim, ClaimCollection, CreditToken, Domain
from twinhub.mrv.claims import (
    DEFAULT_DECIMALS,
    ClaimComputation,
    ClaimJob,
    NotComputable,
    claim_credits,
    claim_days,
    methodology_of,
)
from twinhub.mrv.methodology import Methodology
from twinhub.services.mrv_inputs import stove_periods


async def active_evaluator(session: AsyncSession, collection: ClaimCollection) -> str | None:
    """The collection's first evaluator oracle that is active: the one the oracle service
    acts as."""
    rows = await session.scalars(select(Domain).where(Domain.did.in_(collection.evaluators)))
    active = {row.did for row in rows if row.status == "active"}
    return next((did for did in collection.evaluators if did in active), None)


async def token_decimals(session: AsyncSession, token: str) -> int:
    row = await session.get(CreditToken, token)
    return row.decimals if row is not None else DEFAULT_DECIMALS


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
    results: list[ClaimComputation | NotComputable | None] = [None] * len(jobs)
    methodologies: dict[int, Methodology] = {}
    by_days: dict[tuple[date, date, str], list[int]] = {}  # by days and measure
    for index, job in enumerate(jobs):
        try:
            if job.methodology is None:
                raise NotComputable(
                    f"the protocol names the token {job.token} but no methodology: nothing "
                    "computes its credits"
                )
            methodologies[index] = methodology_of(job.methodology)
            if job.asset is None:
                raise NotComputable("the claim names no stove (asset) whose telemetry would count")
            days = claim_days(job.data, now)
        except NotComputable as error:
            results[index] = error
            continue
        by_days.setdefault((*days, methodologies[index].measure), []).append(index)
    decimals = {
        token: await token_decimals(session, token)
        for token in dict.fromkeys(jobs[i].token for group in by_days.values() for i in group)
    }
    for (start, end, measure), members in by_days.items():
        stoves = [jobs[i].asset for i in members]
        periods = await stove_periods(
            session, [s for s in stoves if s is not None], start, end, measure
        )
        for index, stove in zip(members, periods, strict=True):
            job = jobs[index]
            results[index] = claim_credits(
                job, methodologies[index], stove, start, end, decimals[job.token]
            )
    return [result for result in results if result is not None]
