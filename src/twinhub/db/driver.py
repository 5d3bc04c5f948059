"""Errors of statements sent on a driver's own connection (asyncpg, aiosqlite), told as
SQLAlchemy tells them.

Hot writes (telemetry groups, domain checks under the ledger lock) skip SQLAlchemy's
statement layer and talk to the driver. Their errors must still come out as `DBAPIError`,
as from any other statement, so every interface reads them alike (db/failures.py)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession


def driver_error(dialect: Dialect, raw: Any, error: Exception) -> BaseException:
    """`error`, raised on `raw`'s driver connection, as SQLAlchemy's DBAPIError; any error
    that is not the database's, as it is."""
    base = dialect.loaded_dbapi.Error
    translated: BaseException = error
    if not isinstance(error, base):
        try:
            raw.dbapi_connection._handle_exception(error)  # the adapter's own mapping
        except Exception as adapted:
            translated = adapted
    if not isinstance(translated, base):
        return error
    return DBAPIError.instance(None, None, translated, base, hide_parameters=True, dialect=dialect)


_DRIVER = "twinhub.driver"  # the session's connection and its driver's, in session.info


async def session_driver(session: AsyncSession) -> tuple[AsyncConnection, Any]:
    """The session's connection and the driver connection under it, in the session's
    transaction: kept in `session.info`, as a batch asks the driver more than once."""
    info = session.sync_session.info
    if _DRIVER not in info:
        connection = await session.connection()
        info[_DRIVER] = (connection, await connection.get_raw_connection())
    found: tuple[AsyncConnection, Any] = info[_DRIVER]
    return found
