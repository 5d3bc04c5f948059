"""Every registry write leaves one info line naming the actor, the route and the object; no
secret (API key, device token, PIN, phone number) ever reaches it."""

from __future__ import annotations

import io
import re
from typing import Any

import orjson

from tests.conftest import BOOTSTRAP_KEY, Registry, new_phone, unique
from tests.integration.console.test_console import console, sign_in
from tests.integration.ussd.test_logging import log_stream  # noqa: F401 (the fixture)
from tests.support.claims_world import build_world


def writes(output: str) -> list[dict[str, Any]]:
    lines = [orjson.loads(line) for line in output.splitlines() if line.startswith("{")]
    return [line for line in lines if line["event"] == "registry write"]


async def test_creates_approvals_and_key_creations_are_logged_without_secrets(
    registry: Registry,
    log_stream: io.StringIO,  # noqa: F811
) -> None:
    world = await build_world(registry)
    try:
        stove, _, approved = await world.approved_claim()
        device = await world.operator_client.post(f"/v1/domains/{stove}/device-tokens", json={})
        assert device.status_code == 201, device.text
        device_token = device.json()["token"]
    finally:
        await world.close()
    phone = new_phone()
    lifted = await registry.client.delete(f"/v1/admin/lockouts/{phone}")
    assert lifted.status_code == 404
    async with console(registry) as browser:
        csrf = await sign_in(browser, BOOTSTRAP_KEY)
        principal = f"did:ixo:org/{unique('auditor')}"
        made = await browser.post(
            "/console/keys", data={"csrf": csrf, "principal": principal, "roles": "reader"}
        )
        assert made.status_code == 201, made.text
        found = re.search(r"thk_([0-9a-f]+)_[A-Za-z0-9_\-]+", made.text)
        assert found, "the new key is shown once"
        new_key, new_key_id = found.group(0), found.group(1)

    # The test's own HTTP client (httpx) logs the URLs it asks for; the platform's lines
    # are what must hold no secret.
    output = "\n".join(
        line for line in log_stream.getvalue().splitlines() if '"logger": "httpx"' not in line
    )
    logged = writes(output)
    created = [w for w in logged if w["route"] == "/v1/domains" and w["method"] == "POST"]
    assert created, "domain creations are logged"
    assert {w["actor"] for w in created} >= {world.operator, world.oracle_operator}
    stove_line = next(w for w in created if w.get("created") == stove)
    assert stove_line["status"] == 201 and stove_line["level"] == "info"
    assert stove_line["roles"] == ["reader", "writer"] and stove_line["key_id"]

    [approval] = [w for w in logged if w["route"] == "/v1/claims/{claim_id}/evaluations"]
    assert approval["actor"] == world.oracle_operator and approval["status"] == 200
    assert approval["object"] == {"claim_id": approved["id"]}

    [key_line] = [w for w in logged if w["route"] == "/console/keys"]
    assert key_line["actor"] == "did:ixo:org/twinhub-admin"
    assert key_line["key_id"] == "bootstrap" and key_line["status"] == 201
    lines = [orjson.loads(line) for line in output.splitlines() if line.startswith("{")]
    [key_made] = [
        line
        for line in lines
        if line["event"] == "api key created" and line["key_id"] == new_key_id
    ]
    assert key_made["principal"] == principal and key_made["roles"] == ["reader"]

    [lockout] = [w for w in logged if w["route"] == "/v1/admin/lockouts/{target}"]
    assert lockout["status"] == 404 and lockout["object"]["target"].endswith(phone[-3:])

    # thk_<key id>_<secret>: the secret is all after the second underscore (it may hold more).
    for secret in (new_key, new_key.split("_", 2)[2], device_token, BOOTSTRAP_KEY, phone):
        assert secret not in output, secret
    # Reads are not writes: no line for them.
    assert not [w for w in logged if w["method"] == "GET"]
