"""Household surveys as statistics: which households a survey asks, how many it needs, and
how precisely its answers fix a parameter. Pure functions: the survey service reads the
sampling frame and the answers and hands them here, so an auditor recomputes a survey's
sample and its results from the seed, the frame and the answers alone.

The statistics, stated once (docs/surveys.md repeats them for readers):

- **The draw** is a simple random sample without replacement. Each unit of the frame (a
  stove DID: one household's stove) gets the key SHA-256(seed, unit); the sample is the
  `size` units with the smallest keys, in key order. SHA-256 behaves as a random function,
  so every subset of `size` units is equally likely; the sample depends on the seed and the
  frame's members only (not on their order), and anyone holding both draws it again.
- **The estimate of a mean** (household size) is the sample mean. Its confidence
  interval's half-width is t(1 - (1 - confidence) / 2, n - 1) * s / sqrt(n) * sqrt(1 - n/N),
  with s the sample standard deviation (n - 1 in its denominator), N the frame's size
  (the finite population correction: the sample is drawn without replacement) and t
  Student's quantile.
- **The estimate of a share** (stoves in use, households that also cook with another fuel)
  is the share p of yes answers. Its half-width is the Wilson score interval's,
  z / (1 + z^2/n) * sqrt(p(1 - p)/n + z^2/(4n^2)), times the same correction: unlike the
  mean's formula it does not shrink to nothing when every answer agrees (two "yes" answers
  fix no share to 90/10).
- The **achieved precision** is the half-width relative to the estimate: "90/10" is
  confidence 0.90 with a relative precision of 0.10 or better. With fewer than two answers,
  or an estimate of zero, there is no relative precision (None), which meets no target.
- **The planned size** for a target: n0 = (z * cv / precision)^2 with z the normal quantile
  and cv the expected coefficient of variation, corrected for the frame: n = n0 / (1 + (n0 -
  1) / N), rounded up. The achieved precision is what counts; the plan only sizes the draw.
What a survey fixes (household size, stove use, fuel stacking) comes in one shape, each
with the sample's size and the confidence and precision it reached: `check_sampled` below
checks it. Under metered cooking the meter is the measure, so only one of them is a
parameter (ROLES):

- **household size** enters the baseline cap (person-days); the methodology's 90/10 rule
  (`household_discount`) reads its confidence and precision, and a sample that misses it
  lowers the size the cap counts;
- **stove use** and **fuel stacking** are monitoring checks, reported with their sample
  and precision and whether they met the target, and used by no formula: a stove that is
  not used meters nothing and earns nothing, and the baseline fuel displaced is computed
  from the energy the project stove metered, so a household that also cooks on charcoal
  is credited only for what the meter recorded (docs/methodology.md, "Surveys").
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist, fmean, stdev
from typing import Any

from twinhub.kernel.errors import Problems
from twinhub.security.jcs import canonical

DEFAULT_CONFIDENCE, DEFAULT_PRECISION = 0.9, 0.1  # "90/10"


def _key(seed: str, unit: str) -> bytes:
    """The unit's place in the draw: SHA-256 over seed and unit, NUL-separated (neither
    may hold a NUL, so no two pairs give the same bytes)."""
    return hashlib.sha256(f"{seed}\x00{unit}".encode()).digest()


def draw(frame: Iterable[str], size: int, seed: str) -> list[str]:
    """The `size` units of `frame` with the smallest keys under `seed`, in key order (all of
    them when the frame is smaller). Duplicates in the frame count once."""
    if size < 0:
        raise ValueError("a sample size is not negative")
    units = set(frame)
    if any("\x00" in unit for unit in units) or "\x00" in seed:
        raise ValueError("units and seeds hold no NUL character")
    return sorted(units, key=lambda unit: _key(seed, unit))[:size]


def frame_digest(frame: Iterable[str]) -> str:
    """ "sha256:<hex>" over the JCS form of the frame's sorted members: what the survey
    records, so that a redraw can show it used the same frame."""
    return "sha256:" + hashlib.sha256(canonical(sorted(set(frame)))).hexdigest()


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile: exact for 1 and 2 degrees of freedom, the Cornish-Fisher
    expansion in the normal quantile (Abramowitz and Stegun 26.7.5, four terms) above;
    within 0.01 of the tables from 3 degrees of freedom, 0.001 from 10."""
    if not 0 < p < 1 or df < 1:
        raise ValueError("p in (0, 1) and at least one degree of freedom")
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    z = NormalDist().inv_cdf(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


@dataclass(frozen=True, slots=True)
class Estimate:
    """A parameter from a sample: the mean, and how precisely it is known."""

    value: float
    sample_size: int
    confidence: float
    half_width: float | None  # None below two answers: no spread to measure
    precision: float | None  # half_width / value; None when it cannot be computed

    def meets(self, target: float) -> bool:
        """True when the achieved relative precision is `target` or better."""
        return self.precision is not None and self.precision <= target


def estimate(values: Sequence[float], confidence: float, population: int) -> Estimate | None:
    """The mean of `values` (a sample of `population` units, drawn without replacement)
    with its relative precision at `confidence`; None for no values."""
    if not 0 < confidence < 1:
        raise ValueError("confidence in (0, 1)")
    n = len(values)
    if n == 0:
        return None
    mean = fmean(values)
    if n < 2:
        return Estimate(mean, n, confidence, None, None)
    half = t_quantile(1 - (1 - confidence) / 2, n - 1) * stdev(values) / math.sqrt(n)
    half *= _correction(n, population)
    precision = half / abs(mean) if mean else None
    return Estimate(mean, n, confidence, half, precision)


def estimate_share(answers: Sequence[bool], confidence: float, population: int) -> Estimate | None:
    """The share of yes among `answers` (a sample of `population` units, drawn without
    replacement) with its relative precision at `confidence` (Wilson score); None for no
    answers."""
    if not 0 < confidence < 1:
        raise ValueError("confidence in (0, 1)")
    n = len(answers)
    if n == 0:
        return None
    share = sum(1 for answer in answers if answer) / n
    if n < 2:
        return Estimate(share, n, confidence, None, None)
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    half = z / (1 + z * z / n) * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    half *= _correction(n, population)
    return Estimate(share, n, confidence, half, half / share if share else None)


def _correction(n: int, population: int) -> float:
    """The finite population correction of a sample of n from `population` (1 when the
    population is unknown or smaller than the sample)."""
    return math.sqrt(max(0.0, 1 - n / population)) if population >= n else 1.0


def planned_size(population: int, confidence: float, precision: float, cv: float) -> int:
    """How many units to draw for `precision` at `confidence` when the answers' expected
    coefficient of variation is `cv` (normal approximation, finite population corrected);
    never more than the population."""
    if population <= 0:
        return 0
    if not (0 < confidence < 1 and precision > 0 and cv > 0):
        raise ValueError("confidence in (0, 1), positive precision and cv")
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    n0 = (z * cv / precision) ** 2
    return min(population, math.ceil(n0 / (1 + (n0 - 1) / population)))


FIELDS = ("value", "sampleSize", "confidence", "precision", "surveyId", "seed")
PARAMETER, CHECK = "parameter", "check"
# What each surveyed figure is to a metered-cooking methodology (module docstring).
ROLES = {"householdSize": PARAMETER, "stoveUse": CHECK, "fuelStacking": CHECK}


@dataclass(frozen=True)
class SampledParameter:
    name: str
    value: float
    sample_size: int
    confidence: float
    precision: float
    survey: str | None
    seed: str | None

    def meets(self, confidence: float, precision: float) -> bool:
        """Whether the sample reached `confidence` with `precision` or better (90/10)."""
        return self.confidence >= confidence and self.precision <= precision

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
