"""The verification workflow's console pages through the real ASGI stack (the browser
test, tests/e2e/test_workflow_console_browser.py, looks at them at 1280 and 360 px):
signed in, a draft's figures and the command that submits it, the chain it rests on, the
review's refusals, the documents and their attachments, as downloads."""

from __future__ import annotations

import pytest

from tests.conftest import BACKENDS, Registry
from tests.integration.console.test_console import console, sign_in
from tests.support.workflow_world import CERTIFICATE, CERTIFICATE_DIGEST, build_workflow

pytestmark = pytest.mark.parametrize("backend", [BACKENDS[0]], indirect=True, ids=str)


async def test_a_draft_its_chain_review_and_documents(registry: Registry) -> None:
    flow = await build_workflow(registry)
    stove = await flow.stove()
    period = (await flow.draft())["id"]
    project = flow.project
    async with console(registry) as browser:
        # Signed out: to the sign-in page, nothing shown.
        refused = await browser.get(f"/console/projects/{project}/periods/{period}")
        assert refused.status_code == 303 and "/console/sign-in" in refused.headers["location"]

        # A verifier's key that may also read: the header names both, the access level
        # first and the workflow role it signs as beside it.
        await sign_in(browser, await registry.key(flow.verifier.did, "reader", "verifier"))
        listed = await browser.get("/console/projects")
        assert listed.status_code == 200 and f"/console/projects/{project}/periods" in listed.text
        assert '<b class="role role-reader">reader</b>' in listed.text
        assert '<b class="role role-workflow">verifier</b>' in listed.text
        periods = await browser.get(f"/console/projects/{project}/periods")
        assert f'id="period-{period}"' in periods.text and "draft" in periods.text

        page = await browser.get(f"/console/projects/{project}/periods/{period}")
        assert page.status_code == 200, page.text
        # The step needs the proponent's key: the page says the command, never signs.
        assert f"twinhub period submit {project} {period} --key proponent.key" in page.text
        # A draft rests on the project's accreditation and validation, both verifying.
        assert page.text.count('data-kind="') == 2
        assert page.text.count("signature verifies") == 2 and "not in the chain" not in page.text
        assert "A draft has no frozen inputs yet" in page.text

        review = await browser.get(
            f"/console/projects/{project}/periods/{period}/review", params={"stove": stove}
        )
        assert review.status_code == 200 and review.text.count("<polyline") == 2
        stray = await browser.get(
            f"/console/projects/{project}/periods/{period}/review",
            params={"stove": "did:ixo:entity/elsewhere"},
        )
        assert stray.status_code == 404 and "is not a stove of monitoring period" in stray.text
        for missing in (
            f"/console/projects/{project}/periods/999999",
            f"/console/projects/{flow.world.project}/periods/{period}",  # another project's
            "/console/projects/did:ixo:entity/nowhere/periods",
            "/console/retirements/999999",
            "/console/attachments/sha256:" + "0" * 64,
        ):
            answer = await browser.get(missing)
            assert answer.status_code == 404, (missing, answer.text)

        documents = await browser.get(f"/console/projects/{project}/documents")
        assert documents.status_code == 200
        assert 'id="parameter-fNRB"' in documents.text and CERTIFICATE_DIGEST in documents.text
        download = await browser.get(f"/console/attachments/{CERTIFICATE_DIGEST}")
        assert download.content == CERTIFICATE
        assert download.headers["content-disposition"].startswith("attachment")
        # A project with no document says how the proponent stores one.
        bare = await browser.get(f"/console/projects/{flow.world.project}/documents")
        assert bare.status_code == 200 and "project-document" in bare.text
    await flow.world.close()
