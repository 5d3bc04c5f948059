"""The console's pages: each parses the request, calls the services as the signed-in
principal, and renders a template. No SQL here and no calls to twinhub's own HTTP API."""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import replace
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import httpx
from jinja2 import Environment, FileSystemLoader
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

from twinhub.console.assets import STATIC_URL, TEMPLATE_DIR
from twinhub.console.auth import SignedIn, check_csrf, signed_in
from twinhub.console.sessions import COOKIE, SIGN_IN_COOKIE, SessionStore
from twinhub.console.tables import Column, Filter, TableSpec, listed, table
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import NotFound, ServiceError
from twinhub.kernel.principals import ROLES
from twinhub.logging import get_logger
from twinhub.platform import Platform
from twinhub.services.listing import ListPage, ListQuery

log = get_logger(__name__)
# Autoescaping everywhere: every name, DID and reason shown comes from users.
templates = Jinja2Templates(
    env=Environment(loader=FileSystemLoader(TEMPLATE_DIR), autoescape=True, auto_reload=False)
)
PERIODS = {"7": 7, "30": 30, "90": 90, "365": 365}
_PHONE = re.compile(r"^\+[1-9][0-9]{6,14}$")
_SERVICE_CODE = re.compile(r"^\*[0-9]+(\*[0-9]+)*#$")


def url(path: str, **query: Any) -> str:
    """A console URL (the console is mounted at /console)."""
    params = {k: v for k, v in query.items() if v is not None}
    return f"/console{path}" + (f"?{urlencode(params)}" if params else "")


def twin_url(did: str) -> str:
    return f"/console/twins/{did}"


def credit_amount(amount: int | None, decimals: int = 0) -> str:
    """An amount in the token's smallest unit as people count credits: 90646 at six
    decimals is '0.090646', 1234000000 is '1,234'."""
    if amount is None:
        return ""
    whole, fraction = divmod(abs(amount), 10**decimals)
    text = f"{whole:,}"
    if fraction:
        text += "." + f"{fraction:0{decimals}d}".rstrip("0")
    return ("-" if amount < 0 else "") + text


templates.env.globals.update(url=url, twin_url=twin_url, static=STATIC_URL)
templates.env.filters["credits"] = credit_amount


def _platform(request: Request) -> Platform:
    return request.app.state.platform  # type: ignore[no-any-return]


def render(
    request: Request,
    template: str,
    context: dict[str, Any],
    status_code: int = 200,
    user: SignedIn | None = None,
) -> Response:
    return templates.TemplateResponse(
        request,
        template,
        {
            "user": user,
            "csrf": user.session.csrf if user else None,
            "notice": request.query_params.get("notice"),
            **context,
        },
        status_code=status_code,
    )


def _done(path: str, notice: str, **query: Any) -> RedirectResponse:
    return RedirectResponse(url(path, notice=notice, **query), status_code=303)


async def _form(request: Request) -> tuple[SignedIn, FormData]:
    """The signed-in user and the posted form, after its CSRF token is checked."""
    user = await signed_in(request)
    form = await request.form()
    token = form.get("csrf")
    check_csrf(user, token if isinstance(token, str) else None)
    return user, form


def _text(form: FormData, name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


# For the other page modules: the posted form, a field of it, and the redirect after it.
posted, text, done = _form, _text, _done


# -- sign in and out -------------------------------------------------------------------------
def _safe_next(target: str | None) -> str:
    """Only console paths: never an open redirect to another site."""
    if target and target.startswith("/console/") and not target.startswith("//"):
        return target
    return url("/")


async def sign_in_form(request: Request, error: str | None = None, status: int = 200) -> Response:
    token = secrets.token_urlsafe(32)
    response = render(
        request,
        "sign_in.html",
        {"sign_in_csrf": token, "error": error, "next": request.query_params.get("next", "")},
        status_code=status,
    )
    _cookie(request, response, SIGN_IN_COOKIE, token, max_age=3600)
    return response


def _cookie(request: Request, response: Response, name: str, value: str, max_age: int) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path="/",
        httponly=True,
        samesite="strict",
        secure=_over_https(request),
    )


def _over_https(request: Request) -> bool:
    """https here, or at the trusted reverse proxy in front (TRUST_PROXY_ENABLED)."""
    if request.url.scheme == "https":
        return True
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return _platform(request).settings.security.trust_proxy_enabled and forwarded == "https"


async def sign_in(request: Request) -> Response:
    form = await request.form()
    sent, expected = form.get("csrf"), request.cookies.get(SIGN_IN_COOKIE)
    if not isinstance(sent, str) or not expected or not secrets.compare_digest(sent, expected):
        return await sign_in_form(request, "The sign-in form expired; try again.", 403)
    api_key = _text(form, "api_key")
    if not api_key:
        return await sign_in_form(request, "Enter an API key.", 422)
    principal = await _platform(request).api_keys.authenticate(api_key, cached=False)
    if principal is None:
        log.info("console sign-in refused")
        # The API's rule for wrong keys, on the same per-address counter (web/key_failures.py).
        retry_after = await request.app.state.key_failures.failed(request.scope)
        if retry_after is not None:
            limited = await sign_in_form(
                request, f"Too many wrong API keys; try again in {retry_after} s.", 429
            )
            limited.headers["retry-after"] = str(retry_after)
            return limited
        return await sign_in_form(request, "That API key is unknown or revoked.", 401)
    sessions: SessionStore = request.app.state.sessions
    await sessions.drop(request.cookies.get(COOKIE))
    session = await sessions.create(api_key)
    target = _safe_next(_text(form, "next"))
    response = RedirectResponse(target, status_code=303)
    ttl = _platform(request).settings.console.session_ttl_seconds
    _cookie(request, response, COOKIE, session.id, max_age=ttl)
    response.delete_cookie(SIGN_IN_COOKIE, path="/")
    log.info("console sign-in", principal=principal.did)
    return response


async def sign_out(request: Request) -> Response:
    _, _ = await _form(request)
    await request.app.state.sessions.drop(request.cookies.get(COOKIE))
    response = RedirectResponse(url("/sign-in"), status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response


# -- dashboard -------------------------------------------------------------------------------
async def dashboard(request: Request) -> Response:
    user = await signed_in(request)
    platform = _platform(request)
    scopes = await platform.summaries.scopes()
    did = request.query_params.get("did") or None
    days = PERIODS.get(request.query_params.get("days", "30"), 30)
    end = utcnow()
    error = None
    try:
        summary = await platform.summaries.summary(did, end - timedelta(days=days), end)
    except ServiceError as problem:
        error = problem.message
        summary = await platform.summaries.summary(None, end - timedelta(days=days), end)
        did = None
    # Amounts are in each token's smallest unit; people read whole credits.
    decimals = {token["name"]: token["decimals"] for token in await platform.credits.tokens()}
    credits_chart = {
        "title": "Credits issued per day",
        "dates": [row["date"] for row in summary["credits"]["issuedPerDay"]],
        "series": {
            token: [
                row[token] / 10 ** decimals.get(token, 0)
                for row in summary["credits"]["issuedPerDay"]
            ]
            for token in summary["credits"]["issued"]
        },
    }
    telemetry = summary["telemetry"]
    usage_chart = {
        "title": "Cooking sessions and energy per day",
        "dates": [row["date"] for row in telemetry["days"]],
        "series": {
            "cooking sessions": [row["cookingSessions"] for row in telemetry["days"]],
            "energy": [row["energyKwh"] for row in telemetry["days"]],
        },
        # Each its own axis: 45,000 sessions a day would flatten 18,000 kWh on one.
        "units": {"cooking sessions": "sessions", "energy": "kWh"},
    }
    claims_total = max(summary["claims"]["submitted"], 1)
    return render(
        request,
        "dashboard.html",
        {
            "summary": summary,
            "scopes": scopes,
            "did": did,
            "days": str(days),
            "periods": PERIODS,
            "error": error,
            "claims_total": claims_total,
            "decimals": decimals,
            "credits_chart": json.dumps(credits_chart),
            "usage_chart": json.dumps(usage_chart),
        },
        status_code=422 if error else 200,
        user=user,
    )


# The graph, the twin page and the map: console/views.py.


# -- governance ------------------------------------------------------------------------------
async def governance(request: Request, error: str | None = None, status: int = 200) -> Response:
    user = await signed_in(request)
    platform = _platform(request)
    proposals = [
        await platform.governance.proposal(pid)
        for pid in await platform.summaries.recent_proposal_ids()
    ]
    return render(
        request,
        "governance.html",
        {"groups": await platform.summaries.groups(), "proposals": proposals, "error": error},
        status_code=status,
        user=user,
    )


async def vote(request: Request) -> Response:
    user, form = await _form(request)
    proposal_id = request.path_params["proposal_id"]
    option = _text(form, "option")
    try:
        await _platform(request).governance.vote(proposal_id, option, user.principal)
    except ServiceError as problem:
        return await governance(request, f"Proposal {proposal_id}: {problem.message}", 422)
    return _done("/governance", f"Your {option} vote on proposal {proposal_id} is counted.")


async def execute(request: Request) -> Response:
    user, _ = await _form(request)
    proposal_id = request.path_params["proposal_id"]
    try:
        view = await _platform(request).governance.execute(proposal_id, user.principal)
    except ServiceError as problem:
        return await governance(request, f"Proposal {proposal_id}: {problem.message}", 422)
    if view["status"] != "executed":  # a large batch: the rest runs in the background
        progress = view["progress"]
        return _done(
            "/governance",
            f"Proposal {proposal_id} is executing ({progress['done']}/{progress['total']} "
            "done); this page shows its progress.",
        )
    return _done("/governance", f"Proposal {proposal_id} executed.")


# -- USSD phone ------------------------------------------------------------------------------
async def ussd_phone(request: Request) -> Response:
    user = await signed_in(request)
    return render(request, "ussd.html", {}, user=user)


async def ussd_send(request: Request) -> Response:
    """Forward one phone input to the USSD gateway, as a telecom aggregator would."""
    user = await signed_in(request)
    check_csrf(user, request.headers.get("x-csrf-token"))
    try:
        body = await request.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return JSONResponse({"reply": "END The phone sent no valid request."}, status_code=422)
    phone = str(body.get("phoneNumber", ""))
    service_code = str(body.get("serviceCode", ""))
    if not _PHONE.match(phone):
        return JSONResponse({"reply": "END Enter the phone number as +<country><number>."}, 422)
    if not _SERVICE_CODE.match(service_code):
        return JSONResponse({"reply": "END A service code looks like *384*1#."}, 422)
    payload = {
        "sessionId": str(body.get("sessionId", ""))[:100],
        "serviceCode": service_code,
        "phoneNumber": phone,
        "text": str(body.get("text", "")),
    }
    endpoint = _platform(request).settings.console_ussd_endpoint
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            answer = await client.post(endpoint, json=payload)
    except httpx.HTTPError as error:
        log.warning("console USSD forward failed", error=type(error).__name__)
        return JSONResponse(
            {"reply": "END The USSD gateway did not answer. Is it running?"}, status_code=502
        )
    return JSONResponse({"reply": answer.text, "status": answer.status_code})


# -- API keys --------------------------------------------------------------------------------
KEYS = TableSpec(
    name="keys",
    caption="API keys",
    columns=(
        Column("Key id"),
        Column("Principal", "principal"),
        Column("Roles"),
        Column("Label"),
        Column("Created", "created"),
        Column("State"),
        Column("Actions"),
    ),
    filters=(
        Filter("state", "State", (("", "all"), ("active", "active"), ("revoked", "revoked"))),
    ),
    search="principal, label or key id",
    default_sort="created",
    stack=True,
)


async def _admin(request: Request) -> SignedIn:
    user = await signed_in(request)
    if not user.principal.is_admin:
        raise HTTPException(403, "API keys are managed by admins.")
    return user


async def keys(
    request: Request,
    user: SignedIn | None = None,
    created: str | None = None,
    error: str | None = None,
    status: int = 200,
    twin: str | None = None,
    device_secret: str | None = None,
) -> Response:
    """API keys (admins) and a twin's device tokens (its controllers and admins: the rules
    of DeviceTokenService, as for the REST routes)."""
    user = user or await signed_in(request)
    if not user.can("writer"):
        raise HTTPException(403, "API keys are managed by admins, device tokens by writers.")
    twin = twin if twin is not None else request.query_params.get("twin", "").strip()
    tokens: list[Any] = []
    if twin:
        try:
            tokens = await _platform(request).device_tokens.list(twin, user.principal)
        except ServiceError as problem:
            error = error or problem.message
    shown = None
    if user.principal.is_admin:
        keep = {"twin": twin} if twin else None
        shown = await table(request, KEYS, _platform(request).lists.api_keys, url("/keys"), keep)
    return render(
        request,
        "keys.html",
        {
            "t": shown,
            "roles": ROLES,
            "created": created,
            "error": error,
            "twin": twin,
            "device_tokens": tokens,
            "device_secret": device_secret,
        },
        status_code=status,
        user=user,
    )


async def create_key(request: Request) -> Response:
    user, form = await _form(request)
    if not user.principal.is_admin:
        raise HTTPException(403, "API keys are managed by admins.")
    roles = [r for r in form.getlist("roles") if isinstance(r, str)]
    try:
        token, _ = await _platform(request).api_keys.create(
            _text(form, "principal"), roles, _text(form, "label")
        )
    except ServiceError as problem:
        details = "; ".join(f"{d.field}: {d.error}" for d in problem.details)
        return await keys(request, user, error=f"{problem.message} {details}", status=422)
    # Shown once, on this answer only (never in a URL, never stored in the clear).
    return await keys(request, user, created=token, status=201)


async def revoke_key(request: Request) -> Response:
    user, _ = await _form(request)
    if not user.principal.is_admin:
        raise HTTPException(403, "API keys are managed by admins.")
    key_id = request.path_params["key_id"]
    if not await _platform(request).api_keys.revoke(key_id):
        return await keys(request, user, error=f"No active key {key_id}.", status=404)
    return _done("/keys", f"Key {key_id} revoked.")


# -- device tokens (telemetry credentials of a physical twin) --------------------------------
async def create_device_token(request: Request) -> Response:
    user, form = await _form(request)
    twin = _text(form, "twin")
    try:
        token, _ = await _platform(request).device_tokens.create(
            twin, user.principal, _text(form, "label")
        )
    except ServiceError as problem:
        return await _refused(request, user, problem, twin)
    # Shown once, on this answer only, as for API keys.
    return await keys(request, user, status=201, twin=twin, device_secret=token)


async def rotate_device_token(request: Request) -> Response:
    user, form = await _form(request)
    twin, token_id = _text(form, "twin"), request.path_params["token_id"]
    try:
        token, _ = await _platform(request).device_tokens.rotate(twin, token_id, user.principal)
    except ServiceError as problem:
        return await _refused(request, user, problem, twin)
    return await keys(request, user, twin=twin, device_secret=token)


async def revoke_device_token(request: Request) -> Response:
    user, form = await _form(request)
    twin, token_id = _text(form, "twin"), request.path_params["token_id"]
    try:
        await _platform(request).device_tokens.revoke(twin, token_id, user.principal)
    except ServiceError as problem:
        return await _refused(request, user, problem, twin)
    return _done("/keys", f"Device token {token_id} revoked.", twin=twin)


async def _refused(request: Request, user: SignedIn, problem: ServiceError, twin: str) -> Response:
    """The keys page again, saying why the device token service refused."""
    details = "; ".join(f"{d.field}: {d.error}" for d in problem.details)
    status = {"not_found": 404, "forbidden": 403, "conflict": 409}.get(problem.code, 422)
    return await keys(
        request, user, error=f"{problem.message} {details}".strip(), status=status, twin=twin
    )


# -- surveys ---------------------------------------------------------------------------------
def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


async def surveys(request: Request) -> Response:
    """Every survey (newest first) with its sample, answers so far and achieved precision
    against its target."""
    user = await signed_in(request)
    service = _platform(request).surveys
    found = await service.surveys()

    async def page(asked: ListQuery) -> ListPage[Any]:
        cut = listed(found, asked)  # each survey's results are read for its page only
        return replace(cut, items=[await service.results(s.id) for s in cut.items])

    shown = await table(request, SURVEYS, page, url("/surveys"))
    return render(request, "surveys.html", {"t": shown, "percent": _percent}, user=user)


SURVEYS = TableSpec(
    name="surveys",
    caption="Household surveys",
    columns=(
        Column("Survey"),
        Column("Project"),
        Column("Sample"),
        Column("Answered"),
        Column("Household size"),
        Column("Precision (target)"),
    ),
)


async def survey(request: Request) -> Response:
    """One survey: its results and, in draw order, each sampled household's answers."""
    user = await signed_in(request)
    service = _platform(request).surveys
    survey_id = request.path_params["survey_id"]
    try:
        results = await service.results(survey_id)
    except NotFound as problem:
        raise HTTPException(404, problem.message) from problem
    households = [h.as_json() for h in await service.households(survey_id)]
    return render(
        request,
        "survey.html",
        {"results": results, "households": households, "percent": _percent},
        user=user,
    )
