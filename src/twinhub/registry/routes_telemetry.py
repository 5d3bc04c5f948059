"""Telemetry routes: device tokens, ingestion by device token, state, history, aggregates,
the live event stream and the operators' list of recent rejections."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import Field
from starlette.responses import JSONResponse, Response, StreamingResponse

from twinhub.db.visibility import sees_domain, viewer_of
from twinhub.kernel.errors import FieldProblem, Forbidden, Invalid
from twinhub.kernel.principals import Principal, require_role
from twinhub.mrv.telemetry_schema import TIME_EXPECTED, loads, parse_time
from twinhub.registry.auth import Reader, Writer, bearer
from twinhub.registry.errors import ERROR_RESPONSES, Unauthenticated
from twinhub.registry.params import DATE_TIME_PATTERN, documented
from twinhub.registry.routes import DID_PATH, page_size
from twinhub.registry.schemas import Body
from twinhub.services.device_tokens import DeviceTokenService
from twinhub.telemetry.live import RESYNC
from twinhub.telemetry.service import (
    Arrival,
    TelemetryService,
    Throttled,
    TooLarge,
    sse_frame,
)
from twinhub.web.errors import error_response

router = APIRouter(prefix="/v1", responses=ERROR_RESPONSES, tags=["telemetry"])
KEEPALIVE_SECONDS = 15.0
SIGNATURE_HEADER = "Device-Signature"


class DeviceKeyIn(Body):
    public_key: str = Field(
        alias="publicKey",
        max_length=120,
        description="The device's Ed25519 public key: multibase (z6Mk...) or did:key.",
    )


class DeviceTokenIn(Body):
    label: str = Field("", max_length=100, description="What the device is, for people.")


def _tokens(request: Request) -> DeviceTokenService:
    return request.app.state.platform.device_tokens


def _telemetry(request: Request) -> TelemetryService:
    return request.app.state.platform.telemetry


TIME = documented(pattern=DATE_TIME_PATTERN)  # what _time reads, in the OpenAPI document


def _time(value: str | None, name: str) -> datetime | None:
    if value is None:
        return None
    parsed = parse_time(value)
    if parsed is None:
        raise Invalid(f"{name} is not a time.", [FieldProblem(name, TIME_EXPECTED)])
    return parsed


# -- device tokens -------------------------------------------------------------------------
@router.post(f"/domains/{DID_PATH}/device-tokens", status_code=201, summary="Enrol a device")
async def create_device_token(
    request: Request, did: str, caller: Writer, body: DeviceTokenIn | None = None
) -> JSONResponse:
    token, view = await _tokens(request).create(did, caller, body.label if body else "")
    return JSONResponse({**view.as_record(), "token": token}, status_code=201)


@router.get(f"/domains/{DID_PATH}/device-tokens", summary="A twin's device tokens")
async def list_device_tokens(request: Request, did: str, caller: Writer) -> dict[str, Any]:
    views = await _tokens(request).list(did, caller)
    return {"items": [view.as_record() for view in views]}


@router.post(f"/domains/{DID_PATH}/device-tokens/{{token_id}}/rotate", summary="Rotate a token")
async def rotate_device_token(
    request: Request, did: str, token_id: str, caller: Writer
) -> dict[str, Any]:
    token, view = await _tokens(request).rotate(did, token_id, caller)
    return {**view.as_record(), "token": token}


@router.delete(f"/domains/{DID_PATH}/device-tokens/{{token_id}}", summary="Revoke a token")
async def revoke_device_token(
    request: Request, did: str, token_id: str, caller: Writer
) -> dict[str, Any]:
    return (await _tokens(request).revoke(did, token_id, caller)).as_record()


# -- device keys ---------------------------------------------------------------------------
@router.post(f"/domains/{DID_PATH}/device-key", summary="Enrol or rotate the device's signing key")
async def enrol_device_key(
    request: Request, did: str, caller: Writer, body: DeviceKeyIn
) -> dict[str, Any]:
    record = await _tokens(request).enrol_key(did, body.public_key, caller)
    _telemetry(request).forget(did)
    return record


@router.get(f"/domains/{DID_PATH}/device-key", summary="The device's signing keys")
async def device_keys(request: Request, did: str, caller: Writer) -> dict[str, Any]:
    return await _tokens(request).keys(did, caller)


@router.delete(f"/domains/{DID_PATH}/device-key", summary="Withdraw the device's signing key")
async def revoke_device_key(request: Request, did: str, caller: Writer) -> dict[str, Any]:
    record = await _tokens(request).revoke_key(did, caller)
    _telemetry(request).forget(did)
    return record


# -- ingestion -----------------------------------------------------------------------------
@router.post(
    f"/domains/{DID_PATH}/telemetry",
    summary="Send readings (Authorization: Bearer <device token>)",
)
async def ingest(
    request: Request,
    did: str,
    bearer_token: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Response:
    if bearer_token is None or bearer_token.scheme.lower() != "bearer":
        raise Unauthenticated("Send a device token as 'Authorization: Bearer <token>'.")
    credential = await _tokens(request).authenticate(bearer_token.credentials)
    if credential is None:
        raise Unauthenticated("The device token is unknown or revoked.")
    raw = await request.body()
    try:
        body = loads(raw)
    except ValueError:
        return error_response(400, "malformed_json", "The request body is not valid JSON.")
    # A device with an enrolled key signs each batch: Ed25519 over the batch's RFC 8785
    # canonical JSON, base58btc multibase, in this header (security/device_signatures.py).
    arrival = Arrival(raw, request.headers.get(SIGNATURE_HEADER))
    try:
        result = await _telemetry(request).ingest(did, credential, body, "http", arrival)
    except Throttled as error:
        return error_response(
            429, error.code, error.message, headers={"Retry-After": str(error.retry_after)}
        )
    except TooLarge as error:
        details = [{"field": d.field, "error": d.error} for d in error.details]
        return error_response(413, error.code, error.message, details)
    return JSONResponse(result.as_record())


# -- reads ---------------------------------------------------------------------------------
async def _private(request: Request, did: str, caller: Principal) -> None:
    """A twin's telemetry is its organisation's (db.visibility): Forbidden for others."""
    platform = request.app.state.platform
    if not await sees_domain(platform.sessionmaker, did, viewer_of(caller)):
        raise Forbidden(
            f"The telemetry of {did} is for its controllers, its parties and the registry role."
        )


@router.get(f"/domains/{DID_PATH}/telemetry/aggregates", summary="Rolled-up statistics")
async def aggregates(
    request: Request,
    did: str,
    caller: Reader,
    interval: Annotated[
        str,
        Query(
            description="hour, day or month",
            json_schema_extra=documented(enum=["hour", "day", "month"]),
        ),
    ] = "day",
    from_: Annotated[str | None, Query(alias="from", json_schema_extra=TIME)] = None,
    to: Annotated[str | None, Query(json_schema_extra=TIME)] = None,
) -> dict[str, Any]:
    await _private(request, did, caller)
    return await _telemetry(request).aggregates(
        did, interval, _time(from_, "from"), _time(to, "to")
    )


@router.get(f"/domains/{DID_PATH}/telemetry", summary="Raw readings, oldest first, paged")
async def history(
    request: Request,
    did: str,
    caller: Reader,
    from_: Annotated[str | None, Query(alias="from", json_schema_extra=TIME)] = None,
    to: Annotated[str | None, Query(json_schema_extra=TIME)] = None,
    limit: Annotated[int | None, Query(ge=1)] = None,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
) -> dict[str, Any]:
    await _private(request, did, caller)
    return await _telemetry(request).history(
        did, _time(from_, "from"), _time(to, "to"), cursor, page_size(request, limit)
    )


@router.get(
    f"/domains/{DID_PATH}/telemetry/quarantine",
    summary="Readings kept out of the data (untrustworthy time), with their reasons",
)
async def quarantine(
    request: Request,
    did: str,
    caller: Reader,
    limit: Annotated[int | None, Query(ge=1)] = None,
) -> dict[str, Any]:
    await _private(request, did, caller)
    return await _telemetry(request).quarantined(did, page_size(request, limit))


@router.get(f"/domains/{DID_PATH}/state", summary="The twin's live state")
async def state(request: Request, did: str, caller: Reader) -> dict[str, Any]:
    await _private(request, did, caller)
    return await _telemetry(request).state(did)


@router.get(f"/domains/{DID_PATH}/events", summary="Server-sent events of a twin or project")
async def events(request: Request, did: str, caller: Reader) -> StreamingResponse:
    await _private(request, did, caller)
    telemetry = _telemetry(request)
    first = await telemetry.state(did)

    async def stream() -> AsyncIterator[bytes]:
        async with telemetry.live.subscribe(did) as queue:
            yield sse_frame({"event": "state", **first})
            while True:
                try:
                    event = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
                except TimeoutError:
                    yield b": keep-alive\n\n"
                    continue
                if event == RESYNC:  # events may have been missed: send the state as it is now
                    event = {"event": "state", **await telemetry.state(did)}
                yield sse_frame(event)

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@router.get("/telemetry/rejections", summary="Recent rejected telemetry (operators)")
async def rejections(request: Request, caller: Reader) -> dict[str, Any]:
    _admin(caller)
    telemetry = _telemetry(request)
    mqtt = request.app.state.platform.mqtt
    return {
        "items": list(telemetry.rejections),
        "counters": dict(telemetry.counters),
        "live": telemetry.live.as_record(),
        "mqtt": mqtt.as_record() if mqtt is not None else None,
    }


def _admin(caller: Principal) -> None:
    require_role(caller, "admin")
