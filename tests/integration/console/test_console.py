"""The console and the summary API through the real ASGI stack, on SQLite and PostgreSQL.

The browser tests (test_console_browser.py) use the console as a person does; these check
the rules behind it quickly: the summary's counts, sessions, CSRF, roles, revoked keys,
escaping, security headers, and the offline assets of /docs and GraphiQL.
"""

from __future__ import annotations

import re
import subprocess
import sys
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import (
    BOOTSTRAP_KEY,
    Backend,
    Registry,
    fresh_postgres_database,
    running_registry,
    unique,
)
from tests.support.claims_world import METERED_AMOUNT, build_world
from tests.support.workflow_world import issue_claims
from twinhub.console.pages import credit_amount

EVIL = "<script>alert(1)</script>"
ROOT = Path(__file__).resolve().parents[3]


def console(registry: Registry) -> httpx.AsyncClient:
    """A browser-like client of the console: keeps cookies, follows nothing by itself."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=registry.asgi), base_url="http://registry.test"
    )


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, "the page has no CSRF token"
    return found.group(1)


async def sign_in(client: httpx.AsyncClient, key: str) -> str:
    """Sign in; the CSRF token of the signed-in session."""
    form = await client.get("/console/sign-in")
    answer = await client.post(
        "/console/sign-in", data={"csrf": csrf_of(form.text), "api_key": key, "next": ""}
    )
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/console/"
    page = await client.get("/console/")
    assert page.status_code == 200
    return csrf_of(page.text)


async def test_summary_counts_stoves_claims_and_credits(registry: Registry) -> None:
    world = await build_world(registry)
    try:
        stove, collection, approved = await world.approved_claim()
        issued = await issue_claims(world)  # its credits come with the registry's issuance
        await world.asset(verified=False)  # a second stove, without claims, unverified
        pending = await world.operator_client.post(
            f"/v1/claim-collections/{collection['id']}/claims",
            json={
                "asset": stove,
                "data": {
                    "reportType": "fuel",
                    "fuelKg": 1.0,
                    # another month: a stove's month is counted once
                    "periodStart": "2026-01-01T00:00:00Z",
                    "periodEnd": "2026-02-01T00:00:00Z",
                },
            },
        )
        assert pending.status_code == 201, pending.text
        owner = (await registry.client.get(f"/v1/domains/{stove}")).json()["controller"][0]
        retired = await registry.client.post(
            "/v1/credits/CARBON/retirements", json={"amount": 1, "reason": "offset", "from": owner}
        )
        assert retired.status_code in (200, 201), retired.text

        summary = await world.operator_client.get(f"/v1/domains/{world.project}/summary")
        assert summary.status_code == 200, summary.text
        body = summary.json()
        assert body["stoves"]["registered"] == 2
        assert body["stoves"]["byState"] == {"verified": 1, "unverified": 1, "deactivated": 0}
        assert body["claims"]["byStatus"]["approved"] == 1
        assert body["claims"]["byStatus"]["pending"] == 1
        assert body["claims"]["submitted"] == 2
        assert body["credits"]["issued"] == {"CARBON": METERED_AMOUNT}
        assert body["credits"]["retired"] == {"CARBON": 1}
        today = datetime.now(UTC).date().isoformat()
        assert {"date": today, "CARBON": METERED_AMOUNT} in body["credits"]["issuedPerDay"]
        assert len(body["credits"]["issuedPerDay"]) in (30, 31)
        # No stove reported telemetry: every day of the period is there, at zero
        # (tests/integration/console/test_telemetry_console.py checks the figures once
        # readings arrive).
        telemetry = body["telemetry"]
        assert telemetry["available"] is True and telemetry["onlineNow"] == 0
        assert len(telemetry["days"]) == len(body["credits"]["issuedPerDay"])
        assert all(d["cookingSessions"] == 0 and d["energyKwh"] == 0 for d in telemetry["days"])

        # The organisation sums its projects; another project's figures stay apart.
        other = await world.project_domain(verified=False)
        organisation = (
            await world.operator_client.get(f"/v1/domains/{world.organisation}/summary")
        ).json()
        assert organisation["credits"]["issued"] == {"CARBON": METERED_AMOUNT}
        assert organisation["stoves"]["registered"] == 2
        empty = (await world.operator_client.get(f"/v1/domains/{other}/summary")).json()
        assert empty["claims"]["submitted"] == 0 and empty["credits"]["issued"] == {}

        # A period before anything happened counts nothing.
        old = {"from": "2020-01-01T00:00:00Z", "to": "2020-01-31T00:00:00Z"}
        past = (
            await world.operator_client.get(f"/v1/domains/{world.project}/summary", params=old)
        ).json()
        assert past["claims"]["submitted"] == 0 and past["credits"]["issued"] == {}
        assert past["credits"]["issuedPerDay"][0] == {"date": "2020-01-01"}  # no tokens
        assert len(past["credits"]["issuedPerDay"]) == 30

        # The same figures in GraphQL.
        query = (
            "query($id: String!) { summary(id: $id) "
            "{ domain type from to stoves claims credits telemetry } }"
        )
        graphql = await world.operator_client.post(
            "/graphql", json={"query": query, "variables": {"id": world.project}}
        )
        found = graphql.json()["data"]["summary"]
        assert found["claims"] == body["claims"] and found["credits"]["issued"] == {
            "CARBON": METERED_AMOUNT
        }
        assert found["type"] == "Project"
        assert approved["status"] == "approved"
        # The dashboard shows credits as people count them: millionths at six decimals.
        async with console(registry) as browser:
            await sign_in(browser, BOOTSTRAP_KEY)
            page = await browser.get("/console/", params={"did": world.project})
            assert page.status_code == 200
            shown = f"0.{METERED_AMOUNT:06d}".rstrip("0")
            assert f'<span class="value">{shown}</span>' in page.text
            # The stove's page names the token its approved claim minted, in credits, and
            # the period whose issuance minted them.
            twin = await browser.get(f"/console/twins/{stove}")
            assert twin.status_code == 200
            state = f'<span class="muted credits-state">issued (period {issued["id"]})</span>'
            assert f"<td>{shown} CARBON<br>{state}</td>" in twin.text
            # So does the claims queue's row of the approved claim.
            queue = await browser.get(  # (searched: other tests' claims share the database)
                "/console/claims", params={"status": "approved", "q": approved["id"]}
            )
            assert queue.status_code == 200 and approved["id"] in queue.text
            assert f"{METERED_AMOUNT}<br>{state}" in queue.text
            assert f"<td>{METERED_AMOUNT}</td>" not in twin.text
    finally:
        await world.close()


async def test_summary_refuses_bad_periods_and_other_domains(registry: Registry) -> None:
    world = await build_world(registry)
    try:
        url = f"/v1/domains/{world.project}/summary"
        now = datetime.now(UTC)
        cases = {
            "backwards": {"from": now.isoformat(), "to": (now - timedelta(days=1)).isoformat()},
            "too long": {"from": (now - timedelta(days=400)).isoformat(), "to": now.isoformat()},
            "no zone": {"from": "2026-01-01T00:00:00", "to": now.isoformat()},
            "not a time": {"from": "yesterday"},
        }
        for name, params in cases.items():
            answer = await world.operator_client.get(url, params=params)
            assert answer.status_code == 422, name
            assert answer.json()["error"]["details"], name
        oracle = await world.operator_client.get(f"/v1/domains/{world.oracle}/summary")
        assert oracle.status_code == 422
        assert "projects and organisations" in oracle.json()["error"]["message"]
        missing = await world.operator_client.get("/v1/domains/did:ixo:entity/nothing/summary")
        assert missing.status_code == 404
        anonymous = registry.as_key(None)
        assert (await anonymous.get(url)).status_code == 401
        await anonymous.aclose()
    finally:
        await world.close()


async def test_console_sessions_csrf_roles_and_revocation(registry: Registry) -> None:
    async with console(registry) as browser:
        first = await browser.get("/console/claims")
        assert first.status_code == 303
        assert first.headers["location"] == "/console/sign-in?next=%2Fconsole%2Fclaims"
        # Sign-in without the form's token is refused (login CSRF).
        refused = await browser.post("/console/sign-in", data={"api_key": "x", "csrf": "forged"})
        assert refused.status_code == 403
        form = await browser.get("/console/sign-in")
        wrong = await browser.post(
            "/console/sign-in", data={"csrf": csrf_of(form.text), "api_key": "thk_a_b"}
        )
        assert wrong.status_code == 401 and "unknown or revoked" in wrong.text

        token, view = await registry.platform.api_keys.create(
            f"did:ixo:org/{unique('reader')}", ["reader"]
        )
        csrf = await sign_in(browser, token)
        cookie = browser.cookies.jar
        session = next(c for c in cookie if c.name == "twinhub_console")
        assert session.has_nonstandard_attr("HttpOnly")
        assert session.get_nonstandard_attr("SameSite", "").lower() == "strict"
        assert token not in str(browser.cookies)  # the key never reaches the browser

        # A reader sees the queue without decision forms, and no keys page.
        page = await browser.get("/console/claims")
        assert page.status_code == 200 and "Record decision" not in page.text
        assert (await browser.get("/console/keys")).status_code == 403
        # A POST without the session's CSRF token is refused, whatever it asks.
        forged = await browser.post("/console/claims/abc/evaluation", data={"decision": "approved"})
        assert forged.status_code == 403
        ok_token = await browser.post(
            "/console/claims/abc/evaluation",
            data={"csrf": csrf, "decision": "approved", "amount": "1"},
        )
        assert ok_token.status_code == 422  # past CSRF; the reader may not evaluate
        assert "writer" in ok_token.text or "No claim" in ok_token.text

        # Revoked elsewhere: the next request is sent back to sign in.
        await registry.platform.api_keys.revoke(view.key_id)
        again = await browser.get("/console/")
        assert again.status_code == 303 and again.headers["location"].startswith("/console/sign-in")


async def test_session_cookie_is_secure_behind_a_trusted_https_proxy(
    make_registry: Any,
) -> None:
    proxied = await make_registry(trust_proxy_enabled=True)
    async with console(proxied) as browser:
        form = await browser.get("/console/sign-in")
        answer = await browser.post(
            "/console/sign-in",
            data={"csrf": csrf_of(form.text), "api_key": BOOTSTRAP_KEY},
            headers={"x-forwarded-proto": "https"},
        )
        assert answer.status_code == 303
        assert "secure" in answer.headers["set-cookie"].lower()
        form = await browser.get("/console/sign-in")
        plain = await browser.post(
            "/console/sign-in", data={"csrf": csrf_of(form.text), "api_key": BOOTSTRAP_KEY}
        )
        assert plain.status_code == 303
        assert "secure" not in plain.headers["set-cookie"].lower()


async def test_console_pages_escape_user_strings_and_forbid_inline_scripts(
    backend: Backend, settings_for: Any
) -> None:
    # A database of its own: the dashboard's scope list holds the oldest 200 organisations,
    # and the worker's shared PostgreSQL database may hold more from other tests.
    async with AsyncExitStack() as stack:
        overrides: dict[str, Any] = {"twinhub_bootstrap_api_key": BOOTSTRAP_KEY}
        if backend.database == "postgresql":
            overrides["database_url"] = await stack.enter_async_context(
                fresh_postgres_database("console")
            )
        registry = await stack.enter_async_context(running_registry(settings_for(**overrides)))
        await escape_user_strings(registry)


async def escape_user_strings(registry: Registry) -> None:
    made = await registry.client.post(
        "/v1/domains",
        json={
            "type": "Organisation",
            "protocol": "did:ixo:protocol/organisation",
            "metadata": {"name": EVIL},
        },
    )
    assert made.status_code == 201
    did = made.json()["did"]
    async with console(registry) as browser:
        await sign_in(browser, registry.settings.security.bootstrap_api_key.get_secret_value())
        for path in (
            "/console/",
            f"/console/twins/{did}",
            f"/console/?did={did}",
            "/console/graph",
        ):
            page = await browser.get(path)
            assert page.status_code == 200, path
            assert EVIL not in page.text, path
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text, path
            csp = page.headers["content-security-policy"]
            assert "script-src 'self';" in csp and "frame-ancestors 'none'" in csp
            assert page.headers["cache-control"] == "no-store"
            # Every script is a file of the package: no inline code, no other host.
            for tag in re.findall(r"<script[^>]*>(.*?)</script>", page.text, re.S):
                assert tag.strip() == "", path
            for source in re.findall(r'<script[^>]*src="([^"]+)"', page.text):
                assert source.startswith("/console/static/"), source
                assert (await browser.get(source)).status_code == 200, source
        graph = await browser.get("/console/graph.json", params={"did": did})
        assert graph.json()["nodes"][0]["name"] == EVIL  # JSON, rendered with textContent


async def test_docs_and_graphiql_use_vendored_assets(registry: Registry) -> None:
    anonymous = registry.as_key(None)
    try:
        docs = await anonymous.get("/docs")
        assert docs.status_code == 200
        assert "cdn.jsdelivr.net" not in docs.text and "https://" not in docs.text
        for asset in re.findall(r'(?:src|href)="(/console/static/[^"]+)"', docs.text):
            assert (await anonymous.get(asset)).status_code == 200, asset
        ide = await anonymous.get("/graphql", headers={"accept": "text/html"})
        for asset in re.findall(r'(?:src|href)="(/console/static/[^"]+)"', ide.text):
            assert (await anonymous.get(asset)).status_code == 200, asset
    finally:
        await anonymous.aclose()


def test_vendored_files_match_their_manifest() -> None:
    checked = subprocess.run(
        [sys.executable, str(ROOT / "tools/vendor_assets.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stderr


@pytest.mark.parametrize("backend", [Backend("postgresql", "redis")], indirect=True, ids=str)
async def test_console_sessions_in_redis_are_shared_by_workers_and_hold_no_key(
    make_registry: Any, settings_for: Any
) -> None:
    """Two workers (two apps, one Redis, one platform key) know each other's sign-ins,
    Redis holds neither the API key nor the session id, and sign-out ends it everywhere."""
    shared = settings_for()
    common = {
        "pin_encryption_key": shared.security.pin_encryption_key.get_secret_value(),
        "redis_key_prefix": shared.storage.redis_key_prefix,
    }
    first, second = await make_registry(**common), await make_registry(**common)
    token = await first.key(f"did:ixo:org/{unique('writer')}", "writer")
    async with console(first) as on_first, console(second) as on_second:
        await sign_in(on_first, token)
        session_id = on_first.cookies["twinhub_console"]
        on_second.cookies.set("twinhub_console", session_id, domain="registry.test")
        page = await on_second.get("/console/")
        assert page.status_code == 200, page.headers.get("location")

        redis = first.platform.redis
        pattern = f"{shared.storage.redis_key_prefix}console:*"
        keys = [k async for k in redis.scan_iter(match=pattern)]
        assert len(keys) == 1
        stored = (await redis.get(keys[0])).decode()
        assert token not in stored and session_id not in stored
        assert session_id not in keys[0].decode()

        # A worker with another platform key finds no session under that cookie.
        stranger = await make_registry(redis_key_prefix=shared.storage.redis_key_prefix)
        async with console(stranger) as on_stranger:
            on_stranger.cookies.set("twinhub_console", session_id, domain="registry.test")
            assert (await on_stranger.get("/console/")).status_code == 303
        assert (await on_first.get("/console/")).status_code == 200

        # Signing out on one worker ends the session on the other.
        csrf = csrf_of((await on_second.get("/console/")).text)
        out = await on_second.post("/console/sign-out", data={"csrf": csrf})
        assert out.status_code == 303
        again = await on_first.get("/console/")
        assert again.status_code == 303 and "/console/sign-in" in again.headers["location"]
        assert [k async for k in redis.scan_iter(match=pattern)] == []


@pytest.mark.parametrize(
    ("amount", "decimals", "shown"),
    [
        (90646, 6, "0.090646"),
        (1_234_000_000, 6, "1,234"),
        (1_500_000, 6, "1.5"),
        (-1_500_000, 6, "-1.5"),
        (3, 0, "3"),
        (None, 6, ""),
    ],
)
def test_credit_amounts_are_shown_in_whole_credits(
    amount: int | None, decimals: int, shown: str
) -> None:
    assert credit_amount(amount, decimals) == shown
