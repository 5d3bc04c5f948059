"""Multi-screen USSD journeys that several test files walk through."""

from __future__ import annotations

import re
from typing import Protocol

from tests.conftest import new_session_id


class Speaker(Protocol):
    """Anything that answers one USSD request: the in-process app or a served one."""

    async def say(self, session_id: str, phone: str, text: str) -> str: ...


class Journey:
    """One USSD session: keeps the accumulated text the way a telecom gateway does."""

    def __init__(self, gateway: Speaker, phone: str, session_id: str | None = None) -> None:
        self.gateway = gateway
        self.phone = phone
        self.session_id = session_id or new_session_id()
        self.text: str | None = None

    async def dial(self) -> str:
        self.text = ""
        return await self.gateway.say(self.session_id, self.phone, "")

    async def send(self, answer: str) -> str:
        assert self.text is not None, "dial first"
        self.text = answer if self.text == "" else f"{self.text}*{answer}"
        return await self.gateway.say(self.session_id, self.phone, self.text)

    async def exit(self) -> str:
        """The user's '*' arrives as an empty field between separators."""
        assert self.text is not None
        self.text = "*" if self.text == "" else f"{self.text}**"
        return await self.gateway.say(self.session_id, self.phone, self.text)


async def create_account(gateway: Speaker, phone: str, name: str, pin: str) -> str:
    """Walk the create-account flow; returns the customer ID shown to the user."""
    journey = Journey(gateway, phone)
    await journey.dial()
    await journey.send("2")
    await journey.send("2")
    await journey.send(name)
    await journey.send(pin)
    reply = await journey.send(pin)
    match = re.search(r"customer ID is (\d{8})", reply)
    assert match, reply
    return match.group(1)


async def log_in(gateway: Speaker, phone: str, customer_id: str, pin: str) -> tuple[Journey, str]:
    journey = Journey(gateway, phone)
    await journey.dial()
    await journey.send("2")
    await journey.send("1")
    await journey.send(customer_id)
    return journey, await journey.send(pin)
