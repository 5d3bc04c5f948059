"""The rollup cells summed column-wise over a batch (telemetry/columns.py, numpy) are the
cells rows.add_cells sums reading by reading, the same floats; and through HTTP, batches with
bad rows, repeated seqs and untrustworthy times store on SQLite and PostgreSQL exactly the
readings and rollups the Python reference makes of them (the rules' own functions:
check_readings, split_by_clock, rollup_rows)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from tests.conftest import Registry, unique
from tests.support.telemetry_world import STOVE, build_farm
from twinhub.db.models import TelemetryDevice, TelemetryReading, TelemetryRollup
from twinhub.mrv.telemetry_schema import (
    STOVE_TELEMETRY,
    Reading,
    check_readings,
    parse_schema,
    split_by_clock,
)
from twinhub.telemetry.columns import (
    COLUMN_READINGS,
    _numpy_columns,
    _numpy_parts,
    batch_columns,
    group_columns,
    merge_columns,
)
from twinhub.telemetry.rows import Cells, add_cells, merge_cells, merge_rollups, rollup_rows
from twinhub.telemetry.wide import decode


class Cell(NamedTuple):
    """One field's figures of a wide rollup row."""

    count: int
    sum: float
    min: float
    max: float


SCHEMA = parse_schema(STOVE_TELEMETRY)
OFFSETS = st.sampled_from(
    [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=5))]
)
MOMENTS = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2099, 12, 30), timezones=OFFSETS
)
NUMBERS = st.floats(-1e6, 1e6, allow_nan=False) | st.integers(-(2**63), 2**64 - 1)
VALUES = st.fixed_dictionaries(
    {},
    optional={
        "energyKwh": NUMBERS,
        "meterKwh": NUMBERS,
        "session": st.sampled_from(["start", "end"]),
        "mode": st.text("ab=", min_size=1, max_size=70),  # counted; long ones are not
    },
)


def reading_lists(min_size: int) -> st.SearchStrategy[list[Reading]]:
    """Readings in any order, hours and days repeated (a few distinct moments reused)."""
    moments = st.lists(MOMENTS, min_size=1, max_size=12)
    return moments.flatmap(
        lambda pool: st.lists(
            st.tuples(st.sampled_from(pool), st.integers(0, 7200), VALUES),
            min_size=min_size,
            max_size=min_size + 150,
        ).map(
            lambda items: [
                Reading(n, (moment + timedelta(seconds=shift)).astimezone(UTC), values)
                for n, (moment, shift, values) in enumerate(items)
            ]
        )
    )


def reference(readings: list[Reading], numeric: list[str], counted: list[str]) -> Cells:
    cells: Cells = {}
    add_cells(cells, readings, numeric, counted)
    return cells


@settings(max_examples=300, deadline=None)
@given(reading_lists(1))
def test_cells_summed_column_wise_are_the_cells_of_add_cells(readings: list[Reading]) -> None:
    numeric, counted = ["energyKwh", "meterKwh", "absent"], ["session", "mode"]
    expected = reference(readings, numeric, counted)
    # The same floats, not merely close ones (== tells 0.0 and -0.0 apart by nothing
    # else: a sum of -0.0 may come out 0.0, the same number to every comparison).
    assert _numpy_columns(readings, numeric, counted).as_cells() == expected
    # What the store calls: numpy from COLUMN_READINGS readings on, add_cells below.
    assert batch_columns(readings, numeric, counted).as_cells() == expected


@settings(max_examples=150, deadline=None)
@given(st.lists(reading_lists(0), min_size=1, max_size=8))
def test_a_groups_parts_summed_together_are_each_parts_own_cells(
    parts: list[list[Reading]],
) -> None:
    """One numpy pass over a group's batches (MQTT: many devices, few readings each) gives
    every batch its own cells, those of add_cells; a part whose protocol rolls a field up
    differently keeps to its own fields. Merged for a scope they feed together, the cells
    are those rows.merge_cells makes of them."""
    shapes = [
        (["energyKwh", "meterKwh"], ["session", "mode"]),
        (["energyKwh"], ["mode"]),
        ([], ["session"]),
    ]
    group = [(readings, *shapes[n % 3]) for n, readings in enumerate(parts)]
    expected = [reference(readings, *shape) for readings, *shape in group]
    columns = group_columns(group)
    assert [part.as_cells() for part in columns] == expected
    # numpy's pass, whatever the group's size (a small group goes through add_cells)
    assert [part.as_cells() for part in _numpy_parts(group)] == expected
    merged: Cells = {key: list(cell) for key, cell in expected[0].items()}
    for cells in expected[1:]:
        merge_cells(merged, cells)
    assert merge_columns(columns).as_cells() == merged


# -- end to end ------------------------------------------------------------------------------
ENROLLED = datetime.now(UTC).replace(microsecond=0) - timedelta(days=40)


def _raw_reading() -> st.SearchStrategy[Any]:
    """A reading as a device sends it: mostly valid, some with an untrustworthy time
    (before enrolment, ahead of receipt: quarantined), some bad (rejected)."""
    valid_time = st.integers(3600, 39 * 86400).map(lambda s: ENROLLED + timedelta(seconds=s))
    early = st.integers(86400, 400 * 86400).map(lambda s: ENROLLED - timedelta(seconds=s))
    ahead = st.integers(2, 30).map(lambda d: datetime.now(UTC) + timedelta(days=d))
    times = st.one_of(valid_time, valid_time, valid_time, early, ahead).flatmap(
        lambda moment: OFFSETS.map(lambda tz: moment.astimezone(tz).isoformat())
    )
    values = st.fixed_dictionaries(
        {},
        optional={
            "energyKwh": st.floats(0, 20) | st.integers(0, 20),
            "meterKwh": st.floats(0, 1_000_000),
            "session": st.sampled_from(["start", "end"]),
            "faultCode": st.sampled_from(["none", "fan"]),
        },
    ).filter(bool)
    good = st.fixed_dictionaries({"seq": st.integers(0, 5000), "time": times, "values": values})
    bad = st.one_of(
        st.just("not an object"),
        good.map(lambda r: {**r, "seq": -1}),
        good.map(lambda r: {**r, "time": "yesterday"}),
        good.map(lambda r: {**r, "extra": 1}),
        good.map(lambda r: {**r, "values": {"energyKwh": 21}}),
        good.map(lambda r: {**r, "values": {"faultCode": "fan\x00"}}),
        good.map(lambda r: {**r, "values": {"unknown": 1}}),
        good.map(lambda r: {k: v for k, v in r.items() if k != "time"}),
    )
    return st.one_of(*[good] * 9, bad)


def _batches() -> list[list[Any]]:
    """Batches drawn by hypothesis (derandomized: the same ones each run): twelve sent as
    drawn (small: add_cells), and two large ones made of all the drawn readings, those with
    a trustworthy time given fresh seqs and repeated (so the readings stored, many an hour,
    are more than COLUMN_READINGS: numpy), the others (bad, quarantined) and a few repeated
    seqs mixed in."""
    drawn: list[list[Any]] = []

    @settings(max_examples=150, deadline=None, database=None, derandomize=True)
    @given(st.lists(_raw_reading(), min_size=1, max_size=60))
    def collect(batch: list[Any]) -> None:
        drawn.append(batch)

    collect()
    items = [item for batch in drawn for item in batch]
    kept, _ = check_readings(items, SCHEMA, datetime.max.replace(tzinfo=UTC))
    trusted, _ = split_by_clock(
        kept, datetime.now(UTC), ENROLLED, timedelta(seconds=300), timedelta(days=730)
    )
    good = [
        {"seq": 0, "time": reading.time.isoformat(), "values": reading.values}
        for reading in trusted
    ]
    others = [item for item in items if not isinstance(item, dict) or item.get("seq") == -1]
    large = []
    for first in (10_000, 20_000):
        batch = [
            {**item, "seq": first + n}
            for n, item in enumerate((good * (1 + 3 * COLUMN_READINGS // max(len(good), 1)))[:600])
        ]
        large.append([*batch, *others[:100], *batch[:20]])  # the last twenty repeat seqs
    return drawn[:12] + large


async def test_stored_readings_and_rollups_are_the_references_for_generated_batches(
    registry: Registry,
) -> None:
    farm = await build_farm(registry)
    stoves = []
    for _ in range(2):
        created = await registry.client.post(
            "/v1/domains",
            json={
                "type": "Device",
                "class": STOVE,
                "id": unique("stove"),
                "metadata": {"name": "stove"},
                "relationships": {"project": [farm.project]},
                "validFrom": ENROLLED.isoformat(),
            },
        )
        assert created.status_code == 201, created.text
        stove = created.json()["did"]
        token = await registry.client.post(f"/v1/domains/{stove}/device-tokens", json={})
        farm.tokens[stove] = token.json()["token"]
        stoves.append(stove)
    stored: dict[str, dict[int, Reading]] = {did: {} for did in stoves}
    for n, batch in enumerate(_batches()):
        did = stoves[n % 2]
        received = datetime.now(UTC)
        valid, rejected = check_readings(batch, SCHEMA, datetime.max.replace(tzinfo=UTC))
        kept, held = split_by_clock(
            valid, received, ENROLLED, timedelta(seconds=300), timedelta(days=730)
        )
        response = await farm.send(did, batch)
        if not valid:
            assert response.status_code == 422, response.text
            continue
        assert response.status_code == 200, response.text
        body = response.json()
        new = 0
        for reading in kept:
            if reading.seq not in stored[did]:
                stored[did][reading.seq] = reading
                new += 1
        assert (body["accepted"], body["rejected"], body["quarantined"]) == (
            new,
            len(rejected),
            len(held),
        )
        assert body["duplicates"] == len(kept) - new
    scopes = {did: [did, farm.project, farm.organisation] for did in stoves}
    expected = merge_rollups(
        [
            row
            for did in stoves
            for row in rollup_rows(
                list(stored[did].values()), SCHEMA.numeric, scopes[did], SCHEMA.counted
            )
        ]
    )
    async with registry.platform.sessionmaker() as session:
        ids = dict((await session.execute(select(TelemetryDevice.did, TelemetryDevice.id))).all())
        for did in stoves:
            if did not in ids:  # every batch it was sent was refused whole
                assert not stored[did]
                continue
            rows = (
                await session.execute(
                    select(
                        TelemetryReading.seq, TelemetryReading.time, TelemetryReading.values
                    ).where(TelemetryReading.device_id == ids[did])
                )
            ).all()
            assert {seq: (moment, values) for seq, moment, values in rows} == {
                seq: (r.time, r.values) for seq, r in stored[did].items()
            }
        got = {
            (r.scope, r.interval, r.bucket, name): Cell(*cell)
            for r in await session.scalars(
                select(TelemetryRollup).where(
                    TelemetryRollup.scope.in_([*stoves, farm.project, farm.organisation])
                )
            )
            for name, cell in decode(r.fields, r.cells).items()
        }
    assert expected, "the batches stored nothing to roll up"
    assert got.keys() == {
        (row["scope"], row["interval"], row["bucket"], row["field"]) for row in expected
    }
    for row in expected:
        cell = got[(row["scope"], row["interval"], row["bucket"], row["field"])]
        assert (cell.count, cell.min, cell.max) == (row["count"], row["min"], row["max"])
        # A scope fed by both stoves adds their cells in the database's order.
        assert cell.sum == pytest.approx(row["sum"], rel=1e-12, abs=1e-12)
