"""The retirement certificate's rules (mrv.retirement_certificate): which credits a
retirement takes (first in, first out, followed through transfers) and what a certificate
must be to check."""

from __future__ import annotations

import copy
import os

from twinhub.mrv.retirement_certificate import (
    Move,
    allocate,
    certificate,
    certificate_problems,
    period_of,
    retirement_id_of,
)
from twinhub.security.signing import Issuer

A, B = "did:key:zA", "did:key:zB"


def test_a_retirement_takes_the_oldest_credits_first() -> None:
    history = [
        Move("mint", None, A, 100, "monitoring-period:1"),
        Move("mint", None, A, 50, "claim-7"),
        Move("mint", None, A, 30, "monitoring-period:2"),
    ]
    assert allocate(history, A, 120) == [("monitoring-period:1", 100), ("claim-7", 20)]
    # An earlier retirement consumed the oldest: the next takes what follows.
    later = [*history, Move("retire", A, None, 120)]
    assert allocate(later, A, 60) == [("claim-7", 30), ("monitoring-period:2", 30)]


def test_transfers_carry_their_credits_origin() -> None:
    history = [
        Move("mint", None, A, 100, "monitoring-period:1"),
        Move("mint", None, B, 10, "monitoring-period:9"),
        Move("transfer", A, B, 40),
    ]
    # B's own mint first (older in B's hands), then what came from A, still period 1's.
    assert allocate(history, B, 50) == [("monitoring-period:9", 10), ("monitoring-period:1", 40)]
    assert allocate(history, A, 60) == [("monitoring-period:1", 60)]


def test_credits_the_history_does_not_trace_are_said_so() -> None:
    assert allocate([Move("mint", None, A, 5, "c")], A, 8) == [("c", 5), (None, 3)]


def test_ids_name_retirements_and_periods() -> None:
    assert retirement_id_of("urn:twinhub:retirement:12") == 12
    assert retirement_id_of("urn:twinhub:retirement:x") is None
    assert retirement_id_of(None) is None
    assert period_of("monitoring-period:4") == 4 and period_of("claim-1") is None


def test_a_changed_certificate_no_longer_checks() -> None:
    issuer = Issuer(os.urandom(32))
    retirement = {
        "id": 3,
        "from": A,
        "token": "CARBON",
        "amount": 70,
        "reason": "offset",
        "ledgerHeight": 9,
        "at": "2026-11-01T10:00:00+00:00",
    }
    sources = [{"amount": 50, "mint": "m"}, {"amount": 20, "mint": "n"}]
    unsigned = certificate(retirement, issuer.did, "Acme", 6, sources, "2026-11-01T10:00:00Z")
    signed = issuer.sign(unsigned, unsigned["validFrom"])
    assert certificate_problems(signed, issuer.did) == []
    changed = copy.deepcopy(signed)
    changed["credentialSubject"]["beneficiary"] = "Someone else"
    assert [p.field for p in certificate_problems(changed, issuer.did)] == ["certificate.proof"]
    other = Issuer(os.urandom(32))
    assert [p.field for p in certificate_problems(signed, other.did)] == ["certificate.issuer"]
    # Signed, but its sources do not add up: refused too.
    short = copy.deepcopy(unsigned)
    short["credentialSubject"]["sources"] = sources[:1]
    problems = certificate_problems(issuer.sign(short, short["validFrom"]), issuer.did)
    assert [p.field for p in problems] == ["certificate.credentialSubject.sources"]
