"""The operator console in a real browser: Debian's Chromium driven by Playwright.

`twinhub serve` runs as its own process (registry with the console, USSD gateway, node and
gateway on loopback ports) over a database `twinhub demo` filled; claims are submitted and
flagged through the API as an operator and an oracle would. Then each console page is
opened, used and asserted on, and a screenshot of each is kept in tests/artifacts/.
Without Chromium these tests skip with the reason; under CI=true they fail instead.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import ARTIFACTS
from tests.e2e.test_programme_e2e import Served, serving
from tests.support.cli import run_process
from twinhub.demo import OPERATOR, PHONE_PREFIX, PROJECT

ORACLE = "did:ixo:org/demo-emissions-oracle"
STOVE = "did:ixo:entity/demo-stove-0001"
JANUARY = {"periodStart": "2026-01-01T00:00:00Z", "periodEnd": "2026-02-01T00:00:00Z"}
# A month before the demo's stoves were installed: its meter has nothing behind a claim.
FEBRUARY = {"periodStart": "2026-02-01T00:00:00Z", "periodEnd": "2026-03-01T00:00:00Z"}
EVIL = "<script>alert(1)</script>"
COMPLIANCE = ("did:ixo:org/demo-compliance-1", "did:ixo:org/demo-compliance-2")
GROUP = "did:ixo:group/demo-compliance"
FLAG_REASON = "Meals exceed the stove's daily capacity"


@dataclass
class Programme:
    served: Served
    admin: str
    oracle: str
    operator: str
    evil_did: str
    flagged: str
    pending: str
    voter: str  # a member of the demo compliance group
    proposal: int  # an open proposal to verify the organisation named EVIL
    survey: str = ""  # a drawn survey of the demo project, its sample answered over USSD

    @property
    def console(self) -> str:
        return f"{self.served.registry}/console"


@pytest.fixture(scope="module")
def programme(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Programme]:
    data = tmp_path_factory.mktemp("console")
    admin = secrets.token_urlsafe(32)
    env = {
        "ENVIRONMENT": "test",
        "DATA_DIR": str(data),
        "LOG_FORMAT": "json",
        "PIN_ENCRYPTION_KEY": secrets.token_hex(32),
        "CREDENTIAL_ISSUER_KEY": secrets.token_hex(32),
        "TWINHUB_BOOTSTRAP_API_KEY": admin,
        # The claims queue is what a person decides: no oracle decides first here.
        "ORACLE_ENABLED": "false",
    }
    loaded = run_process("demo", "--stoves", "3", env=env, timeout=120)
    assert loaded.returncode == 0, loaded.stderr
    with serving(env) as served:
        # The console's phone forwards to this process's USSD gateway.
        operator, oracle = served.key(OPERATOR), served.key(ORACLE)
        api = httpx.Client(base_url=served.registry, timeout=10)

        def call(key: str, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
            answer = api.request(
                method, path, json=body, headers={"authorization": f"Bearer {key}"}
            )
            assert answer.status_code < 300, answer.text
            return answer.json()  # type: ignore[no-any-return]

        collections = api.get(
            "/v1/claim-collections",
            params={"project": PROJECT},
            headers={"authorization": f"Bearer {operator}"},
        ).json()["items"]
        collection = collections[0]["id"]
        made = [
            call(
                operator,
                "POST",
                f"/v1/claim-collections/{collection}/claims",
                {"asset": STOVE, "data": {"reportType": "cooking", "mealsCooked": meals, **month}},
            )["id"]
            # two months of the stove: a stove's month is counted once
            for meals, month in ((14, FEBRUARY), (90, JANUARY))
        ]
        call(
            oracle,
            "POST",
            f"/v1/claims/{made[1]}/evaluations",
            {"status": "flagged", "reason": FLAG_REASON},
        )
        evil = call(
            admin,
            "POST",
            "/v1/domains",
            {
                "type": "Organisation",
                "protocol": "did:ixo:protocol/organisation",
                "metadata": {"name": EVIL},
            },
        )["did"]
        proposer, voter = served.key(COMPLIANCE[0]), served.key(COMPLIANCE[1])
        proposal = call(
            proposer,
            "POST",
            f"/v1/domains/{evil}/verification-proposals",
            {"group": GROUP, "action": "verify", "evidence": {"audit": "desk review"}},
        )["id"]
        # Surveys are the proponent's (an admin holds no workflow role): the demo's key.
        proponent = (data / "demo-keys" / "proponent.api-key").read_text()
        survey = answered_survey(api, served, proponent)
        api.close()
        yield Programme(
            served,
            admin,
            oracle,
            operator,
            evil,
            made[1],
            made[0],
            voter=voter,
            proposal=proposal,
            survey=survey,
        )


def answered_survey(api: httpx.Client, served: Served, proponent: str) -> str:
    """A survey of two of the demo's three households, drawn through the API, each sampled
    household answering every question through the served USSD gateway (so that no phone
    is left with questions: the other tests dial demo phones and expect the menu)."""
    headers = {"authorization": f"Bearer {proponent}"}
    made = api.post("/v1/surveys", json={"project": PROJECT, "sampleSize": 2}, headers=headers)
    assert made.status_code == 201, made.text
    survey = made.json()["id"]
    assert api.post(f"/v1/surveys/{survey}/draw", headers=headers).status_code == 200
    sample = api.get(f"/v1/surveys/{survey}/households", headers=headers).json()["items"]
    with httpx.Client(base_url=served.ussd, timeout=10) as ussd:
        for household, people in zip(sample, ("4", "6"), strict=True):
            phone = PHONE_PREFIX + f"{int(household['stove'].rsplit('-', 1)[1]):05d}"
            session = "ATUid_" + secrets.token_hex(6)
            for text, expected in (
                ("", "How many people"),
                (people, "in use"),
                (f"{people}*1", "What else"),
                (f"{people}*1*2", "Thank you"),
            ):
                reply = ussd.post(
                    "/api/ussd",
                    json={
                        "sessionId": session,
                        "serviceCode": "*384*1#",
                        "phoneNumber": phone,
                        "text": text,
                    },
                ).text
                assert expected in reply, reply
    return survey


class Tab:
    """A page in a fresh browser context, recording script errors and blocked requests."""

    def __init__(self, page: Any, console: str) -> None:
        self.page = page
        self.console = console
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("dialog", self._dialog)

    async def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        await dialog.dismiss()

    async def open(self, path: str) -> Any:
        return await self.page.goto(f"{self.console}{path}")

    async def sign_in(self, key: str) -> None:
        await self.open("/")
        assert "/console/sign-in" in self.page.url
        await self.page.get_by_label("API key").fill(key)
        await self.page.get_by_role("button", name="Sign in").click()
        await self.page.wait_for_url(f"{self.console}/")

    async def shot(self, name: str) -> None:
        await self.page.screenshot(path=str(ARTIFACTS / f"console-{name}.png"), full_page=True)


@pytest.fixture
async def tab(browser: Any, programme: Programme) -> AsyncIterator[Tab]:
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(10_000)
    # Offline, as in a field office: any request leaving the loopback host is refused.
    await context.route(
        "**/*",
        lambda route: (
            route.continue_() if route.request.url.startswith("http://127.0.0.1") else route.abort()
        ),
    )
    opened = Tab(await context.new_page(), programme.console)
    yield opened
    await context.close()
    assert opened.dialogs == [], "a script ran from user data"


async def test_sign_in_refuses_a_wrong_key_then_shows_the_dashboard(
    tab: Tab, programme: Programme
) -> None:
    await tab.open("/")
    await tab.page.get_by_label("API key").fill("thk_nope_nope")
    await tab.page.get_by_role("button", name="Sign in").click()
    await tab.page.get_by_text("That API key is unknown or revoked.").wait_for()
    await tab.shot("sign-in")
    tab.errors.clear()  # the refused sign-in was answered 401, which Chromium logs
    await tab.sign_in(programme.oracle)
    response = await tab.open("/")
    csp = response.headers["content-security-policy"]
    script_src = next(d for d in csp.split(";") if d.strip().startswith("script-src"))
    assert script_src.strip() == "script-src 'self'"  # no inline scripts, ever
    cookies = await tab.page.context.cookies()
    session = next(c for c in cookies if c["name"] == "twinhub_console")
    assert session["httpOnly"] and session["sameSite"] == "Strict"
    assert await tab.page.locator("#stoves-registered").inner_text() == "3"
    assert await tab.page.locator("#claims-submitted").inner_text() == "2"
    # The demo's month of telemetry: online now is a count, sessions and energy are drawn.
    assert (await tab.page.locator("#stoves-online").inner_text()).isdigit()
    await tab.page.locator("#telemetry [data-chart] .u-legend").wait_for()
    await tab.shot("dashboard")
    assert tab.errors == []


async def test_claims_queue_shows_reasons_validates_and_approves(
    tab: Tab, programme: Programme
) -> None:
    await tab.sign_in(programme.oracle)
    await tab.open("/claims")
    flagged = tab.page.locator(f"#claim-{programme.flagged}")
    await flagged.get_by_text(FLAG_REASON).wait_for()
    claim = tab.page.locator(f"#claim-{programme.pending}")
    await claim.get_by_label("Approve").check()
    await claim.get_by_role("button", name="Record decision").click()
    error = tab.page.locator(f"#error-{programme.pending}")
    # No credits to compute (the stove's meter has no data in this report's month): refused,
    # and said where the decision was made.
    assert "methodology" in await error.inner_text()
    await tab.shot("claims-error")
    tab.errors.clear()  # the refused decision was answered 422, which Chromium logs
    claim = tab.page.locator(f"#claim-{programme.pending}")
    assert await claim.get_by_label("Approve").is_checked()  # the choice survives the error
    await claim.get_by_label("Reject").check()
    await claim.get_by_label("Reason").fill("no metered cooking in that month (site visit)")
    await claim.get_by_role("button", name="Record decision").click()
    await tab.page.get_by_text(f"Claim {programme.pending} rejected.").wait_for()
    assert await tab.page.locator(f"#claim-{programme.pending}").count() == 0
    await tab.shot("claims")
    assert tab.errors == []


async def test_graph_zooms_and_opens_a_twin(tab: Tab, programme: Programme) -> None:
    await tab.sign_in(programme.operator)
    await tab.open(f"/graph?did={PROJECT}")
    graph = tab.page.locator("#graph[data-nodes]")
    await graph.wait_for()
    assert int(await graph.get_attribute("data-nodes") or 0) >= 5  # org, oracle, project, stoves
    assert await graph.get_attribute("data-claims") == "2"  # the stove's claims, as nodes
    before = await tab.page.evaluate("window.twinhubGraph.zoom()")
    await tab.page.get_by_role("button", name="Zoom in").click()
    assert await tab.page.evaluate("window.twinhubGraph.zoom()") > before
    await tab.page.get_by_role("button", name="Fit").click()
    await tab.shot("graph")
    where = await tab.page.evaluate(
        f"(() => {{ const p = window.twinhubGraph.getElementById({STOVE!r}).renderedPosition();"
        " const b = document.getElementById('graph').getBoundingClientRect();"
        " return {x: b.left + p.x, y: b.top + p.y}; })()"
    )
    await tab.page.mouse.click(where["x"], where["y"])
    await tab.page.wait_for_url(f"**/console/twins/{STOVE}")
    assert tab.errors == []


async def test_twin_page_shows_the_record_history_and_a_live_reading_arrive(
    tab: Tab, programme: Programme
) -> None:
    await tab.sign_in(programme.operator)
    await tab.open(f"/twins/{STOVE}")
    assert await tab.page.locator("#verification").inner_text() in ("verified", "not verified")
    assert await tab.page.locator("#history tbody tr").count() >= 1
    await tab.page.get_by_text("project →").first.wait_for()
    # The stream is open: its first event (the twin's state) has been drawn.
    await tab.page.locator("#live-chart[data-state='live']").wait_for()
    await tab.page.locator("#live-status", has_text="waiting for readings").wait_for()
    # The history spans the range asked for (90 days by default), not the last reading.
    span = await tab.page.locator("#live-chart").get_attribute("data-time-range")
    assert span is not None
    start, end = (float(edge) for edge in span.split(","))
    assert 89 * 86400 <= end - start <= 92 * 86400, span
    # A meter sends a reading with its device token, over HTTP, as a stove would.
    seq = 2_000_000_000 + secrets.randbelow(1_000_000)
    async with httpx.AsyncClient(base_url=programme.served.registry, timeout=10) as api:
        enrolled = await api.post(
            f"/v1/domains/{STOVE}/device-tokens",
            json={"label": "browser test meter"},
            headers={"authorization": f"Bearer {programme.admin}"},
        )
        assert enrolled.status_code == 201, enrolled.text
        when = datetime.now(UTC).isoformat()
        sent = await api.post(
            f"/v1/domains/{STOVE}/telemetry",
            json={
                "readings": [
                    {"seq": seq, "time": when, "values": {"temperatureC": 321.5, "batteryPct": 88}}
                ]
            },
            headers={"authorization": f"Bearer {enrolled.json()['token']}"},
        )
        assert sent.status_code == 200 and sent.json()["accepted"] == 1, sent.text
    await tab.page.locator(f"#live-chart[data-last-seq='{seq}']").wait_for()
    status = await tab.page.locator("#live-status").inner_text()
    assert f"reading {seq} arrived" in status and status.startswith("Online")
    legend = tab.page.locator("#chart-condition .u-legend")
    assert await legend.locator("text=temperatureC (°C)").count() == 1
    assert await legend.locator("text=batteryPct (%)").count() == 1
    # Two units, two scales: each has its own y axis beside the time axis.
    assert await tab.page.locator("#chart-condition .u-axis").count() == 3
    await tab.shot("twin-live")
    assert tab.errors == []


async def test_governance_shows_groups_thresholds_and_proposals(
    tab: Tab, programme: Programme
) -> None:
    await tab.sign_in(programme.operator)
    await tab.open("/governance")
    groups = tab.page.locator("#groups")
    await groups.get_by_text("Demo compliance").wait_for()
    assert "2 yes weight" in await groups.inner_text()
    proposals = await tab.page.locator("#proposals").inner_text()
    assert PROJECT in proposals and "executed" in proposals
    await tab.shot("governance")
    # A member votes on the open proposal; the tally moves.
    await tab.page.get_by_role("button", name="Sign out").click()
    await tab.sign_in(programme.voter)
    await tab.open("/governance")
    await tab.page.get_by_label(f"Vote on proposal {programme.proposal}").select_option("yes")
    await tab.page.get_by_role("button", name="Vote").click()
    await tab.page.get_by_text(
        f"Your yes vote on proposal {programme.proposal} is counted."
    ).wait_for()
    row = tab.page.locator("#proposals tr", has_text=programme.evil_did)
    assert "1 / 0 / 0 of 3" in await row.inner_text()
    await tab.shot("governance-voted")
    assert tab.errors == []


async def test_ussd_phone_talks_to_the_real_gateway(tab: Tab, programme: Programme) -> None:
    await tab.sign_in(programme.operator)
    await tab.open("/ussd")
    await tab.page.get_by_label("Phone number").fill("+254700900001")
    await tab.page.get_by_role("button", name="Dial").click()
    screen = tab.page.locator("#screen")
    await tab.page.locator("#screen[data-state='open']").wait_for()
    assert "1. Know More" in await screen.inner_text()
    await tab.page.get_by_role("button", name="Key 1").click()
    await tab.page.get_by_role("button", name="Send").click()
    await tab.page.get_by_text("Pricing").wait_for()
    await tab.shot("ussd")
    assert tab.errors == []


async def test_keys_are_created_used_and_revoked(
    tab: Tab, programme: Programme, browser: Any
) -> None:
    await tab.sign_in(programme.admin)
    await tab.open("/keys")
    await tab.page.get_by_label("Principal (DID)").fill("did:ixo:org/field-agent")
    await tab.page.get_by_label("Label").fill(EVIL)
    await tab.page.get_by_role("button", name="Create key").click()
    token = await tab.page.get_by_label("Key", exact=True).input_value()
    assert token.startswith("thk_")
    await tab.shot("keys")
    # A stove's device tokens: enrol a meter, its token shown once, then listed by id.
    await tab.page.get_by_label("Twin (DID)").fill(STOVE)
    await tab.page.get_by_role("button", name="Show tokens").click()
    await tab.page.get_by_label("Device label").fill("browser meter")
    await tab.page.get_by_role("button", name="Enrol a device").click()
    device = await tab.page.get_by_label("Device token", exact=True).input_value()
    assert device.startswith("thd_")
    row = tab.page.locator(f"#device-token-{device.split('_')[1]}")
    assert "browser meter" in await row.inner_text()
    await tab.shot("device-tokens")
    # The new reader key signs in elsewhere, sees the queue but may not decide or manage keys.
    other = await browser.new_context()
    reader = Tab(await other.new_page(), programme.console)
    await reader.sign_in(token)
    await reader.open("/claims")
    assert await reader.page.get_by_role("button", name="Record decision").count() == 0
    assert await reader.page.get_by_role("link", name="API keys").count() == 0
    assert (await reader.open("/keys")).status == 403
    # Revoked: the reader's next click lands on the sign-in page.
    key_id = token.split("_")[1]
    await tab.open("/keys")
    await tab.page.get_by_role("button", name=f"Revoke key {key_id}").click()
    await tab.page.get_by_text(f"Key {key_id} revoked.").wait_for()
    await reader.page.wait_for_timeout(5200)  # the key cache's lifetime
    await reader.open("/claims")
    assert "/console/sign-in" in reader.page.url
    await other.close()


async def test_surveys_show_the_sample_answers_and_precision(
    tab: Tab, programme: Programme
) -> None:
    await tab.sign_in(programme.operator)
    await tab.open("/surveys")
    row = tab.page.locator(f"#survey-{programme.survey}")
    assert "2 of 3" in await row.inner_text()
    assert "2 complete" in await row.inner_text()
    await tab.shot("surveys")
    await row.get_by_role("link", name=programme.survey).click()
    await tab.page.locator("#parameters").wait_for()
    assert await tab.page.locator("#sample-size").inner_text() == "2 of 3 stoves"
    size = tab.page.locator("#parameter-householdSize")
    assert "5.0 persons" in await size.inner_text() or "5 persons" in await size.inner_text()
    assert await tab.page.locator("#households tbody tr").count() == 2
    await tab.shot("survey")
    assert tab.errors == []


async def test_user_strings_are_escaped_everywhere(tab: Tab, programme: Programme) -> None:
    await tab.sign_in(programme.admin)
    await tab.open("/")
    assert await tab.page.locator("#scope option", has_text=EVIL).count() == 1
    await tab.open(f"/twins/{programme.evil_did}")
    assert await tab.page.locator("#twin-name").inner_text() == EVIL
    await tab.open(f"/graph?did={programme.evil_did}")
    await tab.page.locator("#graph[data-nodes]").wait_for()
    await tab.shot("escaped")
    # The tab fixture asserts that no alert() ever ran.


async def test_usable_on_a_360_pixel_phone_and_by_keyboard(
    browser: Any, programme: Programme
) -> None:
    context = await browser.new_context(viewport={"width": 360, "height": 740}, is_mobile=True)
    tab = Tab(await context.new_page(), programme.console)
    try:
        await tab.sign_in(programme.oracle)
        for path, name in (
            ("/", "mobile-dashboard"),
            ("/claims", "mobile-claims"),
            ("/ussd", "mobile-ussd"),
            (f"/graph?did={PROJECT}", "mobile-graph"),
            (f"/twins/{STOVE}", "mobile-twin"),
            ("/governance", "mobile-governance"),
            ("/surveys", "mobile-surveys"),
            (f"/surveys/{programme.survey}", "mobile-survey"),
        ):
            await tab.open(path)
            width = await tab.page.evaluate("document.documentElement.scrollWidth")
            wide = await tab.page.evaluate(
                "[...document.querySelectorAll('body *')].filter(e => "
                "e.getBoundingClientRect().right > 361).map(e => e.tagName + '.' + e.className"
                " + '#' + e.id).slice(0, 8)"
            )
            sizes = await tab.page.evaluate(
                "['main', 'section.card', '.scroll', 'body'].map(s => { const e = "
                "document.querySelector(s); return e ? s + ':' + e.getBoundingClientRect().width"
                " + '/' + getComputedStyle(e).overflowX : s })"
            )
            assert width <= 360, f"{path} scrolls sideways ({width}px): {wide} {sizes}"
            unlabelled = await tab.page.evaluate(
                "[...document.querySelectorAll('input:not([type=hidden]), select, button')]"
                ".filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label')"
                " && !e.textContent.trim()).length"
            )
            assert unlabelled == 0, f"{path} has controls without a label"
            await tab.shot(name)
        await tab.page.keyboard.press("Tab")
        assert await tab.page.evaluate("document.activeElement.textContent") == "Skip to content"
        await tab.page.keyboard.press("Tab")
        assert await tab.page.evaluate("document.activeElement.textContent") == "twinhub console"
        await tab.page.keyboard.press("Tab")
        assert await tab.page.evaluate("document.activeElement.textContent") == "Dashboard"
    finally:
        await context.close()


async def test_docs_and_graphql_explorer_load_offline(tab: Tab, programme: Programme) -> None:
    # Each explorer parses a bundle of over a megabyte, then renders the whole schema: with
    # the suite's other workers on both cores this once took over the tabs' 10 s in CI.
    explorer = 45_000
    await tab.page.goto(f"{programme.served.registry}/docs")
    await tab.page.locator(".swagger-ui .info .title").wait_for(timeout=explorer)
    await tab.shot("docs")
    await tab.page.goto(f"{programme.served.registry}/graphql")
    await tab.page.locator(".graphiql-container .graphiql-editors").wait_for(timeout=explorer)
    await tab.shot("graphiql")
