"""The console's pages of the verification workflow (issue 29 §7): a project's monitoring
periods with their figures and trust chain, the verifier's review of sampled stoves, the
project's documents, and retirement certificates.

Steps that need a role's signature are never done here: role keys stay with their holders
(the platform never holds one), so each page shows the exact `twinhub` command that signs
and posts the next step. Pages read through the services, as the API does."""

from __future__ import annotations

import shlex
from typing import Any

import orjson
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from twinhub.console.auth import SignedIn, signed_in
from twinhub.console.pages import render, url
from twinhub.console.svg_charts import charts
from twinhub.console.tables import Column, TableSpec, listed, table
from twinhub.kernel.errors import NotFound, ServiceError
from twinhub.oracle.monitoring import DRAFT_STEPS
from twinhub.oracle.period_chain import PeriodChain
from twinhub.platform import Platform
from twinhub.services.listing import ListPage, ListQuery
from twinhub.services.project_documents import checked

WORKFLOW_READS = frozenset({"reader", "writer", "proponent", "verifier", "registry"})
MAX_SAMPLED = 20  # stoves opened at once on the review page
MAX_ROWS = 500  # readings listed per stove (the chart draws all; the API gives all)
MAX_CHOICES = 60  # stoves offered as checkboxes on the review page
SAMPLE_FINDING = "readings of the sampled stoves match the frozen figures"
KEY_FILES = {"proponent": "proponent.key", "verifier": "verifier.key", "registry": "registry.key"}


def _platform(request: Request) -> Platform:
    return request.app.state.platform  # type: ignore[no-any-return]


async def _reader(request: Request) -> SignedIn:
    """A reader, or a holder of a workflow role (a verifier reads what it verifies)."""
    user = await signed_in(request)
    if not (user.principal.is_admin or user.principal.roles & WORKFLOW_READS):
        raise HTTPException(403, "This page needs the reader role or a workflow role.")
    return user


def _period_id(request: Request) -> int:
    period_id: int = request.path_params["period_id"]
    if not 1 <= period_id <= 2**31 - 1:
        raise HTTPException(404, "No such monitoring period.")
    return period_id


def command(*words: str) -> str:
    """A shell command line, each word quoted where the shell would read it otherwise."""
    return " ".join(shlex.quote(word) for word in words)


def curl(method: str, path: str) -> str:
    """A curl call of the API with the caller's key and address from the environment (in
    double quotes, so the shell expands them; the path quoted for the shell otherwise)."""
    safe = path.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`")
    return (
        f'curl -X {method} -H "Authorization: Bearer $TWINHUB_API_KEY" '
        f"-H 'content-type: application/json' \"$TWINHUB_URL{safe}\""
    )


def next_step(project: str, view: dict[str, Any], report: dict[str, Any]) -> dict[str, Any]:
    """Who acts next on the period and the command that signs it with their key."""
    period, state = str(view["id"]), view["state"]
    if state == "draft":
        return {
            "role": "proponent",
            "says": "The proponent submits the draft: its inputs freeze and its stove-days "
            "are held registry-wide.",
            "command": command(
                "twinhub", "period", "submit", project, period, "--key", KEY_FILES["proponent"]
            ),
        }
    if state == "submitted":
        sampled = [row["stove"] for row in report["stoves"][:3]]
        words = ["twinhub", "period", "verify", project, period, "--key", KEY_FILES["verifier"]]
        words += ["--outcome", "approved", "--finding", SAMPLE_FINDING]
        for stove in sampled:
            words += ["--sample", stove]
        return {
            "role": "verifier",
            "says": "An accredited verifier reviews the stoves it sampled (the review page "
            "opens their raw readings), then approves, rejects or asks for corrections "
            "(--outcome rejected|corrections with a --finding saying why). The command names "
            "the first stoves as an example: name those you sampled.",
            "command": command(*words),
        }
    if state == "verified":
        return {
            "role": "registry",
            "says": "The registry issues the verified period: its credits are minted to the "
            "proponent, once.",
            "command": command(
                "twinhub", "period", "issue", project, period, "--key", KEY_FILES["registry"]
            ),
        }
    if state == "issued":
        token = report["credits"]["token"]
        return {
            "role": "holder",
            "says": "A holder retires credits (an API key with the writer role); the "
            "retirement's certificate names this period's issuance.",
            "command": curl("POST", f"/v1/credits/{token}/retirements")
            + " -d '"
            + orjson.dumps({"amount": 1000, "reason": "2026 offset", "beneficiary": "..."}).decode()
            + "'",
        }
    return {
        "role": None,
        "says": "A rejected period stays as it is; a new draft starts over.",
        "command": None,
    }


async def _project(platform: Platform, did: str) -> dict[str, Any]:
    try:
        return await platform.domains.get(did)
    except NotFound as problem:
        raise HTTPException(404, problem.message) from problem


# -- projects and their periods ----------------------------------------------------------------
PROJECTS = TableSpec(
    name="projects",
    caption="Projects",
    columns=(Column("Project"), Column("Stoves"), Column("Periods"), Column("Documents")),
)
PERIODS = TableSpec(
    name="periods",
    caption="Monitoring periods",
    columns=(
        Column("#"),
        Column("Days"),
        Column("State"),
        Column("Stoves in / out"),
        Column("Credits"),
        Column("Updated"),
    ),
)


INCLUDED = TableSpec(
    name="included-stoves",
    caption="Included stoves",
    columns=(
        Column("Stove"),
        Column("Days"),
        Column("Active"),
        Column("Sessions"),
        Column("Quantity"),
        Column("Household"),
        Column("Reductions"),
    ),
    search="stove DID",
)
MAX_EXCLUSIONS = 200  # excluded stoves listed on the period's page (the report has all)


async def projects(request: Request) -> Response:
    user = await _reader(request)
    scopes = await _platform(request).summaries.scopes()
    found = [s for s in scopes if s["type"].lower() == "project"]

    async def page(asked: ListQuery) -> ListPage[Any]:
        return listed(found, asked)

    shown = await table(request, PROJECTS, page, url("/projects"))
    return render(request, "projects.html", {"t": shown}, user=user)


async def periods(request: Request) -> Response:
    user = await _reader(request)
    platform = _platform(request)
    did = request.path_params["did"]
    record = await _project(platform, did)
    found = list(reversed(await platform.monitoring.periods(did)))

    async def page(asked: ListQuery) -> ListPage[Any]:
        return listed(found, asked)

    shown = await table(request, PERIODS, page, url(f"/projects/{did}/periods"))
    return render(
        request,
        "periods.html",
        {
            "record": record,
            "t": shown,
            "drafts": await platform.period_drafts.recent(did),
            "draft_steps": DRAFT_STEPS,
            "draft_command": command(
                "twinhub", "oracle", "run-period", did, "--from", "2026-10-01", "--to", "2026-10-31"
            ),
        },
        user=user,
    )


async def period(request: Request) -> Response:
    user = await _reader(request)
    platform = _platform(request)
    did, period_id = request.path_params["did"], _period_id(request)
    record = await _project(platform, did)
    try:
        view = await platform.monitoring.period(did, period_id)
        report = orjson.loads(await platform.monitoring.report(did, period_id, "json"))
        late = await platform.periods.late_data(did, period_id)
        chain = await PeriodChain(platform.sessionmaker, platform.credits.certificates).draw(
            did, period_id
        )
    except ServiceError as problem:
        raise HTTPException(404, problem.message) from problem
    included = report["stoves"]

    async def page(asked: ListQuery) -> ListPage[Any]:
        wanted = asked.search.lower()
        return listed([s for s in included if wanted in s["stove"].lower()], asked)

    path = url(f"/projects/{did}/periods/{period_id}")
    stoves = await table(request, INCLUDED, page, path)
    return render(
        request,
        "period.html",
        {
            "record": record,
            "period": view,
            "report": report,
            "t": stoves,
            "shown_exclusions": report["exclusions"][:MAX_EXCLUSIONS],
            "late": late,
            "chain": chain,
            "next": next_step(did, view, report),
        },
        user=user,
    )


async def review(request: Request) -> Response:
    """The verifier's review: each sampled stove's raw readings, charted and listed, with
    the figures frozen for each of its days. The stoves sampled are those the page is asked
    for (?stove=...), else those the latest verification named."""
    user = await _reader(request)
    platform = _platform(request)
    did, period_id = request.path_params["did"], _period_id(request)
    record = await _project(platform, did)
    try:
        view = await platform.monitoring.period(did, period_id)
        report = orjson.loads(await platform.monitoring.report(did, period_id, "json"))
    except ServiceError as problem:
        raise HTTPException(404, problem.message) from problem
    asked = [s for s in request.query_params.getlist("stove") if s][:MAX_SAMPLED]
    named = view["findings"][-1]["sampledStoves"] if view["findings"] else []
    sampled = asked or named[:MAX_SAMPLED]
    opened, errors = [], []
    for stove in sampled:
        try:
            found = await platform.periods.readings(did, period_id, stove)
        except ServiceError as problem:
            errors.append(problem.message)
            continue
        opened.append(
            {
                "stove": stove,
                "days": found["days"],
                "charts": charts(found["readings"]),
                "readings": found["readings"][:MAX_ROWS],
                "count": len(found["readings"]),
            }
        )
    verify = ["twinhub", "period", "verify", did, str(period_id), "--key", KEY_FILES["verifier"]]
    verify += ["--outcome", "approved", "--finding", SAMPLE_FINDING]
    for stove in sampled:
        verify += ["--sample", stove]
    return render(
        request,
        "review.html",
        {
            "record": record,
            "period": view,
            "report": report,
            "sampled": opened,
            "errors": errors,
            "from_verification": not asked and bool(named),
            "verify_command": command(*verify) if view["state"] == "submitted" else None,
            # The choices: the sampled stoves and the first others (a period of 30,000
            # stoves is not 30,000 checkboxes; any stove opens by its ?stove= link).
            "stoves": list(dict.fromkeys([*sampled, *(row["stove"] for row in report["stoves"])]))[
                :MAX_CHOICES
            ],
            "included": len(report["stoves"]),
        },
        status_code=404 if errors and not opened else 200,
        user=user,
    )


# -- the project's documents -------------------------------------------------------------------
async def documents(request: Request) -> Response:
    user = await _reader(request)
    platform = _platform(request)
    did = request.path_params["did"]
    record = await _project(platform, did)
    try:
        stored = await platform.project_documents.document(did)
    except NotFound:
        stored = None
    attachments: list[dict[str, Any]] = []
    if stored is not None:
        for cited in sorted(checked(stored["document"]).attachments()):
            try:
                content, media_type = await platform.project_documents.attachment(cited)
            except NotFound:
                attachments.append({"digest": cited, "stored": False})
                continue
            attachments.append(
                {"digest": cited, "stored": True, "mediaType": media_type, "size": len(content)}
            )
    validation = stored["validation"] if stored else None
    drawn = []
    if stored is not None and validation is not None:
        reader = PeriodChain(platform.sessionmaker, platform.credits.certificates)
        drawn = await reader.validation(did, validation, stored["digest"])
    return render(
        request,
        "documents.html",
        {
            "record": record,
            "stored": stored,
            "document": stored["document"] if stored else None,
            "attachments": attachments,
            "validation": drawn,
            "validate_command": command(
                "twinhub", "project", "validate", did, "--key", KEY_FILES["verifier"]
            ),
            "accredit_command": command(
                "twinhub",
                "project",
                "accredit",
                did,
                "VERIFIER_DID",
                "--key",
                KEY_FILES["registry"],
            ),
            "put_command": curl("POST", f"/v1/domains/{did}/project-document") + " -d @pdd.json",
        },
        user=user,
    )


async def attachment(request: Request) -> Response:
    """An attachment's bytes, as a download (never rendered in the console's origin)."""
    await _reader(request)
    digest = request.path_params["digest"]
    try:
        content, media_type = await _platform(request).project_documents.attachment(digest)
    except NotFound as problem:
        raise HTTPException(404, problem.message) from problem
    name = digest.replace(":", "-")
    return Response(
        content,
        media_type=media_type,
        headers={"content-disposition": f'attachment; filename="{name}"'},
    )


# -- retirement certificates -------------------------------------------------------------------
async def retirement(request: Request) -> Response:
    user = await _reader(request)
    certificates = _platform(request).credits.certificates
    retirement_id: int = request.path_params["retirement_id"]
    if certificates is None or not 1 <= retirement_id <= 2**62:
        raise HTTPException(404, "No such retirement.")
    try:
        found = await certificates.certificate(retirement_id)
    except NotFound as problem:
        raise HTTPException(404, problem.message) from problem
    certificate = found["certificate"]
    return render(
        request,
        "retirement.html",
        {
            "certificate": certificate,
            "subject": certificate["credentialSubject"],
            "check": found["check"],
            "public_url": f"/v1/retirements/{retirement_id}/certificate",
            "pretty": orjson.dumps(certificate, option=orjson.OPT_INDENT_2).decode(),
        },
        user=user,
    )
