"""What the MRV rules read from the database: each stove's registry facts and its daily
telemetry rollups for a period, handed to mrv.rollups, which makes them the pure modules'
inputs (mrv.periods, mrv.plausibility).

One query for the registry facts and one for the day rollups of any number of stoves, so a
monitoring period of ten thousand stoves is a handful of statements, not ten thousand.
The same function serves a claim's evaluation, a monitoring period and `verify-report`, so
a report is always recomputed from the data the way it was first computed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Sequence
from datetime import date, timedelta
from functools import cache
from typing import Any, TypeVar

from sqlalchemy import Select, bindparam, distinct, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from twinhub.db.dialects import DayRollups, Dialect, dialect_of
from twinhub.db.driver import driver_error
from twinhub.db.models import TelemetryDevice, TelemetryReading
from twinhub.kernel.collector import collector_paused
from twinhub.kernel.json_text import json_value
from twinhub.mrv.meter import METER_READING, Reading
from twinhub.mrv.period_inputs import device_identity, seen_ranges
from twinhub.mrv.periods import StovePeriod
from twinhub.mrv.rollup_columns import RollupColumns
from twinhub.mrv.rollups import DAY_COLUMNS, day_start
from twinhub.mrv.rollups import stove_periods as periods_of

T = TypeVar("T")
_CHUNK = 500  # stoves per IN (...) list


async def stove_periods(
    session: AsyncSession,
    stoves: Sequence[str],
    start: date,
    end: date,
    reading: Reading = METER_READING,
    identities: dict[str, str] | None = None,
) -> list[StovePeriod]:
    """Each stove's facts and days from `start` to `end` (inclusive), in the given order,
    read by the methodology's rules (`Methodology.reading`, mrv.rollups); a stove that is
    not a domain comes back unverified, unenrolled, without days.

    The day rollups (one wide row a stove-day, telemetry/wide.py) come through the driver's
    cursor and are decoded column-wise into one array a figure (the dialect's
    `day_rollups`), from which mrv.rollups makes a chunk's days at once: no ORM row, type
    processing or tuple per value on the way. The
    registry facts and enrolment come the same way, one statement a chunk (`stove_facts`);
    a chunk's rollups are read while the chunk before is made into periods. `identities`:
    each stove's device identity put there from the same facts (mrv.period_inputs.
    device_identity; its DID where it is no domain), for a period's one-credit-a-device
    rule."""
    periods: dict[str, StovePeriod] = {}
    low, high = day_start(start), day_start(end + timedelta(days=1))
    unique = list(dict.fromkeys(stoves))
    chunks = [unique[offset : offset + _CHUNK] for offset in range(0, len(unique), _CHUNK)]
    with collector_paused():  # a million small objects, none in a cycle (kernel.collector)
        connection = await session.connection()
        raw = await connection.get_raw_connection()
        dialect = dialect_of(connection.dialect)

        async def read(what: Awaitable[T]) -> T:
            try:
                return await what
            except Exception as error:  # the driver's own error, told as SQLAlchemy tells it
                raise driver_error(connection.dialect, raw, error) from error

        facts: dict[str, tuple[dict[str, Any], bool, str]] = {}  # properties, verified, status
        if identities is not None:
            identities.update((did, did) for did in unique)  # a stove that is no domain
        stocked: set[str] = set()  # those with an enrolled device
        for chunk in chunks:
            for did, properties, verified, status, enrolled in await read(
                dialect.stove_facts(raw, chunk)
            ):
                if isinstance(properties, str | bytes):  # JSON text as the driver gives it
                    properties = json.loads(properties)
                facts[did] = (dict(properties or {}), bool(verified), status)
                if identities is not None:
                    identities[did] = device_identity(did, properties)
                if enrolled:
                    stocked.add(did)
        # The next chunk's rollups are asked for before this chunk's stoves are made, so the
        # database (PostgreSQL's server, SQLite's thread) works while Python does: one
        # statement in flight at a time, as a connection allows.
        ahead: asyncio.Task[DayRollups] | None = None
        try:
            for number, chunk in enumerate(chunks):
                if ahead is None:
                    found = await read(dialect.day_rollups(raw, chunk, DAY_COLUMNS, low, high))
                else:
                    found, ahead = await ahead, None
                if number + 1 < len(chunks):
                    ahead = asyncio.ensure_future(
                        read(dialect.day_rollups(raw, chunks[number + 1], DAY_COLUMNS, low, high))
                    )
                    await asyncio.sleep(0)  # the statement is sent before Python works
                # Each chunk's stoves made (their days at once, mrv.rollups.stove_periods)
                # before the next is read: its rows go with it.
                made = periods_of(chunk, facts, stocked, RollupColumns(*found), reading)
                periods.update(zip(chunk, made, strict=True))
        finally:
            if ahead is not None:  # a failure on the way: the statement in flight ends first
                ahead.cancel()
                with contextlib.suppress(BaseException):
                    await ahead
        return [periods[did] for did in stoves]


async def _raw_rows(
    session: AsyncSession, stoves: Sequence[str], start: date, end: date
) -> AsyncIterator[list[tuple[Any, ...]]]:
    """The stoves' raw readings from `start` to `end` (inclusive) as the dialect's
    `raw_readings` gives them, a statement a chunk of stoves: (did, seq, time as ISO text,
    values as JSON text, received as ISO text, receipt), in (did, time, seq) order."""
    low, high = day_start(start), day_start(end + timedelta(days=1))
    unique = list(dict.fromkeys(stoves))
    connection = await session.connection()
    raw = await connection.get_raw_connection()
    dialect = dialect_of(connection.dialect)
    for offset in range(0, len(unique), _CHUNK):
        try:
            yield await dialect.raw_readings(raw, unique[offset : offset + _CHUNK], low, high)
        except Exception as error:  # the driver's own error, told as SQLAlchemy tells it
            raise driver_error(connection.dialect, raw, error) from error


async def stove_readings(
    session: AsyncSession, stoves: Sequence[str], start: date, end: date
) -> dict[str, list[dict[str, Any]]]:
    """Each stove's raw readings from `start` to `end` (inclusive), in (time, seq) order,
    as an evidence bundle carries them (mrv.period_inputs.reading_row, with when each was
    received and the receipt it came in). Through the driver's cursor, a statement a chunk
    of stoves (the dialect's `raw_readings`): no ORM row or type processing a reading."""
    found: dict[str, list[dict[str, Any]]] = {did: [] for did in stoves}
    async for rows in _raw_rows(session, stoves, start, end):
        for did, seq, time, values, received, receipt in rows:
            parsed = json_value(values)
            found[did].append(
                {
                    "seq": seq,
                    "time": time,
                    "values": parsed if type(parsed) is dict else dict(parsed or {}),
                    "receivedAt": received,
                    "receipt": receipt,  # the signed batch or message it came in, if any
                }
            )
    return found


async def stored_readings(
    session: AsyncSession, stoves: Sequence[str], start: date, end: date
) -> dict[str, list[tuple[int, str, str]]]:
    """Each stove's raw readings from `start` to `end` (inclusive) as stored: (seq, time as
    ISO text, values as JSON text), in (time, seq) order; what a draft digests
    (mrv.period_inputs.stored_readings_digest) a million at a time, so nothing is parsed."""
    found: dict[str, list[tuple[int, str, str]]] = {did: [] for did in stoves}
    async for rows in _raw_rows(session, stoves, start, end):
        for did, seq, time, values, _received, _receipt in rows:
            # JSON null (the column is NOT NULL) is an empty object, as `stove_readings` reads it.
            found[did].append((seq, time, "{}" if values == "null" else values))
    return found


@cache
def _seen_statement(dialect: Dialect) -> Select[Any]:
    """`stove_seen`'s statement for `dialect`, built once (every approval batch runs it)."""
    day = dialect.utc_day(TelemetryReading.time)
    seq = TelemetryReading.seq
    return (
        select(
            TelemetryDevice.did,
            day,
            func.count(),
            # Counted apart only where a number can be stored twice (Dialect.seq_is_key):
            # SQLite's distinct count was a sixth of the statement.
            func.count() if dialect.seq_is_key else func.count(distinct(seq)),
            func.min(seq),
            func.max(seq),
        )
        .join(TelemetryDevice, TelemetryDevice.id == TelemetryReading.device_id)
        .where(
            TelemetryDevice.did.in_(bindparam("dids", expanding=True)),
            TelemetryReading.time >= bindparam("low"),
            TelemetryReading.time < bindparam("high"),
        )
        .group_by(TelemetryDevice.did, day)
    )


async def stove_seen(
    session: AsyncSession, stoves: Sequence[str], start: date, end: date
) -> dict[str, dict[str, list[list[int]]]]:
    """Which readings each stove holds for each day from `start` to `end` (inclusive): the
    runs of their sequence numbers (mrv.period_inputs.seen_ranges). Read in the snapshot
    the stove's figures were read in (db.dialects.read_snapshot), it names exactly the
    readings behind them, which an approved claim keeps for its evidence. One aggregate
    statement a chunk (a day whose numbers run on is one row); the numbers themselves
    only for a stove with a day that has a gap or a number twice."""
    low, high = day_start(start), day_start(end + timedelta(days=1))
    statement = _seen_statement(dialect_of(session))
    found: dict[str, dict[str, list[list[int]]]] = {did: {} for did in stoves}
    unique = list(dict.fromkeys(stoves))
    broken: set[str] = set()
    for offset in range(0, len(unique), _CHUNK):
        rows = await session.execute(
            statement, {"dids": unique[offset : offset + _CHUNK], "low": low, "high": high}
        )
        for did, when, count, distinct_count, first, last in rows:
            if count == distinct_count == last - first + 1:
                found[did][str(when)[:10]] = [[first, last]]
            else:
                broken.add(did)
    if broken:
        for did, readings in (await stove_readings(session, sorted(broken), start, end)).items():
            by_day: dict[str, list[int]] = {}
            for reading in readings:
                by_day.setdefault(reading["time"][:10], []).append(reading["seq"])
            found[did] = {when: seen_ranges(seqs) for when, seqs in by_day.items()}
    return found
