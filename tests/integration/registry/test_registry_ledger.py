"""The ledger's hash chain: intact after real writes, and every kind of tampering with the
stored rows (raw SQL, behind the services' back) found at the right height, on SQLite and
PostgreSQL, in process and through `twinhub ledger verify`."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.conftest import (
    BACKENDS,
    BOOTSTRAP_KEY,
    Backend,
    Registry,
    RegistryFactory,
    fresh_postgres_database,
    running_registry,
)
from tests.integration.registry.test_registry_basics import make_domain
from tests.support.cli import base_env, run_cli
from twinhub.db.models import UtcDateTime
from twinhub.kernel.principals import Principal
from twinhub.platform import Platform
from twinhub.services.domains import DomainSpec
from twinhub.services.ledger import GENESIS_HASH, transaction_hash
from twinhub.services.paging import encode_cursor
from twinhub.settings import Settings

PROJECT = "did:ixo:protocol/project"


@pytest.fixture(scope="module", params=BACKENDS, ids=str)
def ledger_backend(request: pytest.FixtureRequest) -> Backend:
    return request.param


@pytest.fixture(scope="module")
async def ledger_database(
    ledger_backend: Backend, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[str]:
    """A database of this module's own: its ledger is tampered with (and restored), so no
    other test may share it. SQLite: a fresh file; PostgreSQL: a fresh database."""
    if ledger_backend.database != "postgresql":
        yield f"sqlite:///{tmp_path_factory.mktemp('ledger') / 'twinhub.db'}"
        return
    async with fresh_postgres_database("ledger") as url:
        yield url


@pytest.fixture(scope="module")
async def ledger_registry(
    ledger_database: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Registry]:
    settings = Settings(
        environment="test",
        data_dir=tmp_path_factory.mktemp("ledger-data"),
        database_url=ledger_database,
        pin_encryption_key=secrets.token_hex(32),
        log_level="warning",
        twinhub_bootstrap_api_key=BOOTSTRAP_KEY,
    )
    async with running_registry(settings) as registry:
        yield registry


@pytest.fixture(scope="module")
async def heights(ledger_registry: Registry) -> dict[str, int]:
    return await some_writes(ledger_registry)


@pytest.fixture
async def own_registry(
    ledger_registry: Registry, heights: dict[str, int]
) -> AsyncIterator[Registry]:
    """The module's registry, its writes made; whatever a test does to the stored ledger is
    undone afterwards (and the restored chain must verify again)."""
    engine = ledger_registry.platform.engine
    async with engine.connect() as connection:
        rows = [
            dict(row)
            for row in (
                await connection.execute(text("SELECT * FROM ledger_transactions"))
            ).mappings()
        ]
        head = dict((await connection.execute(text("SELECT * FROM ledger_head"))).mappings().one())
    assert (await ledger_registry.platform.ledger.verify()).ok
    yield ledger_registry
    columns = list(rows[0])
    async with engine.begin() as connection:
        await connection.execute(text("DELETE FROM ledger_transactions"))
        await connection.execute(
            text(
                f"INSERT INTO ledger_transactions ({', '.join(columns)}) "
                f"VALUES ({', '.join(':' + c for c in columns)})"
            ),
            rows,
        )
        await connection.execute(
            text("UPDATE ledger_head SET height = :height, tx_hash = :tx_hash WHERE id = :id"),
            head,
        )
    report = await ledger_registry.platform.ledger.verify()
    assert report.ok, report


async def some_writes(registry: Registry) -> dict[str, Any]:
    """An organisation (and its group), a project, a change, a relationship, a deactivation.
    Returns the heights of the interesting transactions."""
    org = await make_domain(registry, metadata={"name": "Original Co-op"})
    project = await make_domain(registry, type="Project", **{"class": PROJECT})
    url = f"/v1/domains/{project['did']}"
    assert (await registry.client.patch(url, json={"metadata": {"name": "Renamed"}})).is_success
    related = await registry.client.post(
        f"{url}/relationships", json={"type": "implementedBy", "target": org["did"]}
    )
    assert related.status_code == 200, related.text
    assert (await registry.client.delete(url)).is_success
    history = (await registry.client.get(f"{url}/history")).json()["items"]
    org_history = (await registry.client.get(f"/v1/domains/{org['did']}/history")).json()["items"]
    return {
        "org_create": org_history[0]["height"],
        "patch": history[1]["height"],
        "relate": history[2]["height"],
        "last": history[-1]["height"],
    }


async def execute(engine: AsyncEngine, sql: str, **params: Any) -> int:
    statement = text(sql)
    if "at" in params:
        statement = statement.bindparams(bindparam("at", type_=UtcDateTime))
    async with engine.begin() as connection:
        result = await connection.execute(statement, params)
        return result.rowcount


async def stored(engine: AsyncEngine, height: int) -> dict[str, Any]:
    async with engine.connect() as connection:
        row = await connection.execute(
            text("SELECT * FROM ledger_transactions WHERE height = :h"), {"h": height}
        )
        return dict(row.mappings().one())


# -- intact ---------------------------------------------------------------------------------
async def test_verify_is_ok_after_writes(own_registry: Registry, heights: dict[str, int]) -> None:
    registry = own_registry
    report = await registry.platform.ledger.verify()
    assert report.ok, report
    assert report.problem is None and report.bad_height is None
    height = await registry.platform.ledger.height()
    assert report.height == report.checked == height >= heights["last"]
    assert heights["last"] == height  # the deactivation was the last write
    # Small batches walk the same chain.
    assert (await registry.platform.ledger.verify(batch=3)).ok
    # What /history shows is what the ledger holds, and it links up.
    first = await registry.platform.ledger.transaction(1)
    assert first.prev_hash == GENESIS_HASH
    for h in range(2, height + 1):
        current = await registry.platform.ledger.transaction(h)
        previous = await registry.platform.ledger.transaction(h - 1)
        assert current.prev_hash == previous.tx_hash
    row = await stored(registry.platform.engine, heights["patch"])
    assert row["tx_hash"] == transaction_hash(
        row["height"],
        row["prev_hash"],
        row["kind"],
        row["subject"],
        row["actor"],
        (await registry.platform.ledger.transaction(heights["patch"])).created_at,
        row["payload"],
    )


async def test_history_entries_are_ledger_transactions(registry: Registry) -> None:
    org = await make_domain(registry)
    await registry.client.patch(f"/v1/domains/{org['did']}", json={"metadata": {"x": 1}})
    history = (await registry.client.get(f"/v1/domains/{org['did']}/history")).json()["items"]
    for entry in history:
        transaction = await registry.platform.ledger.transaction(entry["height"])
        assert transaction.tx_hash == entry["txHash"]
        assert transaction.subject == org["did"]
        assert transaction.payload["record"] == entry["record"]
    assert (await registry.platform.ledger.verify()).ok


async def test_history_pages_oldest_first(make_registry: RegistryFactory) -> None:
    """An asset's history grows with every claim about it, so it comes in pages."""
    registry = await make_registry(registry_page_size=3, registry_max_page_size=4)
    org = await make_domain(registry)
    url = f"/v1/domains/{org['did']}/history"
    for n in range(9):
        await registry.client.patch(f"/v1/domains/{org['did']}", json={"metadata": {"n": n}})
    first = (await registry.client.get(url)).json()
    assert [e["version"] for e in first["items"]] == [1, 2, 3]  # the default page size
    pages, cursor = [first["items"]], first["nextCursor"]
    while cursor:
        page = (await registry.client.get(url, params={"cursor": cursor, "limit": 50})).json()
        assert len(page["items"]) <= 4  # the maximum page size wins over a larger limit
        pages.append(page["items"])
        cursor = page["nextCursor"]
    walked = [e["version"] for page in pages for e in page]
    assert walked == list(range(1, 11))
    heights = [e["height"] for page in pages for e in page]
    assert heights == sorted(heights)
    # A cursor at the end gives an empty last page, not a 404; garbage is a 422.
    beyond = await registry.client.get(url, params={"cursor": encode_cursor(heights[-1])})
    assert beyond.status_code == 200 and beyond.json() == {"items": [], "nextCursor": None}
    bad = await registry.client.get(url, params={"cursor": "not-a-cursor"})
    assert bad.status_code == 422, bad.text
    ghost = await registry.client.get(
        "/v1/domains/did:ixo:entity/ghost/history", params={"cursor": encode_cursor(1)}
    )
    assert ghost.status_code == 404, ghost.text
    # ?version=N reads the ledger in batches too; every version is found across them.
    registry.platform.domains.history_batch = 3
    for version in (1, 3, 4, 10):
        record = await registry.client.get(f"/v1/domains/{org['did']}", params={"version": version})
        assert record.json()["version"] == version, record.text
    missing = await registry.client.get(f"/v1/domains/{org['did']}", params={"version": 11})
    assert missing.status_code == 404, missing.text


# -- tampered -------------------------------------------------------------------------------
TAMPERING = [
    pytest.param(
        "patch",
        "UPDATE ledger_transactions SET payload = replace(payload, 'Renamed', 'Forged') "
        "WHERE height = :h",
        "altered",
        id="payload",
    ),
    pytest.param(
        "org_create",
        "UPDATE ledger_transactions SET payload = replace(payload, 'Original', 'Forged') "
        "WHERE height = :h",
        "altered",
        id="payload-early",
    ),
    pytest.param(
        "patch",
        "UPDATE ledger_transactions SET actor = 'did:ixo:org/mallory' WHERE height = :h",
        "altered",
        id="actor",
    ),
    pytest.param(
        "relate",
        "UPDATE ledger_transactions SET kind = 'domain.update' WHERE height = :h",
        "altered",
        id="kind",
    ),
    pytest.param(
        "relate",
        "UPDATE ledger_transactions SET subject = 'did:ixo:entity/other' WHERE height = :h",
        "altered",
        id="subject",
    ),
    pytest.param(
        "patch",
        "UPDATE ledger_transactions SET tx_hash = :forged WHERE height = :h",
        "altered",
        id="tx-hash",
    ),
    pytest.param(
        "patch",
        "UPDATE ledger_transactions SET prev_hash = :forged WHERE height = :h",
        "does not point",
        id="prev-hash",
    ),
    pytest.param(
        "patch", "DELETE FROM ledger_transactions WHERE height = :h", "missing", id="deleted"
    ),
    pytest.param(
        "last",
        "DELETE FROM ledger_transactions WHERE height = :h",
        "head",
        id="deleted-last",
    ),
]


@pytest.mark.parametrize(("target", "sql", "problem"), TAMPERING)
@pytest.mark.parametrize("batch", [2000, 4])
async def test_tampering_is_found_at_its_height(
    own_registry: Registry,
    heights: dict[str, int],
    target: str,
    sql: str,
    problem: str,
    batch: int,
) -> None:
    registry = own_registry
    assert (await registry.platform.ledger.verify(batch=batch)).ok
    height = heights[target]
    changed = await execute(registry.platform.engine, sql, h=height, forged="f" * 64)
    assert changed == 1
    report = await registry.platform.ledger.verify(batch=batch)
    assert not report.ok
    assert report.bad_height == height, report
    assert problem in (report.problem or ""), report
    assert report.checked == height - 1


async def test_a_shifted_timestamp_is_found(
    own_registry: Registry, heights: dict[str, int]
) -> None:
    registry = own_registry
    original = await registry.platform.ledger.transaction(heights["relate"])
    await execute(
        registry.platform.engine,
        "UPDATE ledger_transactions SET created_at = :at WHERE height = :h",
        at=original.created_at + timedelta(seconds=1),
        h=heights["relate"],
    )
    report = await registry.platform.ledger.verify()
    assert not report.ok and report.bad_height == heights["relate"], report


async def test_a_rewritten_transaction_breaks_the_next_link(
    own_registry: Registry, heights: dict[str, int]
) -> None:
    """Re-hashing a forged transaction is not enough: the next one no longer points at it."""
    registry = own_registry
    h = heights["patch"]
    row = await stored(registry.platform.engine, h)
    original = await registry.platform.ledger.transaction(h)
    forged_payload = row["payload"].replace("Renamed", "Forged")
    forged_hash = transaction_hash(
        h,
        row["prev_hash"],
        row["kind"],
        row["subject"],
        row["actor"],
        original.created_at,
        forged_payload,
    )
    await execute(
        registry.platform.engine,
        "UPDATE ledger_transactions SET payload = :p, tx_hash = :t WHERE height = :h",
        p=forged_payload,
        t=forged_hash,
        h=h,
    )
    report = await registry.platform.ledger.verify()
    assert not report.ok and report.bad_height == h + 1, report
    assert "does not point" in (report.problem or "")


async def test_swapped_payloads_are_found_at_the_first(
    own_registry: Registry, heights: dict[str, int]
) -> None:
    registry = own_registry
    a, b = heights["patch"], heights["relate"]
    row_a = await stored(registry.platform.engine, a)
    row_b = await stored(registry.platform.engine, b)
    sql = "UPDATE ledger_transactions SET payload = :p WHERE height = :h"
    await execute(registry.platform.engine, sql, p=row_b["payload"], h=a)
    await execute(registry.platform.engine, sql, p=row_a["payload"], h=b)
    report = await registry.platform.ledger.verify()
    assert not report.ok and report.bad_height == a, report


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE ledger_head SET tx_hash = :forged",
        "UPDATE ledger_head SET height = height - 1",
        "UPDATE ledger_head SET height = height + 1",
    ],
    ids=["hash", "height-lower", "height-higher"],
)
async def test_a_changed_head_is_found(own_registry: Registry, sql: str) -> None:
    registry = own_registry
    transactions = await registry.platform.ledger.height()
    assert await execute(registry.platform.engine, sql, forged="e" * 64) == 1
    report = await registry.platform.ledger.verify()
    assert not report.ok
    assert "head" in (report.problem or ""), report
    assert report.checked == transactions
    assert report.bad_height == transactions + 1


# -- the CLI --------------------------------------------------------------------------------
def test_ledger_verify_cli(tmp_path: Path) -> None:
    env = {**base_env(tmp_path), "PIN_ENCRYPTION_KEY": "cd" * 32, "COLUMNS": "250"}
    settings = Settings(
        environment="test",
        data_dir=Path(env["DATA_DIR"]),
        pin_encryption_key=env["PIN_ENCRYPTION_KEY"],
        log_level="warning",
    )
    actor = Principal("did:ixo:org/cli-writer", frozenset({"writer"}))

    heads: list[str] = []

    async def build() -> tuple[int, int]:
        platform = Platform(settings)
        await platform.start()
        try:
            org = await platform.domains.create(
                DomainSpec(type="Organisation", protocol="did:ixo:protocol/organisation"), actor
            )
            project = await platform.domains.create(
                DomainSpec(
                    type="Project",
                    protocol=PROJECT,
                    relationships={"implementedBy": [org["did"]]},
                    metadata={"name": "Honest"},
                ),
                actor,
            )
            target = (await platform.ledger.history(project["did"]))[0].height
            height = await platform.ledger.height()
            head = await platform.ledger.transaction(height)
            assert head is not None
            heads.append(head.tx_hash)
            return target, height
        finally:
            await platform.stop()

    async def tamper(height: int) -> None:
        platform = Platform(settings)
        try:
            await execute(
                platform.engine,
                "UPDATE ledger_transactions SET payload = replace(payload, 'Honest', 'Forged') "
                "WHERE height = :h",
                h=height,
            )
        finally:
            await platform.engine.dispose()

    target, height = asyncio.run(build())
    intact = run_cli("ledger", "verify", env=env)
    assert intact.returncode == 0, intact.stderr
    assert "ledger intact" in intact.stderr
    assert f"{height} transactions" in intact.stderr and f"height {height}" in intact.stderr
    assert f"head hash at height {height}: {heads[0]}" in intact.stderr

    asyncio.run(tamper(target))
    damaged = run_cli("ledger", "verify", env=env)
    assert damaged.returncode == 1, damaged.stderr
    assert f"ledger damaged at height {target}" in damaged.stderr
    assert "altered" in damaged.stderr
