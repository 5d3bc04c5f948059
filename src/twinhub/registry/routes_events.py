"""Event and webhook routes: pages of events, a live server-sent-events stream, and webhook
subscriptions with their delivery log."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Header, Path, Query, Request
from pydantic import Field
from starlette.responses import Response, StreamingResponse

from twinhub.db.visibility import viewer_of
from twinhub.events.hub import EventsHub
from twinhub.events.store import check_types
from twinhub.events.subscriptions import STATUSES as DELIVERY_STATUSES
from twinhub.events.types import CATALOGUE
from twinhub.kernel.errors import FieldProblem, Invalid
from twinhub.registry.auth import Reader
from twinhub.registry.errors import ERROR_RESPONSES
from twinhub.registry.idempotent import Created, idempotent
from twinhub.registry.params import POSITION_PATTERN, documented, one_of_list
from twinhub.registry.routes import page_size
from twinhub.registry.schemas import Body

router = APIRouter(prefix="/v1", responses=ERROR_RESPONSES, tags=["events"])
Position = Annotated[int, Query(ge=0, le=2**63 - 1)]
DeliveryId = Annotated[int, Field(ge=1, le=2**63 - 1)]
EventTypes = Annotated[
    str | None,
    Query(
        description="Comma-separated event types (see /v1/events/types); absent: all",
        json_schema_extra=documented(pattern=one_of_list(CATALOGUE)),
    ),
]


class WebhookIn(Body):
    url: str = Field(description="Where events are POSTed (https recommended).")
    events: list[str] = Field(
        default_factory=list, description="Event types to receive; empty or absent: all."
    )
    description: str = Field("", max_length=200)


class ReplayIn(Body):
    after: int = Field(
        ge=0, le=2**63 - 1, description="Send again every event after this position."
    )


def _events(request: Request) -> EventsHub:
    return request.app.state.platform.events


def _types(type_: str | None) -> list[str] | None:
    if not type_:
        return None
    return check_types([t.strip() for t in type_.split(",") if t.strip()])


@router.get("/events/types", summary="The catalogue of event types")
async def event_types(caller: Reader) -> dict[str, str]:
    return CATALOGUE


@router.get("/events", summary="Events in order, after a position (the cursor)")
async def list_events(
    request: Request,
    caller: Reader,
    after: Position = 0,
    type: EventTypes = None,
    limit: Annotated[int | None, Query(ge=1)] = None,
) -> dict[str, Any]:
    """`after` is the `position` of the last event seen (0 from the start); `nextCursor`
    is where the next call starts, also when there is nothing new yet. Only the events
    the caller may see (its organisation's domains and households; everything for the
    registry role and admins): see docs/events.md."""
    events = await _events(request).store.after(
        after, page_size(request, limit), _types(type), viewer_of(caller)
    )
    return {
        "items": [event.as_json() for event in events],
        "nextCursor": str(events[-1].position if events else after),
    }


@router.get(
    "/events/stream",
    summary="Server-sent events, live; resumable with Last-Event-ID",
    response_class=StreamingResponse,
)
async def stream_events(
    request: Request,
    caller: Reader,
    after: Position | None = None,
    type: EventTypes = None,
    last_event_id: Annotated[
        str | None, Header(json_schema_extra=documented(pattern=POSITION_PATTERN))
    ] = None,
) -> StreamingResponse:
    """Each event is `id: <position>`, `event: <type>`, `data: <the event as JSON>`; after
    a reconnect the browser's `Last-Event-ID` (or `after`) resumes where it stopped."""
    start = after or 0
    if last_event_id:
        if not last_event_id.isdigit() or int(last_event_id) >= 2**63:
            raise Invalid(
                "Last-Event-ID is not a position.",
                [FieldProblem("Last-Event-ID", "an event position from this stream")],
            )
        start = int(last_event_id)
    types = _types(type)
    hub = _events(request)
    heartbeat = request.app.state.platform.settings.events.stream_heartbeat_seconds

    async def lines() -> AsyncIterator[bytes]:
        yield b"retry: 2000\n\n"
        async for event in hub.follow(start, types, heartbeat, viewer_of(caller)):
            if event is None:
                yield b": keep-alive\n\n"
                continue
            data = orjson.dumps(event.as_json())
            yield b"id: %d\nevent: %s\ndata: %s\n\n" % (event.position, event.type.encode(), data)

    return StreamingResponse(
        lines(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


@router.post(
    "/webhooks", status_code=201, summary="Subscribe a URL to events (writer, registry, admin)"
)
async def create_webhook(request: Request, body: WebhookIn, caller: Reader) -> Response:
    """The answer carries the signing secret (`whsec_...`) this once; keep it. The
    subscription gets the events its creator may read. With an `Idempotency-Key`, a repeat
    answers the first subscription (without its secret) and makes no second one."""

    async def run() -> Created:
        view = await _events(request).webhooks.create(
            body.url, body.events, body.description, caller
        )
        return 201, view, f"/v1/webhooks/{view['id']}"

    response = await idempotent(request, caller, run, kept=_without_secret)
    response.headers["Cache-Control"] = "no-store"
    return response


def _without_secret(view: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in view.items() if k != "secret"}


@router.get("/webhooks", summary="Webhook subscriptions: the caller's (all: admin, registry)")
async def list_webhooks(request: Request, caller: Reader) -> dict[str, Any]:
    return {"items": await _events(request).webhooks.list(caller)}


@router.get("/webhooks/{webhook_id}", summary="A webhook subscription with delivery counts")
async def get_webhook(request: Request, webhook_id: str, caller: Reader) -> dict[str, Any]:
    return await _events(request).webhooks.get(webhook_id, caller)


@router.delete("/webhooks/{webhook_id}", status_code=204, summary="Stop a subscription")
async def delete_webhook(request: Request, webhook_id: str, caller: Reader) -> Response:
    await _events(request).webhooks.delete(webhook_id, caller)
    return Response(status_code=204)


@router.get("/webhooks/{webhook_id}/deliveries", summary="The delivery log, newest first")
async def list_deliveries(
    request: Request,
    webhook_id: str,
    caller: Reader,
    status: Annotated[
        str | None, Query(json_schema_extra=documented(enum=list(DELIVERY_STATUSES)))
    ] = None,
    cursor: Annotated[int, Query(ge=0, le=2**63 - 1)] = 0,
    limit: Annotated[int | None, Query(ge=1)] = None,
) -> dict[str, Any]:
    items, next_cursor = await _events(request).webhooks.deliveries(
        webhook_id, caller, status, cursor, page_size(request, limit)
    )
    return {"items": items, "nextCursor": str(next_cursor) if next_cursor else None}


@router.post(
    "/webhooks/{webhook_id}/deliveries/{delivery_id}/retry",
    status_code=202,
    summary="Send one delivery again now",
)
async def retry_delivery(
    request: Request,
    webhook_id: str,
    delivery_id: Annotated[int, Path(ge=1, le=2**63 - 1)],
    caller: Reader,
) -> dict[str, Any]:
    view = await _events(request).webhooks.retry(webhook_id, delivery_id, caller)
    _events(request).dispatcher.wake()
    return view


@router.post(
    "/webhooks/{webhook_id}/enable",
    summary="Enable a subscription again (one disabled for failing)",
)
async def enable_webhook(request: Request, webhook_id: str, caller: Reader) -> dict[str, Any]:
    return await _events(request).webhooks.enable(webhook_id, caller)


@router.post(
    "/webhooks/{webhook_id}/replay",
    status_code=202,
    summary="Send again every event after a position",
)
async def replay(
    request: Request, webhook_id: str, body: ReplayIn, caller: Reader
) -> dict[str, Any]:
    queued = await _events(request).webhooks.replay(webhook_id, body.after, caller)
    _events(request).dispatcher.wake()
    return {"queued": queued}
