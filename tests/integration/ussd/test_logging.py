"""No PIN, key or token ever reaches a log line, at any level."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import orjson
import pytest
import structlog

from tests.conftest import GatewayFactory, new_phone
from tests.support.ussd_flows import create_account, log_in
from twinhub.logging import REDACTED, configure_logging, get_logger, mask_phone, scrub


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    """Route all logging through twinhub's pipeline, at DEBUG, into a buffer."""
    stream = io.StringIO()
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    # (The audit log whole, whatever a test before in this process quieted: building the
    # large programme quiets it for good.)
    audit = logging.getLogger("twinhub.audit")
    saved_audit = audit.level
    audit.setLevel(logging.NOTSET)
    configure_logging("debug", "json", stream)
    yield stream
    root.handlers[:] = saved_handlers
    root.setLevel(saved_level)
    audit.setLevel(saved_audit)
    structlog.reset_defaults()


async def test_full_account_journey_logs_no_secret(
    make_gateway: GatewayFactory, log_stream: io.StringIO
) -> None:
    token, key = "operator-token-3f9d", "ab" * 32
    gateway = await make_gateway(ussd_operator_token=token, pin_encryption_key=key)
    phone = new_phone()
    pin, new_pin = "58213", "73920"
    customer_id = await create_account(gateway, phone, "Amina Otieno", pin)
    journey, _ = await log_in(gateway, phone, customer_id, "60719")  # a wrong PIN, logged
    await journey.send(pin)
    for step in ("2", pin, new_pin, new_pin):
        await journey.send(step)
    await gateway.client.get("/api/ussd/sessions", headers={"Authorization": f"Bearer {token}"})
    await gateway.client.get("/api/ussd/sessions", headers={"Authorization": "Bearer wrong"})
    output = log_stream.getvalue()
    lines = [orjson.loads(line) for line in output.splitlines()]
    assert any(line["event"] == "customer created" for line in lines)  # logging did happen
    assert any(line["event"] == "ussd session started" for line in lines)
    for secret in (pin, new_pin, "60719", token, key, phone):
        assert secret not in output, secret


def test_secret_keys_and_embedded_credentials_are_redacted(log_stream: io.StringIO) -> None:
    log = get_logger("test")
    log.info(
        "connecting",
        pin="12345",
        text="2*2*Amina*58213",
        authorization="Bearer abc",
        url="redis://user:hunter2@cache:6379/0",
        note="sent Authorization: Bearer s3cr3t-token today",
    )
    record = orjson.loads(log_stream.getvalue().splitlines()[-1])
    assert record["pin"] == REDACTED
    assert record["text"] == REDACTED
    assert record["authorization"] == REDACTED
    assert "hunter2" not in record["url"] and record["url"].startswith("redis://")
    assert "s3cr3t-token" not in record["note"]


def test_exceptions_are_scrubbed_too(log_stream: io.StringIO) -> None:
    try:
        raise ConnectionError("cannot reach postgresql://twin:pa55word@db:5432/twin")
    except ConnectionError:
        logging.getLogger("stdlib").exception("database down")
    assert "pa55word" not in log_stream.getvalue()
    assert "database down" in log_stream.getvalue()


def test_helpers() -> None:
    assert mask_phone("+254712345678") == "+254******678"
    assert scrub("no secrets here") == "no secrets here"


def test_scrub_skips_only_what_could_not_match() -> None:
    """scrub runs each pattern only where it could match: what it answers is what both
    substitutions answer on every kind of text, case and non-ASCII letters included."""
    from twinhub.logging import _BEARER, _URL_CREDENTIALS

    def both(value: str) -> str:
        value = _URL_CREDENTIALS.sub(r"\g<scheme>***@", value)
        return _BEARER.sub(r"\1" + REDACTED, value)

    texts = [
        "plain",
        "",
        "user@example.org wrote",
        "redis://user:hunter2@cache:6379/0",
        "HTTPS://a:b@host/x and Bearer t0k",
        "BEARER\tabc;def",
        "bEaReR   x,y",
        "İstanbul bearer 99 ſecret",
        "bearer",
        "a bearer-less note",
        "postgresql://twin:pa55@db/twin?x=@",
        "Ⓑearer q",
    ]
    for text in texts:
        assert scrub(text) == both(text), text
    assert scrub("Bearer abc") == f"Bearer {REDACTED}"
