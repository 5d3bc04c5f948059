"""Each methodology version recomputes as it was issued: the measure is a rule of the
methodology (`rules.measure`), so a report made under 1.0.0 (the sessions' sum credited)
still recomputes to the last unit after 2.0.0 made the meter the measure.

The fixture `tests/support/reports/methodology-1.0.0-period.json` was written by the code
of 1.0.0 itself (the commit before methodology 2.0.0): its day rollups, its methodology
document and the report that code made from them.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import orjson
import pytest

from twinhub.kernel.errors import Problems
from twinhub.mrv.builtin import builtin_document, builtin_methodology, past_document
from twinhub.mrv.claims import methodology_of
from twinhub.mrv.meter import Reading
from twinhub.mrv.methodology import compile_methodology, digest_of
from twinhub.mrv.periods import PeriodSpec, StovePeriod, compare_reports, compute_period
from twinhub.mrv.plausibility import assess
from twinhub.mrv.rollups import stove_period

FIXTURE = Path(__file__).parents[1] / "support" / "reports" / "methodology-1.0.0-period.json"


def _fixture() -> dict[str, Any]:
    return orjson.loads(FIXTURE.read_bytes())


def _periods(fixture: dict[str, Any], reading: Reading) -> list[StovePeriod]:
    periods = []
    for did, stove in fixture["stoves"].items():
        cells = {
            date.fromisoformat(day): {name: tuple(cell) for name, cell in fields.items()}
            for day, fields in stove["cells"].items()
        }
        facts = (stove["properties"], stove["verified"], stove["status"])
        periods.append(stove_period(did, facts, True, cells, reading))
    return periods


def _spec(report: dict[str, Any]) -> PeriodSpec:
    return PeriodSpec(
        report["project"],
        date.fromisoformat(report["period"]["from"]),
        date.fromisoformat(report["period"]["to"]),
        report["credits"]["token"],
        report["credits"]["decimals"],
    )


def test_a_report_issued_under_1_0_0_recomputes_to_the_last_unit() -> None:
    fixture = _fixture()
    stored = fixture["report"]
    methodology = methodology_of(fixture["methodology"])
    assert (methodology.version, methodology.measure) == ("1.0.0", "sessions")
    periods = _periods(fixture, methodology.reading)
    findings = assess(day for period in periods for day in period.days)
    recomputed = compute_period(_spec(stored), methodology, periods, findings, {})
    assert compare_reports(stored, recomputed) == []
    assert recomputed == stored  # every figure, the digests included
    assert stored["credits"]["amount"] == 159688
    reasons = {row["stove"]: row["reason"] for row in stored["exclusions"]}
    assert reasons["did:ixo:entity/v1-f"].startswith("flagged for review (tampered)")


def test_the_same_data_read_by_the_meter_is_another_report() -> None:
    """Under 2.0.0 (the meter is the measure) the stove whose sessions overstate its
    register is credited with the register, and the 1.0.0 report does not recompute."""
    fixture = _fixture()
    stored = fixture["report"]
    methodology = builtin_methodology()
    assert methodology.measure == "meter"
    periods = _periods(fixture, methodology.reading)
    findings = assess(day for period in periods for day in period.days)
    recomputed = compute_period(_spec(stored), methodology, periods, findings, {})
    credited = {row["stove"]: row for row in recomputed["stoves"]}
    assert "did:ixo:entity/v1-f" in credited
    assert any("the smaller" in flag for flag in credited["did:ixo:entity/v1-f"]["flags"])
    assert compare_reports(stored, recomputed) != []


def test_the_shipped_methodologies_are_found_by_digest() -> None:
    old = _fixture()["methodology"]
    assert past_document(digest_of(old)) == old
    current = builtin_methodology()
    assert past_document(current.digest) == current.document
    assert past_document("0" * 64) is None


def _with_rules(rules: Any) -> dict[str, Any]:
    document = dict(builtin_methodology().document)
    document["rules"] = rules
    return document


def test_a_declared_measure_is_read_and_a_bad_one_refused_with_its_path() -> None:
    rules = dict(builtin_methodology().document["rules"])
    problems = Problems()
    sessions = compile_methodology(
        _with_rules(
            {**rules, "measure": {"value": "sessions", "unit": "measure", "source": "test"}}
        ),
        problems,
    )
    assert not problems.items and sessions is not None and sessions.measure == "sessions"
    problems = Problems()
    bad = {"value": "register", "unit": "kWh", "source": ""}
    assert compile_methodology(_with_rules({**rules, "measure": bad}), problems) is None
    fields = {problem.field for problem in problems.items}
    assert fields == {
        "methodology.rules.measure.value",
        "methodology.rules.measure.unit",
        "methodology.rules.measure.source",
    }


@pytest.mark.parametrize("version", ["1.0.0", "2.0.0", "2.1.0"])
def test_undeclared_the_measure_follows_the_documents_form(version: str) -> None:
    """1.0.0 has no rules section (its thresholds were parameters): the sessions' sum;
    2.0.0 and 2.1.0 have one: the meter. No shipped document changes, so no digest does
    (2.0.0 ships beside 2.1.0 as `clean-cooking-mecd-2.0.0.json`)."""
    documents = {
        "1.0.0": _fixture()["methodology"],
        "2.0.0": builtin_document("clean-cooking-mecd-2.0.0"),
    }
    document = documents.get(version)
    methodology = methodology_of(document) if document else builtin_methodology()
    assert methodology.version == version
    assert methodology.measure == ("sessions" if version == "1.0.0" else "meter")
