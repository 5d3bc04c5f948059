"""Retirement certificates: written in the retirement's own ledger write, signed with the
platform's issuer key (the ledger that recorded the retirement), stored exactly as signed
in `credentials`, and checked for anyone, with no API key, against what was recorded.

The rule of which credits a retirement takes (first in, first out) and the certificate's
shape live in mrv.retirement_certificate; here the movements and the credentials it names
are read. Reading the token's whole movement history per retirement is linear in it; a
table of lots would make it constant, should retirements of a very long history need it.
"""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import Credential, CreditMovement, MonitoringPeriod
from twinhub.kernel.errors import FieldProblem, NotFound
from twinhub.mrv import retirement_certificate as rules
from twinhub.mrv.trust_chain import ISSUANCE, period_ref, rfc3339
from twinhub.security.jcs import CanonicalizationError, digest
from twinhub.security.signing import Issuer, verify
from twinhub.services.credentials import steps

MAX_LISTED = 200


def _named(row: Credential) -> dict[str, Any]:
    """How a certificate names a credential: id, type, digest (JCS) and signer."""
    document = orjson.loads(row.document)
    return {
        "id": row.id,
        "type": document["type"][-1],
        "digest": row.digest or digest(document),
        "issuer": row.issuer,
    }


class RetirementCertificates:
    def __init__(self, sessions: async_sessionmaker[AsyncSession], issuer: Issuer) -> None:
        self._sessions = sessions
        self._issuer = issuer

    # -- written in the retirement's ledger write ------------------------------------------
    async def issue(
        self,
        session: AsyncSession,
        retirement: dict[str, Any],
        beneficiary: str,
        decimals: int,
        recorded_at: Any,
    ) -> dict[str, Any]:
        """Sign and store the certificate of `retirement` (its movement's view, flushed in
        `session`); the signed certificate."""
        history = await session.execute(
            select(
                CreditMovement.kind,
                CreditMovement.sender,
                CreditMovement.recipient,
                CreditMovement.amount,
                CreditMovement.claim_id,
            )
            .where(
                CreditMovement.token == retirement["token"],
                CreditMovement.id < retirement["id"],
            )
            .order_by(CreditMovement.id)
        )
        taken = rules.allocate(
            (rules.Move(*row) for row in history), retirement["from"], retirement["amount"]
        )
        sources = [await self._source(session, origin, amount) for origin, amount in taken]
        unsigned = rules.certificate(
            retirement,
            self._issuer.did,
            beneficiary,
            decimals,
            sources,
            rfc3339(recorded_at),
        )
        signed = self._issuer.sign(unsigned, unsigned["validFrom"])
        session.add(
            Credential(
                id=signed["id"],
                claim_id=None,
                subject=retirement["from"],
                issuer=self._issuer.did,
                document=orjson.dumps(signed).decode(),
                issued_at=recorded_at,
                kind=rules.RETIREMENT,
                digest=digest(signed),
            )
        )
        return signed

    @staticmethod
    async def _source(session: AsyncSession, origin: str | None, amount: int) -> dict[str, Any]:
        """Where `amount` of the retired credits came from: a period's issuance (the
        registry's signed credential) or a claim's approval credential; said plainly when
        the history does not trace them."""
        source: dict[str, Any] = {
            "amount": amount,
            "mint": origin,
            "project": None,
            "period": None,
            "claim": None,
            "credential": None,
        }
        period_id = rules.period_of(origin)
        if period_id is not None:
            period = await session.get(MonitoringPeriod, period_id)
            if period is not None:
                source["project"] = period.project_did
                source["period"] = period_ref(
                    period.id, period.start.isoformat(), period.end.isoformat()
                )
                issued = await steps(session, period.project_did, ISSUANCE, period.id)
                if issued:
                    source["credential"] = _named(issued[-1])
        elif origin is not None:
            source["claim"] = origin
            row = await session.scalar(select(Credential).where(Credential.claim_id == origin))
            if row is not None:
                source["credential"] = _named(row)
        if source["credential"] is None:
            source["note"] = (
                "no signed credential is recorded for these credits' mint"
                if origin is not None
                else "the ledger's history does not trace these credits to a mint"
            )
        return source

    # -- public reads ----------------------------------------------------------------------
    async def certificate(self, retirement_id: int) -> dict[str, Any]:
        """The certificate of a retirement, exactly as signed, and its check."""
        async with self._sessions() as session:
            row = await session.get(Credential, rules.certificate_id(retirement_id))
            if row is None or row.kind != rules.RETIREMENT:
                raise NotFound(f"No retirement certificate for retirement {retirement_id}.")
            signed = orjson.loads(row.document)
            return {"certificate": signed, "check": await self._check(session, signed)}

    async def check(self, credential: Any) -> dict[str, Any]:
        """Whether `credential` is a certificate this platform signed for a recorded
        retirement, and the credentials it names are the recorded ones, each verifying."""
        async with self._sessions() as session:
            return await self._check(session, credential)

    async def _check(self, session: AsyncSession, credential: Any) -> dict[str, Any]:
        problems = rules.certificate_problems(credential, self._issuer.did)
        named: list[dict[str, Any]] = []
        if not problems:
            problems, named = await self._against_records(session, credential)
        try:
            signer = verify(credential).issuer if isinstance(credential, dict) else None
        except (CanonicalizationError, TypeError, ValueError):
            signer = None
        return {
            "verified": not problems,
            "issuer": signer,
            "issuedByThisPlatform": signer == self._issuer.did,
            "problems": [{"field": p.field, "error": p.error} for p in problems],
            "sources": named,
        }

    async def _against_records(
        self, session: AsyncSession, credential: dict[str, Any]
    ) -> tuple[list[FieldProblem], list[dict[str, Any]]]:
        problems: list[FieldProblem] = []
        stored = await session.get(Credential, credential["id"])
        if stored is None or stored.kind != rules.RETIREMENT:
            problems.append(FieldProblem("certificate.id", "no such certificate is recorded"))
        elif stored.digest != digest(credential):
            problems.append(FieldProblem("certificate", "differs from the one recorded"))
        retirement_id = rules.retirement_id_of(credential["id"])
        movement = await session.get(CreditMovement, retirement_id)
        subject = credential["credentialSubject"]
        if movement is None or movement.kind != "retire":
            problems.append(FieldProblem("certificate.id", "no such retirement is recorded"))
        else:
            recorded = {"id": movement.sender, "token": movement.token, "amount": movement.amount}
            for key, value in recorded.items():
                if subject.get(key) != value:
                    problems.append(
                        FieldProblem(
                            f"certificate.credentialSubject.{key}",
                            f"the ledger recorded {value!r}, the certificate says "
                            f"{subject.get(key)!r}",
                        )
                    )
        named = []
        for index, source in enumerate(subject["sources"]):
            cited = source.get("credential")
            if not isinstance(cited, dict):
                continue
            where = f"certificate.credentialSubject.sources[{index}].credential"
            row = await session.get(Credential, str(cited.get("id")))
            if row is None:
                problems.append(FieldProblem(where, "no such credential is recorded"))
                continue
            document = orjson.loads(row.document)
            try:
                verified = verify(document).verified
            except (CanonicalizationError, TypeError, ValueError):
                verified = False
            found = row.digest or digest(document)
            if found != cited.get("digest"):
                problems.append(FieldProblem(f"{where}.digest", f"the recorded one is {found}"))
            if not verified:
                problems.append(FieldProblem(where, "the named credential's proof fails"))
            named.append({**_named(row), "verified": verified})
        return problems, named

    async def listed(
        self, holder: str | None = None, naming: str | None = None
    ) -> list[dict[str, Any]]:
        """Certificates, newest first: of `holder`, or naming the credential digest
        `naming` (a period's issuance) among their sources."""
        query = select(Credential).where(Credential.kind == rules.RETIREMENT)
        if holder is not None:
            query = query.where(Credential.subject == holder)
        if naming is not None:
            query = query.where(Credential.document.contains(naming))
        async with self._sessions() as session:
            rows = await session.scalars(
                query.order_by(Credential.issued_at.desc(), Credential.id.desc()).limit(MAX_LISTED)
            )
            return [orjson.loads(row.document) for row in rows]
