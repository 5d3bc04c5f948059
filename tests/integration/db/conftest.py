"""An empty database of each backend for the tests of the database layer itself: a new
PostgreSQL database (dropped afterwards) or a SQLite file, nothing migrated into it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from tests.conftest import Backend, fresh_postgres_database
from twinhub.settings import normalise_database_url


@pytest.fixture
async def engine(backend: Backend, tmp_path: Any) -> AsyncIterator[AsyncEngine]:
    if backend.database == "postgresql":
        async with fresh_postgres_database("layer", empty=True) as url:
            made = create_async_engine(normalise_database_url(url))
            yield made
            await made.dispose()
    else:
        made = create_async_engine(normalise_database_url(f"sqlite:///{tmp_path / 'layer.db'}"))
        yield made
        await made.dispose()
