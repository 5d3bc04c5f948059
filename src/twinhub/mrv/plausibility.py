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
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from itertools import groupby, repeat
from operator import eq, itemgetter
from typing import NamedTuple

import numpy as np

from twinhub.kernel.collector import collector_paused
from twinhub.mrv.day_columns import DayColumns, DaySums, day_sums, python_round


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


def profile(stove: str, days: Sequence[StoveDay]) -> Profile:
    # The days as columns (one C pass), each summed in the days' order.
    columns = zip(*days, strict=True) if days else _NONE
    _, _, counts, energy, minutes, mornings, evenings, _ = columns
    sessions = sum(counts)
    per_session = sessions or 1
    return Profile(
        stove=stove,
        days=len(days),
        active_days=sum(map(bool, counts)),
        sessions_per_day=sessions / max(len(days), 1),
        energy_per_session=sum(energy) / per_session,
        minutes_per_session=sum(minutes) / per_session,
        morning_share=sum(mornings) / per_session,
        evening_share=sum(evenings) / per_session,
    )


_NONE: list[tuple[()]] = [()] * len(StoveDay._fields)  # the columns of no days


@collector_paused()  # many small objects, none in a cycle (kernel.collector)
def assess(stove_days: Iterable[StoveDay], rules: PlausibilityRules | None = None) -> list[Finding]:
    """Every finding for every stove in the window, the most serious kinds first."""
    rules = rules or PlausibilityRules()
    by_stove: dict[str, list[StoveDay]] = defaultdict(list)
    for stove, run in groupby(stove_days, key=itemgetter(0)):  # a stove's days come together
        by_stove[stove].extend(run)
    by_day = itemgetter(1)  # StoveDay.day
    for days in by_stove.values():
        days.sort(key=by_day)
    return assess_stoves(by_stove, DayColumns.of(by_stove.values()), rules)


@collector_paused()  # many small objects, none in a cycle (kernel.collector)
def assess_stoves(
    by_stove: Mapping[str, Sequence[StoveDay]],
    columns: DayColumns | None,
    rules: PlausibilityRules | None = None,
) -> list[Finding]:
    """`assess` of stoves whose days are grouped already: each stove's days (its own, in
    day order, none empty), and their `columns` (DayColumns.of them; None: a figure is
    not a plain number)."""
    rules = rules or PlausibilityRules()
    findings: list[Finding] = []
    sums = columns.sums() if columns is not None else None
    if sums is None:
        sums = [day_sums(days) for days in by_stove.values()]
    for (stove, days), summed in zip(by_stove.items(), sums, strict=True):
        findings += _register_findings(stove, days, summed, rules)
    # Only a stove with a day that repeats the day before can have a frozen series.
    stoves = list(by_stove)
    for index in range(len(stoves)) if columns is None else _repeating(columns).tolist():
        findings += _frozen_findings(stoves[index], by_stove[stoves[index]], rules)
    findings += _clone_findings(by_stove, rules, columns)
    profiles = [profile(stove, days) for stove, days in by_stove.items()]
    findings += _cohort_findings(profiles, rules)
    order = {"tampered": 0, "cloned": 1, "broken": 2, "unusual": 3}
    return sorted(findings, key=lambda f: (order[f.kind], f.stove))


def _register_findings(
    stove: str, days: Sequence[StoveDay], sums: DaySums, rules: PlausibilityRules
) -> list[Finding]:
    """The cumulative register is the harder number to fake: compare the sessions to it.
    `sums`: the days' (day_sums); the days are searched one by one only when a rise fell,
    is NaN or is 0."""
    findings: list[Finding] = []
    metered = (
        [d for d in days if d.meter_delta is not None] if sums.odd_rise or sums.zero_rise else []
    )
    shown = [d.meter_delta for d in metered]
    if shown and not min(shown) >= 0:  # a NaN first makes min NaN: then look day by day
        backwards = [d for d in metered if d.meter_delta is not None and d.meter_delta < 0]
    else:
        backwards = []
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
    stuck = (
        0 if 0 not in shown else run_length(d.sessions > 0 and d.meter_delta == 0 for d in metered)
    )
    if stuck >= rules.stuck_days:
        findings.append(
            Finding(
                stove,
                "broken",
                f"sessions were reported on {stuck} days running while the meter did not move",
                {"days": float(stuck)},
            )
        )
    if sums.read < rules.min_days:
        return findings
    reported, register = sums.metered_energy, sums.register
    if register > 0 and abs(reported - register) > rules.meter_tolerance * register:
        more = "more" if reported > register else "less"
        findings.append(
            Finding(
                stove,
                "tampered",
                f"its sessions report {reported:.2f} over {sums.read} days, "
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


def _repeating(columns: DayColumns) -> np.ndarray:
    """The groups (stoves) with a day whose energy, to 4 places, equals the day before's."""
    values = python_round(columns.energy, 4)
    same = np.zeros(len(values), dtype=bool)
    same[1:] = values[1:] == values[:-1]
    same[columns.starts[:-1]] = False  # a stove's first day has no day before
    return columns.groups_where(same)


def _frozen_findings(
    stove: str, days: Sequence[StoveDay], rules: PlausibilityRules
) -> list[Finding]:
    values = list(map(round, [d.energy for d in days], repeat(4)))
    repeated = any(map(eq, values, values[1:]))  # most stoves: no day repeats the one before
    longest = (
        run_length(
            value > 0 and index > 0 and value == values[index - 1]
            for index, value in enumerate(values)
        )
        if repeated
        else 0
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


def _clone_findings(
    by_stove: Mapping[str, Sequence[StoveDay]], rules: PlausibilityRules, columns: DayColumns | None
) -> list[Finding]:
    """Stoves whose days are the same to the watt-hour on most common days. Days are bucketed
    by their exact values, so only stoves that share a bucket are compared: linear in the
    number of stove-days rather than quadratic in stoves."""
    findings: list[Finding] = []
    least = rules.clone_share * rules.min_days  # fewer shared days can never be a clone
    for (first, second), same in shared_days(by_stove, least, columns):
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


MAX_BUCKET = 50  # stove-days of one value: more is a common value, not a copy


def shared_days(
    by_stove: Mapping[str, Sequence[StoveDay]], least: float = 1, columns: DayColumns | None = None
) -> list[tuple[tuple[str, str], int]]:
    """Each pair of stoves (in name order) with the number of buckets (day, sessions, energy
    to the watt-hour) of cooking days they share, when at least `least`, a bucket of more
    than MAX_BUCKET stove-days not counted; in the order the pairs are first met, buckets in
    the order the stoves' days make them. A 10,000-stove month whose energy is read to the
    watt-hour shares a million pairs of days: they are made and counted as integer arrays
    (numpy), not tuples."""
    names = sorted(by_stove)
    number = {name: index for index, name in enumerate(names)}
    columns = columns or DayColumns.of(by_stove.values())  # `columns`: of by_stove's days
    if columns is not None:
        bucket_of, owner_of = _buckets(columns, [number[stove] for stove in by_stove])
    else:  # a figure that is not a plain number: day by day
        buckets: dict[tuple[date, int, float], int] = {}
        bucket_of, owner_of = [], []
        for stove, days in by_stove.items():
            index = number[stove]
            for d in days:
                if d.sessions:
                    key = (d.day, d.sessions, round(d.energy, 3))
                    bucket_of.append(buckets.setdefault(key, len(buckets)))
                    owner_of.append(index)
    if not len(bucket_of):
        return []
    bucket, owner = np.asarray(bucket_of, dtype=np.int64), np.asarray(owner_of, dtype=np.int64)
    sizes = np.bincount(bucket)  # stove-days a bucket, a stove's repeated day counted twice
    order = np.lexsort((owner, bucket))
    bucket, owner = bucket[order], owner[order]
    distinct = np.ones(len(bucket), dtype=bool)  # each stove once a bucket
    distinct[1:] = (bucket[1:] != bucket[:-1]) | (owner[1:] != owner[:-1])
    bucket, owner = bucket[distinct], owner[distinct]
    kept = (sizes[bucket] > 1) & (sizes[bucket] <= MAX_BUCKET)
    bucket, owner = bucket[kept], owner[kept]
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    counts = np.diff(np.r_[starts, len(bucket)])
    firsts, seconds, places, steps = [], [], [], []
    for count in np.unique(counts).tolist():
        if count < 2:
            continue
        groups = starts[counts == count]
        a, b = np.triu_indices(count, 1)  # combinations' order
        members = owner[groups[:, None] + np.arange(count)]
        firsts.append(members[:, a].ravel())
        seconds.append(members[:, b].ravel())
        places.append(np.repeat(bucket[groups], len(a)))
        steps.append(np.tile(np.arange(len(a)), len(groups)))
    if not firsts:
        return []
    pairs = np.concatenate(firsts) * len(names) + np.concatenate(seconds)
    unique, shared = np.unique(pairs, return_counts=True)
    often = shared >= least
    unique, shared = unique[often], shared[often]
    if not len(unique):
        return []
    # Where each pair was first met (its bucket, then its place among the bucket's pairs),
    # sought only among the pairs counted.
    chosen = np.isin(pairs, unique)
    met = np.concatenate(places)[chosen] * MAX_BUCKET**2 + np.concatenate(steps)[chosen]
    order = np.lexsort((met, pairs[chosen]))
    code, met = pairs[chosen][order], met[order]
    firsts_met = met[np.r_[True, code[1:] != code[:-1]]]  # per pair of `unique`, in its order
    seen = np.argsort(firsts_met, kind="stable")
    unique, shared = unique[seen], shared[seen]
    return [
        ((names[code // len(names)], names[code % len(names)]), same)
        for code, same in zip(unique.tolist(), shared.tolist(), strict=True)
    ]


def _buckets(columns: DayColumns, owners: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Each cooking day's bucket (day, sessions, energy to the watt-hour), numbered in the
    order the days first make them, and its stove's number: `shared_days`' keys over the
    columns at once."""
    active = columns.sessions != 0
    owner = np.repeat(np.asarray(owners, dtype=np.int64), np.diff(columns.starts))[active]
    day, sessions = columns.ordinal[active], columns.sessions[active]
    energy = python_round(columns.energy[active], 3)
    if not len(day):
        return day, owner
    order = np.lexsort((energy, sessions, day))  # equal keys together, in day order
    new = np.ones(len(order), dtype=bool)
    new[1:] = (
        (day[order][1:] != day[order][:-1])
        | (sessions[order][1:] != sessions[order][:-1])
        | (energy[order][1:] != energy[order][:-1])
    )
    group = np.cumsum(new) - 1  # each sorted day's key, numbered in sorted order
    first = np.minimum.reduceat(order, np.flatnonzero(new))  # where each key is first met
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    bucket = np.empty(len(order), dtype=np.int64)
    bucket[order] = rank[group]
    return bucket, owner


def _active_common_days(first: Sequence[StoveDay], second: Sequence[StoveDay]) -> int:
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
