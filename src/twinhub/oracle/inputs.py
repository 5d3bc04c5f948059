"""What the oracle reads from the database: each stove's registry facts and its daily
telemetry rollups for a period, as the pure modules (periods, plausibility) take them.

One query for the registry facts and one for the day rollups of any number of stoves, so a
monitoring period of ten thousand stoves is a handful of statements, not ten thousand.
The same function serves a claim's evaluation, a monitoring period and `verify-report`, so
a report is always recomputed from the data the way it was first computed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from twinhub.db.models import DeviceToken, Domain, TelemetryRollup
from twinhub.oracle.periods import StovePeriod
from twinhub.oracle.plausibility import StoveDay

ENERGY, FUEL, SESSIONS, METER = "energyKwh", "fuelKg", "session=start", "meterKwh"
FIELDS = (ENERGY, FUEL, SESSIONS, METER)
_CHUNK = 500  # stoves per IN (...) list
# Built once (each claim's evaluation runs them): facts, enrolment, day rollups.
_FACTS = select(Domain.did, Domain.properties, Domain.verified, Domain.status).where(
    Domain.did.in_(bindparam("dids", expanding=True))
)
_ENROLLED = select(DeviceToken.domain_did).where(
    DeviceToken.domain_did.in_(bindparam("dids", expanding=True)),
    DeviceToken.revoked_at.is_(None),
)
_DAYS = select(
    TelemetryRollup.scope,
    TelemetryRollup.bucket,
    TelemetryRollup.field,
    TelemetryRollup.count,
    TelemetryRollup.sum,
    TelemetryRollup.max,
).where(
    TelemetryRollup.scope.in_(bindparam("dids", expanding=True)),
    TelemetryRollup.interval == "day",
    TelemetryRollup.field.in_(FIELDS),
    TelemetryRollup.bucket >= bindparam("low"),
    TelemetryRollup.bucket < bindparam("high"),
)


def day_start(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


async def stove_periods(
    session: AsyncSession, stoves: Sequence[str], start: date, end: date
) -> list[StovePeriod]:
    """Each stove's facts and days from `start` to `end` (inclusive), in the given order;
    a stove that is not a domain comes back unverified, unenrolled, without days."""
    domains: dict[str, tuple[dict[str, Any], bool]] = {}  # did -> (properties, verified)
    enrolled: set[str] = set()
    cells: dict[str, dict[date, dict[str, tuple[int, float, float]]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    low, high = day_start(start), day_start(end + timedelta(days=1))
    unique = list(dict.fromkeys(stoves))
    for offset in range(0, len(unique), _CHUNK):
        chunk = unique[offset : offset + _CHUNK]
        facts = await session.execute(_FACTS, {"dids": chunk})
        for did, properties, verified, status in facts:
            domains[did] = (dict(properties or {}), bool(verified and status == "active"))
        enrolled.update(await session.scalars(_ENROLLED, {"dids": chunk}))
        rows = await session.execute(_DAYS, {"dids": chunk, "low": low, "high": high})
        for scope, bucket, name, count, total, most in rows:
            moment = bucket if bucket.tzinfo else bucket.replace(tzinfo=UTC)
            cells[scope][moment.astimezone(UTC).date()][name] = (count, total, most)
    found = []
    for did in stoves:
        domain = domains.get(did)
        properties: dict[str, Any] = domain[0] if domain is not None else {}
        unit = _unit(properties, cells.get(did, {}))
        days = _days(did, cells.get(did, {}), FUEL if unit == "kg" else ENERGY)
        household = properties.get("householdSize")
        efficiency = _number(properties.get("efficiency"))
        found.append(
            StovePeriod(
                stove=did,
                serial=properties.get("serialNumber") if domain is not None else None,
                verified=domain is not None and domain[1],
                enrolled=did in enrolled,
                household_size=household
                if isinstance(household, int) and not isinstance(household, bool)
                else None,
                stove_efficiency=efficiency,
                unit=unit,
                days=days,
            )
        )
    return found


def _unit(
    properties: dict[str, Any], cells: dict[date, dict[str, tuple[int, float, float]]]
) -> str:
    """kWh for an electric stove, kg for a fuel stove: the stove's fuelType says, else the
    telemetry it sends (fuel and no energy)."""
    kind = properties.get("fuelType")
    if isinstance(kind, str) and kind.lower() in ("pellets", "biomass", "wood", "charcoal"):
        return "kg"
    energy = any(ENERGY in fields for fields in cells.values())
    fuel = any(FUEL in fields for fields in cells.values())
    return "kg" if fuel and not energy else "kWh"


def _days(
    did: str, cells: dict[date, dict[str, tuple[int, float, float]]], quantity: str = ENERGY
) -> list[StoveDay]:
    """One StoveDay per day with telemetry; the meter's rise is today's highest reading less
    the day before's (the first day: unknown)."""
    days: list[StoveDay] = []
    previous_max: float | None = None
    for day in sorted(cells):
        fields = cells[day]
        sessions = int(fields[SESSIONS][0]) if SESSIONS in fields else 0
        energy = float(fields[quantity][1]) if quantity in fields else 0.0
        meter = fields.get(METER)
        delta = None
        if meter is not None:
            if previous_max is not None:
                delta = meter[2] - previous_max
            previous_max = meter[2]
        days.append(StoveDay(did, day, sessions, energy, 0.0, 0, 0, delta))
    return days
