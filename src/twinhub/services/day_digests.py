"""Each stove-day's raw readings digested once, and the digest kept: what a monitoring
period's draft freezes for every stove-day (the digest of its readings and the runs of
sequence numbers it saw) without reading a million readings at every draft.

A kept day (in its device's month, a row of `telemetry_day_digests`) says how many
readings the day held when it was digested. Readings are only ever added (a number stored
again is ignored), so a day's count only grows: when a stove's kept counts over a period
add up to its readings in the period, no kept day has gained a reading and none is on a
day not kept, and every kept digest is its day's digest. Any other stove is read and
digested again, and its days kept anew. The one way readings leave is the retention
pruner, which first forgets the kept months of the days it prunes (`forget_before`); no
day is kept within `KEEP_MARGIN_DAYS` of its cutoff, so a day digested from readings read
before a prune is never written after it.

Days are kept by drafts (what they digested) and by the daily pass (`DayDigests.run`: the
closed days before today, so a period's first draft finds them kept too). Nothing a
verifier checks depends on them: `verify-report` and the evidence bundle digest the
readings themselves (oracle.monitoring `inputs` without `into`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any, NamedTuple

import orjson
import structlog
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.dialects import dialect_of
from twinhub.db.driver import driver_error
from twinhub.db.models import TelemetryDayDigest, TelemetryDevice
from twinhub.kernel.clock import utcnow
from twinhub.kernel.collector import collector_paused
from twinhub.mrv.period_inputs import seen_ranges, stored_readings_digest
from twinhub.mrv.rollups import day_start
from twinhub.services.mrv_inputs import stored_readings

log = structlog.get_logger(__name__)

# How a kept digest is made (db.dialects.DAY_DIGEST_FORM, a month's `form`): by
# mrv.period_inputs.stored_readings_digest over each reading's (seq, time, values). A month
# of another form is never read; change the form with that rule.
KEEP_MARGIN_DAYS = 2  # no day kept this close to the retention cutoff (see the module)
_CHUNK = 500  # stoves a statement
_KEEP_BATCH = 5_000  # kept months a statement
_YIELD_EVERY = 50  # stoves digested between two turns of the event loop

Runs = list[list[int]]


class KeptDay(NamedTuple):
    """One stove-day as kept (in its month's row, `telemetry_day_digests.days`)."""

    device_id: int
    day: date
    count: int  # the readings it held
    seen: Runs  # the runs of sequence numbers, in order
    digest: str

    def entry(self) -> list[Any]:
        """Its value in the month's `days`: [readings, first seq, last seq, the runs (null
        when one, first to last), digest]."""
        runs = None if len(self.seen) == 1 else self.seen
        return [self.count, self.seen[0][0], self.seen[-1][1], runs, self.digest]


@dataclass
class Digested:
    """What digesting a period's stove-days gave: each stove-day's digest and the runs of
    sequence numbers it saw, the days to keep (those digested from their readings), and
    how many stove-days came from kept days and how many from their readings."""

    digests: dict[tuple[str, date], str] = field(default_factory=dict)
    seen: dict[str, dict[str, Runs]] = field(default_factory=dict)
    fresh: list[KeptDay] = field(default_factory=list)
    reused: int = 0
    read: int = 0


async def digest_days(
    session: AsyncSession,
    stoves: Sequence[str],
    start: date,
    end: date,
    into: Digested,
    reuse: bool,
) -> None:
    """Digest `stoves`' days from `start` to `end` (inclusive) into `into`: with `reuse`,
    a stove whose kept days' counts add up to its readings in the period takes its kept
    digests, and the others are read and digested (their days then to keep); without,
    every reading is read. The reads belong in the snapshot the period's figures
    were read in (db.dialects.read_snapshot): exactly the readings behind them."""
    stale: list[str] = list(dict.fromkeys(stoves))
    devices: dict[str, int] = {}
    if reuse:
        stale = await _reused(session, stale, start, end, into, devices)
    if not stale:
        return
    for number, (stove, rows) in enumerate(
        (await stored_readings(session, stale, start, end)).items()
    ):
        if number % _YIELD_EVERY == _YIELD_EVERY - 1:
            await asyncio.sleep(0)  # the worker's other requests between stoves
        by_day: dict[str, list[tuple[int, str, str]]] = {}
        for reading in rows:
            by_day.setdefault(reading[1][:10], []).append(reading)
        days: dict[str, Runs] = {}
        device = devices.get(stove)
        for day, day_rows in by_day.items():
            when = date.fromisoformat(day)
            digest = stored_readings_digest(day_rows)
            into.digests[stove, when] = digest
            runs = days[day] = seen_ranges(row[0] for row in day_rows)
            into.read += 1
            if device is not None:
                into.fresh.append(KeptDay(device, when, len(day_rows), runs, digest))
        into.seen[stove] = days


async def _reused(
    session: AsyncSession,
    stoves: list[str],
    start: date,
    end: date,
    into: Digested,
    devices: dict[str, int],
) -> list[str]:
    """The stoves whose every reading of the period is on a kept day that still holds,
    served from their kept days into `into`; the others returned (theirs to read), with
    the device ids of all that have readings into `devices`. Through the driver (the
    dialect's `kept_days`): two statements a chunk of stoves."""
    low, high = day_start(start), day_start(end + timedelta(days=1))
    connection = await session.connection()
    raw = await connection.get_raw_connection()
    dialect = dialect_of(connection.dialect)
    stale: list[str] = []
    for offset in range(0, len(stoves), _CHUNK):
        chunk = stoves[offset : offset + _CHUNK]
        try:
            counts, kept_rows = await dialect.kept_days(raw, chunk, low, high, start, end)
        except Exception as error:  # the driver's own error, told as SQLAlchemy tells it
            raise driver_error(connection.dialect, raw, error) from error
        total: dict[int, int] = {}
        for did, device, count in counts:
            devices[did] = device
            total[device] = count
        # A device's kept days of the period, from its months' rows.
        first, last = start.isoformat(), end.isoformat()
        by_device: dict[int, list[tuple[str, list[Any]]]] = {}
        for device, days in kept_rows:
            by_device.setdefault(device, []).extend(
                (day, entry) for day, entry in orjson.loads(days).items() if first <= day <= last
            )
        for did in chunk:
            device = devices.get(did)
            if device is None:  # no reading in the period: no day, as reading them finds
                into.seen[did] = {}
                continue
            kept = by_device.get(device, ())
            # A day's count only grows (readings are only added), so the kept counts add up
            # to the stove's readings exactly when no kept day has gained one and no reading
            # is on a day not kept.
            if sum(entry[0] for _, entry in kept) == total[device]:
                seen = into.seen[did] = {}
                for day, (_, low_seq, high_seq, runs, digest) in kept:
                    seen[day] = [[low_seq, high_seq]] if runs is None else runs
                    into.digests[did, date.fromisoformat(day)] = digest
                into.reused += len(kept)
                continue
            stale.append(did)
    return stale


async def forget_before(session: AsyncSession, day: date) -> None:
    """Forget the kept days before `day`, with the rest of their months: the retention
    pruner's, whose readings it deletes (a kept digest must not outlive its readings)."""
    month = (day - timedelta(days=1)).replace(day=1)
    await session.execute(delete(TelemetryDayDigest).where(TelemetryDayDigest.month <= month))


class DayDigests:
    """The kept rows' writer and the daily pass that fills them."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], retention_days: int = 0) -> None:
        self._sessions = sessions
        self._retention_days = retention_days

    def keepable_from(self) -> date:
        """The first day a row may be kept for: past the retention cutoff's margin."""
        today = utcnow().date()
        if self._retention_days <= 0:
            return date.min
        return today - timedelta(days=self._retention_days - KEEP_MARGIN_DAYS)

    async def keep(self, fresh: list[KeptDay]) -> int:
        """Keep the days a draft or the pass digested: closed days only (before today, in
        UTC), past the retention margin; a day already kept is replaced, its month's other
        days stay. Months in (device, month) order, so two writers never wait on each
        other's rows crosswise. The number of days kept."""
        low, today = self.keepable_from(), utcnow().date()
        months: dict[tuple[int, date], dict[str, list[Any]]] = {}
        for row in fresh:
            if low <= row.day < today:
                month = months.setdefault((row.device_id, row.day.replace(day=1)), {})
                month[row.day.isoformat()] = row.entry()
        if not months:
            return 0
        rows = [
            (device, month, orjson.dumps(months[device, month]).decode())
            for device, month in sorted(months)
        ]
        async with self._sessions.begin() as session:
            connection = await session.connection()
            raw = await connection.get_raw_connection()
            dialect = dialect_of(connection.dialect)
            for offset in range(0, len(rows), _KEEP_BATCH):
                try:
                    await dialect.keep_days(raw, rows[offset : offset + _KEEP_BATCH])
                except Exception as error:  # the driver's own error, told as SQLAlchemy does
                    raise driver_error(connection.dialect, raw, error) from error
        return sum(len(days) for days in months.values())

    async def fill(
        self, first: date, last: date, each: Callable[[date], Awaitable[None]] | None = None
    ) -> tuple[int, int]:
        """Digest the stove-days from `first` to `last` (inclusive) that have no matching
        kept day, a day at a time, and keep them: (stove-days already kept, stove-days
        digested now). `each` hears of each day done (a command's progress)."""
        async with self._sessions() as session:
            stoves = list((await session.scalars(select(TelemetryDevice.did))).all())
        reused = made = 0
        for back in range((last - first).days + 1):
            day = first + timedelta(days=back)
            for offset in range(0, len(stoves), _CHUNK):
                into = Digested()
                async with self._sessions() as session:
                    with collector_paused():  # a chunk's readings: small objects, no cycle
                        chunk = stoves[offset : offset + _CHUNK]
                        await digest_days(session, chunk, day, day, into, True)
                await self.keep(into.fresh)
                reused, made = reused + into.reused, made + into.read
            if each is not None:
                await each(day)
        return reused, made

    async def run(self, interval_seconds: float, days: int) -> None:
        """Forever: the `days` closed days before today digested and kept, every
        `interval_seconds` (a day's rows once; after that only its late readings' days)."""
        while True:
            today = utcnow().date()
            first, last = today - timedelta(days=days), today - timedelta(days=1)
            try:
                reused, made = await self.fill(first, last)
                if made:
                    log.info("day digests kept", days=days, made=made, kept=reused)
            except Exception as error:  # retried next round, never fatal
                log.warning("day digests failed", error=type(error).__name__)
            await asyncio.sleep(interval_seconds)
