"""A claim's stove-days are held as spans the database turns into days (one statement for a
bulk approval's thousand claims): the rows are those a row per day would be, stored as the
ORM stores a date and a time, so the double-counting reads (`held_over`, range filters on
the day) find each of them; a taken day splits a span."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from twinhub.db.models import CreditedDay
from twinhub.services.credited_days import day_spans, held_over, hold_spans


def _days(first: date, last: date) -> list[date]:
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


async def test_spans_hold_the_days_a_row_per_day_would(engine: AsyncEngine) -> None:
    async with engine.begin() as connection:
        await connection.run_sync(CreditedDay.__table__.create)
    project = "did:ixo:entity/p"
    # A month, the turn of a year, a leap day, one day, and a month two days of which are
    # taken already (three spans).
    taken = [date(2026, 3, 10), date(2026, 3, 11), date(2026, 3, 31)]
    spans = [
        *day_spans(
            "sn:A", "did:ixo:entity/a", project, date(2026, 10, 1), date(2026, 10, 31), "c1"
        ),
        *day_spans("sn:B", "did:ixo:entity/b", project, date(2026, 12, 30), date(2027, 1, 2), "c2"),
        *day_spans("sn:C", "did:ixo:entity/c", project, date(2028, 2, 28), date(2028, 3, 1), "c3"),
        *day_spans("sn:D", "did:ixo:entity/d", project, date(2026, 5, 7), date(2026, 5, 7), "c4"),
        *day_spans(
            "sn:E", "did:ixo:entity/e", project, date(2026, 3, 1), date(2026, 3, 31), "c5", taken
        ),
    ]
    assert [(s[4], s[5]) for s in spans if s[0] == "sn:E"] == [
        (date(2026, 3, 1), date(2026, 3, 9)),
        (date(2026, 3, 12), date(2026, 3, 30)),
    ]
    want = {
        (device, day, stove, project, None, claim)
        for device, stove, project, claim, first, last in spans
        for day in _days(first, last)
    }
    before = datetime.now(UTC)
    async with AsyncSession(engine) as session:
        await hold_spans(session, spans)
        await hold_spans(session, [])  # nothing to hold: no statement
        await session.commit()
    async with AsyncSession(engine) as session:
        rows = (await session.scalars(select(CreditedDay))).all()
        got = {(r.device, r.day, r.stove_did, r.project_did, r.period_id, r.claim_id) for r in rows}
        assert got == want and len(rows) == 31 + 4 + 3 + 1 + 28
        assert all(isinstance(r.day, date) and r.created_at >= before for r in rows)
        assert len({r.created_at for r in rows}) == 1
        # Found by the range reads double counting makes, day by day.
        held = await held_over(
            session, {(date(2026, 3, 5), date(2028, 2, 29)): ["sn:B", "sn:C", "sn:E"]}
        )
        assert sorted(day for day, _ in held["sn:B"]) == _days(date(2026, 12, 30), date(2027, 1, 2))
        assert sorted(day for day, _ in held["sn:C"]) == [date(2028, 2, 28), date(2028, 2, 29)]
        assert len(held["sn:E"]) == 28 - 4 and {h for _, h in held["sn:E"]} == {"claim c5"}
