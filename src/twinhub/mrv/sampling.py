"""Sampled parameters: figures a survey estimates from a sample of households (household
size, stove use, fuel stacking), each with the sample's size and the confidence and
relative precision it reached. The survey context produces them in this shape; the
methodology's 90/10 rule (mrv/methodologies/clean-cooking-mecd.json, `household_discount`)
reads the confidence and precision of `householdSize`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from twinhub.kernel.errors import Problems

FIELDS = ("value", "sampleSize", "confidence", "precision", "surveyId", "seed")


@dataclass(frozen=True)
class SampledParameter:
    name: str
    value: float
    sample_size: int
    confidence: float
    precision: float
    survey: str | None
    seed: str | None

    def as_record(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "sampleSize": self.sample_size,
            "confidence": self.confidence,
            "precision": self.precision,
            "surveyId": self.survey,
            "seed": self.seed,
        }


def _fraction(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 <= value <= 1
    )


def check_sampled(
    value: Any, problems: Problems, where: str = "sampled"
) -> dict[str, SampledParameter]:
    """Every sampled parameter checked field by field; faults go into `problems`."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.add(where, "expected an object of sampled parameters by name")
        return {}
    found: dict[str, SampledParameter] = {}
    for name, entry in value.items():
        at = f"{where}.{name}"
        if not isinstance(entry, Mapping):
            problems.add(at, "expected {value, sampleSize, confidence, precision, ...}")
            continue
        before = len(problems.items)
        for extra in sorted(set(entry) - set(FIELDS)):
            problems.add(f"{at}.{extra}", "not a field of a sampled parameter")
        number, size = entry.get("value"), entry.get("sampleSize")
        if isinstance(number, bool) or not isinstance(number, int | float):
            problems.add(f"{at}.value", "expected a number")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            problems.add(f"{at}.sampleSize", "expected the number of households sampled (>= 1)")
        for key in ("confidence", "precision"):
            if not _fraction(entry.get(key)):
                problems.add(f"{at}.{key}", "expected a fraction from 0 to 1")
        for key in ("surveyId", "seed"):
            if entry.get(key) is not None and not isinstance(entry.get(key), str):
                problems.add(f"{at}.{key}", "expected text or null")
        if len(problems.items) == before:
            found[name] = SampledParameter(
                name,
                float(number),
                size,
                float(entry["confidence"]),
                float(entry["precision"]),
                entry.get("surveyId"),
                entry.get("seed"),
            )
    return found
