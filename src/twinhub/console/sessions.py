"""Console sign-ins: a server-side session per browser, and its CSRF token.

The browser holds only a random session id (HttpOnly, SameSite=Strict, Secure over https);
the API key it signed in with stays on the server and is looked up in the database again on
every request (console/auth.py, past the key cache), so a key revoked anywhere (on another
worker, by `twinhub keys revoke`) ends the session at its next click.

Without Redis, sessions live in this process's memory. With `REDIS_URL` set they live in
Redis, so every worker of `twinhub serve --workers N` (and every process behind a load
balancer) knows every session. Redis never holds a usable secret: the entry's key is a
digest of the session id, and the API key inside is sealed with AES-256-GCM under a key
derived from the platform key, bound to that session.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from redis.asyncio import Redis

if TYPE_CHECKING:
    from twinhub.platform import Platform

COOKIE = "twinhub_console"
SIGN_IN_COOKIE = "twinhub_console_signin"  # double-submit CSRF token of the sign-in form
_NONCE_BYTES = 12


@dataclass
class ConsoleSession:
    id: str
    api_key: str  # never logged, never sent back to the browser
    expires_at: float
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    def csrf_ok(self, sent: str | None) -> bool:
        return sent is not None and hmac.compare_digest(sent.encode(), self.csrf.encode())


class SessionStore(Protocol):
    """Where console sessions live; `get` slides the session's expiry forward."""

    async def create(self, api_key: str) -> ConsoleSession: ...

    async def get(self, session_id: str | None) -> ConsoleSession | None: ...

    async def drop(self, session_id: str | None) -> None: ...


class MemorySessionStore:
    """In-memory sessions, bounded: the oldest-used go first when the cap is reached."""

    def __init__(self, ttl_seconds: float, max_sessions: int) -> None:
        self._ttl = ttl_seconds
        self._max = max_sessions
        self._sessions: OrderedDict[str, ConsoleSession] = OrderedDict()

    async def create(self, api_key: str) -> ConsoleSession:
        session = ConsoleSession(secrets.token_urlsafe(32), api_key, time.monotonic() + self._ttl)
        self._sessions[session.id] = session
        while len(self._sessions) > self._max:
            self._sessions.popitem(last=False)
        return session

    async def get(self, session_id: str | None) -> ConsoleSession | None:
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

    async def drop(self, session_id: str | None) -> None:
        if session_id:
            self._sessions.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._sessions)


class RedisSessionStore:
    """Sessions in Redis, shared by every process; entries expire with the session."""

    def __init__(self, redis: Redis, prefix: str, ttl_seconds: int, platform_key: bytes) -> None:
        self._redis = redis
        self._prefix = f"{prefix}console:"
        self._ttl = ttl_seconds
        derived = HKDF(
            algorithm=hashes.SHA256(), length=64, salt=None, info=b"twinhub console sessions v1"
        ).derive(platform_key)
        self._aead = AESGCM(derived[:32])
        self._id_key = derived[32:]

    def _key(self, session_id: str) -> str:
        digest = hmac.digest(self._id_key, session_id.encode(), hashlib.sha256).hex()
        return self._prefix + digest

    async def create(self, api_key: str) -> ConsoleSession:
        session = ConsoleSession(secrets.token_urlsafe(32), api_key, time.monotonic() + self._ttl)
        nonce = os.urandom(_NONCE_BYTES)
        sealed = nonce + self._aead.encrypt(nonce, api_key.encode(), session.id.encode())
        entry = json.dumps({"key": sealed.hex(), "csrf": session.csrf})
        await self._redis.set(self._key(session.id), entry, ex=self._ttl)
        return session

    async def get(self, session_id: str | None) -> ConsoleSession | None:
        if not session_id or len(session_id) > 128:
            return None
        key = self._key(session_id)
        raw = await self._redis.get(key)
        if raw is None:
            return None
        try:
            entry = json.loads(raw)
            sealed = bytes.fromhex(entry["key"])
            api_key = self._aead.decrypt(
                sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:], session_id.encode()
            ).decode()
            csrf = str(entry["csrf"])
        except (ValueError, KeyError, TypeError, InvalidTag):
            # Damaged, or sealed under another platform key: not a session any more.
            await self._redis.delete(key)
            return None
        await self._redis.expire(key, self._ttl)
        return ConsoleSession(session_id, api_key, time.monotonic() + self._ttl, csrf)

    async def drop(self, session_id: str | None) -> None:
        if session_id and len(session_id) <= 128:
            await self._redis.delete(self._key(session_id))


def console_session_store(platform: Platform) -> SessionStore:
    """Redis when the platform has it (sessions shared by every worker), else memory."""
    settings = platform.settings
    if platform.redis is not None:
        return RedisSessionStore(
            platform.redis,
            settings.storage.redis_key_prefix,
            settings.console.session_ttl_seconds,
            platform.platform_key,
        )
    return MemorySessionStore(settings.console.session_ttl_seconds, settings.console.max_sessions)
