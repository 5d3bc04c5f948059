"""A claim's credits, computed: the claim's stove, its period, its telemetry, the protocol's
methodology. Nobody types a credit amount; a human approval and the oracle's both mint what
this computes, so the two can never disagree.

A claim is computed as a one-stove monitoring period (twinhub.mrv.periods), so a claim
and a project's period follow the same rules: the same exclusions, the same rounding down
to the token's smallest unit, the same digests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from twinhub.kernel.errors import Problems
from twinhub.mrv.methodology import (
    Methodology,
    compile_methodology,
    digest_of,
    to_smallest_unit,
)
from twinhub.mrv.periods import PeriodSpec, StovePeriod, compute_period, one_stove_rows
from twinhub.mrv.project_document import ProjectDocument

DEFAULT_DECIMALS = 6  # a new credit token counts millionths: 0.000001 tCO2e
MAX_CLAIM_DAYS = 366
FAR_FUTURE = datetime(9000, 1, 1, tzinfo=UTC)  # another claim's period has ended, whenever
_compiled: dict[str, Methodology] = {}


class NotComputable(Exception):
    """The methodology cannot give this claim a number; `reason` says why, for a person."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def methodology_of(document: dict[str, Any]) -> Methodology:
    """The compiled methodology of a protocol's document (compiled once per process)."""
    digest = digest_of(document)
    found = _compiled.get(digest)
    if found is None:
        problems = Problems()
        # Not strict: a protocol may hold a document registered before the unused-parameter
        # rule (the registration itself checks strictly).
        compiled = compile_methodology(document, problems, strict=False)
        if compiled is None:  # refused at registration, so only a hand-edited row gets here
            raise NotComputable(
                "the protocol's methodology does not compile: "
                + "; ".join(f"{p.field}: {p.error}" for p in problems.items)
            )
        found = _compiled[digest] = compiled
    return found


def _moment(value: Any, name: str) -> datetime:
    if not isinstance(value, str):
        raise NotComputable(f"the claim names no {name} (an ISO 8601 date-time)")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise NotComputable(f"the claim's {name} is not an ISO 8601 date-time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def claim_days(data: dict[str, Any], now: datetime) -> tuple[date, date]:
    """The whole UTC days a claim's `periodStart`..`periodEnd` covers (end exclusive)."""
    start = _moment(data.get("periodStart"), "periodStart")
    end = _moment(data.get("periodEnd"), "periodEnd")
    if end <= start:
        raise NotComputable("the claim's periodEnd is not after its periodStart (a skewed clock?)")
    if end > now + timedelta(minutes=5):
        raise NotComputable("the claim's period has not ended yet")
    first, last = start.astimezone(UTC).date(), (end - timedelta(microseconds=1)).date()
    if (last - first).days + 1 > MAX_CLAIM_DAYS:
        raise NotComputable(f"the claim's period is longer than {MAX_CLAIM_DAYS} days")
    return first, last


@dataclass(frozen=True)
class ClaimComputation:
    """What the methodology made of a claim: the credential carries `calculation`."""

    amount: int  # in the token's smallest unit
    token: str
    decimals: int
    methodology: dict[str, str]  # id, version, digest
    inputs_digest: str
    start: date
    end: date
    stove: dict[str, Any]  # the one-stove report row: usage, inputs, values, reductions
    sessions: int
    quantity: float
    unit: str
    period: StovePeriod  # what it was computed from: the stove's facts and day figures

    def calculation(self) -> dict[str, Any]:
        return {
            "methodology": self.methodology,
            "period": {"from": self.start.isoformat(), "to": self.end.isoformat()},
            "inputsDigest": self.inputs_digest,
            "usage": self.stove["usage"],
            "inputs": self.stove["inputs"],
            "values": self.stove["values"],
            "reductions": self.stove["reductions"],
            "credits": {"token": self.token, "decimals": self.decimals, "amount": self.amount},
        }


@dataclass(frozen=True)
class ClaimJob:
    """A claim to compute (`compute_claims`): its stove and data, its protocol's
    methodology and token, its project."""

    asset: str | None
    data: dict[str, Any]
    methodology: dict[str, Any] | None
    token: str
    project: str
    document: ProjectDocument | None = None  # the project's design document; None: defaults


def claim_credits(
    job: ClaimJob,
    methodology: Methodology,
    stove: StovePeriod,
    start: date,
    end: date,
    decimals: int,
) -> ClaimComputation | NotComputable:
    """One claim computed as a one-stove monitoring period."""
    return claims_credits([(job, methodology, stove)], start, end, {job.token: decimals})[0]


def claims_credits(
    claims: Sequence[tuple[ClaimJob, Methodology, StovePeriod]],
    start: date,
    end: date,
    decimals: Mapping[str, int],
) -> list[ClaimComputation | NotComputable]:
    """Claims over the same days, each computed as a one-stove monitoring period, in order
    (`decimals`: each token's). Those under the same project, token, methodology and
    document are computed together (mrv.periods.one_stove_rows: the figures each gets
    alone, a thousand claims' formulas as one set of array operations); a methodology
    whose measure is the sessions' sum (1.0.0), one by one as its reports are."""
    results: list[ClaimComputation | NotComputable | None] = [None] * len(claims)
    groups: dict[tuple[str, str, int, int], list[int]] = {}
    for index, (job, methodology, _) in enumerate(claims):
        key = (job.project, job.token, id(methodology), id(job.document))
        groups.setdefault(key, []).append(index)
    for (project, token, _, _), members in groups.items():
        job, methodology, _ = claims[members[0]]
        spec = PeriodSpec(project, start, end, token, decimals[token])
        stoves = [claims[i][2] for i in members]
        if methodology.measure == "sessions":
            rows = [_sessions_row(spec, methodology, stove, job.document) for stove in stoves]
        else:
            rows = one_stove_rows(spec, methodology, stoves, job.document)
        for index, stove, (row, credited) in zip(members, stoves, rows, strict=True):
            if not credited:
                results[index] = NotComputable(row["reason"])
                continue
            results[index] = ClaimComputation(
                amount=to_smallest_unit(0.0 + row["reductions"], spec.decimals),
                token=token,
                decimals=spec.decimals,
                methodology={
                    "id": methodology.id,
                    "version": methodology.version,
                    "digest": methodology.digest,
                },
                inputs_digest=row["inputsDigest"],
                start=start,
                end=end,
                stove=row,
                sessions=row["usage"]["sessions"],
                quantity=row["usage"]["quantity"],
                unit=row["usage"]["unit"],
                period=stove,
            )
    return [result for result in results if result is not None]


def _sessions_row(
    spec: PeriodSpec,
    methodology: Methodology,
    stove: StovePeriod,
    document: ProjectDocument | None,
) -> tuple[dict[str, Any], bool]:
    """A claim under the sessions measure (1.0.0): its one-stove report's row, computed as
    that version's reports are."""
    report = compute_period(spec, methodology, [stove], [], document=document)
    if report["exclusions"]:
        return report["exclusions"][0], False
    return report["stoves"][0], True
