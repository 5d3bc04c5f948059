"""Checking a monitoring period's evidence bundle from the bundle alone: no database, no
network (`twinhub oracle verify-evidence`).

It checks every signature and the chain of digests (accreditation <- validation <-
submission <- verification <- issuance), the project document against its validation,
the frozen inputs and the report against the submission, the raw readings against the
digests and the day figures the inputs froze, and recomputes every credit from the frozen
inputs with the same code that made them (mrv.period_inputs.report_of). Each difference is
named: the field, the stove, both values.

The approved claims a period carries to issuance (the report's `claims`) are checked
against the oracle's signed credential of each (`claimCredentials`): the signature, the
digest the report names, the claim, its days and its figure, and the issuance's line for
it. Each figure is then recomputed from what the approval computed it from
(`claimInputs`: the stove's facts and day figures; `claimMethodologies`: the methodology
documents by digest) by the oracle's own rule, compared field by field with the signed
calculation, and those day figures are recomputed from the stove's raw readings
(`claimReadings`, received by the approval), as a period's are.
"""

from __future__ import annotations

import json
from datetime import date
from typing import Any

from twinhub.mrv import trust_chain as chain
from twinhub.mrv.claims import NotComputable, methodology_of
from twinhub.mrv.meter import METER_READING, Reading
from twinhub.mrv.period_inputs import (
    claim_recomputed,
    differing_days,
    figures_from_readings,
    inputs_digest,
    readings_digest,
    report_of,
    seen_ranges,
)
from twinhub.mrv.periods import report_digest
from twinhub.security.device_signatures import SCHEME, verify_batch
from twinhub.security.jcs import CanonicalizationError, digest
from twinhub.security.signing import verify

BUNDLE = "twinhub-evidence/1"


def _signed(credential: Any, kind: str, name: str, out: list[str]) -> bool:
    problems = chain.credential_problems(credential, kind, None, None, where=name)
    out.extend(f"{p.field}: {p.error}" for p in problems)
    return not problems


def _subject(credential: Any) -> dict[str, Any]:
    subject = credential.get("credentialSubject") if isinstance(credential, dict) else None
    return subject if isinstance(subject, dict) else {}


def _last(credentials: list[Any], kind: str) -> Any:
    found = [
        c
        for c in credentials
        if isinstance(c, dict) and c.get("type") == ["VerifiableCredential", kind]
    ]
    return found[-1] if found else None


def verify_bundle(bundle: Any) -> list[str]:
    """Every difference found in the bundle; empty when everything checks."""
    if not isinstance(bundle, dict) or bundle.get("bundle") != BUNDLE:
        return [f"not an evidence bundle ({BUNDLE})"]
    out: list[str] = []
    try:
        _check_chain(bundle, out)
        _check_inputs(bundle, out)
        _check_claims(bundle, out)
    except (KeyError, TypeError, ValueError, AttributeError, CanonicalizationError) as error:
        out.append(f"the bundle is malformed: {error!r}")
    return out


def _check_chain(bundle: dict[str, Any], out: list[str]) -> None:
    project = bundle["project"]
    steps = bundle.get("chain") or []
    accreditations = bundle.get("accreditations") or []
    validation = bundle.get("validation")
    document = bundle.get("projectDocument") or {}
    submission = _last(steps, chain.SUBMISSION)
    verification = _last(steps, chain.VERIFICATION)
    issuance = _last(steps, chain.ISSUANCE)
    if submission is None:
        out.append("chain: no submission credential")
        return
    for index, credential in enumerate(accreditations):
        _signed(credential, chain.ACCREDITATION, f"accreditations[{index}]", out)
    by_digest = {digest(c): c for c in accreditations if isinstance(c, dict)}
    # The project document and its validation.
    if validation is None or not _signed(validation, chain.VALIDATION, "validation", out):
        out.append("validation: the project's validation is missing or does not verify")
    else:
        found = digest(document.get("document"))
        named = _subject(validation).get("projectDocument")
        if found != named:
            out.append(f"projectDocument: digest {found}, the validation names {named}")
        accreditation = by_digest.get(_subject(validation).get("accreditation"))
        if accreditation is None:
            out.append("validation.accreditation: names no accreditation in the bundle")
        elif _subject(accreditation).get("id") != validation.get("issuer") or (
            _subject(accreditation).get("project") != project
        ):
            out.append("validation: its issuer is not the verifier accredited for the project")
        if _subject(submission).get("validation") != digest(validation):
            out.append(
                f"submission.validation: names {_subject(submission).get('validation')}, the "
                f"validation's digest is {digest(validation)}"
            )
    _signed(submission, chain.SUBMISSION, "submission", out)
    frozen, report = bundle["frozenInputs"], bundle["report"]
    for field, found in (("frozenInputs", inputs_digest(frozen)), ("report", digest(report))):
        named = _subject(submission).get(field)
        if named != found:
            out.append(f"submission.{field}: names {named}, the bundle's digest is {found}")
    if verification is None:
        out.append("chain: no verification credential")
        return
    _signed(verification, chain.VERIFICATION, "verification", out)
    subject = _subject(verification)
    if subject.get("submission") != digest(submission):
        out.append(
            f"verification.submission: names {subject.get('submission')}, the submission's "
            f"digest is {digest(submission)}"
        )
    if subject.get("outcome") != chain.APPROVED:
        out.append(f"verification.outcome: {subject.get('outcome')!r}, not approved")
    accreditation = by_digest.get(subject.get("accreditation"))
    if accreditation is None or _subject(accreditation).get("id") != verification.get("issuer"):
        out.append("verification: its issuer is not a verifier accredited in the bundle")
    if verification.get("issuer") == submission.get("issuer"):
        out.append("verification: signed by the proponent's own key")
    if issuance is None:
        out.append("chain: no issuance credential")
        return
    _signed(issuance, chain.ISSUANCE, "issuance", out)
    subject = _subject(issuance)
    if subject.get("verification") != digest(verification):
        out.append(
            f"issuance.verification: names {subject.get('verification')}, the verification's "
            f"digest is {digest(verification)}"
        )
    if subject.get("credits") != report.get("credits"):
        out.append(
            f"issuance.credits: {subject.get('credits')!r}, the report says "
            f"{report.get('credits')!r}"
        )
    if subject.get("recipient") != submission.get("issuer"):
        out.append(
            f"issuance.recipient: {subject.get('recipient')}, the proponent is "
            f"{submission.get('issuer')}"
        )
    if subject.get("claims") != (
        chain.issued_claims(report["claims"]) if report.get("claims") else None
    ):
        out.append(
            f"issuance.claims: {subject.get('claims')!r}, the report carries "
            f"{report.get('claims')!r}"
        )
    registries = {c.get("issuer") for c in accreditations if isinstance(c, dict)}
    if issuance.get("issuer") not in registries:
        out.append("issuance: its issuer is not the registry that accredited the verifier")


def _check_claims(bundle: dict[str, Any], out: list[str]) -> None:
    """Each carried claim against the oracle's signed credential of it."""
    report = bundle["report"]
    period = report["period"]
    credentials = {digest(c): c for c in bundle.get("claimCredentials") or []}
    included = {r["stove"] for r in report.get("stoves", [])}
    for entry in report.get("claims") or []:
        name = f"claims[{entry['claim']}]"
        credential = credentials.get(entry["credential"])
        if credential is None:
            out.append(f"{name}: the bundle has no credential of digest {entry['credential']}")
            continue
        result = verify(credential)
        if not result.verified:
            out.append(f"{name}: its credential does not verify ({result.problem})")
        subject = _subject(credential)
        claim = subject.get("claim") or {}
        evaluation = subject.get("evaluation") or {}
        calculation = evaluation.get("calculation") or {}
        expected = {
            "claim": entry["claim"],
            "project": bundle["project"],
            "status": "approved",
            "amount": entry["amount"],
            "token": entry["token"],
            "decimals": entry["decimals"],
            "from": entry["from"],
            "to": entry["to"],
            "calculated": entry["amount"],
        }
        given = {
            "claim": claim.get("id"),
            "project": claim.get("project"),
            "status": evaluation.get("status"),
            "amount": evaluation.get("amount"),
            "token": evaluation.get("tokenClass"),
            "decimals": evaluation.get("decimals"),
            "from": (calculation.get("period") or {}).get("from"),
            "to": (calculation.get("period") or {}).get("to"),
            "calculated": (calculation.get("credits") or {}).get("amount"),
        }
        for field, value in expected.items():
            if given[field] != value:
                out.append(
                    f"{name} {field}: the report says {value!r}, its credential {given[field]!r}"
                )
        _recompute_claim(bundle, entry, calculation, out)
        if entry["to"] > period["to"]:
            out.append(f"{name}: its last day {entry['to']} is after the period's end")
        if (
            entry.get("stove") in included
            and entry["from"] <= period["to"]
            and (period["from"] <= entry["to"])
        ):
            out.append(f"{name}: {entry['stove']} is credited by the period too (double counting)")


def _recompute_claim(
    bundle: dict[str, Any], entry: dict[str, Any], calculation: dict[str, Any], out: list[str]
) -> None:
    """A carried claim's figure recomputed from its kept inputs (`claimInputs`) by the
    oracle's own rule (mrv.period_inputs.claim_recomputed), field by field against the
    calculation the oracle signed; and those inputs against the stove's readings
    (`claimReadings`)."""
    name = f"claims[{entry['claim']}] {entry.get('stove')}"
    inputs = (bundle.get("claimInputs") or {}).get(entry["claim"])
    if inputs is None:
        out.append(f"{name}: the bundle has no inputs to recompute its figure from")
        return
    if inputs.get("stove") != entry.get("stove"):
        out.append(f"{name} stove: the inputs are {inputs.get('stove')!r}'s")
    named = (calculation.get("methodology") or {}).get("digest")
    methodology = (bundle.get("claimMethodologies") or {}).get(named)
    if methodology is None:
        out.append(f"{name} methodology: the bundle has no document of digest {named}")
        return
    result = claim_recomputed(
        inputs,
        methodology,
        bundle["project"],
        entry["token"],
        entry["decimals"],
        date.fromisoformat(entry["from"]),
        date.fromisoformat(entry["to"]),
    )
    if isinstance(result, NotComputable):
        out.append(f"{name}: its inputs compute no credits ({result.reason})")
        return
    ours = result.calculation()
    for field in sorted(set(ours) | set(calculation)):
        if ours.get(field) != calculation.get(field):
            out.append(
                f"{name} {field}: its credential says {calculation.get(field)!r}, the inputs "
                f"give {ours.get(field)!r}"
            )
    if result.amount != entry["amount"]:
        out.append(
            f"{name} amount: the report says {entry['amount']!r}, the inputs give {result.amount!r}"
        )
    _check_readings(
        name,
        inputs,
        (bundle.get("claimReadings") or {}).get(entry["claim"], []),
        methodology_of(methodology).reading,
        out,
    )


def _check_receipts(bundle: dict[str, Any], out: list[str]) -> None:
    """Each device signature on a receipt verifies over its payload, and each reading that
    names a receipt is in that payload as the device sent it. (An MQTT HMAC is kept as
    proof of receipt; only the device and twinhub hold its key, so it is not checked here.)"""
    receipts = bundle.get("receipts") or {}
    carried: dict[str, list[Any]] = {}
    for key, receipt in receipts.items():
        try:
            payload = json.loads(receipt["payload"])
        except (TypeError, ValueError):
            out.append(f"receipts.{key}: the payload is not JSON")
            continue
        carried[key] = [
            {"seq": r.get("seq"), "values": r.get("values")}
            for r in (payload.get("readings") or [] if isinstance(payload, dict) else [])
        ]
        for signature in receipt.get("signatures") or []:
            if signature.get("type") != SCHEME:
                continue
            if not verify_batch(
                signature.get("publicKey", ""), payload, signature.get("value", "")
            ):
                out.append(f"receipts.{key}: the device signature does not verify")
    claims = bundle.get("claimReadings") or {}
    behind = [
        *(bundle.get("readings") or {}).items(),
        *((f"claims[{claim}]", rows) for claim, rows in claims.items()),
    ]
    for stove, rows in behind:
        for reading in rows:
            receipt = reading.get("receipt")
            if receipt is None:
                continue
            sent = carried.get(str(receipt))
            if sent is None:
                out.append(f"{stove} reading {reading['seq']}: its receipt {receipt} is missing")
            elif {"seq": reading["seq"], "values": reading["values"]} not in sent:
                out.append(
                    f"{stove} reading {reading['seq']}: not in receipt {receipt} as the device "
                    "sent it"
                )


def _check_readings(
    name: str, stove: dict[str, Any], rows: list[Any], rules: Reading, out: list[str]
) -> None:
    """A frozen stove row (a period's, or a claim's kept inputs) against the raw readings
    behind it: each day's readings digest where one was frozen, and the day figures the
    readings give (`name` prefixes each difference)."""
    by_day: dict[str, list[dict[str, Any]]] = {}
    for reading in rows:
        by_day.setdefault(str(reading["time"])[:10], []).append(reading)
    seen = stove.get("seen")
    if seen is not None:  # the readings it was read from, by sequence number
        for day in sorted(set(seen) | set(by_day)):
            carried = seen_ranges(r["seq"] for r in by_day.get(day, []))
            if carried != seen.get(day, []):
                out.append(
                    f"{name} {day} readings: read from sequence numbers {seen.get(day, [])}, "
                    f"the bundle carries {carried}"
                )
    for figures in stove["days"]:
        named = figures.get("readings")
        found = readings_digest(by_day.get(figures["day"], []))
        if named is not None and named != found:
            out.append(
                f"{name} {figures['day']} readings: frozen digest {named}, the bundle's "
                f"readings give {found}"
            )
    if stove["days"] or rows:
        for day, field, then, given in differing_days(
            stove,
            figures_from_readings(stove["stove"], stove["unit"], rows, stove.get("meter"), rules),
        ):
            out.append(f"{name} {day} {field}: frozen {then!r}, the readings give {given!r}")


def _check_inputs(bundle: dict[str, Any], out: list[str]) -> None:
    _check_receipts(bundle, out)
    frozen, report = bundle["frozenInputs"], bundle["report"]
    if report.get("reportDigest") != report_digest(report):
        out.append("report.reportDigest: does not match the report's content (it was edited)")
    readings = bundle.get("readings") or {}
    try:
        rules = methodology_of(frozen["methodology"]).reading
    except NotComputable:
        rules = METER_READING  # reported below, where the report is recomputed
    for stove in frozen["stoves"]:
        _check_readings(stove["stove"], stove, readings.get(stove["stove"], []), rules, out)
    try:
        recomputed = report_of(frozen)
    except NotComputable as error:
        out.append(f"methodology: {error.reason}")
        return
    for key in ("project", "period", "credits", "totals", "inputsDigest", "claims"):
        if report.get(key) != recomputed.get(key):
            out.append(
                f"report.{key}: the report says {report.get(key)!r}, the inputs give "
                f"{recomputed.get(key)!r}"
            )
    theirs = {r["stove"]: r for r in report.get("stoves", [])}
    ours = {r["stove"]: r for r in recomputed["stoves"]}
    for stove in sorted(set(theirs) | set(ours)):
        a, b = theirs.get(stove), ours.get(stove)
        if a is None or b is None:
            where = "the inputs" if a is None else "the report"
            out.append(f"{stove}: credited only according to {where}")
            continue
        for field in ("reductions", "usage", "inputs", "values"):
            if a.get(field) != b.get(field):
                out.append(
                    f"{stove} {field}: the report says {a.get(field)!r}, the inputs give "
                    f"{b.get(field)!r}"
                )
