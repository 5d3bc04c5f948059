"""API keys of the registry: each belongs to a principal (a DID) with roles.

A key reads `thk_<key id>_<secret>`. Only the SHA-256 of the secret is stored: a key is
high-entropy random, so a fast hash is enough and lets every request be checked cheaply.
`TWINHUB_BOOTSTRAP_API_KEY`, when set, is an admin key that exists from start.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import ApiKey
from twinhub.kernel.bus import API_KEYS_REVOKED, Message, mark
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import Problems
from twinhub.kernel.identifiers import is_did
from twinhub.kernel.principals import ROLES, WORKFLOW_ROLES, Principal
from twinhub.logging import get_logger
from twinhub.security.signing import public_key_of

log = get_logger(__name__)
BOOTSTRAP_PRINCIPAL = "did:ixo:org/twinhub-admin"
_PREFIX = "thk"
# A revoked key stops working at once where the revocation's bus signal reaches (its own
# process; every worker through Redis, kernel/relay.py), and within this time elsewhere.
_CACHE_SECONDS = 5.0


@dataclass(frozen=True)
class ApiKeyView:
    key_id: str
    principal: str
    roles: list[str]
    label: str
    created_at: datetime
    revoked_at: datetime | None


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _view(row: ApiKey) -> ApiKeyView:
    return ApiKeyView(
        row.key_id, row.principal, row.roles, row.label, row.created_at, row.revoked_at
    )


class ApiKeyService:
    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], bootstrap_key: str | None
    ) -> None:
        self._sessions = sessions
        self._bootstrap = bootstrap_key.encode() if bootstrap_key else None
        self._cache: dict[str, tuple[float, Principal | None]] = {}

    async def create(
        self, principal: str, roles: list[str], label: str = ""
    ) -> tuple[str, ApiKeyView]:
        """A new key; the token is returned once and never stored."""
        problems = Problems()
        if not is_did(principal):
            problems.add("principal", "expected a DID such as did:ixo:org/operator")
        unknown = sorted(set(roles) - set(ROLES))
        if not roles or unknown:
            problems.add("roles", f"choose from {', '.join(ROLES)}")
        elif set(roles) & set(WORKFLOW_ROLES) and public_key_of(principal) is None:
            # A role step is a credential the holder signs with its own key: the key's DID
            # must be the one the signature names.
            problems.add(
                "principal",
                "a proponent, verifier or registry key belongs to an Ed25519 did:key "
                "(`twinhub keys new` makes one)",
            )
        if len(label) > 100:
            problems.add("label", "at most 100 characters")
        problems.raise_if_any("The API key request is invalid.")
        key_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        row = ApiKey(
            key_id=key_id,
            secret_sha256=_digest(secret),
            principal=principal,
            roles=sorted(set(roles)),
            label=label,
            created_at=utcnow(),
        )
        async with self._sessions.begin() as session:
            session.add(row)
        # Whatever made it (the API, the console, the CLI): who holds which roles now.
        log.info("api key created", key_id=key_id, principal=principal, roles=row.roles)
        return f"{_PREFIX}_{key_id}_{secret}", _view(row)

    async def list(self) -> list[ApiKeyView]:
        async with self._sessions() as session:
            return [_view(row) for row in await session.scalars(select(ApiKey).order_by(ApiKey.id))]

    async def revoke(self, key_id: str) -> bool:
        async with self._sessions.begin() as session:
            result = await session.execute(
                update(ApiKey)
                .where(ApiKey.key_id == key_id, ApiKey.revoked_at.is_(None))
                .values(revoked_at=utcnow())
                .returning(ApiKey.id)
            )
            changed = result.first() is not None
            if changed:  # every process's key cache forgets, once this commits
                mark(session, API_KEYS_REVOKED)
        self._cache.clear()  # this process's, whatever its bus
        if changed:
            log.info("api key revoked", key_id=key_id)
        return changed

    def revoked(self, _message: Message) -> None:
        """A key was revoked (here, on another worker, or by the command line): the bus's
        handler, so no cached answer outlives the revocation."""
        self._cache.clear()

    async def authenticate(self, token: str, cached: bool = True) -> Principal | None:
        """The principal of a valid, unrevoked key; None otherwise. `cached=False` looks
        the key up whatever the cache holds (the console's sessions: a revocation that no
        message reached, say from a command without Redis, still ends them at once)."""
        if self._bootstrap is not None and hmac.compare_digest(token.encode(), self._bootstrap):
            return _BOOTSTRAP  # immutable: one for every request
        now = time.monotonic()
        found = self._cache.get(token) if cached else None
        if found is not None and found[0] > now:
            return found[1]
        principal = await self._lookup(token)
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[token] = (now + _CACHE_SECONDS, principal)
        return principal

    def authenticate_now(self, token: str) -> Principal | None:
        """What `authenticate` answers when that needs no database (the bootstrap key, or a
        key looked up less than _CACHE_SECONDS ago: the same cache, which `revoke` clears);
        None when it would look the key up, or the key is unknown or revoked."""
        if self._bootstrap is not None and hmac.compare_digest(token.encode(), self._bootstrap):
            return _BOOTSTRAP
        cached = self._cache.get(token)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        return None

    async def _lookup(self, token: str) -> Principal | None:
        prefix, _, rest = token.partition("_")
        key_id, _, secret = rest.partition("_")
        if prefix != _PREFIX or not key_id or not secret:
            return None
        async with self._sessions() as session:
            row = await session.scalar(select(ApiKey).where(ApiKey.key_id == key_id))
        if row is None or row.revoked_at is not None:
            return None
        if not hmac.compare_digest(row.secret_sha256, _digest(secret)):
            return None
        return Principal(row.principal, frozenset(row.roles), row.key_id)


_BOOTSTRAP = Principal(BOOTSTRAP_PRINCIPAL, frozenset({"admin"}), "bootstrap")
