"""Learned plausibility: what normal cooking looks like in this programme, and which stoves
depart from it.

The oracle's fixed rules (ranges, sessions per day) catch the impossible; this catches the
possible-but-suspicious, learnt from the programme's own telemetry: a meter whose sessions
claim more energy than its cumulative register recorded (tampering), a stove whose days
repeat another stove's (a clone, to be paid twice), a register that stops or runs backwards
(broken), and a household far from its cohort. Robust statistics (median and median absolute
deviation) are used rather than a black-box model because every finding must be explained
to a programme officer in one sentence, and they are not dragged by the outliers they look
for. Findings only ever flag a claim for review: nothing here approves or mints.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from itertools import combinations
from typing import NamedTuple


class StoveDay(NamedTuple):
    """One stove's cooking on one day, as the telemetry rollups give it. A named tuple, not
    a dataclass: a 10,000-stove month makes 300,000 of them, and a tuple is made in a
    tenth of a frozen dataclass's time."""

    stove: str
    day: date
    sessions: int
    energy: float  # kWh (or kg of fuel) that the sessions reported
    cooking_minutes: float
    morning_sessions: int  # sessions that started 04:00-10:59 local time
    evening_sessions: int  # sessions that started 16:00-21:59 local time
    meter_delta: float | None = None  # rise of the cumulative register, when reported


@dataclass(frozen=True)
class Finding:
    stove: str
    kind: str  # tampered, cloned, broken, unusual
    explanation: str
    evidence: dict[str, float | str] = field(default_factory=dict)


@dataclass(frozen=True)
class PlausibilityRules:
    """How far is too far. Defaults suit a cohort of households with one stove type."""

    outlier_z: float = 5.0  # robust z-score beyond which a stove is unusual for its cohort
    meter_tolerance: float = 0.15  # share by which sessions may differ from the register
    clone_share: float = 0.8  # share of common days on which two stoves' days are identical
    min_days: int = 7  # fewer days than this: too little to judge a pattern
    frozen_days: int = 10  # identical non-zero energy this many days running: a frozen series
    stuck_days: int = 3  # days with sessions but a register that did not move


@dataclass(frozen=True)
class Profile:
    """One stove's habits over the window: what the cohort comparison works on."""

    stove: str
    days: int
    active_days: int
    sessions_per_day: float
    energy_per_session: float
    minutes_per_session: float
    morning_share: float
    evening_share: float


FEATURES = {
    "sessions_per_day": ("cooking sessions a day", "{:.1f}"),
    "energy_per_session": ("energy per session", "{:.2f}"),
    "minutes_per_session": ("minutes per session", "{:.0f}"),
}


def profile(stove: str, days: list[StoveDay]) -> Profile:
    sessions = sum(d.sessions for d in days)
    per_session = sessions or 1
    return Profile(
        stove=stove,
        days=len(days),
        active_days=sum(1 for d in days if d.sessions),
        sessions_per_day=sessions / max(len(days), 1),
        energy_per_session=sum(d.energy for d in days) / per_session,
        minutes_per_session=sum(d.cooking_minutes for d in days) / per_session,
        morning_share=sum(d.morning_sessions for d in days) / per_session,
        evening_share=sum(d.evening_sessions for d in days) / per_session,
    )


def assess(stove_days: Iterable[StoveDay], rules: PlausibilityRules | None = None) -> list[Finding]:
    """Every finding for every stove in the window, the most serious kinds first."""
    rules = rules or PlausibilityRules()
    by_stove: dict[str, list[StoveDay]] = defaultdict(list)
    for day in stove_days:
        by_stove[day.stove].append(day)
    for days in by_stove.values():
        days.sort(key=lambda d: d.day)
    findings: list[Finding] = []
    for stove, days in by_stove.items():
        findings += _register_findings(stove, days, rules)
        findings += _frozen_findings(stove, days, rules)
    findings += _clone_findings(by_stove, rules)
    profiles = [profile(stove, days) for stove, days in by_stove.items()]
    findings += _cohort_findings(profiles, rules)
    order = {"tampered": 0, "cloned": 1, "broken": 2, "unusual": 3}
    return sorted(findings, key=lambda f: (order[f.kind], f.stove))


def _register_findings(stove: str, days: list[StoveDay], rules: PlausibilityRules) -> list[Finding]:
    """The cumulative register is the harder number to fake: compare the sessions to it."""
    metered = [d for d in days if d.meter_delta is not None]
    findings: list[Finding] = []
    backwards = [d for d in metered if d.meter_delta is not None and d.meter_delta < 0]
    if backwards:
        findings.append(
            Finding(
                stove,
                "broken",
                f"the cumulative meter went backwards on {backwards[0].day.isoformat()}"
                + (f" and {len(backwards) - 1} other day(s)" if len(backwards) > 1 else ""),
                {"days": float(len(backwards))},
            )
        )
    stuck = run_length(d.sessions > 0 and d.meter_delta == 0 for d in metered)
    if stuck >= rules.stuck_days:
        findings.append(
            Finding(
                stove,
                "broken",
                f"sessions were reported on {stuck} days running while the meter did not move",
                {"days": float(stuck)},
            )
        )
    if len(metered) < rules.min_days:
        return findings
    reported = sum(d.energy for d in metered)
    register = sum(d.meter_delta or 0.0 for d in metered if (d.meter_delta or 0.0) > 0)
    if register > 0 and abs(reported - register) > rules.meter_tolerance * register:
        more = "more" if reported > register else "less"
        findings.append(
            Finding(
                stove,
                "tampered",
                f"its sessions report {reported:.2f} over {len(metered)} days, "
                f"{abs(reported / register - 1):.0%} {more} than its cumulative meter "
                f"recorded ({register:.2f})",
                {"reported": round(reported, 6), "meter": round(register, 6)},
            )
        )
    return findings


def run_length(flags: Iterable[bool]) -> int:
    """The longest run of true values."""
    best = current = 0
    for flag in flags:
        current = current + 1 if flag else 0
        best = max(best, current)
    return best


def _frozen_findings(stove: str, days: list[StoveDay], rules: PlausibilityRules) -> list[Finding]:
    values = [round(d.energy, 4) for d in days]
    longest = run_length(
        value > 0 and index > 0 and value == values[index - 1] for index, value in enumerate(values)
    )
    if longest + 1 >= rules.frozen_days:
        return [
            Finding(
                stove,
                "broken",
                f"it reported exactly the same energy ({values[0]:g}) on {longest + 1} days "
                "running: a frozen or fabricated series",
                {"days": float(longest + 1)},
            )
        ]
    return []


def _clone_findings(by_stove: dict[str, list[StoveDay]], rules: PlausibilityRules) -> list[Finding]:
    """Stoves whose days are the same to the watt-hour on most common days. Days are bucketed
    by their exact values, so only stoves that share a bucket are compared: linear in the
    number of stove-days rather than quadratic in stoves."""
    buckets: dict[tuple[date, int, float], list[str]] = defaultdict(list)
    for stove, days in by_stove.items():
        for d in days:
            if d.sessions:
                buckets[(d.day, d.sessions, round(d.energy, 3))].append(stove)
    shared: Counter[tuple[str, str]] = Counter()
    for stoves in buckets.values():
        if 1 < len(stoves) <= 50:  # a larger bucket is a common value, not a copy
            # Counter.update counts an iterable in C: a month of 10,000 stoves whose
            # energy is read to the watt-hour shares a million pairs of days.
            shared.update(combinations(sorted(set(stoves)), 2))
    findings: list[Finding] = []
    least = rules.clone_share * rules.min_days  # fewer shared days can never be a clone
    for (first, second), same in shared.items():
        if same < least:
            continue
        common = _active_common_days(by_stove[first], by_stove[second])
        if common >= rules.min_days and same >= rules.clone_share * common:
            for stove, other in ((first, second), (second, first)):
                findings.append(
                    Finding(
                        stove,
                        "cloned",
                        f"its daily readings repeat those of {other} on {same} of {common} days",
                        {"other": other, "days": float(same), "common": float(common)},
                    )
                )
    return findings


def _active_common_days(first: list[StoveDay], second: list[StoveDay]) -> int:
    active = {d.day for d in first if d.sessions}
    return sum(1 for d in second if d.sessions and d.day in active)


def _cohort_findings(profiles: list[Profile], rules: PlausibilityRules) -> list[Finding]:
    """Robust z-scores of each stove's habits against the cohort's median habits."""
    judged = [p for p in profiles if p.active_days >= rules.min_days]
    if len(judged) < 10:
        return []
    findings: list[Finding] = []
    for feature, (label, shape) in FEATURES.items():
        values = [getattr(p, feature) for p in judged]
        centre = statistics.median(values)
        spread = statistics.median(abs(v - centre) for v in values) * 1.4826
        if spread <= 0:
            continue
        for p in judged:
            value = getattr(p, feature)
            z = (value - centre) / spread
            if abs(z) > rules.outlier_z:
                direction = "above" if z > 0 else "below"
                findings.append(
                    Finding(
                        p.stove,
                        "unusual",
                        f"{label} {shape.format(value)} is far {direction} the programme's "
                        f"typical {shape.format(centre)} (robust z-score {z:.1f})",
                        {"feature": feature, "value": value, "median": centre, "z": z},
                    )
                )
    return findings
