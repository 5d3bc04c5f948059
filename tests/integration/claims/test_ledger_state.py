"""`twinhub ledger verify` replays the ledger and reconciles the tables with it: a balance,
a supply, a movement, a domain or a claim edited behind the ledger's back (the hash chain
still intact) is found and named, on SQLite and PostgreSQL, in process and through the CLI."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from tests.conftest import (
    BACKENDS,
    BOOTSTRAP_KEY,
    Backend,
    Registry,
    fresh_postgres_database,
    running_registry,
)
from tests.support.claims_world import METERED_AMOUNT, World, build_world
from tests.support.cli import base_env, run_cli
from tests.support.workflow_world import issue_claims
from twinhub.platform import Platform
from twinhub.services.ledger_state import reconcile
from twinhub.settings import Settings


@pytest.fixture(scope="module", params=BACKENDS, ids=str)
def state_backend(request: pytest.FixtureRequest) -> Backend:
    return request.param


@pytest.fixture(scope="module")
async def state_database(
    state_backend: Backend, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[str]:
    """A database of this module's own: its tables are edited behind the ledger's back."""
    if state_backend.database != "postgresql":
        yield f"sqlite:///{tmp_path_factory.mktemp('state') / 'twinhub.db'}"
        return
    async with fresh_postgres_database("ledger_state") as url:
        yield url


@pytest.fixture(scope="module")
async def world(
    state_database: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[dict[str, Any]]:
    """A programme with an approved claim (METERED_AMOUNT CARBON minted to the stove's owner
    by the issuance of the period carrying it), a transfer of 1 and a retirement of 1: every
    kind of credit movement."""
    settings = Settings(
        environment="test",
        data_dir=tmp_path_factory.mktemp("state-data"),
        database_url=state_database,
        pin_encryption_key=secrets.token_hex(32),
        log_level="warning",
        twinhub_bootstrap_api_key=BOOTSTRAP_KEY,
        registry_rate_limit="1000000/minute",
        # The world approves its claim by hand: a background oracle could approve it first.
        oracle_enabled=False,
    )
    async with running_registry(settings) as registry:
        built: World = await build_world(registry)
        owner = "did:ixo:customer/holder-one"
        stove, _, claim = await built.approved_claim(owner=owner)
        await issue_claims(built)
        holder = await built.client(owner, "reader", "writer")
        moved = await holder.post(
            "/v1/credits/CARBON/transfers", json={"to": "did:ixo:org/buyer", "amount": 1}
        )
        assert moved.status_code == 201, moved.text
        retired = await holder.post(
            "/v1/credits/CARBON/retirements", json={"amount": 1, "reason": "offset"}
        )
        assert retired.status_code == 201, retired.text
        yield {
            "registry": registry,
            "owner": owner,
            "stove": stove,
            "claim": claim["id"],
            "built": built,
        }
        await built.close()


@pytest.fixture
async def tables(world: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """The world, reconciled clean before the test; whatever the test edits is put back
    (by the same statement's inverse) and must reconcile clean again."""
    registry: Registry = world["registry"]
    assert await reconcile(registry.platform.sessionmaker) == []
    undo: list[tuple[str, dict[str, Any]]] = []
    yield {**world, "undo": undo}
    for sql, params in undo:
        await execute(registry, sql, **params)
    assert await reconcile(registry.platform.sessionmaker) == []


async def execute(registry: Registry, sql: str, **params: Any) -> int:
    async with registry.platform.engine.begin() as connection:
        return (await connection.execute(text(sql), params)).rowcount


async def test_an_untouched_platform_reconciles(world: dict[str, Any]) -> None:
    registry: Registry = world["registry"]
    assert await reconcile(registry.platform.sessionmaker) == []
    assert await reconcile(registry.platform.sessionmaker, batch=3) == []
    assert (await registry.platform.ledger.verify()).ok


async def test_credits_added_by_hand_are_named(tables: dict[str, Any]) -> None:
    registry: Registry = tables["registry"]
    owner = tables["owner"]
    sql = "UPDATE credit_balances SET amount = amount + :n WHERE owner = :o AND token = 'CARBON'"
    assert await execute(registry, sql, n=1000, o=owner) == 1
    tables["undo"].append((sql, {"n": -1000, "o": owner}))
    differences = [str(d) for d in await reconcile(registry.platform.sessionmaker)]
    # METERED_AMOUNT minted, 1 transferred away, 1 retired; the table now 1000 more.
    held = METERED_AMOUNT - 2
    assert differences == [
        f"balance of {owner} in CARBON: amount is {held + 1000} in the table, {held} by the ledger"
    ]
    assert (await registry.platform.ledger.verify()).ok  # the chain alone cannot see it


@pytest.mark.parametrize(
    ("sql", "inverse", "expected"),
    [
        (
            "UPDATE credit_tokens SET minted = minted + 5 WHERE name = 'CARBON'",
            "UPDATE credit_tokens SET minted = minted - 5 WHERE name = 'CARBON'",
            "supply of CARBON: minted is",
        ),
        (
            "UPDATE credit_tokens SET retired = retired - 1 WHERE name = 'CARBON'",
            "UPDATE credit_tokens SET retired = retired + 1 WHERE name = 'CARBON'",
            "supply of CARBON: retired is 0 in the table, 1 by the ledger",
        ),
        (
            "UPDATE credit_movements SET amount = amount + 7 WHERE kind = 'transfer'",
            "UPDATE credit_movements SET amount = amount - 7 WHERE kind = 'transfer'",
            "amount is 8 in the table, 1 by the ledger",
        ),
        (
            "UPDATE claim_collections SET approved = approved + 9 WHERE approved = 1",
            "UPDATE claim_collections SET approved = approved - 9 WHERE approved = 10",
            "approved is 10 in the table, 1 by the ledger",
        ),
        (
            "UPDATE credit_balances SET amount = amount + 3 WHERE owner = 'did:ixo:org/buyer'",
            "UPDATE credit_balances SET amount = amount - 3 WHERE owner = 'did:ixo:org/buyer'",
            "balance of did:ixo:org/buyer in CARBON: amount is 4 in the table, 1 by the ledger",
        ),
    ],
    ids=["supply-minted", "supply-retired", "movement", "collection-counter", "recipient"],
)
async def test_credit_rows_edited_by_hand_are_named(
    tables: dict[str, Any], sql: str, inverse: str, expected: str
) -> None:
    registry: Registry = tables["registry"]
    assert await execute(registry, sql) == 1
    tables["undo"].append((inverse, {}))
    differences = [str(d) for d in await reconcile(registry.platform.sessionmaker)]
    assert len(differences) == 1 and expected in differences[0], differences


async def test_a_domain_edited_behind_the_ledger_is_named(tables: dict[str, Any]) -> None:
    registry: Registry = tables["registry"]
    stove = tables["stove"]
    verified = "UPDATE domains SET verified = :v WHERE did = :d"
    # The stove was verified by governance (its claim was approved): un-verify it by hand.
    assert await execute(registry, verified, v=False, d=stove) == 1
    tables["undo"].append((verified, {"v": True, "d": stove}))
    differences = [str(d) for d in await reconcile(registry.platform.sessionmaker)]
    assert differences == [f"domain {stove}: verified is false in the table, true by the ledger"]


async def test_a_claim_is_issued_exactly_when_a_mint_names_it(tables: dict[str, Any]) -> None:
    """An issuance marks its claims issued in the write that mints them (one transaction),
    so `issued` in the table and a `credits.mint` naming the claim go together; either
    without the other is named."""
    registry: Registry = tables["registry"]
    built: World = tables["built"]
    claim = tables["claim"]  # issued: its period's issuance minted it
    cleared = "UPDATE claims SET issued_at = NULL WHERE id = :c"
    assert await execute(registry, cleared, c=claim) == 1
    tables["undo"].append(
        ("UPDATE claims SET issued_at = evaluated_at WHERE id = :c", {"c": claim})
    )
    differences = [str(d) for d in await reconcile(registry.platform.sessionmaker)]
    assert differences == [
        f"claim {claim}: issued is False in the table (amount {METERED_AMOUNT}, period "
        f"{(await built.operator_client.get(f'/v1/claims/{claim}')).json()['credits']['period']}"
        "), True by the ledger (a mint names it)"
    ], differences
    # A claim no mint names (pending here), marked issued behind the ledger's back.
    collection = (await built.operator_client.get(f"/v1/claims/{claim}")).json()["collection"]
    pending = (await built.approvable(collection))["id"]
    marked = "UPDATE claims SET issued_at = submitted_at WHERE id = :c"
    assert await execute(registry, marked, c=pending) == 1
    tables["undo"].append(("UPDATE claims SET issued_at = NULL WHERE id = :c", {"c": pending}))
    differences = [str(d) for d in await reconcile(registry.platform.sessionmaker)]
    assert (
        f"claim {pending}: issued is True in the table (amount None, period None), False by "
        "the ledger (no mint names it)" in differences
    ), differences


async def test_a_claim_and_a_relationship_edited_behind_the_ledger_are_named(
    tables: dict[str, Any],
) -> None:
    registry: Registry = tables["registry"]
    claim, stove = tables["claim"], tables["stove"]
    amount = "UPDATE claims SET amount = :a WHERE id = :c"
    assert await execute(registry, amount, a=400, c=claim) == 1
    tables["undo"].append((amount, {"a": METERED_AMOUNT, "c": claim}))
    retarget = "UPDATE relationships SET type = :t WHERE source_did = :s AND type = :old"
    assert await execute(registry, retarget, t="forged", s=stove, old="project") == 1
    tables["undo"].append((retarget, {"t": "project", "s": stove, "old": "forged"}))
    differences = [str(d) for d in await reconcile(registry.platform.sessionmaker)]
    assert (
        f"claim {claim}: amount is 400 in the table, {METERED_AMOUNT} by the ledger" in differences
    )
    assert any(d.startswith(f"domain {stove}: relationships is") for d in differences)
    assert len(differences) == 2, differences


async def test_rows_missing_on_either_side_are_named(tables: dict[str, Any]) -> None:
    registry: Registry = tables["registry"]
    owner = tables["owner"]
    insert = (
        "INSERT INTO credit_balances (owner, token, amount, retired) "
        "VALUES ('did:ixo:org/stranger', 'CARBON', 50, 0)"
    )
    assert await execute(registry, insert) == 1
    tables["undo"].append(("DELETE FROM credit_balances WHERE owner = 'did:ixo:org/stranger'", {}))
    differences = [str(d) for d in await reconcile(registry.platform.sessionmaker)]
    assert differences == [
        "balance of did:ixo:org/stranger in CARBON: amount is 50 in the table, 0 by the ledger"
    ]
    assert owner  # the holder's own balance is untouched and not named


# -- the CLI --------------------------------------------------------------------------------
def test_ledger_verify_cli_names_a_hand_made_balance(tmp_path: Path) -> None:
    """The acceptance test of the issue: 1,000 credits added to a balance in SQL make
    `twinhub ledger verify` exit 1 naming that balance; so does a domain edited in SQL."""
    env = {**base_env(tmp_path), "PIN_ENCRYPTION_KEY": "cd" * 32, "COLUMNS": "250"}
    env["TWINHUB_BOOTSTRAP_API_KEY"] = BOOTSTRAP_KEY
    settings = Settings(
        environment="test",
        data_dir=Path(env["DATA_DIR"]),
        pin_encryption_key=env["PIN_ENCRYPTION_KEY"],
        log_level="warning",
        twinhub_bootstrap_api_key=BOOTSTRAP_KEY,
        oracle_enabled=False,
    )

    async def build() -> tuple[str, str]:
        async with running_registry(settings) as registry:
            built = await build_world(registry)
            owner = "did:ixo:customer/cli-holder"
            stove, _, _ = await built.approved_claim(owner=owner)
            await issue_claims(built)
            await built.close()
            return owner, stove

    async def tamper(sql: str, **params: Any) -> None:
        platform = Platform(settings)
        try:
            async with platform.engine.begin() as connection:
                assert (await connection.execute(text(sql), params)).rowcount == 1
        finally:
            await platform.engine.dispose()

    owner, stove = asyncio.run(build())
    intact = run_cli("ledger", "verify", env=env)
    assert intact.returncode == 0, intact.stderr
    assert "ledger intact" in intact.stderr and "match it" in intact.stderr

    asyncio.run(
        tamper("UPDATE credit_balances SET amount = amount + 1000 WHERE owner = :o", o=owner)
    )
    asyncio.run(
        tamper("UPDATE domains SET metadata = :m WHERE did = :d", m='{"name": "Forged"}', d=stove)
    )
    damaged = run_cli("ledger", "verify", env=env)
    assert damaged.returncode == 1, damaged.stderr
    out = damaged.stderr
    assert "tables disagree with the ledger" in out and "2 place(s)" in out, out
    held = METERED_AMOUNT
    assert (
        f"balance of {owner} in CARBON: amount is {held + 1000} in the table, {held} by the" in out
    )
    assert f"domain {stove}: metadata is" in out and "Forged" in out, out
