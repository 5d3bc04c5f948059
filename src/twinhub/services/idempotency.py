"""Idempotency keys: a repeated POST with the same key gets the first answer, and nothing is
created twice.

The key is reserved before the work starts (a unique row per principal and key), so two
concurrent requests with one key cannot both run; the second is told to retry. A
reservation whose request died is taken over after `stale_after` seconds. Only successful
answers are stored: a refused request may be corrected and sent again with the same key.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import IdempotencyRecord
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import Conflict, Invalid


@dataclass(frozen=True)
class StoredAnswer:
    status_code: int
    body: str


def request_fingerprint(method: str, path: str, body: bytes) -> str:
    return hashlib.sha256(b"\n".join([method.encode(), path.encode(), body])).hexdigest()


class InProgress(Conflict):
    """Another request with this key is being processed right now."""


class IdempotencyService:
    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], stale_after: float = 60.0
    ) -> None:
        self._sessions = sessions
        self._stale_after = timedelta(seconds=stale_after)

    async def reserve(self, principal: str, key: str, fingerprint: str) -> StoredAnswer | None:
        """None: go ahead (the key is now yours). A StoredAnswer: replay it."""
        for _ in range(2):
            try:
                async with self._sessions.begin() as session:
                    session.add(
                        IdempotencyRecord(
                            principal=principal,
                            key=key,
                            request_sha256=fingerprint,
                            created_at=utcnow(),
                        )
                    )
                return None
            except IntegrityError:
                pass
            async with self._sessions.begin() as session:
                row = await session.scalar(
                    select(IdempotencyRecord).where(
                        IdempotencyRecord.principal == principal, IdempotencyRecord.key == key
                    )
                )
                if row is None:
                    continue  # released meanwhile: try to reserve again
                if row.request_sha256 != fingerprint:
                    raise Invalid(
                        "This Idempotency-Key was used for a different request; use a new key."
                    )
                if row.status_code is not None and row.response is not None:
                    return StoredAnswer(row.status_code, row.response)
                if utcnow() - row.created_at < self._stale_after:
                    raise InProgress("A request with this Idempotency-Key is still running.")
                await session.delete(row)  # its request died; take the key over
        raise InProgress("A request with this Idempotency-Key is still running.")

    async def complete(self, principal: str, key: str, answer: StoredAnswer) -> None:
        async with self._sessions.begin() as session:
            await session.execute(
                update(IdempotencyRecord)
                .where(IdempotencyRecord.principal == principal, IdempotencyRecord.key == key)
                .values(status_code=answer.status_code, response=answer.body)
            )

    async def release(self, principal: str, key: str) -> None:
        async with self._sessions.begin() as session:
            await session.execute(
                delete(IdempotencyRecord).where(
                    IdempotencyRecord.principal == principal,
                    IdempotencyRecord.key == key,
                    IdempotencyRecord.status_code.is_(None),
                )
            )
