"""The hot request paths of issue #14's ceiling ratios keep their contracts: the registry's
`GET /v1/domains/{did}` read through the read model answers exactly what the domain service
builds, the USSD form parser reads exactly what `parse_qsl` reads, the in-process rate
counter follows the sliding-window arithmetic of the `limits` library it stands in for, the
menu's steps without awaiting answer and change exactly what the awaited ones do, the
session digest is HMAC-SHA256, session records read back as the dataclass would build them,
and the USSD metrics counted in bulk read as Prometheus's own would. The answers given
without awaiting (a registry read answered outright, a USSD step on the memory store) are
held to the awaited paths' answers, errors included."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import math
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from typing import Any
from urllib.parse import parse_qsl, unquote_plus

import httpx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from limits import parse
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from tests.conftest import (
    BOOTSTRAP_KEY,
    Backend,
    Gateway,
    Registry,
    fresh_postgres_database,
    new_phone,
    running_registry,
    unique,
)
from twinhub.kernel.ratelimit import MemoryCounter
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
from twinhub.ussd.engine import UssdEngine
from twinhub.ussd.menu import Menu, State
from twinhub.ussd.metrics import UssdMetrics
from twinhub.ussd.request import (
    CONTROL,
    MAX_TEXT,
    InvalidRequest,
    UssdRequest,
    _unquote_ascii,
    form_fields,
    validate_request,
)
from twinhub.ussd.sessions import ENDED, MemorySessionStore, Session, process_digest


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
    if registry.settings.storage.resolved_database_url.startswith("sqlite"):
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
        mine: dict[str, str] | None = form_fields(body)
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
    if gateway.settings.storage.redis_url is None:
        assert menu.start_now(fresh) is None  # the phone's language is not cached yet
        assert fresh == _session(State.pre_menu.value, "")
    started = _session(State.pre_menu.value, "")
    reply = await menu.start(started)  # caches the phone's language
    again = _session(State.pre_menu.value, "")
    now = menu.start_now(again)
    if gateway.settings.storage.redis_url is None:
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


Answer = tuple[int, list[tuple[str, str]], bytes]


def _ways(app: Any) -> list[tuple[Any, bool]]:
    """(hot route, answers now) of the three ways a registry GET by DID can be answered:
    outright (`_answer_now`), by the lane, by the whole stack."""
    return [(app.hot_route, True), (app.hot_route, False), (None, False)]


async def _answers(app: Any, client: Any, path: str) -> list[Answer]:
    """The answer of each way, in `_ways`' order."""
    lane = app.hot_route
    answers = []
    for route, now in _ways(app):
        app.hot_route, app.answers_now = route, now
        try:
            response = await client.get(path)
        finally:
            app.hot_route, app.answers_now = lane, True
        answers.append((response.status_code, sorted(response.headers.items()), response.content))
    return answers


async def test_the_registry_hot_lane_answers_what_the_whole_stack_answers(
    registry: Registry,
) -> None:
    """`GET /v1/domains/{did}` answered outright (RegistryApp._answer_now), through the
    lane, and through the whole stack (both switched off): the same status, headers and
    body for a record, an unknown DID, a path that is no DID, no key, an unknown key, a
    sub-resource, and a database known to be down; and the same metrics label. On a SQLite
    file with the rate limit counted in process the record is answered outright; on
    PostgreSQL with Redis it never is (the lane answers)."""
    created = await registry.client.post(
        "/v1/domains",
        json={"type": "Organisation", "class": "did:ixo:protocol/organisation"},
    )
    did = created.json()["did"]
    app = registry.app
    assert app.hot_route is not None
    outright = registry.settings.storage.resolved_database_url.startswith("sqlite") and (
        registry.settings.storage.redis_url is None
    )

    paths = [
        f"/v1/domains/{did}",
        "/v1/domains/did:ixo:entity/nobody-here",
        "/v1/domains/not-a-did",
        f"/v1/domains/{did}/relationships",
    ]
    for path in paths:
        before = app.answered_now
        now, lane, whole = await _answers(app, registry.client, path)
        assert now == lane == whole, path
        assert app.answered_now == before + (outright and path == paths[0]), path
    assert (await _answers(app, registry.client, paths[0]))[0][0] == 200
    assert app.lanes.get("domain") is not None  # the lane did answer
    async with registry.as_key(None) as anonymous:
        now, lane, whole = await _answers(app, anonymous, paths[0])
        assert now == lane == whole and now[0] == 401
    async with registry.as_key("thk_nokey_nosecret") as stranger:
        now, lane, whole = await _answers(app, stranger, paths[0])
        assert now == lane == whole and now[0] == 401
    labels = {"method": "GET", "route": f"/v1/domains/{DID_PATH}", "status": "200"}
    metrics = app.state.metrics.registry
    before = metrics.get_sample_value("twinhub_registry_requests_total", labels) or 0
    latency = {"method": "GET", "route": f"/v1/domains/{DID_PATH}"}
    observed = metrics.get_sample_value("twinhub_registry_request_seconds_count", latency) or 0
    await _answers(app, registry.client, paths[0])
    assert metrics.get_sample_value("twinhub_registry_requests_total", labels) == before + 3
    assert metrics.get_sample_value("twinhub_registry_request_seconds_count", latency) == (
        observed + 3
    )
    database = registry.platform.database
    database.healthy = False
    try:
        before = app.answered_now
        now, lane, whole = await _answers(app, registry.client, paths[0])
    finally:
        database.healthy = True
    assert now == lane == whole and now[0] == 503
    assert app.answered_now == before


async def test_the_registry_read_answered_outright_follows_every_change(
    registry: Registry,
) -> None:
    """The record kept by ReadModel.record_now is given again only while its row, edges
    and protocol are unchanged: a PATCH, a new relationship and a deactivation are read
    back at once, each equal to the lane's and the whole stack's answer; a new key is
    checked by the lane first, then answered outright, and answered 401 at once after its
    revocation."""
    client = registry.client
    app = registry.app
    outright = registry.settings.storage.resolved_database_url.startswith("sqlite") and (
        registry.settings.storage.redis_url is None
    )
    org = (
        await client.post(
            "/v1/domains",
            json={"type": "Organisation", "class": "did:ixo:protocol/organisation"},
        )
    ).json()
    path = f"/v1/domains/{org['did']}"
    protocol = (await client.get("/v1/protocols/did:ixo:protocol/organisation")).json()
    role, kind = sorted(protocol["effective"]["relationships"].items())[0]
    target = await client.post(
        "/v1/domains", json={"type": kind, "class": f"did:ixo:protocol/{kind.lower()}"}
    )
    assert target.status_code == 201, target.text

    async def read_back() -> dict[str, Any]:
        before = app.answered_now
        now, lane, whole = await _answers(app, client, path)
        assert now == lane == whole
        assert now[0] == 200
        assert app.answered_now == before + outright
        assert orjson.loads(now[2]) == await registry.platform.domains.get(org["did"])
        return orjson.loads(now[2])

    first = await read_back()
    assert first == await read_back()  # kept, and the same
    patched = await client.patch(path, json={"metadata": {"name": "Renamed"}})
    assert patched.status_code == 200, patched.text
    assert (await read_back())["metadata"] == {"name": "Renamed"}
    related = await client.post(
        f"{path}/relationships", json={"type": role, "target": target.json()["did"]}
    )
    assert related.status_code == 200, related.text
    assert {"type": role, "target": target.json()["did"]} in (await read_back())["relationships"]
    assert (await client.delete(path)).status_code == 200
    assert (await read_back())["status"] != first["status"]

    token = await registry.key("did:ixo:org/reader", "reader")
    key_id = token.split("_")[1]
    async with registry.as_key(token) as reader:
        before = app.answered_now
        assert (await reader.get(path)).status_code == 200  # looked up by the lane
        assert app.answered_now == before
        now, lane, whole = await _answers(app, reader, path)
        assert now == lane == whole and now[0] == 200
        assert app.answered_now == before + outright  # then known, and answered outright
        assert await registry.platform.api_keys.revoke(key_id)
        now, lane, whole = await _answers(app, reader, path)
        assert now == lane == whole and now[0] == 401  # revoked: refused at once


async def test_the_registry_read_answered_outright_is_rate_limited(make_registry: Any) -> None:
    """The limit counts the reads answered outright as the lane's: three pass, the fourth
    is refused by the lane with its 429, whichever way is asked, and a refusal counts
    nothing (a third way asked after two refusals is refused the same)."""
    registry = await make_registry(registry_rate_limit="3/minute")
    created = await registry.client.post(
        "/v1/domains", json={"type": "Organisation", "class": "did:ixo:protocol/organisation"}
    )
    assert created.status_code == 201
    path = f"/v1/domains/{created.json()['did']}"
    app = registry.app
    before = app.answered_now
    for _ in range(2):  # the create took one of the three
        assert (await registry.client.get(path)).status_code == 200
    outright = registry.settings.storage.resolved_database_url.startswith("sqlite") and (
        registry.settings.storage.redis_url is None
    )
    assert app.answered_now == before + 2 * outright
    refused = await _answers(app, registry.client, path)
    assert [status for status, _, _ in refused] == [429, 429, 429]
    # The wait named in each refusal counts down with the clock, so it may differ by a second
    # between the three asks; everything else is the same.
    bodies = {re.sub(rb"try again in \d+ s", b"try again in N s", body) for _, _, body in refused}
    assert len(bodies) == 1
    assert refused[0][2] and orjson.loads(refused[0][2])["error"]["code"] == "rate_limited"
    assert app.answered_now == before + 2 * outright


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


def counting(route: Any) -> tuple[dict[str, int], Any, Any]:
    """A lane's `handle` that counts what reaches it (the lane on, the lane off, handed on
    to FastAPI's route), with the handle it wraps: patched in for a run, then restored."""
    handled = {"lane": 0, "full": 0, "handed on": 0}
    handle = route.handle

    async def counted(self: Any, scope: Any, receive: Any, send: Any) -> None:
        handled["lane" if self.enabled else "full"] += 1
        await handle(self, scope, receive, send)
        handled["handed on"] += GENERAL in scope

    return handled, handle, counted


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
    handled, handle, counted = counting(CreateRoute)

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
            answer_of(response, lambda data, token=token: same_clock(data, token))
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


def answer_of(
    response: httpx.Response, common: Callable[[bytes], bytes]
) -> tuple[int, list[tuple[str, str]], bytes]:
    """What a lane test compares of an answer: its status, its headers (but the length) and
    its body, each with `common` applied (what differs between two runs made the same)."""
    headers = sorted(
        (name, common(value.encode()).decode())
        for name, value in response.headers.items()
        if name != "content-length"
    )
    return response.status_code, headers, common(response.content)


async def ledger_since(registry: Registry, height: int) -> list[Any]:
    """The ledger's transactions above `height`, oldest first."""
    ledger = registry.platform.ledger
    return [
        tx
        for h in range(height + 1, await ledger.height() + 1)
        if (tx := await ledger.transaction(h)) is not None
    ]


ASCII_PIECES = st.sampled_from(
    [*"ab+ *#é", "%2A", "%2a", "%2B", "%23", "%7F", "%7f", "%20", "%25", "%zz", "%2", "%"]
).map(str) | st.sampled_from(["%C3%A9", "%FF", "%80", "%0A", "%41"])


@settings(max_examples=3000, deadline=None)
@given(st.lists(ASCII_PIECES, max_size=10).map("".join) | st.text(max_size=12))
def test_the_ascii_unquote_reads_what_unquote_plus_reads(value: str) -> None:
    assert _unquote_ascii(value) == unquote_plus(value)


class _Reference:
    """MemoryCounter.hit as it was before its shortcut: the sliding window's arithmetic
    on every hit."""

    def __init__(self, limit: int, expiry: float, clock: Any) -> None:
        self.limit, self.expiry, self.clock = limit, expiry, clock
        self.windows: dict[str, list[int]] = {}
        self.sweep_at = 0.0

    def hit(self, client: str, cost: int = 1) -> int | None:
        now, expiry = self.clock(), self.expiry
        window = int(now // expiry)
        if now >= self.sweep_at:
            self.windows = {c: w for c, w in self.windows.items() if w[0] >= window - 1}
            self.sweep_at = (window + 1) * expiry
        state = self.windows.get(client)
        if state is None:
            state = self.windows[client] = [window, 0, 0]
        elif state[0] != window:
            state[2] = state[1] if state[0] == window - 1 else 0
            state[0], state[1] = window, 0
        _, current, previous = state
        into = now - window * expiry
        if math.floor(previous * (expiry - into) / expiry + current) + cost <= self.limit:
            state[1] = current + cost
            return None
        if current + cost <= self.limit and previous:
            wait = expiry * (1 - (self.limit - current - cost + 1) / previous) - into
        else:
            wait = expiry - into + max(0.0, expiry * (1 - self.limit / max(current, 1)))
        return max(1, math.ceil(wait))


@settings(max_examples=500, deadline=None)
@given(
    st.sampled_from(["2/second", "3/minute", "5/minute", "20/hour"]),
    st.lists(
        st.tuples(
            st.floats(min_value=-5, max_value=90, allow_nan=False),  # the clock moves (back too)
            st.sampled_from("abc"),
            st.integers(min_value=1, max_value=3),
        ),
        max_size=60,
    ),
)
def test_the_memory_counters_shortcut_answers_what_its_arithmetic_answers(
    limit: str, hits: list[tuple[float, str, int]]
) -> None:
    item = parse(limit)
    now = [1000.0]
    counter = MemoryCounter(item, clock=lambda: now[0])
    reference = _Reference(item.amount, float(item.get_expiry()), lambda: now[0])
    for step, client, cost in hits:
        now[0] += step
        assert counter.hit(client, cost) == reference.hit(client, cost)
        assert counter._windows == reference.windows


def test_the_memory_stores_records_read_back_as_saved_and_apart_from_the_session() -> None:
    """The memory store keeps field values, not the Session: a load is equal to what was
    saved, and nothing done to the saved or the loaded session afterwards changes the record
    (a step that gives up half-way must leave it as it was)."""
    store = MemorySessionStore(ttl=60, retention=600, max_sessions=10, lock_timeout=1)
    for digest in ["ab" * 16, 1234, None]:
        saved = _session("knowMore", "sw", last_text_digest=digest, last_text_length=3)
        bare = _session("preMenu", "", customer_id="c-1")
        bare.scratch = {}
        for session in (saved, bare):
            expected = dataclasses.replace(session, scratch=dict(session.scratch))
            store.save_now(session)
            loaded = store.load_now(session.session_id)
            assert loaded == expected and loaded is not session
            assert dataclasses.asdict(loaded) == dataclasses.asdict(expected)
            session.scratch["pin"] = "x"
            session.state = "changed"
            loaded.scratch["other"] = "y"
            loaded.message = "changed"
            assert store.load_now(session.session_id) == expected


def test_the_memory_stores_digest_is_keyed_per_process() -> None:
    """The memory store's text digest: distinct for distinct texts and sessions, and keyed
    at random per interpreter (another process digests the same text otherwise); not used,
    the HMAC kept, when the hash seed is fixed."""
    digest = process_digest()
    if digest is None:  # this run fixed PYTHONHASHSEED: nothing to compare
        assert os.environ.get("PYTHONHASHSEED", "random") != "random"
        return
    texts = ["", "1", "1*2", "12", "1*2*0"]
    assert len({digest(text, context) for text in texts for context in ["a", "b"]}) == 10
    code = (
        "from twinhub.ussd.sessions import process_digest as p\nd = p()\nprint(d and d('1*2', 's'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    values = {
        subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(3)
    }
    assert len(values) == 3 and str(digest("1*2", "s")) not in values
    fixed = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert fixed.stdout.strip() == "None"


def _fields(request: UssdRequest) -> dict[str, Any]:
    return {
        "sessionId": request.sessionId,
        "serviceCode": request.serviceCode,
        "phoneNumber": request.phoneNumber,
        "text": request.text,
    }


TEXTS = st.text(st.sampled_from([*"1*#0a é", "\x00", "\x1f", "\x7f", "\x9f", "\xa0", "\n"]))


@settings(max_examples=2000, deadline=None)
@given(TEXTS.map(lambda t: t * 20) | TEXTS)
def test_a_continued_steps_text_check_is_the_requests_validation(text: str) -> None:
    """UssdEngine.continue_now checks only the text (the rest is the session's own): as
    UssdRequest's validation checks it."""
    fields = {"sessionId": "s", "serviceCode": "*384#", "phoneNumber": "+254700000001"}
    try:
        validate_request({**fields, "text": text})
        valid = True
    except ValidationError:
        valid = False
    assert valid == (len(text) <= MAX_TEXT and CONTROL.search(text) is None)


def _request(session_id: str, text: str, phone: str = "+254700000123") -> UssdRequest:
    return validate_request(
        {"sessionId": session_id, "serviceCode": "*384*1#", "phoneNumber": phone, "text": text}
    )


async def test_a_step_without_awaiting_does_what_the_awaited_step_does(
    gateway: Gateway,
) -> None:
    """UssdEngine.handle_now, falling back to handle where it declines, against handle
    alone: two engines on two memory stores, the same menu, digest and clock, walked
    through the same requests (the usual walk, retries, a shortcut dial, a gateway that
    sends the newest input alone, exit and a request after it, a reused session id, an
    expired session, screens that need the database, a session whose lock is held) give
    the same replies, keep the same records and count the same new sessions."""
    menu = gateway.app.state.engine._menu
    digest = gateway.app.state.engine._digest
    now = [1_000_000.0]

    def engine(started: list[int]) -> UssdEngine:
        store = MemorySessionStore(
            ttl=60, retention=600, max_sessions=1000, lock_timeout=1, clock=lambda: now[0]
        )
        return UssdEngine(
            store,
            menu,
            digest=digest,
            clock=lambda: now[0],
            on_session_started=lambda: started.append(1),
        )

    fast_started: list[int] = []
    slow_started: list[int] = []
    fast, slow = engine(fast_started), engine(slow_started)
    phone = new_phone()
    walks: list[list[tuple[str, str]]] = [
        [("a", ""), ("a", "1"), ("a", "1*2"), ("a", "1*2"), ("a", "1*2*0"), ("a", "1*2*0*3")],
        [("b", "1*2"), ("b", "1*2*0"), ("b", ""), ("b", "1*2*0*0")],
        [("c", ""), ("c", "1"), ("c", "2"), ("c", "0"), ("c", "")],
        [("d", ""), ("d", "*"), ("d", "*"), ("d", "**1")],
        [("e", ""), ("e", "2"), ("e", "2*1"), ("e", "2*1*0"), ("e", "9")],
        [("f", ""), ("f", "1"), ("f", "1*x"), ("f", "1*x*4"), ("f", "1*x*4*0*0")],
    ]
    answered_now = continued = 0
    for walk in walks:
        for session_id, text in walk:
            request = _request(session_id, text, phone)
            fields = {**_fields(request), "extra": "ignored"}
            answer = fast.continue_now(fields)
            continued += answer is not None
            if answer is None:
                answer = fast.handle_now(request)
                answered_now += answer is not None
            got = answer or await fast.handle(request)
            assert got == await slow.handle(request), (session_id, text)
            now[0] += 1
    # The usual steps were answered without awaiting (new sessions too, where the phone's
    # language is cached in this process rather than in Redis).
    assert continued >= 10
    assert answered_now >= (5 if gateway.settings.storage.redis_url is None else 0)
    other = {**_fields(_request("a", "1*2*0*3*1", phone)), "serviceCode": "*384*2#"}
    assert fast.continue_now(other) is None  # not the session's own service code
    assert fast.continue_now({"sessionId": "a", "text": "1*2*0*3*1"}) is None
    assert fast.continue_now({**_fields(_request("new", "", phone))}) is None  # a new session
    reused = _request("a", "1*2*0*3*1", "+254700000999")
    assert (fast.handle_now(reused) or await fast.handle(reused)) == await slow.handle(reused)
    now[0] += 120  # every session expired (past the TTL), still remembered
    late = _request("b", "1*2*0*0*1", phone)
    assert fast.handle_now(late) is None
    assert await fast.handle(late) == await slow.handle(late)
    held = _request("g", "", phone)
    async with fast.store.lock("g"):
        assert fast.handle_now(held) is None  # another request holds the session
    assert await fast.handle(held) == await slow.handle(held)
    assert fast.store._records.keys() == slow.store._records.keys()
    for session_id, record in fast.store._records.items():
        assert record[1:] == slow.store._records[session_id][1:], session_id
    assert len(fast_started) == len(slow_started) > 0


async def test_an_evaluation_answers_the_bytes_the_claim_read_answers(world: Any) -> None:
    """The evaluation route encodes its reply with orjson; FastAPI encodes the claim read.
    Approved and rejected (a reason with non-ASCII text), the bytes are the same."""
    collection = (await world.collection())["id"]
    for body in (
        {"status": "approved"},
        {"status": "rejected", "reason": "relevé incomplet — « à revoir »"},
    ):
        claim = (await world.approvable(collection))["id"]
        evaluated = await world.oracle_client.post(f"/v1/claims/{claim}/evaluations", json=body)
        read = await world.oracle_client.get(f"/v1/claims/{claim}")
        assert evaluated.status_code == read.status_code == 200, evaluated.text
        assert evaluated.json()["status"] == body["status"]
        assert evaluated.content == read.content
        assert evaluated.headers["content-type"] == read.headers["content-type"]
        assert evaluated.headers["content-length"] == read.headers["content-length"]


async def _claim_answers(app: Any, client: Any, claim_id: str) -> list[Answer]:
    """`GET /v1/claims/{claim_id}` answered by the general route (FastAPI's `get_claim`,
    which a query string sends it to), through the claim's lane, and as the app answers
    it (outright when it can): in that order, the last asked last."""
    answers = []
    for path, now in (
        (f"/v1/claims/{claim_id}?general=1", True),
        (f"/v1/claims/{claim_id}", False),
        (f"/v1/claims/{claim_id}", True),
    ):
        app.answers_now = now
        try:
            response = await client.get(path)
        finally:
            app.answers_now = True
        answers.append((response.status_code, sorted(response.headers.items()), response.content))
    return answers


async def test_the_claim_read_answers_what_the_general_route_answers(world: Any) -> None:
    """`GET /v1/claims/{id}` through ClaimRoute (its answer kept by the read model and,
    on a SQLite file with the rate limit in process, given outright) answers the general
    route's status, headers and bytes, for a claim in every state it can be in, read
    again after each change (never the answer kept from before it); for an unknown id,
    ids the general route refuses or treats as no claim, no key, an unknown key, a reader
    of another organisation (claims are public registry facts, db/visibility.py), and a
    database known to be down."""
    registry = world.registry
    app = registry.app
    platform = registry.platform
    outright = registry.settings.storage.resolved_database_url.startswith("sqlite") and (
        registry.settings.storage.redis_url is None
    )
    collection = (await world.collection())["id"]

    async def read_back(claim_id: str, status: str) -> None:
        general, lane, app_way = await _claim_answers(app, world.oracle_client, claim_id)
        assert general == lane == app_way, claim_id
        assert general[0] == 200
        view = orjson.loads(general[2])
        assert view == await platform.claims.views.claim(claim_id)
        assert view["status"] == status
        before = app.answered_now
        # The bootstrap key: known without a look-up, however long the machine took since
        # the oracle's key was last checked (a checked key is known for five seconds).
        again = await registry.client.get(f"/v1/claims/{claim_id}")
        assert (again.status_code, sorted(again.headers.items()), again.content) == general
        assert app.answered_now == before + outright  # given outright

    async def evaluated(claim_id: str, body: dict[str, Any]) -> None:
        reply = await world.oracle_client.post(f"/v1/claims/{claim_id}/evaluations", json=body)
        assert reply.status_code == 200, reply.text
        await read_back(claim_id, body["status"])

    reason = "relevé incomplet — « à revoir »"
    claims = [(await world.approvable(collection))["id"] for _ in range(5)]
    for claim_id in claims:
        await read_back(claim_id, "pending")
    await evaluated(claims[0], {"status": "approved"})
    await evaluated(claims[1], {"status": "rejected", "reason": reason})
    await evaluated(claims[2], {"status": "flagged", "reason": "a second look"})
    await evaluated(claims[2], {"status": "approved", "reason": "checked on site"})
    await evaluated(claims[3], {"status": "disputed", "reason": reason})
    await evaluated(claims[4], {"status": "invalidated", "reason": reason})

    for path in ("nobody-here", "evaluations", "x" * 101, "not%20an%20id"):
        general, lane, app_way = await _claim_answers(app, world.oracle_client, path)
        assert general == lane == app_way, path
        assert general[0] in (404, 422), path
    stranger = await world.client(f"did:ixo:org/{unique('stranger')}", "reader")
    answers = await _claim_answers(app, stranger, claims[0])
    assert answers[0] == answers[1] == answers[2] and answers[0][0] == 200
    async with registry.as_key(None) as anonymous:
        answers = await _claim_answers(app, anonymous, claims[0])
        assert answers[0] == answers[1] == answers[2] and answers[0][0] == 401
    async with registry.as_key("thk_nokey_nosecret") as unknown:
        answers = await _claim_answers(app, unknown, claims[0])
        assert answers[0] == answers[1] == answers[2] and answers[0][0] == 401
    platform.database.healthy = False
    try:
        before = app.answered_now
        answers = await _claim_answers(app, world.oracle_client, claims[0])
    finally:
        platform.database.healthy = True
    assert answers[0] == answers[1] == answers[2] and answers[0][0] == 503
    assert app.answered_now == before


async def _list_answers(client: Any, query: str) -> tuple[Answer, Answer]:
    """`GET /v1/domains?{query}` answered by the general route (`count=false` sends it
    there, and changes nothing of its answer) and as the app answers it (ListRoute)."""
    answers = []
    for path in (f"/v1/domains?{query}&count=false", f"/v1/domains?{query}"):
        response = await client.get(path)
        answers.append((response.status_code, sorted(response.headers.items()), response.content))
    return answers[0], answers[1]


async def test_list_pages_answer_what_the_general_route_answers(registry: Registry) -> None:
    """`GET /v1/domains` by type, by class and unfiltered, walked page by page through
    ListRoute, answers the general route's status, headers and bytes; a domain changed
    after its page was kept is shown changed; a bad cursor, a limit that is no number,
    both filters at once are answered as the general route answers them; a reader of
    another organisation sees the same pages (domain records are public registry facts,
    db/visibility.py) and no key is refused alike."""
    client = registry.client
    organisation = "did:ixo:protocol/organisation"
    dids = []
    for index in range(7):
        created = await client.post(
            "/v1/domains",
            json={"type": "Organisation", "class": organisation, "metadata": {"n": index}},
        )
        assert created.status_code == 201, created.text
        dids.append(created.json()["did"])

    async def walk(query: str) -> list[str]:
        seen: list[str] = []
        cursor = ""
        while True:
            general, listed = await _list_answers(client, query + cursor)
            assert general == listed, query + cursor
            assert listed[0] == 200
            page = orjson.loads(listed[2])
            seen += [item["did"] for item in page["items"]]
            if page["nextCursor"] is None:
                return seen
            cursor = f"&cursor={page['nextCursor']}"

    outright = registry.settings.storage.resolved_database_url.startswith("sqlite") and (
        registry.settings.storage.redis_url is None
    )
    for query in ("type=Organisation&limit=3", f"class={organisation}&limit=2", "limit=4"):
        walked = await walk(query)
        assert [did for did in walked if did in dids] == dids, query
        before = registry.app.answered_now
        assert await walk(query) == walked  # kept, and the same
        assert (registry.app.answered_now > before) == outright  # kept pages given outright
    changed = await client.patch(f"/v1/domains/{dids[1]}", json={"metadata": {"n": "changed"}})
    assert changed.status_code == 200, changed.text
    general, listed = await _list_answers(client, "type=Organisation&limit=3")
    assert general == listed
    await walk("type=Organisation&limit=3")
    shown: dict[str, Any] = {}  # every page: other tests' organisations share the database
    cursor = ""
    while dids[1] not in shown:
        page = orjson.loads(
            (await client.get(f"/v1/domains?class={organisation}&limit=100{cursor}")).content
        )
        shown |= {item["did"]: item for item in page["items"]}
        if page["nextCursor"] is None:
            break
        cursor = f"&cursor={page['nextCursor']}"
    assert shown[dids[1]]["metadata"] == {"n": "changed"}
    assert shown[dids[1]]["version"] == changed.json()["version"]
    for query in (
        "type=Organisation&cursor=not-a-cursor",
        "type=Organisation&limit=abc",
        "type=Organisation&limit=0",
        f"type=Organisation&class={organisation}",
        "type=NoSuchType",
        "type=Organisation&type=Project",
    ):
        general, listed = await _list_answers(client, query)
        assert general == listed, query
    stranger = registry.as_key(await registry.key(f"did:ixo:org/{unique('stranger')}", "reader"))
    async with stranger:
        general, listed = await _list_answers(stranger, "type=Organisation&limit=3")
        assert general == listed and listed[0] == 200
    async with registry.as_key(None) as anonymous:
        general, listed = await _list_answers(anonymous, "type=Organisation&limit=3")
        assert general == listed and listed[0] == 401


async def test_claims_list_pages_answer_what_the_general_route_answers(world: Any) -> None:
    """`GET /v1/claims?collection=` walked page by page through ClaimsListRoute answers
    the general route's status, headers and bytes (an unknown parameter sends a request
    to the general route, which ignores it); an evaluated claim is shown evaluated at
    once; a bad cursor, a limit or collection out of bounds or no number are answered as
    the general route answers them; a reader of another organisation sees the same pages
    (claims are public registry facts, db/visibility.py) and no key is refused alike."""
    registry = world.registry
    collection = (await world.collection())["id"]
    claims = [(await world.approvable(collection))["id"] for _ in range(5)]

    async def answers(client: Any, query: str) -> tuple[Answer, Answer]:
        found = []
        for path in (f"/v1/claims?{query}&general=1", f"/v1/claims?{query}"):
            response = await client.get(path)
            found.append((response.status_code, sorted(response.headers.items()), response.content))
        return found[0], found[1]

    async def walk(query: str) -> list[dict[str, Any]]:
        seen: list[dict[str, Any]] = []
        cursor = ""
        while True:
            general, listed = await answers(world.oracle_client, query + cursor)
            assert general == listed, query + cursor
            assert listed[0] == 200
            page = orjson.loads(listed[2])
            seen += page["items"]
            if page["nextCursor"] is None:
                return seen
            cursor = f"&cursor={page['nextCursor']}"

    walked = await walk(f"collection={collection}&limit=2")
    assert [item["id"] for item in walked] == claims
    assert await walk(f"collection={collection}&limit=2") == walked  # kept, and the same
    reply = await world.oracle_client.post(
        f"/v1/claims/{claims[2]}/evaluations",
        json={"status": "rejected", "reason": "relevé incomplet — « à revoir »"},
    )
    assert reply.status_code == 200, reply.text
    after = {item["id"]: item for item in await walk(f"collection={collection}&limit=2")}
    assert after[claims[2]]["status"] == "rejected"
    assert await walk(f"collection={collection}") == list(after.values())
    for query in (
        f"collection={collection}&cursor=not-a-cursor",
        f"collection={collection}&limit=abc",
        f"collection={collection}&limit=0",
        "collection=0",
        "collection=abc",
        f"collection={2**31}",
        f"collection={collection + 1000}",
        f"collection={collection}&collection={collection}",
    ):
        general, listed = await answers(world.oracle_client, query)
        assert general == listed, query
    stranger = await world.client(f"did:ixo:org/{unique('stranger')}", "reader")
    general, listed = await answers(stranger, f"collection={collection}&limit=2")
    assert general == listed and listed[0] == 200
    async with registry.as_key(None) as anonymous:
        general, listed = await answers(anonymous, f"collection={collection}&limit=2")
        assert general == listed and listed[0] == 401


SUBMIT_CASES: list[tuple[str, str, str | None, str, str]] = [
    # label, body (TOKEN: the run's), content type, who, collection (C: the world's id)
    (
        "claim",
        '{"id": "TOKEN-1", "data": {"reportType": "cooking"}}',
        "application/json",
        "op",
        "C",
    ),
    (
        "no id",
        '{"data": {"reportType": "cooking", "mealsCooked": 3}}',
        "application/json",
        "op",
        "C",
    ),
    (
        "id taken",
        '{"id": "TOKEN-1", "data": {"reportType": "cooking"}}',
        "application/json",
        "op",
        "C",
    ),
    ("off protocol", '{"data": {"reportType": "picnic"}}', "application/json", "op", "C"),
    ("bad id", '{"id": "-x", "data": {}}', "application/json", "op", "C"),
    ("no data", '{"id": "TOKEN-2"}', "application/json", "op", "C"),
    ("unknown field", '{"data": {}, "colour": 1}', "application/json", "op", "C"),
    ("broken JSON", "{", "application/json", "op", "C"),
    ("text", '{"data": {}}', "text/plain", "op", "C"),
    ("no type", '{"data": {}}', None, "op", "C"),
    ("no key", '{"data": {"reportType": "cooking"}}', "application/json", "none", "C"),
    ("reader", '{"data": {"reportType": "cooking"}}', "application/json", "reader", "C"),
    ("no collection", '{"data": {"reportType": "cooking"}}', "application/json", "op", "999999"),
    ("collection 0", '{"data": {"reportType": "cooking"}}', "application/json", "op", "0"),
    ("collection +C", '{"data": {"reportType": "cooking"}}', "application/json", "op", "+C"),
    (
        "collection 2^31",
        '{"data": {"reportType": "cooking"}}',
        "application/json",
        "op",
        "2147483648",
    ),
]
CLAIM_HEX = re.compile(rb"\b[0-9a-f]{32}\b")


async def test_the_submit_lane_answers_what_the_general_route_answers(world: Any) -> None:
    """`POST /v1/claim-collections/{id}/claims` through SubmitRoute and through FastAPI's
    route (the lane off), each run with a token of its own in chosen ids: the same
    statuses, headers and bodies, the same ledger transactions (times, generated ids and
    tokens aside), the same metrics label; an Idempotency-Key replays the same way."""
    from twinhub.registry.routes_claims import SubmitRoute

    registry = world.registry
    app = registry.app
    lane = app.submit_route
    assert lane is not None
    collection = str((await world.collection())["id"])
    reader_key = await registry.key("did:ixo:org/submit-lane-reader", "reader")
    answers: dict[str, list[Any]] = {}
    handled, handle, counted = counting(SubmitRoute)

    path = "/v1/claim-collections/{collection_id}/claims"
    labels = {"method": "POST", "route": path, "status": "201"}
    metrics = app.state.metrics.registry
    for token, enabled in (("lane", True), ("full", False)):
        lane.enabled = enabled
        before = metrics.get_sample_value("twinhub_registry_requests_total", labels) or 0
        height = await registry.platform.ledger.height()
        run = []
        try:
            SubmitRoute.handle = counted  # type: ignore[method-assign]
            for label, body, content_type, who, target in SUBMIT_CASES:
                headers = {} if content_type is None else {"Content-Type": content_type}
                content = body.replace("TOKEN", token).encode()
                url = f"/v1/claim-collections/{target.replace('C', collection)}/claims"
                if who == "op":
                    response = await world.operator_client.post(
                        url, content=content, headers=headers
                    )
                else:
                    async with registry.as_key(reader_key if who == "reader" else None) as client:
                        response = await client.post(url, content=content, headers=headers)
                run.append((label, response))
            for _ in range(2):  # the first answer, then its replay
                response = await world.operator_client.post(
                    f"/v1/claim-collections/{collection}/claims",
                    json={"data": {"reportType": "cooking", "mealsCooked": 5}},
                    headers={"Idempotency-Key": f"submit-{token}-{collection}"},
                )
                run.append(("idempotent", response))
        finally:
            SubmitRoute.handle = handle  # type: ignore[method-assign]
            lane.enabled = True

        def common(data: bytes, token: str = token) -> bytes:
            return CLAIM_HEX.sub(b"<id>", same_clock(data, token))

        answers[token] = [answer_of(response, common) for _, response in run]
        created = sum(response.status_code == 201 for _, response in run)
        after = metrics.get_sample_value("twinhub_registry_requests_total", labels)
        assert after == before + created
        answers[token + " ledger"] = [
            common(orjson.dumps([tx.kind, tx.subject, tx.actor, tx.payload]))
            for tx in await ledger_since(registry, height)
        ]
    labels_of = [case[0] for case in SUBMIT_CASES] + ["idempotent", "replayed"]
    for label, lane_answer, full_answer in zip(
        labels_of, answers["lane"], answers["full"], strict=True
    ):
        assert lane_answer == full_answer, label
    statuses = [status for status, _, _ in answers["lane"]]
    assert dict(zip(labels_of, statuses, strict=True)) == {
        "claim": 201,
        "no id": 201,
        "id taken": 409,
        "off protocol": 422,
        "bad id": 422,
        "no data": 422,
        "unknown field": 422,
        "broken JSON": 400,
        "text": 422,
        "no type": 422,
        "no key": 401,
        "reader": 403,
        "no collection": 404,
        "collection 0": 422,
        "collection +C": 201,  # FastAPI reads "+7" as 7: handed to it, not refused
        "collection 2^31": 422,
        "idempotent": 201,
        "replayed": 201,
    }
    assert answers["lane ledger"] == answers["full ledger"] and answers["lane ledger"]
    # Every request in the collection's path reached the lane when it was on (the others
    # do not match it), none when it was off; the lane handed on those FastAPI refuses.
    matched = len(SUBMIT_CASES) + 2 - 3  # collections 0, +C and 2^31 never match it
    assert handled == {"lane": matched, "full": 0, "handed on": 5}, handled
    assert (await registry.platform.ledger.verify()).ok


EVALUATE_CASES: list[tuple[str, str, str | None, str, str]] = [
    # label, body, content type, who, claim (A: the run's approvable claim, R: another)
    ("amount", '{"status": "approved", "amount": 5}', "application/json", "oracle", "R"),
    ("no reason", '{"status": "rejected"}', "application/json", "oracle", "R"),
    ("bad status", '{"status": "maybe"}', "application/json", "oracle", "R"),
    ("unknown field", '{"status": "approved", "colour": 1}', "application/json", "oracle", "R"),
    ("broken JSON", "{", "application/json", "oracle", "R"),
    ("text", '{"status": "approved"}', "text/plain", "oracle", "R"),
    ("no type", '{"status": "approved"}', None, "oracle", "R"),
    ("no key", '{"status": "approved"}', "application/json", "none", "R"),
    ("reader", '{"status": "approved"}', "application/json", "reader", "R"),
    ("operator", '{"status": "approved"}', "application/json", "op", "R"),
    ("no claim", '{"status": "approved"}', "application/json", "oracle", "TOKEN-none"),
    ("id too long", '{"status": "approved"}', "application/json", "oracle", "x" * 101),
    ("approve", '{"status": "approved"}', "application/json", "oracle", "A"),
    ("again", '{"status": "approved"}', "application/json", "oracle", "A"),
    (
        "reject",
        '{"status": "rejected", "reason": "relevé « à revoir »"}',
        "application/json",
        "oracle",
        "R",
    ),
]
CREDENTIAL_ID = re.compile(rb"urn:uuid:[0-9a-f-]{36}")


async def test_the_evaluate_lane_answers_what_the_general_route_answers(world: Any) -> None:
    """`POST /v1/claims/{id}/evaluations` through EvaluateRoute and through FastAPI's route
    (the lane off), each run on claims of its own: the same statuses, headers and bodies,
    the same ledger transactions (times, ids, stoves and credential ids aside), the same
    metrics label; what FastAPI refuses is handed to it."""
    from twinhub.registry.routes_claims import EvaluateRoute

    registry = world.registry
    app = registry.app
    lane = app.evaluate_route
    assert lane is not None
    collection = (await world.collection())["id"]
    reader_key = await registry.key("did:ixo:org/evaluate-lane-reader", "reader")
    answers: dict[str, list[Any]] = {}
    handled, handle, counted = counting(EvaluateRoute)

    path = "/v1/claims/{claim_id}/evaluations"
    labels = {"method": "POST", "route": path, "status": "200"}
    metrics = app.state.metrics.registry
    for token, enabled in (("lane", True), ("full", False)):
        claims = {
            "A": (await world.approvable(collection))["id"],
            "R": (await world.approvable(collection))["id"],
        }
        lane.enabled = enabled
        before = metrics.get_sample_value("twinhub_registry_requests_total", labels) or 0
        height = await registry.platform.ledger.height()
        run = []
        try:
            EvaluateRoute.handle = counted  # type: ignore[method-assign]
            for _, body, content_type, who, target in EVALUATE_CASES:
                headers = {} if content_type is None else {"Content-Type": content_type}
                url = f"/v1/claims/{claims.get(target, target.replace('TOKEN', token))}/evaluations"
                if who in ("oracle", "op"):
                    client = world.oracle_client if who == "oracle" else world.operator_client
                    response = await client.post(url, content=body.encode(), headers=headers)
                else:
                    async with registry.as_key(reader_key if who == "reader" else None) as client:
                        response = await client.post(url, content=body.encode(), headers=headers)
                run.append(response)
        finally:
            EvaluateRoute.handle = handle  # type: ignore[method-assign]
            lane.enabled = True

        def common(data: bytes, token: str = token) -> bytes:
            return CREDENTIAL_ID.sub(
                b"<credential>", CLAIM_HEX.sub(b"<id>", same_clock(data, token))
            )

        answers[token] = [answer_of(response, common) for response in run]
        made = sum(response.status_code == 200 for response in run)
        after = metrics.get_sample_value("twinhub_registry_requests_total", labels)
        assert after == before + made == before + 2
        answers[token + " ledger"] = [
            common(orjson.dumps([tx.kind, tx.subject, tx.actor, tx.payload]))
            for tx in await ledger_since(registry, height)
        ]
    labels_of = [case[0] for case in EVALUATE_CASES]
    for label, lane_answer, full_answer in zip(
        labels_of, answers["lane"], answers["full"], strict=True
    ):
        assert lane_answer == full_answer, label
    statuses = [status for status, _, _ in answers["lane"]]
    assert dict(zip(labels_of, statuses, strict=True)) == {
        "amount": 422,
        "no reason": 422,
        "bad status": 422,
        "unknown field": 422,
        "broken JSON": 400,
        "text": 422,
        "no type": 422,
        "no key": 401,
        "reader": 403,
        "operator": 403,
        "no claim": 404,
        "id too long": 422,
        "approve": 200,
        "again": 409,
        "reject": 200,
    }
    assert len(answers["lane ledger"]) == 2 and answers["lane ledger"] == answers["full ledger"]
    # Every request but the long id's reached the lane when it was on, none when it was
    # off; the lane handed on the five whose bodies FastAPI reads otherwise or refuses.
    matched = len(EVALUATE_CASES) - 1
    assert handled == {"lane": matched, "full": 0, "handed on": 5}, handled
    assert (await registry.platform.ledger.verify()).ok
