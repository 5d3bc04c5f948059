"""Reading and validating one USSD session request (seed part B, rules 1 to 5).

Accepts the JSON body of the seed and the form-encoded body Africa's Talking sends, with the
same field names. Anything else, or any field out of bounds, is simply invalid: the caller
answers `END Invalid input. Please try again.` and touches no state.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import parse_qsl

import orjson
from pydantic import BaseModel, ConfigDict, StrictStr, StringConstraints, ValidationError
from starlette.requests import Request

NO_CONTROL = r"^[^\x00-\x1f\x7f-\x9f]*$"  # C0, DEL and C1 control characters
E164 = r"^\+[1-9][0-9]{6,14}$"
SERVICE_CODE = r"^\*[0-9]+(\*[0-9]+)*#$"
MAX_TEXT, MAX_SESSION_ID = 182, 100


class UssdRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    sessionId: Annotated[
        StrictStr, StringConstraints(min_length=1, max_length=MAX_SESSION_ID, pattern=NO_CONTROL)
    ]
    serviceCode: Annotated[StrictStr, StringConstraints(pattern=SERVICE_CODE)]
    phoneNumber: Annotated[StrictStr, StringConstraints(pattern=E164)]
    text: Annotated[StrictStr, StringConstraints(max_length=MAX_TEXT, pattern=NO_CONTROL)]


class InvalidRequest(Exception):
    """The body is not a valid session request; the message says why (for logs only)."""


async def read_ussd_request(request: Request, max_bytes: int) -> UssdRequest:
    body = await _read_body(request, max_bytes)
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type == "application/json" or media_type.endswith("+json"):
        fields = _json_fields(body)
    elif media_type == "application/x-www-form-urlencoded":
        fields = _form_fields(body)
    else:
        raise InvalidRequest(f"unsupported content type {media_type!r}")
    try:
        return UssdRequest.model_validate(fields)
    except ValidationError as error:
        names = ", ".join(str(e["loc"][0]) for e in error.errors() if e["loc"])
        raise InvalidRequest(f"invalid fields: {names}") from None


async def _read_body(request: Request, max_bytes: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and (
        not (declared.isascii() and declared.isdigit()) or int(declared) > max_bytes
    ):
        raise InvalidRequest("body too large")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise InvalidRequest("body too large")
        chunks.append(chunk)
    return b"".join(chunks)


def _json_fields(body: bytes) -> dict[str, Any]:
    try:
        fields = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise InvalidRequest("malformed JSON") from None
    if not isinstance(fields, dict):
        raise InvalidRequest("JSON body is not an object")
    return fields


def _form_fields(body: bytes) -> dict[str, Any]:
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=bool(body))
    except (UnicodeDecodeError, ValueError):
        raise InvalidRequest("malformed form body") from None
    fields: dict[str, Any] = {}
    for name, value in pairs:
        if name in fields:
            raise InvalidRequest(f"field {name!r} given twice")
        fields[name] = value
    return fields
