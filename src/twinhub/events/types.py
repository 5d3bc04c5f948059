"""The catalogue of event types, and how a ledger transaction becomes events.

Events are named in the past tense, one type per thing that happened. Every registry write
already appends a ledger transaction; `events_for_transaction` maps each kind of
transaction to the events it means, as a pure function, so the mapping is testable on its
own and the ledger needs a single call to record them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

CATALOGUE: dict[str, str] = {
    "domain.created": "A domain was registered (data.record: the stored record).",
    "domain.updated": "A domain's record changed, or it gained a relationship.",
    "domain.verified": "Governance verified a domain (data.proposal: the proposal id).",
    "domain.revoked": "Governance revoked a domain's verification.",
    "domain.deactivated": "A domain was deactivated; its record can no longer change.",
    "protocol.created": "A protocol (template) was registered.",
    "proposal.created": "A verification (or revocation) proposal was opened.",
    "proposal.voted": "A member voted on a proposal (data: proposal, option, weight).",
    "collection.created": "A claim collection was opened.",
    "collection.updated": "A claim collection was paused, reopened or closed.",
    "claim.submitted": "A claim was submitted (data.claim).",
    "claim.evaluated": "An oracle evaluated a claim (data.claim.status: the outcome).",
    "claim.approved": "A claim was approved (also claim.evaluated).",
    "claim.rejected": "A claim was rejected (also claim.evaluated).",
    "credential.issued": "A verifiable credential was issued for an approved claim.",
    "credits.minted": "Credits were minted (data: token, to, amount, claim).",
    "credits.transferred": "Credits moved between holders (data: token, from, to, amount).",
    "credits.retired": "Credits were retired (data: token, from, amount, reason).",
    "device.online": "A device began reporting (written by the telemetry ingestion).",
    "device.offline": "A device stopped reporting for longer than its allowed silence.",
    "telemetry.rejected": "A telemetry message was refused (data: device, reason).",
    "stove.assigned": "A stove was given to a household that had none before "
    "(data: stove, customerId; also domain.created or domain.updated).",
    "stove.moved": "A stove moved from one household to another, or to none "
    "(data: stove, from, to: customer IDs or null; also domain.updated).",
    "stove.problem_reported": (
        "A household reported a problem with its stove over USSD "
        "(data: reference, stove, customer, kind, status, reportedAt)."
    ),
    "stove.problem_resolved": (
        "An operator resolved a reported stove problem "
        "(data: reference, stove, customer, kind, status, reportedAt, resolvedAt, "
        "resolvedBy, note)."
    ),
    "webhook.disabled": (
        "A webhook subscription was disabled: its receiver failed for longer than "
        "WEBHOOK_DISABLE_AFTER_SECONDS (subject: the webhook; data: webhook, url, "
        "failingSince, lastError)."
    ),
}


@dataclass(frozen=True)
class EventRecord:
    """An event about to be written: its type, what it is about, who caused it, the data."""

    type: str
    subject: str
    actor: str
    data: dict[str, Any]


class LedgerEntry(Protocol):
    """What the mapping reads of a ledger transaction (services.ledger.Transaction)."""

    height: int
    tx_hash: str
    kind: str
    subject: str
    actor: str
    payload: dict[str, Any]


_SIMPLE: dict[str, str] = {
    "domain.create": "domain.created",
    "domain.update": "domain.updated",
    "domain.relate": "domain.updated",
    "domain.verify": "domain.verified",
    "domain.revoke": "domain.revoked",
    "domain.deactivate": "domain.deactivated",
    "protocol.create": "protocol.created",
    "proposal.create": "proposal.created",
    "proposal.vote": "proposal.voted",
    "claims.collection.create": "collection.created",
    "claims.collection.state": "collection.updated",
    "claims.submit": "claim.submitted",
    "credits.mint": "credits.minted",
    "credits.transfer": "credits.transferred",
    "credits.retire": "credits.retired",
}
_OUTCOMES = {"approved": "claim.approved", "rejected": "claim.rejected"}


def events_for_transaction(transaction: LedgerEntry) -> list[EventRecord]:
    """The events one ledger transaction means (none for kinds of no outside interest,
    such as a governance group being made)."""
    ledger = {"height": transaction.height, "hash": transaction.tx_hash}
    payload = transaction.payload
    subject, actor = transaction.subject, transaction.actor

    def event(type_: str, data: dict[str, Any]) -> EventRecord:
        return EventRecord(type_, subject, actor, {**data, "ledger": ledger})

    if transaction.kind == "claims.evaluate":
        claim = payload.get("claim") or {}
        events = [event("claim.evaluated", {"claim": claim})]
        outcome = _OUTCOMES.get(str(claim.get("status")))
        if outcome:
            events.append(event(outcome, {"claim": claim}))
        if payload.get("credential"):
            events.append(
                event(
                    "credential.issued",
                    {"credential": payload["credential"], "claim": claim.get("id")},
                )
            )
        return events
    if transaction.kind == "domain.owner":
        change = payload.get("owner") or {}
        before, after = change.get("from"), change.get("to")
        ownership = (
            event("stove.assigned", {"stove": subject, "customerId": after})
            if before is None
            else event("stove.moved", {"stove": subject, "from": before, "to": after})
        )
        return [event("domain.updated", {"subject": subject, **payload}), ownership]
    type_ = _SIMPLE.get(transaction.kind)
    if type_ is None:
        return []
    events = [event(type_, {"subject": subject, **payload})]
    owner = ((payload.get("record") or {}).get("properties") or {}).get("ownerCustomerId")
    if transaction.kind == "domain.create" and isinstance(owner, str):
        events.append(event("stove.assigned", {"stove": subject, "customerId": owner}))
    return events
