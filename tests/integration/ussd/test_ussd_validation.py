"""Validation of `POST /api/ussd` (seed part B, rules 1 to 5), and the JSON errors around it.

Every invalid request is answered 200 text/plain `END Invalid input. Please try again.` and
changes no stored state: no session is created, and an existing one keeps its state, its
last answer (a retry still gets the stored reply) and its phone number.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpx
import orjson
import pytest
from asgi_lifespan import LifespanManager

from tests.conftest import (
    Backend,
    Gateway,
    GatewayFactory,
    backend_values,
    new_phone,
    new_session_id,
)
from twinhub.settings import Settings
from twinhub.ussd.app import create_ussd_app


# -- one running gateway per backend for this module ----------------------------------------
@dataclass
class ModuleGateways:
    """This module's gateways by backend, each started at its first test, all stopped at the
    module's end (not a parametrised module fixture: in a shuffled order its instances would
    be stopped and started again at every change of backend)."""

    stack: AsyncExitStack
    settings: dict[str, Settings] = field(default_factory=dict)
    running: dict[str, Gateway] = field(default_factory=dict)


@pytest.fixture(scope="module")
async def module_gateways() -> AsyncIterator[ModuleGateways]:
    async with AsyncExitStack() as stack:
        yield ModuleGateways(stack)


@pytest.fixture
def module_settings(
    backend: Backend,
    module_gateways: ModuleGateways,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> Settings:
    """Synchronous, so that it may ask for the session's async database fixtures. The whole
    module's requests come from one client address: no rate limit is what these tests see."""
    made = module_gateways.settings
    if str(backend) not in made:
        values = backend_values(backend, tmp_path_factory.mktemp("ussd"), request)
        made[str(backend)] = Settings(**{**values, "ussd_rate_limit": "1000000/minute"})
    return made[str(backend)]


@pytest.fixture
async def gateway(
    backend: Backend, module_settings: Settings, module_gateways: ModuleGateways
) -> Gateway:
    """Overrides conftest's per-test gateway: one app per backend serves this whole module
    (four hundred app starts cost more than all the requests). Every test makes sessions
    of its own (new session ids and phones) and asks only about those; a test that needs
    other settings uses `make_gateway`."""
    running = module_gateways.running
    if str(backend) not in running:
        running[str(backend)] = await module_gateways.stack.enter_async_context(
            serving(module_settings)
        )
    return running[str(backend)]


@asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[Gateway]:
    app = create_ussd_app(settings=settings)
    async with (
        LifespanManager(app, startup_timeout=30) as manager,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=manager.app, client=("127.0.0.1", 40000)),
            base_url="http://ussd.test",
        ) as client,
    ):
        yield Gateway(app=app, client=client, settings=settings)


INVALID = "END Invalid input. Please try again."
WELCOME = "CON Welcome to twinhub\n1. Know More\n2. Account Menu\n3. Language\n*. Exit"
KNOW_MORE = "CON Know More\n1. About\n2. Pricing\n3. Delivery\n0. Back\n*. Exit"
FIELDS = ("sessionId", "serviceCode", "phoneNumber", "text")
FORM = "application/x-www-form-urlencoded"


def body(**overrides: Any) -> dict[str, Any]:
    """A valid initial-dial request of a new session; keyword arguments replace fields."""
    values: dict[str, Any] = {
        "sessionId": new_session_id(),
        "serviceCode": "*384*1#",
        "phoneNumber": new_phone(),
        "text": "",
    }
    values.update(overrides)
    return values


async def post_raw(
    gateway: Gateway, content: bytes | AsyncIterator[bytes], content_type: str | None
) -> httpx.Response:
    headers = {"content-type": content_type} if content_type is not None else {}
    return await gateway.client.post("/api/ussd", content=content, headers=headers)


async def post_json(gateway: Gateway, value: Any) -> httpx.Response:
    return await post_raw(gateway, orjson.dumps(value), "application/json")


async def post_form(
    gateway: Gateway, pairs: dict[str, str] | list[tuple[str, str]]
) -> httpx.Response:
    return await post_raw(gateway, urlencode(pairs).encode(), FORM)


def assert_invalid(response: httpx.Response) -> None:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == INVALID


def assert_welcome(response: httpx.Response) -> None:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == WELCOME


async def debug_info(gateway: Gateway, session_id: str) -> dict[str, Any]:
    response = await gateway.client.get(f"/api/ussd/debug/{session_id}")
    assert response.status_code == 200, response.text
    view = response.json()
    assert view["sessionId"] == session_id
    return view["debugInfo"]


async def active_sessions(gateway: Gateway) -> set[str]:
    listing = await gateway.client.get("/api/ussd/sessions")
    assert listing.status_code == 200, listing.text
    view = listing.json()
    assert view["count"] == len(view["activeSessions"])
    return set(view["activeSessions"])


async def assert_no_session(gateway: Gateway, session_id: str) -> None:
    response = await gateway.client.get(f"/api/ussd/debug/{session_id}")
    assert response.status_code == 404, response.text
    assert response.json()["error"]["code"] == "session_not_found"
    listing = await gateway.client.get("/api/ussd/sessions")
    assert listing.status_code == 200, listing.text
    assert session_id not in listing.json()["activeSessions"]


# -- accepted encodings --------------------------------------------------------------------


async def test_json_body_is_accepted(gateway: Gateway) -> None:
    assert_welcome(await post_json(gateway, body()))


@pytest.mark.parametrize(
    "content_type",
    ["application/json; charset=utf-8", "Application/JSON", "application/json ; charset=UTF-8"],
)
async def test_json_content_type_parameters_and_case(gateway: Gateway, content_type: str) -> None:
    assert_welcome(await post_raw(gateway, orjson.dumps(body()), content_type))


@pytest.mark.parametrize("content_type", [FORM, f"{FORM}; charset=UTF-8"])
async def test_form_body_is_accepted(gateway: Gateway, content_type: str) -> None:
    response = await post_raw(gateway, urlencode(body()).encode(), content_type)
    assert_welcome(response)


async def test_form_session_walks_the_menus(gateway: Gateway) -> None:
    fields = body()
    assert_welcome(await post_form(gateway, fields))
    response = await post_form(gateway, {**fields, "text": "1"})
    assert response.text == KNOW_MORE
    response = await post_form(gateway, {**fields, "text": "1*2"})
    assert response.text.startswith("CON Pricing\n")


async def test_json_and_form_requests_share_one_session(gateway: Gateway) -> None:
    fields = body()
    assert_welcome(await post_json(gateway, fields))
    assert (await post_form(gateway, {**fields, "text": "1"})).text == KNOW_MORE
    reply = (await post_json(gateway, {**fields, "text": "1*3"})).text
    assert reply.startswith("CON Delivery\n")


async def test_extra_fields_are_ignored_in_json(gateway: Gateway) -> None:
    extra = {"networkCode": "63902", "foo": [1, {"bar": None}], "sessionid": 5}
    assert_welcome(await post_json(gateway, {**body(), **extra}))


async def test_extra_fields_are_ignored_in_form(gateway: Gateway) -> None:
    assert_welcome(await post_form(gateway, {**body(), "networkCode": "63902", "x": ""}))


async def test_africas_talking_form_body(gateway: Gateway) -> None:
    """The body exactly as Africa's Talking encodes it: `+` of the number as %2B."""
    session_id, phone = new_session_id(), new_phone()
    raw = (
        f"sessionId={session_id}&serviceCode=%2A384%2A1%23"
        f"&phoneNumber=%2B{phone[1:]}&networkCode=63902&text="
    )
    assert_welcome(await post_raw(gateway, raw.encode(), FORM))
    raw = raw.removesuffix("text=") + "text=1"
    assert (await post_raw(gateway, raw.encode(), FORM)).text == KNOW_MORE


# -- phoneNumber ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "phone",
    [
        pytest.param("+1234567", id="7-digits"),
        pytest.param("+123456789012345", id="15-digits"),
        pytest.param("+254712345678", id="kenya"),
        pytest.param("+9" + "0" * 6, id="zeros-after-first"),
    ],
)
async def test_valid_phone_numbers(gateway: Gateway, phone: str) -> None:
    assert_welcome(await post_json(gateway, body(phoneNumber=phone)))


@pytest.mark.parametrize(
    "phone",
    [
        pytest.param("+123456", id="6-digits"),
        pytest.param("+1234567890123456", id="16-digits"),
        pytest.param("+0712345678", id="leading-zero"),
        pytest.param("254712345678", id="no-plus"),
        pytest.param("0712345678", id="national"),
        pytest.param("++254712345678", id="double-plus"),
        pytest.param("+", id="plus-only"),
        pytest.param("", id="empty"),
        pytest.param("+254 712 345 678", id="spaces"),
        pytest.param("+254-712-345-678", id="dashes"),
        pytest.param(" +254712345678", id="leading-space"),
        pytest.param("+254712345678 ", id="trailing-space"),
        pytest.param("+254712345678\n", id="trailing-newline"),
        pytest.param("\n+254712345678", id="leading-newline"),
        pytest.param("+25471234567\u0663", id="arabic-indic-digit"),
        pytest.param("+\u0662\u0665\u0664\u0667\u0661\u0662\u0663\u0664", id="arabic-indic-all"),
        pytest.param("+２５４７１２３４５６７８", id="fullwidth-digits"),
        pytest.param("+25471234567a", id="letter"),
        pytest.param("+254(712)345678", id="parentheses"),
    ],
)
async def test_invalid_phone_numbers(gateway: Gateway, phone: str) -> None:
    fields = body(phoneNumber=phone)
    assert_invalid(await post_json(gateway, fields))
    await assert_no_session(gateway, fields["sessionId"])


async def test_form_phone_with_unencoded_plus_is_a_space(gateway: Gateway) -> None:
    """In form encoding a raw `+` means a space, so the number does not start with `+`."""
    fields = body()
    raw = "&".join(
        f"{name}={fields[name] if name == 'phoneNumber' else urlencode({'v': fields[name]})[2:]}"
        for name in FIELDS
    )
    assert "phoneNumber=+2547" in raw
    assert_invalid(await post_raw(gateway, raw.encode(), FORM))


# -- serviceCode ---------------------------------------------------------------------------


@pytest.mark.parametrize("code", ["*384#", "*384*1#", "*1*2*3#", "*1#", "*384*12345*0#"])
async def test_valid_service_codes(gateway: Gateway, code: str) -> None:
    assert_welcome(await post_json(gateway, body(serviceCode=code)))


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("384#", id="no-star"),
        pytest.param("*384", id="no-hash"),
        pytest.param("**384#", id="double-star"),
        pytest.param("*384*#", id="empty-part"),
        pytest.param("*384**1#", id="empty-middle-part"),
        pytest.param("*abc#", id="letters"),
        pytest.param("", id="empty"),
        pytest.param("*#", id="no-digits"),
        pytest.param("#", id="hash-only"),
        pytest.param("*384##", id="double-hash"),
        pytest.param("*384#1", id="after-hash"),
        pytest.param(" *384#", id="leading-space"),
        pytest.param("*384#\n", id="trailing-newline"),
        pytest.param("*384 #", id="inner-space"),
        pytest.param("*\u0663\u0668\u0664#", id="arabic-indic-digits"),
    ],
)
async def test_invalid_service_codes(gateway: Gateway, code: str) -> None:
    fields = body(serviceCode=code)
    assert_invalid(await post_json(gateway, fields))
    await assert_no_session(gateway, fields["sessionId"])


# -- text ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("1" * 182, id="182-ones"),
        pytest.param(("1*2*" * 46)[:182], id="182-accumulated"),
        pytest.param("é" * 182, id="182-non-ascii"),
    ],
)
async def test_text_of_182_characters_is_accepted(gateway: Gateway, text: str) -> None:
    assert len(text) == 182
    response = await post_json(gateway, body(text=text))
    assert response.status_code == 200
    assert response.text.startswith("CON ")
    assert response.text != INVALID


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("1" * 183, id="183-ones"),
        pytest.param(("1*2*" * 46)[:183], id="183-accumulated"),
        pytest.param("é" * 183, id="183-non-ascii"),
        pytest.param("1" * 1000, id="1000"),
    ],
)
async def test_text_over_182_characters_is_invalid(gateway: Gateway, text: str) -> None:
    fields = body(text=text)
    assert_invalid(await post_json(gateway, fields))
    await assert_no_session(gateway, fields["sessionId"])


async def test_empty_text_is_the_initial_dial(gateway: Gateway) -> None:
    assert_welcome(await post_json(gateway, body(text="")))


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("1\n2", id="newline"),
        pytest.param("1\r", id="carriage-return"),
        pytest.param("\t1", id="tab"),
        pytest.param("\x00", id="nul"),
        pytest.param("1*\x1b", id="escape"),
        pytest.param("\x1f", id="unit-separator"),
        pytest.param("1\x7f", id="delete"),
        pytest.param("1\x85", id="c1-next-line"),
        pytest.param("\x9b1", id="c1-csi"),
    ],
)
async def test_control_characters_in_text_are_invalid(gateway: Gateway, text: str) -> None:
    fields = body(text=text)
    assert_invalid(await post_json(gateway, fields))
    await assert_no_session(gateway, fields["sessionId"])


# -- sessionId -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "session_id",
    [
        pytest.param("x", id="1-char"),
        pytest.param("ATUid_" + "a" * 94, id="100-chars"),
        pytest.param("é" * 100, id="100-non-ascii"),
    ],
)
async def test_valid_session_ids(gateway: Gateway, session_id: str) -> None:
    assert len(session_id) in (1, 100)
    assert_welcome(await post_json(gateway, body(sessionId=session_id)))
    assert (await debug_info(gateway, session_id))["state"] == "preMenu"


@pytest.mark.parametrize(
    "session_id",
    [
        pytest.param("", id="empty"),
        pytest.param("ATUid_" + "a" * 95, id="101-chars"),
        pytest.param("é" * 101, id="101-non-ascii"),
    ],
)
async def test_invalid_session_ids(gateway: Gateway, session_id: str) -> None:
    before = await active_sessions(gateway)
    assert_invalid(await post_json(gateway, body(sessionId=session_id)))
    assert await active_sessions(gateway) - before == set()  # no session was made


# -- missing fields and wrong types --------------------------------------------------------


@pytest.mark.parametrize("missing", FIELDS)
async def test_missing_json_field_is_invalid(gateway: Gateway, missing: str) -> None:
    fields = body()
    del fields[missing]
    assert_invalid(await post_json(gateway, fields))


@pytest.mark.parametrize("missing", FIELDS)
async def test_missing_form_field_is_invalid(gateway: Gateway, missing: str) -> None:
    fields = body()
    del fields[missing]
    assert_invalid(await post_form(gateway, fields))


WRONG_TYPES = [
    pytest.param(254712345678, id="int"),
    pytest.param(1.5, id="float"),
    pytest.param(None, id="null"),
    pytest.param([], id="empty-list"),
    pytest.param(["1"], id="list"),
    pytest.param({}, id="object"),
    pytest.param(True, id="true"),
    pytest.param(False, id="false"),
]


@pytest.mark.parametrize("value", WRONG_TYPES)
@pytest.mark.parametrize("field", FIELDS)
async def test_wrong_json_type_is_invalid(gateway: Gateway, field: str, value: Any) -> None:
    fields = body(**{field: value})
    before = await active_sessions(gateway)
    assert_invalid(await post_json(gateway, fields))
    assert await active_sessions(gateway) - before == set()  # no session was made


@pytest.mark.parametrize(
    "field, value",
    [("text", 1), ("text", 0), ("serviceCode", 384), ("sessionId", 12345)],
)
async def test_number_that_looks_right_is_still_invalid(
    gateway: Gateway, field: str, value: int
) -> None:
    assert_invalid(await post_json(gateway, body(**{field: value})))


@pytest.mark.parametrize(
    "value",
    [
        pytest.param([], id="empty-list"),
        pytest.param("list-of-body", id="list-of-body"),
        pytest.param("string", id="string"),
        pytest.param(42, id="number"),
        pytest.param(None, id="null"),
        pytest.param(True, id="bool"),
    ],
)
async def test_json_that_is_not_an_object_is_invalid(gateway: Gateway, value: Any) -> None:
    if value == "list-of-body":
        value = [body()]
    assert_invalid(await post_json(gateway, value))


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"{", id="unclosed"),
        pytest.param(b'{"sessionId": }', id="missing-value"),
        pytest.param(b'{"sessionId": "a",}', id="trailing-comma"),
        pytest.param(b"{'sessionId': 'a'}", id="single-quotes"),
        pytest.param(b'{"text": NaN}', id="nan"),
        pytest.param(b"\xff\xfe{}", id="not-utf8"),
        pytest.param(b'{"text": "\xff"}', id="not-utf8-in-string"),
        pytest.param(b'{"text": "\\ud800"}', id="lone-surrogate"),
        pytest.param(b"sessionId=a&text=", id="form-as-json"),
        pytest.param(b" ", id="blank"),
    ],
)
async def test_malformed_json_is_invalid(gateway: Gateway, raw: bytes) -> None:
    assert_invalid(await post_raw(gateway, raw, "application/json"))


async def test_valid_json_with_trailing_garbage_is_invalid(gateway: Gateway) -> None:
    fields = body()
    assert_invalid(await post_raw(gateway, orjson.dumps(fields) + b"x", "application/json"))
    await assert_no_session(gateway, fields["sessionId"])


@pytest.mark.parametrize("content_type", ["application/json", FORM, None])
async def test_empty_body_is_invalid(gateway: Gateway, content_type: str | None) -> None:
    assert_invalid(await post_raw(gateway, b"", content_type))


@pytest.mark.parametrize(
    "content_type",
    [
        pytest.param("text/plain", id="text-plain"),
        pytest.param("application/xml", id="xml"),
        pytest.param("application/jsonx", id="jsonx"),
        pytest.param("json", id="bare-json"),
        pytest.param("application/octet-stream", id="octet-stream"),
        pytest.param(None, id="none"),
    ],
)
async def test_unsupported_content_type_with_a_valid_json_body_is_invalid(
    gateway: Gateway, content_type: str | None
) -> None:
    fields = body()
    assert_invalid(await post_raw(gateway, orjson.dumps(fields), content_type))
    await assert_no_session(gateway, fields["sessionId"])


async def test_text_plain_with_a_valid_form_body_is_invalid(gateway: Gateway) -> None:
    assert_invalid(await post_raw(gateway, urlencode(body()).encode(), "text/plain"))


async def test_multipart_body_is_invalid(gateway: Gateway) -> None:
    fields = body()
    response = await gateway.client.post(
        "/api/ussd", data=fields, files={"upload": ("a.txt", b"x", "text/plain")}
    )
    assert response.request.headers["content-type"].startswith("multipart/form-data")
    assert_invalid(response)
    await assert_no_session(gateway, fields["sessionId"])


@pytest.mark.parametrize("repeated", FIELDS)
async def test_form_field_given_twice_is_invalid(gateway: Gateway, repeated: str) -> None:
    fields = body()
    pairs = [*fields.items(), (repeated, fields[repeated])]
    assert_invalid(await post_form(gateway, pairs))
    await assert_no_session(gateway, fields["sessionId"])


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"sessionId", id="no-equals"),
        pytest.param(b"&&&", id="only-separators"),
        pytest.param(b"%ff%fe=1", id="not-utf8-name"),
        pytest.param(b"\xff=1", id="raw-not-utf8"),
        pytest.param(b'{"sessionId": "a"}', id="json-as-form"),
    ],
)
async def test_malformed_form_body_is_invalid(gateway: Gateway, raw: bytes) -> None:
    assert_invalid(await post_raw(gateway, raw, FORM))


# -- body size -----------------------------------------------------------------------------


def padded_json(size: int) -> bytes:
    """A valid request of exactly `size` bytes, padded with an ignored extra field."""
    fields = body(networkCode="")
    shortfall = size - len(orjson.dumps(fields))
    assert shortfall >= 0
    fields["networkCode"] = "x" * shortfall
    raw = orjson.dumps(fields)
    assert len(raw) == size
    return raw


async def test_body_of_exactly_the_limit_is_accepted(gateway: Gateway) -> None:
    assert gateway.settings.ussd.max_body_bytes == 4096
    assert_welcome(await post_raw(gateway, padded_json(4096), "application/json"))


@pytest.mark.parametrize("size", [4097, 10_000, 1_000_000])
async def test_body_over_the_limit_is_invalid(gateway: Gateway, size: int) -> None:
    raw = padded_json(size)
    session_id = orjson.loads(raw)["sessionId"]
    assert_invalid(await post_raw(gateway, raw, "application/json"))
    await assert_no_session(gateway, session_id)


async def chunked(raw: bytes, size: int) -> AsyncIterator[bytes]:
    """The body in chunks, sent without Content-Length (Transfer-Encoding: chunked)."""
    for start in range(0, len(raw), size):
        yield raw[start : start + size]


async def test_chunked_body_within_the_limit_is_accepted(gateway: Gateway) -> None:
    raw = padded_json(4096)
    response = await post_raw(gateway, chunked(raw, 1000), "application/json")
    assert "content-length" not in response.request.headers
    assert_welcome(response)


async def test_chunked_body_over_the_limit_is_invalid(gateway: Gateway) -> None:
    raw = padded_json(4097)
    session_id = orjson.loads(raw)["sessionId"]
    response = await post_raw(gateway, chunked(raw, 512), "application/json")
    assert "content-length" not in response.request.headers
    assert_invalid(response)
    await assert_no_session(gateway, session_id)


async def test_body_limit_follows_the_setting(make_gateway: GatewayFactory) -> None:
    gateway = await make_gateway(ussd_max_body_bytes=1024)
    assert_welcome(await post_raw(gateway, padded_json(1024), "application/json"))
    assert_invalid(await post_raw(gateway, padded_json(1025), "application/json"))


@pytest.mark.parametrize(
    "declared",
    [
        pytest.param(b"4097", id="over-limit"),
        pytest.param(b"-1", id="negative"),
        pytest.param(b"1e3", id="exponent"),
        pytest.param(b"\xb2", id="superscript-two"),
    ],
)
async def test_bad_declared_content_length_is_invalid(gateway: Gateway, declared: bytes) -> None:
    """A Content-Length that is too large or not a decimal number is refused, never a 500.

    Sent through the ASGI stack directly: HTTP servers in front may already refuse some of
    these, but the app must not depend on it.
    """
    response = await gateway.client.post(
        "/api/ussd",
        content=orjson.dumps(body()),
        headers={"content-type": "application/json", "content-length": declared},
    )
    assert_invalid(response)


# -- an invalid request changes no stored state --------------------------------------------


async def start_in_know_more(gateway: Gateway) -> tuple[dict[str, Any], dict[str, Any]]:
    """A session on the Know More screen: its request fields and its debug record."""
    fields = body()
    assert_welcome(await post_json(gateway, fields))
    assert (await post_json(gateway, {**fields, "text": "1"})).text == KNOW_MORE
    info = await debug_info(gateway, fields["sessionId"])
    assert info["state"] == "knowMore"
    return fields, info


async def assert_still_in_know_more(
    gateway: Gateway, fields: dict[str, Any], before: dict[str, Any]
) -> None:
    assert await debug_info(gateway, fields["sessionId"]) == before
    # The last text is still "1": sending it again is a retry and gets the stored reply
    # (were it changed, "1" would be a new answer and lead to About).
    assert (await post_json(gateway, {**fields, "text": "1"})).text == KNOW_MORE
    assert (await post_json(gateway, {**fields, "text": "1*2"})).text.startswith("CON Pricing\n")
    assert (await debug_info(gateway, fields["sessionId"]))["state"] == "pricing"


MISSING = object()  # a field left out of the request

INVALID_FOLLOW_UPS = [
    pytest.param({"text": "1*" + "2" * 181}, id="text-183"),
    pytest.param({"text": "1*2\n"}, id="text-control"),
    pytest.param({"text": "1*2", "phoneNumber": "+0712345678"}, id="bad-phone"),
    pytest.param({"text": "1*2", "phoneNumber": None}, id="null-phone"),
    pytest.param({"text": "1*2", "serviceCode": "*384"}, id="bad-service-code"),
    pytest.param({"text": 12}, id="text-number"),
    pytest.param({"text": None}, id="text-null"),
    pytest.param({"text": "1**", "phoneNumber": MISSING}, id="exit-without-phone"),
    pytest.param({"text": "1**", "serviceCode": MISSING}, id="exit-without-service-code"),
    pytest.param({"text": MISSING}, id="no-text"),
]


@pytest.mark.parametrize("change", INVALID_FOLLOW_UPS)
async def test_invalid_json_request_leaves_the_session_unchanged(
    gateway: Gateway, change: dict[str, Any]
) -> None:
    fields, before = await start_in_know_more(gateway)
    request = {k: v for k, v in {**fields, **change}.items() if v is not MISSING}
    assert_invalid(await post_json(gateway, request))
    await assert_still_in_know_more(gateway, fields, before)


@pytest.mark.parametrize(
    "kind", ["form-twice", "form-missing-text", "text-plain", "too-large", "trailing-garbage"]
)
async def test_invalid_body_leaves_the_session_unchanged(gateway: Gateway, kind: str) -> None:
    fields, before = await start_in_know_more(gateway)
    exit_request = {**fields, "text": "1**"}
    if kind == "form-twice":
        response = await post_form(gateway, [*exit_request.items(), ("text", "1**")])
    elif kind == "form-missing-text":
        response = await post_form(gateway, {k: v for k, v in fields.items() if k != "text"})
    elif kind == "text-plain":
        response = await post_raw(gateway, orjson.dumps(exit_request), "text/plain")
    elif kind == "too-large":
        raw = orjson.dumps({**exit_request, "networkCode": "x" * 5000})
        response = await post_raw(gateway, raw, "application/json")
    else:
        response = await post_raw(gateway, orjson.dumps(exit_request) + b",", "application/json")
    assert_invalid(response)
    await assert_still_in_know_more(gateway, fields, before)


async def test_invalid_first_request_creates_no_session(gateway: Gateway) -> None:
    fields = body(text="1" * 183)
    assert_invalid(await post_json(gateway, fields))
    await assert_no_session(gateway, fields["sessionId"])
    # The same session id then starts normally, from the welcome menu.
    assert_welcome(await post_json(gateway, {**fields, "text": ""}))
    assert (await debug_info(gateway, fields["sessionId"]))["state"] == "preMenu"


async def test_invalid_shortcut_dial_creates_no_session(gateway: Gateway) -> None:
    fields = body(text="1*2", phoneNumber="+254 712 345 678")
    assert_invalid(await post_json(gateway, fields))
    await assert_no_session(gateway, fields["sessionId"])


@pytest.mark.parametrize("text", ["1", "1*2", "1**", "1*0", "2"])
async def test_other_phone_on_an_existing_session_is_invalid(gateway: Gateway, text: str) -> None:
    fields, before = await start_in_know_more(gateway)
    other = new_phone()
    assert other != fields["phoneNumber"]
    response = await post_json(gateway, {**fields, "phoneNumber": other, "text": text})
    assert_invalid(response)
    after = await debug_info(gateway, fields["sessionId"])
    assert after == before
    assert after["context"]["phoneNumber"] == fields["phoneNumber"]
    await assert_still_in_know_more(gateway, fields, before)


async def test_other_phone_cannot_retry_the_first_dial(gateway: Gateway) -> None:
    fields = body()
    assert_welcome(await post_json(gateway, fields))
    before = await debug_info(gateway, fields["sessionId"])
    assert_invalid(await post_json(gateway, {**fields, "phoneNumber": new_phone()}))
    assert await debug_info(gateway, fields["sessionId"]) == before


# -- JSON errors around the endpoint -------------------------------------------------------


def assert_json_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert set(error) == {"code", "message", "details"}
    assert error["code"] == code
    assert isinstance(error["message"], str)
    assert error["message"]
    assert error["details"] == []


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
async def test_other_methods_on_the_session_endpoint_are_405(gateway: Gateway, method: str) -> None:
    response = await gateway.client.request(method, "/api/ussd")
    assert_json_error(response, 405, "method_not_allowed")


@pytest.mark.parametrize("path", ["/nope", "/api", "/api/nope", "/api/ussd/nope", "/api/ussdx"])
async def test_unknown_paths_are_404(gateway: Gateway, path: str) -> None:
    assert_json_error(await gateway.client.get(path), 404, "not_found")


async def test_post_to_an_unknown_path_is_404(gateway: Gateway) -> None:
    response = await gateway.client.post("/api/ussd/nope", json=body())
    assert_json_error(response, 404, "not_found")


async def test_debug_of_an_unknown_session_is_a_404_json_error(gateway: Gateway) -> None:
    response = await gateway.client.get(f"/api/ussd/debug/{new_session_id()}")
    assert_json_error(response, 404, "session_not_found")
