"""Device tokens: the credential a physical twin's device writes its telemetry with.

A token reads `thd_<token id>_<secret>`; like API keys (services/api_keys.py) only the
SHA-256 of the secret is stored. That digest is also the key an MQTT message is signed
with (HMAC-SHA256): the device derives it from its token, twinhub has it stored. A token
writes one twin's telemetry and nothing else. Enrolment, rotation and revocation are
audited in the log (telemetry itself never goes through the ledger).

A device may also hold an Ed25519 key (`device_keys`), enrolled with its twin here: its
batches are then signed by the device itself, checkable by anyone with the public key, which
a token's HMAC (a key twinhub holds too) is not (security/device_signatures.py).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import DeviceKey, DeviceToken, Domain
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import Conflict, FieldProblem, Forbidden, Invalid, NotFound, Problems
from twinhub.kernel.identifiers import is_did
from twinhub.kernel.principals import Principal, require_role
from twinhub.logging import get_logger
from twinhub.security.device_signatures import public_key_multibase
from twinhub.services.api_keys import _digest

log = get_logger(__name__)
_PREFIX = "thd"
# A revoked (or rotated) token stops working at once on the process that revoked it, and
# within this time on every other process (each caches a token's lookup this long).
CACHE_SECONDS = 5.0
PHYSICAL = "physical"


@dataclass(frozen=True)
class DeviceTokenView:
    id: str
    domain: str
    label: str
    created_at: datetime
    revoked_at: datetime | None

    def as_record(self) -> dict[str, object]:
        return {
            "id": self.id,
            "domain": self.domain,
            "label": self.label,
            "createdAt": self.created_at.isoformat(),
            "revokedAt": self.revoked_at.isoformat() if self.revoked_at else None,
        }


@dataclass(frozen=True)
class DeviceCredential:
    """What an authenticated token stands for: its id, its twin, and its signing key."""

    token_id: str
    domain: str
    signing_key: bytes


def signing_key(token: str) -> bytes:
    """The HMAC key of MQTT messages, derived from a device token (the stored digest)."""
    _, _, rest = token.partition("_")
    _, _, secret = rest.partition("_")
    return _digest(secret).encode()


def sign(token: str, payload: bytes) -> str:
    """The hex HMAC-SHA256 a device puts in an MQTT message's `signature` user property."""
    return hmac.new(signing_key(token), payload, hashlib.sha256).hexdigest()


def _keys_record(did: str, rows: list[DeviceKey]) -> dict[str, Any]:
    def one(row: DeviceKey) -> dict[str, Any]:
        return {
            "publicKey": row.public_key,
            "createdAt": row.created_at.isoformat(),
            "createdBy": row.created_by,
            "revokedAt": row.revoked_at.isoformat() if row.revoked_at else None,
        }

    current = next((row for row in rows if row.revoked_at is None), None)
    return {
        "domain": did,
        "current": one(current) if current is not None else None,
        "keys": [one(row) for row in rows],
    }


def _view(row: DeviceToken) -> DeviceTokenView:
    return DeviceTokenView(row.token_id, row.domain_did, row.label, row.created_at, row.revoked_at)


# A token's lookup, built once: every telemetry batch and MQTT group authenticates.
_BY_TOKEN_ID = select(
    DeviceToken.token_id, DeviceToken.domain_did, DeviceToken.secret_sha256
).where(DeviceToken.token_id == bindparam("token_id"), DeviceToken.revoked_at.is_(None))

_BY_TOKEN_IDS = select(
    DeviceToken.token_id, DeviceToken.domain_did, DeviceToken.secret_sha256
).where(
    DeviceToken.token_id.in_(bindparam("token_ids", expanding=True)),
    DeviceToken.revoked_at.is_(None),
)


class DeviceTokenService:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sessions = sessions
        self._engine = sessions.kw["bind"]
        self._clock = clock  # the cache's clock (tests move it)
        self._cache: dict[str, tuple[float, DeviceCredential | None]] = {}

    async def _controlled_twin(self, session: AsyncSession, did: str, actor: Principal) -> Domain:
        require_role(actor, "writer")
        row = await session.get(Domain, did) if is_did(did) else None
        if row is None:
            raise NotFound(f"No domain {did}.")
        if not (actor.is_admin or actor.did in row.controller):
            raise Forbidden(f"Only a controller of {did} or an admin may manage its devices.")
        if row.twin_class != PHYSICAL:
            raise Conflict(f"{did} is a {row.twin_class} twin; only physical twins have devices.")
        if row.status != "active":
            raise Conflict(f"{did} is deactivated.")
        return row

    async def create(
        self, did: str, actor: Principal, label: str = ""
    ) -> tuple[str, DeviceTokenView]:
        """A new token for the twin `did`; the token is returned once and never stored."""
        problems = Problems()
        if len(label) > 100:
            problems.add("label", "at most 100 characters")
        problems.raise_if_any("The device token request is invalid.")
        async with self._sessions.begin() as session:
            await self._controlled_twin(session, did, actor)
            token, row = self._new_row(did, label, actor.did)
            session.add(row)
        log.info("device token created", domain=did, credential=row.token_id, actor=actor.did)
        return token, _view(row)

    @staticmethod
    def _new_row(did: str, label: str, actor: str) -> tuple[str, DeviceToken]:
        token_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        row = DeviceToken(
            token_id=token_id,
            domain_did=did,
            secret_sha256=_digest(secret),
            label=label,
            created_by=actor,
            created_at=utcnow(),
        )
        return f"{_PREFIX}_{token_id}_{secret}", row

    async def list(self, did: str, actor: Principal) -> list[DeviceTokenView]:
        async with self._sessions() as session:
            await self._controlled_twin(session, did, actor)
            rows = await session.scalars(
                select(DeviceToken).where(DeviceToken.domain_did == did).order_by(DeviceToken.id)
            )
            return [_view(row) for row in rows]

    async def revoke(self, did: str, token_id: str, actor: Principal) -> DeviceTokenView:
        async with self._sessions.begin() as session:
            await self._controlled_twin(session, did, actor)
            row = await self._row(session, did, token_id)
            if row.revoked_at is None:
                row.revoked_at = utcnow()
        self._cache.clear()
        log.info("device token revoked", domain=did, credential=token_id, actor=actor.did)
        return _view(row)

    async def rotate(
        self, did: str, token_id: str, actor: Principal
    ) -> tuple[str, DeviceTokenView]:
        """Revoke `token_id` and issue its successor (same label) in one transaction."""
        async with self._sessions.begin() as session:
            await self._controlled_twin(session, did, actor)
            old = await self._row(session, did, token_id)
            if old.revoked_at is not None:
                raise Conflict(f"Token {token_id} is revoked; create a new one instead.")
            await session.execute(
                update(DeviceToken).where(DeviceToken.id == old.id).values(revoked_at=utcnow())
            )
            token, row = self._new_row(did, old.label, actor.did)
            session.add(row)
        self._cache.clear()
        log.info("device token rotated", domain=did, credential=row.token_id, actor=actor.did)
        return token, _view(row)

    # -- device keys (Ed25519: the device signs its batches) -----------------------------
    async def enrol_key(self, did: str, public_key: str, actor: Principal) -> dict[str, Any]:
        """Enrol the device's Ed25519 public key (multibase or did:key) with its twin, or
        rotate it: the current one is revoked in the same transaction and kept, so older
        receipts still name the key that signed them. From then on every batch of the twin
        must be signed by this key (telemetry/service.py)."""
        key = public_key_multibase(public_key) if isinstance(public_key, str) else None
        if key is None:
            raise Invalid(
                "The device key is not an Ed25519 public key.",
                [FieldProblem("publicKey", "expected a multibase Ed25519 key (z6Mk...)")],
            )
        async with self._sessions.begin() as session:
            await self._controlled_twin(session, did, actor)
            current = await self._current_key(session, did)
            if current is not None and current.public_key == key:
                raise Conflict(f"{key} is {did}'s device key already.")
            if current is not None:
                current.revoked_at = utcnow()
                await session.flush()  # one current key per twin (a unique index)
            row = DeviceKey(domain_did=did, public_key=key, created_by=actor.did)
            row.created_at = utcnow()
            session.add(row)
            await session.flush()
            keys = await self._key_rows(session, did)
        log.info("device key enrolled", domain=did, key=key, actor=actor.did)
        return _keys_record(did, keys)

    async def revoke_key(self, did: str, actor: Principal) -> dict[str, Any]:
        """Withdraw the twin's device key: its batches are unsigned again from then on."""
        async with self._sessions.begin() as session:
            await self._controlled_twin(session, did, actor)
            current = await self._current_key(session, did)
            if current is None:
                raise NotFound(f"{did} has no device key.")
            current.revoked_at = utcnow()
            await session.flush()
            keys = await self._key_rows(session, did)
        log.info("device key revoked", domain=did, key=current.public_key, actor=actor.did)
        return _keys_record(did, keys)

    async def keys(self, did: str, actor: Principal) -> dict[str, Any]:
        """The twin's device key and the ones it had, newest first."""
        async with self._sessions() as session:
            await self._controlled_twin(session, did, actor)
            return _keys_record(did, await self._key_rows(session, did))

    @staticmethod
    async def _current_key(session: AsyncSession, did: str) -> DeviceKey | None:
        return await session.scalar(
            select(DeviceKey)
            .where(DeviceKey.domain_did == did, DeviceKey.revoked_at.is_(None))
            .with_for_update()
        )

    @staticmethod
    async def _key_rows(session: AsyncSession, did: str) -> list[DeviceKey]:
        rows = await session.scalars(
            select(DeviceKey).where(DeviceKey.domain_did == did).order_by(DeviceKey.id.desc())
        )
        return list(rows)

    @staticmethod
    async def _row(session: AsyncSession, did: str, token_id: str) -> DeviceToken:
        row = await session.scalar(
            select(DeviceToken).where(
                DeviceToken.token_id == token_id, DeviceToken.domain_did == did
            )
        )
        if row is None:
            raise NotFound(f"{did} has no device token {token_id!r}.")
        return row

    async def authenticate(self, token: str) -> DeviceCredential | None:
        """The credential of a valid, unrevoked device token; None otherwise."""
        now = self._clock()
        cached = self._cache.get(token)
        if cached is not None and cached[0] > now:
            return cached[1]
        prefix, _, rest = token.partition("_")
        token_id, _, secret = rest.partition("_")
        found = None
        if prefix == _PREFIX and token_id and secret:
            found = await self._credential(token_id)
            if found is not None and not hmac.compare_digest(
                found.signing_key, _digest(secret).encode()
            ):
                found = None
        if len(self._cache) > 100_000:
            self._cache.clear()
        self._cache[token] = (now + CACHE_SECONDS, found)
        return found

    async def by_id(self, token_id: str) -> DeviceCredential | None:
        """The credential of an unrevoked token id (MQTT messages name theirs)."""
        key = "id:" + token_id
        now = self._clock()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        found = await self._credential(token_id)
        if len(self._cache) > 100_000:
            self._cache.clear()
        self._cache[key] = (now + CACHE_SECONDS, found)
        return found

    async def by_ids(self, token_ids: set[str]) -> dict[str, DeviceCredential | None]:
        """`by_id` for several token ids (an MQTT group's): those not cached are looked up
        in one query, and each is cached as `by_id` would."""
        now = self._clock()
        found: dict[str, DeviceCredential | None] = {}
        wanted: list[str] = []
        for token_id in token_ids:
            cached = self._cache.get("id:" + token_id)
            if cached is not None and cached[0] > now:
                found[token_id] = cached[1]
            elif len(token_id) > 16:
                found[token_id] = None
            else:
                wanted.append(token_id)
        if wanted:
            async with self._engine.connect() as connection:
                rows = await connection.execute(_BY_TOKEN_IDS, {"token_ids": wanted})
                looked_up = {
                    row[0]: DeviceCredential(row[0], row[1], row[2].encode()) for row in rows
                }
            if len(self._cache) > 100_000:
                self._cache.clear()
            for token_id in wanted:
                found[token_id] = looked_up.get(token_id)
                self._cache["id:" + token_id] = (now + CACHE_SECONDS, found[token_id])
        return found

    async def _credential(self, token_id: str) -> DeviceCredential | None:
        if len(token_id) > 16:
            return None
        # A Core query on a pooled connection: no ORM session or object per lookup.
        async with self._engine.connect() as connection:
            row = (await connection.execute(_BY_TOKEN_ID, {"token_id": token_id})).first()
        if row is None:
            return None
        return DeviceCredential(row[0], row[1], row[2].encode())
