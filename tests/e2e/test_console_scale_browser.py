"""Every console page at programme scale, in a real browser: a `twinhub serve registry`
process over the large programme (tests/support/large_programme.py: the demo plus 30,000
stoves in ten regions, their households, claims, problems and telemetry), walked in
Debian's Chromium at 1,280 and at 360 pixels wide.

Each page must answer 200, fit its window (no sideways scroll of the page itself: wide
tables scroll inside their card), log no console error and make no request that fails.
A screenshot of each page at each width is kept in tests/artifacts/programme-scale/. The
lists are also checked for what they say: totals, filters, sorting and paging against the
programme's own counts. Server time per page is measured by `./dev bench console`, not here.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.e2e.conftest import ARTIFACTS
from tests.support import ahead
from tests.support.large_programme import LargeProgramme, build_large_programme
from tests.support.served import serving

STOVES = int(os.environ.get("TWINHUB_TEST_LARGE_STOVES", "30000"))
SHOTS = ARTIFACTS / "programme-scale"
WIDTHS = {"wide": (1280, 900), "phone": (360, 740)}


@dataclass
class Scale:
    programme: LargeProgramme
    registry: str

    @property
    def console(self) -> str:
        return f"{self.registry}/console"


def built(factory: pytest.TempPathFactory) -> tuple[Path, LargeProgramme]:
    """The programme in a folder of its own; built ahead, while earlier browser modules run."""
    data = factory.mktemp("scale")
    return data, build_large_programme(f"sqlite:///{data / 'twinhub.db'}", STOVES)


ahead.plan("large-programme", __name__, built)


@pytest.fixture(scope="module")
def scale(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scale]:
    data, made = ahead.take("large-programme", tmp_path_factory)
    env = {
        "ENVIRONMENT": "test",
        "PIN_ENCRYPTION_KEY": secrets.token_hex(32),
        "CREDENTIAL_ISSUER_KEY": secrets.token_hex(32),
        "ORACLE_ENABLED": "false",
        "REGISTRY_RATE_LIMIT": "1000000/minute",
    }
    with serving(data, "registry", wait_for=("registry",), **env) as urls:
        yield Scale(made, urls["registry"])


def pages(p: LargeProgramme) -> list[tuple[str, str]]:
    """Every console page (name, path) with the large programme's own things in it."""
    project = quote(p.project, safe=":/")
    demo = quote(p.demo_project, safe=":/")
    return [
        ("dashboard", "/"),
        ("dashboard-project", f"/?did={project}&days=30"),
        ("stoves", "/stoves"),
        ("stoves-filtered", "/stoves?region=Eastern&verified=yes&online=yes&sort=name"),
        ("stoves-of-project", f"/stoves?project={project}&page=40"),
        ("households", "/households"),
        ("households-region", "/households?region=Lusaka&sort=name"),
        ("claims", "/claims"),
        ("claims-all", "/claims?status=&sort=submitted&dir=desc"),
        ("support", "/support"),
        ("events", "/events"),
        ("events-typed", "/events?type=domain.created&page=100"),
        ("webhooks", "/webhooks"),
        ("keys", "/keys"),
        ("projects", "/projects"),
        ("project", f"/twins/{project}"),
        ("stove", f"/twins/{quote(p.first_stove, safe=':/')}"),
        ("periods", f"/projects/{demo}/periods"),
        ("period", f"/projects/{demo}/periods/{p.period}"),
        ("review", f"/projects/{demo}/periods/{p.period}/review"),
        ("documents", f"/projects/{demo}/documents"),
        ("surveys", "/surveys"),
        ("survey", f"/surveys/{p.survey}"),
        ("governance", "/governance"),
        ("graph", f"/graph?did={demo}"),
        ("ussd", "/ussd"),
    ]


class Walker:
    """One browser context of one width, signed in once, recording what goes wrong."""

    def __init__(self, page: Any, console: str, width: int) -> None:
        self.page = page
        self.console = console
        self.width = width
        self.problems: list[str] = []
        self.where = ""
        page.on("console", self._console)
        page.on("pageerror", lambda e: self.problems.append(f"{self.where}: script error {e}"))
        page.on("requestfailed", self._failed)
        page.on("response", self._answer)

    def _console(self, message: Any) -> None:
        if message.type == "error":
            self.problems.append(f"{self.where}: console error {message.text}")

    def _failed(self, request: Any) -> None:
        # The twin page's live event stream (/v1/...) is cut when the next page opens.
        if request.failure and "ERR_ABORTED" in request.failure and "/v1/" in request.url:
            return
        self.problems.append(f"{self.where}: request failed {request.url} {request.failure}")

    def _answer(self, response: Any) -> None:
        if response.status >= 400:
            self.problems.append(f"{self.where}: {response.status} {response.url}")

    async def sign_out(self) -> None:
        await self.page.get_by_role("button", name="Sign out").click()
        await self.page.get_by_label("API key").wait_for()

    async def sign_in(self, key: str) -> None:
        if not await self.page.get_by_label("API key").count():
            await self.page.goto(f"{self.console}/")
        await self.page.get_by_label("API key").fill(key)
        await self.page.get_by_role("button", name="Sign in").click()
        await self.page.wait_for_url(f"{self.console}/")

    async def visit(self, name: str, path: str, tag: str) -> None:
        self.where = f"{name} at {self.width}px"
        answer = await self.page.goto(f"{self.console}{path}")
        assert answer is not None and answer.status == 200, (
            f"{self.where}: {answer and answer.status}"
        )
        # Not "network idle": the twin page's live stream stays open. Its scripts (charts,
        # graph) draw on load; a moment for them to lay out.
        await self.page.wait_for_timeout(300)
        wide = await self.page.evaluate(
            "document.documentElement.scrollWidth > window.innerWidth ? "
            "[document.documentElement.scrollWidth, [...document.querySelectorAll('body *')]"
            ".filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)"
            ".map(e => e.tagName + '.' + e.className + '#' + e.id).slice(0, 6)] : null"
        )
        if wide:
            self.problems.append(f"{self.where}: {wide[0]}px wide, past the window: {wide[1]}")
        await self.page.screenshot(path=str(SHOTS / f"{tag}-{name}.png"), full_page=True)


@pytest.mark.parametrize("tag", list(WIDTHS))
async def test_every_page_fits_and_works_at_programme_scale(
    browser: Any, scale: Scale, tag: str
) -> None:
    width, height = WIDTHS[tag]
    SHOTS.mkdir(parents=True, exist_ok=True)
    context = await browser.new_context(
        viewport={"width": width, "height": height}, is_mobile=width < 600
    )
    context.set_default_timeout(20_000)
    # Offline, as in a field office: nothing leaves the loopback host.
    await context.route(
        "**/*",
        lambda route: (
            route.continue_() if route.request.url.startswith("http://127.0.0.1") else route.abort()
        ),
    )
    try:
        walker = Walker(await context.new_page(), scale.console, width)
        await walker.visit("sign-in", "/sign-in", tag)
        await walker.sign_in(scale.programme.admin_key)
        for name, path in pages(scale.programme):
            await walker.visit(name, path, tag)
        assert walker.problems == [], "\n".join(walker.problems)
    finally:
        await context.close()


async def test_the_lists_count_filter_sort_and_page_the_whole_programme(
    browser: Any, scale: Scale
) -> None:
    """What the tables say, against what the programme holds."""
    p = scale.programme
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        walker = Walker(await context.new_page(), scale.console, 1280)
        await walker.sign_in(p.oracle_key)  # a writer, and the claims' evaluator
        page = walker.page

        async def total(table: str) -> int:
            return int(await page.locator(f"#{table}-count").get_attribute("data-total") or -1)

        demo_stoves = 3
        await page.goto(f"{scale.console}/stoves")
        assert await total("stoves") == p.stoves + demo_stoves
        assert await page.locator("#stoves tbody tr").count() == 25
        await page.goto(f"{scale.console}/stoves?project={quote(p.project, safe=':/')}")
        assert await total("stoves") == p.stoves
        # Filters, chosen in the form as a person would.
        await page.get_by_label("Region").select_option("Eastern")
        await page.get_by_label("Verified").select_option("yes")
        await page.get_by_role("button", name="Show").click()
        await page.wait_for_url(re.compile(r".*region=Eastern.*"))
        expected = sum(1 for n in range(1, p.stoves + 1) if n % 10 == 2 and n % 6 == 0)
        assert await total("stoves") == expected
        rows = await page.locator("#stoves tbody tr").all_inner_texts()
        assert rows and all("Eastern" in row and "verified" in row for row in rows)
        # Online now: a reading within the hour.
        await page.goto(f"{scale.console}/stoves?project={quote(p.project, safe=':/')}&online=yes")
        assert await total("stoves") == p.online
        # Sorted by name, descending, by the heading's link (twice: ascending, then down).
        await page.goto(f"{scale.console}/stoves?project={quote(p.project, safe=':/')}")
        await page.locator("#stoves thead").get_by_role("link", name="Stove").click()
        await page.wait_for_url(re.compile(r".*dir=asc.*"))
        await page.locator("#stoves thead").get_by_role("link", name=re.compile("Stove")).click()
        await page.wait_for_url(re.compile(r".*dir=desc.*"))
        first = await page.locator("#stoves tbody tr").first.inner_text()
        assert f"Stove {p.stoves:05d}" in first, first
        assert await page.locator("#stoves th[aria-sort=descending]").count() == 1
        # The last page holds the remainder, and Next is gone there.
        await page.get_by_role("link", name="Last page").click()
        last = -(-p.stoves // 25)
        # A click starts the navigation and returns; wait for the last page to be the one shown.
        await page.wait_for_url(re.compile(rf".*[?&]page={last}(&|$).*"))
        remainder = p.stoves % 25 or 25
        assert await page.locator("#stoves tbody tr").count() == remainder
        assert await page.get_by_role("link", name="Next ›").count() == 0
        # Search: a stove by its serial number.
        await page.get_by_role("searchbox", name="Search").fill(f"SC-{p.stoves // 2:05d}")
        await page.get_by_role("button", name="Show").click()
        await page.wait_for_url(re.compile(r".*q=SC-.*"))
        assert await total("stoves") == 1
        # Households are customers' records: an organisation's writer is refused them (only
        # admin and registry keys see them, db/visibility.py); an admin sees them by region,
        # phone numbers shown in part only.
        refused = await page.goto(f"{scale.console}/households?region=Lusaka")
        assert refused is not None and refused.status == 403
        walker.problems.clear()  # that 403 was asked for
        await page.goto(f"{scale.console}/")
        await walker.sign_out()
        await walker.sign_in(p.admin_key)
        await page.goto(f"{scale.console}/households?region=Lusaka")
        assert await total("households") == p.regions["Lusaka"]
        assert "+2609600" not in await page.locator("#households").inner_text()
        await walker.sign_out()
        await walker.sign_in(p.oracle_key)
        # The claims queue: flagged first with the oracle's reason, then pending.
        await page.goto(f"{scale.console}/claims")
        assert await total("claims") == p.claims["pending"] + p.claims["flagged"]
        first_claim = page.locator("#claims tbody tr").first
        assert "flagged" in await first_claim.inner_text()
        assert "daily capacity" in await first_claim.inner_text()
        # A decision recorded from its row: rejected with a reason, and gone from the queue.
        row = page.locator(f"#claim-{p.pending_claim}")
        if not await row.count():
            await page.goto(f"{scale.console}/claims?q={p.pending_claim}")
        row = page.locator(f"#claim-{p.pending_claim}")
        await row.get_by_label("Reject").check()
        await row.get_by_label("Reason").fill("site visit: stove unused")
        await row.get_by_role("button", name="Record decision").click()
        await page.get_by_text(f"Claim {p.pending_claim} rejected.").wait_for()
        assert await total("claims") == p.claims["pending"] + p.claims["flagged"] - 1
        # Support: the open problems, one resolved from its row.
        # Support: problems about the stoves the key's organisation may see (its operator's).
        await walker.sign_out()
        await walker.sign_in(p.writer_key)
        await page.goto(f"{scale.console}/support")
        assert await total("support-problems") == p.problems
        first_problem = page.locator("#support-problems tbody tr").first
        reference = (await first_problem.get_attribute("id") or "").removeprefix("problem-")
        await first_problem.get_by_label(f"How problem {reference} was resolved").fill("replaced")
        await first_problem.get_by_role("button", name="Resolve").click()
        await page.get_by_text(f"Problem {reference} resolved.").wait_for()
        assert await total("support-problems") == p.problems - 1
        # A project's page counts its stoves and links to their list, naming only a few.
        await page.goto(f"{scale.console}/twins/{quote(p.project, safe=':/')}")
        link = page.get_by_role("link", name=f"all {p.stoves:,} stoves of this project")
        assert await page.locator("#relationships li").count() <= 15
        await link.click()
        await page.wait_for_url(re.compile(r".*/console/stoves\?project=.*"))
        assert await total("stoves") == p.stoves
        assert walker.problems == []
        # Bad parameters are refused with a page saying which (Chromium logs the 422).
        answer = await page.goto(f"{scale.console}/stoves?sort=colour")
        assert answer is not None and answer.status == 422
        assert "sorts by" in await page.locator("main").inner_text()
        assert walker.problems and all("422" in problem for problem in walker.problems)
    finally:
        await context.close()
