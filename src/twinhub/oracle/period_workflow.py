"""The verification workflow of a monitoring period: draft -> submitted -> verified |
rejected (or back to draft on corrections) -> issued.

Rules that live here:
- each step is a verifiable credential the acting role signs with its own key (a did:key
  whose API key grants the role; an admin key grants none of them), naming the digest of
  the step before; the server offers the unsigned credential (`credential_request`) and
  accepts only that content, signed by the caller;
- the proponent (a controller of the project) submits a draft of a validated project
  whose document fixes no placeholder: its inputs freeze, and its included stoves' days are
  held registry-wide (services.credited_days); a period with no included stove, or that
  credits nothing, cannot be submitted;
- a verifier accredited for the project by the registry, not the proponent's key, approves,
  rejects or asks for corrections (back to draft, findings kept, days released), naming
  the stoves it sampled;
- the registry issues a verified period: the credits are minted to the proponent, once
  (the period's row is re-read under the ledger's turn, so of two concurrent issuances
  one mints and the other is refused);
- a period carries its project's approved claims awaiting issuance (its report's
  `claims`, services.claim_issuance): its submission carries them (a claim rides one
  period), corrections and rejection release them, and its issuance mints each claim's
  amount to the claim's owner in the same write. A period whose stoves are all credited
  by claims (it includes none) is submitted for the claims it carries.
Every step is checked in full before anything is written, and again under the ledger's
turn; a refusal changes nothing.
"""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.dialects import read_snapshot
from twinhub.db.models import Credential, MonitoringPeriod
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import Conflict, FieldProblem, Forbidden, Invalid, NotFound
from twinhub.kernel.principals import Principal, require_workflow_role
from twinhub.mrv import trust_chain as chain
from twinhub.mrv.claims import methodology_of
from twinhub.mrv.period_inputs import (
    behind,
    differing_days,
    inputs_digest,
    readings_digest,
)
from twinhub.oracle.monitoring import (
    DRAFT,
    FROZEN,
    ISSUED,
    REJECTED,
    SUBMITTED,
    VERIFIED,
    MonitoringService,
    period_view,
)
from twinhub.security.jcs import digest
from twinhub.services import claim_issuance
from twinhub.services.credentials import steps, store_step
from twinhub.services.credited_days import DayCredited, release, reserve
from twinhub.services.credits import Minting
from twinhub.services.domains import verified_project
from twinhub.services.evidence import hold_evidence, receipts_by_id, release_evidence
from twinhub.services.ledger import Ledger
from twinhub.services.mrv_inputs import stove_periods, stove_readings
from twinhub.services.project_documents import ProjectDocuments, checked

LEDGER_KINDS = {
    chain.SUBMISSION: "period.submit",
    chain.VERIFICATION: "period.verify",
    chain.ISSUANCE: "period.issue",
}
STEPS = {
    "submission": chain.SUBMISSION,
    "verification": chain.VERIFICATION,
    "issuance": chain.ISSUANCE,
}


def credit_late_data(methodology: dict[str, Any]) -> bool:
    """Whether the methodology lets a later period credit late data: its `creditLateData`
    rule (a flag, 1 or true; the `rules` section, or older documents' parameters); false
    when it says nothing."""
    given: Any = None
    for section in ("rules", "parameters"):
        entry = (methodology.get(section) or {}).get("creditLateData")
        if entry is not None:
            given = entry.get("value") if isinstance(entry, dict) else entry
            break
    return given is True or (type(given) in (int, float) and given == 1)


def _holder(row: MonitoringPeriod) -> str:
    """Who holds the period's evidence (services.evidence)."""
    return f"monitoring-period:{row.id}"


def _ref(row: MonitoringPeriod) -> dict[str, Any]:
    return chain.period_ref(row.id, row.start.isoformat(), row.end.isoformat())


def _frozen(row: MonitoringPeriod) -> dict[str, Any]:
    assert row.inputs is not None
    return orjson.loads(row.inputs)


class PeriodWorkflow:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        ledger: Ledger,
        monitoring: MonitoringService,
        documents: ProjectDocuments,
        evidence_years: int = 0,
    ) -> None:
        self._sessions = sessions
        self._ledger = ledger
        self._monitoring = monitoring
        self._documents = documents
        self._evidence_years = evidence_years  # EVIDENCE_RETENTION_YEARS

    # -- the unsigned credential of a step -----------------------------------------------
    async def credential_request(
        self, project: str, period_id: int, step: str, verdict: dict[str, Any], actor: Principal
    ) -> dict[str, Any]:
        """What the caller signs for `step` (submission, verification, issuance)."""
        kind = STEPS.get(step)
        if kind is None:
            raise Invalid("Unknown step.", [FieldProblem("step", ", ".join(STEPS))])
        async with self._sessions() as session:
            row = await self._monitoring.row(session, project, period_id)
            subject = await self._expected(session, row, kind, actor, verdict)
        return chain.unsigned_credential(kind, actor.did, subject, utcnow())

    async def _expected(
        self,
        session: AsyncSession,
        row: MonitoringPeriod,
        kind: str,
        actor: Principal,
        verdict: dict[str, Any],
    ) -> dict[str, Any]:
        """The subject the step must say, every rule of the step checked (raises)."""
        project = row.project_did
        if kind == chain.SUBMISSION:
            require_workflow_role(actor, "proponent")
            domain = await verified_project(
                session, project, "submit monitoring periods", purpose="periods are a project's"
            )
            if actor.did not in domain.controller:
                raise Forbidden(f"Only a controller of {project} submits its periods.")
            if row.state != DRAFT:
                raise Conflict(
                    f"Monitoring period {row.id} is {row.state}; only a draft is submitted."
                )
            validation = await self._documents.issuance_blockers(session, project)
            computed_under = _frozen(row).get("document")
            if computed_under is None or digest(computed_under) != validation.document_digest:
                raise Conflict(
                    f"Monitoring period {row.id} was computed under another project document "
                    "than the one validated (or none); recompute the draft first."
                )
            report = orjson.loads(row.report)
            claims = report.get("claims") or []
            if report["totals"]["included"] == 0 and not claims:
                raise Conflict(
                    f"Monitoring period {row.id} includes no stove: there is nothing to "
                    "submit (see its exclusions for why)."
                )
            if report["credits"]["amount"] < 1 and not claims:
                raise Conflict(f"Monitoring period {row.id} credits nothing: not submitted.")
            await claim_issuance.check_carried(session, claims, row.id)
            return chain.submission_subject(
                project,
                _ref(row),
                validation.digest,
                inputs_digest(_frozen(row)),
                digest(report),
                report["credits"],
            )
        if kind == chain.VERIFICATION:
            require_workflow_role(actor, "verifier")
            accreditation = await self._documents.accreditation_of(session, actor.did, project)
            if accreditation is None:
                raise Forbidden(f"{actor.did} is not accredited by the registry for {project}.")
            if actor.did == row.proponent:
                raise Forbidden("The proponent's own key cannot verify its period.")
            if row.state != SUBMITTED:
                raise Conflict(
                    f"Monitoring period {row.id} is {row.state}; only a submitted period is "
                    "verified."
                )
            submission = await self._last(session, row, chain.SUBMISSION)
            report = orjson.loads(row.report)
            stoves = {r["stove"] for r in report["stoves"] + report["exclusions"]}
            outcome = verdict.get("outcome")
            findings = verdict.get("findings", [])
            sampled = verdict.get("sampledStoves", [])
            problems = chain.verdict_problems(outcome, findings, sampled, stoves)
            if problems:
                raise Invalid("The verification is invalid.", problems)
            return chain.verification_subject(
                project,
                _ref(row),
                submission.digest or "",
                accreditation.digest or "",
                outcome,
                findings,
                sampled,
            )
        require_workflow_role(actor, "registry")
        if row.state != VERIFIED:
            raise Conflict(
                f"Monitoring period {row.id} is {row.state}; only a verified period is issued"
                + (" (it was issued already)." if row.state == ISSUED else ".")
            )
        await self._documents.issuance_blockers(session, project)
        verification = await self._last(session, row, chain.VERIFICATION)
        report = orjson.loads(row.report)
        assert row.proponent is not None
        return chain.issuance_subject(
            project,
            _ref(row),
            verification.digest or "",
            report["credits"],
            row.proponent,
            report.get("claims"),
        )

    # -- the steps -----------------------------------------------------------------------
    async def submit(
        self, project: str, period_id: int, credential: Any, actor: Principal
    ) -> dict[str, Any]:
        return await self._step(project, period_id, chain.SUBMISSION, credential, actor)

    async def verify(
        self, project: str, period_id: int, credential: Any, actor: Principal
    ) -> dict[str, Any]:
        return await self._step(project, period_id, chain.VERIFICATION, credential, actor)

    async def issue(
        self, project: str, period_id: int, credential: Any, actor: Principal
    ) -> dict[str, Any]:
        return await self._step(project, period_id, chain.ISSUANCE, credential, actor)

    async def _step(
        self, project: str, period_id: int, kind: str, credential: Any, actor: Principal
    ) -> dict[str, Any]:
        subject = credential.get("credentialSubject") if isinstance(credential, dict) else None
        verdict = subject if isinstance(subject, dict) else {}
        async with self._sessions() as session:  # every check before the turn: cheap refusals
            row = await self._monitoring.row(session, project, period_id)
            expected = await self._expected(session, row, kind, actor, verdict)
        self._check(credential, kind, actor, expected)
        async with self._ledger.write() as write:
            session = write.session
            row = await self._monitoring.row(session, project, period_id, lock=True)
            # Again under the turn: a concurrent step may have moved the period on.
            if await self._expected(session, row, kind, actor, verdict) != expected:
                raise Conflict(f"Monitoring period {period_id} changed meanwhile; sign again.")
            now = utcnow()
            found = await store_step(session, credential, kind, project, now, row.id)
            await self._apply(write, row, kind, verdict, actor)
            row.updated_at = now
            await write.append(
                LEDGER_KINDS[kind],
                project,
                actor.did,
                {"period": row.id, "digest": found, "state": row.state},
            )
            await session.flush()
            return {**period_view(row), "credential": found}

    async def _apply(
        self,
        write: Any,
        row: MonitoringPeriod,
        kind: str,
        verdict: dict[str, Any],
        actor: Principal,
    ) -> None:
        session = write.session
        if kind == chain.SUBMISSION:
            frozen = _frozen(row)
            report = orjson.loads(row.report)
            included = {r["stove"] for r in report["stoves"]}
            devices = {s["stove"]: s["device"] for s in frozen["stoves"] if s["stove"] in included}
            # A stove's claim approved since the draft was computed (approvals check
            # submitted periods under the turn; this is the other half).
            raced = await self._monitoring.credited(
                session, row.project_did, sorted(included), row.start, row.end
            )
            if raced:
                stove, claim = min(raced.items())
                raise DayCredited(
                    f"Claim {claim} credited {stove} for days of this period since the draft "
                    "was computed; recompute the draft (it will leave the stove out).",
                    [FieldProblem(stove, f"claim {claim}")],
                )
            await reserve(session, devices, row.start, row.end, row.project_did, period_id=row.id)
            await claim_issuance.carry(session, report.get("claims") or [], row.id)
            # The readings behind the period outlive the telemetry retention.
            validation = await self._documents.issuance_blockers(session, row.project_did)
            await hold_evidence(
                session,
                _holder(row),
                [s["stove"] for s in frozen["stoves"] if s["days"]],
                row.start,
                row.end,
                checked(validation.document).crediting_to,
                self._evidence_years,
            )
            row.state, row.proponent = SUBMITTED, actor.did
        elif kind == chain.VERIFICATION:
            outcome = verdict["outcome"]
            kept = orjson.loads(row.findings) if row.findings else []
            kept.append(
                {
                    "verifier": actor.did,
                    "outcome": outcome,
                    "findings": verdict["findings"],
                    "sampledStoves": verdict["sampledStoves"],
                    "at": utcnow().isoformat(),
                }
            )
            row.findings = orjson.dumps(kept).decode()
            if outcome == chain.APPROVED:
                row.state = VERIFIED
            else:
                await release(session, row.id)
                await claim_issuance.release(session, row.id)
                await release_evidence(session, _holder(row))
                row.state = REJECTED if outcome == chain.REJECTED else DRAFT
        else:
            report = orjson.loads(row.report)
            credits = report["credits"]
            frozen = _frozen(row)
            minting = Minting(write)
            assert row.proponent is not None
            if credits["amount"] > 0:  # a period may carry claims alone
                await minting.add(
                    credits["token"],
                    frozen["protocol"],
                    row.proponent,
                    credits["amount"],
                    f"monitoring-period:{row.id}",
                    actor.did,
                    decimals=credits["decimals"],
                )
            await claim_issuance.issue(
                write, minting, report.get("claims") or [], row.id, actor.did, utcnow()
            )
            await minting.finish()
            row.state = ISSUED

    @staticmethod
    def _check(credential: Any, kind: str, actor: Principal, subject: dict[str, Any]) -> None:
        problems = chain.credential_problems(credential, kind, actor.did, subject)
        if problems:
            raise Invalid(f"The {kind} is not the one expected.", problems)

    @staticmethod
    async def _last(session: AsyncSession, row: MonitoringPeriod, kind: str) -> Credential:
        found = await steps(session, row.project_did, kind, row.id)
        if not found:
            raise Conflict(f"Monitoring period {row.id} has no {kind}.")
        return found[-1]

    # -- what the verifier and the auditor read ---------------------------------------------
    async def chain(self, project: str, period_id: int) -> list[dict[str, Any]]:
        """The period's step credentials, oldest first, exactly as signed."""
        async with self._sessions() as session:
            await self._monitoring.row(session, project, period_id)
            return [
                orjson.loads(r.document) for r in await steps(session, project, None, period_id)
            ]

    async def readings(self, project: str, period_id: int, stove: str) -> dict[str, Any]:
        """A stove's raw readings over the period, with the figures and digests frozen for
        each day (a verifier opens them for every sampled stove)."""
        async with self._sessions() as session:
            row = await self._monitoring.row(session, project, period_id)
            if row.inputs is None:
                raise Conflict(f"Monitoring period {period_id} has no inputs snapshot.")
            frozen = _frozen(row)
            found = next((s for s in frozen["stoves"] if s["stove"] == stove), None)
            if found is None:
                raise NotFound(f"{stove} is not a stove of monitoring period {period_id}.")
            readings = (await stove_readings(session, [stove], row.start, row.end))[stove]
        return {"stove": stove, "period": _ref(row), "days": found["days"], "readings": readings}

    async def late_data(self, project: str, period_id: int) -> dict[str, Any]:
        """What arrived for the period's days after its inputs froze: each day whose figures
        or readings differ from the snapshot. Reported, never folded into the period; the
        methodology's `creditLateData` (default false) says if a later period may credit
        them."""
        async with read_snapshot(self._sessions) as session:  # today's figures and readings
            row = await self._monitoring.row(session, project, period_id)
            if row.state not in FROZEN or row.inputs is None:
                return {
                    "period": _ref(row),
                    "state": row.state,
                    "late": [],
                    "creditLateData": False,
                }
            frozen = _frozen(row)
            dids = [s["stove"] for s in frozen["stoves"]]
            reading = methodology_of(frozen["methodology"]).reading
            now = {
                p.stove: p for p in await stove_periods(session, dids, row.start, row.end, reading)
            }
            readings = await stove_readings(session, dids, row.start, row.end)
        late = []
        for stove in frozen["stoves"]:
            for day, field, then, today in differing_days(stove, now[stove["stove"]].days):
                late.append(
                    {
                        "stove": stove["stove"],
                        "day": day,
                        "field": field,
                        "frozen": then,
                        "now": today,
                    }
                )
            by_day: dict[str, list[dict[str, Any]]] = {}
            for reading in readings.get(stove["stove"], []):
                by_day.setdefault(reading["time"][:10], []).append(reading)
            for figures in stove["days"]:
                rows = by_day.get(figures["day"], [])
                if figures.get("readings") and readings_digest(rows) != figures["readings"]:
                    late.append(
                        {
                            "stove": stove["stove"],
                            "day": figures["day"],
                            "field": "readings",
                            "frozen": figures["readings"],
                            "now": readings_digest(rows),
                        }
                    )
        allowed = credit_late_data(frozen["methodology"])
        return {"period": _ref(row), "state": row.state, "late": late, "creditLateData": allowed}

    async def evidence(self, project: str, period_id: int) -> dict[str, Any]:
        """Everything an auditor needs to recompute and check the period with no database:
        the project document and its validation (and the accreditations behind them), the
        methodology, the frozen inputs, the readings behind them, the report and the chain
        of signed steps with the DIDs that signed them."""
        async with self._sessions() as session:
            row = await self._monitoring.row(session, project, period_id)
            if row.state not in FROZEN or row.inputs is None:
                raise Conflict(
                    f"Monitoring period {period_id} is {row.state}: its evidence is bundled once "
                    "it is submitted."
                )
            frozen = _frozen(row)
            credentials = [
                orjson.loads(r.document) for r in await steps(session, project, None, period_id)
            ]
            submitted = [c for c in credentials if c["type"][1] == chain.SUBMISSION]
            validation = await self._documents.validation_named(
                session, project, submitted[-1]["credentialSubject"]["validation"]
            )
            accreditations = [
                orjson.loads(r.document) for r in await steps(session, project, chain.ACCREDITATION)
            ]
            rows_of = {s["stove"]: s for s in frozen["stoves"] if s["days"]}
            stored = await stove_readings(session, list(rows_of), row.start, row.end)
            # The readings the snapshot saw; the others are late data.
            readings = {
                stove: behind(rows_of[stove], rows, frozen.get("takenAt"))
                for stove, rows in stored.items()
            }
            late = {
                stove: [r for r in rows if r not in readings[stove]]
                for stove, rows in stored.items()
            }
            report = orjson.loads(row.report)
            carried = report.get("claims") or []
            claims = await claim_issuance.credentials_of(session, [c["claim"] for c in carried])
            # What each carried claim's figure is recomputed from (its inputs, methodology
            # and readings), beside the oracle's signed credential of it.
            recompute = await claim_issuance.evidence_of(
                session, carried, self._monitoring.protocols
            )
            receipts = await receipts_by_id(
                session,
                {
                    r["receipt"]
                    for rows in [
                        *readings.values(),
                        *recompute.get("claimReadings", {}).values(),
                    ]
                    for r in rows
                    if r.get("receipt")
                },
            )
        dids: dict[str, list[str]] = {}
        for credential in [*accreditations, *credentials] + (
            [validation.credential] if validation else []
        ):
            role = {
                chain.ACCREDITATION: "registry",
                chain.VALIDATION: "verifier",
                chain.SUBMISSION: "proponent",
                chain.VERIFICATION: "verifier",
                chain.ISSUANCE: "registry",
            }[credential["type"][1]]
            roles = dids.setdefault(credential["issuer"], [])
            if role not in roles:
                roles.append(role)
        bundle = {
            "bundle": "twinhub-evidence/1",
            "project": project,
            "period": {**_ref(row), "state": row.state},
            "projectDocument": {
                "digest": validation.document_digest,
                "document": validation.document,
            }
            if validation
            else None,
            "validation": validation.credential if validation else None,
            "accreditations": accreditations,
            "methodology": frozen["methodology"],
            "frozenInputs": frozen,
            "readings": readings,
            "receipts": receipts,  # the signed batches and messages the readings came in
            "signedReadings": sum(1 for rows in readings.values() for r in rows if r["receipt"]),
            "lateReadings": {stove: rows for stove, rows in late.items() if rows},
            "report": report,
            "chain": credentials,
            "dids": dids,
        }
        if claims:  # the oracle's signed credential of each claim the period carries
            bundle["claimCredentials"] = claims
        bundle.update(recompute)  # and what its figure is recomputed from (when it carries)
        return bundle
