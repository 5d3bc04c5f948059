"""Seed part B under stress: outages of PostgreSQL and Redis, several gateway processes,
concurrent and repeated requests, expiry, and the memory store's bound.

Outages are made with `tests/support/tcp_proxy.py`: the gateway talks to the real server through a
local proxy that the test cuts (listener closed, live connections aborted) and restores on
the same port. The servers themselves are never touched.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from tests.conftest import (
    POSTGRES_URL,
    REDIS_URL,
    Backend,
    Gateway,
    GatewayFactory,
    free_port,
    new_phone,
    new_session_id,
)
from tests.support.tcp_proxy import TcpProxy
from twinhub.ussd.screens import Content

T = TypeVar("T")

WELCOME = "CON Welcome to twinhub\n1. Know More\n2. Account Menu\n3. Language\n*. Exit"
KNOW_MORE = "CON Know More\n1. About\n2. Pricing\n3. Delivery\n0. Back\n*. Exit"
PRICING = "CON " + Content().welcome.pricing
ACCOUNT_MENU = "CON Account Menu\n1. Log In\n2. Create Account\n0. Back\n*. Exit"
UNAVAILABLE = "END Service temporarily unavailable. Please try again later."
EXPIRED = "END Your session has expired. Please dial again."
ENDED = "END This session has ended. Please dial again."
GOODBYE = "END Thank you for using twinhub. Goodbye."
TOO_MANY = "END Too many requests. Please try again later."
NAME, PIN = "Jane Doe", "24680"

SQLITE_MEMORY = Backend("sqlite", "memory")
POSTGRES_REDIS = Backend("postgresql", "redis")
only_postgres_redis = pytest.mark.parametrize("backend", [POSTGRES_REDIS], ids=str, indirect=True)
only_sqlite_memory = pytest.mark.parametrize("backend", [SQLITE_MEMORY], ids=str, indirect=True)


# -- helpers -------------------------------------------------------------------------------


def with_address(url: str, port: int, host: str = "127.0.0.1") -> str:
    """`url` with its host:port replaced, user, password, path and query kept."""
    parts = urlsplit(url)
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@{host}:{port}" if userinfo else f"{host}:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


def address_of(url: str, default_port: int) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or default_port


async def eventually(
    probe: Callable[[], Awaitable[T]],
    ok: Callable[[T], bool],
    within: float = 5.0,
    interval: float = 0.05,
) -> T:
    """Poll `probe` until `ok` holds for its value; fail with the last value at the deadline."""
    deadline = time.monotonic() + within
    while True:
        value = await probe()
        if ok(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached within {within}s; last value: {value!r}")
        await asyncio.sleep(interval)


async def health(gateway: Gateway) -> httpx.Response:
    return await gateway.client.get("/health")


async def active_sessions(gateway: Gateway) -> list[str]:
    response = await gateway.client.get("/api/ussd/sessions")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["count"] == len(body["activeSessions"])
    return body["activeSessions"]


async def debug(gateway: Gateway, session_id: str) -> httpx.Response:
    return await gateway.client.get(f"/api/ussd/debug/{session_id}")


async def state_of(gateway: Gateway, session_id: str) -> str:
    response = await debug(gateway, session_id)
    assert response.status_code == 200, response.text
    return response.json()["debugInfo"]["state"]


def assert_json_error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"code", "message", "details"}
    assert isinstance(error["code"], str) and error["code"]
    assert isinstance(error["message"], str) and error["message"]
    assert error["details"] == []
    return error


def counter(gateway: Gateway, name: str, **labels: str) -> float:
    value = gateway.app.state.metrics.registry.get_sample_value(name, labels or None)
    return value or 0.0


async def create_account(
    gateways: list[Gateway], phone: str, name: str = NAME, pin: str = PIN
) -> str:
    """Walk account creation (each step on the next gateway in turn); the new customer ID."""
    session = new_session_id()
    steps = [
        ("", WELCOME),
        ("2", ACCOUNT_MENU),
        ("2*2", "CON Create Account\nEnter your full name\n0. Back\n*. Exit"),
        (f"2*2*{name}", "CON Choose a 5-digit PIN\n0. Back\n*. Exit"),
        (f"2*2*{name}*{pin}", "CON Enter the same PIN again\n0. Back\n*. Exit"),
    ]
    for index, (text, expected) in enumerate(steps):
        assert await gateways[index % len(gateways)].say(session, phone, text) == expected
    reply = await gateways[len(steps) % len(gateways)].say(
        session, phone, f"2*2*{name}*{pin}*{pin}"
    )
    match = re.fullmatch(
        r"CON Account created\.\nYour customer ID is (\d{8})\. Keep it to log in\."
        r"\n1\. Main Menu\n\*\. Exit",
        reply,
    )
    assert match, reply
    return match.group(1)


def login_texts(customer_id: str, pin: str = PIN) -> list[tuple[str, str]]:
    """The texts of a login by customer ID, each with the reply it must get."""
    return [
        ("", WELCOME),
        ("2", ACCOUNT_MENU),
        (
            "2*1",
            "CON Log In\nEnter your customer ID\n1. Use this phone's account\n0. Back\n*. Exit",
        ),
        (f"2*1*{customer_id}", "CON Enter your 5-digit PIN\n0. Back\n*. Exit"),
        (
            f"2*1*{customer_id}*{pin}",
            f"CON Hello {NAME.split()[0]}\n1. My Account\n2. Change PIN\n3. Log Out\n"
            "4. My Stoves\n5. My Claims\n6. My Credits\n7. Stove Status\n8. Language\n*. Exit",
        ),
    ]


# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture
async def postgres_proxy(postgres_url: str) -> AsyncIterator[TcpProxy]:
    """A cuttable path to the PostgreSQL server (request it before make_gateway; it asks for
    postgres_url only to skip, like that fixture, when the server is missing)."""
    async with TcpProxy(*address_of(POSTGRES_URL, 5432)) as proxy:
        yield proxy


@pytest.fixture
async def redis_proxy(redis_prefix: str) -> AsyncIterator[TcpProxy]:
    """A cuttable path to the Redis server (request it before make_gateway; redis_prefix makes
    it skip, like that fixture, when the server is missing)."""
    async with TcpProxy(*address_of(REDIS_URL, 6379)) as proxy:
        yield proxy


async def gateway_through(
    make_gateway: GatewayFactory, postgres_url: str, proxy: TcpProxy, **overrides: Any
) -> Gateway:
    return await make_gateway(
        database_url=with_address(postgres_url, proxy.port),
        database_connect_timeout_seconds=1,
        database_health_interval_seconds=0.2,
        **overrides,
    )


# -- 0. the proxy itself -------------------------------------------------------------------


async def test_proxy_forwards_refuses_when_cut_and_returns_on_same_port(
    redis_proxy: TcpProxy,
) -> None:
    async def ping() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", redis_proxy.port)
        try:
            writer.write(b"PING\r\n")
            await writer.drain()
            return await asyncio.wait_for(reader.readline(), 2)
        finally:
            writer.close()

    port = redis_proxy.port
    assert port > 0
    assert await ping() == b"+PONG\r\n"
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    await redis_proxy.cut()
    assert await asyncio.wait_for(reader.read(), 2) == b""  # live connection dropped
    writer.close()
    with pytest.raises(ConnectionRefusedError):
        await ping()
    await redis_proxy.restore()
    assert redis_proxy.port == port
    assert await ping() == b"+PONG\r\n"


# -- 1. PostgreSQL outage and recovery ------------------------------------------------------


@only_postgres_redis
async def test_database_outage_answers_unavailable_and_recovers_by_itself(
    postgres_proxy: TcpProxy, make_gateway: GatewayFactory, postgres_url: str
) -> None:
    gateway = await gateway_through(make_gateway, postgres_url, postgres_proxy)
    response = await health(gateway)
    assert response.status_code == 200, response.text
    assert response.json()["database"] == "connected"
    assert response.json()["status"] == "ok"

    session, phone = new_session_id(), new_phone()
    assert await gateway.say(session, phone, "") == WELCOME
    assert await gateway.say(session, phone, "1") == KNOW_MORE

    await postgres_proxy.cut()
    response = await health(gateway)
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["database"] == "disconnected"
    assert body["status"] != "ok"
    assert body["redis"] == "connected"

    fresh = new_session_id()
    assert await gateway.say(fresh, new_phone(), "") == UNAVAILABLE
    assert await gateway.say(session, phone, "1*2") == UNAVAILABLE
    # The failed step changed nothing: the session still sits on Know More.
    assert await state_of(gateway, session) == "knowMore"
    assert counter(gateway, "twinhub_ussd_replies_total", outcome="unavailable") == 2

    await postgres_proxy.restore()
    # No /health call here: the background probe alone must bring the gateway back.
    await eventually(lambda: gateway.say(fresh, new_phone(), ""), lambda r: r == WELCOME)
    assert await gateway.say(session, phone, "1*2") == PRICING
    assert await gateway.say(session, phone, "1*2*0") == KNOW_MORE
    response = await health(gateway)
    assert response.status_code == 200, response.text
    assert response.json()["database"] == "connected"
    assert response.json()["status"] == "ok"


@only_postgres_redis
async def test_database_outage_during_login_and_account_creation(
    postgres_proxy: TcpProxy, make_gateway: GatewayFactory, postgres_url: str
) -> None:
    gateway = await gateway_through(make_gateway, postgres_url, postgres_proxy)
    customer_id = await create_account([gateway], new_phone())

    # A login stopped just before the PIN check (a typed customer ID is not looked up: see
    # CustomerService.login), a creation before the insert.
    login, login_phone = new_session_id(), new_phone()
    steps = login_texts(customer_id)
    for text, expected in steps[:4]:
        assert await gateway.say(login, login_phone, text) == expected
    creation, creation_phone = new_session_id(), new_phone()
    for text in ("", "2", "2*2", f"2*2*{NAME}", f"2*2*{NAME}*{PIN}"):
        await gateway.say(creation, creation_phone, text)

    await postgres_proxy.cut()  # no /health first: the request itself meets the outage
    pin_text, pin_reply = steps[4]
    assert await gateway.say(login, login_phone, pin_text) == UNAVAILABLE
    confirm = f"2*2*{NAME}*{PIN}*{PIN}"
    assert await gateway.say(creation, creation_phone, confirm) == UNAVAILABLE
    assert not gateway.app.state.platform.database.healthy
    assert await state_of(gateway, login) == "loginPin"
    assert await state_of(gateway, creation) == "createPinConfirm"

    await postgres_proxy.restore()
    await eventually(lambda: gateway.say(login, login_phone, pin_text), lambda r: r == pin_reply)
    created = await gateway.say(creation, creation_phone, confirm)
    assert created.startswith("CON Account created.\nYour customer ID is "), created


# -- 2. two gateway processes sharing one Redis --------------------------------------------


async def two_instances(make_gateway: GatewayFactory, **overrides: Any) -> tuple[Gateway, Gateway]:
    """Two apps of one deployment: same Redis prefix, same PIN key, same database."""
    first = await make_gateway(**overrides)
    assert first.settings.security.pin_encryption_key is not None
    shared = {
        "redis_key_prefix": first.settings.storage.redis_key_prefix,
        "pin_encryption_key": first.settings.security.pin_encryption_key.get_secret_value(),
        **overrides,
    }
    second = await make_gateway(**shared)
    assert second.settings.storage.database_url == first.settings.storage.database_url
    return first, second


@only_postgres_redis
async def test_session_continues_on_another_instance(make_gateway: GatewayFactory) -> None:
    a, b = await two_instances(make_gateway)
    session, phone = new_session_id(), new_phone()
    assert await a.say(session, phone, "") == WELCOME
    assert await b.say(session, phone, "1") == KNOW_MORE
    assert await a.say(session, phone, "1*2") == PRICING
    assert await b.say(session, phone, "1*2") == PRICING  # a retry answered by the other one
    assert session in await active_sessions(a)
    assert session in await active_sessions(b)
    assert await state_of(b, session) == "pricing"
    assert await b.say(session, phone, "1*2**") == GOODBYE
    assert await a.say(session, phone, "1*2**") == GOODBYE
    assert await a.say(session, phone, "1*2**1") == ENDED
    assert session not in await active_sessions(a)


@only_postgres_redis
async def test_account_created_through_one_instance_logs_in_through_the_other(
    make_gateway: GatewayFactory,
) -> None:
    a, b = await two_instances(make_gateway)
    # The creation itself alternates between instances: the pending PIN, encrypted in the
    # shared session record, must be readable by both.
    customer_id = await create_account([a, b], new_phone())
    session, phone = new_session_id(), new_phone()
    for text, expected in login_texts(customer_id):
        assert await b.say(session, phone, text) == expected


@only_postgres_redis
async def test_rate_limit_counters_are_shared_between_instances(
    make_gateway: GatewayFactory,
) -> None:
    a, b = await two_instances(make_gateway, ussd_rate_limit="5/minute")
    statuses = []
    for instance in (a, a, a, b, b):
        response = await instance.dial(new_session_id(), new_phone())
        statuses.append(response.status_code)
    assert statuses == [200] * 5
    sixth = await b.dial(new_session_id(), new_phone())
    assert sixth.status_code == 429, sixth.text
    assert sixth.text == TOO_MANY
    retry_after = sixth.headers["Retry-After"]
    assert retry_after.isdigit() and int(retry_after) >= 1, retry_after
    assert (await a.dial(new_session_id(), new_phone())).status_code == 429
    # The counter is per client address: another client of the same deployment is served.
    other = await make_gateway(
        client_ip="192.0.2.7",
        ussd_rate_limit="5/minute",
        redis_key_prefix=a.settings.storage.redis_key_prefix,
    )
    assert (await other.dial(new_session_id(), new_phone())).status_code == 200


# -- 3. concurrency and retries ------------------------------------------------------------


async def test_identical_concurrent_requests_are_applied_once(
    make_gateway: GatewayFactory,
) -> None:
    gateway = await make_gateway()
    session, phone = new_session_id(), new_phone()
    replies = await asyncio.gather(*(gateway.say(session, phone, "") for _ in range(5)))
    assert replies == [WELCOME] * 5
    assert counter(gateway, "twinhub_ussd_sessions_started_total") == 1
    replies = await asyncio.gather(*(gateway.say(session, phone, "1") for _ in range(6)))
    assert replies == [KNOW_MORE] * 6
    assert counter(gateway, "twinhub_ussd_replies_total", outcome="retry") == 4 + 5
    assert await gateway.say(session, phone, "1*2") == PRICING
    assert await state_of(gateway, session) == "pricing"


async def test_concurrent_steps_of_one_session_are_serialised(
    make_gateway: GatewayFactory,
) -> None:
    gateway = await make_gateway()
    sessions = [(new_session_id(), new_phone()) for _ in range(8)]
    for session, phone in sessions:
        assert await gateway.say(session, phone, "") == WELCOME

    async def race(session: str, phone: str) -> tuple[str, str]:
        first, second = await asyncio.gather(
            gateway.say(session, phone, "1"), gateway.say(session, phone, "1*2")
        )
        return first, second

    results = await asyncio.gather(*(race(s, p) for s, p in sessions))
    # Either order is a correct serial history; an interleaving would lose one update.
    one_then_two = (KNOW_MORE, PRICING)
    two_then_one = ("CON Invalid choice.\n" + PRICING[4:], PRICING)
    for (session, _), result in zip(sessions, results, strict=True):
        assert result in (one_then_two, two_then_one), result
        assert await state_of(gateway, session) == "pricing"


async def test_a_request_waits_for_the_session_lock(make_gateway: GatewayFactory) -> None:
    gateway = await make_gateway()
    store = gateway.app.state.engine.store
    session, phone = new_session_id(), new_phone()
    assert await gateway.say(session, phone, "") == WELCOME
    async with store.lock(session):
        waiting = asyncio.ensure_future(gateway.say(session, phone, "1"))
        await asyncio.sleep(0.3)
        assert not waiting.done(), "the request ran while another held its session"
    assert await asyncio.wait_for(waiting, 5) == KNOW_MORE


async def test_a_request_held_past_the_lock_timeout_is_unavailable_and_changes_nothing(
    make_gateway: GatewayFactory,
) -> None:
    gateway = await make_gateway(ussd_lock_timeout_seconds=0.3)
    store = gateway.app.state.engine.store
    session, phone = new_session_id(), new_phone()
    assert await gateway.say(session, phone, "") == WELCOME
    async with store.lock(session):
        assert await gateway.say(session, phone, "1") == UNAVAILABLE
    assert await gateway.say(session, phone, "1") == KNOW_MORE


async def test_many_concurrent_sessions_each_get_their_own_replies(
    make_gateway: GatewayFactory,
) -> None:
    gateway = await make_gateway(ussd_rate_limit="1000/minute")
    titles = {"1": "About", "2": "Pricing", "3": "Delivery"}

    async def walk(index: int) -> None:
        session, phone = new_session_id(), new_phone()
        choice = str(index % 3 + 1)
        assert await gateway.say(session, phone, "") == WELCOME
        assert await gateway.say(session, phone, "1") == KNOW_MORE
        reply = await gateway.say(session, phone, f"1*{choice}")
        assert reply.startswith(f"CON {titles[choice]}\n"), (index, reply)
        assert await state_of(gateway, session) == titles[choice].lower()

    await asyncio.gather(*(walk(index) for index in range(40)))


async def test_retries_get_the_same_reply_even_after_the_end(gateway: Gateway) -> None:
    session, phone = new_session_id(), new_phone()
    assert await gateway.say(session, phone, "") == WELCOME
    assert await gateway.say(session, phone, "7") == "CON Invalid choice.\n" + WELCOME[4:]
    assert await gateway.say(session, phone, "7") == "CON Invalid choice.\n" + WELCOME[4:]
    assert await gateway.say(session, phone, "7*1") == KNOW_MORE
    assert await gateway.say(session, phone, "7*1") == KNOW_MORE
    assert await state_of(gateway, session) == "knowMore"
    assert await gateway.say(session, phone, "7*1**") == GOODBYE
    retries = await asyncio.gather(*(gateway.say(session, phone, "7*1**") for _ in range(3)))
    assert retries == [GOODBYE] * 3
    for later in ("7*1**1", "7*1", "", "1"):
        assert await gateway.say(session, phone, later) == ENDED, later
    assert await gateway.say(session, phone, "7*1**") == GOODBYE
    assert_json_error(await debug(gateway, session), 404)
    assert session not in await active_sessions(gateway)


async def test_plain_exit_retry_after_dial(gateway: Gateway) -> None:
    session, phone = new_session_id(), new_phone()
    assert await gateway.say(session, phone, "") == WELCOME
    assert await gateway.say(session, phone, "*") == GOODBYE
    assert await gateway.say(session, phone, "*") == GOODBYE
    assert await gateway.say(session, phone, "*1") == ENDED


# -- 4. session expiry ---------------------------------------------------------------------


async def test_session_expires_after_inactivity(make_gateway: GatewayFactory) -> None:
    ttl = 0.5
    gateway = await make_gateway(ussd_session_ttl_seconds=ttl)
    session, phone = new_session_id(), new_phone()
    started = time.time()
    assert await gateway.say(session, phone, "") == WELCOME
    assert session in await active_sessions(gateway)

    response = await eventually(
        lambda: debug(gateway, session), lambda r: r.status_code != 200, within=3
    )
    assert time.time() - started > ttl
    error = assert_json_error(response, 404)
    assert error["code"] == "session_not_found"
    assert session not in await active_sessions(gateway)

    assert await gateway.say(session, phone, "1") == EXPIRED
    assert await gateway.say(session, phone, "1") == EXPIRED
    assert await gateway.say(session, phone, "1*2") == EXPIRED
    assert_json_error(await debug(gateway, session), 404)

    fresh = new_session_id()
    assert await gateway.say(fresh, phone, "") == WELCOME
    assert await gateway.say(fresh, phone, "1") == KNOW_MORE
    assert await active_sessions(gateway) == [fresh]


async def test_a_late_retry_of_an_expired_session_asks_to_dial_again(
    make_gateway: GatewayFactory,
) -> None:
    """A gateway retry that arrives after the TTL meets an expired session: the stored CON
    menu must not be shown again, since any answer to it would only get "expired"."""
    gateway = await make_gateway(ussd_session_ttl_seconds=0.5)
    session, phone = new_session_id(), new_phone()
    assert await gateway.say(session, phone, "") == WELCOME
    assert await gateway.say(session, phone, "1") == KNOW_MORE
    await eventually(lambda: debug(gateway, session), lambda r: r.status_code == 404, within=3)
    assert await gateway.say(session, phone, "1") == EXPIRED


async def test_activity_keeps_a_session_alive_past_its_ttl(make_gateway: GatewayFactory) -> None:
    ttl = 1.0
    gateway = await make_gateway(ussd_session_ttl_seconds=ttl)
    session, phone = new_session_id(), new_phone()
    started = time.monotonic()
    assert await gateway.say(session, phone, "") == WELCOME
    text = ""
    for step in range(5):  # a step every 0.3 s: 1.5 s in all, no gap longer than the ttl
        await asyncio.sleep(0.3)
        answer = "1" if step % 2 == 0 else "0"  # Know More, then back, and so on
        text = f"{text}*{answer}" if text else answer
        expected = KNOW_MORE if step % 2 == 0 else WELCOME
        assert await gateway.say(session, phone, text) == expected, (step, text)
    assert time.monotonic() - started > ttl
    assert session in await active_sessions(gateway)


# -- 5. the memory store stays bounded -----------------------------------------------------


@only_sqlite_memory
async def test_memory_store_keeps_at_most_max_sessions(make_gateway: GatewayFactory) -> None:
    cap = 50
    gateway = await make_gateway(ussd_max_sessions=cap, ussd_rate_limit="10000/minute")
    store = gateway.app.state.engine.store
    sessions = [(new_session_id(), new_phone()) for _ in range(500)]
    for batch in range(0, len(sessions), 50):
        chunk = sessions[batch : batch + 50]
        replies = await asyncio.gather(*(gateway.say(s, p, "") for s, p in chunk))
        assert replies == [WELCOME] * len(chunk)
        assert len(store) <= cap
    assert len(store) == cap
    assert len(await active_sessions(gateway)) == cap
    newest = sessions[-cap:]
    replies = await asyncio.gather(*(gateway.say(s, p, "1") for s, p in newest))
    assert replies == [KNOW_MORE] * cap
    for session, _ in newest[-5:]:
        assert await state_of(gateway, session) == "knowMore"
    assert len(store) == cap
    # Per-session locks are dropped once nobody holds them: they must not pile up either.
    assert len(store._locks) == 0


# -- 6. Redis outage -----------------------------------------------------------------------


@only_postgres_redis
async def test_unreachable_redis_answers_unavailable(make_gateway: GatewayFactory) -> None:
    gateway = await make_gateway(
        redis_url=f"redis://127.0.0.1:{free_port()}/0", database_connect_timeout_seconds=1
    )
    started = time.monotonic()
    response = await gateway.dial(new_session_id(), new_phone())
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == UNAVAILABLE
    response = await health(gateway)
    assert response.status_code == 503, response.text
    assert response.json()["redis"] == "disconnected"
    assert response.json()["database"] == "connected"
    assert response.json()["status"] != "ok"
    error = assert_json_error(await gateway.client.get("/api/ussd/sessions"), 503)
    assert error["code"] == "unavailable"
    assert_json_error(await debug(gateway, new_session_id()), 503)
    assert time.monotonic() - started < 10


@only_postgres_redis
async def test_redis_outage_and_recovery(
    redis_proxy: TcpProxy, make_gateway: GatewayFactory
) -> None:
    gateway = await make_gateway(
        redis_url=with_address(REDIS_URL, redis_proxy.port), database_connect_timeout_seconds=1
    )
    session, phone = new_session_id(), new_phone()
    assert await gateway.say(session, phone, "") == WELCOME
    assert await gateway.say(session, phone, "1") == KNOW_MORE
    assert (await health(gateway)).status_code == 200

    await redis_proxy.cut()
    assert await gateway.say(session, phone, "1*2") == UNAVAILABLE
    assert await gateway.say(new_session_id(), new_phone(), "") == UNAVAILABLE
    response = await health(gateway)
    assert response.status_code == 503, response.text
    assert response.json()["redis"] == "disconnected"
    assert response.json()["database"] == "connected"
    assert_json_error(await gateway.client.get("/api/ussd/sessions"), 503)

    await redis_proxy.restore()
    await eventually(lambda: gateway.say(session, phone, "1*2"), lambda r: r == PRICING)
    assert await gateway.say(session, phone, "1*2*0") == KNOW_MORE
    response = await health(gateway)
    assert response.status_code == 200, response.text
    assert response.json()["redis"] == "connected"
    assert session in await active_sessions(gateway)
