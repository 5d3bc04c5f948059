"""A monitoring period's whole trust chain, read for people (the console): the
accreditations and the PDD validation it rests on, its own signed steps, and the
retirement certificates that name its issuance, drawn by mrv.trust_chain_drawing; and a
project document's validation with the accreditation it names.

Which validation a period rests on: the one its latest submission names; before any
submission, the project's newest validation (the one a submission would name).
"""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import MonitoringPeriod, ProjectDocument
from twinhub.kernel.errors import NotFound
from twinhub.mrv import trust_chain as chain
from twinhub.mrv.period_inputs import inputs_digest
from twinhub.mrv.trust_chain_drawing import draw
from twinhub.security.jcs import digest
from twinhub.services.credentials import steps
from twinhub.services.retirement_certificates import RetirementCertificates


class PeriodChain:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        certificates: RetirementCertificates | None,
    ) -> None:
        self._sessions = sessions
        self._certificates = certificates

    async def draw(self, project: str, period_id: int) -> list[dict[str, Any]]:
        """The period's chain, oldest link first, each step drawn (signer, time, digests
        named and whether each link holds, whether the signature verifies)."""
        async with self._sessions() as session:
            row = await session.get(MonitoringPeriod, period_id)
            if row is None or row.project_did != project:
                raise NotFound(f"No monitoring period {period_id} of {project}.")
            everything = await steps(session, project)
            documents = await session.scalars(
                select(ProjectDocument.digest).where(ProjectDocument.project_did == project)
            )
            named = {found: "project document" for found in documents}
            report = orjson.loads(row.report)
            named[digest(report)] = "report"
            if row.inputs:
                named[inputs_digest(orjson.loads(row.inputs))] = "frozen inputs"
        signed = {r.digest: orjson.loads(r.document) for r in everything if r.digest}
        own = [orjson.loads(r.document) for r in everything if r.period_id == period_id]
        submissions = [c for c in own if c["type"][-1] == chain.SUBMISSION]
        validations = [orjson.loads(r.document) for r in everything if r.kind == chain.VALIDATION]
        validation = (
            signed.get(submissions[-1]["credentialSubject"].get("validation"))
            if submissions
            else (validations[-1] if validations else None)
        )
        rests_on = [validation] if validation else []
        accreditations = []
        for credential in [*rests_on, *own]:
            cited = signed.get(credential["credentialSubject"].get("accreditation"))
            if cited is not None and cited not in accreditations:
                accreditations.append(cited)
        retirements: list[dict[str, Any]] = []
        if self._certificates is not None:
            for credential in own:
                if credential["type"][-1] == chain.ISSUANCE:
                    retirements += reversed(
                        await self._certificates.listed(naming=digest(credential))
                    )
        return draw([*accreditations, *rests_on, *own, *retirements], named)

    async def validation(
        self, project: str, validation: dict[str, Any], document_digest: str
    ) -> list[dict[str, Any]]:
        """A project document's validation, drawn after the accreditation it names."""
        async with self._sessions() as session:
            accreditations = await steps(session, project, chain.ACCREDITATION)
        named = validation["credentialSubject"].get("accreditation")
        cited = [orjson.loads(r.document) for r in accreditations if r.digest == named]
        return draw([*cited[-1:], validation], {document_digest: "project document"})
