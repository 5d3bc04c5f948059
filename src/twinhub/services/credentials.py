"""Verifiable credentials: issued for approved claims, signed by the platform's issuer key.

A credential is stored exactly as signed (its canonical text), so what the API returns
is byte for byte what was signed; `verify` checks any Ed25519 `did:key` credential, ours
or another issuer's, and says whether this platform issued it.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import Credential
from twinhub.kernel.errors import Conflict, NotFound
from twinhub.security.jcs import digest
from twinhub.security.signing import Issuer, verify

CONTEXT = "https://www.w3.org/ns/credentials/v2"


def rfc3339(value: datetime) -> str:
    """UTC with a Z, to the second: the form W3C credentials and Cosmos JSON use."""
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


async def store_step(
    session: AsyncSession,
    signed: dict[str, Any],
    kind: str,
    project: str,
    at: datetime,
    period_id: int | None = None,
) -> str:
    """Keep a workflow step's credential exactly as its actor signed it (a step speaks for
    no claim); its digest, which the next step names."""
    credential_id = signed.get("id")
    if not isinstance(credential_id, str) or not 1 <= len(credential_id) <= 100:
        raise Conflict("A credential's id is a string of 1 to 100 characters.")
    if await session.get(Credential, credential_id) is not None:
        raise Conflict(f"A credential {credential_id} is stored already; sign a new one.")
    subject = signed["credentialSubject"]["id"]
    found = digest(signed)
    session.add(
        Credential(
            id=credential_id,
            claim_id=None,
            subject=subject,
            issuer=signed["issuer"],
            document=orjson.dumps(signed).decode(),
            issued_at=at,
            kind=kind,
            project_did=project,
            period_id=period_id,
            digest=found,
        )
    )
    return found


async def steps(
    session: AsyncSession,
    project: str,
    kind: str | None = None,
    period_id: int | None = None,
    subject: str | None = None,
) -> list[Credential]:
    """A project's step credentials, oldest first."""
    query = select(Credential).where(Credential.project_did == project)
    if kind is not None:
        query = query.where(Credential.kind == kind)
    if period_id is not None:
        query = query.where(Credential.period_id == period_id)
    if subject is not None:
        query = query.where(Credential.subject == subject)
    return list(await session.scalars(query.order_by(Credential.issued_at, Credential.id)))


class CredentialService:
    def __init__(self, sessions: async_sessionmaker[AsyncSession], issuer: Issuer) -> None:
        self._sessions = sessions
        self.issuer = issuer

    def issue(
        self, claim_id: str, subject: str, kind: str, claims: dict[str, Any], at: datetime
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """A signed credential, and its `credentials` row (columns) for the caller to store
        in its own ledger write: the stored document is exactly what was signed."""
        credential_id = f"urn:uuid:{uuid.uuid4()}"
        document = {
            "@context": [CONTEXT],
            "id": credential_id,
            "type": ["VerifiableCredential", kind],
            "issuer": self.issuer.did,
            "validFrom": rfc3339(at),
            "credentialSubject": {"id": subject, **claims},
        }
        signed = self.issuer.sign(document, rfc3339(at))
        row = {
            "id": credential_id,
            "claim_id": claim_id,
            "subject": subject,
            "issuer": self.issuer.did,
            "document": orjson.dumps(signed).decode(),
            "issued_at": at,
        }
        return signed, row

    async def get(self, credential_id: str) -> dict[str, Any]:
        async with self._sessions() as session:
            row = await session.get(Credential, credential_id)
        if row is None:
            raise NotFound(f"No credential {credential_id!r}.")
        return orjson.loads(row.document)

    async def of_claim(self, claim_id: str) -> dict[str, Any]:
        async with self._sessions() as session:
            document = await session.scalar(
                select(Credential.document).where(Credential.claim_id == claim_id)
            )
        if document is None:
            raise NotFound(f"Claim {claim_id!r} has no credential (only approved claims do).")
        return orjson.loads(document)

    def verify(self, credential: dict[str, Any]) -> dict[str, Any]:
        result = verify(credential)
        return {
            "verified": result.verified,
            "problem": result.problem,
            "issuer": result.issuer,
            "issuedByThisPlatform": result.verified and result.issuer == self.issuer.did,
        }
