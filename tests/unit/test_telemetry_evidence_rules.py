"""The pure rules behind telemetry evidence: the clock rule that quarantines readings,
device batch signatures over the JCS canonical form, and how long evidence is kept."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from twinhub.mrv.telemetry_schema import (
    AHEAD_OF_RECEIPT,
    BEFORE_ENROLMENT,
    BEHIND_RECEIPT,
    Reading,
    clock_problem,
    split_by_clock,
)
from twinhub.security.device_signatures import (
    device_public_key,
    public_key_multibase,
    sign_batch,
    verify_batch,
)
from twinhub.services.evidence import keep_until

RECEIVED = datetime(2026, 11, 27, 12, tzinfo=UTC)
FUTURE = timedelta(minutes=5)
PAST = timedelta(days=730)
SEED = bytes(32)


def test_the_clock_rule_names_each_untrustworthy_time() -> None:
    enrolled = RECEIVED - timedelta(days=10)
    assert clock_problem(RECEIVED, RECEIVED, enrolled, FUTURE, PAST) is None
    assert clock_problem(RECEIVED + FUTURE, RECEIVED, None, FUTURE, PAST) is None
    later = RECEIVED + FUTURE + timedelta(seconds=1)
    assert clock_problem(later, RECEIVED, None, FUTURE, PAST) == AHEAD_OF_RECEIPT
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    assert clock_problem(epoch, RECEIVED, None, FUTURE, PAST) == BEHIND_RECEIPT
    assert clock_problem(epoch, RECEIVED, None, FUTURE, None) is None  # no past limit
    assert clock_problem(epoch, RECEIVED, enrolled, FUTURE, None) == BEFORE_ENROLMENT
    early = enrolled - timedelta(seconds=1)
    assert clock_problem(early, RECEIVED, enrolled, FUTURE, PAST) == BEFORE_ENROLMENT


def test_split_by_clock_keeps_order_and_gives_each_reason() -> None:
    readings = [
        Reading(1, RECEIVED - timedelta(hours=1), {"e": 1}),
        Reading(2, datetime(1970, 1, 1, tzinfo=UTC), {"e": 1}),
        Reading(3, RECEIVED - timedelta(hours=2), {"e": 1}),
        Reading(4, RECEIVED + timedelta(hours=1), {"e": 1}),
    ]
    kept, held = split_by_clock(readings, RECEIVED, None, FUTURE, PAST)
    assert [r.seq for r in kept] == [1, 3]
    assert [(r.seq, why) for r, why in held] == [(2, BEHIND_RECEIPT), (4, AHEAD_OF_RECEIPT)]
    good = readings[::2]
    assert split_by_clock(good, RECEIVED, None, FUTURE, PAST) == (good, [])


def test_a_batch_signature_covers_the_canonical_form_and_nothing_else() -> None:
    key = device_public_key(SEED)
    assert key.startswith("z6Mk") and public_key_multibase("did:key:" + key) == key
    assert public_key_multibase("z6Mknope") is None
    batch = {"readings": [{"seq": 1, "time": "2026-11-27T10:00:00Z", "values": {"e": 0.5}}]}
    signature = sign_batch(SEED, batch)
    reordered = {"readings": [{"values": {"e": 0.50}, "time": "2026-11-27T10:00:00Z", "seq": 1}]}
    assert verify_batch(key, reordered, signature)
    changed = {"readings": [{"seq": 1, "time": "2026-11-27T10:00:00Z", "values": {"e": 0.6}}]}
    assert not verify_batch(key, changed, signature)
    assert not verify_batch(device_public_key(bytes([1]) * 32), batch, signature)
    assert not verify_batch(key, batch, "not multibase")


def test_evidence_is_kept_for_the_years_after_the_crediting_period() -> None:
    assert keep_until(date(2032, 12, 31), 2) == date(2034, 12, 31)
    assert keep_until(date(2028, 2, 29), 2) == date(2030, 2, 28)
    assert keep_until(date(2030, 6, 30), 0) == date(2030, 6, 30)
