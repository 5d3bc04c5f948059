"""The trust chain's pure parts: what a step credential must say and be signed by, a
verifier's verdict, the frozen inputs of a period (they recompute its report exactly), the
device identity of one-stove-day-one-credit, and the offline check of a bundle's inputs."""

from __future__ import annotations

import copy
from datetime import UTC, date, datetime, timedelta

from twinhub.mrv import trust_chain as chain
from twinhub.mrv.builtin import CLEAN_COOKING, builtin_document
from twinhub.mrv.period_inputs import (
    day_cells,
    device_identity,
    differing_days,
    figures_from_readings,
    freeze,
    inputs_digest,
    reading_row,
    readings_digest,
    report_of,
    thaw,
)
from twinhub.mrv.periods import PeriodSpec, StovePeriod
from twinhub.mrv.plausibility import StoveDay
from twinhub.security.signing import Issuer

AT = datetime(2026, 11, 1, tzinfo=UTC)
SPEC = PeriodSpec("did:ixo:entity/project", date(2026, 10, 1), date(2026, 10, 3), "CARBON", 6)


def test_a_step_is_accepted_only_as_offered_and_signed_by_the_caller() -> None:
    proponent, other = Issuer(b"\x01" * 32), Issuer(b"\x02" * 32)
    subject = chain.submission_subject(
        "did:ixo:entity/p",
        chain.period_ref(1, "2026-10-01", "2026-10-03"),
        "sha256:" + "a" * 64,
        "sha256:" + "b" * 64,
        "sha256:" + "c" * 64,
        {"token": "CARBON", "decimals": 6, "amount": 5},
    )
    unsigned = chain.unsigned_credential(chain.SUBMISSION, proponent.did, subject, AT)
    signed = proponent.sign(unsigned, unsigned["validFrom"])
    assert chain.credential_problems(signed, chain.SUBMISSION, proponent.did, subject) == []
    # Signed by another key than the caller's.
    theirs = other.sign({**unsigned, "issuer": other.did}, unsigned["validFrom"])
    problems = chain.credential_problems(theirs, chain.SUBMISSION, proponent.did, subject)
    assert [p.field for p in problems] == ["credential.issuer"]
    # Another content, properly signed: the differing field is named with both values.
    changed = copy.deepcopy(unsigned)
    changed["credentialSubject"]["credits"]["amount"] = 6
    problems = chain.credential_problems(
        proponent.sign(changed, AT.strftime("%Y-%m-%dT%H:%M:%SZ")),
        chain.SUBMISSION,
        proponent.did,
        subject,
    )
    assert [p.field for p in problems] == ["credential.credentialSubject.credits"]
    assert "'amount': 5" in problems[0].error and "'amount': 6" in problems[0].error
    # A byte changed after signing fails the proof before anything else.
    tampered = copy.deepcopy(signed)
    tampered["credentialSubject"]["report"] = "sha256:" + "d" * 64
    problems = chain.credential_problems(tampered, chain.SUBMISSION, proponent.did, subject)
    assert [p.field for p in problems] == ["credential.proof"]
    assert chain.credential_problems("text", chain.SUBMISSION, None, None)[0].field == "credential"
    assert chain.credential_digest(signed).startswith("sha256:")


def test_a_verdict_names_its_outcome_findings_and_sampled_stoves() -> None:
    stoves = {"did:ixo:entity/a", "did:ixo:entity/b"}
    assert chain.verdict_problems("approved", [], ["did:ixo:entity/a"], stoves) == []
    fields = {p.field for p in chain.verdict_problems("maybe", "x", None, stoves)}
    assert fields == {"outcome", "findings", "sampledStoves"}
    fields = {p.field for p in chain.verdict_problems("approved", [], [], stoves)}
    assert fields == {"sampledStoves"}  # an approval names what it sampled
    fields = {p.field for p in chain.verdict_problems("corrections", [], [], stoves)}
    assert fields == {"findings"}  # corrections say why
    problems = chain.verdict_problems("rejected", ["x"], ["did:ixo:entity/z"], stoves)
    assert [p.field for p in problems] == ["sampledStoves[0]"]


def test_one_device_whichever_project_lists_it() -> None:
    assert device_identity("did:a", {"serialNumber": "sn-001"}) == "sn:SN001"
    assert device_identity("did:b", {"serialNumber": "SN 001"}) == "sn:SN001"
    meter = {"serialNumber": "sn-001", "meter": {"serial": "m-9"}}
    assert device_identity("did:c", meter) == "sn:SN001|meter:M9"
    assert device_identity("did:d", {}) == "did:d"
    assert device_identity("did:e", {"serialNumber": "--"}) == "did:e"


def _readings(stove: str) -> list[dict]:
    rows = []
    for day in range(3):
        base = datetime(2026, 10, 1 + day, 7, tzinfo=UTC)
        rows.append(reading_row(day * 10, base, {"session": "start"}))
        rows.append(
            reading_row(
                day * 10 + 1,
                base + timedelta(minutes=40),
                {"session": "end", "energyKwh": 0.5 + day * 0.25, "meterKwh": 10.0 + day},
            )
        )
    return rows


def test_frozen_inputs_recompute_the_report_and_their_readings() -> None:
    readings = _readings("did:ixo:entity/s")
    days = figures_from_readings("did:ixo:entity/s", "kWh", readings)
    assert [d.sessions for d in days] == [1, 1, 1]
    assert [d.energy for d in days] == [0.5, 0.75, 1.0]
    assert [d.meter_delta for d in days] == [0.0, 1.0, 1.0]  # the register read by mrv.meter
    stove = StovePeriod("did:ixo:entity/s", "sn-1", True, True, 5, 0.85, "kWh", days)
    digests = {
        ("did:ixo:entity/s", d.day): readings_digest(
            [r for r in readings if r["time"].startswith(d.day.isoformat())]
        )
        for d in days
    }
    frozen = freeze(
        SPEC,
        "did:ixo:protocol/p",
        builtin_document(CLEAN_COOKING),
        [stove],
        {},
        digests,
        {"did:ixo:entity/s": "sn:SN1"},
    )
    report = report_of(frozen)
    # Three days are fewer than the methodology's minimum: excluded, with the reason.
    assert report["totals"] == {**report["totals"], "stoves": 1, "included": 0}
    assert "minimum of 10" in report["exclusions"][0]["reason"]
    again = report_of(copy.deepcopy(frozen))
    assert again == report and inputs_digest(frozen) == inputs_digest(copy.deepcopy(frozen))
    spec, (thawed,) = thaw(frozen)
    assert spec == SPEC and thawed.days == days
    assert differing_days(frozen["stoves"][0], days) == []
    later = [*days[:2], StoveDay("did:ixo:entity/s", days[2].day, 2, 1.5, 0.0, 0, 0, 1.0)]
    assert differing_days(frozen["stoves"][0], later) == [
        ("2026-10-03", "sessions", 1, 2),
        ("2026-10-03", "energy", 1.0, 1.5),
    ]
    assert len(day_cells(readings)) == 3


def test_late_data_is_credited_later_only_where_the_methodology_says() -> None:
    from twinhub.oracle.period_workflow import credit_late_data

    assert credit_late_data(builtin_document(CLEAN_COOKING)) is False  # the default: no
    assert credit_late_data({"rules": {"creditLateData": {"value": 1, "unit": "flag"}}})
    assert not credit_late_data({"rules": {"creditLateData": {"value": 0, "unit": "flag"}}})
    assert not credit_late_data({})
