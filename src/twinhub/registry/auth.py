"""Who is calling: the principal behind `Authorization: Bearer <API_KEY>`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param

from twinhub.console.auth import console_principal
from twinhub.kernel.principals import Principal, require_role
from twinhub.registry.errors import RateLimited, Unauthenticated
from twinhub.web.audit import note_actor

bearer = HTTPBearer(auto_error=False, description="An API key made by `twinhub keys create`.")


def bearer_of(request: Request) -> HTTPAuthorizationCredentials | None:
    """What `await bearer(request)` gives (HTTPBearer without auto_error), read straight
    from the ASGI headers (names are lower case there) for the hot read: no coroutine, no
    Headers object. Tested against `bearer` itself."""
    found = _bearer(request.scope["headers"])
    return (
        None
        if found is None
        else HTTPAuthorizationCredentials(scheme=found[0], credentials=found[1])
    )


def bearer_token(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The key `principal` would check for these ASGI headers (`bearer_of`'s credentials),
    or None where it would not check one (no bearer: the console's session, or a 401)."""
    found = _bearer(headers)
    return None if found is None else found[1]


def _bearer(headers: Iterable[tuple[bytes, bytes]]) -> tuple[str, str] | None:
    for name, value in headers:
        if name == b"authorization":
            authorization = value.decode("latin-1")
            break
    else:
        return None
    scheme, credentials = get_authorization_scheme_param(authorization)
    if not (authorization and scheme and credentials) or scheme.lower() != "bearer":
        return None
    return scheme, credentials


async def principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    if credentials is None or credentials.scheme.lower() != "bearer":
        # The console's browser code reads GET routes (the live SSE stream) with its session.
        found = await console_principal(request, request.app.state.console_sessions)
        if found is None:
            raise Unauthenticated("Send an API key as 'Authorization: Bearer <API_KEY>'.")
    else:
        found = await request.app.state.platform.api_keys.authenticate(credentials.credentials)
    if found is None:
        # Guessing keys costs a client its address's allowance (API_KEY_FAILURE_LIMIT).
        retry_after = await request.app.state.key_failures.failed(request.scope)
        if retry_after is not None:
            raise RateLimited(retry_after)
        raise Unauthenticated("The API key is unknown or revoked.")
    note_actor(request.scope, found)  # for the write log (web/audit.py)
    retry_after = await request.app.state.rate_limiter.hit(found.did)
    if retry_after is not None:
        raise RateLimited(retry_after)
    return found


async def reader(caller: Annotated[Principal, Depends(principal)]) -> Principal:
    require_role(caller, "reader", "writer")
    return caller


async def writer(caller: Annotated[Principal, Depends(principal)]) -> Principal:
    require_role(caller, "writer")
    return caller


Reader = Annotated[Principal, Depends(reader)]
Writer = Annotated[Principal, Depends(writer)]


_WORKFLOW_READS = frozenset({"reader", "writer", "proponent", "verifier", "registry"})


async def workflow_reader(caller: Annotated[Principal, Depends(principal)]) -> Principal:
    """A reader, or a holder of a workflow role (a verifier reads what it verifies)."""
    if not (caller.is_admin or caller.roles & _WORKFLOW_READS):
        require_role(caller, "reader", "writer")  # the refusal readers get
    return caller


Caller = Annotated[Principal, Depends(principal)]  # the route's service checks the role
WorkflowReader = Annotated[Principal, Depends(workflow_reader)]
