"""`Idempotency-Key` on POST: the first answer is stored and replayed for repeats."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from fastapi import Request
from starlette.responses import Response

from twinhub.kernel.errors import FieldProblem, Invalid
from twinhub.kernel.principals import Principal
from twinhub.services.idempotency import StoredAnswer, request_fingerprint

Created = tuple[int, dict[str, Any], str | None]  # status, body, Location


def _response(status: int, body: bytes, location: str | None, replayed: bool) -> Response:
    headers = {"Location": location} if location else {}
    if replayed:
        headers["Idempotent-Replayed"] = "true"
    return Response(body, status, headers=headers, media_type="application/json")


async def idempotent(
    request: Request,
    caller: Principal,
    run: Callable[[], Awaitable[Created]],
    kept: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> Response:
    """`run`'s answer; with an Idempotency-Key, a repeat gets the first answer back. `kept`
    is what of an answer may be stored and replayed (a webhook's secret is shown once)."""
    key = request.headers.get("idempotency-key")
    if key is None:
        status, body, location = await run()
        return _response(status, orjson.dumps(body), location, replayed=False)
    if not 1 <= len(key) <= 200:
        raise Invalid(
            "The Idempotency-Key header is invalid.",
            [FieldProblem("Idempotency-Key", "expected 1 to 200 characters")],
        )
    service = request.app.state.platform.idempotency
    fingerprint = request_fingerprint(request.method, request.url.path, await request.body())
    stored = await service.reserve(caller.did, key, fingerprint)
    if stored is not None:
        location = orjson.loads(stored.body).get("location")
        body = orjson.dumps(orjson.loads(stored.body)["body"])
        return _response(stored.status_code, body, location, replayed=True)
    try:
        status, body, location = await run()
    except BaseException:
        await service.release(caller.did, key)
        raise
    stored_body = kept(body) if kept is not None else body
    envelope = orjson.dumps({"body": stored_body, "location": location}).decode()
    await service.complete(caller.did, key, StoredAnswer(status, envelope))
    return _response(status, orjson.dumps(body), location, replayed=False)
