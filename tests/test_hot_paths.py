"""The hot request paths of issue #14's ceiling ratios keep their contracts: the registry's
`GET /v1/domains/{did}` read through the read model answers exactly what the domain service
builds, the USSD form parser reads exactly what `parse_qsl` reads, the in-process rate
counter follows the sliding-window arithmetic of the `limits` library it stands in for, the
menu's steps without awaiting answer and change exactly what the awaited ones do, the
session digest is HMAC-SHA256, session records read back as the dataclass would build them,
and the USSD metrics counted in bulk read as Prometheus's own would."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from typing import Any
from urllib.parse import parse_qsl

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from limits import parse
from starlette.requests import Request
from starlette.responses import Response

from tests.conftest import (
    BOOTSTRAP_KEY,
    Backend,
    Gateway,
    Registry,
    fresh_postgres_database,
    running_registry,
)
from twinhub.registry.app import RegistryMetrics
from twinhub.registry.auth import bearer, bearer_of
from twinhub.registry.routes import (
    DID_PATH,
    GENERAL,
    CreateRoute,
    HotRoute,
    RecordResponse,
)
from twinhub.security.pins import PinCipher
from twinhub.settings import Settings
from twinhub.ussd.menu import Menu, State
from twinhub.ussd.metrics import UssdMetrics
from twinhub.ussd.request import InvalidRequest, _form_fields
from twinhub.ussd.sessions import ENDED, Session
from twinhub.web.ratelimit import MemoryCounter


def samples(metrics: Any) -> list[tuple[str, list[tuple[str, str]], float]]:
    """Every sample a metrics object's registry exposes (creation stamps aside), sorted."""
    return sorted(
        (sample.name, sorted(sample.labels.items()), sample.value)
        for family in metrics.registry.collect()
        for sample in family.samples
        if not sample.name.endswith("_created")
    )


async def test_get_domain_answers_the_services_record_and_sees_every_write(
    registry: Registry,
) -> None:
    async def create(**fields: object) -> dict:
        body = {"type": "Organisation", "class": "did:ixo:protocol/organisation", **fields}
        response = await registry.client.post("/v1/domains", json=body)
        assert response.status_code == 201, response.text
        return response.json()

    protocol = await registry.client.get("/v1/protocols/did:ixo:protocol/organisation")
    role, kind = sorted(protocol.json()["effective"]["relationships"].items())[0]
    target = await create(
        type=kind, metadata={"name": "Target"}, **{"class": f"did:ixo:protocol/{kind.lower()}"}
    )
    source = await create(metadata={"name": "Source Co-op"})
    related = await registry.client.post(
        f"/v1/domains/{source['did']}/relationships", json={"type": role, "target": target["did"]}
    )
    assert related.status_code == 200, related.text
    response = await registry.client.get(f"/v1/domains/{source['did']}")
    assert response.status_code == 200
    assert response.json() == await registry.platform.domains.get(source["did"])
    assert response.headers["etag"] == f'"{response.json()["version"]}"'
    assert {"type": role, "target": target["did"]} in response.json()["relationships"]
    if registry.settings.resolved_database_url.startswith("sqlite"):
        assert registry.app.state.reads.fast  # the read model answered, not the service

    patched = await registry.client.patch(
        f"/v1/domains/{source['did']}", json={"metadata": {"name": "Renamed Co-op"}}
    )
    assert patched.status_code == 200, patched.text
    again = (await registry.client.get(f"/v1/domains/{source['did']}")).json()
    assert again["metadata"]["name"] == "Renamed Co-op"  # the write is read back at once
    assert again["version"] == patched.json()["version"]

    # Without a query string the plain endpoint answers (counted under the route's usual
    # label); ?version= goes on to FastAPI's route, which validates it.
    assert isinstance(registry.app.router.routes[0], HotRoute)
    labels = {"method": "GET", "route": f"/v1/domains/{DID_PATH}", "status": "200"}
    metrics = registry.app.state.metrics.registry
    counted = metrics.get_sample_value("twinhub_registry_requests_total", labels) or 0
    assert (await registry.client.get(f"/v1/domains/{source['did']}")).json() == again
    assert metrics.get_sample_value("twinhub_registry_requests_total", labels) == counted + 1
    url = f"/v1/domains/{source['did']}"
    first = (await registry.client.get(url, params={"version": 1})).json()
    assert first["version"] == 1 and first["metadata"]["name"] == "Source Co-op"
    invalid = await registry.client.get(url, params={"version": 0})
    assert invalid.status_code == 422 and invalid.json()["error"]["code"] == "validation_failed"

    unknown = await registry.client.get("/v1/domains/did:ixo:entity/nobody-here")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"
    assert (await registry.client.get("/v1/domains/not-a-did")).status_code == 404
    async with registry.as_key(None) as anonymous:
        refused = await anonymous.get(f"/v1/domains/{source['did']}")
        assert refused.status_code == 401
    async with registry.as_key("thk_nokey_nosecret") as stranger:
        assert (await stranger.get(f"/v1/domains/{source['did']}")).status_code == 401
    document = (await registry.client.get("/openapi.json")).json()
    assert document["paths"]["/v1/domains/{did}"]["get"]["security"] == [{"HTTPBearer": []}]


def _reference_form(body: bytes) -> dict[str, str] | None:
    try:
        text = body.decode("utf-8")
        pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=bool(body))
    except (UnicodeDecodeError, ValueError):
        return None
    fields: dict[str, str] = {}
    for name, value in pairs:
        if name in fields:
            return None
        fields[name] = value
    return fields


PIECES = st.sampled_from([*"ab=&%+*#0;é", "%2A", "%2B", "%zz", "%C3%A9", "%FF", "&&", "=="])


@settings(max_examples=3000, deadline=None)
@given(st.lists(PIECES, max_size=14).map("".join).map(str.encode) | st.binary(max_size=12))
def test_the_form_parser_reads_what_parse_qsl_reads(body: bytes) -> None:
    try:
        mine: dict[str, str] | None = _form_fields(body)
    except InvalidRequest:
        mine = None
    assert mine == _reference_form(body)


def test_the_memory_counter_is_a_sliding_window() -> None:
    now = [1000.0]  # 40 s into a minute window
    counter = MemoryCounter(parse("3/minute"), clock=lambda: now[0])
    assert [counter.hit("a") for _ in range(3)] == [None, None, None]
    assert counter.hit("a") == 20  # until the window ends, where its 3 weigh 3 (then less)
    assert counter.hit("b") is None  # each client has its own budget
    now[0] = 1061.0  # 41 s into the next window: the previous 3 weigh 3 * 19/60 = 0.95
    assert [counter.hit("a") for _ in range(3)] == [None, None, None]
    assert counter.hit("a") == 19
    now[0] = 1300.0  # two windows idle: forgotten, a full budget again
    assert [counter.hit("a") for _ in range(3)] == [None, None, None]
    assert len(counter._windows) == 1  # "b" was swept


ANSWERS = ["", "1", "2", "3", "4", "9", "0", "*", " 1 ", "12345", "x"]


def _session(state: str, language: str, **fields: object) -> Session:
    return Session(
        session_id="s-1",
        phone_number="+254700000001",
        service_code="*384*1#",
        state=state,
        language=language,
        scratch={"page": "1"},
        **fields,  # type: ignore[arg-type]
    )


async def test_menu_steps_without_awaiting_do_what_the_awaited_steps_do(
    gateway: Gateway,
) -> None:
    """Every state, signed in or not, in two languages, under a set of answers: where
    `answer_now` answers, `answer` gives the same reply and leaves the same session; where
    it declines (None), it changed nothing. The seed's menu walk is answered without
    awaiting, and so is a new session's welcome once the phone's language is cached."""
    menu: Menu = gateway.app.state.engine._menu
    answered = set()
    for state in State:
        for language in ("en", "sw"):
            for customer in (None, "CUST0001"):
                for answer in ANSWERS:
                    fast = _session(state.value, language, customer_id=customer)
                    slow = _session(state.value, language, customer_id=customer)
                    reply = menu.answer_now(fast, answer)
                    if reply is None:
                        assert fast == slow, (state, answer)
                        continue
                    answered.add((state, answer))
                    assert await menu.answer(slow, answer) == reply, (state, answer)
                    assert fast == slow, (state, answer)
    for state, answer in [
        (State.pre_menu, "1"),
        (State.know_more, "2"),
        (State.pricing, "0"),
        (State.about, "4"),
        (State.pre_menu, "*"),
    ]:
        assert (state, answer) in answered

    fresh = _session(State.pre_menu.value, "")
    if gateway.settings.redis_url is None:
        assert menu.start_now(fresh) is None  # the phone's language is not cached yet
        assert fresh == _session(State.pre_menu.value, "")
    started = _session(State.pre_menu.value, "")
    reply = await menu.start(started)  # caches the phone's language
    again = _session(State.pre_menu.value, "")
    now = menu.start_now(again)
    if gateway.settings.redis_url is None:
        assert now == reply
        assert again == started
    else:
        assert now is None  # Redis's cache is always awaited


def test_the_session_digest_is_hmac_sha256_under_the_derived_key() -> None:
    key = bytes(range(32))
    cipher = PinCipher(key)
    derived = hmac.digest(key, b"twinhub digest v1", hashlib.sha256)
    for text, context in [("", "s"), ("1*2*0", "ATUid_1"), ("é" * 90, "x" * 100)]:
        expected = hmac.new(derived, f"{context}\x00{text}".encode(), hashlib.sha256)
        assert cipher.digest(text, context) == expected.digest()[:16].hex()


def test_session_records_read_back_as_the_dataclass_builds_them() -> None:
    session = _session("knowMore", "sw", last_text_digest="ab" * 16, last_text_length=3)
    session.status = ENDED
    blob = session.dumps()
    assert Session.loads(blob) == session
    assert Session.loads(blob).dumps() == blob  # and are written back byte for byte
    old = orjson.loads(blob)
    del old["language"], old["scratch"]  # a record from before those fields
    old["last_text"] = "1*2"  # and from before texts were digested
    loaded = Session.loads(orjson.dumps(old))
    expected = _session("knowMore", "", last_text_digest="ab" * 16, last_text_length=3)
    expected.status, expected.scratch = ENDED, {}
    assert loaded == expected


def test_ussd_metrics_counted_in_bulk_read_as_prometheus_counts_them() -> None:
    ours, reference = UssdMetrics(), UssdMetrics()
    steps = [("con", 0.0003), ("con", 0.0005), ("end", 0.004), ("retry", 7.0), ("con", 0.001)]
    for outcome, seconds in steps:
        ours.reply(outcome, seconds)
        reference.replies.labels(outcome).inc()
        reference.latency.observe(seconds)
    ours.session_started()
    reference.sessions_started.inc()
    ours.replies.labels("rate_limited").inc()  # the 429 path counts directly
    reference.replies.labels("rate_limited").inc()

    assert samples(ours) == samples(reference)
    ours.reply("con", 0.0002)  # and what comes after a collection is counted too
    reference.replies.labels("con").inc()
    reference.latency.observe(0.0002)
    assert samples(ours) == samples(reference)


async def test_the_registry_hot_lane_answers_what_the_whole_stack_answers(
    registry: Registry,
) -> None:
    """`GET /v1/domains/{did}` through RegistryApp's lane and through the whole stack (the
    lane switched off): the same status, headers and body for a record, an unknown DID, a
    path that is no DID, no key, an unknown key, a sub-resource, and a database known to
    be down; and the same metrics label."""
    created = await registry.client.post(
        "/v1/domains",
        json={"type": "Organisation", "class": "did:ixo:protocol/organisation"},
    )
    did = created.json()["did"]
    app = registry.app
    lane = app.hot_route
    assert lane is not None

    async def both(client: Any, path: str) -> list[tuple[int, list[tuple[str, str]], bytes]]:
        answers = []
        for route in (lane, None):
            app.hot_route = route
            try:
                response = await client.get(path)
            finally:
                app.hot_route = lane
            answers.append(
                (response.status_code, sorted(response.headers.items()), response.content)
            )
        return answers

    paths = [
        f"/v1/domains/{did}",
        "/v1/domains/did:ixo:entity/nobody-here",
        "/v1/domains/not-a-did",
        f"/v1/domains/{did}/relationships",
    ]
    for path in paths:
        fast, whole = await both(registry.client, path)
        assert fast == whole, path
    assert (await both(registry.client, paths[0]))[0][0] == 200
    assert app._hot_lane is not None  # the lane did answer
    async with registry.as_key(None) as anonymous:
        fast, whole = await both(anonymous, paths[0])
        assert fast == whole and fast[0] == 401
    async with registry.as_key("thk_nokey_nosecret") as stranger:
        fast, whole = await both(stranger, paths[0])
        assert fast == whole and fast[0] == 401
    labels = {"method": "GET", "route": f"/v1/domains/{DID_PATH}", "status": "200"}
    metrics = app.state.metrics.registry
    before = metrics.get_sample_value("twinhub_registry_requests_total", labels) or 0
    await both(registry.client, paths[0])
    assert metrics.get_sample_value("twinhub_registry_requests_total", labels) == before + 2
    database = registry.platform.database
    database.healthy = False
    try:
        fast, whole = await both(registry.client, paths[0])
    finally:
        database.healthy = True
    assert fast == whole and fast[0] == 503


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Bearer abc",
        "bearer abc",
        "BEARER  abc def",
        "Basic abc",
        "Token x",
        " Bearer abc",
    ],
)
async def test_the_hot_reads_bearer_reads_what_fastapis_reads(authorization: str | None) -> None:
    headers = [] if authorization is None else [(b"authorization", authorization.encode())]
    request = Request({"type": "http", "method": "GET", "path": "/", "headers": headers})
    assert bearer_of(request) == await bearer(request)


@pytest.mark.parametrize("status", [200, 201])
def test_record_responses_are_the_responses_starlette_builds(status: int) -> None:
    record = {"did": "did:ixo:entity/x", "version": 7, "metadata": {"name": "é"}}
    ours = RecordResponse(record, status)
    theirs = Response(
        orjson.dumps(record), status, headers={"ETag": '"7"'}, media_type="application/json"
    )
    assert (ours.status_code, ours.raw_headers, ours.body, ours.background) == (
        theirs.status_code,
        theirs.raw_headers,
        theirs.body,
        theirs.background,
    )


def test_registry_metrics_counted_in_bulk_read_as_prometheus_counts_them() -> None:
    ours, reference = RegistryMetrics(), RegistryMetrics()
    for route, status, seconds in [("/a", "200", 0.0004), ("/a", "200", 0.02), ("/b", "404", 9.0)]:
        children = (ours.requests.labels("GET", route, status), ours.latency.labels("GET", route))
        ours.observe(children, seconds)
        reference.requests.labels("GET", route, status).inc()
        reference.latency.labels("GET", route).observe(seconds)

    assert samples(ours) == samples(reference)
    assert samples(ours) == samples(reference)  # a second collection adds nothing


# Requests for the create lane's test: (label, body with TOKEN where a run puts its own
# four letters, content type or None, credentials: "admin", "reader", "none", "stranger").
CREATE_CASES: list[tuple[str, str, str | None, str]] = [
    (
        "device",
        '{"type": "Device", "class": "did:ixo:protocol/clean-cooking", "id": "dev-TOKEN",'
        ' "metadata": {"name": "Stove TOKEN"},'
        ' "properties": {"serialNumber": "S-TOKEN", "fuelType": "lpg"}}',
        "application/json",
        "admin",
    ),
    (
        "the same serial again",
        '{"type": "Device", "class": "did:ixo:protocol/clean-cooking",'
        ' "properties": {"serialNumber": "S-TOKEN", "fuelType": "lpg"}}',
        "application/json",
        "admin",
    ),
    (
        "the same id again",
        '{"type": "Device", "class": "did:ixo:protocol/clean-cooking", "id": "dev-TOKEN"}',
        "application/json",
        "admin",
    ),
    (
        "organisation",
        '{"type": "Organisation", "protocol": "did:ixo:protocol/organisation", "id": "org-TOKEN",'
        ' "controller": "did:ixo:org/TOKEN", "validFrom": "2026-01-01T00:00:00",'
        ' "services": [{"id": "#api", "type": "Api", "endpoint": "https://x.example/TOKEN"}]}',
        "application/json",
        "admin",
    ),
    (
        "unknown protocol",
        '{"type": "Device", "class": "did:ixo:protocol/none-TOKEN"}',
        "application/json",
        "admin",
    ),
    ("no class", '{"type": "Device"}', "application/json", "admin"),
    (
        "class and protocol differ",
        '{"type": "Device", "class": "did:ixo:protocol/a", "protocol": "did:ixo:protocol/b"}',
        "application/json",
        "admin",
    ),
    (
        "unknown field",
        '{"type": "Device", "class": "did:ixo:protocol/clean-cooking", "colour": "TOKEN"}',
        "application/json",
        "admin",
    ),
    (
        "wrong type",
        '{"type": 7, "class": "did:ixo:protocol/clean-cooking"}',
        "application/json",
        "admin",
    ),
    (
        "NaN",
        '{"type": "Device", "class": "did:ixo:protocol/clean-cooking",'
        ' "properties": {"fuelType": NaN}}',
        "application/json",
        "admin",
    ),
    ("broken JSON", '{"type": "Device", "class": ', "application/json", "admin"),
    ("a list", "[]", "application/json", "admin"),
    ("null", "null", "application/json", "admin"),
    ("empty", "", "application/json", "admin"),
    (
        "text",
        '{"type": "Device", "class": "did:ixo:protocol/clean-cooking"}',
        "text/plain",
        "admin",
    ),
    (
        "charset",
        '{"type": "Device", "class": "did:ixo:protocol/clean-cooking", "id": "cs-TOKEN"}',
        "application/json; charset=utf-8",
        "admin",
    ),
    (
        "no content type",
        '{"type": "Device", "class": "did:ixo:protocol/clean-cooking"}',
        None,
        "admin",
    ),
    (
        "no key",
        '{"type": "Device", "class": "did:ixo:protocol/clean-cooking"}',
        "application/json",
        "none",
    ),
    ("no key, broken JSON", "{", "application/json", "none"),
    (
        "unknown key",
        '{"type": "Device", "class": "did:ixo:protocol/clean-cooking"}',
        "application/json",
        "stranger",
    ),
    (
        "reader",
        '{"type": "Device", "class": "did:ixo:protocol/clean-cooking"}',
        "application/json",
        "reader",
    ),
    ("reader, unknown field", '{"type": "Device", "colour": 1}', "application/json", "reader"),
]
TIMESTAMP = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:\+00:00|Z)?")
RANDOM_DID = re.compile(rb"did:ixo:entity/[a-z0-9]{16}")


def same_clock(data: bytes, token: str) -> bytes:
    """`data` with the run's token, its times and its minted DIDs put in common terms."""
    data = TIMESTAMP.sub(b"<time>", data.replace(token.encode(), b"TOKEN"))
    return RANDOM_DID.sub(b"<minted>", data)


@pytest.fixture
async def own_registry(
    settings_for: Callable[..., Settings], backend: Backend
) -> AsyncIterator[Registry]:
    """A registry on a database of its own (PostgreSQL: a fresh one): the domains the
    create lane's test makes stay out of the run's shared database, whose other tests
    count projects and organisations (the console lists the first 200)."""
    async with AsyncExitStack() as stack:
        overrides: dict[str, Any] = {"twinhub_bootstrap_api_key": BOOTSTRAP_KEY}
        if backend.database == "postgresql":
            overrides["database_url"] = await stack.enter_async_context(
                fresh_postgres_database("create_lane")
            )
        yield await stack.enter_async_context(running_registry(settings_for(**overrides)))


async def test_the_create_lane_answers_what_the_general_route_answers(
    own_registry: Registry,
) -> None:
    registry = own_registry
    """`POST /v1/domains` through CreateRoute and through FastAPI's route (the lane off),
    each run with a token of its own in ids and serial numbers: the same statuses, headers
    and bodies, the same stored records and ledger transactions (times, minted DIDs and
    tokens aside), the same metrics label; an Idempotency-Key replays the same way."""
    app = registry.app
    lane = app.create_route
    assert lane is not None
    reader_key = await registry.key("did:ixo:org/lane-reader", "reader")
    answers: dict[str, list[tuple[int, list[tuple[str, str]], bytes]]] = {}
    handled = {"lane": 0, "full": 0, "handed on": 0}
    handle = CreateRoute.handle

    async def counted(self: CreateRoute, scope: Any, receive: Any, send: Any) -> None:
        handled["lane" if self.enabled else "full"] += 1
        await handle(self, scope, receive, send)
        handled["handed on"] += GENERAL in scope

    labels = {"method": "POST", "route": "/v1/domains", "status": "201"}
    metrics = app.state.metrics.registry
    for token, enabled in (("lane", True), ("full", False)):
        lane.enabled = enabled
        before = metrics.get_sample_value("twinhub_registry_requests_total", labels) or 0
        height = await registry.platform.ledger.height()
        keys = {"admin": None, "reader": reader_key, "stranger": "thk_nokey_nosecret"}
        run = []
        try:
            CreateRoute.handle = counted  # type: ignore[method-assign]
            for label, body, content_type, who in CREATE_CASES:
                headers = {} if content_type is None else {"Content-Type": content_type}
                content = body.replace("TOKEN", token).encode()
                if who == "admin":
                    response = await registry.client.post(
                        "/v1/domains", content=content, headers=headers
                    )
                else:
                    async with registry.as_key(keys.get(who)) as client:
                        response = await client.post(
                            "/v1/domains", content=content, headers=headers
                        )
                run.append((label, response))
            for _ in range(2):  # the first answer, then its replay
                response = await registry.client.post(
                    "/v1/domains",
                    json={"type": "Project", "class": "did:ixo:protocol/project"},
                    headers={"Idempotency-Key": f"key-{token}"},
                )
                run.append(("idempotent", response))
        finally:
            CreateRoute.handle = handle  # type: ignore[method-assign]
            lane.enabled = True
        answers[token] = [
            (
                response.status_code,
                sorted(
                    (name, same_clock(value.encode(), token).decode())
                    for name, value in response.headers.items()
                    if name != "content-length"
                ),
                same_clock(response.content, token),
            )
            for _, response in run
        ]
        assert all(int(response.headers["content-length"]) == len(response.content) for _, r in run)
        created = sum(response.status_code == 201 for _, response in run)
        after = metrics.get_sample_value("twinhub_registry_requests_total", labels)
        assert after == before + created
        transactions = await ledger_since(registry, height)
        answers[token + " ledger"] = [  # type: ignore[assignment]
            same_clock(orjson.dumps([tx.kind, tx.subject, tx.actor, tx.payload]), token)
            for tx in transactions
        ]
        stored = [
            await registry.platform.domains.get(did)
            for did in dict.fromkeys(tx.subject for tx in transactions)
        ]
        answers[token + " stored"] = [  # type: ignore[assignment]
            same_clock(orjson.dumps(record), token) for record in stored
        ]
    for label, lane_answer, full_answer in zip(
        [case[0] for case in CREATE_CASES] + ["idempotent", "replayed"],
        answers["lane"],
        answers["full"],
        strict=True,
    ):
        assert lane_answer == full_answer, label
    statuses = [status for status, _, _ in answers["lane"]]
    assert statuses.count(201) == 5 and 409 in statuses and 401 in statuses and 403 in statuses
    assert answers["lane ledger"] == answers["full ledger"] and answers["lane ledger"]
    assert answers["lane stored"] == answers["full stored"]
    # Every request reached the lane when it was on, none when it was off; the lane
    # answered those FastAPI would pass to create_domain and handed on the others.
    assert handled == {"lane": len(CREATE_CASES) + 2, "full": 0, "handed on": 12}
    assert (await registry.platform.ledger.verify()).ok


async def ledger_since(registry: Registry, height: int) -> list[Any]:
    """The ledger's transactions above `height`, oldest first."""
    ledger = registry.platform.ledger
    return [
        tx
        for h in range(height + 1, await ledger.height() + 1)
        if (tx := await ledger.transaction(h)) is not None
    ]
