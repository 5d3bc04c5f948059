"""The console's views of a programme at scale: the domain graph (stoves grouped by state,
a group opened page by page), the twin page (its telemetry history from the rollups, the
live readings appended) and the map of located stoves. Services only, no SQL."""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from twinhub.console.auth import signed_in
from twinhub.console.map_drawing import Box, draw, region_table
from twinhub.console.pages import render
from twinhub.console.twin_history import DEFAULT_RANGE, RANGES, history, range_start
from twinhub.db.visibility import sees_domain, viewer_of
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import NotFound, ServiceError
from twinhub.mrv.telemetry_schema import TelemetrySchema, parse_schema
from twinhub.platform import Platform
from twinhub.services.claims import ClaimFilter
from twinhub.services.programme_views import ProgrammeViews
from twinhub.services.protocols import geo_point_problem

GRAPH_CLAIMS = 5  # newest claims shown per stove
INCOMING_SHOWN = 10  # twins named per relationship type pointing at a twin
QUARANTINE_SHOWN = 20  # newest quarantined readings on a twin's page (the API lists more)
MEMBERS_PAGE = 25  # stoves added to the graph per click on a group


def _platform(request: Request) -> Platform:
    return request.app.state.platform  # type: ignore[no-any-return]


def _views(request: Request) -> ProgrammeViews:
    return request.app.state.views  # type: ignore[no-any-return]


def _problem(problem: ServiceError) -> JSONResponse:
    status = 404 if isinstance(problem, NotFound) else 422
    details = [{"field": d.field, "error": d.error} for d in problem.details]
    return JSONResponse(
        {"error": {"code": problem.code, "message": problem.message, "details": details}},
        status_code=status,
    )


# -- the domain graph ------------------------------------------------------------------------
async def graph(request: Request) -> Response:
    user = await signed_in(request)
    platform = _platform(request)
    scopes = await platform.summaries.scopes()
    did = request.query_params.get("did") or (scopes[0]["did"] if scopes else None)
    return render(request, "graph.html", {"did": did, "scopes": scopes}, user=user)


async def graph_data(request: Request) -> Response:
    """The graph around a domain: its neighbours, and a project's stoves as groups by state
    (a small project's stoves one by one, with their newest claims and credentials)."""
    await signed_in(request)
    try:
        data = await _views(request).grouped_graph(request.query_params.get("did", ""))
    except ServiceError as problem:
        return _problem(problem)
    stoves = [n["did"] for n in data["nodes"] if n["twinClass"] == "physical"]
    await _add_claims(_platform(request), data, stoves)
    return JSONResponse(data)


async def graph_members(request: Request) -> Response:
    """One page of a group's stoves (a click on the group), with their newest claims."""
    await signed_in(request)
    query = request.query_params
    try:
        page = await _views(request).group_members(
            query.get("project", ""), query.get("state", ""), query.get("cursor"), MEMBERS_PAGE
        )
    except ServiceError as problem:
        return _problem(problem)
    data = {**page, "nodes": page["items"], "edges": []}
    await _add_claims(_platform(request), data, [item["did"] for item in page["items"]])
    return JSONResponse(data)


async def _add_claims(platform: Platform, data: dict[str, Any], stoves: list[str]) -> None:
    """Extend the graph with the newest claims about its stoves and the credentials their
    approvals issued (stoves -> claims -> credentials), a few per stove."""
    for stove in stoves:
        page = await platform.claims.views.claims(ClaimFilter(asset=stove), None, GRAPH_CLAIMS)
        for claim in page.items:
            node = f"claim:{claim['id']}"
            data["nodes"].append(
                {
                    "did": node,
                    "type": "Claim",
                    "twinClass": "system",
                    "name": f"claim {claim['id'][:6]} ({claim['status']})",
                    "state": claim["status"],
                }
            )
            data["edges"].append({"source": stove, "type": "claim", "target": node})
            if claim["credential"]:
                data["nodes"].append(
                    {
                        "did": claim["credential"],
                        "type": "Credential",
                        "twinClass": "system",
                        "name": "credential",
                    }
                )
                data["edges"].append(
                    {"source": node, "type": "credential", "target": claim["credential"]}
                )


# -- a twin ----------------------------------------------------------------------------------
async def twin(request: Request) -> Response:
    user = await signed_in(request)
    platform = _platform(request)
    did = request.path_params["did"]
    range_key = request.query_params.get("range", DEFAULT_RANGE)
    if range_key not in RANGES:
        raise HTTPException(422, f"Show a range of {', '.join(RANGES)}.")
    try:
        record = await platform.domains.get(did)
        ledger = await platform.domains.history(did, None, 100)
        proposals = await platform.governance.proposals_of(did)
    except NotFound as problem:
        raise HTTPException(404, problem.message) from problem
    claims = await platform.claims.views.claims(ClaimFilter(asset=did), None, 20)
    minted = await platform.credits.minted_for([claim["id"] for claim in claims.items])
    # What points here, counted by type with the first few named: a project's thousands of
    # stoves are a count and a link to its stove list, never a page of links.
    incoming = await platform.lists.incoming(did, INCOMING_SHOWN)
    schema = await _telemetry_schema(platform, record)
    chart = None
    quarantined: list[dict[str, Any]] = []
    # Telemetry is private to who may see the twin's data (db/visibility.py).
    private = await sees_domain(platform.sessionmaker, did, viewer_of(user.principal))
    if schema is not None and private:
        end = utcnow()
        _, interval, _ = RANGES[range_key]
        buckets = await platform.telemetry.store.aggregates(
            did, interval, range_start(range_key, end), end
        )
        chart = history(schema, buckets, range_key, end)
        # Readings whose time could not be trusted: kept with their reason, never charted.
        held = await platform.telemetry.quarantined(did, QUARANTINE_SHOWN)
        quarantined = held["items"]
    return render(
        request,
        "twin.html",
        {
            "record": record,
            "history": list(reversed(ledger.items)),
            "proposals": proposals,
            "claims": claims.items,
            "minted": minted,
            "outgoing": record["relationships"],
            "incoming": incoming,
            "shown": INCOMING_SHOWN,
            "events_url": f"/v1/domains/{did}/events",
            "chart": chart,
            "quarantined": quarantined,
            "quarantine_shown": QUARANTINE_SHOWN,
            "ranges": {key: label for key, (_, _, label) in RANGES.items()},
            "range": range_key,
            "location": _location(record),
        },
        user=user,
    )


def _location(record: dict[str, Any]) -> dict[str, Any] | None:
    """The twin's place and the map's box around it (about 2 km each way), if it has one."""
    location = record.get("properties", {}).get("location")
    if geo_point_problem(location) is not None:
        return None
    lat, lon = float(location["lat"]), float(location["lon"])
    box = Box(
        max(lat - 0.02, -90), max(lon - 0.02, -180), min(lat + 0.02, 90), min(lon + 0.02, 180)
    )
    return {**location, "box": box.text()}


async def _telemetry_schema(platform: Platform, record: dict[str, Any]) -> TelemetrySchema | None:
    """What the twin's protocol says its devices report (None: no telemetry)."""
    try:
        protocol = await platform.protocols.get(record["class"])
    except ServiceError:
        return None
    if not protocol.effective_telemetry:
        return None
    return parse_schema(protocol.effective_telemetry)


# -- the map ---------------------------------------------------------------------------------
async def programme_map(request: Request) -> Response:
    """Located stoves of a project or an organisation (or every project), coloured by
    state; a group links to the map of its box, a stove to its twin."""
    user = await signed_in(request)
    platform = _platform(request)
    scopes = await platform.summaries.scopes()
    did = request.query_params.get("did") or None
    box = None
    if request.query_params.get("bbox"):
        try:
            box = Box.parse(request.query_params["bbox"])
        except ValueError as error:
            raise HTTPException(422, f"The map's box: {error}.") from error
    try:
        places = await _views(request).places(did)
    except NotFound as problem:
        raise HTTPException(404, problem.message) from problem
    except ServiceError as problem:
        raise HTTPException(422, problem.message) from problem
    return render(
        request,
        "map.html",
        {
            "did": did,
            "scopes": scopes,
            # A fine map for wide screens, a coarse one (fewer, larger marks) for phones.
            "maps": [m for m in (draw(places, box), draw(places, box, "coarse")) if m],
            "zoomed": box is not None,
            "regions": region_table([p for p in places if box is None or box.holds(p)]),
            "located": len(places),
        },
        user=user,
    )
