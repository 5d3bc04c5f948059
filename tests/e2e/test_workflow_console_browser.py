"""The verification workflow's console pages in a real browser (Debian's Chromium driven by
Playwright), at 1280 and at 360 pixels: a project's periods, a period's figures and its
trust chain drawn as signed steps, the verifier's review with its chart, the project's
documents and a retirement certificate. The registry runs in the test's process, served
by uvicorn on a loopback port, over a workflow built through the API (issued, then part
of it retired). Screenshots are kept in tests/artifacts/ (workflow-*.png).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import date
from typing import Any

import orjson
import pytest
import uvicorn

from tests.conftest import BACKENDS, Registry, free_port
from tests.e2e.conftest import ARTIFACTS
from tests.e2e.test_console_browser import Tab
from tests.support.workflow_world import build_workflow
from twinhub.db.models import PeriodDraft
from twinhub.kernel.clock import utcnow
from twinhub.registry.app import create_registry_app

FAILED = {
    "code": "conflict",
    "message": "did:ixo:entity/a-project-with-a-long-name has no active stoves: a period "
    "with no data is refused, never issued with zero.",
    "details": [],
}
pytestmark = pytest.mark.parametrize("backend", [BACKENDS[0]], indirect=True, ids=str)


async def served(registry: Registry) -> tuple[uvicorn.Server, asyncio.Task[None], str]:
    port = free_port()
    app = create_registry_app(platform=registry.platform)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 (uvicorn offers no event to wait on)
        await asyncio.sleep(0.02)
    return server, task, f"http://127.0.0.1:{port}"


@pytest.fixture
async def site(registry: Registry) -> AsyncIterator[dict[str, Any]]:
    """An issued period of a validated project, 1,000 of its credits retired; served."""
    flow = await build_workflow(registry)
    stove = await flow.stove()
    quiet = await flow.world.asset(project=flow.project, verified=False)  # excluded, why
    period = (await flow.draft())["id"]
    await flow.through(period, [stove])
    retired = await flow.proponent.client.post(
        "/v1/credits/CARBON/retirements",
        json={"amount": 1000, "reason": "2026 offset", "beneficiary": "Acme Ltd"},
    )
    assert retired.status_code == 201, retired.text
    # A next period drafting in the background, and one that failed (as a long one can).
    now = utcnow()
    async with registry.platform.sessionmaker() as session, session.begin():
        for job, state, error in (
            ("a" * 32, "drafting", None),
            ("b" * 32, "failed", orjson.dumps(FAILED).decode()),
        ):
            session.add(
                PeriodDraft(
                    id=job,
                    project_did=flow.project,
                    start=date(2026, 11, 1),
                    end=date(2026, 11, 30),
                    actor=flow.world.operator,
                    state=state,
                    step="reading",
                    done=4_000,
                    total=100_000,
                    error=error,
                    created_at=now,
                    updated_at=now,
                )
            )
    server, task, url = await served(registry)
    yield {
        "url": url,
        "project": flow.project,
        "period": period,
        "stove": stove,
        "quiet": quiet,
        "retirement": retired.json()["id"],
        "key": await registry.key(flow.verifier.did, "verifier"),
    }
    server.should_exit = True
    await asyncio.wait_for(task, 10)
    await flow.world.close()


async def pages(tab: Tab, site: dict[str, Any], suffix: str) -> None:
    """Open every page, assert what it must show, keep a screenshot of each."""
    project, period = site["project"], site["period"]
    at = f"/projects/{project}/periods/{period}"

    await tab.open("/projects")
    await tab.page.locator(f"#projects a[href='/console/projects/{project}/periods']").click()
    await tab.page.locator(f"#period-{period}").get_by_text("issued").wait_for()
    drafts = await tab.page.locator("#drafts").inner_text()
    assert "reading the stoves' readings, 4,000 of 100,000 stoves read" in drafts
    assert FAILED["message"] in drafts
    await tab.shot(f"workflow-periods{suffix}")

    await tab.open(at)
    assert await tab.page.locator("#state").inner_text() == "issued"
    assert await tab.page.locator("#included").inner_text() == "1"
    assert await tab.page.locator("#excluded").inner_text() == "1"
    assert site["quiet"] in await tab.page.locator("#exclusions").inner_text()
    steps = tab.page.locator("#chain > li.step")
    kinds = [await s.get_attribute("data-kind") for s in await steps.all()]
    assert kinds == [
        "VerifierAccreditationCredential",
        "ProjectValidationCredential",
        "MonitoringSubmissionCredential",
        "MonitoringVerificationCredential",
        "CreditIssuanceCredential",
        "CreditRetirementCredential",
    ]
    assert await tab.page.locator("#chain .step-ok").count() == 6  # every signature verifies
    assert await tab.page.locator("#chain .link-bad").count() == 0  # every link holds
    assert await tab.page.locator("#chain .link-ok").count() == 9
    assert "retirements" in await tab.page.locator("#next pre.cli").inner_text()
    await tab.shot(f"workflow-period{suffix}")

    await tab.open(f"{at}/review")
    stove = tab.page.locator(f"section.stove[data-stove='{site['stove']}']")
    assert await stove.locator("svg polyline.series").count() == 2  # energyKwh, meterKwh
    assert await stove.locator("table.readings tbody tr").count() == 40
    assert await stove.locator("table.days tbody tr").count() == 10
    await tab.shot(f"workflow-review{suffix}")

    await tab.open(f"/projects/{project}/documents")
    assert "0.88" in await tab.page.locator("#parameter-fNRB").inner_text()
    assert await tab.page.locator("#attachments tbody tr").count() == 1
    assert await tab.page.locator("#validation .step-ok").count() == 2  # accreditation too
    assert await tab.page.locator("#validation .link-ok").count() == 2
    assert await tab.page.locator("#validation .link-bad").count() == 0
    assert await tab.page.locator("#model-EPC-6L p a[href^='/console/attachments/']").count() == 1
    await tab.shot(f"workflow-documents{suffix}")

    await tab.open(f"/retirements/{site['retirement']}")
    assert await tab.page.locator("#check").inner_text() == "verifies"
    assert await tab.page.locator("#beneficiary").inner_text() == "Acme Ltd"
    assert f"period {period}" in await tab.page.locator("#sources").inner_text()
    await tab.shot(f"workflow-retirement{suffix}")


async def test_workflow_pages_at_1280_and_360_pixels(
    browser: Any,
    site: dict[str, Any],
) -> None:
    for width, height, suffix in ((1280, 900, ""), (360, 740, "-mobile")):
        context = await browser.new_context(
            viewport={"width": width, "height": height}, is_mobile=width < 400
        )
        context.set_default_timeout(10_000)
        tab = Tab(await context.new_page(), f"{site['url']}/console")
        try:
            await tab.sign_in(site["key"])
            await pages(tab, site, suffix)
            if width < 400:
                for path in (
                    "/projects",
                    f"/projects/{site['project']}/periods",
                    f"/projects/{site['project']}/periods/{site['period']}",
                    f"/projects/{site['project']}/periods/{site['period']}/review",
                    f"/projects/{site['project']}/documents",
                    f"/retirements/{site['retirement']}",
                ):
                    await tab.open(path)
                    scrolled = await tab.page.evaluate("document.documentElement.scrollWidth")
                    assert scrolled <= 360, f"{path} scrolls sideways ({scrolled}px)"
            assert tab.errors == [], tab.errors
            assert tab.dialogs == []
        finally:
            await context.close()
    assert (ARTIFACTS / "console-workflow-period-mobile.png").exists()
