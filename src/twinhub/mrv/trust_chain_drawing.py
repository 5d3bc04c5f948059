"""The trust chain as people read it: each signed step with who signed it, when, whether
its signature verifies, and each digest it names with whether that digest is one of the
chain's (the link holds) or not (a broken link, shown as such).

Pure: the console and anyone else hand it the credentials (exactly as signed) and the
digests of the documents they name (project document, frozen inputs, report); what each
kind of step names is fixed here, next to mrv.trust_chain which fixes what it must say.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from twinhub.mrv import trust_chain as chain
from twinhub.mrv.retirement_certificate import RETIREMENT
from twinhub.security.jcs import CanonicalizationError, digest
from twinhub.security.signing import verify

STEPS: dict[str, tuple[str, str]] = {  # kind -> (the step's name, the role that signs it)
    chain.ACCREDITATION: ("Accreditation", "registry"),
    chain.VALIDATION: ("PDD validation", "verifier"),
    chain.SUBMISSION: ("Submission", "proponent"),
    chain.VERIFICATION: ("Verification", "verifier"),
    chain.ISSUANCE: ("Issuance", "registry"),
    RETIREMENT: ("Retirement", "platform (the ledger that recorded it)"),
}
NAMES: dict[str, tuple[tuple[str, str], ...]] = {  # kind -> (subject field, what it names)
    chain.ACCREDITATION: (),
    chain.VALIDATION: (("projectDocument", "project document"), ("accreditation", "accreditation")),
    chain.SUBMISSION: (
        ("validation", "validation"),
        ("frozenInputs", "frozen inputs"),
        ("report", "report"),
    ),
    chain.VERIFICATION: (("submission", "submission"), ("accreditation", "accreditation")),
    chain.ISSUANCE: (("verification", "verification"),),
}


def _kind(credential: Mapping[str, Any]) -> str:
    kinds = credential.get("type")
    return str(kinds[-1]) if isinstance(kinds, list) and kinds else ""


def named_digests(credential: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(what, digest) for every earlier document the credential names."""
    subject = credential.get("credentialSubject")
    if not isinstance(subject, dict):
        return []
    kind = _kind(credential)
    if kind == RETIREMENT:
        found = []
        for source in subject.get("sources") or []:
            cited = source.get("credential") if isinstance(source, dict) else None
            if isinstance(cited, dict) and isinstance(cited.get("digest"), str):
                what = "issuance" if cited.get("type") == chain.ISSUANCE else "claim's credential"
                found.append((what, cited["digest"]))
        return found
    return [
        (what, subject[field])
        for field, what in NAMES.get(kind, ())
        if isinstance(subject.get(field), str)
    ]


def draw(
    credentials: Iterable[Mapping[str, Any]], documents: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """The steps in the order given; `documents`: digest -> what it is, for the named
    documents that are not credentials (project document, frozen inputs, report)."""
    given = list(credentials)
    known: dict[str, str] = dict(documents or {})
    digests = []
    for credential in given:
        try:
            found = digest(credential)
        except (CanonicalizationError, TypeError, ValueError):
            found = ""
        digests.append(found)
        known.setdefault(found, STEPS.get(_kind(credential), ("Credential", ""))[0])
    steps = []
    for credential, found in zip(given, digests, strict=True):
        kind = _kind(credential)
        name, role = STEPS.get(kind, (kind or "Credential", "unknown"))
        try:
            result = verify(dict(credential))
            verified, problem = result.verified, result.problem
        except (CanonicalizationError, TypeError, ValueError) as error:
            verified, problem = False, str(error)
        subject = credential.get("credentialSubject")
        subject = subject if isinstance(subject, dict) else {}
        steps.append(
            {
                "step": name,
                "kind": kind,
                "role": role,
                "id": credential.get("id"),
                "issuer": credential.get("issuer"),
                "at": credential.get("validFrom"),
                "digest": found,
                "verified": verified,
                "problem": problem,
                "outcome": subject.get("outcome"),
                "names": [
                    {"what": what, "digest": cited, "linked": cited in known}
                    for what, cited in named_digests(credential)
                ],
            }
        )
    return steps
