"""A PostgreSQL database of its own for each benchmark run: created on the server the run is
pointed at, dropped when it ends. Shared by the benchmarks (claims, registry, telemetry,
verify) so that none of them imports another's module for it."""

from __future__ import annotations

from bench.ussd import BenchError


async def create_postgres_database(admin_url: str, tag: str) -> str:
    """A new database on the PostgreSQL server for this run; its URL."""
    import asyncpg

    name = f"twinhub_bench_claims_{tag}"
    try:
        admin = await asyncpg.connect(admin_url, timeout=5)
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        raise BenchError(f"PostgreSQL at {admin_url} is not reachable: {exc}") from None
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    return f"{admin_url.rsplit('/', 1)[0]}/{name}"


async def drop_postgres_database(admin_url: str, url: str) -> None:
    import asyncpg

    name = url.rsplit("/", 1)[1]
    admin = await asyncpg.connect(admin_url, timeout=5)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()
