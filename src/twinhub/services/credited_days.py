"""One stove-day, one credit, across the whole registry.

A device (its identity: mrv.period_inputs.device_identity, so the same stove listed by two
projects is one device) earns for a day at most once, whatever project, period or claim
asks. A submitted period reserves its included stoves' days here, inside the ledger's
turn (which serialises every write, on SQLite and PostgreSQL alike), after checking nobody
holds them: of two concurrent submissions one passes, the other is told who holds the day.
The primary key (device, day) backs the rule in the database as well. Corrections and
rejection release a period's days; a stove moved to another project keeps its history
(rows are keyed by the device, not by the project).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date, timedelta

from sqlalchemy import bindparam, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from twinhub.db.dialects import DaySpan, dialect_of
from twinhub.db.models import CreditedDay
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import Conflict, FieldProblem

_CHUNK = 500
_HELD = select(
    CreditedDay.device,
    CreditedDay.day,
    CreditedDay.stove_did,
    CreditedDay.project_did,
    CreditedDay.period_id,
    CreditedDay.claim_id,
).where(
    CreditedDay.device.in_(bindparam("devices", expanding=True)),
    CreditedDay.day >= bindparam("first"),
    CreditedDay.day <= bindparam("last"),
)


INSERT_DAYS = insert(CreditedDay.__table__)


class DayCredited(Conflict):
    """The stove-day is credited (or reserved) by another period or claim already."""

    code = "double_counting"


def holder_name(period_id: int | None, claim_id: str | None, project: str) -> str:
    if period_id is not None:
        return f"monitoring period {period_id} of {project}"
    return f"claim {claim_id}"


async def held(
    session: AsyncSession,
    devices: Mapping[str, str],
    first: date,
    last: date,
    period_id: int | None = None,
) -> dict[str, tuple[date, str]]:
    """Stoves (of `devices`: stove -> device identity) whose device has a day from `first`
    to `last` held by something other than period `period_id`: stove -> (day, holder)."""
    by_device: dict[str, list[str]] = {}
    for stove, device in devices.items():
        by_device.setdefault(device, []).append(stove)
    found: dict[str, tuple[date, str]] = {}
    wanted = sorted(by_device)
    for offset in range(0, len(wanted), _CHUNK):
        rows = await session.execute(
            _HELD, {"devices": wanted[offset : offset + _CHUNK], "first": first, "last": last}
        )
        for device, day, _stove, project, period, claim in rows:
            if period_id is not None and period == period_id:
                continue
            for stove in by_device[device]:
                if stove not in found or day < found[stove][0]:
                    found[stove] = (day, holder_name(period, claim, project))
    return found


async def held_days(
    session: AsyncSession, devices: list[str], first: date, last: date
) -> dict[str, list[tuple[date, str]]]:
    """Each device's held days from `first` to `last` with their holders."""
    return await held_over(session, {(first, last): devices})


async def held_over(
    session: AsyncSession, spans: Mapping[tuple[date, date], Iterable[str]]
) -> dict[str, list[tuple[date, str]]]:
    """Each device's held days within the spans asked of it ((first, last) -> devices),
    with their holders: a statement per span and chunk of devices. A batch of approvals
    asks each stove about its claim's days only (a programme's month, typically one span
    for the whole batch), not about every day from the batch's first to its last, which
    read back every day the stoves' earlier approvals hold."""
    found: dict[str, list[tuple[date, str]]] = {}
    seen: set[tuple[str, date]] = set()
    for (first, last), devices in spans.items():
        wanted = sorted(set(devices))
        for offset in range(0, len(wanted), _CHUNK):
            rows = await session.execute(
                _HELD, {"devices": wanted[offset : offset + _CHUNK], "first": first, "last": last}
            )
            for device, day, _stove, project, period, claim in rows:
                if (device, day) not in seen:  # overlapping spans read a day twice
                    seen.add((device, day))
                    found.setdefault(device, []).append((day, holder_name(period, claim, project)))
    return found


def day_spans(
    device: str,
    stove: str,
    project: str,
    first: date,
    last: date,
    claim_id: str,
    taken: Iterable[date] = (),
) -> list[DaySpan]:
    """The spans holding a claim's days from `first` to `last` but those `taken` (each run
    of free days one span), written with its approval by `hold_spans`."""
    busy = {day for day in taken if first <= day <= last}
    if not busy:  # the common case: a stove's month nobody holds yet
        return [(device, stove, project, claim_id, first, last)] if first <= last else []
    spans: list[DaySpan] = []
    start: date | None = None
    day = first
    while day <= last + timedelta(days=1):
        free = day <= last and day not in busy
        if free and start is None:
            start = day
        elif not free and start is not None:
            spans.append((device, stove, project, claim_id, start, day - timedelta(days=1)))
            start = None
        day += timedelta(days=1)
    return spans


async def hold_spans(session: AsyncSession, spans: list[DaySpan]) -> None:
    """Hold every day of the spans, one statement making the days in the database."""
    if spans:
        table = CreditedDay.__table__
        await dialect_of(session).hold_day_spans(session, table, spans, utcnow())  # type: ignore[arg-type]


async def reserve(
    session: AsyncSession,
    devices: Mapping[str, str],
    first: date,
    last: date,
    project: str,
    period_id: int | None = None,
    claim_id: str | None = None,
) -> None:
    """Hold every day from `first` to `last` of each stove's device for the period (or the
    claim); DayCredited naming the holder when any is held already. Call it under the
    ledger's turn."""
    taken = await held(session, devices, first, last, period_id)
    if taken:
        stove, (day, holder) = min(taken.items(), key=lambda item: (item[1][0], item[0]))
        raise DayCredited(
            f"{stove} is credited for {day.isoformat()} already, by {holder} (one stove-day, "
            "one credit).",
            [
                FieldProblem(stove, f"{day.isoformat()}: {holder}")
                for stove, (day, holder) in sorted(taken.items())
            ][:50],
        )
    now = utcnow()
    rows = []
    seen: set[str] = set()
    for stove, device in sorted(devices.items()):
        if device in seen:  # two stove domains of one device: one device, one credit
            continue
        seen.add(device)
        day = first
        while day <= last:
            rows.append(
                {
                    "device": device,
                    "day": day,
                    "stove_did": stove,
                    "project_did": project,
                    "period_id": period_id,
                    "claim_id": claim_id,
                    "created_at": now,
                }
            )
            day += timedelta(days=1)
    await insert_days(session, rows)


async def insert_days(session: AsyncSession, rows: list[dict[str, object]]) -> None:
    for offset in range(0, len(rows), 5000):
        await session.execute(INSERT_DAYS, rows[offset : offset + 5000])


async def release(session: AsyncSession, period_id: int) -> None:
    """A period's days, free again (corrections asked for, or rejected)."""
    await session.execute(delete(CreditedDay).where(CreditedDay.period_id == period_id))
