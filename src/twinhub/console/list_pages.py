"""The console's list pages: stoves, households, support problems, events and webhooks,
each one table (console/tables.py) paged, searched, filtered and sorted by the database
(services/programme_lists.py)."""

from __future__ import annotations

from dataclasses import replace

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from twinhub.console.auth import signed_in
from twinhub.console.pages import done, posted, render, text, url
from twinhub.console.tables import Column, Filter, TableSpec, table
from twinhub.db.visibility import viewer_of
from twinhub.events.types import CATALOGUE
from twinhub.kernel.errors import ServiceError
from twinhub.platform import Platform
from twinhub.services.stove_care import PROBLEM_KINDS

ALL = ("", "all")
YES_NO = (ALL, ("yes", "yes"), ("no", "no"))


def _platform(request: Request) -> Platform:
    return request.app.state.platform  # type: ignore[no-any-return]


def stove_spec(regions: list[str], villages: list[str]) -> TableSpec:
    return TableSpec(
        name="stoves",
        caption="Stoves",
        columns=(
            Column("Stove", "name"),
            Column("Region · village", "region"),
            Column("State"),
            Column("Last reading", "seen"),
            Column("Household"),
            Column("Registered", "registered"),
        ),
        filters=(
            Filter("status", "Status", (ALL, ("active", "active"), ("deactivated", "deactivated"))),
            Filter("verified", "Verified", YES_NO),
            Filter("online", "Online", YES_NO),
            Filter("region", "Region", (ALL, *((r, r) for r in regions))),
            Filter("village", "Village", (ALL, *((v, v) for v in villages))),
        ),
        search="name, DID, serial or customer ID",
        default_sort="registered",
        stack=True,
    )


async def stoves(request: Request) -> Response:
    """Every physical twin, or a project's (`?project=DID`): where it is, whether it is
    verified and reporting, whose household it is."""
    user = await signed_in(request)
    platform = _platform(request)
    project = request.query_params.get("project", "").strip() or None
    record = None
    if project:
        try:
            record = await platform.domains.get(project)
        except ServiceError as problem:  # NotFound, or not a DID at all
            raise HTTPException(404, f"No project {project[:200]}.") from problem
    places = await platform.lists.places(project)
    spec = stove_spec(places["regions"], places["villages"])
    shown = await table(
        request,
        spec,
        lambda asked: platform.lists.stoves(asked, project),
        url("/stoves"),
        keep={"project": project} if project else None,
    )
    return render(request, "stoves.html", {"t": shown, "project": record}, user=user)


HOUSEHOLDS = TableSpec(
    name="households",
    caption="Households",
    columns=(
        Column("Household", "name"),
        Column("Customer ID"),
        Column("Phone"),
        Column("Stoves"),
        Column("Joined", "joined"),
    ),
    filters=(Filter("locked", "PIN locked", YES_NO),),
    search="name, customer ID or phone",
    default_sort="joined",
    stack=True,
)


async def households(request: Request) -> Response:
    """The households (USSD customers) and their stoves; phone numbers shown in part."""
    user = await signed_in(request)
    platform = _platform(request)
    places = await platform.lists.places()
    region = Filter("region", "Region", (ALL, *((r, r) for r in places["regions"])))
    spec = replace(HOUSEHOLDS, filters=(*HOUSEHOLDS.filters, region))
    if not viewer_of(user.principal).everything:
        raise HTTPException(403, "Households are seen by admin and registry keys.")
    viewer = viewer_of(user.principal)
    shown = await table(
        request, spec, lambda asked: platform.lists.households(asked, viewer), url("/households")
    )
    return render(request, "households.html", {"t": shown}, user=user)


SUPPORT = TableSpec(
    name="support-problems",
    caption="Support problems",
    columns=(
        Column("Ref"),
        Column("Stove"),
        Column("Problem", "kind"),
        Column("Customer"),
        Column("Reported", "reported"),
        Column("Resolution"),
    ),
    filters=(
        Filter(
            "status", "Status", (("open", "open"), ("resolved", "resolved"), ("", "all")), "open"
        ),
        Filter("kind", "Problem", (ALL, *((k, k) for k in PROBLEM_KINDS))),
    ),
    search="reference, stove or customer ID",
    default_sort="reported",
    default_descending=True,
    stack=True,
)


async def support(
    request: Request,
    errors: dict[str, str] | None = None,
    sent: dict[str, str] | None = None,
    status: int = 200,
) -> Response:
    """Problems households reported over USSD (Stove Status); writers resolve them."""
    user = await signed_in(request)
    viewer = viewer_of(user.principal)
    lists = _platform(request).lists
    shown = await table(
        request, SUPPORT, lambda asked: lists.problems(asked, viewer), url("/support")
    )
    listed = {row["reference"] for row in shown.items}
    stray = [f"Problem {ref}: {e}" for ref, e in (errors or {}).items() if ref not in listed]
    return render(
        request,
        "support.html",
        {"t": shown, "errors": errors or {}, "sent": sent or {}, "stray": stray},
        status_code=status,
        user=user,
    )


EVENTS = TableSpec(
    name="events",
    caption="Events",
    columns=(
        Column("#", "position", numeric=True),
        Column("Type"),
        Column("Subject"),
        Column("Actor"),
        Column("When"),
    ),
    filters=(Filter("type", "Type", (ALL, *((k, k) for k in sorted(CATALOGUE)))),),
    search="subject DID or event id",
    default_sort="position",
    default_descending=True,
    stack=True,
)


async def events(request: Request) -> Response:
    """The event log as webhooks and `GET /v1/events` see it, newest first."""
    user = await signed_in(request)
    viewer = viewer_of(user.principal)
    lists = _platform(request).lists
    shown = await table(request, EVENTS, lambda asked: lists.events(asked, viewer), url("/events"))
    return render(request, "events.html", {"t": shown}, user=user)


WEBHOOKS = TableSpec(
    name="webhooks",
    caption="Webhooks",
    columns=(
        Column("Webhook"),
        Column("URL", "url"),
        Column("Events"),
        Column("Created", "created"),
        Column("State"),
    ),
    filters=(
        Filter(
            "state", "State", (("active", "active"), ("deleted", "deleted"), ("", "all")), "active"
        ),
    ),
    search="URL, description or id",
    default_sort="created",
    stack=True,
)


async def webhooks(request: Request) -> Response:
    """Webhook subscriptions (admins: the API's rule for them)."""
    user = await signed_in(request)
    if not user.principal.is_admin:
        raise HTTPException(403, "Webhooks are managed by admins.")
    shown = await table(request, WEBHOOKS, _platform(request).lists.webhooks, url("/webhooks"))
    return render(request, "webhooks.html", {"t": shown}, user=user)


# -- the claims queue --------------------------------------------------------------------------
CLAIM_STATUSES = ("pending", "flagged", "approved", "rejected", "disputed", "invalidated")
CLAIMS = TableSpec(
    name="claims",
    caption="Claims",
    columns=(
        Column("Claim", "submitted"),
        Column("Asset"),
        Column("Report"),
        Column("Status", "queue"),
        Column("Decision"),
    ),
    filters=(
        Filter(
            "status",
            "Status",
            (("open", "flagged and pending"), *((s, s) for s in CLAIM_STATUSES), ("", "all")),
            "open",
        ),
    ),
    search="claim id, asset or agent DID",
    default_sort="queue",
    stack=True,
)


async def claims(
    request: Request,
    errors: dict[str, str] | None = None,
    status: int = 200,
    sent: dict[str, dict[str, str]] | None = None,
) -> Response:
    """The claims queue: flagged claims first (with the oracle's reason), then pending
    ones, oldest first; writers decide each in its row."""
    user = await signed_in(request)
    project = request.query_params.get("project", "").strip()
    keep = {"project": project} if project else None
    fixed = {"project": project} if project else {}
    lists = _platform(request).lists
    shown = await table(request, CLAIMS, lists.claims, url("/claims"), keep, **fixed)
    errors = errors or {}
    listed = {row["id"] for row in shown.items}
    stray = [f"Claim {cid}: {error}" for cid, error in errors.items() if cid not in listed]
    return render(
        request,
        "claims.html",
        {"t": shown, "errors": errors, "stray": stray, "sent": sent or {}},
        status_code=status,
        user=user,
    )


async def evaluate(request: Request) -> Response:
    user, form = await posted(request)
    claim_id = request.path_params["claim_id"]
    decision = text(form, "decision")
    reason = text(form, "reason") or None
    error = None
    if decision not in ("approved", "rejected", "flagged"):
        error = "Choose approve, reject or flag."
    elif decision != "approved" and reason is None:
        error = f"Say why the claim is {decision}."
    if error is None:
        try:
            # An approval mints what the methodology computes; nobody types an amount.
            await _platform(request).claims.evaluations.evaluate(
                claim_id, decision, user.principal, reason
            )
        except ServiceError as problem:
            details = "; ".join(f"{d.field}: {d.error}" for d in problem.details)
            error = problem.message + (f" ({details})" if details else "")
    if error is not None:
        sent = {"decision": decision, "reason": reason or ""}
        return await claims(request, {claim_id: error}, 422, {claim_id: sent})
    return done("/claims", f"Claim {claim_id} {decision}.")


async def resolve_problem(request: Request) -> Response:
    """Resolve a reported stove problem (writers): it leaves the open list."""
    user, form = await posted(request)
    if not user.can("writer"):
        raise HTTPException(403, "Stove problems are resolved by writers.")
    reference = request.path_params["reference"]
    note = text(form, "note")
    try:
        await _platform(request).stove_care.resolve_problem(
            reference, user.principal.did, note, viewer=viewer_of(user.principal)
        )
    except ServiceError as problem:
        details = "; ".join(f"{d.field}: {d.error}" for d in problem.details)
        status = {"not_found": 404, "conflict": 409}.get(problem.code, 422)
        error = problem.message + (f" ({details})" if details else "")
        return await support(request, {reference: error}, {reference: note}, status)
    return done("/support", f"Problem {reference} resolved.")
