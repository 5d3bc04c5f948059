"""The graph, the twin page and the map of a programme of a few hundred stoves, in Debian's
Chromium at 1,280 and 360 pixels.

`twinhub demo --stoves 250` fills the database (its stoves placed in six districts of
Zambia, a month of telemetry each); then, through the API, ten stoves are deactivated and
twenty unverified ones are registered in a seventh place, so that every state shows. Each
test fails on a page wider than the window, on a console error and on a failed request,
and keeps its screenshots in tests/artifacts/ (console-views-*.png).
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
from tests.e2e.test_console_browser import Tab
from tests.e2e.test_programme_e2e import Served, serving
from tests.support import ahead
from tests.support.cli import run_process
from twinhub.demo import OPERATOR, ORGANISATION, PROJECT

STOVES = 250
DEACTIVATED = [f"did:ixo:entity/demo-stove-{n:04d}" for n in range(241, 251)]
STOVE = "did:ixo:entity/demo-stove-0001"
WIDTHS = (1280, 360)


@dataclass
class Programme:
    served: Served
    admin: str
    operator: str
    unverified: list[str]

    @property
    def console(self) -> str:
        return f"{self.served.registry}/console"


def loaded_demo(factory: pytest.TempPathFactory) -> tuple[str, dict[str, str]]:
    """The demo's 250 stoves in a folder of their own: the admin key and the environment
    to serve them with. Built ahead, while the browser's earlier modules run."""
    data = factory.mktemp("console-views")
    admin = secrets.token_urlsafe(32)
    env = {
        "ENVIRONMENT": "test",
        "DATA_DIR": str(data),
        "LOG_FORMAT": "json",
        "PIN_ENCRYPTION_KEY": secrets.token_hex(32),
        "CREDENTIAL_ISSUER_KEY": secrets.token_hex(32),
        "TWINHUB_BOOTSTRAP_API_KEY": admin,
        "ORACLE_ENABLED": "false",
    }
    loaded = run_process("demo", "--stoves", str(STOVES), env=env, timeout=600)
    assert loaded.returncode == 0, loaded.stderr
    return admin, env


ahead.plan("console-views-demo", __name__, loaded_demo)


@pytest.fixture(scope="module")
def programme(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Programme]:
    admin, env = ahead.take("console-views-demo", tmp_path_factory)
    with serving(env) as served:
        operator = served.key(OPERATOR)
        headers = {"authorization": f"Bearer {operator}"}
        unverified = []
        with httpx.Client(base_url=served.registry, timeout=10, headers=headers) as api:
            for did in DEACTIVATED:
                gone = api.delete(f"/v1/domains/{did}")
                assert gone.status_code == 200, gone.text
            for n in range(20):
                made = api.post(
                    "/v1/domains",
                    json={
                        "type": "Device",
                        "protocol": "did:ixo:protocol/clean-cooking",
                        "metadata": {"name": f"New stove {n + 1}"},
                        "properties": {
                            "location": {
                                "lat": -13.0 + (n % 5) * 0.004,
                                "lon": 29.1 + (n // 5) * 0.004,
                                "region": "Serenje",
                            }
                        },
                        "controller": [OPERATOR],
                        "relationships": {"project": [PROJECT], "operator": [ORGANISATION]},
                    },
                )
                assert made.status_code == 201, made.text
                unverified.append(made.json()["did"])
        yield Programme(served, admin, operator, unverified)


class Watched(Tab):
    """A tab that also records failed requests and error answers."""

    def __init__(self, page: Any, console: str) -> None:
        super().__init__(page, console)
        self.failed: list[str] = []
        page.on("requestfailed", self._failed)
        page.on(
            "response",
            lambda r: self.failed.append(f"{r.status} {r.url}") if r.status >= 400 else None,
        )

    def _failed(self, request: Any) -> None:
        # Leaving the twin page closes its event stream: that abort is not a failure.
        if request.url.endswith("/events") and "ERR_ABORTED" in (request.failure or ""):
            return
        self.failed.append(f"{request.failure} {request.url}")

    async def fits(self, width: int) -> None:
        """Nothing wider than the window: a wide table scrolls inside its card."""
        scroll = await self.page.evaluate("document.documentElement.scrollWidth")
        wide = await self.page.evaluate(
            f"[...document.querySelectorAll('body *')].filter(e => !e.closest('.scroll') && "
            f"e.getBoundingClientRect().right > {width + 1}).map(e => e.tagName + '.' + "
            "e.className + '#' + e.id).slice(0, 8)"
        )
        assert scroll <= width, f"{self.page.url} is {scroll}px wide: {wide}"
        assert wide == [], wide

    def clean(self) -> None:
        assert self.errors == [], self.errors
        assert self.failed == [], self.failed

    async def shot(self, name: str) -> None:
        await self.page.screenshot(
            path=str(ARTIFACTS / f"console-views-{name}.png"), full_page=True
        )


@pytest.fixture(params=WIDTHS, ids=lambda w: f"{w}px")
async def tab(browser: Any, programme: Programme, request: Any) -> AsyncIterator[Watched]:
    width = request.param
    context = await browser.new_context(
        viewport={"width": width, "height": 900 if width > 600 else 740},
        is_mobile=width < 600,
    )
    context.set_default_timeout(15_000)
    await context.route(
        "**/*",
        lambda route: (
            route.continue_() if route.request.url.startswith("http://127.0.0.1") else route.abort()
        ),
    )
    opened = Watched(await context.new_page(), programme.console)
    opened.width = width  # type: ignore[attr-defined]
    await opened.sign_in(programme.operator)
    yield opened
    await context.close()
    assert opened.dialogs == []


async def tap(tab: Watched, node: str) -> None:
    """Click a graph node where it is drawn on the canvas (scrolled into the window)."""
    scrolled = await tab.page.evaluate(
        f"(() => {{ const n = window.twinhubGraph.getElementById({node!r});"
        " const p = n.renderedPosition(); const b = document.getElementById('graph')"
        ".getBoundingClientRect(); const y = b.top + p.y;"
        " if (y > 40 && y < innerHeight - 40) return false;"
        " window.scrollBy(0, y - innerHeight / 2); return true; })()"
    )
    if scrolled:
        # Cytoscape keeps where its canvas is on the page: let it see the scroll first.
        # Only when it had to scroll: headless Chromium drew that frame 8-13 s late.
        await tab.page.evaluate("new Promise(r => requestAnimationFrame(() => r()))")
        await tab.page.evaluate("window.twinhubGraph.resize()")
    where = await tab.page.evaluate(
        f"(() => {{ const n = window.twinhubGraph.getElementById({node!r});"
        " const p = n.renderedPosition(); const b = document.getElementById('graph')"
        ".getBoundingClientRect(); return {x: b.left + p.x, y: b.top + p.y}; })()"
    )
    await tab.page.mouse.click(where["x"], where["y"])


async def test_the_graph_groups_stoves_and_opens_a_group_on_click(
    tab: Watched, programme: Programme
) -> None:
    width = tab.width  # type: ignore[attr-defined]
    await tab.open(f"/graph?did={PROJECT}")
    graph = tab.page.locator("#graph[data-groups]")
    await graph.wait_for()
    # 240 verified, 20 unverified, 10 deactivated: three groups, no stove drawn alone.
    assert await graph.get_attribute("data-groups") == "3"
    assert await graph.get_attribute("data-stoves") == "0"
    assert int(await graph.get_attribute("data-nodes") or 0) < 10
    labels = await tab.page.evaluate(
        "window.twinhubGraph.nodes(\"[kind = 'group']\").map(n => n.data('label')).sort()"
    )
    assert labels == ["10 deactivated stoves", "20 not verified stoves", "240 verified stoves"]
    # A hierarchy: the organisation above the project, the project above its groups.
    rows = await tab.page.evaluate(
        "(() => { const y = id => window.twinhubGraph.getElementById(id).position('y');"
        f" return [y({ORGANISATION!r}), y({PROJECT!r}), y('group:{PROJECT}:verified')]; }})()"
    )
    assert rows[0] < rows[1] < rows[2], rows
    await tab.fits(width)
    await tab.shot(f"graph-{width}")
    await tap(tab, f"group:{PROJECT}:verified")
    await tab.page.locator("#graph[data-stoves='25']").wait_for()
    await tab.page.locator("#graph-status", has_text="25 of 240 shown").wait_for()
    await tab.shot(f"graph-open-{width}")
    # "215 more…" adds the next page.
    await tap(tab, f"more:group:{PROJECT}:verified")
    await tab.page.locator("#graph[data-stoves='50']").wait_for()
    # The list beside the graph does the same from the keyboard: close the group again.
    await tab.page.get_by_role("button", name="Hide the 240 verified stoves").click()
    await tab.page.locator("#graph[data-stoves='0']").wait_for()
    await tab.page.get_by_role("button", name="Show the 20 not verified stoves").click()
    await tab.page.locator("#graph[data-stoves='20']").wait_for()
    await tab.fits(width)
    # A stove opens its twin: the list beside the graph links it (the graph's tap goes to
    # the same address, graph.js twinUrl). The twin is opened in a page of its own: leaving
    # the graph's canvas page crashed Chromium's renderer in some runs on the loaded test
    # machine (a real click, or a tap sent to the graph), never outside the test run.
    stove = programme.unverified[0]
    link = tab.page.locator(f"#graph-list a[href$='/twins/{stove}']")
    href = await link.get_attribute("href")
    assert href is not None and href.endswith(f"/console/twins/{stove}")
    twin = await tab.page.context.new_page()
    try:
        origin = tab.page.url.split("/console")[0]
        answer = await twin.goto(href if href.startswith("http") else origin + href)
        assert answer is not None and answer.status == 200
    finally:
        await twin.close()
    tab.clean()


async def test_the_twin_chart_shows_its_history_on_two_axes(
    tab: Watched, programme: Programme
) -> None:
    width = tab.width  # type: ignore[attr-defined]
    await tab.open(f"/twins/{STOVE}")
    chart = tab.page.locator("#live-chart[data-drawn]")
    await chart.wait_for()
    assert await chart.get_attribute("data-drawn") == "3"  # register, use, condition
    # A month of the demo's telemetry, read from the day rollups.
    assert int(await chart.get_attribute("data-buckets") or 0) >= 28
    # The register (kWh) alone; energy per day and sessions per day each on an axis.
    assert await tab.page.locator("#chart-register .u-axis").count() == 2
    assert await tab.page.locator("#chart-use .u-axis").count() == 3
    use = await tab.page.locator("#chart-use .u-legend").inner_text()
    assert "energy used (kWh per day)" in use and "cooking sessions per day" in use
    assert "meter register (kWh)" in await tab.page.locator("#chart-register").inner_text()
    await tab.page.locator("#live-chart[data-state='live']").wait_for()
    await tab.fits(width)
    await tab.shot(f"twin-{width}")
    # A live batch lands in today's bucket, read again from the rollups.
    today_js = (
        "(() => { const d = new Date(); const t = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(),"
        " d.getUTCDate()) / 1000; const p = window.twinhubCharts.use; const i = p.x.indexOf(t);"
        " const at = k => i < 0 ? 0 : p.values[p.spec.series.findIndex(s => s.key === k)][i]"
        " || 0; return [at('session=start'), at('energyKwh')]; })()"
    )
    sessions, energy = await tab.page.evaluate(today_js)
    seq = 3_000_000_000 + secrets.randbelow(1_000_000)
    async with httpx.AsyncClient(base_url=programme.served.registry, timeout=10) as api:
        enrolled = await api.post(
            f"/v1/domains/{STOVE}/device-tokens",
            json={"label": f"browser {width}"},
            headers={"authorization": f"Bearer {programme.operator}"},
        )
        assert enrolled.status_code == 201, enrolled.text
        sent = await api.post(
            f"/v1/domains/{STOVE}/telemetry",
            json={
                "readings": [
                    {
                        "seq": seq,
                        "time": datetime.now(UTC).isoformat(),
                        "values": {"session": "start", "energyKwh": 0.4},
                    }
                ]
            },
            headers={"authorization": f"Bearer {enrolled.json()['token']}"},
        )
        assert sent.status_code == 200 and sent.json()["accepted"] == 1, sent.text
    await tab.page.locator(f"#live-chart[data-last-seq='{seq}']").wait_for()
    after = await tab.page.evaluate(today_js)
    assert after[0] == sessions + 1, (sessions, after)
    assert abs(after[1] - energy - 0.4) < 1e-9, (energy, after)
    await tab.shot(f"twin-live-{width}")
    assert f"reading {seq} arrived" in await tab.page.locator("#live-status").inner_text()
    # The month range reads the monthly rollups: a bucket per month.
    await tab.open(f"/twins/{STOVE}?range=365d")
    await tab.page.locator("#live-chart[data-drawn='3']").wait_for()
    assert int(await tab.page.locator("#live-chart").get_attribute("data-buckets") or 0) <= 13
    await tab.fits(width)
    tab.clean()


async def test_the_map_draws_stoves_by_state_that_link_to_their_twins(
    tab: Watched, programme: Programme
) -> None:
    width = tab.width  # type: ignore[attr-defined]
    await tab.open(f"/map?did={PROJECT}")
    shown = tab.page.locator("svg.map:visible")
    assert await shown.count() == 1
    assert await shown.get_attribute("id") == ("map-fine" if width > 600 else "map-coarse")
    assert "270 of 270 located stoves" in await tab.page.locator("#map").inner_text()
    # Seven places labelled; the twenty new stoves in one place form a group of their own,
    # coloured by its state.
    regions = await shown.locator("text.region").all_text_contents()
    assert sorted(regions) == sorted(
        ["Chibombo", "Chongwe", "Kabwe", "Kafue", "Lusaka", "Mazabuka", "Serenje"]
    )
    assert await shown.locator("a.group[data-state='unverified']").count() >= 1
    assert await tab.page.locator("#regions").get_by_text("Serenje").count() == 1
    await tab.fits(width)
    await tab.shot(f"map-{width}")
    # A group opens the map of its box; a stove there opens its twin.
    await shown.locator("a.group").first.click()
    await tab.page.wait_for_url("**/console/map?*bbox=*")
    zoomed = tab.page.locator("svg.map:visible")
    await tab.fits(width)
    await tab.shot(f"map-zoomed-{width}")
    while await zoomed.locator("a.stove").count() == 0:
        before = tab.page.url
        await zoomed.locator("a.group").first.click()
        await tab.page.wait_for_url(lambda url, before=before: url != before)
        zoomed = tab.page.locator("svg.map:visible")
    stove = zoomed.locator("a.stove").first
    did = await stove.get_attribute("data-did")
    await stove.click()
    await tab.page.wait_for_url(f"**/console/twins/{did}")
    # The twin page links back to its place on the map.
    await tab.page.locator("#on-the-map").click()
    await tab.page.wait_for_url("**/console/map?bbox=*")
    assert await tab.page.locator(f"svg.map:visible a[data-did='{did}']").count() == 1
    tab.clean()
