"""Creating the async engine with the per-database settings that production needs."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import Session
from sqlalchemy.util import await_

from twinhub.db.sqlite_cursor import one_hop_dbapi
from twinhub.settings import StorageSettings


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def sqlite_file(url: str) -> str | None:
    """The database file of a SQLite URL; None for another backend or an in-memory one
    (which no second connection can open)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return parsed.database


def create_engine(settings: StorageSettings) -> AsyncEngine:
    """An engine that survives database restarts (pre-ping) and never holds a request
    longer than its timeouts: connect (DATABASE_CONNECT_TIMEOUT_SECONDS), waiting for a pooled
    connection (DATABASE_POOL_TIMEOUT_SECONDS) and one statement
    (DATABASE_STATEMENT_TIMEOUT_SECONDS: on PostgreSQL both the server's statement_timeout
    and the client's own deadline, so a hung connection is given up too; on SQLite the
    longest wait for another writer's lock, and a progress handler interrupts a statement
    running past it)."""
    url = settings.resolved_database_url
    timeout = settings.connect_timeout_seconds
    statement = settings.statement_timeout_seconds
    if is_sqlite(url):
        database = make_url(url).database
        if database and database != ":memory:":
            settings.data_dir.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(
            url,
            module=one_hop_dbapi(),  # a statement is one hand-off to sqlite3's thread
            connect_args={"timeout": statement},
            hide_parameters=True,
            pool_timeout=settings.pool_timeout_seconds,
        )
        cache_kib = settings.sqlite_cache_mib * 1024
        busy_ms = int(statement * 1000)

        def pragmas(dbapi_connection: Any, record: Any) -> None:
            _sqlite_pragmas(dbapi_connection, cache_kib, busy_ms)
            record.info[_CLOCK] = _statement_clock(dbapi_connection)

        def started(connection: Any, *_: Any) -> None:
            clock = connection.info.get(_CLOCK)
            if clock is not None:
                clock.deadline = time.monotonic() + statement

        def finished(connection: Any, *_: Any) -> None:
            clock = connection.info.get(_CLOCK)
            if clock is not None:
                clock.deadline = None

        event.listen(engine.sync_engine, "connect", pragmas)
        event.listen(engine.sync_engine, "before_cursor_execute", started)
        event.listen(engine.sync_engine, "after_cursor_execute", finished)
        return engine
    connect_args: dict[str, Any] = {
        "timeout": timeout,
        "command_timeout": statement + 0.5,  # the server's own timeout speaks first
        "server_settings": {"statement_timeout": str(int(statement * 1000))},
    }
    engine = create_async_engine(
        url,
        connect_args=connect_args,
        hide_parameters=True,  # SQL errors must not carry PIN ciphertexts or phone numbers
        pool_size=10,
        max_overflow=10,
        pool_timeout=settings.pool_timeout_seconds,
    )
    _ping_when_idle(engine, settings.ping_idle_seconds)
    return engine


_IDLE_SINCE = "twinhub_idle_since"


def _ping_when_idle(engine: AsyncEngine, idle_seconds: float) -> None:
    """Pre-ping only the connections that sat idle longer than `idle_seconds`: a ping is a
    round trip (about 0.2 ms of CPU per checkout, bench/README.md), and one in steady use
    has just answered. One that went dead meanwhile fails its statement; that disconnect
    invalidates the whole pool (SQLAlchemy's handling), so the next checkouts reconnect."""
    dialect = engine.sync_engine.dialect

    def checked_in(_dbapi_connection: Any, record: Any) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    def checked_out(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get(_IDLE_SINCE)
        if since is None or time.monotonic() - since <= idle_seconds:
            return
        try:
            dialect.do_ping(dbapi_connection)
        except Exception as error:  # the pool replaces it (a fresh connect) and retries
            del record.info[_IDLE_SINCE]
            raise DisconnectionError(f"idle connection dead: {type(error).__name__}") from error

    event.listen(engine.sync_engine, "checkin", checked_in)
    event.listen(engine.sync_engine, "checkout", checked_out)


_CLOCK = "twinhub_statement_clock"


class _Clock:
    """The running statement's deadline on one SQLite connection (None: none running)."""

    deadline: float | None = None


def _statement_clock(dbapi_connection: Any) -> _Clock:
    """SQLite has no statement timeout: a progress handler, called by SQLite every 10,000
    virtual-machine steps on the connection's own thread, interrupts a statement running
    past its deadline (`sqlite3.OperationalError: interrupted`)."""
    clock = _Clock()

    def progress() -> int:
        deadline = clock.deadline
        return 1 if deadline is not None and time.monotonic() > deadline else 0

    connection = dbapi_connection._connection  # aiosqlite's: sqlite3 lives on its thread
    await_(connection._execute(connection._conn.set_progress_handler, progress, 10_000))
    return clock


def _sqlite_pragmas(dbapi_connection: Any, cache_kib: int, busy_ms: int = 5000) -> None:
    """WAL lets readers run beside the writer; busy_timeout queues writers instead of failing;
    a page cache and memory map sized for a registry (SQLite's default cache is 2 MiB) keep
    reads from slowing down as the file outgrows it."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute(f"PRAGMA cache_size=-{int(cache_kib)}")
    cursor.execute(f"PRAGMA mmap_size={int(cache_kib) * 1024 * 4}")
    cursor.close()


def create_sessionmaker(
    engine: AsyncEngine, session_class: type[Session] = Session
) -> async_sessionmaker[AsyncSession]:
    """Sessions of `session_class` (the platform's bus gives its own, whose commits it
    hears of: kernel.bus)."""
    return async_sessionmaker(engine, expire_on_commit=False, sync_session_class=session_class)
