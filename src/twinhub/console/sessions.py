"""Console sign-ins: a server-side session per browser, and its CSRF token.

The browser holds only a random session id (HttpOnly, SameSite=Strict, Secure over https);
the API key it signed in with stays in this process's memory and is checked again on every
request, so a key revoked or expired elsewhere ends the session at its next click. Sessions
belong to one process: behind a load balancer, make console traffic sticky.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field

COOKIE = "twinhub_console"
SIGN_IN_COOKIE = "twinhub_console_signin"  # double-submit CSRF token of the sign-in form


@dataclass
class ConsoleSession:
    id: str
    api_key: str  # never logged, never sent back to the browser
    expires_at: float
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    def csrf_ok(self, sent: str | None) -> bool:
        return sent is not None and hmac.compare_digest(sent.encode(), self.csrf.encode())


class SessionStore:
    """In-memory sessions, bounded: the oldest-used go first when the cap is reached."""

    def __init__(self, ttl_seconds: float, max_sessions: int) -> None:
        self._ttl = ttl_seconds
        self._max = max_sessions
        self._sessions: OrderedDict[str, ConsoleSession] = OrderedDict()

    def create(self, api_key: str) -> ConsoleSession:
        session = ConsoleSession(secrets.token_urlsafe(32), api_key, time.monotonic() + self._ttl)
        self._sessions[session.id] = session
        while len(self._sessions) > self._max:
            self._sessions.popitem(last=False)
        return session

    def get(self, session_id: str | None) -> ConsoleSession | None:
        if not session_id:
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        if session.expires_at <= time.monotonic():
            del self._sessions[session_id]
            return None
        self._sessions.move_to_end(session_id)
        return session

    def drop(self, session_id: str | None) -> None:
        if session_id:
            self._sessions.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._sessions)
