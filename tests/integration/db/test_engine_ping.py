"""A pooled PostgreSQL connection is pinged only after it sat idle
(DATABASE_PING_IDLE_SECONDS): one that died meanwhile (the server restarted) is replaced
before use, so the first statement after a quiet outage does not fail."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.conftest import POSTGRES_URL
from tests.integration.ussd.test_ussd_resilience import address_of, with_address
from tests.support.tcp_proxy import TcpProxy
from twinhub.db.engine import create_engine
from twinhub.settings import Settings


@pytest.fixture
async def proxy() -> AsyncIterator[TcpProxy]:
    async with TcpProxy(*address_of(POSTGRES_URL, 5432)) as running:
        yield running


async def test_an_idle_dead_connection_is_replaced_before_use(
    proxy: TcpProxy, postgres_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        database_url=with_address(postgres_url, proxy.port),
        database_ping_idle_seconds=0.2,
        data_dir=tmp_path,
    )
    engine = create_engine(settings.storage)
    try:
        async with engine.connect() as connection:
            first = await connection.scalar(text("SELECT pg_backend_pid()"))
        await proxy.cut()  # the pooled connection dies with the "server"
        await proxy.restore()
        await asyncio.sleep(0.3)  # idle past the setting: the next checkout pings it
        async with engine.connect() as connection:
            second = await connection.scalar(text("SELECT pg_backend_pid()"))
        assert second != first  # a new connection, made after the dead one failed its ping
    finally:
        await engine.dispose()
