"""Every registry error in one JSON shape: `{"error": {"code", "message", "details"}}`."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.routing import Match

from twinhub.db.failures import DATABASE_ERRORS, Failure
from twinhub.kernel.errors import (
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    ServiceError,
    StaleVersion,
    TooLarge,
)
from twinhub.logging import get_logger
from twinhub.settings import setting_name
from twinhub.web.errors import error_response

log = get_logger(__name__)

STATUS: dict[type[ServiceError], int] = {
    NotFound: 404,
    Invalid: 422,
    Conflict: 409,
    Forbidden: 403,
    StaleVersion: 412,
    TooLarge: 413,
}


class Unauthenticated(Exception):
    """No API key, or one the registry does not know."""


class RateLimited(Exception):
    """The key's principal sent more than REGISTRY_RATE_LIMIT allows."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(
            f"Too many requests (the limit per key owner is "
            f"{setting_name('registry', 'rate_limit')}); try again in {retry_after} s."
        )
        self.retry_after = retry_after


def _service_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, ServiceError)
    status = next((code for kind, code in STATUS.items() if isinstance(exc, kind)), 400)
    headers = {"Retry-After": "1"} if exc.__class__.__name__ == "InProgress" else None
    return error_response(status, **exc.fields(), headers=headers)


def _field(location: tuple[Any, ...]) -> str:
    parts = [str(p) for p in location if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or "body"


def _validation_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        return error_response(400, "malformed_json", "The request body is not valid JSON.")
    details = [{"field": _field(tuple(e.get("loc", ()))), "error": e["msg"]} for e in errors]
    return error_response(422, "validation_failed", "The request is not valid.", details)


def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    codes = {404: "not_found", 405: "method_not_allowed", 413: "too_large", 400: "bad_request"}
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = _allowed_methods(request)
    return error_response(
        exc.status_code,
        codes.get(exc.status_code, "http_error"),
        str(exc.detail),
        headers=headers,
    )


def _allowed_methods(request: Request) -> str:
    """Every method the OpenAPI document lists for this path: Starlette names only the first
    route's, which left `Allow` short (a DID path matches several routes). Where a literal
    path and a parameter both match (`/v1/credentials/verify` and `/v1/credentials/{id}`),
    the document's path item is the most specific one, so only its routes count."""
    methods: dict[int, set[str]] = {}
    for route in _routes(request.app.router.routes):
        match, _ = route.matches(request.scope)
        if match is not Match.NONE:
            literal = len(_PARAMETER.sub("", getattr(route, "path", "")))
            methods.setdefault(literal, set()).update(getattr(route, "methods", None) or ())
    allowed = methods[max(methods)] if methods else set()
    return ", ".join(sorted(allowed - {"HEAD"}))


_PARAMETER = re.compile(r"\{[^}]*\}")


def _routes(routes: list[Any]) -> Iterator[Any]:
    """The routes, with those of included routers (FastAPI keeps them apart) in line."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from _routes(included.routes)
        else:
            yield route


def _unauthenticated(_: Request, exc: Exception) -> Response:
    return error_response(
        401,
        "unauthorized",
        str(exc) or "Send an API key as 'Authorization: Bearer <API_KEY>'.",
        headers={"WWW-Authenticate": 'Bearer realm="twinhub"'},
    )


def _rate_limited(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RateLimited)
    return error_response(
        429, "rate_limited", str(exc), headers={"Retry-After": str(exc.retry_after)}
    )


def database_unavailable(retry_after: int) -> Response:
    """The answer while the database is down or too slow: the client may retry later."""
    return error_response(
        503,
        "unavailable",
        "The database is unavailable; try again later.",
        headers={"Retry-After": str(retry_after)},
    )


async def _database_error(request: Request, exc: Exception) -> Response:
    """A failed statement, answered by what it means (db/failures.py): the database out of
    reach (down, timed out, pool exhausted) is an outage, 503 with Retry-After, and is
    marked down at once (later requests get their 503 without waiting) until the health
    monitor's next probe finds it answering again; a value it refuses is this request's
    422, a constraint its 409, a lost race its 503 alone, and none of those marks anything."""
    platform = request.app.state.platform
    failure = platform.database.failed(exc)
    if failure is not Failure.FAULT:  # (a fault is logged with its traceback below)
        log.warning(
            "database refused the request" if failure is Failure.DATA else "database error",
            path=request.url.path,
            failure=str(failure),
            error=type(exc).__name__,
        )
    return database_failure_response(failure, platform.settings.storage.retry_after_seconds)


def database_failure_response(failure: Failure, retry_after: int) -> Response:
    """The registry's answer to a failed statement, by what it means."""
    if failure is Failure.UNREACHABLE:
        return database_unavailable(retry_after)
    if failure is Failure.BUSY:
        return error_response(
            503,
            "unavailable",
            "The database is busy with a conflicting change; try again.",
            headers={"Retry-After": "1"},
        )
    if failure is Failure.DATA:
        return error_response(422, "validation_failed", DATA_REFUSED)
    if failure is Failure.CONFLICT:
        return error_response(409, "conflict", "The request conflicts with what is stored.")
    log.exception("database statement failed")
    return error_response(500, "internal_error", "Internal error; logged.")


DATA_REFUSED = (
    "A value of the request cannot be stored or compared: a number past its field's range, "
    "a time outside the years 1970 to 2099, or text no database stores (a NUL character, "
    "a lone UTF-16 surrogate)."
)


def _internal_error(_: Request, exc: Exception) -> Response:
    """Anything else unforeseen: logged with its traceback by the server, answered in the
    registry's JSON shape without any internal detail."""
    return error_response(500, "internal_error", "Internal error; logged.")


def _client_gone(_: Request, exc: Exception) -> Response:
    """The client disconnected mid-body: nobody is left to answer, nothing worth a traceback."""
    return Response(status_code=400)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ClientDisconnect, _client_gone)
    for kind in DATABASE_ERRORS:  # SQLAlchemy's, the drivers' (the read model's), sockets
        app.add_exception_handler(kind, _database_error)
    app.add_exception_handler(Exception, _internal_error)
    app.add_exception_handler(ServiceError, _service_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Unauthenticated, _unauthenticated)
    app.add_exception_handler(RateLimited, _rate_limited)


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"description": "Malformed JSON"},
    401: {"description": "Missing or unknown API key"},
    403: {"description": "The API key lacks the role, or the caller is not a controller"},
    404: {"description": "Unknown DID"},
    409: {"description": "Conflict: exists already, deactivated, or key in use"},
    413: {"description": "Body larger than REGISTRY_MAX_BODY_BYTES"},
    422: {"description": "Validation failed: one detail per field"},
    429: {"description": "More than REGISTRY_RATE_LIMIT requests from this key's principal"},
    503: {"description": "The database is unavailable (Retry-After says when to retry)"},
}
