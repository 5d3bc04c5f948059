"""What differs between SQLite and PostgreSQL, behind one seam: a `Dialect` per database,
chosen once from the engine (`dialect_of`), which services call instead of branching on
the database's name. Each module holds one database's statements exactly as the services
ran them before (the measured ones: bulk inserts, the ledger batch's lock and planning,
the sequencer's lock, upserts, the migration lock, the domain holder check).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import date, datetime
from functools import cache
from typing import Any, NamedTuple

import numpy as np
from sqlalchemy import Connection, Table
from sqlalchemy.engine import Dialect as SqlDialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeEngine


class Dialect(ABC):
    """One database's ways; see the module docstring."""

    name: str
    # Whether several statements of a write are worth sending as one (a round trip to a
    # server each), rather than one after the other (SQLite: in process, no wait).
    joins_statements: bool
    # Whether a ledger batch's own transaction sees one state of the database, as a read
    # snapshot does (Dialect.begin_snapshot): SQLite's, which holds the only write lock, so
    # nothing commits while it runs; not PostgreSQL's (READ COMMITTED: each statement sees
    # the newest commit).
    write_is_snapshot: bool
    # Whether a device's raw readings are keyed by their sequence number alone (SQLite's
    # telemetry_readings, migration 0009), so no number is stored twice for a device; not
    # PostgreSQL's (keyed with the time, the partition's column).
    seq_is_key: bool

    @abstractmethod
    def insert(self, table: Any) -> Insert:
        """An INSERT of the database's own flavour, with its ON CONFLICT clauses (upserts)."""

    @abstractmethod
    def utc_day(self, column: Any) -> ColumnElement[Any]:
        """The UTC calendar day of a stored time."""

    @abstractmethod
    def json_number(self, column: Any, path: tuple[str, ...]) -> ColumnElement[Any]:
        """The number at `path` in a JSON column, as a float; NULL where there is none or
        it is not a JSON number (a string, a boolean: never a cast that fails)."""

    @abstractmethod
    def lock_migrations(self, connection: Connection) -> None:
        """Make concurrent `migrate` runs wait for each other, inside the transaction."""

    @abstractmethod
    async def begin_write_batch(self, session: AsyncSession, deferred: bool) -> None:
        """Start a ledger batch's transaction, in which it then locks the ledger head."""

    @abstractmethod
    async def begin_snapshot(self, session: AsyncSession) -> None:
        """Make every read of a read session see one state of the database (called before
        its first statement): day figures read from the rollups and the readings (or the
        readings' sequence numbers) read after them then agree, whatever telemetry commits
        meanwhile. What a period's snapshot and an approved claim keep depends on it."""

    @abstractmethod
    async def advisory_lock(self, session: AsyncSession, key: int) -> None:
        """Hold `key` until the transaction ends (where a writer lock does not already)."""

    @abstractmethod
    async def exclusive(
        self,
        session: AsyncSession,
        key: int,
        wait: bool,
        worth: Callable[[], Awaitable[bool]],
    ) -> bool:
        """Be the one writer of `key`'s work in this transaction; False when not now (another
        holds it and `wait` is false, or `worth` says there is nothing to do)."""

    @abstractmethod
    def for_claiming(self, query: Any) -> Any:
        """`query` of rows a worker claims, so that two workers skip each other's rows."""

    @abstractmethod
    async def insert_rows(
        self, connection: AsyncConnection, table: Table, rows: list[dict[str, Any]]
    ) -> None:
        """Many rows into one table (see db/bulk.py)."""

    @abstractmethod
    async def insert_together(
        self,
        connection: AsyncConnection,
        parts: list[tuple[Table, list[dict[str, Any]]]],
        then: tuple[str, tuple[Any, ...]],
    ) -> None:
        """Each part's rows into its table, in order, then `then` (see db/bulk.py)."""

    @abstractmethod
    def failure_of(self, error: BaseException) -> str | None:
        """What a failure this database's driver reported means (a `db.failures.Failure`
        value), read from its own codes; None when the error is not its driver's."""

    @abstractmethod
    def rollup_columns(self) -> tuple[TypeEngine[Any], TypeEngine[Any]]:
        """The column types of a wide rollup row's field names and cells (db.models'
        RollupFields and RollupCells; the format: telemetry/wide.py)."""

    @abstractmethod
    def bind_rollup(self, fields: tuple[str, ...] | None, cells: bytes | None) -> Any:
        """A wide rollup row's field names (given `fields`) or cells (given `cells`, the
        float64 little-endian bytes) as this database's column takes them."""

    @abstractmethod
    def driver_errors(self) -> tuple[type[BaseException], ...]:
        """The exceptions this database's driver raises on its own connections."""

    @abstractmethod
    async def holders(
        self, raw: Any, dids: list[str], pairs: list[tuple[str, str]]
    ) -> list[tuple[Any, ...]]:
        """(did, class_did, serial) of the domains `dids` and of those holding a (protocol,
        serial) of `pairs`, asked of the driver's connection `raw` (domains.holders_of)."""

    @abstractmethod
    async def submission_facts(self, raw: Any, asks: SubmissionAsks) -> list[tuple[Any, ...]]:
        """What a batch of claim submissions checks its claims against, in one statement
        (SUBMISSION_FACTS), asked of the driver's connection `raw` (services.claims)."""

    @abstractmethod
    async def day_rollups(
        self,
        raw: Any,
        scopes: list[str],
        columns: tuple[tuple[str, str], ...],
        low: datetime,
        high: datetime,
    ) -> DayRollups:
        """The day rollups of `scopes` from `low` to `high` (excluded) as columns: each
        scope's days in day order, the day as text starting with its ISO day, then per
        (field, aggregate) of `columns` that field's count, sum, min or max that day, and
        whether the field has a rollup that day. Asked of the driver's connection `raw`, so
        a monitoring period's 300,000 stove-days come as a few arrays, no ORM type or
        Python object per value, decoded column-wise (pivot_wide; services.mrv_inputs,
        mrv.rollup_columns)."""

    @abstractmethod
    async def raw_readings(
        self, raw: Any, dids: list[str], low: datetime, high: datetime
    ) -> list[tuple[Any, ...]]:
        """(did, seq, time, values, received at, receipt) of every raw reading of the
        devices `dids` from `low` to `high` (excluded), in (did, time, seq) order, asked of
        the driver's connection `raw`: the times as ISO 8601 text in UTC (what
        `datetime.isoformat` writes of the stored time; None where none is stored) and the
        values as their JSON text. A monitoring period reads a million of them for its
        digests (services.mrv_inputs.stove_readings): the ORM's type processing of two times
        and a JSON document a reading was most of the period's draft."""

    @abstractmethod
    async def kept_days(
        self, raw: Any, dids: list[str], low: datetime, high: datetime, start: date, end: date
    ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """What a draft checks its kept stove-day digests by (services.day_digests), asked
        of the driver's connection `raw`: (did, device id, readings from `low` to `high`)
        of each of the devices `dids` with any, and (device id, days as JSON text) of their
        kept months from `start`'s to `end`'s of the current form. Through the driver: at
        10,000 stoves x 30 days, SQLAlchemy's rows were half of the read."""

    @abstractmethod
    async def keep_days(self, raw: Any, rows: list[tuple[int, date, str]]) -> None:
        """Merge kept stove-day digests into their months, (device id, month, days as JSON
        text) each, through the driver's connection `raw` in its transaction: a day already
        kept is replaced, the month's other days stay (a month of another form is replaced
        whole). One statement whatever the count (SQLAlchemy's executemany took 5 s for a
        first draft's 300,000 stove-days)."""

    @abstractmethod
    async def stove_facts(self, raw: Any, dids: list[str]) -> list[tuple[Any, ...]]:
        """(did, properties as JSON text, verified, status, enrolled) of the domains `dids`
        (enrolled: a device token not revoked), one statement asked of the driver's
        connection `raw`: a monitoring period's registry facts without an ORM row or a
        compiled expanding parameter per stove (services.mrv_inputs)."""

    @abstractmethod
    async def hold_day_spans(
        self, session: AsyncSession, table: Table, spans: list[DaySpan], now: datetime
    ) -> None:
        """Hold every day of each span in `table` (credited_days), held at `now`: one
        statement that makes the days itself from the spans, where a row sent for each
        day cost a bulk approval (30,000 days for 1,000 claims) more than all its other
        rows (services.credited_days)."""


RAW_READINGS = (  # the two dialects' statement: the DIDs' placeholder and the values' text in {}
    "SELECT d.did, r.seq, r.time, {values}, r.received_at, r.receipt_id"
    " FROM telemetry_readings r JOIN telemetry_devices d ON d.id = r.device_id"
    " WHERE d.did {dids} AND r.time >= {low} AND r.time < {high}"
    " ORDER BY d.did, r.time, r.seq"
)
READING_COUNTS = (  # each device's readings in a period (`kept_days`), placeholders in {}
    "SELECT d.did, d.id, count(*) FROM telemetry_devices d"
    " JOIN telemetry_readings r ON r.device_id = d.id"
    " WHERE d.did {dids} AND r.time >= {low} AND r.time < {high} GROUP BY d.id, d.did"
)
KEPT_DAYS = (  # the two dialects' statements for `kept_days`, placeholders in {}
    "SELECT k.device_id, {days} FROM telemetry_devices d"
    " JOIN telemetry_day_digests k ON k.device_id = d.id"
    " WHERE d.did {dids} AND k.month >= {start} AND k.month <= {end} AND k.form = {form}"
)
KEEP_DAYS = (  # and for `keep_days`: the rows' source, and how a month's days merge
    "INSERT INTO telemetry_day_digests (device_id, month, form, days) {}"
    " ON CONFLICT (device_id, month) DO UPDATE SET form = excluded.form, days = CASE"
    " WHEN telemetry_day_digests.form = excluded.form THEN {} ELSE excluded.days END"
)
# The form of the kept stove-day digests `kept_days` reads (telemetry_day_digests.form): how
# services.day_digests makes them; a row of another form is never read.
DAY_DIGEST_FORM = 1
# A claim's days of one device: (device, stove, project, claim, first day, last day).
DaySpan = tuple[str, str, str, str, date, date]
STOVE_FACTS = (  # the two dialects' statement, their placeholder for the DIDs put in {}
    "SELECT d.did, d.properties, d.verified, d.status, EXISTS (SELECT 1 FROM device_tokens t"
    " WHERE t.domain_did = d.did AND t.revoked_at IS NULL) FROM domains d WHERE d.did {}"
)
# A claim that counts for its stove-period (the partial unique index
# `uq_claims_asset_period`, db.models, and the statements that search it).
COUNTED_CLAIM = "status NOT IN ('rejected', 'invalidated')"

# A batch of claim submissions' reads (services.claims._BatchFacts), one row each, its
# first column saying what it is: 'a' an asset (did, status, parent, controller as JSON
# text, household), 'l' an asset linked to the project, 'c' a claim (id, asset, period,
# status) counted on one of the stove-periods asked (a search of `uq_claims_asset_period`,
# its condition written out) or of an id asked, 'm' a member of the collection among the
# agents. Each part's placeholders in {}: an IN list on SQLite, `= ANY(array)` on PostgreSQL.
SUBMISSION_FACTS = (
    "SELECT 'a', did, status, parent_did, {json}, owner_customer_id FROM domains"  # noqa: S608 (placeholders, a constant)
    " WHERE did {assets}"
    " UNION ALL SELECT 'l', source_did, NULL, NULL, NULL, NULL FROM relationships"
    " WHERE source_did {linked} AND type = 'project' AND target_did = {project}"
    " UNION ALL SELECT 'c', id, asset_did, period, status, NULL FROM claims"
    " WHERE (asset_did {claimed} AND period {periods} AND " + COUNTED_CLAIM + ") OR id {ids}"
    " UNION ALL SELECT 'm', member, NULL, NULL, NULL, NULL FROM collection_members"
    " WHERE collection_id = {collection} AND member {agents}"
)


@dataclass(frozen=True)
class SubmissionAsks:
    """SUBMISSION_FACTS' parameters; an empty list asks for nothing of its part."""

    assets: list[str]
    project: str
    claimed: list[str]  # the stoves and periods whose counted claims are asked
    periods: list[str]
    ids: list[str]
    collection: int
    agents: list[str]

    def lists(self) -> tuple[list[str], ...]:
        """The lists in the statement's order, each never empty (no row is keyed '')."""
        return tuple(
            values or [""]
            for values in (self.assets, self.claimed, self.periods, self.ids, self.agents)
        )


AGGREGATES = ("count", "sum", "min", "max")  # a rollup field's cell, in its order
ROLLUP_FIELD_SEPARATOR = "\x1f"  # between a wide rollup row's field names (SQLite's text)


class DayRollups(NamedTuple):
    """A chunk's day rollups as columns (`pivot_wide`): the scopes with days, in order, where
    each one's days start in the columns (the total last), each day's text (its first ten
    characters the ISO day: mrv.rollup_columns.day_of), and per (field, aggregate) asked
    its values (float64; a count too) and whether the day's row has that field (where not,
    the value is NaN)."""

    scopes: list[str]
    starts: list[int]
    days: list[str]
    values: list[np.ndarray]
    present: list[np.ndarray]


def _with_fields(rows: list[Any], wanted: set[str]) -> list[Any]:
    """The rows whose field list names one of `wanted`. A day whose rollup holds none of
    the asked fields (a stove that sent only its battery level) has no day at all, as when
    each field was a row of its own and only the asked ones were read: a period must not
    see it as a day with readings (the evidence's readings would give it absent)."""
    unasked = {
        key
        for key in {row[2] for row in rows}  # a programme's few field lists
        if wanted.isdisjoint(key.split(ROLLUP_FIELD_SEPARATOR) if key else ())
    }
    return [row for row in rows if row[2] not in unasked] if unasked else rows


def pivot_wide(
    rows: list[Any], columns: tuple[tuple[str, str], ...], sent: bool = False
) -> DayRollups:
    """Wide day rollup rows (scope, day, fields joined by ROLLUP_FIELD_SEPARATOR, cells),
    in (scope, day) order, as `day_rollups` gives them, as columns: one per (field,
    aggregate) of `columns`. The cells are SQLite's float64 blob, or (`sent`) PostgreSQL's
    binary form of a float8[] (`array_send`: a header, then each element's length and
    big-endian value), so no float becomes a Python object here. Column-wise: the rows of
    one field list (a programme's one protocol: usually all of them) decoded by one numpy
    call, no Python step per cell."""
    picks = []
    for name, aggregate in columns:
        if aggregate not in AGGREGATES:
            raise ValueError(f"not a rollup column: {aggregate}")
        picks.append((name, AGGREGATES.index(aggregate)))
    rows = _with_fields(rows, {name for name, _ in picks})
    values = [np.full(len(rows), np.nan) for _ in picks]
    present = [np.zeros(len(rows), dtype=bool) for _ in picks]
    if not rows:
        return DayRollups([], [0], [], values, present)
    keys = [row[2] for row in rows]
    if keys.count(keys[0]) == len(keys):
        groups = {keys[0]: list(range(len(rows)))}
    else:
        groups = {}
        for n, key in enumerate(keys):
            groups.setdefault(key, []).append(n)
    for key, where in groups.items():
        names = key.split(ROLLUP_FIELD_SEPARATOR) if key else []
        size = len(names) * len(AGGREGATES)
        whole = len(groups) == 1
        joined = b"".join([row[3] for row in rows] if whole else [rows[n][3] for n in where])
        if not size:
            cells = np.zeros((len(where), 0, len(AGGREGATES)))
        elif sent:
            layout = np.dtype(
                [("head", "V20"), ("cells", [("size", ">i4"), ("value", ">f8")], (size,))]
            )
            cells = np.frombuffer(joined, layout)["cells"]["value"].astype(np.float64)
        else:
            cells = np.frombuffer(joined, "<f8")
        cells = cells.reshape(len(where), len(names), len(AGGREGATES))
        at = slice(None) if whole else np.array(where, dtype=np.intp)
        for c, (name, aggregate) in enumerate(picks):
            if name in names:
                values[c][at] = cells[:, names.index(name), aggregate]
                present[c][at] = True
    scopes = [row[0] for row in rows]
    cuts = [0, *(np.flatnonzero(np.array(scopes[1:]) != np.array(scopes[:-1])) + 1).tolist()]
    return DayRollups(
        [scopes[cut] for cut in cuts], [*cuts, len(rows)], [row[1] for row in rows], values, present
    )


async def one_by_one(
    dialect: Dialect,
    connection: AsyncConnection,
    parts: list[tuple[Table, list[dict[str, Any]]]],
    then: tuple[str, tuple[Any, ...]],
) -> None:
    """`insert_together` as one statement per part, in order, then `then`."""
    sql, arguments = then
    for table, rows in parts:
        await dialect.insert_rows(connection, table, rows)
    paramstyle = connection.dialect.paramstyle
    marks = ["?" if paramstyle == "qmark" else f"${n}" for n in range(1, 1 + len(arguments))]
    await connection.exec_driver_sql(sql.format(*marks), arguments)


@cache
def _for_name(name: str) -> Dialect:
    if name == "postgresql":
        from twinhub.db.dialects.postgresql import PostgreSQL

        return PostgreSQL()
    from twinhub.db.dialects.sqlite import SQLite

    return SQLite()


def causes(error: BaseException) -> list[BaseException]:
    """`error`, what SQLAlchemy wraps (`orig`) and the chain of causes, each once: where a
    dialect looks for its driver's own report of a failure (`Dialect.failure_of`)."""
    found: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in found and len(found) < 8:
        found.append(current)
        wrapped = getattr(current, "orig", None)
        current = wrapped if isinstance(wrapped, BaseException) else current.__cause__
    return found


def every_dialect() -> tuple[Dialect, ...]:
    """Both databases' ways: a failure is read by whichever driver raised it."""
    return (_for_name("postgresql"), _for_name("sqlite"))


def dialect_of(
    bind: SqlDialect
    | AsyncSession
    | AsyncConnection
    | Connection
    | async_sessionmaker[AsyncSession]
    | Any,
) -> Dialect:
    """The Dialect of an engine, a connection, a session or a session factory."""
    if isinstance(bind, async_sessionmaker):
        bind = bind.kw["bind"]
    elif isinstance(bind, AsyncSession):
        bind = bind.bind
    if bind is None:  # a session bound to nothing: the default database, SQLite
        return _for_name("sqlite")
    found = bind if isinstance(bind, SqlDialect) else bind.dialect
    return _for_name(found.name)


@asynccontextmanager
async def read_snapshot(sessions: Callable[[], AsyncSession]) -> AsyncIterator[AsyncSession]:
    """A read session all of whose reads see one state of the database
    (Dialect.begin_snapshot): where figures and the readings behind them are read apart."""
    async with sessions() as session:
        await dialect_of(session).begin_snapshot(session)
        yield session
