"""Property-based tests of `POST /api/ussd`: whatever arrives, the gateway answers like USSD.

The real app (`create_ussd_app`) is served by uvicorn on 127.0.0.1 in a background thread,
once per backend for the whole module, and hypothesis drives it with a plain sync client:
hypothesis' `@given` and per-test async fixtures do not mix, a real HTTP server does.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
import uvicorn
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.conftest import BACKENDS, backend_values
from twinhub.settings import Settings
from twinhub.ussd.app import create_ussd_app

FIELDS = ("sessionId", "serviceCode", "phoneNumber", "text")
FORM = "application/x-www-form-urlencoded"
MAX_REPLY = 182
INVALID = "END Invalid input. Please try again."
UNAVAILABLE = "END Service temporarily unavailable. Please try again later."

PROPERTY_SETTINGS = settings(
    # `./dev fuzz` raises it (TWINHUB_FUZZ_EXAMPLES) for the long run.
    max_examples=int(os.environ.get("TWINHUB_FUZZ_EXAMPLES", "250")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -- the server ----------------------------------------------------------------------------


@pytest.fixture(scope="module", params=BACKENDS, ids=str)
def client(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[httpx.Client]:
    """A client of the real gateway served by uvicorn on a free loopback port."""
    values = backend_values(request.param, tmp_path_factory.mktemp("props"), request)
    app_settings = Settings(**{**values, "ussd_rate_limit": "1000000/minute"})
    app = create_ussd_app(settings=app_settings)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    # The default 5 s keep-alive would close the idle connection while hypothesis pauses
    # (shrinking, a slow example), racing the next request: the platform's own is 75 s.
    config = uvicorn.Config(
        app,
        lifespan="on",
        log_level="warning",
        access_log=False,
        timeout_keep_alive=app_settings.server.http_keep_alive_seconds,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("the uvicorn server did not start")
        time.sleep(0.02)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            yield http
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        listener.close()


def check_reply(response: httpx.Response) -> None:
    """The gateway's contract for any request: a USSD reply (or 429), never a server error."""
    assert response.status_code < 500, response.text
    assert response.status_code in (200, 429), (response.status_code, response.text)
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text.startswith(("CON ", "END ")), response.text
    assert len(response.text) <= MAX_REPLY, (len(response.text), response.text)
    # The database is healthy all along: "unavailable" would mean an exception in the engine.
    assert response.text != UNAVAILABLE
    event("invalid request" if response.text == INVALID else "screen")


# -- random bodies -------------------------------------------------------------------------

suffixes = itertools.count()


def valid_session_id() -> st.SearchStrategy[str]:
    """1 to 100 characters, none of them a control character; unique across examples."""
    letters = st.characters(exclude_categories=("Cc", "Cs"))
    return st.builds(
        lambda drawn, n: (drawn[:90] + f"~{n}")[:100],
        st.text(letters, max_size=95),
        st.builds(lambda: next(suffixes)),
    )


valid_phones = st.from_regex(r"\+[1-9][0-9]{6,14}", fullmatch=True)
valid_service_codes = st.from_regex(r"\*[0-9]{1,4}(\*[0-9]{1,3}){0,3}#", fullmatch=True)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=200)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
field_values = st.one_of(
    valid_phones,
    valid_service_codes,
    st.text(st.sampled_from("0123456789*#+"), max_size=200),
    st.text(max_size=200),
    json_values,
)
almost_valid_objects = st.builds(
    lambda base, changed, extra: {**extra, **base, **changed},
    st.fixed_dictionaries(
        {
            "sessionId": valid_session_id(),
            "serviceCode": valid_service_codes,
            "phoneNumber": valid_phones,
            "text": st.text(st.sampled_from("0123456789*"), max_size=190),
        }
    ),
    st.dictionaries(st.sampled_from(FIELDS), field_values, max_size=4),
    st.dictionaries(
        st.sampled_from(["networkCode", "sessionid", "Text", "", "x"]) | st.text(max_size=8),
        json_values,
        max_size=3,
    ),
)
json_documents = st.one_of(
    almost_valid_objects,
    st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=12), field_values, max_size=6),
    json_values,
)


@st.composite
def json_bodies(draw: st.DrawFn) -> bytes:
    document = draw(json_documents)
    return json.dumps(document, ensure_ascii=draw(st.booleans())).encode()


form_names = st.sampled_from([*FIELDS, "networkCode"]) | st.text(max_size=12)
form_bodies = st.one_of(
    st.builds(
        lambda fields, pairs: urlencode([*fields.items(), *pairs]).encode(),
        st.dictionaries(st.sampled_from(FIELDS), field_values.map(str), max_size=4),
        st.lists(st.tuples(form_names, st.text(max_size=60)), max_size=4),
    ),
    st.builds(lambda fields: urlencode(fields).encode(), almost_valid_objects),
    st.text(max_size=300).map(lambda text: text.encode()),
)
random_bytes = st.binary(max_size=5000)

COMMON_TYPES = [
    "application/json",
    "application/json; charset=utf-8",
    "application/problem+json",
    FORM,
    f"{FORM}; charset=UTF-8",
    "text/plain",
    "multipart/form-data; boundary=xyz",
    "application/octet-stream",
    "",
    ";",
]
content_types = st.one_of(
    st.none(),
    st.sampled_from(COMMON_TYPES),
    # HTTP strips spaces around a header value; the client refuses to send them.
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60).map(str.strip),
)


@st.composite
def random_requests(draw: st.DrawFn) -> tuple[bytes, str | None]:
    kind = draw(st.sampled_from(["json", "form", "bytes"]))
    body = draw({"json": json_bodies(), "form": form_bodies, "bytes": random_bytes}[kind])
    if draw(st.booleans()):
        content_type = {"json": "application/json", "form": FORM, "bytes": None}[kind]
    else:
        content_type = draw(content_types)
    return body, content_type


@PROPERTY_SETTINGS
@given(sent=random_requests())
def test_random_bodies_get_a_ussd_reply(client: httpx.Client, sent: tuple[bytes, Any]) -> None:
    body, content_type = sent
    headers = {"content-type": content_type} if content_type is not None else {}
    response = client.post("/api/ussd", content=body, headers=headers)
    check_reply(response)


@PROPERTY_SETTINGS
@given(body=json_bodies())
def test_random_json_bodies_get_a_ussd_reply(client: httpx.Client, body: bytes) -> None:
    response = client.post("/api/ussd", content=body, headers={"content-type": "application/json"})
    check_reply(response)


# -- random valid requests -----------------------------------------------------------------

names = st.one_of(
    st.from_regex(r"[A-Za-zéñøßŁ]{2,20}( [A-Za-zéñøßŁ'.-]{1,19}){0,2}", fullmatch=True),
    st.text(
        st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZéñøßŁ '.-"),
        min_size=1,
        max_size=45,
    ),
)
pins = st.from_regex(r"[0-9]{5}", fullmatch=True)
answers = st.one_of(
    st.sampled_from(["1", "2", "3", "0", "", "9", "00", " 1 "]),
    st.from_regex(r"[0-9]{1,10}", fullmatch=True),
    names,
    pins,
    st.text(st.characters(exclude_categories=("Cc", "Cs")), max_size=20),
)


@st.composite
def answer_paths(draw: st.DrawFn) -> list[str]:
    """Answers of one session; often through account creation, so deep screens come up."""
    prefix: list[str] = []
    if draw(st.booleans()):
        pin = draw(pins)
        prefix = ["2", "2", draw(names), pin, pin if draw(st.integers(0, 3)) else draw(pins)]
        new_pin = draw(pins)
        prefix += draw(
            st.sampled_from(
                [
                    [],
                    ["1"],  # main menu
                    ["1", "1"],  # my account
                    ["1", "1", "0", "3"],  # back, log out
                    ["1", "2", pin, new_pin, new_pin],  # change PIN
                ]
            )
        )
    return prefix + draw(st.lists(answers, max_size=6))


def accumulated(path: list[str]) -> list[str]:
    """What the gateway sends after each answer: everything typed so far, joined by `*`."""
    texts = ["*".join(path[: n + 1]) for n in range(len(path))]
    return [text for text in texts if len(text) <= MAX_REPLY]


@PROPERTY_SETTINGS
@given(
    session_id=valid_session_id(),
    phone=valid_phones,
    service_code=valid_service_codes,
    path=answer_paths(),
)
def test_valid_sessions_always_get_a_screen(
    client: httpx.Client, session_id: str, phone: str, service_code: str, path: list[str]
) -> None:
    fields = {"sessionId": session_id, "phoneNumber": phone, "serviceCode": service_code}
    ended = False
    for text in ["", *accumulated(path)]:
        response = client.post("/api/ussd", json={**fields, "text": text})
        check_reply(response)
        assert response.status_code == 200
        assert response.text != INVALID, text
        if ended:
            assert response.text.startswith("END "), (text, response.text)
        ended = response.text.startswith("END ")
    event(f"last screen: {response.text.splitlines()[0]}")


@PROPERTY_SETTINGS
@given(
    session_id=valid_session_id(),
    phone=valid_phones,
    service_code=valid_service_codes,
    text=st.one_of(
        st.builds("*".join, answer_paths()).map(lambda text: text[:MAX_REPLY]),
        st.text(st.sampled_from("0123*"), max_size=MAX_REPLY),
        st.text(st.characters(exclude_categories=("Cc", "Cs")), max_size=MAX_REPLY),
    ),
)
def test_valid_shortcut_dials_always_get_a_screen(
    client: httpx.Client, session_id: str, phone: str, service_code: str, text: str
) -> None:
    request = {"sessionId": session_id, "phoneNumber": phone, "serviceCode": service_code}
    response = client.post("/api/ussd", json={**request, "text": text})
    check_reply(response)
    assert response.status_code == 200
    assert response.text != INVALID, text
    # A retry of the same request gets the same reply.
    again = client.post("/api/ussd", json={**request, "text": text})
    assert again.text == response.text
