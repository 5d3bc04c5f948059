"""Claims computed together (a bulk approval's thousand, the oracle's batch) get, each, the
figures of a one-stove monitoring period computed alone: the same credits to the last unit,
the same row, the same digests, the same reason when nothing is credited."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.unit.test_periods import SPEC, documented, project_document, stove, stoves
from twinhub.mrv.builtin import builtin_document, builtin_methodology
from twinhub.mrv.claims import (
    ClaimComputation,
    ClaimJob,
    NotComputable,
    claims_credits,
    methodology_of,
)
from twinhub.mrv.methodology import Methodology
from twinhub.mrv.periods import PeriodSpec, StovePeriod, compute_period


def _alone(job: ClaimJob, methodology: Methodology, period: StovePeriod) -> dict[str, Any]:
    """What the claim's own one-stove period says: the definition of a claim's figures."""
    spec = PeriodSpec(job.project, SPEC.start, SPEC.end, job.token, SPEC.decimals)
    return compute_period(spec, methodology, [period], [], document=job.document)


def _check(job: ClaimJob, methodology: Methodology, period: StovePeriod, got: Any) -> None:
    report = _alone(job, methodology, period)
    if report["exclusions"]:
        assert isinstance(got, NotComputable)
        assert got.reason == report["exclusions"][0]["reason"]
        return
    assert isinstance(got, ClaimComputation)
    assert got.amount == report["credits"]["amount"]
    assert got.stove == report["stoves"][0]
    assert got.inputs_digest == report["stoves"][0]["inputsDigest"]
    assert (got.token, got.decimals, got.period) == (job.token, SPEC.decimals, period)
    assert got.methodology["digest"] == methodology.digest


@pytest.mark.parametrize("version", ["current", "1.0.0"])
def test_claims_computed_together_get_what_each_gets_alone(version: str) -> None:
    methodology = (
        builtin_methodology()
        if version == "current"
        else methodology_of(builtin_document("clean-cooking-mecd-1.0.0"))
    )
    document = project_document()
    other = replace(SPEC, project="did:ixo:entity/other")
    claims: list[tuple[ClaimJob, Methodology, StovePeriod]] = []
    for period in stoves():  # credited, and left out for each of the rules' reasons
        job = ClaimJob(period.stove, {}, methodology.document, SPEC.token, SPEC.project)
        claims.append((job, methodology, period))
    for period in documented():  # under a design document: each model its case
        job = ClaimJob(period.stove, {}, methodology.document, "OTHER", other.project, document)
        claims.append((job, methodology, period))
    # The same stove twice (two claims over the same days), and a stove with no device.
    claims.append(claims[0])
    claims.append((claims[1][0], methodology, stove("z-unenrolled", enrolled=False)))
    got = claims_credits(
        claims, SPEC.start, SPEC.end, {SPEC.token: SPEC.decimals, "OTHER": SPEC.decimals}
    )
    assert len(got) == len(claims)
    credited = [r for r in got if isinstance(r, ClaimComputation) and r.amount > 0]
    assert len(credited) >= 4  # the comparison covers credited claims, not only refusals
    for (job, compiled, period), result in zip(claims, got, strict=True):
        _check(job, compiled, period, result)
