"""How the console draws a trust chain (mrv.trust_chain_drawing), charts a stove's raw
readings (console.svg_charts) and names the command of the next signed step."""

from __future__ import annotations

import copy
import os
import shlex
from datetime import UTC, datetime

from twinhub.console.svg_charts import HEIGHT, charts
from twinhub.console.workflow_pages import command, curl, next_step
from twinhub.mrv import trust_chain as chain
from twinhub.mrv.trust_chain_drawing import draw
from twinhub.security.jcs import digest
from twinhub.security.signing import Issuer

AT = datetime(2026, 11, 1, tzinfo=UTC)
PROJECT = "did:ixo:entity/p1"


def signed(key: Issuer, kind: str, subject: dict[str, object]) -> dict[str, object]:
    unsigned = chain.unsigned_credential(kind, key.did, subject, AT)
    return key.sign(unsigned, unsigned["validFrom"])


def test_each_step_names_what_it_rests_on_and_a_broken_link_shows() -> None:
    registry, verifier = Issuer(os.urandom(32)), Issuer(os.urandom(32))
    accreditation = signed(
        registry, chain.ACCREDITATION, chain.accreditation_subject(verifier.did, PROJECT)
    )
    document = "sha256:" + "d" * 64
    validation = signed(
        verifier,
        chain.VALIDATION,
        chain.validation_subject(PROJECT, document, digest(accreditation)),
    )
    steps = draw([accreditation, validation], {document: "project document"})
    assert [s["step"] for s in steps] == ["Accreditation", "PDD validation"]
    assert [s["role"] for s in steps] == ["registry", "verifier"]
    assert all(s["verified"] for s in steps)
    assert steps[1]["issuer"] == verifier.did and steps[1]["digest"] == digest(validation)
    assert [(n["what"], n["linked"]) for n in steps[1]["names"]] == [
        ("project document", True),
        ("accreditation", True),
    ]
    # Without the accreditation the link is shown broken; a changed step fails its proof.
    changed = copy.deepcopy(validation)
    changed["credentialSubject"]["outcome"] = "rejected"
    [alone] = draw([changed], {document: "project document"})
    assert [n["linked"] for n in alone["names"]] == [True, False]
    assert not alone["verified"] and alone["problem"]


def test_readings_chart_each_numeric_field_on_its_own_scale() -> None:
    readings = [
        {"seq": 1, "time": "2026-10-01T07:00:00+00:00", "values": {"session": "start"}},
        {"seq": 2, "time": "2026-10-01T07:45:00+00:00", "values": {"kwh": 0.5, "meter": 1.0}},
        {"seq": 3, "time": "2026-10-02T07:45:00+00:00", "values": {"kwh": 0.25, "meter": 3.0}},
    ]
    drawn = charts(readings)
    assert [c.field for c in drawn] == ["kwh", "meter"]  # the text field is not charted
    kwh = drawn[0]
    assert kwh.count == 2 and kwh.low == 0.0 and kwh.high == 0.5
    assert kwh.first == "2026-10-01 07:45" and kwh.last == "2026-10-02 07:45"
    (x0, y0), (x1, y1) = kwh.dots
    assert x0 < x1 and y0 < y1 < HEIGHT  # the higher value is drawn higher (smaller y)
    assert charts([]) == []


def test_the_next_step_is_the_command_of_the_role_that_signs_it() -> None:
    report = {"stoves": [{"stove": "did:ixo:entity/s1"}], "credits": {"token": "CARBON"}}
    view = {"id": 4, "state": "draft"}
    assert next_step(PROJECT, view, report)["command"] == (
        f"twinhub period submit {PROJECT} 4 --key proponent.key"
    )
    verify = next_step(PROJECT, {**view, "state": "submitted"}, report)
    assert verify["role"] == "verifier"
    assert shlex.split(verify["command"])[-2:] == ["--sample", "did:ixo:entity/s1"]
    assert next_step(PROJECT, {**view, "state": "verified"}, report)["role"] == "registry"
    assert next_step(PROJECT, {**view, "state": "rejected"}, report)["command"] is None
    # Words the shell would read otherwise are quoted; the key and address are expanded.
    assert shlex.split(command("twinhub", "a b;c")) == ["twinhub", "a b;c"]
    assert '"$TWINHUB_URL/v1/x\\$y"' in curl("PUT", "/v1/x$y")
