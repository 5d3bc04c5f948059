"""Applying Alembic migrations from inside the program (on start and by `twinhub migrate`).

Several replicas may start at once against one PostgreSQL database; an advisory lock makes
them take turns, so each migration runs exactly once.
"""

from __future__ import annotations

import functools

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from twinhub.db.dialects import dialect_of


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", "twinhub.db:migrations")
    return config


@functools.cache
def newest_revision() -> str | None:
    """The head revision of the migrations this program carries. Reading it loads every
    migration file (~20 ms of CPU), so it is read once per process: the files do not change
    under a running program."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def _upgrade(connection: Connection, config: Config) -> None:
    if _current(connection) == newest_revision():
        return  # at head already (every start but the first): nothing to run, no lock
    dialect_of(connection).lock_migrations(connection)
    config.attributes["connection"] = connection
    command.upgrade(config, "head")


async def upgrade_database(engine: AsyncEngine) -> None:
    """Bring the schema to the newest revision; a no-op when it already is."""
    config = alembic_config()
    async with engine.begin() as connection:
        await connection.run_sync(_upgrade, config)


def _current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def schema_revisions(engine: AsyncEngine) -> tuple[str | None, str | None]:
    """(revision the database is at, newest revision this program knows)."""
    head = newest_revision()
    async with engine.connect() as connection:
        current = await connection.run_sync(_current)
    return current, head


async def schema_problem(engine: AsyncEngine) -> str | None:
    """Why `engine` is not a twinhub database to read, or None when it is one at this
    program's newest revision: for the auditors' read-only commands (`oracle verify-report`),
    which must never create or migrate someone's database."""
    try:
        current, head = await schema_revisions(engine)
    except Exception as error:  # unreachable, refused, unknown database: said, not raised
        return f"the database does not answer ({type(error).__name__}: {error})"
    if current is None:
        return "the database holds no twinhub schema"
    if current != head:
        return f"the database is at revision {current}, this program at {head}"
    return None
