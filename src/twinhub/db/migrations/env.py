"""Alembic environment: runs on the connection twinhub hands over, or builds one from Settings."""

import asyncio

from alembic import context
from sqlalchemy import Connection

from twinhub.db.models import Base

config = context.config
target_metadata = Base.metadata


def run_on(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def run_standalone() -> None:
    """For `alembic revision --autogenerate` run by a developer from the repository root."""
    from twinhub.db.engine import create_engine
    from twinhub.settings import Settings

    engine = create_engine(Settings().storage)
    async with engine.begin() as connection:
        await connection.run_sync(run_on)
    await engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline SQL generation is not supported; run `twinhub migrate`")
connection = config.attributes.get("connection")
if connection is not None:
    run_on(connection)
else:
    asyncio.run(run_standalone())
