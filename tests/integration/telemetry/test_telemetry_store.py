"""The store's group commit (what MQTT uses): several batches, some of one device, with
repeated seqs, in one transaction; each reading counted, stored and rolled up once."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.exc import DBAPIError

from tests.conftest import Registry, restore_token_decimals, saved_token_decimals
from tests.support.telemetry_world import build_farm
from twinhub.mrv.rollups import bucket_of
from twinhub.mrv.telemetry_schema import Reading
from twinhub.telemetry.rows import Batch, as_records, merge_rollups
from twinhub.telemetry.wide import decode, fields_of


async def test_a_group_with_one_device_twice_stores_each_seq_once(registry: Registry) -> None:
    farm = await build_farm(registry)
    a, b = await farm.stove(), await farm.stove()
    store = registry.platform.telemetry.store
    hour = bucket_of(datetime.now(UTC) - timedelta(hours=3), "hour")

    def batch(did: str, seqs: list[int]) -> Batch:
        readings = [Reading(s, hour + timedelta(minutes=s), {"energyKwh": float(s)}) for s in seqs]
        return Batch(did, readings, ["energyKwh"], None, [farm.project])

    first = await store.store_many([batch(a, [1, 2]), batch(b, [1]), batch(a, [2, 3])])
    assert [len(r.inserted) for r in first] == [2, 1, 1]
    assert [r.duplicates for r in first] == [0, 0, 1]
    again = await store.store_many([batch(a, [1, 2, 3, 4]), batch(a, [4])])
    assert [len(r.inserted) for r in again] == [1, 0]
    cells = await store.aggregates(a, "hour", None, None)
    assert cells[hour]["energyKwh"] == {"count": 4, "sum": 10.0, "min": 1.0, "max": 4.0}
    project = await store.aggregates(farm.project, "hour", None, None)
    assert project[hour]["energyKwh"]["count"] == 5 and project[hour]["energyKwh"]["sum"] == 11.0


def test_merged_rollups_keep_one_row_per_key() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    row = {"scope": "s", "interval": "day", "bucket": start, "field": "f"}
    merged = merge_rollups(
        [
            {**row, "count": 1, "sum": 2.0, "min": 2.0, "max": 2.0},
            {**row, "count": 2, "sum": 1.0, "min": -1.0, "max": 2.0},
        ]
    )
    assert merged == [{**row, "count": 3, "sum": 3.0, "min": -1.0, "max": 2.0}]


def _move(connection: Any, target: str, down: bool) -> list[str]:
    """Alembic down or up to `target` on this connection; the tables then."""
    from alembic import command
    from sqlalchemy import inspect

    from twinhub.db.migrate import alembic_config

    config = alembic_config()
    config.attributes["connection"] = connection
    (command.downgrade if down else command.upgrade)(config, target)
    return inspect(connection).get_table_names()


async def test_the_migration_goes_down_and_up_again(registry: Registry) -> None:
    """0009 on the test's backend: down to 0008 drops the telemetry tables and the
    protocols' column, up again restores them (partitioned on PostgreSQL)."""
    from sqlalchemy import text

    platform = registry.platform
    await platform.stop()  # no background work while the schema moves
    decimals = await saved_token_decimals(platform.engine)
    async with platform.engine.begin() as connection:
        tables = await connection.run_sync(_move, "0008", True)
    assert "telemetry_readings" not in tables and "device_tokens" not in tables
    async with platform.engine.begin() as connection:
        tables = await connection.run_sync(_move, "head", False)
        assert {"telemetry_readings", "telemetry_rollups", "device_tokens"} <= set(tables)
        declared = await connection.scalar(
            text("SELECT telemetry FROM protocols WHERE did = 'did:ixo:protocol/clean-cooking'")
        )
        assert declared is not None  # the built-in stove learns its telemetry again
        if platform.engine.dialect.name == "postgresql":
            kind = await connection.scalar(
                text("SELECT relkind FROM pg_class WHERE relname = 'telemetry_readings'")
            )
            assert kind in ("p", b"p")  # a partitioned table
            options = await connection.scalar(
                text("SELECT reloptions FROM pg_class WHERE relname = 'telemetry_rollups'")
            )
            assert "fillfactor=70" in options  # 0017: room on each page for HOT updates
    await restore_token_decimals(platform.engine, decimals)
    await platform.start()


async def test_rollups_keep_their_figures_through_0031_and_0030_down_and_up(
    registry: Registry,
) -> None:
    """0031 makes the narrow rollups (one row a field) wide (one row a scope, interval and
    bucket: telemetry/wide.py) and splits them back on downgrade; 0030 keeps the narrow
    table WITHOUT ROWID on SQLite. Rows kept by ingestion, with buckets of different field
    lists, have the same figures to the last bit after each move, and the aggregates read
    the same."""
    from sqlalchemy import text

    farm = await build_farm(registry)
    stove = await farm.stove()
    store = registry.platform.telemetry.store
    hour = bucket_of(datetime.now(UTC) - timedelta(hours=5), "hour")
    readings = [
        Reading(1, hour + timedelta(minutes=1), {"energyKwh": 0.1, "meterKwh": 10.25}),
        Reading(2, hour + timedelta(minutes=2), {"energyKwh": 1 / 3}),
        Reading(3, hour + timedelta(hours=1), {"energyKwh": 0.7, "meterKwh": 10.5}),
        Reading(4, hour + timedelta(hours=2), {"meterKwh": 11.0}),
    ]
    await store.store_many(
        [Batch(stove, readings, ["energyKwh", "meterKwh"], "meterKwh", [farm.project])]
    )
    before = {
        (scope, interval): await store.aggregates(scope, interval, None, None)
        for scope in (stove, farm.project)
        for interval in ("hour", "day", "month")
    }
    engine = registry.platform.engine
    wide = text('SELECT scope, "interval", bucket, fields, cells FROM telemetry_rollups')
    narrow = text(
        'SELECT scope, "interval", bucket, field, count, sum, min, max FROM telemetry_rollups'
    )
    kind = text("SELECT sql FROM sqlite_master WHERE name = 'telemetry_rollups'")

    def key(bucket: Any) -> str:  # SQLite's text or PostgreSQL's datetime, as one text
        return str(bucket)[:19].replace("T", " ")

    async def figures(statement: Any) -> tuple[dict[tuple[Any, ...], Any], str | None]:
        async with engine.connect() as connection:
            rows = (await connection.execute(statement)).all()
            made = await connection.scalar(kind) if engine.dialect.name == "sqlite" else None
        found: dict[tuple[Any, ...], Any] = {}
        for row in rows:
            if len(row) == 5:
                assert list(fields_of(row[3])) == sorted(fields_of(row[3]))
                for name, cell in decode(row[3], row[4]).items():
                    found[(row[0], row[1], key(row[2]), name)] = cell
            else:
                found[(row[0], row[1], key(row[2]), row[3])] = tuple(row[4:])
        return found, made

    at_head, made = await figures(wide)
    assert len(at_head) >= 12  # hour, day and month of two fields, the stove and its project
    assert any(len(fields_of(row[3])) == 1 for row in await _rows(engine, wide))
    await registry.platform.stop()  # no background work while the schema moves
    async with engine.begin() as connection:
        await connection.run_sync(_move, "0030", True)
    at_0030, made_0030 = await figures(narrow)
    async with engine.begin() as connection:
        await connection.run_sync(_move, "0028", True)
    at_0028, made_0028 = await figures(narrow)
    async with engine.begin() as connection:
        await connection.run_sync(_move, "head", False)
    up, made_up = await figures(wide)
    assert at_0030 == at_head and at_0028 == at_head and up == at_head
    if engine.dialect.name == "sqlite":
        for ddl in (made, made_0030, made_up):
            assert "WITHOUT ROWID" in (ddl or "")
        assert "WITHOUT ROWID" not in (made_0028 or "")
    await registry.platform.start()
    for (scope, interval), cells in before.items():
        assert await store.aggregates(scope, interval, None, None) == cells


async def _rows(engine: Any, statement: Any) -> list[Any]:
    async with engine.connect() as connection:
        return list((await connection.execute(statement)).all())


async def test_retention_prunes_raw_readings_and_keeps_rollups(registry: Registry) -> None:
    farm = await build_farm(registry)
    stove = await farm.stove()
    now = datetime.now(UTC)
    old, recent = now - timedelta(days=100), now - timedelta(days=2)
    response = await farm.send(
        stove,
        [
            {"seq": 1, "time": old.isoformat(), "values": {"energyKwh": 1.0}},
            {"seq": 2, "time": recent.isoformat(), "values": {"energyKwh": 2.0}},
        ],
    )
    assert response.json()["accepted"] == 2
    store = registry.platform.telemetry.store
    assert await store.prune(now - timedelta(days=30)) >= 1
    history = await store.history(stove, None, None, None, 10)
    assert [r.seq for r in history] == [2]
    months = await store.aggregates(stove, "month", None, None)
    assert sum(cell["energyKwh"]["count"] for cell in months.values()) == 2  # rollups stay


async def test_a_seq_stored_in_another_month_is_a_duplicate(registry: Registry) -> None:
    """The bulk INSERT skips a device's used seqs whatever their time (on PostgreSQL the key
    holds the time, and the two readings fall in different monthly partitions)."""
    farm = await build_farm(registry)
    stove = await farm.stove()
    store = registry.platform.telemetry.store
    now = datetime.now(UTC) - timedelta(minutes=5)

    def batch(seq: int, moment: datetime) -> Batch:
        return Batch(stove, [Reading(seq, moment, {"energyKwh": 1.0})], ["energyKwh"], None, [])

    first = await store.store_many([batch(7, now)])
    late = await store.store_many([batch(7, now - timedelta(days=45)), batch(8, now)])
    assert [len(r.inserted) for r in first + late] == [1, 0, 1]
    assert [r.duplicates for r in late] == [1, 0]
    assert [r.seq for r in await store.history(stove, None, None, None, 10)] == [7, 8]


async def test_a_seq_below_the_highest_stored_is_stored_when_it_never_was(
    registry: Registry,
) -> None:
    """PostgreSQL COPYs a group straight into the readings when every seq is above its
    device's highest stored one, and takes the staging path otherwise: a seq below the
    highest that the device never sent is stored, a stored one is a duplicate, and the
    next group of higher seqs is stored whole (on both databases the same answers)."""
    farm = await build_farm(registry)
    stove = await farm.stove()
    store = registry.platform.telemetry.store
    hour = bucket_of(datetime.now(UTC) - timedelta(hours=3), "hour")

    def batch(seqs: list[int]) -> Batch:
        readings = [Reading(s, hour + timedelta(minutes=s), {"energyKwh": 1.0}) for s in seqs]
        return Batch(stove, readings, ["energyKwh"], None, [farm.project])

    results = [await store.store_many([batch(seqs)]) for seqs in ([5, 10], [7, 10, 11], [12])]
    assert [(len(r[0].inserted), r[0].duplicates) for r in results] == [(2, 0), (2, 1), (1, 0)]
    assert [r.seq for r in await store.history(stove, None, None, None, 10)] == [5, 7, 10, 11, 12]


async def test_two_stores_racing_on_one_device_store_each_seq_once(registry: Registry) -> None:
    """Two processes' stores writing one device's overlapping seqs at once: each seq is
    stored once and counted once (the second to get the device's lock reads the highest
    stored seq the first committed, so it takes the path that skips stored seqs)."""
    from twinhub.telemetry.store import TelemetryStore

    farm = await build_farm(registry)
    stove = await farm.stove()
    stores = [registry.platform.telemetry.store, TelemetryStore(registry.platform.sessionmaker)]
    hour = bucket_of(datetime.now(UTC) - timedelta(hours=5), "hour")

    def batch(seqs: range) -> Batch:
        readings = [Reading(s, hour + timedelta(minutes=s), {"energyKwh": 1.0}) for s in seqs]
        return Batch(stove, readings, ["energyKwh"], None, [farm.project])

    for start in (1, 31):
        results = await asyncio.gather(
            stores[0].store_many([batch(range(start, start + 20))]),
            stores[1].store_many([batch(range(start + 10, start + 30))]),
        )
        assert sorted(len(r[0].inserted) for r in results) == [10, 20]
    stored = [r.seq for r in await store_history(stores[0], stove)]
    assert stored == list(range(1, 61))
    cells = await stores[0].aggregates(stove, "day", None, None)
    assert sum(fields["energyKwh"]["count"] for fields in cells.values()) == 60


async def store_history(store: Any, did: str) -> list[Reading]:
    return await store.history(did, None, None, None, 1000)


async def test_a_driver_error_in_a_bulk_write_comes_out_as_sqlalchemys(registry: Registry) -> None:
    """The bulk writes run on the driver's connection; its errors must look like any other
    statement's (the API answers 503 for them, MQTT retries them)."""
    store = registry.platform.telemetry.store

    async def broken(driver: Any) -> None:
        await driver.execute("SELECT * FROM no_such_telemetry_table")

    with pytest.raises(DBAPIError) as caught:
        async with registry.platform.sessionmaker.begin() as session:
            await store._raw(session, broken)
    assert "no_such_telemetry_table" in str(caught.value)


def test_messages_merge_into_one_batch_per_device_but_rejections_stay_apart() -> None:
    from twinhub.mrv.telemetry_schema import Rejection, parse_schema
    from twinhub.telemetry.service import Prepared, TwinInfo, merge_by_device

    info = TwinInfo(parse_schema({"fields": {"energyKwh": {"type": "number"}}}), [], 0.0)
    moment = datetime(2026, 1, 1, tzinfo=UTC)

    def message(did: str, seq: int, rejected: bool = False) -> Prepared:
        refused = [Rejection(1, "values.energyKwh", "expected a finite number", seq + 1)]
        reading = Reading(seq, moment, {"energyKwh": 1.0})
        return Prepared(did, info, [reading], refused if rejected else [], "mqtt")

    merged = merge_by_device(
        [message("a", 1), message("b", 1), message("a", 2), message("a", 3, rejected=True)]
    )
    assert [(p.did, [r.seq for r in p.valid], len(p.rejected)) for p in merged] == [
        ("a", [1, 2], 0),
        ("b", [1], 0),
        ("a", [3], 1),
    ]


async def test_driver_level_writes_commit_and_roll_back_with_their_transaction(
    registry: Registry,
) -> None:
    """Rollups added as a transaction's first statement (what the benchmark's seeding does)
    are kept by its commit and undone by its rollback. On PostgreSQL the driver's COPY ran
    in autocommit before SQLAlchemy's lazy BEGIN: the staged rows vanished and nothing was
    added."""
    platform = registry.platform
    store = platform.telemetry.store
    bucket = bucket_of(datetime.now(UTC), "day")
    row = {"interval": "day", "bucket": bucket, "field": "f", "count": 3, "sum": 6.0}
    row |= {"min": 1.0, "max": 3.0}
    async with platform.sessionmaker.begin() as session:
        await store.add_rollups(session, as_records([{**row, "scope": "raw-kept"}]))
    kept = await store.aggregates("raw-kept", "day", None, None)
    assert kept[bucket]["f"] == {"count": 3, "sum": 6.0, "min": 1.0, "max": 3.0}
    with pytest.raises(LookupError):
        async with platform.sessionmaker.begin() as session:
            await store.add_rollups(session, as_records([{**row, "scope": "raw-undone"}]))
            raise LookupError("the transaction is abandoned")
    assert await store.aggregates("raw-undone", "day", None, None) == {}


async def test_concurrent_mixed_batches_roll_up_exactly_the_stored_readings(
    registry: Registry,
) -> None:
    """Concurrent HTTP batches of several stoves of one project (new readings, resent
    ones, late ones from weeks ago, several fields, counted enum values): every answer
    counts its own readings, and each rollup of every scope (stove, project, organisation;
    hour, day and month) equals the sums of the raw readings stored. On SQLite the waiting
    batches go in as groups (one transaction each), on PostgreSQL side by side."""
    farm = await build_farm(registry)
    stoves = [await farm.stove() for _ in range(3)]
    base = bucket_of(datetime.now(UTC) - timedelta(days=2), "hour")

    def readings(seqs: range, start: datetime) -> list[dict[str, Any]]:
        return [
            {
                "seq": s,
                "time": (start + timedelta(minutes=23 * s)).isoformat(),
                "values": {
                    "energyKwh": (s % 7) / 4,
                    "meterKwh": 100 + s,
                    **({"session": "start" if s % 2 else "end"} if s % 3 == 0 else {}),
                },
            }
            for s in seqs
        ]

    sends = [
        (stoves[0], readings(range(1, 40), base)),
        (stoves[1], readings(range(1, 30), base)),
        (stoves[2], readings(range(1, 10), base - timedelta(days=35))),  # weeks late
        (stoves[0], readings(range(30, 60), base)),  # 30..39 resent
        (stoves[1], readings(range(30, 35), base)),
        (stoves[2], readings(range(5, 20), base)),  # 5..9 resent, other times
        (stoves[1], readings(range(1, 5), base)),  # all resent
    ]
    answers = await asyncio.gather(*(farm.send(did, items) for did, items in sends))
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    accepted = {did: 0 for did in stoves}
    for (did, items), answer in zip(sends, answers, strict=True):
        body = answer.json()
        assert body["accepted"] + body["duplicates"] == len(items) and body["rejected"] == 0
        accepted[did] += body["accepted"]
    assert accepted == {stoves[0]: 59, stoves[1]: 34, stoves[2]: 19}

    store = registry.platform.telemetry.store
    stored = {did: await store.history(did, None, None, None, 1000) for did in stoves}
    assert {did: len(items) for did, items in stored.items()} == accepted
    for scope, members in [
        *((did, [did]) for did in stoves),
        (farm.project, stoves),
        (farm.organisation, stoves),
    ]:
        raw = [r for did in members for r in stored[did]]
        for interval in ("hour", "day", "month"):
            expected: dict[tuple[datetime, str], list[float]] = {}
            for reading in raw:
                bucket = bucket_of(reading.time, interval)
                for name, value in reading.values.items():
                    field = f"{name}={value}" if isinstance(value, str) else name
                    amount = 1.0 if isinstance(value, str) else float(value)
                    expected.setdefault((bucket, field), []).append(amount)
            cells = await store.aggregates(scope, interval, None, None)
            got = {(b, f): cell for b, fields in cells.items() for f, cell in fields.items()}
            assert sorted(got) == sorted(expected), (scope, interval)
            for key, values in expected.items():
                cell = got[key]
                assert cell["count"] == len(values), (scope, interval, key)
                assert cell["sum"] == pytest.approx(sum(values)), (scope, interval, key)
                assert (cell["min"], cell["max"]) == (min(values), max(values))


async def test_two_stores_on_one_database_give_each_receipt_its_own_id(registry: Registry) -> None:
    """PostgreSQL's store takes receipt ids from the sequence a block at a time and spends
    them over its next groups (dialect.receipt_id_block): two processes' stores writing in
    turn on one database still give every receipt its own id, and each reading names the
    receipt of the message it came in (SQLite: each group takes its own)."""
    from sqlalchemy import select

    from twinhub.db.models import TelemetryReceipt
    from twinhub.telemetry.rows import Origin
    from twinhub.telemetry.store import TelemetryStore

    farm = await build_farm(registry)
    stove = await farm.stove()
    stores = [registry.platform.telemetry.store, TelemetryStore(registry.platform.sessionmaker)]
    hour = bucket_of(datetime.now(UTC) - timedelta(hours=3), "hour")
    for n in range(6):
        seqs = [2 * n + 1, 2 * n + 2]  # two messages a group, one reading each
        origins = [
            Origin(datetime.now(UTC), f'{{"seq": {s}}}', [{"type": "t", "value": str(s)}])
            for s in seqs
        ]
        readings = [Reading(s, hour + timedelta(minutes=s), {"energyKwh": 1.0}) for s in seqs]
        batch = Batch(stove, readings, ["energyKwh"], None, [farm.project], origins=origins)
        await stores[n % 2].store_many([batch])
    rows = await stores[0].history_rows(stove, None, None, None, 100)
    assert [row[0] for row in rows] == list(range(1, 13))
    named = [row[4] for row in rows]
    assert None not in named and len(set(named)) == 12
    async with registry.platform.sessionmaker() as session:
        found = await session.execute(
            select(TelemetryReceipt.id, TelemetryReceipt.payload).where(
                TelemetryReceipt.id.in_(named)
            )
        )
        payloads = dict(found.all())
    assert len(payloads) == 12
    assert all(payloads[row[4]] == f'{{"seq": {row[0]}}}' for row in rows)


async def test_wide_rollups_merge_other_fields_and_far_apart_buckets(registry: Registry) -> None:
    """A wide row gains a field a later batch brings (the field lists merged, sorted), and
    buckets far apart in one batch (read by key, not as one range of the primary key) are
    added to what is stored: the aggregates are the sums of both batches, bit for bit."""
    farm = await build_farm(registry)
    stove = await farm.stove()
    store = registry.platform.telemetry.store
    now = bucket_of(datetime.now(UTC), "hour")
    old, recent = now - timedelta(days=60), now - timedelta(hours=2)
    first = [
        Reading(1, old, {"energyKwh": 0.1}),
        Reading(2, recent, {"energyKwh": 0.2}),
    ]
    second = [
        Reading(3, old + timedelta(minutes=5), {"energyKwh": 0.3, "meterKwh": 7.5}),
        Reading(4, recent + timedelta(minutes=5), {"energyKwh": 1 / 3}),
    ]
    for readings in (first, second):
        await store.store_many(
            [Batch(stove, readings, ["energyKwh", "meterKwh"], "meterKwh", [farm.project])]
        )
    for scope in (stove, farm.project):
        hours = await store.aggregates(scope, "hour", None, None)
        assert hours[old] == {
            "energyKwh": {"count": 2, "sum": 0.1 + 0.3, "min": 0.1, "max": 0.3},
            "meterKwh": {"count": 1, "sum": 7.5, "min": 7.5, "max": 7.5},
        }
        assert hours[recent] == {
            "energyKwh": {"count": 2, "sum": 0.2 + 1 / 3, "min": 0.2, "max": 1 / 3}
        }


async def test_a_device_that_appends_skips_the_read_and_a_late_reading_still_merges(
    registry: Registry,
) -> None:
    """SQLite inserts a device's rows of buckets after its newest stored reading without
    reading them (a device that only appends). A late reading in a stored hour is still
    added to it; a bucket after the newest reading that holds rollups added apart from
    readings (what the benchmark's seeding does) is caught by the insert and merged too.
    Each hour, day and month is the sum of everything sent, bit for bit, on both
    databases."""
    farm = await build_farm(registry)
    stove = await farm.stove()
    store = registry.platform.telemetry.store
    start = bucket_of(datetime.now(UTC) - timedelta(days=3), "day") + timedelta(hours=1)
    hour = timedelta(hours=1)
    seeded = start + 5 * hour  # after every reading stored when it is seeded
    row = {"interval": "hour", "bucket": seeded, "field": "energyKwh", "count": 2, "sum": 1.5}
    row |= {"min": 0.5, "max": 1.0, "scope": stove}
    sent: list[Reading] = []
    groups = [
        [Reading(1, start, {"energyKwh": 0.25}), Reading(2, start + hour, {"energyKwh": 0.5})],
        # late (stored hour, read and added) and new (inserted without a read)
        [
            Reading(3, start + timedelta(minutes=7), {"energyKwh": 2.0}),
            Reading(4, start + 3 * hour, {"energyKwh": 0.125}),
        ],
        # only new hours, one of them seeded apart: the insert misses one, all are read
        [
            Reading(5, seeded + timedelta(minutes=1), {"energyKwh": 4.0}),
            Reading(6, seeded + hour, {"energyKwh": 8.0}),
        ],
    ]
    for n, readings in enumerate(groups):
        if n == 2:
            async with registry.platform.sessionmaker.begin() as session:
                await store.add_rollups(session, as_records([row]))
        await store.store_many([Batch(stove, readings, ["energyKwh"], None, [farm.project])])
        sent += readings
    for scope in (stove, farm.project):
        for interval in ("hour", "day", "month"):
            expected: dict[datetime, list[float]] = {}
            if scope == stove and interval == "hour":
                expected[seeded] = [0.5, 1.0]  # the seeded cell's (an hour's row only)
            for reading in sent:
                expected.setdefault(bucket_of(reading.time, interval), []).append(
                    reading.values["energyKwh"]
                )
            got = await store.aggregates(scope, interval, None, None)
            assert sorted(got) == sorted(expected), (scope, interval)
            for bucket, values in expected.items():
                assert got[bucket] == {
                    "energyKwh": {
                        "count": len(values),
                        "sum": sum(values),
                        "min": min(values),
                        "max": max(values),
                    }
                }, (scope, interval, bucket)
