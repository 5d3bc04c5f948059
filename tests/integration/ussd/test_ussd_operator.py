"""Operator endpoints (debug view, session list), health records and metrics."""

from __future__ import annotations

from datetime import datetime

from tests.conftest import Gateway, GatewayFactory, new_phone, new_session_id
from tests.support.ussd_flows import Journey


async def test_debug_view_shows_the_seed_session_record(gateway: Gateway) -> None:
    session, phone = new_session_id(), new_phone()
    welcome = await gateway.say(session, phone, "")
    response = await gateway.client.get(f"/api/ussd/debug/{session}")
    assert response.status_code == 200
    record = response.json()
    assert record["sessionId"] == session
    info = record["debugInfo"]
    assert info["state"] == "preMenu"
    assert info["status"] == "active"
    context = info["context"]
    assert context["sessionId"] == session
    assert context["phoneNumber"] == phone
    assert context["message"] == welcome.removeprefix("CON ")
    assert context["isAuthenticated"] is False
    assert session in record["activeSessions"]


async def test_debug_view_follows_the_session(gateway: Gateway) -> None:
    journey = Journey(gateway, new_phone())
    await journey.dial()
    await journey.send("1")
    info = (await gateway.client.get(f"/api/ussd/debug/{journey.session_id}")).json()["debugInfo"]
    assert info["state"] == "knowMore"
    assert info["context"]["message"].startswith("Know More")


async def test_debug_view_never_shows_a_pending_pin(gateway: Gateway) -> None:
    journey = Journey(gateway, new_phone())
    await journey.dial()
    for answer in ("2", "2", "Amina Otieno", "58213"):
        await journey.send(answer)
    body = (await gateway.client.get(f"/api/ussd/debug/{journey.session_id}")).text
    assert "58213" not in body
    assert "createPinConfirm" in body


async def test_unknown_session_is_404_json(gateway: Gateway) -> None:
    response = await gateway.client.get("/api/ussd/debug/never-started")
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "session_not_found"
    assert "dial again" in error["message"]
    assert error["details"] == []


async def test_ended_session_is_no_longer_active(gateway: Gateway) -> None:
    journey = Journey(gateway, new_phone())
    await journey.dial()
    await journey.exit()
    assert (await gateway.client.get(f"/api/ussd/debug/{journey.session_id}")).status_code == 404
    listed = (await gateway.client.get("/api/ussd/sessions")).json()["activeSessions"]
    assert journey.session_id not in listed


async def test_session_list_counts_active_sessions(gateway: Gateway) -> None:
    sessions = [new_session_id() for _ in range(3)]
    for session in sessions:
        await gateway.say(session, new_phone(), "")
    body = (await gateway.client.get("/api/ussd/sessions")).json()
    assert set(sessions) <= set(body["activeSessions"])
    assert body["count"] == len(body["activeSessions"])


async def test_without_token_only_loopback_is_served(make_gateway: GatewayFactory) -> None:
    remote = await make_gateway(client_ip="203.0.113.7")
    for path in ("/api/ussd/sessions", "/api/ussd/debug/anything"):
        response = await remote.client.get(path, headers={"X-Forwarded-For": "127.0.0.1"})
        assert response.status_code == 403, path
        assert response.json()["error"]["code"] == "forbidden"
    local_v6 = await make_gateway(client_ip="::1")
    assert (await local_v6.client.get("/api/ussd/sessions")).status_code == 200


async def test_with_token_a_bearer_is_required_from_anywhere(
    make_gateway: GatewayFactory,
) -> None:
    token = "op-7f3c9a1e5b"
    for client_ip in ("127.0.0.1", "203.0.113.7"):
        gateway = await make_gateway(client_ip=client_ip, ussd_operator_token=token)
        missing = await gateway.client.get("/api/ussd/sessions")
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"].startswith("Bearer")
        wrong = await gateway.client.get(
            "/api/ussd/sessions", headers={"Authorization": "Bearer nope"}
        )
        assert wrong.status_code == 401
        ok = await gateway.client.get(
            "/api/ussd/sessions", headers={"Authorization": f"Bearer {token}"}
        )
        assert ok.status_code == 200
        debug = await gateway.client.get(
            "/api/ussd/debug/none", headers={"Authorization": f"bearer {token}"}
        )
        assert debug.status_code == 404


async def test_health_record(gateway: Gateway) -> None:
    response = await gateway.client.get("/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["environment"] == "test"
    assert body["database"] == "connected"
    assert isinstance(body["uptime"], int | float) and body["uptime"] >= 0
    stamp = datetime.fromisoformat(body["timestamp"].replace("Z", "+00:00"))
    assert stamp.utcoffset() is not None and stamp.utcoffset().total_seconds() == 0
    if gateway.settings.storage.redis_url is not None:
        assert body["redis"] == "connected"


async def test_root_record(gateway: Gateway) -> None:
    body = (await gateway.client.get("/")).json()
    assert body["status"] == "ok"
    assert "running" in body["message"]
    assert body["environment"] == "test"
    datetime.fromisoformat(body["timestamp"].replace("Z", "+00:00"))


async def test_metrics_count_replies_by_outcome(gateway: Gateway) -> None:
    session, phone = new_session_id(), new_phone()
    await gateway.say(session, phone, "")
    await gateway.say(session, phone, "")  # a gateway retry
    await gateway.client.post("/api/ussd", json={"sessionId": session})
    text = (await gateway.client.get("/metrics")).text
    assert 'twinhub_ussd_replies_total{outcome="con"} 1.0' in text
    assert 'twinhub_ussd_replies_total{outcome="retry"} 1.0' in text
    assert 'twinhub_ussd_replies_total{outcome="invalid"} 1.0' in text
    assert "twinhub_ussd_sessions_started_total 1.0" in text
    assert "twinhub_ussd_request_seconds_count 3.0" in text


async def test_operator_endpoints_refuse_callers_not_provably_local(
    make_gateway: GatewayFactory,
) -> None:
    """Issue 15.4: behind a proxy (declared, or betrayed by a forwarding header) and in
    production, loopback proves nothing: the operator token is needed."""
    session = new_session_id()
    behind_proxy = await make_gateway(trust_proxy_enabled=True)
    await behind_proxy.say(session, new_phone(), "")
    for path in (f"/api/ussd/debug/{session}", "/api/ussd/sessions"):
        response = await behind_proxy.client.get(path)
        assert response.status_code == 403, response.text
        assert response.json()["error"]["code"] == "forbidden"

    local = await make_gateway()
    await local.say(session, new_phone(), "")
    for header in ("X-Forwarded-For", "Forwarded", "X-Real-IP"):
        response = await local.client.get("/api/ussd/sessions", headers={header: "203.0.113.9"})
        assert response.status_code == 403, (header, response.text)
    assert (await local.client.get("/api/ussd/sessions")).status_code == 200

    production = await make_gateway(environment="production", credential_issuer_key="11" * 32)
    response = await production.client.get("/api/ussd/sessions")
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"].startswith("Bearer")

    token = "operator-" + "x" * 32
    with_token = await make_gateway(trust_proxy_enabled=True, ussd_operator_token=token)
    response = await with_token.client.get(
        "/api/ussd/sessions", headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 200, response.text
