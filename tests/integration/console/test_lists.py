"""The console's lists on both databases: the database filters, sorts, counts and pages
(services/listing.py, services/programme_lists.py), and the console's one table reads its
parameters and refuses the ones it does not know (console/tables.py)."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from tests.conftest import Registry, unique
from tests.integration.console.test_console import console, sign_in
from twinhub.db.visibility import EVERYTHING
from twinhub.kernel.errors import Invalid
from twinhub.kernel.principals import Principal
from twinhub.services.domains import DomainSpec
from twinhub.services.listing import ListQuery

ADMIN = Principal("did:ixo:org/lists-admin", frozenset({"admin", "writer"}))


async def programme(registry: Registry, stoves: int = 7) -> dict[str, Any]:
    """A project of `stoves` stoves in two regions (a village each), named so that their
    names sort against their creation order, one deactivated."""
    platform = registry.platform
    tag = unique("lists")
    project = await platform.domains.create(
        DomainSpec(type="Project", protocol="did:ixo:protocol/project", metadata={"name": tag}),
        ADMIN,
    )
    made = []
    for n in range(stoves):
        region = "Northern" if n % 2 else "Southern"
        record = await platform.domains.create(
            DomainSpec(
                type="Device",
                protocol="did:ixo:protocol/device",
                metadata={"name": f"{tag} stove {stoves - n:02d}"},
                properties={
                    "serialNumber": f"{tag}-{n}",
                    "location": {"region": region, "village": f"{region} 100% village_{n % 3}"},
                },
                relationships={"project": [project["did"]]},
            ),
            ADMIN,
        )
        made.append(record["did"])
    await platform.domains.deactivate(made[0], ADMIN, None)
    return {"project": project["did"], "stoves": made, "tag": tag}


async def test_stoves_are_filtered_sorted_and_paged_by_the_database(registry: Registry) -> None:
    made = await programme(registry)
    stoves = made["stoves"]
    lists = registry.platform.lists

    async def page(**asked: Any) -> Any:
        return await lists.stoves(ListQuery(**asked), made["project"])

    everything = await page(per_page=3)
    assert everything.total == 7 and everything.pages == 3
    assert [s["did"] for s in everything.items] == stoves[:3]  # creation order by default
    walked = []
    for number in (1, 2, 3):
        walked += [s["did"] for s in (await page(per_page=3, page=number)).items]
    assert walked == stoves  # each once, none skipped
    by_name = await page(sort="name", per_page=10)
    assert [s["did"] for s in by_name.items] == list(reversed(stoves))
    north = await page(filters={"region": "Northern"})
    assert north.total == 3 and all(s["region"] == "Northern" for s in north.items)
    village = await page(filters={"village": "Southern 100% village_0"})
    assert [s["did"] for s in village.items] == [stoves[0], stoves[6]]
    active = await page(filters={"status": "active", "region": "Southern"})
    assert active.total == 3  # the deactivated one is not
    # Search is a substring, its wildcards taken literally.
    assert (await page(search="100%")).total == 0  # names hold no "100%"
    assert (await page(search=f"{made['tag']}-3")).total == 1  # a serial number
    assert (await page(search="stove 0_")).total == 0
    assert (await page(filters={"online": "yes"})).total == 0  # no telemetry yet
    assert (await page(filters={"online": "no"})).total == 7
    places = await lists.places(made["project"])
    assert places["regions"] == ["Northern", "Southern"]
    with pytest.raises(Invalid):
        await page(sort="colour")
    with pytest.raises(Invalid):
        await page(filters={"verified": "maybe"})
    with pytest.raises(Invalid):
        ListQuery(per_page=1000)


async def test_the_console_tables_read_their_parameters(registry: Registry) -> None:
    made = await programme(registry, stoves=4)
    key = await registry.key(f"did:ixo:org/{unique('reader')}", "reader")
    async with console(registry) as browser:
        await sign_in(browser, key)
        page = await browser.get(
            "/console/stoves",
            params={"project": made["project"], "region": "Southern", "per_page": "1"},
        )
        assert page.status_code == 200
        assert 'data-total="2"' in page.text  # two in the south
        assert "page 1 of 2" in page.text
        # Past the end: the last page.
        last = await browser.get(
            "/console/stoves", params={"project": made["project"], "page": "99", "per_page": "1"}
        )
        assert last.status_code == 200 and "page 4 of 4" in last.text
        for bad, said in (
            ({"sort": "colour"}, "sorts by"),
            ({"page": "two"}, "whole number"),
            ({"dir": "sideways"}, "asc or desc"),
            ({"region": "Atlantis"}, "no choice"),
            ({"q": "x" * 101}, "at most 100"),
        ):
            refused = await browser.get("/console/stoves", params=bad)
            assert refused.status_code == 422, bad
            assert said in refused.text, (bad, refused.text[-800:])
        # A project's page counts its stoves and links to them.
        twin = await browser.get(f"/console/twins/{made['project']}")
        assert "4 stoves" in twin.text


async def test_every_list_searches_sorts_and_filters_on_this_database(registry: Registry) -> None:
    """Each list's query, every sort both ways, with a search and its filters, runs on this
    database and finds what was made for it."""
    made = await programme(registry, stoves=2)
    lists = registry.platform.lists
    key_label = unique("label")
    await registry.platform.api_keys.create("did:ixo:org/lists-key", ["reader"], key_label)
    # The lists a signed-in key sees are filtered in SQL (db/visibility): here, everything.
    households = partial(lists.households, viewer=EVERYTHING)
    problems = partial(lists.problems, viewer=EVERYTHING)
    events = partial(lists.events, viewer=EVERYTHING)
    cases: list[tuple[Any, list[str], dict[str, str], str, int]] = [
        (lists.stoves, ["registered", "name", "region", "seen"], {"online": "no"}, made["tag"], 2),
        (
            households,
            ["joined", "name"],
            {"locked": "no"},
            "no such household",
            0,
        ),
        (lists.claims, ["queue", "submitted", "status"], {"status": "open"}, "no-such-claim", 0),
        (
            problems,
            ["reported", "kind"],
            {"status": "open"},
            "no-such-stove",
            0,
        ),
        (
            events,
            ["position"],
            {"type": "domain.created"},
            made["stoves"][1],
            1,
        ),
        (lists.webhooks, ["created", "url"], {"state": "active"}, "no-such-hook", 0),
        (lists.api_keys, ["created", "principal"], {"state": "active"}, key_label, 1),
    ]
    for fetch, sorts, filters, search, expected in cases:
        for sort in sorts:
            for descending in (False, True):
                asked = ListQuery(search=search, filters=filters, sort=sort, descending=descending)
                found = await fetch(asked)
                assert found.total == expected == len(found.items), (fetch, sort, search)
