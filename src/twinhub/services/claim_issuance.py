"""An approved claim's credits come with issuance, as a monitoring period's do (issue #29).

The oracle's approval of a claim is a draft figure: it signs the claim's credential, holds
the stove's days (services.credited_days) and mints nothing. The claim then rides its
project's next monitoring period, so the per-stove path and the period path share one
trust chain (oracle.period_workflow):
- a period's snapshot names the project's approved claims with credits, not yet issued nor
  carried by a submitted period, whose last day is on or before the period's end
  (`carried`); they enter its frozen inputs and its report (the `claims` key, present
  only when some are), so the submission, verification and issuance credentials cover
  them;
- the submission carries them (`carry`: `claims.period_id`), after checking that none is
  carried by another period or issued meanwhile (`carried_problems`): a claim rides one
  period only; corrections or a rejection release them (`release`), still approved and
  awaiting issuance;
- the registry's issuance mints each carried claim's amount to its owner, once, in the
  issuance's own ledger write (`issue`), and stamps `claims.issued_at`.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import orjson
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from twinhub.db.models import Claim, ClaimCollection, Credential, Domain, Event
from twinhub.kernel.bus import Cause
from twinhub.kernel.errors import Conflict, FieldProblem
from twinhub.mrv.claims import FAR_FUTURE, NotComputable, claim_days
from twinhub.mrv.methodology import digest_of
from twinhub.mrv.period_inputs import behind
from twinhub.security.jcs import digest
from twinhub.services.claims import APPROVED, credit_owner
from twinhub.services.credits import Minting
from twinhub.services.ledger import LedgerWrite
from twinhub.services.mrv_inputs import stove_readings
from twinhub.services.protocols import ProtocolService


async def carried(session: AsyncSession, project: str, end: date) -> list[dict[str, Any]]:
    """The project's approved claims awaiting issuance that a period ending on `end` carries,
    in approval order: each with its days, the owner its credits go to, the figure and the
    digest of the oracle's signed credential (which holds the whole calculation)."""
    rows = (
        await session.execute(
            select(Claim)
            .join(ClaimCollection, ClaimCollection.id == Claim.collection_id)
            .where(
                ClaimCollection.project_did == project,
                Claim.status == APPROVED,
                Claim.amount > 0,
                Claim.issued_at.is_(None),
                Claim.period_id.is_(None),
            )
            .order_by(Claim.seq)
        )
    ).scalars()
    claims: list[tuple[Claim, date, date]] = []
    for claim in rows:
        try:
            first, last = claim_days(claim.data, FAR_FUTURE)
        except NotComputable:  # an approval with credits computed its days: not reached
            continue
        if last <= end:
            claims.append((claim, first, last))
    if not claims:
        return []
    documents = {
        row.claim_id: orjson.loads(row.document)
        for row in await session.scalars(
            select(Credential).where(Credential.claim_id.in_([c.id for c, _, _ in claims]))
        )
    }
    dids = {project} | {c.asset_did for c, _, _ in claims if c.asset_did}
    domains = {
        row.did: row for row in await session.scalars(select(Domain).where(Domain.did.in_(dids)))
    }
    found = []
    for claim, first, last in claims:
        credential = documents.get(claim.id)
        if credential is None:
            continue  # an approval always stores its credential: not reached
        evaluation = credential["credentialSubject"]["evaluation"]
        found.append(
            {
                "claim": claim.id,
                "stove": claim.asset_did,
                "from": first.isoformat(),
                "to": last.isoformat(),
                "oracle": claim.oracle,
                "owner": credit_owner(claim, domains[project], domains.get(claim.asset_did or "")),
                "token": evaluation["tokenClass"],
                "decimals": evaluation["decimals"],
                "amount": claim.amount,
                "credential": digest(credential),
            }
        )
    return found


async def credentials_of(session: AsyncSession, claim_ids: list[str]) -> list[dict[str, Any]]:
    """The approval credentials of the claims, in the order given (an evidence bundle's)."""
    if not claim_ids:
        return []
    found = {
        row.claim_id: orjson.loads(row.document)
        for row in await session.scalars(
            select(Credential).where(Credential.claim_id.in_(claim_ids))
        )
    }
    return [found[claim] for claim in claim_ids if claim in found]


async def evidence_of(
    session: AsyncSession, entries: list[dict[str, Any]], protocols: ProtocolService
) -> dict[str, Any]:
    """What a verifier recomputes each carried claim's figure from, for the evidence bundle
    (mrv.evidence_bundle): `claimInputs`, each claim's kept inputs (claims.inputs: its
    stove's facts and day figures as the approval computed them); `claimMethodologies`, the
    methodology documents by digest (the claim's protocol's; a claim approved under an
    earlier version names a digest not among them, and the verifier says so);
    `claimReadings`, the stove's readings its kept days were read from (the others are late
    data, as for a period's snapshot: mrv.period_inputs.behind). Empty without entries."""
    if not entries:
        return {}
    wanted = [entry["claim"] for entry in entries]
    rows = {
        row[0]: row
        for row in await session.execute(
            select(Claim.id, Claim.inputs, Claim.evaluated_at, ClaimCollection.protocol_did)
            .join(ClaimCollection, ClaimCollection.id == Claim.collection_id)
            .where(Claim.id.in_(wanted))
        )
    }
    inputs: dict[str, Any] = {}
    methodologies: dict[str, Any] = {}
    readings: dict[str, Any] = {}
    for entry in entries:
        found = rows.get(entry["claim"])
        if found is None:
            continue
        claim_id, kept, evaluated_at, protocol = found
        row = orjson.loads(kept) if kept is not None else {}
        if kept is not None:
            inputs[claim_id] = row
        document = (await protocols.get(protocol)).effective_methodology
        if document is not None:
            methodologies.setdefault(digest_of(document), document)
        if entry.get("stove"):
            first, last = date.fromisoformat(entry["from"]), date.fromisoformat(entry["to"])
            stored = await stove_readings(session, [entry["stove"]], first, last)
            readings[claim_id] = behind(
                row,
                stored.get(entry["stove"], []),
                evaluated_at.isoformat() if evaluated_at is not None else None,
            )
    return {
        "claimInputs": inputs,
        "claimMethodologies": methodologies,
        "claimReadings": readings,
    }


async def carried_problems(
    session: AsyncSession, entries: list[dict[str, Any]], period_id: int
) -> list[FieldProblem]:
    """Why the period cannot carry its claims now: one carried by another period, issued,
    or no longer approved since the draft was computed (empty: it can)."""
    if not entries:
        return []
    wanted = [entry["claim"] for entry in entries]
    rows = {row.id: row for row in await session.scalars(select(Claim).where(Claim.id.in_(wanted)))}
    problems = []
    for claim_id in wanted:
        row = rows.get(claim_id)
        if row is None or row.status != APPROVED:
            problems.append(FieldProblem(claim_id, "no longer approved"))
        elif row.issued_at is not None:
            problems.append(FieldProblem(claim_id, "issued already"))
        elif row.period_id is not None and row.period_id != period_id:
            problems.append(FieldProblem(claim_id, f"carried by monitoring period {row.period_id}"))
    return problems


async def check_carried(
    session: AsyncSession, entries: list[dict[str, Any]], period_id: int
) -> None:
    problems = await carried_problems(session, entries, period_id)
    if problems:
        raise Conflict(
            f"Monitoring period {period_id} carries claims another period carries or "
            "issued since its draft was computed (a claim rides one period); recompute the "
            "draft.",
            problems,
        )


async def carry(session: AsyncSession, entries: list[dict[str, Any]], period_id: int) -> None:
    """The period carries the claims (its submission; checked with `check_carried`)."""
    if entries:
        await session.execute(
            update(Claim)
            .where(Claim.id.in_([entry["claim"] for entry in entries]))
            .values(period_id=period_id)
        )


async def release(session: AsyncSession, period_id: int) -> None:
    """The period's claims, free to ride another (corrections asked for, or rejected):
    still approved, awaiting issuance."""
    await session.execute(
        update(Claim)
        .where(Claim.period_id == period_id, Claim.issued_at.is_(None))
        .values(period_id=None)
    )


async def issue(
    write: LedgerWrite,
    minting: Minting,
    entries: list[dict[str, Any]],
    period_id: int,
    actor: str,
    now: datetime,
) -> None:
    """Mint each carried claim's amount to its owner, once (in the issuance's write, under
    the ledger's turn, with the period's row locked: a second issuance is refused before
    it gets here; the claim rows are re-checked all the same)."""
    if not entries:
        return
    session = write.session
    wanted = [entry["claim"] for entry in entries]
    rows = {
        row[0].id: row
        for row in await session.execute(
            select(Claim, ClaimCollection.protocol_did)
            .join(ClaimCollection, ClaimCollection.id == Claim.collection_id)
            .where(Claim.id.in_(wanted))
            .order_by(Claim.id)
            .with_for_update()
        )
    }
    causes = await _approvals(session, [claim.submitted_event for claim, _ in rows.values()])
    for entry in entries:
        claim, protocol = rows[entry["claim"]]
        if claim.period_id != period_id or claim.issued_at is not None:
            raise Conflict(
                f"Claim {claim.id} is not awaiting issuance by monitoring period {period_id}."
            )
        await minting.add(
            entry["token"],
            protocol,
            entry["owner"],
            entry["amount"],
            claim.id,
            actor,
            decimals=entry["decimals"],
            cause=causes.get(claim.submitted_event or ""),
        )
        claim.issued_at = now


async def _approvals(session: AsyncSession, submitted: list[str | None]) -> dict[str, Cause]:
    """What each claim's credits.minted follows from: its claim.approved event, in the chain
    of its submission (claim.submitted event id -> cause), so a credit delivered by webhook
    still traces back through the approval to the claim and its readings."""
    wanted = [event for event in submitted if event]
    if not wanted:
        return {}
    rows = await session.execute(
        select(Event.causation_id, Event.event_id, Event.correlation_id).where(
            Event.type == "claim.approved", Event.causation_id.in_(wanted)
        )
    )
    return {cause: Cause(approved, chain or cause) for cause, approved, chain in rows if cause}
