"""`read_snapshot` (Dialect.begin_snapshot): every read of the session sees the database as
its first read did, whatever commits meanwhile, on SQLite (a deferred BEGIN over WAL) and on
PostgreSQL (REPEATABLE READ). A monitoring period's figures and the readings behind them,
and an approval's figures and the readings it keeps as seen, are read that way; a plain
session, for contrast, sees the commit."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from tests.conftest import Registry
from twinhub.db.dialects import read_snapshot
from twinhub.db.models import UssdLanguage

KEY = "phone:+254700000999"


async def count(session: AsyncSession) -> int:
    found = await session.scalar(
        select(func.count()).select_from(UssdLanguage).where(UssdLanguage.key == KEY)
    )
    return int(found or 0)


async def test_a_read_snapshot_does_not_see_what_commits_after_its_first_read(
    registry: Registry,
) -> None:
    sessions = registry.platform.sessionmaker

    async def commit_one() -> None:
        async with sessions() as writer:
            writer.add(UssdLanguage(key=KEY, language="sw", updated_at=datetime.now(UTC)))
            await writer.commit()

    try:
        async with read_snapshot(sessions) as snapshot, sessions() as plain:
            assert await count(snapshot) == 0 and await count(plain) == 0
            await commit_one()
            assert await count(snapshot) == 0  # as at its first read
            assert await count(plain) == 1  # a plain session's next read sees the commit
        async with read_snapshot(sessions) as later:
            assert await count(later) == 1
    finally:
        async with sessions() as cleanup:
            await cleanup.execute(delete(UssdLanguage).where(UssdLanguage.key == KEY))
            await cleanup.commit()
