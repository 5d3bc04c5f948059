"""The country defaults table: fNRB and the grid emission factor by host country, each with
its source and year, shipped as data (data/country_defaults.json) so an auditor reads the
figures the platform uses. A project design document takes these unless it fixes its own
(twinhub.mrv.project_document.effective_parameters)."""

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
            found = check_parameter(value, f"{at}.{name}", problems, name, COUNTRY_TABLE)
            if found is not None:
                figures[name] = found
        table[code] = figures
    return table


@cache
def country_defaults() -> CountryTable:
    """The shipped table, checked once per process."""
    raw = resources.files("twinhub.mrv").joinpath("data", "country_defaults.json").read_bytes()
    problems = Problems()
    table = check_country_table(orjson.loads(raw), problems)
    problems.raise_if_any("The shipped country defaults table is invalid.")
    return table
