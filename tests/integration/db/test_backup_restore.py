"""The back-up and restore story of docs/operations.md, done for real: a live database is
backed up (SQLite: sqlite3's online backup API, what `.backup` runs; PostgreSQL: pg_dump
and pg_restore), restored into a fresh database, and `twinhub ledger verify` passes on the
copy with the source's head hash. An edit behind the ledger's back is caught on the copy."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import subprocess
from contextlib import AsyncExitStack, closing
from pathlib import Path

import asyncpg

from tests.conftest import Backend, RegistryFactory, fresh_postgres_database, unavailable
from tests.support.claims_world import build_world
from tests.support.cli import base_env, run_cli
from tests.support.workflow_world import issue_claims

TAMPER = "UPDATE credit_balances SET amount = amount + 1000"


def tools(*names: str) -> None:
    for name in names:
        if shutil.which(name) is None:
            unavailable(name, FileNotFoundError(f"{name} is not on PATH"))


def run(*command: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


async def test_a_backup_restores_and_the_ledger_verifies(
    backend: Backend, make_registry: RegistryFactory, tmp_path: Path
) -> None:
    async with AsyncExitStack() as stack:
        overrides: dict[str, str] = {}
        if backend.database == "postgresql":
            tools("pg_dump", "pg_restore")
            source_url = await stack.enter_async_context(fresh_postgres_database("backup"))
            overrides["database_url"] = source_url
        registry = await make_registry(**overrides)
        world = await build_world(registry)
        try:
            await world.approved_claim()  # domains, a vote, a claim, a credential
            await issue_claims(world)  # and its credits, issued by a period's issuance
        finally:
            await world.close()
        source = await registry.platform.ledger.verify()
        assert source.ok and source.height > 10

        # Backed up while the platform runs (and holds its connections open).
        if backend.database == "sqlite":
            live = registry.settings.storage.database_url.removeprefix("sqlite:///")
            copy = tmp_path / "restored.db"
            with closing(sqlite3.connect(live)) as src, closing(sqlite3.connect(copy)) as dst:
                src.backup(dst)
            restored_url = f"sqlite:///{copy}"
        else:
            dump = tmp_path / "twinhub.dump"
            await asyncio.to_thread(run, "pg_dump", "--format=custom", f"--file={dump}", source_url)
            restored_url = await stack.enter_async_context(
                fresh_postgres_database("restored", empty=True)
            )
            await asyncio.to_thread(
                run,
                "pg_restore",
                "--no-owner",
                "--exit-on-error",
                f"--dbname={restored_url}",
                str(dump),
            )

        env = {**base_env(tmp_path / "cli"), "DATABASE_URL": restored_url}
        verified = await asyncio.to_thread(run_cli, "ledger", "verify", env=env)
        assert verified.returncode == 0, verified.stderr
        assert f"{source.checked} transactions, height {source.height}" in verified.stderr
        assert f"head hash at height {source.height}: {source.head_hash}" in verified.stderr

        # The copy is checked for real: a balance edited in it is named.
        if backend.database == "sqlite":
            with closing(sqlite3.connect(copy)) as db:
                db.execute(TAMPER)
                db.commit()
        else:
            connection = await asyncpg.connect(restored_url)
            try:
                await connection.execute(TAMPER)
            finally:
                await connection.close()
        tampered = await asyncio.to_thread(run_cli, "ledger", "verify", env=env)
        assert tampered.returncode == 1
        assert "tables disagree with the ledger" in tampered.stderr
