"""The retirement certificate: the last link of a credit's trust chain.

Retiring credits produces a verifiable credential, signed by the platform's issuer key as
the ledger that recorded the retirement, naming the holder, the beneficiary, the amount and
where the retired credits came from: each monitoring period's issuance credential (signed
by the registry) or each claim's approval credential, by digest, with the amount taken
from it. So the chain runs on from the certificate to the registry's issuance and back to
the project's validation.

Credits are fungible, so which credits a retirement takes is a rule, and it lives here:
first in, first out. Every movement of the token is replayed in ledger order as lots
(a mint makes a lot for its recipient; a transfer moves the sender's oldest lots, split as
needed, to the recipient; a retirement consumes the sender's oldest lots), and the
retirement takes the holder's oldest lots. Pure: the service reads the movements and the
credentials named, this module decides and checks.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from twinhub.kernel.errors import FieldProblem
from twinhub.mrv.trust_chain import CONTEXT, credential_problems

RETIREMENT = "CreditRetirementCredential"
ID_PREFIX = "urn:twinhub:retirement:"
ALLOCATION = {
    "rule": "fifo",
    "description": "the holder's oldest credits first (first in, first out), followed "
    "through transfers in ledger order",
}
MAX_BENEFICIARY = 200
PERIOD_MINT = "monitoring-period:"  # a period's mint names its period so (oracle)


@dataclass(frozen=True)
class Move:
    """One credit movement, as the ledger ordered it; `origin` is a mint's source (the
    claim id or `monitoring-period:<id>` it was minted for)."""

    kind: str  # mint | transfer | retire
    sender: str | None
    recipient: str | None
    amount: int
    origin: str | None = None


def certificate_id(retirement_id: int) -> str:
    return f"{ID_PREFIX}{retirement_id}"


def retirement_id_of(credential_id: Any) -> int | None:
    """The retirement a certificate's id names, or None."""
    if not isinstance(credential_id, str) or not credential_id.startswith(ID_PREFIX):
        return None
    number = credential_id.removeprefix(ID_PREFIX)
    return int(number) if number.isdigit() and len(number) <= 18 else None


def beneficiary_problem(beneficiary: Any) -> str | None:
    """A beneficiary is a name or a DID: printable text of 1 to 200 characters."""
    if (
        not isinstance(beneficiary, str)
        or not 1 <= len(beneficiary.strip()) <= MAX_BENEFICIARY
        or not beneficiary.isprintable()
    ):
        return f"printable text of 1 to {MAX_BENEFICIARY} characters (a name or a DID)"
    return None


def _take(lots: dict[str, deque[list[Any]]], holder: str, amount: int) -> list[list[Any]]:
    """The holder's oldest `amount` as pieces [origin, amount]; an origin of None where the
    history holds fewer credits than the holder moved (said so, never guessed)."""
    queue = lots.setdefault(holder, deque())
    pieces: list[list[Any]] = []
    while amount > 0 and queue:
        lot = queue[0]
        part = min(lot[1], amount)
        pieces.append([lot[0], part])
        lot[1] -= part
        amount -= part
        if lot[1] == 0:
            queue.popleft()
    if amount > 0:
        pieces.append([None, amount])
    return pieces


def allocate(history: Iterable[Move], holder: str, amount: int) -> list[tuple[str | None, int]]:
    """Where `holder`'s next `amount` credits came from, oldest first, after `history`
    (every movement of the token before this retirement, in ledger order); a run of pieces
    of one origin is merged."""
    lots: dict[str, deque[list[Any]]] = {}
    for move in history:
        if move.kind == "mint" and move.recipient is not None:
            lots.setdefault(move.recipient, deque()).append([move.origin, move.amount])
        elif move.kind == "transfer" and move.sender and move.recipient:
            moved = _take(lots, move.sender, move.amount)
            lots.setdefault(move.recipient, deque()).extend(moved)
        elif move.kind == "retire" and move.sender:
            _take(lots, move.sender, move.amount)
    merged: list[tuple[str | None, int]] = []
    for origin, part in _take(lots, holder, amount):
        if merged and merged[-1][0] == origin:
            merged[-1] = (origin, merged[-1][1] + part)
        else:
            merged.append((origin, part))
    return merged


def period_of(origin: str | None) -> int | None:
    """The monitoring period a mint's origin names, or None (a claim's, or unknown)."""
    if origin is None or not origin.startswith(PERIOD_MINT):
        return None
    number = origin.removeprefix(PERIOD_MINT)
    return int(number) if number.isdigit() else None


def certificate(
    retirement: dict[str, Any],
    issuer: str,
    beneficiary: str,
    decimals: int,
    sources: list[dict[str, Any]],
    valid_from: str,
) -> dict[str, Any]:
    """The unsigned certificate of `retirement` (a credit movement's view: id, token,
    from, amount, reason, ledgerHeight, at); `valid_from` is `at` in RFC 3339 to the
    second."""
    at = retirement["at"]
    return {
        "@context": [CONTEXT],
        "id": certificate_id(retirement["id"]),
        "type": ["VerifiableCredential", RETIREMENT],
        "issuer": issuer,
        "validFrom": valid_from,
        "credentialSubject": {
            "id": retirement["from"],
            "beneficiary": beneficiary,
            "reason": retirement["reason"],
            "retirement": {
                "id": retirement["id"],
                "ledgerHeight": retirement["ledgerHeight"],
                "at": at,
            },
            "token": retirement["token"],
            "amount": retirement["amount"],
            "decimals": decimals,
            "allocation": ALLOCATION,
            "sources": sources,
        },
    }


def certificate_problems(credential: Any, issuer: str) -> list[FieldProblem]:
    """Why `credential` is not a retirement certificate `issuer` signed whose sources add
    up to its amount; empty when it is. (That the retirement and the credentials it names
    are the ones recorded is the service's check: it reads them.)"""
    problems = credential_problems(credential, RETIREMENT, issuer, None, "certificate")
    if problems:
        return problems
    subject = credential.get("credentialSubject")
    if not isinstance(subject, dict):
        return [FieldProblem("certificate.credentialSubject", "expected an object")]
    amount, sources = subject.get("amount"), subject.get("sources")
    if not isinstance(sources, list) or not all(isinstance(s, dict) for s in sources):
        return [FieldProblem("certificate.credentialSubject.sources", "expected a list")]
    total = sum(s.get("amount", 0) for s in sources if isinstance(s.get("amount"), int))
    if total != amount:
        problems.append(
            FieldProblem(
                "certificate.credentialSubject.sources",
                f"the sources add up to {total}, the certificate retires {amount!r}",
            )
        )
    if retirement_id_of(credential.get("id")) is None:
        problems.append(FieldProblem("certificate.id", f"{ID_PREFIX}<retirement id>"))
    return problems
