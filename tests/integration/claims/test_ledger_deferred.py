"""Deferred ledger writes (domain creation): a create's rows are checked under the ledger's
lock and written with its batch's others at the commit, in one statement per table. Creates
that clash (a serial number, a chosen id) in the same batch as creates that succeed and
ordinary writes must still fail alone with today's errors, leave no row behind, and keep
heights contiguous and the chain verifiable. SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from typing import Any

import pytest
from sqlalchemy import event, func, select, text

from tests.conftest import (
    BACKENDS,
    BOOTSTRAP_KEY,
    Backend,
    Registry,
    fresh_postgres_database,
    running_registry,
    unique,
)
from tests.integration.claims.test_ledger_group_commit import assert_sound, transactions
from twinhub.db.models import Domain, DomainController, Relationship
from twinhub.kernel.errors import Conflict
from twinhub.kernel.principals import Principal
from twinhub.services import domains as domains_module
from twinhub.services.domains import DomainPatch, DomainSpec, SerialTaken, holders_of
from twinhub.services.ledger import Ledger
from twinhub.settings import Settings

ACTOR = Principal("did:ixo:org/deferred", frozenset({"writer", "admin"}))
STOVE = "did:ixo:protocol/clean-cooking"


class Refused(Exception):
    """Raised inside a write's body on purpose."""


@pytest.fixture
async def registry(
    settings_for: Callable[..., Settings], backend: Backend
) -> AsyncIterator[Registry]:
    async with AsyncExitStack() as stack:
        overrides: dict[str, Any] = {"twinhub_bootstrap_api_key": BOOTSTRAP_KEY}
        if backend.database == "postgresql":
            overrides["database_url"] = await stack.enter_async_context(
                fresh_postgres_database("deferred")
            )
        yield await stack.enter_async_context(running_registry(settings_for(**overrides)))


def stove(serial: str | None = None, local_id: str | None = None) -> DomainSpec:
    return DomainSpec(
        type="Device",
        protocol=STOVE,
        metadata={"name": unique("stove")},
        properties={"fuelType": "lpg", "serialNumber": serial or unique("sn")},
        local_id=local_id,
    )


def organisation() -> DomainSpec:
    return DomainSpec(
        type="Organisation",
        protocol="did:ixo:protocol/organisation",
        metadata={"name": unique("org")},
        properties={"legalName": unique("Org Ltd"), "country": "KE"},
    )


async def test_clashing_creates_fail_alone_among_many(registry: Registry) -> None:
    """Clashes with a row already stored and with a row of the same batch not yet written,
    beside plain creates, organisations (two domains each) and ordinary writes (updates)."""
    platform = registry.platform
    held = await platform.domains.create(stove(), ACTOR)
    others = [await platform.domains.create(stove(), ACTOR) for _ in range(10)]
    start = await platform.ledger.height()
    shared_serial, shared_id = unique("shared-sn"), unique("shared-id")
    plain = [stove() for _ in range(150)]
    same_serial = [stove(serial=shared_serial) for _ in range(15)]
    stored_serial = [stove(serial=held["properties"]["serialNumber"]) for _ in range(10)]
    same_id = [stove(local_id=shared_id) for _ in range(10)]
    orgs = [organisation() for _ in range(10)]
    calls: list[Any] = [platform.domains.create(s, ACTOR) for s in plain]
    calls += [platform.domains.create(s, ACTOR) for s in same_serial + stored_serial + same_id]
    calls += [platform.domains.create(s, ACTOR) for s in orgs]
    calls += [
        platform.domains.update(d["did"], DomainPatch(metadata={"n": 1}), ACTOR, None)
        for d in others
    ]
    order = list(range(len(calls)))
    order = order[::2] + order[1::2]  # interleave the kinds
    results: list[Any] = [None] * len(calls)
    outcomes = await asyncio.gather(*(calls[i] for i in order), return_exceptions=True)
    for i, outcome in zip(order, outcomes, strict=True):
        results[i] = outcome

    def part(start: int, count: int) -> list[Any]:
        return results[start : start + count]

    assert all(isinstance(r, dict) for r in part(0, 150))
    serial_won = [r for r in part(150, 15) if isinstance(r, dict)]
    serial_lost = [r for r in part(150, 15) if not isinstance(r, dict)]
    assert len(serial_won) == 1 and len(serial_lost) == 14
    for error in serial_lost:
        assert isinstance(error, SerialTaken), error
        assert error.details[0].field == "properties.serialNumber"
        assert error.details[0].error == f"taken by {serial_won[0]['did']}"
    for error in part(165, 10):
        assert isinstance(error, SerialTaken), error
        assert error.details[0].error == f"taken by {held['did']}"
    id_won = [r for r in part(175, 10) if isinstance(r, dict)]
    id_lost = [r for r in part(175, 10) if not isinstance(r, dict)]
    assert len(id_won) == 1 and id_won[0]["did"].endswith("/" + shared_id)
    assert len(id_lost) == 9
    assert all(type(e) is Conflict and "exists already" in str(e) for e in id_lost), id_lost
    org_records = part(185, 10)
    assert all(isinstance(r, dict) and r["membershipGroup"] for r in org_records)
    updated = part(195, 10)
    assert all(isinstance(r, dict) and r["version"] == 2 for r in updated), updated

    created = [r["did"] for r in part(0, 150) + serial_won + id_won + org_records]
    groups = [r["membershipGroup"] for r in org_records]
    rows = await transactions(registry, start)
    # Every create once (an organisation's group too), every update once; no gap.
    assert [row.height for row in rows] == list(range(start + 1, start + len(rows) + 1))
    expected = Counter(created + groups + [d["did"] for d in others])
    assert Counter(row.subject for row in rows) == expected
    async with platform.sessionmaker() as session:
        stored = set(
            await session.scalars(select(Domain.did).where(Domain.did.in_(created + groups)))
        )
        controllers = await session.scalar(
            select(func.count())
            .select_from(DomainController)
            .where(DomainController.domain_did.in_(created + groups))
        )
        edges = set(
            await session.execute(
                select(Relationship.source_did, Relationship.target_did).where(
                    Relationship.source_did.in_([r["did"] for r in org_records])
                )
            )
        )
        holders = await session.scalar(
            select(func.count()).select_from(Domain).where(Domain.serial == shared_serial)
        )
    assert stored == set(created + groups)
    assert controllers == len(created) + len(groups)
    assert edges == {(r["did"], r["membershipGroup"]) for r in org_records}
    assert holders == 1
    for record in org_records + serial_won:  # what was answered is what is stored
        assert await platform.domains.get(record["did"]) == record
    await assert_sound(registry)


async def test_an_ordinary_write_sees_the_batchs_deferred_rows(registry: Registry) -> None:
    """An update joining a batch after a deferred create sees the create's row: taking its
    serial number is refused, as it would be had the create committed alone."""
    platform = registry.platform
    ledger: Ledger = platform.ledger
    existing = await platform.domains.create(stove(), ACTOR)
    release = asyncio.Event()

    async def holding() -> None:  # keeps the batch open while the others queue behind
        async with ledger.write() as write:
            await write.append("test.note", "did:ixo:test/hold", "t", {})
            await release.wait()

    serial = unique("sn")
    first = asyncio.create_task(holding())
    await asyncio.sleep(0.05)
    create = asyncio.create_task(platform.domains.create(stove(serial=serial), ACTOR))
    await asyncio.sleep(0.05)
    patch = DomainPatch(properties={"serialNumber": serial})
    update = asyncio.create_task(platform.domains.update(existing["did"], patch, ACTOR, None))
    await asyncio.sleep(0.05)
    release.set()
    await first
    created = await create
    with pytest.raises(SerialTaken) as refused:
        await update
    assert refused.value.details[0].error == f"taken by {created['did']}"
    assert (await platform.domains.get(existing["did"]))["version"] == 1
    await assert_sound(registry)


async def test_a_deferred_write_failing_discards_only_its_rows(registry: Registry) -> None:
    """A deferred write that raises after deferring rows and appending leaves nothing: its
    rows are not written, its heights go to the next write."""
    platform = registry.platform
    ledger: Ledger = platform.ledger
    start = await ledger.height()
    table = DomainController.__table__
    owner = await platform.domains.create(stove(), ACTOR)

    async def one(n: int) -> int:
        async with ledger.write(deferred=True) as write:
            write.defer(table, {"domain_did": owner["did"], "controller": f"did:ixo:c/{n}"})
            transaction = await write.append("test.note", f"did:ixo:test/d{n}", "t", {"n": n})
            if n % 3 == 0:
                raise Refused(n)
            return transaction.height

    start = await ledger.height()
    results = await asyncio.gather(*(one(n) for n in range(60)), return_exceptions=True)
    heights = sorted(r for r in results if isinstance(r, int))
    assert sum(isinstance(r, Refused) for r in results) == 20
    assert heights == list(range(start + 1, start + 41))
    async with platform.sessionmaker() as session:
        kept = set(
            await session.scalars(
                select(DomainController.controller).where(
                    DomainController.domain_did == owner["did"],
                    DomainController.controller.like("did:ixo:c/%"),
                )
            )
        )
    assert kept == {f"did:ixo:c/{n}" for n in range(60) if n % 3}
    report = await ledger.verify()  # (the stray controllers are this test's own)
    assert report.ok and report.height == start + 40, report


async def test_creates_the_table_would_refuse_take_the_ordinary_write(
    registry: Registry,
) -> None:
    """A serial number longer than its column is not deferred: whatever the database says
    of it concerns that create alone, and the creates beside it commit."""
    platform = registry.platform
    start = await platform.ledger.height()
    long_serial = stove(serial="x" * 201)
    long_serial.protocol = "did:ixo:protocol/asset"  # no length rule of its own
    long_serial.type = "Asset"
    results = await asyncio.gather(
        platform.domains.create(long_serial, ACTOR),
        *(platform.domains.create(stove(), ACTOR) for _ in range(20)),
        return_exceptions=True,
    )
    assert all(isinstance(r, dict) for r in results[1:])
    committed = 20 + isinstance(results[0], dict)
    assert await platform.ledger.height() == start + committed
    await assert_sound(registry)


async def test_concurrent_posts_of_one_serial_over_http(registry: Registry) -> None:
    """Through the API: of many POSTs with one serial number in flight at once, one is 201
    and every other gets 409 `serial_taken` naming the winner, field and all."""
    serial = unique("http-sn")
    body = {
        "type": "Device",
        "class": STOVE,
        "metadata": {"name": "stove"},
        "properties": {"fuelType": "lpg", "serialNumber": serial},
    }
    plain = [
        {**body, "properties": {"fuelType": "lpg", "serialNumber": unique("sn")}} for _ in range(20)
    ]
    answers = await asyncio.gather(
        *(registry.client.post("/v1/domains", json=b) for b in [body] * 12 + plain)
    )
    assert all(answer.status_code == 201 for answer in answers[12:])
    won = [a for a in answers[:12] if a.status_code == 201]
    lost = [a for a in answers[:12] if a.status_code != 201]
    assert len(won) == 1 and len(lost) == 11
    winner = won[0].json()["did"]
    assert won[0].headers["location"].endswith(winner)
    for answer in lost:
        assert answer.status_code == 409
        error = answer.json()["error"]
        assert error["code"] == "serial_taken"
        assert error["details"] == [
            {"field": "properties.serialNumber", "error": f"taken by {winner}"}
        ]
    await assert_sound(registry)


async def test_holders_of_answers_each_item_as_its_own_statement_would(
    registry: Registry,
) -> None:
    """`holders_of`, the statement a batch's queued creates share, against the question
    asked of each (did, protocol, serial) alone through SQLAlchemy: a did that exists or
    not, a serial held by another domain, by the item's own did, under another protocol,
    no serial, the same item twice."""
    platform = registry.platform
    held = await platform.domains.create(stove(), ACTOR)
    serial = held["properties"]["serialNumber"]
    other = await platform.domains.create(stove(), ACTOR)
    items = [
        (held["did"], STOVE, serial),  # its own serial: exists, no other holder
        (other["did"], STOVE, serial),  # exists, and another holds the serial
        ("did:ixo:entity/not-there", STOVE, serial),
        ("did:ixo:entity/not-there", STOVE, unique("free")),
        ("did:ixo:entity/not-there", "did:ixo:protocol/organisation", serial),
        ("did:ixo:entity/not-there", STOVE, None),
        (other["did"], STOVE, None),
        (held["did"], STOVE, serial),
    ]

    async def alone(session: Any, did: str, protocol: str, serial: str | None) -> Any:
        rows = await session.execute(
            select(Domain.did, Domain.serial).where(
                (Domain.did == did) | ((Domain.class_did == protocol) & (Domain.serial == serial))
            )
        )
        holder, exists = None, False
        for found, found_serial in rows:
            if found == did:
                exists = True
            elif serial is not None and found_serial == serial:
                holder = found
        return holder, exists

    async with platform.sessionmaker() as session:
        together = await holders_of(session, items)
        for size in (1, 3):
            for start in range(0, len(items), size):
                assert (await holders_of(session, items[start : start + size])) == {
                    item: together[item] for item in items[start : start + size]
                }
        expected = {item: await alone(session, *item) for item in items}
    assert together == expected
    assert together[items[1]] == (held["did"], True) and together[items[0]] == (None, True)


async def test_queued_creates_share_one_check_until_an_ordinary_write_runs(
    registry: Registry,
) -> None:
    """Creates queued behind a batch are checked in one statement, once; an update
    joining the batch between them drops those answers, so a create after it that takes
    the serial the update took is refused (409 serial_taken naming the updated domain)
    instead of failing the batch at its commit."""
    platform = registry.platform
    ledger: Ledger = platform.ledger
    existing = await platform.domains.create(stove(), ACTOR)
    asked: list[int] = []
    real = domains_module.holders_of

    async def counted(session: Any, items: list[Any]) -> Any:
        asked.append(len(items))
        return await real(session, items)

    release = asyncio.Event()

    async def holding() -> None:  # a deferred write keeps the batch open for the others
        async with ledger.write(deferred=True):
            await release.wait()

    async def queued(work: Any) -> asyncio.Task[Any]:
        waiting = ledger._queued
        task = asyncio.create_task(work)
        # Polled: nothing signals a writer's arrival in the turn's queue (FIFO).
        while ledger._queued == waiting and not task.done():  # noqa: ASYNC110
            await asyncio.sleep(0.005)
        return task

    serial = unique("sn")
    domains_module.holders_of = counted  # type: ignore[assignment]
    try:
        first = asyncio.create_task(holding())
        while not ledger._turn.locked():  # noqa: ASYNC110 (as above)
            await asyncio.sleep(0.005)
        before = await queued(platform.domains.create(stove(), ACTOR))
        also = await queued(platform.domains.create(stove(), ACTOR))
        patch = DomainPatch(properties={"serialNumber": serial})
        update = await queued(platform.domains.update(existing["did"], patch, ACTOR, None))
        after = await queued(platform.domains.create(stove(serial=serial), ACTOR))
        release.set()
        await first
        made = [await before, await also]
        updated = await update
        with pytest.raises(SerialTaken) as refused:
            await after
    finally:
        domains_module.holders_of = real  # type: ignore[assignment]
    assert refused.value.details[0].error == f"taken by {existing['did']}"
    assert updated["properties"]["serialNumber"] == serial
    assert asked == [3, 1]  # the three queued creates at once; the last alone again
    async with platform.sessionmaker() as session:
        stored = set(await session.scalars(select(Domain.did)))
    assert {record["did"] for record in made} <= stored
    await assert_sound(registry)


async def test_a_batch_of_creates_closes_in_one_statement_on_postgresql(
    registry: Registry,
) -> None:
    """The writers of a batch all wait for its close, so on PostgreSQL it sends every row
    (domains, controllers, relationships, transactions, events) and the new head in one
    statement, after the event numbering lock and top position. What it wrote is what the
    same creates write one by one: the ledger verifies and every record reconciles."""
    platform = registry.platform
    ledger: Ledger = platform.ledger
    release = asyncio.Event()

    async def holding() -> None:  # keeps the batch open while the creates queue
        async with ledger.write(deferred=True):
            await release.wait()

    first = asyncio.create_task(holding())
    while not ledger._turn.locked():  # noqa: ASYNC110 (nothing signals the turn)
        await asyncio.sleep(0.005)
    statements: list[str] = []

    def seen(_c: Any, _cursor: Any, statement: str, _p: Any, _x: Any, _many: bool) -> None:
        statements.append(" ".join(statement.split()))

    engine = platform.sessionmaker.kw["bind"].sync_engine
    specs = [stove(), organisation(), stove(), stove()]
    creates = []
    for spec in specs:
        waiting = ledger._queued
        creates.append(asyncio.create_task(platform.domains.create(spec, ACTOR)))
        while ledger._queued == waiting:  # noqa: ASYNC110 (as above)
            await asyncio.sleep(0.005)
    asked: list[int] = []
    real = domains_module.holders_of

    async def counted(session: Any, items: list[Any]) -> Any:
        asked.append(len(items))
        return await real(session, items)

    event.listen(engine, "before_cursor_execute", seen)
    domains_module.holders_of = counted  # type: ignore[assignment]
    try:
        release.set()
        await first
        made = [await create for create in creates]
    finally:
        event.remove(engine, "before_cursor_execute", seen)
        domains_module.holders_of = real  # type: ignore[assignment]
    # One holder check for the four queued creates; the organisation's membership group,
    # a DID minted in the write, is not looked for.
    assert asked == [4]
    writes = [s for s in statements if s.startswith(("INSERT", "WITH", "UPDATE"))]
    if engine.dialect.name == "postgresql":
        [together] = writes
        assert together.startswith("WITH ")
        tables = ("domains", "domain_controllers", "relationships", "ledger_transactions", "events")
        for table in tables:
            assert f"INSERT INTO {table} " in together
        assert together.rsplit(") ", 1)[-1].startswith("UPDATE ledger_head SET height = $")
    else:
        assert len(writes) > 1  # SQLite: a statement each, in process
    async with platform.sessionmaker() as session:
        stored = set(await session.scalars(select(Domain.did)))
    assert {record["did"] for record in made} <= stored
    assert len({record["did"] for record in made}) == 4
    await assert_sound(registry)


@pytest.mark.parametrize(
    "backend", [b for b in BACKENDS if b.database == "postgresql"], ids=str, indirect=True
)
async def test_a_batch_of_creates_is_planned_for_the_tables_as_they_are(
    registry: Registry,
) -> None:
    """PostgreSQL: a batch a create opens plans each statement anew (a plan kept from when
    the table was small would scan it whole); a batch an ordinary write opens keeps
    PostgreSQL's own choice, as planning every approval's statements anew costs more."""
    ledger: Ledger = registry.platform.ledger
    show = text("SHOW plan_cache_mode")
    async with ledger.write(deferred=True) as write:
        assert await write.session.scalar(show) == "force_custom_plan"
    async with ledger.write() as write:
        assert await write.session.scalar(show) == "auto"
    await assert_sound(registry)
