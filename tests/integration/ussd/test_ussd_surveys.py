"""Household surveys over real HTTP on both backends: a survey made and drawn through the
registry API, sampled households answering over the USSD gateway (one platform, one
database) in Swahili and in French, with a hang-up between two answers; the answers come
back through the API with their sessions, and the sampled parameters in the design's shape.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.conftest import (
    BOOTSTRAP_KEY,
    Gateway,
    GatewayFactory,
    Registry,
    new_phone,
    new_session_id,
    running_registry,
    unique,
)
from tests.integration.console.test_console import console, sign_in
from tests.integration.ussd.test_ussd_languages import CODES, Walker
from twinhub.mrv.sampling import draw

EN_WELCOME = "CON Welcome to twinhub\n1. Know More\n2. Account Menu\n3. Language\n*. Exit"
SW_DONE = "CON Utafiti\nAsante. Majibu yako yamehifadhiwa.\n0. Rudi\n*. Ondoka"


@dataclass
class Survey:
    gateway: Gateway
    registry: Registry
    admin: httpx.AsyncClient
    project: str
    households: dict[str, tuple[str, str, int]]  # stove -> (phone, customer ID, recorded)

    async def stove_of(self, phone: str) -> str:
        return next(s for s, (p, _, _) in self.households.items() if p == phone)


async def _domain(client: httpx.AsyncClient, body: dict[str, Any]) -> str:
    response = await client.post("/v1/domains", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["did"])


@pytest.fixture
async def survey(make_gateway: GatewayFactory) -> AsyncIterator[Survey]:
    """A project with three households, each owning one stove whose household size was
    recorded at enrolment; and a survey of it, drawn through the API."""
    gateway = await make_gateway(
        twinhub_bootstrap_api_key=BOOTSTRAP_KEY, ussd_rate_limit="1000000/minute"
    )
    platform = gateway.app.state.platform
    async with running_registry(gateway.settings, platform) as registry:
        admin = registry.client
        organisation = await _domain(
            admin,
            {"type": "Organisation", "class": "did:ixo:protocol/organisation"},
        )
        project = await _domain(
            admin,
            {
                "type": "Project",
                "class": "did:ixo:protocol/project",
                "metadata": {"name": unique("project")},
                "relationships": {"implementedBy": [organisation]},
            },
        )
        households = {}
        for n, recorded in enumerate((3, 6, 5)):
            phone = new_phone()
            customer = await platform.customers.create(phone, f"Mama Jiko {n}", "58213")
            stove = await _domain(
                admin,
                {
                    "type": "Device",
                    "class": "did:ixo:protocol/clean-cooking",
                    "metadata": {"name": f"Jiko {n}"},
                    "properties": {
                        "serialNumber": unique("SV"),
                        "ownerCustomerId": customer.customer_id,
                        "householdSize": recorded,
                    },
                    "relationships": {"project": [project]},
                },
            )
            households[stove] = (phone, customer.customer_id, recorded)
        yield Survey(gateway, registry, admin, project, households)


async def test_a_survey_is_drawn_once_and_reproducibly(survey: Survey) -> None:
    admin = survey.admin
    made = await admin.post(
        "/v1/surveys",
        json={"project": survey.project, "seed": "field-2026-11", "householdMax": 12},
    )
    assert made.status_code == 201, made.text
    created = made.json()
    assert created["status"] == "created" and created["seed"] == "field-2026-11"
    assert (created["confidence"], created["targetPrecision"]) == (0.9, 0.1)  # 90/10 default

    drawn = await admin.post(f"/v1/surveys/{created['id']}/draw")
    assert drawn.status_code == 200, drawn.text
    body = drawn.json()
    assert body["status"] == "drawn" and body["frameSize"] == 3 and body["sampleSize"] == 3
    listed = await admin.get(f"/v1/surveys/{created['id']}/households")
    order = [h["stove"] for h in listed.json()["items"]]
    # Anyone holding the seed and the frame draws the same sample, in the same order.
    assert order == draw(survey.households, 3, "field-2026-11")
    first = listed.json()["items"][0]
    assert first["householdSize"] == {
        "recorded": survey.households[first["stove"]][2],
        "answered": None,
        "confirmed": None,
    }

    again = await admin.post(f"/v1/surveys/{created['id']}/draw")
    assert again.status_code == 409, again.text
    assert "drawn already" in again.json()["error"]["message"]
    relisted = await admin.get(f"/v1/surveys/{created['id']}/households")
    assert relisted.json() == listed.json()  # nothing stored twice
    assert (await admin.get(f"/v1/surveys/{created['id']}")).json()["survey"] == body

    # Two draws of one survey at the same instant: one sample, the other draw refused.
    other = (await admin.post("/v1/surveys", json={"project": survey.project})).json()
    both = await asyncio.gather(
        admin.post(f"/v1/surveys/{other['id']}/draw"),
        admin.post(f"/v1/surveys/{other['id']}/draw"),
    )
    assert sorted(r.status_code for r in both) == [200, 409], [r.text for r in both]
    sample = (await admin.get(f"/v1/surveys/{other['id']}/households")).json()["items"]
    assert len(sample) == 3


async def test_bad_surveys_are_refused_with_their_fields(survey: Survey) -> None:
    admin = survey.admin
    bad = await admin.post(
        "/v1/surveys",
        json={"project": survey.project, "confidence": 1.5, "householdMin": 9, "sampleSize": 1},
    )
    assert bad.status_code == 422, bad.text
    fields = {d["field"] for d in bad.json()["error"]["details"]}
    assert fields == {"confidence", "sampleSize"}
    upside_down = await admin.post(
        "/v1/surveys", json={"project": survey.project, "householdMin": 9, "householdMax": 3}
    )
    assert upside_down.status_code == 422
    assert upside_down.json()["error"]["details"][0]["field"] == "householdMax"
    stove = next(iter(survey.households))
    not_project = await admin.post("/v1/surveys", json={"project": stove})
    assert not_project.status_code == 422
    assert not_project.json()["error"]["details"][0]["field"] == "project"
    empty = await _domain(
        admin, {"type": "Project", "class": "did:ixo:protocol/project", "metadata": {}}
    )
    nobody = (await admin.post("/v1/surveys", json={"project": empty})).json()
    refused = await admin.post(f"/v1/surveys/{nobody['id']}/draw")
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["details"][0]["field"] == "project"
    assert (await admin.get(f"/v1/surveys/{nobody['id']}")).json()["survey"]["status"] == "created"
    unknown = await admin.post("/v1/surveys/sv_0123456789abcdef/draw")
    assert unknown.status_code == 404
    reader_key = await survey.registry.key(f"did:ixo:org/{unique('reader')}", "reader")
    async with survey.registry.as_key(reader_key) as reader:
        refused = await reader.post("/v1/surveys", json={"project": survey.project})
        assert refused.status_code == 403
        assert (
            await reader.get("/v1/surveys", params={"project": survey.project})
        ).status_code == 200
    assert (await admin.get("/v1/surveys", params={"project": survey.project})).json() == {
        "items": []
    }


async def test_households_answer_in_their_languages_and_feed_the_parameters(
    survey: Survey,
) -> None:
    gateway, admin = survey.gateway, survey.admin
    made = (await admin.post("/v1/surveys", json={"project": survey.project})).json()
    phones = [phone for phone, _, _ in survey.households.values()]
    swahili, french, silent = phones
    # Before the draw, nobody is asked: a new session opens on the welcome menu.
    before = Walker(gateway, swahili)
    assert await before.dial() == EN_WELCOME
    await before.send("3")
    assert "Lugha imebadilishwa" in await before.send(str(CODES.index("sw") + 1))
    assert (await admin.post(f"/v1/surveys/{made['id']}/draw")).status_code == 200

    # Swahili: out-of-range answers are refused with the range, and asked again.
    first = Walker(gateway, swahili)
    reply = await first.dial()
    first.check(reply)
    name = f"Jiko {list(survey.households).index(await survey.stove_of(swahili))}"
    assert reply == f"CON Utafiti: {name}\nWatu wangapi hula chakula cha jiko hili?\n" + (
        "Weka 1 hadi 30\n0. Rudi\n*. Ondoka"
    )
    assert (await first.step("nne")).startswith("CON Weka tarakimu tu")
    assert (await first.step("45")).startswith("CON Weka namba kati ya 1 na 30.\nUtafiti:")
    assert "Je, jiko hili linatumika?\n1. Ndiyo\n2. Hapana" in await first.step("4")
    # The household hangs up; dialling again resumes at the question it left.
    second = Walker(gateway, swahili)
    resumed = await second.dial()
    assert "Je, jiko hili linatumika?" in resumed
    assert (await second.step("7")).startswith("CON Chaguo si sahihi.")
    assert "Unapika kwa nini kingine?\n1. Hakuna kingine\n2. Mkaa" in await second.step("1")
    assert await second.step("2") == SW_DONE
    assert (
        await second.step("0")
        == "CON Karibu twinhub\n1. Jua Zaidi\n2. Akaunti\n3. Lugha\n*. Ondoka"
    )
    third = Walker(gateway, swahili)
    assert (await third.dial()).startswith("CON Karibu twinhub")  # asked no more

    # A shortcut dial goes where it leads, and answers nothing.
    assert (await gateway.say(new_session_id(), silent, "1")).startswith("CON Know More\n1.")

    # French, chosen from the welcome menu after "0" (later): the survey comes back in it.
    chooser = Walker(gateway, french)
    assert (await chooser.dial()).startswith("CON Survey: Jiko")
    await chooser.send("0")
    await chooser.send("3")
    await chooser.send(str(CODES.index("fr") + 1))
    answering = Walker(gateway, french)
    question = await answering.dial()
    answering.check(question)
    assert "Combien de personnes mangent de ce réchaud?\nEntrez de 1 à 30" in question
    assert "Ce réchaud est-il utilisé?\n1. Oui\n2. Non" in await answering.step("6")
    assert "Avec quoi cuisinez-vous aussi?\n1. Rien d'autre" in await answering.step("2")
    assert "Merci. Vos réponses sont enregistrées." in await answering.step("1")

    households = (await admin.get(f"/v1/surveys/{made['id']}/households")).json()["items"]
    by_stove = {h["stove"]: h for h in households}
    sw = by_stove[await survey.stove_of(swahili)]
    assert sw["householdSize"] == {
        "recorded": survey.households[sw["stove"]][2],
        "answered": 4,
        "confirmed": survey.households[sw["stove"]][2] == 4,
    }
    assert [(a["question"], a["value"], a["language"]) for a in sw["answers"]] == [
        ("people", "4", "sw"),
        ("inUse", "yes", "sw"),
        ("otherFuel", "charcoal", "sw"),
    ]
    # Each answer names the session that gave it: the evidence.
    assert [a["sessionId"] for a in sw["answers"]] == [
        first.session_id,
        second.session_id,
        second.session_id,
    ]
    assert swahili not in str(sw)  # the phone is masked
    fr = by_stove[await survey.stove_of(french)]
    assert fr["householdSize"]["answered"] == 6 and fr["householdSize"]["confirmed"] is True

    # Each answered size is now the stove's recorded one, written to the ledger with the
    # survey and the USSD session as evidence; the enrolment value stays in the history.
    swahili_stove = sw["stove"]
    enrolled = survey.households[swahili_stove][2]
    assert enrolled == 3  # the enrolment typed 3; the household answered 4
    record = (await admin.get(f"/v1/domains/{swahili_stove}")).json()
    assert record["properties"]["householdSize"] == 4
    assert record["properties"]["householdSizeConfirmation"] == {
        "householdSize": 4,
        "enrolled": 3,
        "surveyId": made["id"],
        "sessionId": first.session_id,
        "question": "people",
        "answeredAt": sw["answers"][0]["answeredAt"],
    }
    history = (await admin.get(f"/v1/domains/{swahili_stove}/history")).json()["items"]
    versions = [
        (h["kind"], h["version"], h["record"]["properties"]["householdSize"]) for h in history
    ]
    assert versions == [("domain.create", 1, 3), ("domain.update", 2, 4)]
    assert history[-1]["actor"] == f"survey:{made['id']}"
    assert swahili not in str(history)  # the evidence is the session, never the phone
    french_record = (await admin.get(f"/v1/domains/{fr['stove']}")).json()["properties"]
    assert french_record["householdSize"] == 6
    assert french_record["householdSizeConfirmation"]["enrolled"] == 6
    silent_record = (await admin.get(f"/v1/domains/{await survey.stove_of(silent)}")).json()
    assert "householdSizeConfirmation" not in silent_record["properties"]
    assert silent_record["version"] == 1
    assert [a["value"] for a in fr["answers"]] == ["6", "no", "none"]
    assert by_stove[await survey.stove_of(silent)]["answers"] == []

    results = (await admin.get(f"/v1/surveys/{made['id']}")).json()
    size = results["parameters"]["householdSize"]
    assert size["value"] == 5 and size["sampleSize"] == 2 and size["meetsTarget"] is False
    assert results["parameters"]["stoveUse"]["value"] == 0.5
    assert (results["answered"], results["completed"]) == (2, 2)
    assert results["householdSizes"] == {"confirmed": 2, "unconfirmed": 1, "notRecorded": 0}
    parameters = (
        await admin.get("/v1/surveys/parameters", params={"project": survey.project})
    ).json()
    shaped = parameters["parameters"]["householdSize"]
    assert set(shaped) == {"value", "sampleSize", "confidence", "precision", "surveyId", "seed"}
    assert (shaped["surveyId"], shaped["seed"], shaped["confidence"]) == (
        made["id"],
        made["seed"],
        0.9,
    )
    assert shaped["precision"] == pytest.approx(results["parameters"]["householdSize"]["precision"])
    assert parameters["householdSizes"][fr["stove"]]["confirmed"] is True

    # The console shows the sample, the answers so far and the precision against 90/10.
    async with console(survey.registry) as browser:
        await sign_in(browser, BOOTSTRAP_KEY)
        listing = (await browser.get("/console/surveys")).text
        assert f'id="survey-{made["id"]}"' in listing and "2 complete, 2 started" in listing
        page = await browser.get(f"/console/surveys/{made['id']}")
        assert page.status_code == 200
        assert "3 of 3 stoves" in page.text and first.session_id in page.text
        assert 'id="parameter-householdSize"' in page.text and "(not met)" in page.text
        # Confirmed against enrolled sizes across the project, and the corrected answer.
        assert (
            "2 of the project&#39;s stoves confirmed by a survey answer, 1 as enrolled"
            in (page.text)
            or "2 of the project's stoves confirmed by a survey answer, 1 as enrolled" in page.text
        )
        assert "corrected" in page.text
        assert (await browser.get("/console/surveys/sv_0000000000000000")).status_code == 404
