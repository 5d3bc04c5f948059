"""My Stoves, reports, My Claims and My Credits over real HTTP, on both backends.

The USSD gateway and the registry API run on ONE platform (one database): the programme
(organisation, project verified by a real vote, oracle, collection, stoves) is built
through the registry API as tests/support/claims_world.py does, the customer through USSD.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.conftest import (
    BOOTSTRAP_KEY,
    Gateway,
    GatewayFactory,
    new_phone,
    running_registry,
    unique,
)
from tests.support.claims_world import World, build_world, metered_claim
from tests.support.ussd_flows import Journey, create_account, log_in
from tests.support.workflow_world import issue_claims
from tests.unit.test_ussd_screens import GSM7
from twinhub.kernel.errors import Invalid, NotFound
from twinhub.kernel.identifiers import customer_did
from twinhub.kernel.principals import Principal
from twinhub.services.claims import ClaimFilter
from twinhub.services.stoves import NoOpenCollection, StoveInactive
from twinhub.ussd.i18n import LANGUAGES
from twinhub.ussd.screens import CLAIMS_PER_PAGE, MAX_SCREEN
from twinhub.ussd.screens.words import short_id

PIN = "58213"
NAME = "Amina Wanjiru"
FOOTER = "0. Back\n*. Exit"
MAIN_MENU = (
    "CON Hello Amina\n1. My Account\n2. Change PIN\n3. Log Out\n"
    "4. My Stoves\n5. My Claims\n6. My Credits\n7. Stove Status\n8. Language\n*. Exit"
)
# The month a phone report covers (the one just ended), as the English menus name it.
REPORTED_MONTH = calendar.month_name[(datetime.now(UTC).replace(day=1) - timedelta(days=1)).month]
PER_PAGE = CLAIMS_PER_PAGE
SENT = re.compile(
    rf"^CON Report for {REPORTED_MONTH} sent\. Claim ([0-9a-f]{{6}}) is pending\."
    r"\n0\. Back\n\*\. Exit$"
)


def this_month() -> dict[str, str]:
    """The period a report that names none covers: the calendar month (UTC) just ended."""
    first = datetime.now(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    start = (first - timedelta(days=1)).replace(day=1)
    end = (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )
    return {"periodStart": f"{start:%Y-%m-%dT%H:%M:%SZ}", "periodEnd": f"{end:%Y-%m-%dT%H:%M:%SZ}"}


@dataclass
class Programme:
    gateway: Gateway
    world: World

    @property
    def platform(self) -> Any:
        return self.gateway.app.state.platform

    async def stove(
        self, owner: str, name: str, project: str | None = None, verified: bool = False
    ) -> str:
        """A stove of `project` (the verified one by default) owned by the customer whose
        DID is `owner` (its ownerCustomerId); verified by governance itself only if asked
        (for its claims to be approved)."""
        did = await self.world.domain(
            self.world.operator_client,
            {
                "type": "Device",
                "class": "did:ixo:protocol/clean-cooking",
                "metadata": {"name": name},
                "properties": {
                    "fuelType": "charcoal",
                    "serialNumber": unique("JK"),
                    "ownerCustomerId": owner.rsplit("/", 1)[1],
                },
                "controller": [self.world.operator],
                "relationships": {"project": [project or self.world.project]},
            },
        )
        if verified:
            await self.world.verify_batch(project or self.world.project, domains=[did])
        return did

    async def customer(self) -> tuple[str, Journey]:
        """A new customer, created and logged in through USSD; its ID and its session."""
        phone = new_phone()
        customer_id = await create_account(self.gateway, phone, NAME, PIN)
        journey, menu = await log_in(self.gateway, phone, customer_id, PIN)
        assert menu == MAIN_MENU
        return customer_id, journey

    async def claims_of(self, customer_id: str) -> list[dict[str, Any]]:
        page = await self.platform.claims.views.claims(
            ClaimFilter(agent=customer_did(customer_id)), None, 100
        )
        return page.items


@pytest.fixture
async def programme(make_gateway: GatewayFactory) -> AsyncIterator[Programme]:
    """A gateway, and a registry app on the gateway's own platform with a verified world."""
    gateway = await make_gateway(
        twinhub_bootstrap_api_key=BOOTSTRAP_KEY, ussd_rate_limit="1000000/minute"
    )
    async with running_registry(gateway.settings, gateway.app.state.platform) as registry:
        world = await build_world(registry)
        await world.collection()
        try:
            yield Programme(gateway=gateway, world=world)
        finally:
            await world.close()


async def test_a_customer_without_stoves_claims_or_credits(programme: Programme) -> None:
    _, journey = await programme.customer()
    assert await journey.send("4") == f"CON My Stoves\nNo stoves yet.\n{FOOTER}"
    assert await journey.send("1") == f"CON Invalid choice.\nMy Stoves\nNo stoves yet.\n{FOOTER}"
    assert await journey.send("0") == MAIN_MENU
    assert await journey.send("5") == f"CON My Claims\nNo claims yet.\n{FOOTER}"
    assert await journey.send("9") == f"CON Invalid choice.\nMy Claims\nNo claims yet.\n{FOOTER}"
    assert await journey.send("0") == MAIN_MENU
    assert await journey.send("6") == f"CON My Credits\nNo credits yet.\n{FOOTER}"
    assert await journey.send("0") == MAIN_MENU
    assert await journey.send("9") == "CON Invalid choice.\n" + MAIN_MENU[4:]


async def test_report_cooking_then_approval_shows_in_claims_and_credits(
    programme: Programme,
) -> None:
    customer_id, journey = await programme.customer()
    stove = await programme.stove(customer_did(customer_id), "Jiko A12", verified=True)
    listing = f"CON My Stoves\n1. Jiko A12 (active, verified)\n{FOOTER}"
    assert await journey.send("4") == listing
    assert await journey.send("2") == "CON Invalid choice.\n" + listing[4:]
    details = await journey.send("1")
    assert details.startswith("CON Jiko A12\nactive, project verified\nSerial: JK-")
    assert details.endswith(f"\n1. Report cooking\n2. Report fuel\n{FOOTER}")
    assert await journey.send("0") == listing
    await journey.send("1")
    assert await journey.send("3") == "CON Invalid choice.\n" + details[4:]
    question = (
        f"CON Report cooking\nJiko A12\nHow many meals were cooked?\nEnter 1 to 1000\n{FOOTER}"
    )
    assert await journey.send("1") == question
    # Wrong quantities re-show the question under a notice; "0" is Back, as everywhere.
    for typed, notice in (
        ("abc", "Enter digits only, e.g. 5."),
        ("2.5", "Enter digits only, e.g. 5."),
        ("00", "Enter a number from 1 to 1000."),
        ("1001", "Enter a number from 1 to 1000."),
        ("99999999999", "Enter a number from 1 to 1000."),
    ):
        assert await journey.send(typed) == f"CON {notice}\n{question[4:]}", typed
    assert await journey.send("0") == details
    await journey.send("1")
    confirm = f"CON Report 5 meals in {REPORTED_MONTH} for Jiko A12?\n1. Confirm\n{FOOTER}"
    assert await journey.send("5") == confirm
    assert await journey.send("2") == "CON Invalid choice.\n" + confirm[4:]
    assert await journey.send("0") == question  # back to change the number
    assert await journey.send("5") == confirm
    assert await programme.claims_of(customer_id) == []  # nothing before the confirmation
    sent = await journey.send("1")
    match = SENT.match(sent)
    assert match, sent
    [claim] = await programme.claims_of(customer_id)
    assert claim["id"].startswith(match.group(1))
    stored = await programme.platform.claims.views.claim(claim["id"])
    assert stored["status"] == "pending"
    assert stored["asset"] == stove
    assert stored["agent"] == customer_did(customer_id)
    month = this_month()
    assert stored["data"] == {"reportType": "cooking", "mealsCooked": 5, "channel": "ussd", **month}
    assert await journey.send("1") == "CON Invalid choice.\n" + sent[4:]  # no resend
    assert await journey.send("0") == details  # result -> the stove, never the confirmation
    assert await journey.send("0") == listing
    assert await journey.send("0") == MAIN_MENU
    year, month, day_of_month = stored["submittedAt"][:10].split("-")
    day = f"{day_of_month}/{month}/{year[2:]}"
    claims = f"CON My Claims\n{match.group(1)} {day} pending\n{FOOTER}"
    assert await journey.send("5") == claims
    assert await journey.send("0") == MAIN_MENU
    assert await journey.send("6") == f"CON My Credits\nNo credits yet.\n{FOOTER}"
    assert await journey.send("0") == MAIN_MENU

    # Credits follow from the methodology: a phone report about a stove with no telemetry
    # computes nothing, so it cannot be approved; it is rejected instead.
    oracle = Principal(programme.world.oracle_operator, frozenset({"writer"}))
    with pytest.raises(Invalid, match="Credits follow from the methodology"):
        await programme.platform.claims.evaluations.evaluate(claim["id"], "approved", oracle)
    await programme.platform.claims.evaluations.evaluate(
        claim["id"], "rejected", oracle, reason="no meter readings for the period"
    )
    assert await journey.send("6") == f"CON My Credits\nNo credits yet.\n{FOOTER}"
    assert await journey.send("0") == MAIN_MENU
    # A rejected claim says why, in a few words (not the evaluator's own).
    rejected = f"CON My Claims\n{match.group(1)} {day} rejected: no data\n{FOOTER}"
    assert await journey.send("5") == rejected
    assert (await journey.exit()) == "END Thank you for using twinhub. Goodbye."


async def test_report_fuel(programme: Programme) -> None:
    customer_id, journey = await programme.customer()
    await programme.stove(customer_did(customer_id), "Jiko B7")
    for answer in ("4", "1", "2"):
        reply = await journey.send(answer)
    assert reply == (
        f"CON Report fuel\nJiko B7\nHow many kg of fuel were bought?\nEnter 1 to 1000\n{FOOTER}"
    )
    assert await journey.send("1000") == (
        f"CON Report 1000 kg of fuel in {REPORTED_MONTH} for Jiko B7?\n1. Confirm\n{FOOTER}"
    )
    assert SENT.match(await journey.send("1"))
    [claim] = await programme.claims_of(customer_id)
    assert claim["data"] == {
        "reportType": "fuel",
        "fuelKg": 1000,
        "channel": "ussd",
        **this_month(),
    }


async def test_twelve_stoves_page_three_at_a_time(programme: Programme) -> None:
    customer_id, journey = await programme.customer()
    owner = customer_did(customer_id)
    names = [f"Jiko {n:02d}" for n in range(1, 13)]
    for name in names:
        await programme.stove(owner, name)
    # Neither another customer's stove nor one the customer only co-controls is theirs.
    other = await programme.platform.customers.create(new_phone(), "Other Person", "48213")
    await programme.stove(customer_did(other.customer_id), "Not Mine")
    await programme.world.domain(
        programme.world.operator_client,
        {
            "type": "Device",
            "class": "did:ixo:protocol/clean-cooking",
            "metadata": {"name": "Co Controlled"},
            "controller": [programme.world.operator, owner],
            "relationships": {"project": [programme.world.project]},
        },
    )

    def page(number: int, more: bool) -> str:
        rows = [
            f"{i}. {name} (active, verified)"
            for i, name in enumerate(names[(number - 1) * 3 : number * 3], 1)
        ]
        tail = "9. More\n" if more else ""
        return f"CON My Stoves {number}/4\n" + "\n".join(rows) + f"\n{tail}{FOOTER}"

    assert await journey.send("4") == page(1, more=True)
    assert await journey.send("9") == page(2, more=True)
    assert await journey.send("9") == page(3, more=True)
    assert await journey.send("9") == page(4, more=False)
    assert await journey.send("9") == "CON Invalid choice.\n" + page(4, more=False)[4:]
    assert await journey.send("4") == "CON Invalid choice.\n" + page(4, more=False)[4:]
    assert await journey.send("0") == page(3, more=True)
    details = await journey.send("2")  # the second row of page 3
    assert details.startswith("CON Jiko 08\n")
    assert await journey.send("0") == page(3, more=True)  # back to the page it came from
    assert await journey.send("0") == page(2, more=True)
    assert await journey.send("0") == page(1, more=True)
    assert await journey.send("0") == MAIN_MENU
    listed = [stove.name for stove in await programme.platform.stoves.stoves_of(customer_id)]
    assert listed == names


async def test_unverified_project_refuses_the_report(programme: Programme) -> None:
    customer_id, journey = await programme.customer()
    project = await programme.world.project_domain(verified=False)
    await programme.stove(customer_did(customer_id), "Jiko C3", project=project)
    assert await journey.send("4") == f"CON My Stoves\n1. Jiko C3 (active, unverified)\n{FOOTER}"
    assert (await journey.send("1")).startswith("CON Jiko C3\nactive, project not verified\n")
    await journey.send("1")
    await journey.send("4")
    refused = await journey.send("1")
    assert refused == f"CON Project not verified yet.\n{FOOTER}"
    assert await programme.claims_of(customer_id) == []
    assert (await journey.send("0")).startswith("CON Jiko C3\n")


async def test_a_project_without_an_open_collection_refuses_the_report(
    programme: Programme,
) -> None:
    customer_id, journey = await programme.customer()
    project = await programme.world.project_domain(verified=True)
    collection = await programme.world.collection(project=project)
    await programme.platform.claims.collections.set_state(
        collection["id"], "paused", Principal(programme.world.operator, frozenset({"writer"}))
    )
    await programme.stove(customer_did(customer_id), "Jiko D4", project=project)
    for answer in ("4", "1", "1", "7"):
        await journey.send(answer)
    assert await journey.send("1") == f"CON No open collection.\n{FOOTER}"
    assert await programme.claims_of(customer_id) == []


async def test_my_claims_pages_newest_first(programme: Programme) -> None:
    assert 3 <= PER_PAGE <= 5  # six claims: two pages
    customer_id, journey = await programme.customer()
    stoves = programme.platform.stoves
    owned = [await programme.stove(customer_did(customer_id), f"Jiko E{n}") for n in range(7)]
    # One report per stove: a stove's month is counted once.
    made = [(await stoves.report(customer_id, owned[n], "cooking", n))["id"] for n in range(1, 7)]
    newest_first = [claim_id[:6] for claim_id in reversed(made)]

    def rows(screen: str) -> list[str]:
        return [line.split()[0] for line in screen.splitlines()[1:] if line[1] != "."]

    first = await journey.send("5")
    assert first.startswith("CON My Claims 1/2\n") and "\n9. More\n" in first
    assert rows(first) == newest_first[:PER_PAGE]
    second = await journey.send("9")
    assert second.startswith("CON My Claims 2/2\n") and "9. More" not in second
    assert rows(second) == newest_first[PER_PAGE:]
    assert await journey.send("9") == "CON Invalid choice.\n" + second[4:]
    # A report made meanwhile (another channel) shifts nothing on the pages already cut.
    await stoves.report(customer_id, owned[0], "fuel", 2)
    assert rows(await journey.send("0")) == newest_first[:PER_PAGE]
    assert await journey.send("0") == MAIN_MENU
    assert rows(await journey.send("5"))[1:] == newest_first[: PER_PAGE - 1]


async def test_the_service_keeps_to_the_customers_own_stoves(programme: Programme) -> None:
    owner_id, _ = await programme.customer()
    other_id, _ = await programme.customer()
    stove = await programme.stove(customer_did(owner_id), "Jiko F6")
    service = programme.platform.stoves
    assert await service.stoves_of(other_id) == []
    with pytest.raises(NotFound):
        await service.report(other_id, stove, "cooking", 3)
    for kind, quantity in (("cooking", 0), ("fuel", 1001), ("cooking", True), ("boiling", 3)):
        with pytest.raises(Invalid):
            await service.report(owner_id, stove, kind, quantity)
    assert await programme.claims_of(other_id) == []
    assert await programme.claims_of(owner_id) == []
    orphan = await programme.world.project_domain(verified=True)
    lonely = await programme.stove(customer_did(owner_id), "Jiko G7", project=orphan)
    with pytest.raises(NoOpenCollection):
        await service.report(owner_id, lonely, "cooking", 3)
    assert await service.balance(owner_id) == []


async def test_a_deactivated_stove_is_listed_but_takes_no_report(programme: Programme) -> None:
    customer_id, journey = await programme.customer()
    stove = await programme.stove(customer_did(customer_id), "Jiko H8")
    operator = Principal(programme.world.operator, frozenset({"writer"}))
    await programme.platform.domains.deactivate(stove, operator, None)
    assert await journey.send("4") == f"CON My Stoves\n1. Jiko H8 (deactivated, verified)\n{FOOTER}"
    assert (await journey.send("1")).startswith("CON Jiko H8\ndeactivated, project verified\n")
    for answer in ("2", "3"):
        await journey.send(answer)
    assert await journey.send("1") == f"CON This stove is not active.\n{FOOTER}"
    assert await programme.claims_of(customer_id) == []
    with pytest.raises(StoveInactive):
        await programme.platform.stoves.report(customer_id, stove, "fuel", 3)


async def test_a_stove_month_is_counted_once_whatever_the_channel(programme: Programme) -> None:
    customer_id, journey = await programme.customer()
    owner = customer_did(customer_id)
    stove = await programme.stove(owner, "Jiko Z1")
    other = await programme.stove(owner, "Jiko Z2")
    owner_client = await programme.world.client(owner, "reader", "writer")
    # By phone first: the same report sent by API is refused and names the phone's claim.
    for answer in ("4", "1", "1", "5"):
        await journey.send(answer)
    assert SENT.match(await journey.send("1"))
    [first] = await programme.claims_of(customer_id)
    report = {"reportType": "cooking", "mealsCooked": 5, "channel": "api"}
    again = await owner_client.post(
        f"/v1/claim-collections/{first['collection']}/claims",
        json={"asset": stove, "data": report},
    )
    assert again.status_code == 409, again.text
    error = again.json()["error"]
    assert error["code"] == "period_claimed" and first["id"] in error["message"]
    assert error["details"] == [{"field": "existingClaim", "error": first["id"]}]
    # By API first: the phone's report for that stove and month gets a clear answer.
    by_api = await owner_client.post(
        f"/v1/claim-collections/{first['collection']}/claims",
        json={"asset": other, "data": report},
    )
    assert by_api.status_code == 201, by_api.text
    await journey.send("0")  # the result -> the stove
    assert (await journey.send("0")).startswith("CON My Stoves\n1. Jiko Z1")
    for answer in ("2", "1", "5"):
        await journey.send(answer)
    assert await journey.send("1") == (
        f"CON This stove's report for {REPORTED_MONTH} was sent already.\n{FOOTER}"
    )
    assert len(await programme.claims_of(customer_id)) == 2  # one per stove, one by API
    stored = await programme.platform.claims.views.claims(ClaimFilter(asset=other), None, 10)
    assert [c["id"] for c in stored.items] == [by_api.json()["id"]]


# What an approved claim's row says of its credits, in every language the menus speak.
CREDIT_ROWS = {
    "en": ("approved, not issued", "credits issued"),
    "fr": ("approuvée, non émise", "crédits émis"),
    "sw": ("imekubaliwa, subiri", "krediti zimetolewa"),
    "ny": ("yalandiridwa, dikirani", "makiredi aperekedwa"),
    "bem": ("yasuminishiwa, lolela", "amakiredi yapeelwa"),
}


async def test_an_approved_claim_says_whether_its_credits_are_issued(
    programme: Programme,
) -> None:
    """The oracle's approval is a draft figure: the household's claim row says its credits
    are not issued yet, and My Credits has none; once the registry issues the period that
    carries the claim, the row says so and My Credits holds them."""
    customer_id, journey = await programme.customer()
    owner = customer_did(customer_id)
    world = programme.world
    stove = await world.metered_asset(owner=owner)
    collection = (await world.collection())["id"]
    household = Principal(owner, frozenset({"writer"}))
    claim = await programme.platform.claims.submissions.submit(
        collection, metered_claim(), household, asset=stove
    )
    approved = await world.oracle_client.post(
        f"/v1/claims/{claim['id']}/evaluations", json={"status": "approved"}
    )
    assert approved.status_code == 200, approved.text
    year, month, day_of_month = claim["submittedAt"][:10].split("-")
    row = f"{short_id(claim['id'])} {day_of_month}/{month}/{year[2:]}"

    async def claims_in(code: str) -> str:
        """The claims screen in the language `code`, chosen from the main menu."""
        await journey.send("8")
        await journey.send(str(list(LANGUAGES).index(code) + 1))
        shown = await journey.send("5")
        await journey.send("0")
        assert len(shown) <= MAX_SCREEN and set(shown) <= GSM7, shown
        return shown

    assert await journey.send("5") == f"CON My Claims\n{row} approved, not issued\n{FOOTER}"
    assert await journey.send("0") == MAIN_MENU
    assert await journey.send("6") == f"CON My Credits\nNo credits yet.\n{FOOTER}"
    assert await journey.send("0") == MAIN_MENU
    for code, (waiting, _) in CREDIT_ROWS.items():
        assert f"\n{row} {waiting}\n" in await claims_in(code), code

    await issue_claims(world)
    for code, (_, issued) in CREDIT_ROWS.items():
        assert f"\n{row} {issued}\n" in await claims_in(code), code
    await claims_in("en")
    assert await journey.send("6") == f"CON My Credits\nCARBON: 0.021029\n{FOOTER}"
