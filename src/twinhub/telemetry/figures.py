"""The dashboard's telemetry figures (services.summaries.TelemetrySource), read from the
telemetry store's day rollups and devices' last reading, never from raw readings.

The store keeps rollups per project as its stoves' readings arrive, so a project's figures
are one row per day and field whatever its number of stoves, and an organisation's sum its
projects' rows (the summary's own definition: the organisation's stoves are its projects'
stoves; the organisation's own rollup would also count stoves linked to it by `owner` or
`operator`). The deployment-wide figures sum the stoves' own rollups.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from sqlalchemy import Select, func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import Domain, TelemetryDevice, TelemetryRollup
from twinhub.mrv.rollups import ENERGY, SESSIONS, bucket_of
from twinhub.services.summaries import DailyUsage, TelemetryFigures
from twinhub.telemetry.wide import decode

ENERGY_FIELD = ENERGY  # the stove protocol's energy used since the previous reading
SESSION_FIELD = SESSIONS  # one per cooking session started


class RollupTelemetry:
    """Online-now from the devices' last reading time; per-day sessions and energy from the
    day rollups."""

    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], offline_after_seconds: float
    ) -> None:
        self._sessions = sessions
        self._offline_after = timedelta(seconds=offline_after_seconds)

    async def figures(
        self,
        projects: Select[tuple[str]] | None,
        stoves: Select[tuple[str]],
        start: datetime,
        end: datetime,
    ) -> TelemetryFigures:
        since = datetime.now(UTC) - self._offline_after
        rollup = TelemetryRollup
        # The whole deployment sums its projects' rollups (kept with the stoves'), not each
        # stove's: 30,000 stoves' month of day rollups is 900,000 rows to add up.
        everywhere = select(Domain.did).where(func.lower(Domain.type) == "project")
        in_scope = rollup.scope.in_(projects if projects is not None else everywhere)
        query = select(rollup.bucket, rollup.fields, rollup.cells).where(
            in_scope,
            rollup.interval == "day",
            rollup.bucket >= bucket_of(start, "day"),
            rollup.bucket < end,
        )
        async with self._sessions() as session:
            online = await session.scalar(
                select(func.count()).where(
                    TelemetryDevice.did.in_(stoves), TelemetryDevice.last_time >= since
                )
            )
            rows = (await session.execute(query)).all()
        days: dict[date, dict[str, float]] = {}
        for bucket, fields, cells in rows:  # one wide row a project and day (telemetry/wide.py)
            figures = decode(fields, cells)
            day = days.setdefault(bucket.astimezone(UTC).date(), {})
            for name in (ENERGY_FIELD, SESSION_FIELD):
                if name in figures:
                    day[name] = day.get(name, 0.0) + figures[name][1]
        return TelemetryFigures(
            available=True,
            online_now=int(online or 0),
            days=[
                DailyUsage(
                    day,
                    round(values.get(SESSION_FIELD, 0)),
                    round(values.get(ENERGY_FIELD, 0.0), 6),
                )
                for day, values in sorted(days.items())
            ],
        )
