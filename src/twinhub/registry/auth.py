"""Who is calling: the principal behind `Authorization: Bearer <API_KEY>`."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from twinhub.console.auth import console_principal
from twinhub.registry.errors import RateLimited, Unauthenticated
from twinhub.services.principals import Principal, require_role
from twinhub.web.audit import note_actor
from twinhub.web.client_ip import client_ip

bearer = HTTPBearer(auto_error=False, description="An API key made by `twinhub keys create`.")


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
        settings = request.app.state.platform.settings
        address = client_ip(request.scope, settings.trust_proxy_enabled, settings.trust_proxy_hops)
        retry_after = await request.app.state.key_failures.hit(address)
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
