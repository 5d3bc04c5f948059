"""One log line per registry write, at info level: who (DID, roles, API key id), which route,
which object, and how it ended; never a secret.

A plain ASGI middleware around the registry app (the API and the console it mounts), so no
route has to remember to log. The authentication code notes the caller in the request's
scope (`note_actor`); this middleware reads it once the answer has started. What it logs
is chosen, never copied: the method, the route's template, its path parameters (a phone
number among them is masked), the id of a created object read from a JSON answer, and the
status. Bodies, headers and query strings are never logged, so neither API keys, webhook
secrets, device tokens, PINs nor phone numbers in clear can reach the line (and the log
pipeline's redaction runs behind it anyway).
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from twinhub.kernel.principals import Principal
from twinhub.logging import get_logger, mask_phone

log = get_logger("twinhub.audit")
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_ACTOR = "twinhub.actor"  # the scope key holding {"principal": Principal}
_PHONE = re.compile(r"^\+?[0-9]{9,15}$")
_CREATED_MAX = 64 * 1024  # a created object's id is read from answers up to this size
# Console forms that are not registry writes: signing in and out, the USSD phone simulator.
_NOT_WRITES = ("/console/sign-in", "/console/sign-out", "/console/ussd/")


def note_actor(scope: Scope, principal: Principal) -> None:
    """Tell the write log who is calling (called by the API's and the console's auth)."""
    holder = scope.get(_ACTOR)
    if isinstance(holder, dict):
        holder["principal"] = principal


def _safe(value: Any) -> Any:
    """A path parameter as it may be logged: phone numbers masked."""
    text = str(value)
    return mask_phone(text) if _PHONE.match(text) else value


def _created_id(body: bytes) -> str | None:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(document, dict):
        return None
    for key in ("did", "id", "claimId", "webhookId"):
        value = document.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool):
            return str(value)
    return None


class WriteLog:
    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if (
            scope["type"] != "http"
            or scope["method"] not in WRITES
            or not path.startswith(("/v1/", "/console/"))
            or path.startswith(_NOT_WRITES)
        ):
            await self._app(scope, receive, send)
            return
        holder: dict[str, Principal] = {}
        scope[_ACTOR] = holder
        status = 500
        json_answer = False
        body = bytearray()

        async def sending(message: Message) -> None:
            nonlocal status, json_answer
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = dict(message.get("headers", []))
                json_answer = status == 201 and b"json" in headers.get(b"content-type", b"")
            elif message["type"] == "http.response.body" and json_answer:
                if len(body) + len(message.get("body", b"")) <= _CREATED_MAX:
                    body.extend(message.get("body", b""))
                else:
                    json_answer = False
            await send(message)

        try:
            await self._app(scope, receive, sending)
        finally:
            self._log(scope, holder.get("principal"), status, bytes(body) if json_answer else b"")

    @staticmethod
    def _log(scope: Scope, actor: Principal | None, status: int, created: bytes) -> None:
        route = getattr(scope.get("route"), "path", None)
        mounted = scope.get("root_path", "") if scope["path"].startswith("/console/") else ""
        fields: dict[str, Any] = {
            "method": scope["method"],
            "route": f"{mounted}{route}" if route else "unmatched",
            "status": status,
            "actor": actor.did if actor else None,
            "roles": sorted(actor.roles) if actor else [],
            "key_id": actor.key_id if actor else None,
        }
        params = scope.get("path_params") or {}
        if params:
            fields["object"] = {name: _safe(value) for name, value in params.items()}
        if created:
            fields["created"] = _created_id(created)
        log.info("registry write", **fields)
