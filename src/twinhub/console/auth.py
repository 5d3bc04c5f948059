"""Who is using the console: the session cookie, the API key behind it, and CSRF checks."""

from __future__ import annotations

from dataclasses import dataclass

from redis.exceptions import RedisError
from starlette.exceptions import HTTPException
from starlette.requests import Request

from twinhub.console.sessions import COOKIE, ConsoleSession, SessionStore
from twinhub.kernel.principals import WORKFLOW_ROLES, Principal
from twinhub.web.audit import note_actor


class SignInRequired(Exception):
    """No session, or its key no longer works: back to the sign-in page."""


@dataclass(frozen=True)
class SignedIn:
    session: ConsoleSession
    principal: Principal

    @property
    def role(self) -> str:
        """The strongest role, for display and for what pages offer."""
        for role in ("admin", "writer", "reader", "registry", "verifier", "proponent"):
            if role in self.principal.roles:
                return role
        return "none"

    @property
    def workflow_roles(self) -> list[str]:
        """The workflow roles the key holds beside `role` (a verifier's key that may also
        read shows both), for the header: who signs what is not the access level."""
        return [r for r in WORKFLOW_ROLES if r in self.principal.roles and r != self.role]

    def can(self, role: str) -> bool:
        return self.principal.is_admin or role in self.principal.roles


async def signed_in(request: Request) -> SignedIn:
    """The caller's session and principal; the key is checked anew on every request."""
    sessions: SessionStore = request.app.state.sessions
    session = await sessions.get(request.cookies.get(COOKIE))
    if session is None:
        raise SignInRequired
    # Looked up, not taken from the key cache: a key revoked anywhere (another worker, the
    # command line) ends its sessions with their next request. A console is clicked by
    # people: one indexed read per click costs nothing.
    principal = await request.app.state.platform.api_keys.authenticate(
        session.api_key, cached=False
    )
    if principal is None:  # revoked (or a bootstrap key that changed) since sign-in
        await sessions.drop(session.id)
        raise SignInRequired
    note_actor(request.scope, principal)  # for the write log (web/audit.py)
    return SignedIn(session, principal)


def check_csrf(user: SignedIn, sent: str | None) -> None:
    if not user.session.csrf_ok(sent):
        raise HTTPException(403, "The form was stale or not sent by this console; reload it.")


async def console_principal(request: Request, sessions: SessionStore) -> Principal | None:
    """For the registry API: the principal of a console session cookie, or None.

    Lets the console's browser code read GET routes (the live telemetry stream) without the
    API key ever reaching the browser. Only safe methods: SameSite=Strict and the CSRF
    tokens guard the console's own forms, not the API's."""
    if request.method not in ("GET", "HEAD"):
        return None
    try:
        session = await sessions.get(request.cookies.get(COOKIE))
    except RedisError:  # sessions unreachable: the API asks for a key instead
        return None
    if session is None:
        return None
    return await request.app.state.platform.api_keys.authenticate(session.api_key, cached=False)
