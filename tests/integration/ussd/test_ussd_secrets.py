"""No PIN digits in clear anywhere: session stores (memory and Redis), database, logs, metrics.

A user's PIN travels in the USSD `text` of every later request of the session; this walks
an account creation, a login, a wrong PIN and a PIN change, then reads back every place
twinhub writes to and looks for each PIN as a word of its own.
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator

import pytest
from redis.asyncio import Redis
from sqlalchemy import select

from tests.conftest import REDIS_URL, Gateway, new_phone
from tests.support.ussd_flows import create_account, log_in
from twinhub.db.models import Base
from twinhub.logging import configure_logging

FIRST_PIN, WRONG_PIN, NEW_PIN = "58213", "40692", "71946"


def found(pin: str, text: str) -> bool:
    """The PIN as typed: not inside a longer run of letters or digits (a hex digest or a
    timestamp may hold five digits in a row by chance)."""
    return re.search(rf"(?<![0-9A-Za-z.]){pin}(?![0-9A-Za-z])", text) is not None


@pytest.fixture
def captured_logs() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    configure_logging("debug", "json", stream)
    yield stream
    root.handlers[:] = handlers
    root.setLevel(level)


async def test_no_pin_in_clear_after_login_and_pin_change(
    gateway: Gateway, captured_logs: io.StringIO
) -> None:
    phone = new_phone()
    customer_id = await create_account(gateway, phone, "Amina Otieno", FIRST_PIN)
    journey, reply = await log_in(gateway, phone, customer_id, WRONG_PIN)
    assert "Wrong PIN" in reply, reply
    reply = await journey.send(FIRST_PIN)
    assert reply.startswith("CON Hello"), reply
    await journey.send("2")  # Change PIN
    await journey.send(FIRST_PIN)
    await journey.send(NEW_PIN)
    reply = await journey.send(NEW_PIN)
    assert "PIN changed" in reply, reply
    retried = await gateway.say(journey.session_id, phone, journey.text or "")
    assert retried == reply  # the retry is still recognised without the text being kept
    _, again = await log_in(gateway, phone, customer_id, NEW_PIN)
    assert again.startswith("CON Hello"), again

    places: dict[str, str] = {"logs": captured_logs.getvalue()}
    assert places["logs"], "the gateway logged nothing: the scan would prove nothing"
    places["metrics"] = (await gateway.client.get("/metrics")).text

    store = gateway.app.state.engine.store
    if gateway.settings.storage.redis_url is None:
        places["sessions"] = "\n".join(repr(record) for record in store._records.values())
    else:
        redis = Redis.from_url(REDIS_URL)
        try:
            prefix = gateway.settings.storage.redis_key_prefix
            values = []
            async for key in redis.scan_iter(match=f"{prefix}*", count=1000):
                kind = (await redis.type(key)).decode()
                if kind == "string":
                    values.append((await redis.get(key) or b"").decode(errors="replace"))
                elif kind == "zset":
                    values.extend(m.decode() for m in await redis.zrange(key, 0, -1))
                values.append(key.decode(errors="replace"))
            places["redis"] = "\n".join(values)
        finally:
            await redis.aclose()
    assert journey.session_id in places.get("sessions", places.get("redis", ""))

    platform = gateway.app.state.platform
    rows = []
    async with platform.engine.connect() as connection:
        for table in Base.metadata.sorted_tables:
            for row in await connection.execute(select(table)):
                # Text, bytes and JSON: where a PIN could be written. Numbers and times are
                # left out: in a database shared by a whole run, some integer (a reading's
                # seq, a count) or a timestamp's microseconds equals five random digits.
                texts = [v for v in row if isinstance(v, str | bytes | dict | list)]
                rows.append(" ".join(repr(value) for value in texts))
    places["database"] = "\n".join(rows)
    assert customer_id in places["database"]

    for pin in (FIRST_PIN, WRONG_PIN, NEW_PIN):
        for place, text in places.items():
            assert not found(pin, text), f"PIN {pin} in clear in {place}"
