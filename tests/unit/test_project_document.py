"""The project design document's pure checks (mrv/project_document.py): a sound document,
the country table's figures taken unless the document fixes its own, and every bad input
refused with its path."""

from __future__ import annotations

import copy
from importlib import resources
from typing import Any

import orjson
import pytest

from twinhub.kernel.errors import Problems
from twinhub.mrv.country_defaults import check_country_table, country_defaults
from twinhub.mrv.project_document import COUNTRY_TABLE, check_parameter, check_project_document
from twinhub.security.jcs import canonical, digest

CERT = "sha256:" + "a" * 64
EVIDENCE = "sha256:" + "b" * 64


def parameter(value: float, unit: str, status: str = "checked", **extra: Any) -> dict[str, Any]:
    return {
        "value": value,
        "unit": unit,
        "source": "test source, table 1",
        "year": 2024,
        "evidence": EVIDENCE,
        "status": status,
        **extra,
    }


def document(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "methodology": {"id": "clean-cooking-mecd", "version": "2.1.0"},
        "country": "KE",
        "creditingPeriod": {"from": "2026-01-01", "to": "2032-12-31"},
        "baselineFuel": "charcoal",
        "leakage": "default",
        "parameters": {
            "fNRB": parameter(0.5, "fraction"),
            "EF_grid": parameter(0.4, "tCO2/MWh", "placeholder"),
        },
        "monitoringPlan": {
            "measure": "meter",
            "reportingIntervalHours": 24,
            "minFleetReportingShare": 0.9,
        },
        "stoveModels": {
            "EPC-6L": {
                "case": 2,
                "fuel": "electricity",
                "specificConsumption": parameter(1.2, "MJ/person/event"),
                "baselineSpecificConsumption": parameter(7.5, "MJ/person/event"),
                "testCertificate": CERT,
            },
            "ECO-1": {
                "case": 1,
                "fuel": "electricity",
                "efficiency": parameter(0.85, "fraction", "source-unchecked"),
                "testCertificate": CERT,
            },
        },
    }
    doc.update(changes)
    return doc


def check(doc: Any) -> tuple[Any, dict[str, str]]:
    problems = Problems()
    found = check_project_document(doc, problems)
    return found, {p.field: p.error for p in problems.items}


def test_a_sound_document_is_read_whole() -> None:
    found, problems = check(document())
    assert problems == {}
    assert found.country == "KE" and found.baseline_fuel == "charcoal"
    assert found.stove_models["EPC-6L"].case == 2
    assert found.stove_models["EPC-6L"].baseline_specific_consumption.value == 7.5
    assert found.stove_models["ECO-1"].efficiency.value == 0.85
    assert found.parameters["fNRB"].origin == "document"
    assert found.monitoring_plan.min_fleet_reporting_share == 0.9
    assert found.placeholders() == ["parameters.EF_grid"]
    assert found.unchecked() == ["stoveModels.ECO-1.efficiency"]
    assert found.attachments() == {CERT, EVIDENCE}


def test_the_digest_is_sha256_over_jcs_and_names_any_change() -> None:
    doc = document()
    found, _ = check(doc)
    assert found.digest == digest(doc)
    assert found.digest.startswith("sha256:") and len(found.digest) == 71
    import hashlib

    assert found.digest == "sha256:" + hashlib.sha256(canonical(doc)).hexdigest()
    changed = copy.deepcopy(doc)
    changed["parameters"]["fNRB"]["value"] = 0.51
    assert check(changed)[0].digest != found.digest


def test_the_country_table_fills_what_the_document_does_not_fix() -> None:
    table = country_defaults()
    assert table["ZM"]["fNRB"].value == 0.869
    assert table["ZM"]["fNRB"].status == "source-unchecked"
    assert table["ZM"]["fNRB"].year == table["ZM"]["EF_grid"].year == 2023
    found, problems = check(document(country="ZM", parameters={}))
    assert problems == {}
    assert found.parameters["fNRB"].value == 0.869
    assert found.parameters["fNRB"].origin == "country-defaults"
    assert found.parameters["EF_grid"].value == 0.87
    assert "parameters.fNRB" in found.unchecked()
    # A document's own figure wins over the table's.
    own, _ = check(document(country="ZM", parameters={"fNRB": parameter(0.3, "fraction")}))
    assert own.parameters["fNRB"].value == 0.3 and own.parameters["fNRB"].origin == "document"
    assert own.parameters["EF_grid"].origin == "country-defaults"


def test_a_country_without_defaults_must_fix_its_own() -> None:
    found, problems = check(document(country="KE", parameters={}))
    assert found is None
    assert "no fNRB for KE" in problems["document.parameters.fNRB"]
    assert "no EF_grid for KE" in problems["document.parameters.EF_grid"]


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        ({"country": "Kenya"}, "document.country", "ISO 3166-1"),
        ({"baselineFuel": "coal"}, "document.baselineFuel", "wood, charcoal"),
        ({"leakage": "none"}, "document.leakage", "default"),
        ({"methodology": {"id": "x"}}, "document.methodology", "id, version"),
        (
            {"creditingPeriod": {"from": "2026-01-01", "to": "2025-01-01"}},
            "document.creditingPeriod.to",
            "before",
        ),
        (
            {"creditingPeriod": {"from": "soon", "to": "2025-01-01"}},
            "document.creditingPeriod.from",
            "ISO date",
        ),
        (
            {"monitoringPlan": {"measure": "sessions", "reportingIntervalHours": 24}},
            "document.monitoringPlan.measure",
            "meter",
        ),
        (
            {
                "monitoringPlan": {
                    "measure": "meter",
                    "reportingIntervalHours": 24,
                    "minFleetReportingShare": 1.5,
                }
            },
            "document.monitoringPlan.minFleetReportingShare",
            "fraction",
        ),
        ({"extra": 1}, "document.extra", "not a field"),
    ],
)
def test_bad_fields_are_named(change: dict[str, Any], path: str, words: str) -> None:
    found, problems = check(document(**change))
    assert found is None
    assert words in problems[path]


def test_bad_parameters_are_named_field_by_field() -> None:
    doc = document()
    doc["parameters"]["fNRB"] = {
        "value": "0.5",
        "unit": "",
        "source": " ",
        "year": 1492,
        "evidence": "md5:00",
        "status": "guessed",
        "note": "x",
    }
    found, problems = check(doc)
    assert found is None
    for key in ("value", "unit", "source", "year", "evidence", "status", "note"):
        assert f"document.parameters.fNRB.{key}" in problems


def test_a_case_needs_its_own_figures_and_only_those() -> None:
    doc = document()
    del doc["stoveModels"]["EPC-6L"]["baselineSpecificConsumption"]
    doc["stoveModels"]["ECO-1"]["specificConsumption"] = parameter(1.0, "MJ/person/event")
    found, problems = check(doc)
    assert found is None
    assert "case 2 needs" in problems["document.stoveModels.EPC-6L.baselineSpecificConsumption"]
    assert problems["document.stoveModels.ECO-1.specificConsumption"] == "not used by case 1"


def test_stove_model_faults() -> None:
    doc = document()
    doc["stoveModels"]["ECO-1"]["efficiency"]["value"] = 1.4
    doc["stoveModels"]["ECO-1"]["fuel"] = "coal"
    del doc["stoveModels"]["ECO-1"]["testCertificate"]
    doc["stoveModels"]["EPC-6L"]["baselineSpecificConsumption"]["unit"] = "kg/person/event"
    doc["stoveModels"]["BAD"] = {"case": 3}
    found, problems = check(doc)
    assert found is None
    assert "fraction" in problems["document.stoveModels.ECO-1.efficiency.value"]
    assert "lpg" in problems["document.stoveModels.ECO-1.fuel"]
    assert "certificate" in problems["document.stoveModels.ECO-1.testCertificate"]
    assert (
        "MJ/person/event"
        in problems["document.stoveModels.EPC-6L.baselineSpecificConsumption.unit"]
    )
    assert "1 (tested efficiency)" in problems["document.stoveModels.BAD.case"]


def test_not_an_object() -> None:
    assert check([1])[1] == {"document": "expected a project design document (an object)"}


def test_a_bad_country_table_is_refused_with_paths() -> None:
    problems = Problems()
    check_country_table({"countries": {"zm": {}, "KE": {"fNRB": {"value": 1}}}}, problems)
    fields = {p.field for p in problems.items}
    assert "table.countries.zm" in fields
    assert "table.countries.KE.fNRB.unit" in fields


def shipped_table() -> dict[str, Any]:
    raw = resources.files("twinhub.mrv").joinpath("data", "country_defaults.json").read_bytes()
    return dict(orjson.loads(raw))


UNITS = {"fNRB": "fraction", "EF_grid": "tCO2/MWh"}


def test_every_shipped_default_names_its_source_year_and_how_it_was_checked() -> None:
    """The table's schema: by ISO code, a name and parameters each with value, unit, source,
    year, evidence, a `checked` note and a status that is never placeholder."""
    countries = shipped_table()["countries"]
    assert countries
    for code, entry in countries.items():
        assert len(code) == 2 and code.isupper() and entry["name"]
        figures = {name: value for name, value in entry.items() if name != "name"}
        assert set(figures) <= set(UNITS)
        for name, figure in figures.items():
            assert set(figure) == {
                "value",
                "unit",
                "source",
                "year",
                "checked",
                "evidence",
                "status",
            }, (code, name)
            assert figure["unit"] == UNITS[name]
            assert len(figure["source"]) > 40 and len(figure["checked"]) > 40
            assert isinstance(figure["year"], int) and 1990 <= figure["year"] <= 2030
            assert figure["status"] in ("checked", "source-unchecked")
            if name == "fNRB":
                assert 0 < figure["value"] <= 1
            # A figure found only second-hand says so, and is not marked checked.
            if "second-hand" in figure["checked"]:
                assert figure["status"] == "source-unchecked"
    assert country_defaults()["ZM"]["EF_grid"].origin == "country-defaults"


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        ({"year": None}, "year", "names its source's year"),
        ({"checked": ""}, "checked", "how the figure was checked"),
        ({"status": "placeholder"}, "status", "no placeholder"),
        ({"value": "0.5"}, "value", "expected a number"),
    ],
)
def test_the_table_refuses_a_default_without_year_note_or_with_a_placeholder(
    change: dict[str, Any], path: str, words: str
) -> None:
    figure = {**shipped_table()["countries"]["ZM"]["fNRB"], **change}
    problems = Problems()
    table = check_country_table({"countries": {"ZM": {"name": "Zambia", "fNRB": figure}}}, problems)
    found = {p.field: p.error for p in problems.items}
    assert words in found[f"table.countries.ZM.fNRB.{path}"]
    assert table["ZM"] == {}  # the faulty figure is used by nothing


def test_a_placeholder_reaching_a_document_from_any_table_blocks_issuance() -> None:
    """Even a table that held a placeholder (the shipped one cannot) would not make it
    usable: the document names it among the figures that block issuance."""
    held = {**shipped_table()["countries"]["ZM"]["EF_grid"], "status": "placeholder"}
    del held["checked"]
    problems = Problems()
    figure = check_parameter(held, "t", problems, "EF_grid", COUNTRY_TABLE)
    assert figure is not None and not problems.items
    found = check_project_document(
        document(country="ZM", parameters={}),
        problems,
        table={"ZM": {**country_defaults()["ZM"], "EF_grid": figure}},
    )
    assert found is not None and "parameters.EF_grid" in found.placeholders()
    assert found.parameters["EF_grid"].origin == "country-defaults"


def test_sources_still_to_check_carry_no_value_and_set_nothing() -> None:
    """The table lists published sources whose values could not be read (Kenya's grid
    standardized baseline, its fNRB study, ...): named with their year and why, never a
    number, and no country's figures come from them."""
    raw = orjson.loads(
        resources.files("twinhub.mrv").joinpath("data", "country_defaults.json").read_bytes()
    )
    pending = raw["sourcesToCheck"]
    assert {"KE", "*"} <= set(pending)
    for entries in pending.values():
        for entry in entries:
            assert set(entry) == {"parameter", "source", "year", "why"}
            assert entry["parameter"] in ("fNRB", "EF_grid") and entry["source"] and entry["why"]
    assert set(country_defaults()) == set(raw["countries"]) == {"ZM"}
