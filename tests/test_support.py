"""The support queue worked: a stove problem a household reported over USSD is resolved
(open -> resolved, once, with who and why), on SQLite and PostgreSQL; each resolution is a
`stove.problem_resolved` event, and a later report of the same problem opens a new one."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.conftest import Registry, unique
from twinhub.identifiers import customer_did
from twinhub.services.errors import Conflict, Invalid, NotFound
from twinhub.services.stove_care import ProblemView, StoveCare

OPERATOR = "did:ixo:org/support-desk"


def new_stove() -> str:
    """A stove DID no other test uses (the run's PostgreSQL database is shared)."""
    return f"did:ixo:entity/{unique('jiko')}"


def care(registry: Registry) -> StoveCare:
    found: StoveCare = registry.platform.stove_care
    return found


async def report(registry: Registry, stove: str, kind: str = "smoke") -> ProblemView:
    return await care(registry).report_problem("12345674", stove, kind)


async def events_about(registry: Registry, stove: str, type: str) -> list[Any]:
    records = await registry.platform.events.store.all_records()
    return [e for e in records if e.type == type and e.subject == stove]


async def test_resolving_a_problem_closes_it_once_and_a_new_report_opens_another(
    registry: Registry,
) -> None:
    stove = new_stove()
    problem = await report(registry, stove)
    assert problem.status == "open"
    resolved = await care(registry).resolve_problem(problem.reference, OPERATOR, "  New seal.  ")
    assert resolved.status == "resolved" and resolved.reference == problem.reference
    assert resolved.resolved_by == OPERATOR and resolved.note == "New seal."
    assert resolved.resolved_at is not None and resolved.resolved_at >= problem.reported_at
    open_now = [p.reference for p in await care(registry).open_problems(limit=1000)]
    assert problem.reference not in open_now

    # The resolution is an event, written with it, about the stove, by the operator.
    [event] = await events_about(registry, stove, "stove.problem_resolved")
    assert event.actor == OPERATOR
    assert event.data == {
        "reference": problem.reference,
        "stove": stove,
        "customer": customer_did("12345674"),
        "kind": "smoke",
        "status": "resolved",
        "reportedAt": problem.reported_at.isoformat(),
        "resolvedAt": resolved.resolved_at.isoformat(),
        "resolvedBy": OPERATOR,
        "note": "New seal.",
    }

    # Twice: a conflict, and no second event.
    with pytest.raises(Conflict, match="already resolved"):
        await care(registry).resolve_problem(problem.reference, OPERATOR, "again")
    assert len(await events_about(registry, stove, "stove.problem_resolved")) == 1

    # The same problem reported after the fix is a new problem, with its own reference.
    again = await report(registry, stove)
    assert again.reference != problem.reference and again.status == "open"
    assert again.reference in [p.reference for p in await care(registry).open_problems(1000)]
    assert len(await events_about(registry, stove, "stove.problem_reported")) == 2
    # ... and reported once more while open, it is that new one.
    assert (await report(registry, stove)).reference == again.reference


async def test_resolving_refuses_unknown_references_and_missing_notes(registry: Registry) -> None:
    with pytest.raises(NotFound):
        await care(registry).resolve_problem("00000000", OPERATOR, "Fixed.")
    stove = new_stove()
    problem = await report(registry, stove, "meter")
    for note in ("", "   ", "x" * 501):
        with pytest.raises(Invalid) as refused:
            await care(registry).resolve_problem(problem.reference, OPERATOR, note)
        assert [d.field for d in refused.value.details] == ["note"]
    assert await events_about(registry, stove, "stove.problem_resolved") == []
    done = await care(registry).resolve_problem(problem.reference, OPERATOR, "x" * 500)
    assert done.status == "resolved"


async def test_two_operators_resolving_at_once_one_wins(registry: Registry) -> None:
    stove = new_stove()
    problem = await report(registry, stove, "broken")
    outcomes = await asyncio.gather(
        *(
            care(registry).resolve_problem(problem.reference, f"{OPERATOR}-{n}", "Replaced.")
            for n in range(4)
        ),
        return_exceptions=True,
    )
    assert sum(isinstance(o, ProblemView) for o in outcomes) == 1
    assert sum(isinstance(o, Conflict) for o in outcomes) == 3
    assert len(await events_about(registry, stove, "stove.problem_resolved")) == 1


async def test_the_migration_adds_and_drops_the_resolution_columns(registry: Registry) -> None:
    """0014 on the test's backend: down to 0013 drops the resolution columns (a resolved
    problem stays out of the open queue, as 'closed'); up again adds them."""
    from alembic import command
    from sqlalchemy import Connection, inspect, text

    from twinhub.db.migrate import alembic_config

    stove = new_stove()
    problem = await report(registry, stove)
    await care(registry).resolve_problem(problem.reference, OPERATOR, "Fixed.")
    platform = registry.platform
    await platform.stop()  # no background work while the schema moves
    config = alembic_config()

    def move(connection: Connection, target: str, down: bool) -> list[str]:
        config.attributes["connection"] = connection
        (command.downgrade if down else command.upgrade)(config, target)
        return [c["name"] for c in inspect(connection).get_columns("stove_problems")]

    status = text("SELECT status FROM stove_problems WHERE reference = :r")
    async with platform.engine.begin() as connection:
        columns = await connection.run_sync(move, "0013", True)
        assert "resolved_by" not in columns and "resolution_note" not in columns
        assert await connection.scalar(status, {"r": problem.reference}) == "closed"
    async with platform.engine.begin() as connection:
        columns = await connection.run_sync(move, "head", False)
        assert {"resolved_by", "resolution_note"} <= set(columns)
        assert await connection.scalar(status, {"r": problem.reference}) == "resolved"
