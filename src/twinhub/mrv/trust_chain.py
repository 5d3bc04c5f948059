"""The trust chain of a credit: each step of the verification workflow is a verifiable
credential signed by the acting role's own key, naming the digest of the step before.

    accreditation (registry -> verifier, for a project)
    validation (verifier: the project document's digest, its accreditation's)
    submission (proponent: the validation's digest, the frozen inputs' and report's)
    verification (verifier: the submission's digest; approved | rejected | corrections)
    issuance (registry: the verification's digest, the credits, the recipient)

Pure: what each step's subject must say is fixed here (the server builds the unsigned
credential for a client to sign with these functions, and checks what comes back against
them; `verify-evidence` checks a bundle's chain with them, offline). Digests are SHA-256
over RFC 8785 (JCS) canonical JSON of the credential as signed, proof included.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from twinhub.kernel.errors import FieldProblem
from twinhub.security.jcs import CanonicalizationError, digest
from twinhub.security.signing import verify

CONTEXT = "https://www.w3.org/ns/credentials/v2"
ACCREDITATION = "VerifierAccreditationCredential"
VALIDATION = "ProjectValidationCredential"
SUBMISSION = "MonitoringSubmissionCredential"
VERIFICATION = "MonitoringVerificationCredential"
ISSUANCE = "CreditIssuanceCredential"
KINDS = (ACCREDITATION, VALIDATION, SUBMISSION, VERIFICATION, ISSUANCE)
APPROVED, REJECTED, CORRECTIONS = "approved", "rejected", "corrections"
OUTCOMES = (APPROVED, REJECTED, CORRECTIONS)
MAX_FINDINGS = 200
MAX_FINDING_LENGTH = 2000


def rfc3339(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def unsigned_credential(
    kind: str, issuer: str, subject: dict[str, Any], at: datetime
) -> dict[str, Any]:
    """The credential an actor signs (security.signing.Issuer.sign) and posts back."""
    return {
        "@context": [CONTEXT],
        "id": f"urn:uuid:{uuid.uuid4()}",
        "type": ["VerifiableCredential", kind],
        "issuer": issuer,
        "validFrom": rfc3339(at),
        "credentialSubject": subject,
    }


def credential_digest(credential: dict[str, Any]) -> str:
    return digest(credential)


def period_ref(period_id: int, start: str, end: str) -> dict[str, Any]:
    return {"id": period_id, "from": start, "to": end}


def accreditation_subject(verifier: str, project: str) -> dict[str, Any]:
    return {"id": verifier, "project": project, "scope": "validation and verification"}


def validation_subject(
    project: str, document_digest: str, accreditation_digest: str
) -> dict[str, Any]:
    return {
        "id": project,
        "projectDocument": document_digest,
        "accreditation": accreditation_digest,
        "outcome": APPROVED,
    }


def submission_subject(
    project: str,
    period: dict[str, Any],
    validation_digest: str,
    inputs_digest: str,
    report_digest: str,
    credits: dict[str, Any],
) -> dict[str, Any]:
    return {
        "id": project,
        "period": period,
        "validation": validation_digest,
        "frozenInputs": inputs_digest,
        "report": report_digest,
        "credits": credits,
    }


def verification_subject(
    project: str,
    period: dict[str, Any],
    submission_digest: str,
    accreditation_digest: str,
    outcome: str,
    findings: Sequence[str],
    sampled: Sequence[str],
) -> dict[str, Any]:
    return {
        "id": project,
        "period": period,
        "submission": submission_digest,
        "accreditation": accreditation_digest,
        "outcome": outcome,
        "findings": list(findings),
        "sampledStoves": list(sampled),
    }


def issuance_subject(
    project: str,
    period: dict[str, Any],
    verification_digest: str,
    credits: dict[str, Any],
    recipient: str,
    claims: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """`claims`: the approved claims the period carries (its report's `claims`), each
    issued to its own recipient; a key only when there are some."""
    subject = {
        "id": project,
        "period": period,
        "verification": verification_digest,
        "credits": credits,
        "recipient": recipient,
    }
    if claims:
        subject["claims"] = issued_claims(claims)
    return subject


def issued_claims(claims: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What an issuance says of each carried claim: who receives how many of which token,
    and the oracle credential the figure comes from."""
    return [
        {
            "claim": claim["claim"],
            "recipient": claim["owner"],
            "token": claim["token"],
            "decimals": claim["decimals"],
            "amount": claim["amount"],
            "credential": claim["credential"],
        }
        for claim in claims
    ]


def verdict_problems(
    outcome: Any, findings: Any, sampled: Any, stoves: set[str], where: str = ""
) -> list[FieldProblem]:
    """A verifier's verdict: an outcome, findings (text; one at least unless approved) and
    the stoves sampled (stoves of the period; one at least for an approval)."""
    problems = []
    if outcome not in OUTCOMES:
        problems.append(FieldProblem(f"{where}outcome", f"one of {', '.join(OUTCOMES)}"))
    if not isinstance(findings, list) or len(findings) > MAX_FINDINGS:
        problems.append(FieldProblem(f"{where}findings", f"a list of at most {MAX_FINDINGS}"))
    else:
        for index, finding in enumerate(findings):
            if not isinstance(finding, str) or not 1 <= len(finding.strip()) <= MAX_FINDING_LENGTH:
                problems.append(
                    FieldProblem(
                        f"{where}findings[{index}]", f"text of 1 to {MAX_FINDING_LENGTH} characters"
                    )
                )
        if outcome in (REJECTED, CORRECTIONS) and not findings:
            problems.append(FieldProblem(f"{where}findings", f"a {outcome} verdict says why"))
    if not isinstance(sampled, list) or not all(isinstance(s, str) for s in sampled):
        problems.append(FieldProblem(f"{where}sampledStoves", "a list of stove DIDs"))
    else:
        for index, stove in enumerate(sampled):
            if stove not in stoves:
                problems.append(
                    FieldProblem(f"{where}sampledStoves[{index}]", f"{stove} is not in the period")
                )
        if len(set(sampled)) != len(sampled):
            problems.append(FieldProblem(f"{where}sampledStoves", "a stove is named twice"))
        if outcome == APPROVED and not sampled:
            problems.append(
                FieldProblem(f"{where}sampledStoves", "an approval names the stoves sampled")
            )
    return problems


def credential_problems(
    credential: Any,
    kind: str,
    issuer: str | None,
    subject: dict[str, Any] | None,
    where: str = "credential",
) -> list[FieldProblem]:
    """Why `credential` is not the `kind` step `issuer` signed saying exactly `subject`
    (None: any issuer, any subject); empty when it is. The signature is checked first: a
    changed byte anywhere fails it."""
    if not isinstance(credential, dict):
        return [FieldProblem(where, "expected a signed credential (a JSON object)")]
    try:
        result = verify(credential)
    except (CanonicalizationError, TypeError, ValueError) as error:
        return [FieldProblem(f"{where}.proof", f"the credential cannot be checked: {error}")]
    if not result.verified:
        return [FieldProblem(f"{where}.proof", result.problem or "the proof does not verify")]
    problems = []
    if credential.get("type") != ["VerifiableCredential", kind]:
        problems.append(FieldProblem(f"{where}.type", f'["VerifiableCredential", "{kind}"]'))
    if issuer is not None and result.issuer != issuer:
        problems.append(
            FieldProblem(f"{where}.issuer", f"signed by {result.issuer}; expected {issuer}")
        )
    given = credential.get("credentialSubject")
    if subject is not None and given != subject:
        if not isinstance(given, dict):
            problems.append(FieldProblem(f"{where}.credentialSubject", "expected an object"))
        else:
            for key in sorted(set(subject) | set(given)):
                if given.get(key) != subject.get(key):
                    problems.append(
                        FieldProblem(
                            f"{where}.credentialSubject.{key}",
                            f"expected {subject.get(key)!r}, the credential says "
                            f"{given.get(key)!r}",
                        )
                    )
    valid_from = credential.get("validFrom")
    try:
        datetime.fromisoformat(str(valid_from).replace("Z", "+00:00"))
    except ValueError:
        problems.append(FieldProblem(f"{where}.validFrom", "an RFC 3339 time"))
    return problems
