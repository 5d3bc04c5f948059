"""A project design document (PDD), pure: its shape, its checks, and the parameters it fixes.

The document is what a verifier validates and what every credit of the project traces back
to: the methodology and version, the host country, the crediting period, the baseline fuel,
the leakage option, the monitoring plan, the stove models (each with its methodology case,
its fuel, its tested figures and the test certificate's hash) and the parameters it fixes.
Country-level parameters (fNRB, the grid emission factor) are taken from the country
defaults table (twinhub.mrv.country_defaults) unless the document fixes its own: the rule
lives in `effective_parameters` below, nowhere else.

Every figure is a Parameter carrying value, unit, source, year, an evidence hash and a
status; `placeholder` blocks issuance (`placeholders()` names each), `source-unchecked`
is allowed but reported. The digest is SHA-256 over the document's RFC 8785 (JCS) form.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from twinhub.kernel.errors import Problems
from twinhub.mrv.methodology import Methodology
from twinhub.security.jcs import DIGEST, digest

STATUSES = ("checked", "source-unchecked", "placeholder")
CHECKED, UNCHECKED, PLACEHOLDER = STATUSES
CASES = (1, 2)  # MECD case 1: tested efficiency; case 2: specific consumption
PROJECT_FUELS = ("electricity", "lpg", "ethanol", "pellets", "biogas", "charcoal", "wood")
BASELINE_FUELS = ("wood", "charcoal")  # the displaced fuels the methodology has factors for
LEAKAGE_OPTIONS = ("default",)  # the methodology's default leakage share of (BE - PE)
MEASURES = ("meter",)  # the meter register is the measure
REQUIRED_PARAMETERS = ("fNRB", "EF_grid")  # set per country: the document or the table
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,63}$")
COUNTRY = re.compile(r"^[A-Z]{2}$")
VERSION = re.compile(r"^\d{1,4}\.\d{1,4}\.\d{1,4}$")
MAX_TEXT = 1000
MAX_PARAMETERS = 128
MAX_MODELS = 64
# Where a parameter's figure came from: the document itself, the country table, or (for a
# project with no stored document) the methodology's own defaults.
DOCUMENT, COUNTRY_TABLE, METHODOLOGY = "document", "country-defaults", "methodology"


@dataclass(frozen=True)
class DocumentParameter:
    """One fixed figure with everything an auditor needs to trace it."""

    name: str
    value: float
    unit: str
    source: str
    year: int | None
    evidence: str | None  # "sha256:<hex>" of the attachment that shows it
    status: str
    origin: str = DOCUMENT

    def as_record(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "unit": self.unit,
            "source": self.source,
            "year": self.year,
            "evidence": self.evidence,
            "status": self.status,
            "origin": self.origin,
        }


@dataclass(frozen=True)
class StoveModel:
    """A stove model as the document fixes it: its methodology case and tested figures."""

    name: str
    case: int
    fuel: str
    efficiency: DocumentParameter | None  # case 1
    specific_consumption: DocumentParameter | None  # case 2, the project stove
    baseline_specific_consumption: DocumentParameter | None  # case 2, the baseline stove
    test_certificate: str | None

    def parameters(self) -> list[DocumentParameter]:
        found = (self.efficiency, self.specific_consumption, self.baseline_specific_consumption)
        return [p for p in found if p is not None]


@dataclass(frozen=True)
class MonitoringPlan:
    measure: str
    reporting_interval_hours: float
    min_fleet_reporting_share: float | None  # None: the methodology's rule


@dataclass(frozen=True)
class ProjectDocument:
    document: dict[str, Any] = field(repr=False)
    digest: str
    methodology_id: str
    methodology_version: str
    country: str
    crediting_from: date
    crediting_to: date
    baseline_fuel: str
    leakage: str
    parameters: dict[str, DocumentParameter]  # effective: the table's, then the document's
    stove_models: dict[str, StoveModel]
    monitoring_plan: MonitoringPlan
    defaults: bool = False  # built from the methodology's defaults: no document is stored

    def placeholders(self) -> list[str]:
        """Paths of every figure marked placeholder: each blocks issuance."""
        return [path for path, p in self._figures() if p.status == PLACEHOLDER]

    def unchecked(self) -> list[str]:
        """Paths of every figure whose source could not be checked: reported, allowed."""
        return [path for path, p in self._figures() if p.status == UNCHECKED]

    def attachments(self) -> set[str]:
        """Every sha256 the document cites (evidence and test certificates)."""
        found = {p.evidence for _, p in self._figures() if p.evidence}
        found |= {m.test_certificate for m in self.stove_models.values() if m.test_certificate}
        return found

    def parameter_values(self) -> dict[str, float]:
        return {name: p.value for name, p in self.parameters.items()}

    def summary(self) -> dict[str, Any]:
        """What a monitoring report carries of the document."""
        return {
            "digest": self.digest,
            "source": METHODOLOGY if self.defaults else DOCUMENT,
            "country": self.country,
            "baselineFuel": self.baseline_fuel,
            "leakage": self.leakage,
            "parameters": {n: p.as_record() for n, p in sorted(self.parameters.items())},
            "stoveModels": sorted(self.stove_models),
            "placeholders": self.placeholders(),
            "sourceUnchecked": self.unchecked(),
        }

    def _figures(self) -> list[tuple[str, DocumentParameter]]:
        figures = [(f"parameters.{name}", p) for name, p in sorted(self.parameters.items())]
        for name, model in sorted(self.stove_models.items()):
            for key, p in (
                ("efficiency", model.efficiency),
                ("specificConsumption", model.specific_consumption),
                ("baselineSpecificConsumption", model.baseline_specific_consumption),
            ):
                if p is not None:
                    figures.append((f"stoveModels.{name}.{key}", p))
        return figures


def effective_parameters(
    country: str,
    own: Mapping[str, DocumentParameter],
    table: Mapping[str, Mapping[str, DocumentParameter]],
) -> dict[str, DocumentParameter]:
    """The rule: a document takes the country table's figures unless it fixes its own."""
    merged = dict(table.get(country, {}))
    merged.update(own)
    return merged


def check_parameter(
    value: Any, path: str, problems: Problems, name: str, origin: str = DOCUMENT
) -> DocumentParameter | None:
    """A Parameter object checked field by field; None (with problems) when it is not one."""
    if not isinstance(value, dict):
        problems.add(path, "expected a parameter: value, unit, source, year, evidence, status")
        return None
    before = len(problems.items)
    for extra in sorted(set(value) - {"value", "unit", "source", "year", "evidence", "status"}):
        problems.add(f"{path}.{extra}", "not a field of a parameter")
    number = value.get("value")
    if isinstance(number, bool) or not isinstance(number, int | float):
        problems.add(f"{path}.value", "expected a number")
    elif not math.isfinite(float(number)):
        problems.add(f"{path}.value", "expected a finite number")
    unit, source = value.get("unit"), value.get("source")
    if not isinstance(unit, str) or not 0 < len(unit) <= 64:
        problems.add(f"{path}.unit", "expected a unit (1-64 characters), e.g. tCO2/MWh")
    if not isinstance(source, str) or not source.strip() or len(source) > MAX_TEXT:
        problems.add(f"{path}.source", "every parameter names its source (document, table, year)")
    year = value.get("year")
    if year is not None and (
        isinstance(year, bool) or not isinstance(year, int) or not 1900 <= year <= 2200
    ):
        problems.add(f"{path}.year", "expected the source's year (1900-2200) or null")
    evidence = value.get("evidence")
    if evidence is not None and (not isinstance(evidence, str) or not DIGEST.match(evidence)):
        problems.add(f"{path}.evidence", "expected sha256:<64 lower-case hex> or null")
    status = value.get("status")
    if status not in STATUSES:
        problems.add(f"{path}.status", f"expected one of {', '.join(STATUSES)}")
    if len(problems.items) > before:
        return None
    return DocumentParameter(name, float(number), unit, source, year, evidence, status, origin)


def check_project_document(
    document: Any,
    problems: Problems,
    where: str = "document",
    table: Mapping[str, Mapping[str, DocumentParameter]] | None = None,
) -> ProjectDocument | None:
    """Check a project design document; every fault goes into `problems` with its path
    (`document.stoveModels.EPC-6L.specificConsumption.unit`) and None is returned when
    there was any. `table` is the country defaults table (the shipped one by default)."""
    if not isinstance(document, dict):
        problems.add(where, "expected a project design document (an object)")
        return None
    if table is None:
        from twinhub.mrv.country_defaults import country_defaults

        table = country_defaults()
    before = len(problems.items)
    known = {
        "methodology",
        "country",
        "creditingPeriod",
        "baselineFuel",
        "leakage",
        "parameters",
        "monitoringPlan",
        "stoveModels",
    }
    for extra in sorted(set(document) - known):
        problems.add(f"{where}.{extra}", "not a field of a project design document")
    ident, version = _methodology(document.get("methodology"), f"{where}.methodology", problems)
    country = document.get("country")
    if not isinstance(country, str) or not COUNTRY.match(country):
        problems.add(f"{where}.country", "expected an ISO 3166-1 alpha-2 code such as KE")
        country = ""
    start, end = _crediting_period(document.get("creditingPeriod"), where, problems)
    baseline = _choice(document, "baselineFuel", BASELINE_FUELS, where, problems)
    leakage = _choice(document, "leakage", LEAKAGE_OPTIONS, where, problems)
    own = _parameters(document.get("parameters", {}), f"{where}.parameters", problems)
    parameters = effective_parameters(country, own, table)
    if country:
        for name in REQUIRED_PARAMETERS:
            if name not in parameters:
                problems.add(
                    f"{where}.parameters.{name}",
                    f"the country defaults table has no {name} for {country}: "
                    "the document must fix it",
                )
    plan = _monitoring_plan(document.get("monitoringPlan"), f"{where}.monitoringPlan", problems)
    models = _stove_models(document.get("stoveModels"), f"{where}.stoveModels", problems)
    if len(problems.items) > before or plan is None or start is None or end is None:
        return None
    return ProjectDocument(
        document=document,
        digest=digest(document),
        methodology_id=ident,
        methodology_version=version,
        country=country,
        crediting_from=start,
        crediting_to=end,
        baseline_fuel=baseline,
        leakage=leakage,
        parameters=parameters,
        stove_models=models,
        monitoring_plan=plan,
    )


def _methodology(value: Any, path: str, problems: Problems) -> tuple[str, str]:
    if not isinstance(value, dict) or set(value) != {"id", "version"}:
        problems.add(path, "expected {id, version} of the methodology the project applies")
        return "", ""
    ident, version = value["id"], value["version"]
    if not isinstance(ident, str) or not re.match(r"^[a-z0-9][a-z0-9\-]{0,63}$", ident):
        problems.add(f"{path}.id", "expected a methodology id such as clean-cooking-mecd")
        ident = ""
    if not isinstance(version, str) or not VERSION.match(version):
        problems.add(f"{path}.version", "expected a version such as 2.0.0")
        version = ""
    return ident, version


def _crediting_period(
    value: Any, where: str, problems: Problems
) -> tuple[date | None, date | None]:
    path = f"{where}.creditingPeriod"
    if not isinstance(value, dict) or set(value) != {"from", "to"}:
        problems.add(path, "expected {from, to} as ISO dates")
        return None, None
    found: list[date | None] = []
    for key in ("from", "to"):
        try:
            found.append(date.fromisoformat(value[key]))
        except (TypeError, ValueError):
            problems.add(f"{path}.{key}", "expected an ISO date such as 2026-01-01")
            found.append(None)
    start, end = found
    if start is not None and end is not None and end < start:
        problems.add(f"{path}.to", "must not be before from")
        return None, None
    return start, end


def _choice(
    document: dict[str, Any], key: str, options: tuple[str, ...], where: str, problems: Problems
) -> str:
    value = document.get(key)
    if value not in options:
        problems.add(f"{where}.{key}", f"expected one of {', '.join(options)}")
        return ""
    return str(value)


def _parameters(value: Any, path: str, problems: Problems) -> dict[str, DocumentParameter]:
    if not isinstance(value, dict):
        problems.add(path, "expected an object of named parameters")
        return {}
    if len(value) > MAX_PARAMETERS:
        problems.add(path, f"at most {MAX_PARAMETERS} parameters")
        return {}
    found: dict[str, DocumentParameter] = {}
    for name, entry in value.items():
        if not isinstance(name, str) or not NAME.match(name):
            problems.add(f"{path}.{name}", "names start with a letter, then letters, digits or _")
            continue
        parameter = check_parameter(entry, f"{path}.{name}", problems, name)
        if parameter is not None:
            found[name] = parameter
    return found


def _monitoring_plan(value: Any, path: str, problems: Problems) -> MonitoringPlan | None:
    if not isinstance(value, dict):
        problems.add(path, "expected {measure, reportingIntervalHours, minFleetReportingShare}")
        return None
    before = len(problems.items)
    for extra in sorted(
        set(value) - {"measure", "reportingIntervalHours", "minFleetReportingShare"}
    ):
        problems.add(f"{path}.{extra}", "not a field of a monitoring plan")
    measure = value.get("measure")
    if measure not in MEASURES:
        problems.add(f"{path}.measure", f"expected one of {', '.join(MEASURES)}")
    hours = value.get("reportingIntervalHours")
    if isinstance(hours, bool) or not isinstance(hours, int | float) or not 0 < hours <= 744:
        problems.add(f"{path}.reportingIntervalHours", "expected hours between 0 and 744")
    share = value.get("minFleetReportingShare")
    if share is not None and (
        isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1
    ):
        problems.add(f"{path}.minFleetReportingShare", "expected a fraction from 0 to 1")
    if len(problems.items) > before:
        return None
    return MonitoringPlan(str(measure), float(hours), None if share is None else float(share))


_CASE_FIELDS = {
    1: ("efficiency",),
    2: ("specificConsumption", "baselineSpecificConsumption"),
}


def _stove_models(value: Any, path: str, problems: Problems) -> dict[str, StoveModel]:
    if not isinstance(value, dict):
        problems.add(path, "expected an object of stove models by name")
        return {}
    if len(value) > MAX_MODELS:
        problems.add(path, f"at most {MAX_MODELS} stove models")
        return {}
    found: dict[str, StoveModel] = {}
    for name, entry in value.items():
        model = _stove_model(name, entry, f"{path}.{name}", problems)
        if model is not None:
            found[name] = model
    return found


def _stove_model(name: Any, entry: Any, at: str, problems: Problems) -> StoveModel | None:
    if not isinstance(name, str) or not MODEL.match(name):
        problems.add(at, "a model name is letters, digits, '.', '-' or '_' (1-64)")
        return None
    if not isinstance(entry, dict):
        problems.add(at, "expected {case, fuel, testCertificate, ...}")
        return None
    before = len(problems.items)
    case, fuel = entry.get("case"), entry.get("fuel")
    if isinstance(case, bool) or case not in CASES:
        problems.add(f"{at}.case", "expected 1 (tested efficiency) or 2 (specific consumption)")
        return None
    if fuel not in PROJECT_FUELS:
        problems.add(f"{at}.fuel", f"expected one of {', '.join(PROJECT_FUELS)}")
    wanted = _CASE_FIELDS[case]
    other = {key for fields in _CASE_FIELDS.values() for key in fields} - set(wanted)
    for extra in sorted(set(entry) - {"case", "fuel", "testCertificate", *wanted}):
        reason = f"not used by case {case}" if extra in other else "not a field of a stove model"
        problems.add(f"{at}.{extra}", reason)
    certificate = entry.get("testCertificate")
    if not isinstance(certificate, str) or not DIGEST.match(certificate):
        problems.add(f"{at}.testCertificate", "expected the test certificate's sha256:<hex>")
    figures: dict[str, DocumentParameter | None] = {}
    for key in wanted:
        if key not in entry:
            problems.add(f"{at}.{key}", f"case {case} needs the model's {key}")
            continue
        figures[key] = check_parameter(entry[key], f"{at}.{key}", problems, key)
    efficiency = figures.get("efficiency")
    if efficiency is not None and not 0 < efficiency.value <= 1:
        problems.add(f"{at}.efficiency.value", "expected a fraction above 0, at most 1")
    project, baseline = (
        figures.get("specificConsumption"),
        figures.get("baselineSpecificConsumption"),
    )
    for key, figure in (
        ("specificConsumption", project),
        ("baselineSpecificConsumption", baseline),
    ):
        if figure is not None and figure.value <= 0:
            problems.add(f"{at}.{key}.value", "expected a positive specific consumption")
    if project is not None and baseline is not None and project.unit != baseline.unit:
        problems.add(
            f"{at}.baselineSpecificConsumption.unit",
            f"must be the project stove's unit ({project.unit}) so the ratio has no unit",
        )
    if len(problems.items) > before:
        return None
    return StoveModel(name, case, str(fuel), efficiency, project, baseline, certificate)


_DEFAULTS: dict[int, tuple[Methodology, ProjectDocument]] = {}


def default_document(methodology: Methodology) -> ProjectDocument:
    """The document a project with none stored is computed under: the methodology's own
    defaults, its country-level figures marked placeholder (they block issuance), the
    charcoal baseline, the default leakage option, the meter as the measure, no stove
    models (each stove's registry efficiency is taken as a case 1 model). Reports say so.
    Made once per methodology (both are frozen): every claim approved computes under it,
    and building and hashing it cost about a tenth of a claim's computation."""
    found = _DEFAULTS.get(id(methodology))
    if found is not None and found[0] is methodology:
        return found[1]
    if len(_DEFAULTS) > 64:
        _DEFAULTS.clear()
    made = _default_document(methodology)
    _DEFAULTS[id(methodology)] = (methodology, made)
    return made


def _default_document(methodology: Methodology) -> ProjectDocument:
    parameters = {
        name: DocumentParameter(
            name, p.value, p.unit, p.source, None, None, PLACEHOLDER, METHODOLOGY
        )
        for name, p in methodology.parameters.items()
        if name in REQUIRED_PARAMETERS
    }
    shape = {
        "methodology": {"id": methodology.id, "version": methodology.version},
        "defaults": "no project design document is stored: the methodology's defaults",
        "baselineFuel": "charcoal",
        "parameters": {name: p.as_record() for name, p in sorted(parameters.items())},
    }
    return ProjectDocument(
        document=shape,
        digest=digest(shape),
        methodology_id=methodology.id,
        methodology_version=methodology.version,
        country="",
        crediting_from=date.min,
        crediting_to=date.max,
        baseline_fuel="charcoal",
        leakage="default",
        parameters=parameters,
        stove_models={},
        monitoring_plan=MonitoringPlan("meter", 24.0, None),
        defaults=True,
    )


def document_overrides(
    methodology: Methodology, document: ProjectDocument, problems: Problems, where: str = "document"
) -> dict[str, float]:
    """The figures the document sets in place of the methodology's defaults, by parameter
    name. A document for another methodology or version, a figure the methodology does not
    declare, or one in another unit is a fault (with its path)."""
    if (document.methodology_id, document.methodology_version) != (
        methodology.id,
        methodology.version,
    ):
        problems.add(
            f"{where}.methodology",
            f"the document applies {document.methodology_id} {document.methodology_version}, "
            f"the protocol computes with {methodology.id} {methodology.version}",
        )
    overrides: dict[str, float] = {}
    for name, parameter in sorted(document.parameters.items()):
        declared = methodology.parameters.get(name)
        if declared is None:
            problems.add(
                f"{where}.parameters.{name}",
                f"not a parameter of {methodology.id} {methodology.version}",
            )
        elif declared.unit != parameter.unit:
            problems.add(
                f"{where}.parameters.{name}.unit",
                f"the methodology counts {name} in {declared.unit}, not {parameter.unit}",
            )
        else:
            overrides[name] = parameter.value
    share = document.monitoring_plan.min_fleet_reporting_share
    if share is not None and "min_fleet_reporting_share" in methodology.parameters:
        overrides["min_fleet_reporting_share"] = share
    return overrides
