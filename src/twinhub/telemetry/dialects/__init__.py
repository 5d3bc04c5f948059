"""The telemetry store's side of the storage seam (twinhub.db.dialects holds the rest):
what the write path does differently on SQLite and PostgreSQL, one module per database,
chosen once from the engine (`telemetry_dialect`). The store calls these instead of
branching on the database's name.

Each module keeps its database's statements exactly as the store ran them (PostgreSQL:
COPY into a staging table, the rollup cells upserted from arrays, the monthly partitions'
DDL, the devices locked FOR UPDATE in id order; SQLite: BEGIN IMMEDIATE, INSERT OR IGNORE,
the cells upserted by executemany). They work on the driver's own connection (asyncpg or aiosqlite),
as the store hands it over. The modules sit in the telemetry package because they speak
its rows (readings, device state, rollup plans); the storage layer below knows none.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

from twinhub.db.dialects import dialect_of

if TYPE_CHECKING:
    from twinhub.mrv.telemetry_schema import Reading
    from twinhub.telemetry.rows import Batch, DeviceState, RollupPlan, RollupRecord


class TelemetryDialect(ABC):
    """One database's way of writing telemetry; see the module docstring."""

    # Receipt ids a store takes at once and keeps for its next groups (0: a group takes
    # its own, as SQLite must: its ids follow the table's highest, under the write lock).
    receipt_id_block = 0

    @abstractmethod
    def transaction(self, driver: Any) -> AbstractAsyncContextManager[None]:
        """A write group's transaction on the driver's connection: committed when the
        block ends, rolled back when it raises."""

    @abstractmethod
    async def join(self, connection: AsyncConnection, driver: Any) -> None:
        """Make sure driver work on `connection` runs in the session's transaction."""

    @abstractmethod
    async def ensure_partitions(
        self,
        sessions: async_sessionmaker[AsyncSession],
        times: Iterable[datetime],
        made: set[str],
    ) -> None:
        """Whatever storage the readings at `times` need before they go in; `made` holds
        what this process made already (and gets what it makes)."""

    @abstractmethod
    async def drop_partitions(
        self,
        sessions: async_sessionmaker[AsyncSession],
        before: datetime,
        made: set[str],
        kept: list[tuple[datetime, datetime]],
    ) -> int:
        """Drop whole stored months before `before` that overlap none of the `kept` time
        ranges (evidence holds; the rows deleted after count the rest); the number of
        partitions dropped."""

    @abstractmethod
    async def lock_devices(
        self, driver: Any, new: list[str], dids: list[str], now: datetime
    ) -> dict[str, DeviceState]:
        """The devices' rows by DID, the `new` ones made first (in DID order), locked for
        the transaction."""

    @abstractmethod
    async def save_devices(self, driver: Any, states: list[DeviceState], now: datetime) -> None:
        """The advanced state of the devices that stored readings (given in id order)."""

    @abstractmethod
    async def insert_events(self, driver: Any, rows: list[dict[str, Any]]) -> None:
        """Outbox rows (events/store.py's event_row) in this transaction."""

    @abstractmethod
    async def insert_readings(
        self, driver: Any, items: list[tuple[int, Reading, datetime, int | None]], staged: bool
    ) -> set[tuple[int, int]]:
        """Insert (device id, reading, receipt time, receipt id) items; the (device id,
        seq) pairs not stored because the device stored that seq before. `staged`: this
        connection has the staging table already."""

    @abstractmethod
    async def receipt_ids(self, driver: Any, count: int) -> list[int]:
        """`count` new ids of telemetry_receipts, in this transaction (with a
        `receipt_id_block`: ids no other caller gets, whatever becomes of it)."""

    @abstractmethod
    async def insert_receipts(self, driver: Any, rows: list[tuple[Any, ...]]) -> None:
        """telemetry_receipts rows: (id, device id, received at, first time, last time,
        payload, signatures)."""

    @abstractmethod
    async def insert_quarantine(self, driver: Any, rows: list[tuple[Any, ...]]) -> None:
        """telemetry_quarantine rows: (device DID, seq, time, received at, values, reason,
        source, receipt id); a (device, seq) quarantined before is kept as it was."""

    @abstractmethod
    def plan(
        self,
        plan: RollupPlan,
        planned: set[int],
        device: int,
        batch: Batch,
        inserted: list[Reading],
    ) -> None:
        """Add a batch's inserted readings to what the group rolls up (`planned`: the
        devices added so far)."""

    @abstractmethod
    async def roll_up(self, driver: Any, plan: RollupPlan) -> None:
        """Add what `plan` holds to the rollups, in the caller's transaction."""

    @abstractmethod
    async def add_rollups(self, driver: Any, records: list[RollupRecord]) -> None:
        """Upsert rollup increments computed elsewhere (one per key, in key order)."""


@cache
def _for_name(name: str) -> TelemetryDialect:
    if name == "postgresql":
        from twinhub.telemetry.dialects.postgresql import PostgreSQLTelemetry

        return PostgreSQLTelemetry()
    from twinhub.telemetry.dialects.sqlite import SQLiteTelemetry

    return SQLiteTelemetry()


def telemetry_dialect(bind: Any) -> TelemetryDialect:
    """The TelemetryDialect of an engine, a connection or a session factory."""
    return _for_name(dialect_of(bind).name)
