"""The console's sign-in counts wrong keys as the API does, and a revoked key's console
sessions end at once, on every worker (issue 31, point 5)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.conftest import BOOTSTRAP_KEY, Backend, Registry, RegistryFactory, unique
from tests.integration.console.test_console import console, csrf_of, sign_in
from tests.support.cli import run_cli


async def _wrong_sign_in(registry: Registry, client: Any) -> Any:
    form = await client.get("/console/sign-in")
    return await client.post(
        "/console/sign-in",
        data={"csrf": csrf_of(form.text), "api_key": f"thk_{unique('k')}_wrong", "next": ""},
    )


async def test_wrong_keys_at_the_console_sign_in_meet_the_api_key_failure_limit(
    make_registry: RegistryFactory,
) -> None:
    registry = await make_registry(api_key_failure_limit="20/minute")
    statuses = []
    async with console(registry) as browser:
        for _ in range(30):
            statuses.append((await _wrong_sign_in(registry, browser)).status_code)
        assert statuses[:20] == [401] * 20, statuses
        assert set(statuses[20:]) == {429}, statuses
        limited = await _wrong_sign_in(registry, browser)
        assert limited.status_code == 429
        assert int(limited.headers["retry-after"]) >= 1
        assert "Too many wrong API keys" in limited.text
        # One rule, one allowance per address: the API's bearer header is refused too.
        async with registry.as_key("thk_abc_wrong") as api:
            answer = await api.get("/v1/domains")
        assert answer.status_code == 429, answer.text
        assert answer.json()["error"]["code"] == "rate_limited"


async def test_wrong_api_keys_use_up_the_console_sign_in_allowance(
    make_registry: RegistryFactory,
) -> None:
    registry = await make_registry(api_key_failure_limit="5/minute")
    async with registry.as_key("thk_abc_wrong") as api:
        for _ in range(5):
            assert (await api.get("/v1/domains")).status_code == 401
    async with console(registry) as browser:
        assert (await _wrong_sign_in(registry, browser)).status_code == 429


@pytest.mark.parametrize("backend", [Backend("postgresql", "redis")], indirect=True, ids=str)
async def test_a_key_revoked_on_one_worker_ends_its_sessions_and_calls_on_another_at_once(
    make_registry: RegistryFactory, settings_for: Any
) -> None:
    """Two workers (two apps, one database, one Redis): the key is revoked at the console
    of one; its session and its bearer calls on the other end with the next request, not
    when the other's key cache expires."""
    shared = settings_for()
    common = {
        "pin_encryption_key": shared.security.pin_encryption_key.get_secret_value(),
        "redis_key_prefix": shared.storage.redis_key_prefix,
    }
    first, second = await make_registry(**common), await make_registry(**common)
    token = await first.key(f"did:ixo:org/{unique('writer')}", "writer")
    key_id = token.split("_")[1]
    async with console(first) as admin, console(second) as user, second.as_key(token) as api:
        await sign_in(user, token)
        assert (await user.get("/console/")).status_code == 200
        assert (await api.get("/v1/domains")).status_code == 200  # now in second's cache
        admin_csrf = await sign_in(admin, BOOTSTRAP_KEY)
        revoked = await admin.post(f"/console/keys/{key_id}/revocation", data={"csrf": admin_csrf})
        revoked_at = time.monotonic()
        assert revoked.status_code == 303, revoked.text
        # The bearer first (the console's own look-up would refresh second's cache): the
        # relayed message reaches second within moments, its cache alone would take 5 s.
        while (await api.get("/v1/domains")).status_code == 200:
            assert time.monotonic() - revoked_at < 1.0, "the revocation did not arrive"
            await asyncio.sleep(0.01)
        assert (await api.get("/v1/domains")).status_code == 401
        after = await user.get("/console/")
        assert after.status_code == 303 and "/console/sign-in" in after.headers["location"]


async def test_a_key_revoked_by_the_command_ends_its_console_sessions_at_once(
    registry: Registry,
) -> None:
    """`twinhub keys revoke` is a process of its own, without Redis here: the console checks
    the session's key in the database on each request, so it needs no message at all."""
    token = await registry.key(f"did:ixo:org/{unique('writer')}", "writer")
    async with console(registry) as user:
        await sign_in(user, token)
        assert (await user.get("/console/")).status_code == 200
        settings = registry.settings
        env = {
            "DATABASE_URL": settings.storage.resolved_database_url,
            "DATA_DIR": str(settings.storage.data_dir),
            "PIN_ENCRYPTION_KEY": settings.security.pin_encryption_key.get_secret_value(),
            "ENVIRONMENT": "test",
        }
        done = run_cli("keys", "revoke", token.split("_")[1], env=env)
        assert done.returncode == 0, done.stderr
        after = await user.get("/console/")
        assert after.status_code == 303 and "/console/sign-in" in after.headers["location"]


@pytest.mark.parametrize("backend", [Backend("postgresql", "redis")], indirect=True, ids=str)
async def test_a_key_revoked_by_the_command_stops_its_api_calls_at_once_with_redis(
    registry: Registry,
) -> None:
    """With Redis the command's revocation reaches the running server's key cache through
    the relay (the command waits for its publish before it exits): the bearer is refused
    within moments, not up to 5 s later when the cache entry expires."""
    token = await registry.key(f"did:ixo:org/{unique('writer')}", "writer")
    async with registry.as_key(token) as api:
        assert (await api.get("/v1/domains")).status_code == 200  # cached as valid now
        settings = registry.settings
        redis_url = settings.storage.redis_url
        assert redis_url is not None
        env = {
            "DATABASE_URL": settings.storage.resolved_database_url,
            "DATA_DIR": str(settings.storage.data_dir),
            "PIN_ENCRYPTION_KEY": settings.security.pin_encryption_key.get_secret_value(),
            "REDIS_URL": redis_url.get_secret_value(),
            "REDIS_KEY_PREFIX": settings.storage.redis_key_prefix,
            "ENVIRONMENT": "test",
        }
        done = run_cli("keys", "revoke", token.split("_")[1], env=env)
        revoked_at = time.monotonic()
        assert done.returncode == 0, done.stderr
        # The server hears the message a moment after the command published it.
        while (await api.get("/v1/domains")).status_code == 200:
            assert time.monotonic() - revoked_at < 1.0, "the revocation did not arrive"
            await asyncio.sleep(0.01)
        assert (await api.get("/v1/domains")).status_code == 401
