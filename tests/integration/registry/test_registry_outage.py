"""The registry during a database outage: JSON 503 with Retry-After, never a plain-text 500,
and no request held past the configured timeouts, on PostgreSQL (cut and hung connections,
through tests/support/tcp_proxy.py) and on SQLite (a writer holding the file's lock)."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import POSTGRES_URL, Backend, RegistryFactory, unique
from tests.integration.ussd.test_ussd_resilience import address_of, with_address
from tests.support.tcp_proxy import TcpProxy

TIMEOUTS: dict[str, Any] = {
    "database_connect_timeout_seconds": 1,
    "database_statement_timeout_seconds": 1,
    "database_pool_timeout_seconds": 1,
    "database_health_interval_seconds": 0.2,
    "database_retry_after_seconds": 7,
}
# A hung PostgreSQL costs at most the pool's pre-ping (statement timeout), one reconnect
# (connect timeout) and the statement itself: about 3 s with these 1 s timeouts, plus slack.
HELD_AT_MOST = 4.0


@pytest.fixture
def backend() -> Backend:
    """These tests choose their own database; sessions stay in memory."""
    return Backend("sqlite", "memory")


@pytest.fixture
async def postgres_proxy(postgres_url: str) -> AsyncIterator[TcpProxy]:
    async with TcpProxy(*address_of(POSTGRES_URL, 5432)) as proxy:
        yield proxy


def assert_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "7"
    assert response.json()["error"]["code"] == "unavailable"


async def timed(call: Callable[[], Any]) -> tuple[httpx.Response, float]:
    started = time.perf_counter()
    response = await call()
    return response, time.perf_counter() - started


def domain_body() -> dict[str, Any]:
    return {
        "type": "Organisation",
        "protocol": "did:ixo:protocol/organisation",
        "metadata": {"name": unique("Outage Co-op")},
    }


async def wait_for(probe: Callable[[], Any], within: float = 10.0) -> httpx.Response:
    deadline = time.monotonic() + within
    while True:
        response = await probe()
        if response.status_code < 500 or time.monotonic() > deadline:
            return response
        await asyncio.sleep(0.2)


@pytest.mark.parametrize("failure", ["cut", "hang"])
async def test_postgres_outage_is_a_quick_json_503_and_service_resumes(
    postgres_proxy: TcpProxy, postgres_url: str, make_registry: RegistryFactory, failure: str
) -> None:
    registry = await make_registry(
        database_url=with_address(postgres_url, postgres_proxy.port), **TIMEOUTS
    )
    created = await registry.client.post("/v1/domains", json=domain_body())
    assert created.status_code == 201, created.text
    did = created.json()["did"]

    if failure == "cut":
        await postgres_proxy.cut()
    else:
        postgres_proxy.hang()
    for call in (
        lambda: registry.client.get(f"/v1/domains/{did}"),
        lambda: registry.client.post("/v1/domains", json=domain_body()),
        lambda: registry.client.get("/v1/domains"),
        lambda: registry.client.post("/graphql", json={"query": "{ __typename }"}),
    ):
        response, took = await timed(call)
        if response.status_code != 200:  # GraphQL's __typename needs no database
            assert_unavailable(response)
        assert took < HELD_AT_MOST, f"a request was held {took:.1f} s"
    health = await registry.client.get("/health")
    assert health.status_code == 503

    if failure == "cut":
        await postgres_proxy.restore()
    else:
        postgres_proxy.unhang()
    response = await wait_for(lambda: registry.client.get(f"/v1/domains/{did}"))
    assert response.status_code == 200, response.text


async def test_a_hung_postgres_never_holds_a_request_past_the_request_deadline(
    postgres_proxy: TcpProxy, postgres_url: str, make_registry: RegistryFactory
) -> None:
    """With the database timeouts at their defaults (a hung connection would hold a request
    for a pre-ping, a reconnect and a statement), REGISTRY_REQUEST_TIMEOUT_SECONDS alone
    bounds every request; the health monitor is slowed so that only the deadline answers."""
    registry = await make_registry(
        database_url=with_address(postgres_url, postgres_proxy.port),
        registry_request_timeout_seconds=1.5,
        database_retry_after_seconds=7,
        database_health_interval_seconds=600,
    )
    # A busy machine may need longer than the deadline for the first connection: retry.
    created = await wait_for(lambda: registry.client.post("/v1/domains", json=domain_body()))
    assert created.status_code == 201, created.text
    did = created.json()["did"]
    postgres_proxy.hang()
    for call in (
        lambda: registry.client.get(f"/v1/domains/{did}"),
        lambda: registry.client.post("/v1/domains", json=domain_body()),
        lambda: registry.client.get("/v1/domains"),
    ):
        response, took = await timed(call)
        assert_unavailable(response)
        assert "did not finish within 1.5 s" in response.json()["error"]["message"]
        assert took < 2.5, f"a request was held {took:.1f} s"
    postgres_proxy.unhang()
    response = await wait_for(lambda: registry.client.get(f"/v1/domains/{did}"), within=20)
    assert response.status_code == 200, response.text
    report = await registry.platform.ledger.verify()
    assert report.ok, report.problem


async def test_sqlite_locked_by_another_writer_is_a_quick_json_503(
    make_registry: RegistryFactory,
) -> None:
    registry = await make_registry(**TIMEOUTS)
    path = registry.settings.storage.resolved_database_url.split("///", 1)[1]
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        response, took = await timed(
            lambda: registry.client.post("/v1/domains", json=domain_body())
        )
        assert_unavailable(response)
        assert took < HELD_AT_MOST, f"a request was held {took:.1f} s"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    response = await wait_for(lambda: registry.client.post("/v1/domains", json=domain_body()))
    assert response.status_code == 201, response.text


async def test_a_runaway_sqlite_statement_is_interrupted_at_the_statement_timeout(
    tmp_path: Path,
) -> None:
    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError

    from twinhub.db.engine import create_engine
    from twinhub.settings import Settings

    engine = create_engine(
        Settings(data_dir=tmp_path, database_statement_timeout_seconds=0.5).storage
    )
    endless = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    )
    try:
        async with engine.connect() as connection:
            started = time.perf_counter()
            with pytest.raises(OperationalError, match="interrupted"):
                await connection.execute(text(endless))
            assert time.perf_counter() - started < 2.0
            assert (await connection.execute(text("SELECT 1"))).scalar() == 1  # still usable
    finally:
        await engine.dispose()


async def test_a_write_in_the_ledgers_turn_is_answered_at_the_deadline_but_not_cancelled(
    postgres_url: str, make_registry: RegistryFactory
) -> None:
    """A create held inside the ledger's turn (another session holds the ledger head's row)
    is answered 503 at the deadline, saying its write may still be stored, and is not
    cancelled: cancelling a statement midway could leave the batch's shared connection
    unusable for the writes that joined it. Once the row is free, the write commits, and the
    ledger and the next writes are sound. A write still queued for the turn is cancelled
    and stores nothing."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    registry = await make_registry(database_url=postgres_url, registry_request_timeout_seconds=1.0)
    ledger = registry.platform.ledger
    before = await ledger.height()
    warm = await wait_for(lambda: registry.client.post("/v1/domains", json=domain_body()))
    assert warm.status_code == 201, warm.text
    height = await ledger.height()
    per_create = height - before  # an organisation's create appends its member group's too
    holder = create_async_engine(postgres_url.replace("postgresql://", "postgresql+asyncpg://"))
    try:
        async with holder.connect() as connection:
            await connection.execute(text("BEGIN"))
            await connection.execute(text("SELECT 1 FROM ledger_head WHERE id = 1 FOR UPDATE"))
            held = asyncio.create_task(registry.client.post("/v1/domains", json=domain_body()))
            await asyncio.sleep(0.3)  # the first create is in the turn, waiting for the row
            queued = asyncio.create_task(registry.client.post("/v1/domains", json=domain_body()))
            in_turn, behind = await held, await queued
            await connection.execute(text("ROLLBACK"))
    finally:
        await holder.dispose()
    assert in_turn.status_code == behind.status_code == 503, (in_turn.text, behind.text)
    assert "its write may still be stored" in in_turn.json()["error"]["message"]
    assert "try again later" in behind.json()["error"]["message"]
    for _ in range(100):  # the held create ends by itself once the row is free
        if await ledger.height() != height:
            break
        await asyncio.sleep(0.1)
    # The held create, and not the queued one.
    assert await ledger.height() == height + per_create
    after = await registry.client.post("/v1/domains", json=domain_body())
    assert after.status_code == 201, after.text
    report = await ledger.verify()
    assert report.ok, report.problem
    assert report.checked == height + 2 * per_create
