"""A claim's credits, computed: the claim's stove, its period, its telemetry, the protocol's
methodology. Nobody types a credit amount; a human approval and the oracle's both mint what
this computes, so the two can never disagree.

A claim is computed as a one-stove monitoring period (twinhub.mrv.periods), so a claim
and a project's period follow the same rules: the same exclusions, the same rounding down
to the token's smallest unit, the same digests.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from twinhub.kernel.errors import Problems
from twinhub.mrv.methodology import Methodology, compile_methodology, digest_of
from twinhub.mrv.periods import PeriodSpec, StovePeriod, compute_period
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
    spec = PeriodSpec(job.project, start, end, job.token, decimals)
    report = compute_period(spec, methodology, [stove], [], document=job.document)
    if report["exclusions"]:
        return NotComputable(report["exclusions"][0]["reason"])
    row = report["stoves"][0]
    return ClaimComputation(
        amount=report["credits"]["amount"],
        token=job.token,
        decimals=decimals,
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
