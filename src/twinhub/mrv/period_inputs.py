"""A monitoring period's inputs, frozen: every stove's registry facts and day figures, the
digests of the raw readings behind each day, what other claims had credited, and the
methodology document; the report recomputes from them alone.

A draft period stores its snapshot when it is computed; submitting freezes it (it never
changes again), and `twinhub oracle verify-evidence` recomputes the report from it with no
database. Readings that arrive later for those days are late data: they are compared with
the snapshot (`late_days`), never folded into it.

Also the device identity of the one-stove-day-one-credit rule (`device_identity`): a device
is its serial and its meter's serial, whichever project lists it.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any

from twinhub.kernel.errors import Problems
from twinhub.kernel.json_text import json_value
from twinhub.mrv.claims import (
    ClaimComputation,
    ClaimJob,
    NotComputable,
    claim_credits,
    methodology_of,
)
from twinhub.mrv.meter import METER_READING, Reading
from twinhub.mrv.periods import (
    PeriodSpec,
    StovePeriod,
    assess_periods,
    compute_period,
    report_digest,
)
from twinhub.mrv.plausibility import StoveDay
from twinhub.mrv.project_document import ProjectDocument, check_project_document
from twinhub.mrv.rollups import ENERGY, FUEL, METER, METER_RESET, SESSIONS, Cells, day_figures
from twinhub.security.jcs import digest

FIGURE_TOLERANCE = 1e-6  # kWh or kg: sums of the same readings in another order


def device_identity(did: str, properties: Mapping[str, Any] | None) -> str:
    """The device a stove domain stands for: its serial number with its meter's serial,
    upper-cased and stripped of separators (`sn-001` and `SN 001` are one device), so one
    stove listed by two projects is one device; the DID when it records no serial."""
    properties = properties or {}
    serial = properties.get("serialNumber")
    meter = properties.get("meter")
    meter_serial = meter.get("serial") if isinstance(meter, dict) else None
    if not isinstance(serial, str) or not _normal(serial):
        return did
    identity = "sn:" + _normal(serial)
    if isinstance(meter_serial, str) and _normal(meter_serial):
        identity += "|meter:" + _normal(meter_serial)
    return identity[:200]


def _normal(text: str) -> str:
    return re.sub(r"[^A-Z0-9]", "", text.upper())


def reading_row(seq: int, time: datetime, values: Mapping[str, Any]) -> dict[str, Any]:
    """One raw reading as a bundle carries it (and its digest covers)."""
    return {"seq": seq, "time": time.astimezone(UTC).isoformat(), "values": dict(values)}


def readings_digest(readings: Iterable[Mapping[str, Any]]) -> str:
    """The digest of one stove-day's raw readings (their seq, time and values: what the
    device reported), in (time, seq) order."""
    ordered = sorted(readings, key=lambda r: (str(r["time"]), r["seq"]))
    return digest([{"seq": r["seq"], "time": r["time"], "values": r["values"]} for r in ordered])


_TIME_SEQ = operator.itemgetter(1, 0)  # a stored reading's (time, seq)


def stored_readings_digest(readings: Sequence[tuple[int, str, str]]) -> str:
    """`readings_digest` of one stove-day's readings as the database gives them: (seq, time
    as ISO 8601 text, values as JSON text). The day's list is written as JSON text around
    the stored values and read in one piece: a period digests a million readings, and no
    dict is made of any. ISO times hold no character JSON escapes."""
    ordered = sorted(readings, key=_TIME_SEQ)
    text = ",".join(
        f'{{"seq":{seq},"time":"{time}","values":{values}}}' for seq, time, values in ordered
    )
    return digest(json_value(f"[{text}]"))


def seen_ranges(seqs: Iterable[int]) -> list[list[int]]:
    """Sequence numbers as sorted [first, last] runs: which readings of a day a snapshot
    read, kept compactly (a device's numbers mostly run on without a gap)."""
    runs: list[list[int]] = []
    for seq in sorted(set(seqs)):
        if runs and seq == runs[-1][1] + 1:
            runs[-1][1] = seq
        else:
            runs.append([seq, seq])
    return runs


def _in_runs(seq: int, runs: list[list[int]]) -> bool:
    low, high = 0, len(runs)
    while low < high:  # the last run starting at or before seq
        middle = (low + high) // 2
        if runs[middle][0] <= seq:
            low = middle + 1
        else:
            high = middle
    return low > 0 and seq <= runs[low - 1][1]


def behind(
    row: Mapping[str, Any], readings: Iterable[Mapping[str, Any]], taken_at: str | None
) -> list[Any]:
    """The readings behind a frozen stove row (a period's snapshot row, an approved claim's
    inputs) among the stove's stored ones: those its days were read from (`seen`, kept
    since the figures and the readings are read in one snapshot), whenever they were
    received; the others are late data. A row kept before `seen`: those received by
    `taken_at` (a reading stored before receipt times were kept counts as seen), which a
    reading received before and committed after the snapshot defeats."""
    seen: Mapping[str, list[list[int]]] | None = row.get("seen")
    if seen is not None:
        return [r for r in readings if _in_runs(r["seq"], seen.get(str(r["time"])[:10], []))]
    if taken_at is None:
        return list(readings)
    limit = datetime.fromisoformat(taken_at)
    return [
        r
        for r in readings
        if r.get("receivedAt") is None or datetime.fromisoformat(r["receivedAt"]) <= limit
    ]


def freeze(
    spec: PeriodSpec,
    protocol: str,
    methodology: dict[str, Any],
    stoves: Iterable[StovePeriod],
    credited: Mapping[str, str],
    readings: Mapping[tuple[str, date], str],
    identities: Mapping[str, str],
    taken_at: datetime | None = None,
    document: dict[str, Any] | None = None,
    sampled: Mapping[str, Any] | None = None,
    claims: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The snapshot: plain JSON. `readings`: each (stove, day)'s readings digest;
    `identities`: each stove's device identity; `taken_at`: when the readings were read
    (those received later are late data); `document`: the project design document the
    period computes under (None: the methodology's defaults); `sampled`: the sampled
    parameters of the project's surveys; `claims`: the approved claims the period carries to
    issuance (services.claim_issuance), a key of the snapshot only when there are some, so
    a snapshot without claims is the same as before they rode periods."""
    rows = [
        stove_row(stove, readings, identities.get(stove.stove, stove.stove))
        for stove in sorted(stoves, key=lambda s: s.stove)
    ]
    frozen = {
        "project": spec.project,
        "period": {"from": spec.start.isoformat(), "to": spec.end.isoformat()},
        "token": spec.token,
        "decimals": spec.decimals,
        "protocol": protocol,
        "methodology": methodology,
        "document": document,
        "sampled": dict(sampled) if sampled is not None else None,
        "credited": dict(sorted(credited.items())),
        "takenAt": taken_at.astimezone(UTC).isoformat() if taken_at is not None else None,
        "stoves": rows,
    }
    if claims:
        frozen["claims"] = [dict(claim) for claim in claims]
    return frozen


def stove_row(
    stove: StovePeriod, readings: Mapping[tuple[str, date], str], device: str
) -> dict[str, Any]:
    """One stove's facts and day figures as plain JSON (a snapshot's row; an approved
    claim's inputs): `thaw_stove` gives the StovePeriod back."""
    # Spelt out, not `_asdict()`: a third of the time, once a stove-day of every draft and
    # approval (tests/unit/test_period_inputs.py holds it to the named tuple's fields).
    days = [
        {
            "day": when.isoformat(),
            "sessions": sessions,
            "energy": energy,
            "cooking_minutes": minutes,
            "morning_sessions": morning,
            "evening_sessions": evening,
            "meter_delta": meter_delta,
            "readings": readings.get((did, when)),
        }
        for did, when, sessions, energy, minutes, morning, evening, meter_delta in stove.days
    ]
    row: dict[str, Any] = {
        "stove": stove.stove,
        "device": device,
        "serial": stove.serial,
        "verified": stove.verified,
        "enrolled": stove.enrolled,
        "householdSize": stove.household_size,
        "stoveEfficiency": stove.stove_efficiency,
        "unit": stove.unit,
        "status": stove.status,
        "stoveModel": stove.stove_model,
        "fuel": stove.fuel,
        "meter": stove.meter,
        "registerEvents": list(stove.register_events),
        "householdConfirmation": stove.household,
        "days": days,
    }
    if stove.seen is not None:  # a key only when kept, so older rows digest as before
        row["seen"] = {day: stove.seen[day] for day in sorted(stove.seen)}
    return row


def inputs_digest(frozen: dict[str, Any]) -> str:
    return digest(frozen)


def stove_days(row: Mapping[str, Any]) -> list[StoveDay]:
    """A frozen stove's days as the rules read them."""
    days = []
    for figures in row["days"]:
        fields = {k: v for k, v in figures.items() if k not in ("day", "readings")}
        days.append(StoveDay(stove=row["stove"], day=date.fromisoformat(figures["day"]), **fields))
    return days


def thaw(frozen: dict[str, Any]) -> tuple[PeriodSpec, list[StovePeriod]]:
    return _spec(frozen), [thaw_stove(row) for row in frozen["stoves"]]


def _spec(frozen: dict[str, Any]) -> PeriodSpec:
    return PeriodSpec(
        frozen["project"],
        date.fromisoformat(frozen["period"]["from"]),
        date.fromisoformat(frozen["period"]["to"]),
        frozen["token"],
        frozen["decimals"],
    )


def thaw_stove(row: Mapping[str, Any]) -> StovePeriod:
    """A frozen stove row (`stove_row`) as the rules read it."""
    return StovePeriod(
        stove=row["stove"],
        serial=row["serial"],
        verified=row["verified"],
        enrolled=row["enrolled"],
        household_size=row["householdSize"],
        stove_efficiency=row["stoveEfficiency"],
        unit=row["unit"],
        days=stove_days(row),
        status=row["status"],
        stove_model=row.get("stoveModel"),
        fuel=row.get("fuel"),
        meter=row.get("meter"),
        register_events=tuple(row.get("registerEvents") or ()),
        household=row.get("householdConfirmation"),
        seen=row.get("seen"),
    )


def report_of(
    frozen: dict[str, Any], stoves: Sequence[StovePeriod] | None = None
) -> dict[str, Any]:
    """The monitoring report the snapshot gives: the same code path as a period computed
    from the database (mrv.periods), so the two agree to the last unit. `stoves`: the
    stoves the snapshot froze, as the rules read them, where the caller still holds them (a
    draft, which froze them just now; their days keep the columns they were read as, which
    the rules read at once): the same report without thawing them. A verifier's
    recomputation thaws what was frozen."""
    if stoves is None:
        spec, stoves = thaw(frozen)
    else:
        spec = _spec(frozen)
    methodology = methodology_of(frozen["methodology"])
    findings = assess_periods(stoves)  # the bench's function: columns where the days have them
    report = compute_period(
        spec,
        methodology,
        stoves,
        findings,
        frozen["credited"],
        document=document_of(frozen.get("document")),
        sampled=frozen.get("sampled"),
    )
    report["protocol"] = frozen["protocol"]
    if frozen.get("claims"):  # the approved claims it carries to issuance, as frozen
        report["claims"] = [dict(claim) for claim in frozen["claims"]]
    report["reportDigest"] = report_digest(report)
    return report


def claim_inputs(computation: ClaimComputation) -> dict[str, Any]:
    """What an approved claim was computed from, kept with it (claims.inputs): its stove's
    facts and day figures as a snapshot row. The oracle's signed calculation names their
    digest (inputsDigest); `claim_recomputed` gives the calculation back from them."""
    return stove_row(computation.period, {}, computation.period.stove)


def claim_recomputed(
    inputs: Mapping[str, Any],
    methodology: dict[str, Any],
    project: str,
    token: str,
    decimals: int,
    start: date,
    end: date,
) -> ClaimComputation | NotComputable:
    """An approved claim's credits from its kept inputs (`claim_inputs`), by the oracle's
    own rule (mrv.claims.claim_credits): what `twinhub oracle verify-evidence` compares
    with the claim's signed calculation."""
    try:
        compiled = methodology_of(methodology)
    except NotComputable as error:
        return error
    job = ClaimJob(inputs["stove"], {}, methodology, token, project)
    return claim_credits(job, compiled, thaw_stove(inputs), start, end, decimals)


def document_of(document: dict[str, Any] | None) -> ProjectDocument | None:
    """The project document a snapshot names, checked (None: the methodology's defaults)."""
    if document is None:
        return None
    problems = Problems()
    checked = check_project_document(document, problems)
    if checked is None:
        raise NotComputable(
            "the project document does not check: "
            + "; ".join(f"{p.field}: {p.error}" for p in problems.items)
        )
    return checked


def day_cells(readings: Iterable[Mapping[str, Any]]) -> Cells:
    """Day cells (count, sum, min, max of each field) from raw readings, as the telemetry
    store rolls them up: numeric energy, fuel and meter fields; sessions counted by their
    start, register resets by their declaration."""
    cells: Cells = {}
    for reading in readings:
        moment = datetime.fromisoformat(str(reading["time"]).replace("Z", "+00:00"))
        day = moment.astimezone(UTC).date()
        values = reading.get("values") or {}
        fields = cells.get(day, {})  # a day with no rolled-up field has no cell (as stored)
        for name in (ENERGY, FUEL, METER):
            value = values.get(name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            count, total, least, most = fields.get(name, (0, 0.0, float("inf"), float("-inf")))
            number = float(value)
            fields[name] = (count + 1, total + number, min(least, number), max(most, number))
        for name, field, wanted in (
            (SESSIONS, "session", "start"),
            (METER_RESET, "meterEvent", "reset"),
        ):
            if values.get(field) == wanted:
                count, total, _, _ = fields.get(name, (0, 0.0, 1.0, 1.0))
                fields[name] = (count + 1, total + 1.0, 1.0, 1.0)
        if fields:
            cells[day] = fields
    return cells


def figures_from_readings(
    stove: str,
    unit: str,
    readings: Iterable[Mapping[str, Any]],
    meter: Any = None,
    rules: Reading = METER_READING,
) -> list[StoveDay]:
    """A stove's day figures from its raw readings, read by the methodology's rules."""
    return day_figures(stove, day_cells(readings), unit, meter, rules)[0]


def differing_days(
    frozen_row: Mapping[str, Any], days: Iterable[StoveDay]
) -> list[tuple[str, str, Any, Any]]:
    """(day, field, frozen value, other value) wherever a stove's frozen days and `days`
    (recomputed from readings, or today's rollups) disagree beyond FIGURE_TOLERANCE."""
    frozen = {d.day: d for d in stove_days(frozen_row)}
    other = {d.day: d for d in days}
    found: list[tuple[str, str, Any, Any]] = []
    for day in sorted(set(frozen) | set(other)):
        a, b = frozen.get(day), other.get(day)
        if a is None or b is None:
            found.append(
                (
                    day.isoformat(),
                    "day",
                    "absent" if a is None else "present",
                    "absent" if b is None else "present",
                )
            )
            continue
        for name in ("sessions", "energy", "meter_delta"):
            x, y = getattr(a, name), getattr(b, name)
            if x is None or y is None:
                if x is not y:
                    found.append((day.isoformat(), name, x, y))
            elif abs(float(x) - float(y)) > FIGURE_TOLERANCE:
                found.append((day.isoformat(), name, x, y))
    return found
