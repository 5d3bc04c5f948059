"""USSD in households' languages, and Stove Status, over real HTTP on both backends.

- every screen of every flow, walked in every language, fits 182 characters in GSM-7;
- the language chosen is remembered per phone (before log-in) and per customer (after);
- each service code has its default; an unknown code anywhere falls back without a word;
- Stove Status reads real telemetry (sent through the registry's telemetry API), and a
  reported problem is an event on /v1/events and a row of the support queue.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.conftest import GatewayFactory, new_phone
from tests.integration.console.test_console import console, sign_in
from tests.integration.ussd.test_ussd_stoves import PIN, Programme, programme  # noqa: F401 (fixture)
from tests.support.ussd_flows import Journey, create_account, log_in
from tests.unit.test_ussd_screens import GSM7
from twinhub.db.engine import sqlite_file
from twinhub.db.visibility import EVERYTHING
from twinhub.kernel.identifiers import customer_did
from twinhub.ussd.i18n import LANGUAGES
from twinhub.ussd.languages import LanguageMemory, phone_key
from twinhub.ussd.screens import MAX_SCREEN

CODES = list(LANGUAGES)
SW_WELCOME = "CON Karibu twinhub\n1. Jua Zaidi\n2. Akaunti\n3. Lugha\n*. Ondoka"
EN_WELCOME = "CON Welcome to twinhub\n1. Know More\n2. Account Menu\n3. Language\n*. Exit"


class Walker(Journey):
    """A journey that checks every reply it gets: length and alphabet."""

    seen: list[str]

    async def step(self, answer: str) -> str:
        reply = await self.send(answer)
        self.check(reply)
        return reply

    def check(self, reply: str) -> None:
        self.seen = [*getattr(self, "seen", []), reply]
        assert len(reply) <= MAX_SCREEN, (len(reply), reply)
        assert set(reply) <= GSM7, (set(reply) - GSM7, reply)


async def choose_language(journey: Journey, code: str) -> str:
    """From the welcome menu: Language, then the code's number."""
    await journey.send("3")
    return await journey.send(str(CODES.index(code) + 1))


async def test_the_choice_is_remembered_per_phone(programme: Programme) -> None:  # noqa: F811
    gateway = programme.gateway
    phone = new_phone()
    journey = Journey(gateway, phone)
    assert await journey.dial() == EN_WELCOME
    menu = await journey.send("3")
    assert menu == (
        "CON Language\n1. English\n2. Francais\n3. Kiswahili\n4. Chinyanja\n5. Ichibemba\n"
        "0. Back\n*. Exit"
    )
    assert await journey.send("9") == "CON Invalid choice.\n" + menu[4:]
    assert await journey.send("3") == "CON Lugha imebadilishwa.\n" + SW_WELCOME[4:]
    assert await journey.exit() == "END Asante kwa kutumia twinhub. Kwaheri."
    # A new session of the same phone speaks Swahili; another phone still English.
    assert await Journey(gateway, phone).dial() == SW_WELCOME
    assert await Journey(gateway, new_phone()).dial() == EN_WELCOME


async def test_the_choice_is_remembered_per_customer(programme: Programme) -> None:  # noqa: F811
    gateway = programme.gateway
    phone = new_phone()
    customer_id = await create_account(gateway, phone, "Amina Wanjiru", PIN)
    journey, menu = await log_in(gateway, phone, customer_id, PIN)
    assert menu.startswith("CON Hello Amina\n")
    await journey.send("8")
    changed = await journey.send("2")  # French
    assert changed.startswith("CON Langue modifiée.\nBonjour Amina\n1. Mon compte\n")
    # Another phone (English before log-in) gets the customer's French once logged in.
    other = Journey(gateway, new_phone())
    assert await other.dial() == EN_WELCOME
    for answer in ("2", "1", customer_id):
        await other.send(answer)
    assert (await other.send(PIN)).startswith("CON Bonjour Amina\n")
    assert await other.send("3") == "END Vous avez été déconnecté. Au revoir."


async def test_default_per_service_code_and_silent_fallbacks(
    make_gateway: GatewayFactory,
) -> None:
    gateway = await make_gateway(
        ussd_default_language="zz",  # not served: English
        ussd_default_languages="*384*2#=sw, *384*3#=xx, junk, *384*4#=Bemba",
        ussd_rate_limit="1000000/minute",
    )

    async def welcome(code: str, phone: str | None = None) -> str:
        response = await gateway.dial("s-" + code + new_phone(), phone or new_phone(), "", code)
        assert response.status_code == 200
        return response.text

    assert await welcome("*384*1#") == EN_WELCOME
    assert await welcome("*384*2#") == SW_WELCOME
    assert await welcome("*384*3#") == EN_WELCOME  # unknown code in the setting
    assert (await welcome("*384*4#")).startswith("CON Mwaiseni ku twinhub\n")
    # A remembered code that is no longer served (or never was) falls back the same way.
    phone = new_phone()
    memory = LanguageMemory(gateway.app.state.platform.sessionmaker)
    await memory.remember("tlh", phone_key(phone))
    assert await welcome("*384*2#", phone) == SW_WELCOME
    assert await welcome("*384*1#", phone) == EN_WELCOME


@pytest.mark.parametrize("code", CODES)
async def test_every_screen_of_every_flow_fits_in_every_language(
    programme: Programme,  # noqa: F811
    code: str,
) -> None:
    """Drive every flow (and the notices they carry) in one language, checking each reply."""
    gateway = programme.gateway
    phone = new_phone()
    walker = Walker(gateway, phone)
    walker.check(await walker.dial())
    await walker.step("3")
    await walker.step(str(CODES.index(code) + 1))
    for path in (("1", "1", "0", "2", "0", "3", "7", "0", "0"), ("2", "7", "0")):
        for answer in path:
            await walker.step(answer)
    # Create an account, with every refusal on the way.
    for answer in ("2", "2", "x", "Amina Wanjiru", "12", "11111", PIN, "00000", PIN, PIN):
        created = await walker.step(answer)
    customer_id = next(w for w in created.split() if w.rstrip(".").isdigit()).rstrip(".")
    await walker.step("9")
    await walker.step("1")  # main menu
    for answer in ("1", "0", "2", "123", "99999", "99998", PIN, "2", "2", "1"):
        await walker.step(answer)  # details; change PIN: wrong PIN notices, too easy
    for answer in ("0", "2", PIN, "58219", "58218", "0", "9"):
        await walker.step(answer)
    # Stoves, a report with its notices, claims, credits, Stove Status, a problem.
    owner = customer_did(customer_id)
    for name in ("Jiko Bora Nyumbani Kubwa", "Jiko Ndogo", "Jiko Tatu", "Jiko Nne"):
        await programme.stove(owner, name)
    for answer in ("4", "9", "9", "0", "0", "1", "3", "1", "x", "0", "1001", "5", "2", "1"):
        await walker.step(answer)
    for answer in ("0", "0", "0", "5", "0", "6", "0", "7", "9", "1", "7", "9", "1", "2", "1"):
        await walker.step(answer)
    for answer in ("0", "0", "0", "0", "8", "7", "0", "3"):
        await walker.step(answer)
    assert walker.seen[-1].startswith("END ")
    expired = await gateway.say(walker.session_id, phone, walker.text + "*1")
    walker.check(expired)
    assert len(walker.seen) > 70
    # The language really is the one chosen: the main menu's words are not English.
    if code != "en":
        assert not any("My Stoves" in reply for reply in walker.seen)


async def test_stove_status_reads_telemetry_and_problems_become_events(
    programme: Programme,  # noqa: F811
) -> None:
    world, registry = programme.world, programme.world.registry
    phone = new_phone()
    customer_id = await create_account(programme.gateway, phone, "Amina Wanjiru", PIN)
    stove = await programme.stove(customer_did(customer_id), "Jiko A12")
    token = await registry.client.post(
        f"/v1/domains/{stove}/device-tokens", json={"label": "meter board"}
    )
    assert token.status_code == 201, token.text
    journey, _ = await log_in(programme.gateway, phone, customer_id, PIN)
    status = await journey.send("7")  # one stove: straight to it
    assert status == (
        "CON Jiko A12\nNo data from stove yet\nNo cooking recorded\n"
        "Cooked 0 times this month, 0.0 kWh\n1. Report a problem\n0. Back\n*. Exit"
    )
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    cooked = max(now - timedelta(minutes=20), now.replace(day=1))
    readings = [
        {"seq": 1, "time": cooked.isoformat(), "values": {"session": "start", "energyKwh": 0.5}},
        {"seq": 2, "time": (cooked + timedelta(minutes=5)).isoformat(), "values": {"energyKwh": 1}},
        {
            "seq": 3,
            "time": (cooked + timedelta(minutes=9)).isoformat(),
            "values": {"session": "end"},
        },
    ]
    async with registry.as_key(token.json()["token"]) as device:
        sent = await device.post(f"/v1/domains/{stove}/telemetry", json={"readings": readings})
    assert sent.status_code in (200, 201, 202), sent.text
    ended = cooked + timedelta(minutes=9)
    assert await journey.send("0") is not None  # back to the main menu
    status = await journey.send("7")
    assert status == (
        f"CON Jiko A12\nOnline now\nLast cooked {ended:%d/%m %H:%M}\n"
        "Cooked 1 time this month, 1.5 kWh\n1. Report a problem\n0. Back\n*. Exit"
    )
    # Report a problem: it is an event on /v1/events and a row of the support queue.
    start = int((await registry.client.get("/v1/events")).json()["nextCursor"])
    kinds = await journey.send("1")
    assert kinds.startswith("CON Report a problem\n1. Will not start\n2. Smoke or bad smell\n")
    assert await journey.send("2") == (
        "CON Report Smoke or bad smell for Jiko A12?\n1. Confirm\n0. Back\n*. Exit"
    )
    sent_reply = await journey.send("1")
    assert sent_reply.startswith("CON Problem reported. Ref ")
    reference = sent_reply.split("Ref ")[1].split(".")[0]
    assert await journey.send("1") == "CON Invalid choice.\n" + sent_reply[4:]  # no resend
    await registry.platform.events.sequencer.run_until_idle()
    events = await registry.client.get(
        "/v1/events", params={"after": start, "type": "stove.problem_reported"}
    )
    assert events.status_code == 200, events.text
    # Other modules' problem reports on the shared PostgreSQL database may be numbered by
    # this sequencer run too: only this stove's are this test's.
    items = [e for e in events.json()["items"] if e["subject"] == stove]
    assert [e["data"]["reference"] for e in items] == [reference]
    assert items[0]["subject"] == stove
    assert items[0]["actor"] == customer_did(customer_id)
    assert items[0]["data"]["kind"] == "smoke"
    queue = await programme.platform.stove_care.open_problems(EVERYTHING)
    assert reference in [problem.reference for problem in queue]
    async with console(registry) as browser:
        # A reader of the stove's organisation (its controller) sees its household's report.
        controller = (await registry.client.get(f"/v1/domains/{stove}")).json()["controller"][0]
        token, _ = await registry.platform.api_keys.create(controller, ["reader"])
        await sign_in(browser, token)
        page = await browser.get("/console/support")
        assert page.status_code == 200
        assert f'id="problem-{reference}"' in page.text and "smoke" in page.text
    # The same open problem reported again is the same report: no second event.
    again = await programme.platform.stove_care.report_problem(customer_id, stove, "smoke")
    assert again.reference == reference
    await registry.platform.events.sequencer.run_until_idle()
    events = await registry.client.get(
        "/v1/events", params={"after": start, "type": "stove.problem_reported"}
    )
    assert [e["subject"] for e in events.json()["items"]].count(stove) == 1
    del world


class CountingSessions:
    """A sessionmaker that counts the sessions opened for reads."""

    def __init__(self, sessions: Any) -> None:
        self._sessions = sessions
        self.reads = 0

    def __call__(self) -> Any:
        self.reads += 1
        return self._sessions()

    def begin(self) -> Any:
        return self._sessions.begin()


async def test_choices_are_cached_and_a_change_reaches_every_worker(
    programme: Programme,  # noqa: F811
) -> None:
    """A new session of a phone seen before costs the database nothing, "no choice"
    included; a choice made on one worker is what every worker reads next (with Redis)."""
    platform = programme.gateway.app.state.platform
    prefix = platform.settings.storage.redis_key_prefix
    one = CountingSessions(platform.sessionmaker)
    memory = LanguageMemory(one, platform.redis, prefix)  # type: ignore[arg-type]
    key = phone_key(new_phone())
    assert await memory.recalled(key) is None
    assert await memory.recalled(key) is None
    assert one.reads == 1
    await memory.remember("sw", key)
    assert await memory.recalled(key) == "sw"
    assert one.reads == 1
    if platform.redis is not None:
        other = CountingSessions(platform.sessionmaker)
        worker = LanguageMemory(other, platform.redis, prefix)  # type: ignore[arg-type]
        assert await worker.recalled(key) == "sw"
        await worker.remember("fr", key)
        assert await memory.recalled(key) == "fr"
        assert other.reads == 0 and one.reads == 1


async def test_a_sqlite_file_is_read_on_a_connection_of_its_own(
    programme: Programme,  # noqa: F811
    tmp_path: Any,
) -> None:
    """On a SQLite file a cache miss reads through the read-only connection, not an ORM
    session, and sees what the ORM wrote; a file it cannot open falls back to the ORM read.
    PostgreSQL (no file) reads through the ORM."""
    platform = programme.gateway.app.state.platform
    path = sqlite_file(platform.settings.storage.resolved_database_url)
    chosen, unknown = phone_key(new_phone()), phone_key(new_phone())
    await LanguageMemory(platform.sessionmaker).remember("sw", chosen)
    counting = CountingSessions(platform.sessionmaker)
    fresh = LanguageMemory(counting, sqlite_path=path)  # type: ignore[arg-type]
    assert await fresh.recalled(chosen) == "sw"
    assert await fresh.recalled(unknown) is None
    assert counting.reads == (0 if path else 2)
    fresh.close()
    missing = CountingSessions(platform.sessionmaker)
    broken = LanguageMemory(missing, sqlite_path=str(tmp_path / "absent.db"))  # type: ignore[arg-type]
    assert await broken.recalled(chosen) == "sw"
    assert missing.reads == 1
    broken.close()
