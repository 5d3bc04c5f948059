"""The country defaults table: fNRB and the grid emission factor by host country, each with
its source and year, shipped as data (data/country_defaults.json) so an auditor reads the
figures the platform uses. A project design document takes these unless it fixes its own
(twinhub.mrv.project_document.effective_parameters).

The table is stricter than a document: every figure names its source's year and says how
it was checked (`checked`, a note kept in the data for the auditor, not in the parameter),
and none may be a placeholder, so a default can never carry a figure nobody can trace."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

import orjson

from twinhub.kernel.errors import Problems
from twinhub.mrv.project_document import (
    COUNTRY,
    COUNTRY_TABLE,
    MAX_TEXT,
    PLACEHOLDER,
    DocumentParameter,
    check_parameter,
)

CountryTable = Mapping[str, Mapping[str, DocumentParameter]]


def check_country_table(document: Any, problems: Problems, where: str = "table") -> CountryTable:
    """Every country's parameters checked as a document's are; faults go into `problems`."""
    countries = document.get("countries") if isinstance(document, dict) else None
    if not isinstance(countries, dict):
        problems.add(f"{where}.countries", "expected an object of countries by ISO code")
        return {}
    table: dict[str, dict[str, DocumentParameter]] = {}
    for code, entry in countries.items():
        at = f"{where}.countries.{code}"
        if not COUNTRY.match(code) or not isinstance(entry, dict):
            problems.add(at, "expected an ISO 3166-1 alpha-2 code holding an object")
            continue
        figures: dict[str, DocumentParameter] = {}
        for name, value in entry.items():
            if name == "name":
                continue
            found = _table_parameter(value, f"{at}.{name}", problems, name)
            if found is not None:
                figures[name] = found
        table[code] = figures
    return table


def _table_parameter(
    value: Any, path: str, problems: Problems, name: str
) -> DocumentParameter | None:
    """A document's parameter checks, then the table's own: a year, a `checked` note, no
    placeholder."""
    if not isinstance(value, dict):
        problems.add(path, "expected a parameter: value, unit, source, year, checked, status")
        return None
    note = value.get("checked")
    if not isinstance(note, str) or not note.strip() or len(note) > 2 * MAX_TEXT:
        problems.add(f"{path}.checked", "say how the figure was checked (and if second-hand)")
    figure = {key: item for key, item in value.items() if key != "checked"}
    found = check_parameter(figure, path, problems, name, COUNTRY_TABLE)
    if found is None:
        return None
    if found.year is None:
        problems.add(f"{path}.year", "a default names its source's year")
        return None
    if found.status == PLACEHOLDER:
        problems.add(f"{path}.status", "the table holds no placeholder: fix the value or drop it")
        return None
    return found if isinstance(note, str) and note.strip() else None


@cache
def country_defaults() -> CountryTable:
    """The shipped table, checked once per process."""
    raw = resources.files("twinhub.mrv").joinpath("data", "country_defaults.json").read_bytes()
    problems = Problems()
    table = check_country_table(orjson.loads(raw), problems)
    problems.raise_if_any("The shipped country defaults table is invalid.")
    return table
