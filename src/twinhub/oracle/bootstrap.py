"""The MRV and oracle context's start: the oracle worker, the monitoring periods and their
verification workflow, built from OracleSettings."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.oracle.monitoring import MonitoringService
from twinhub.oracle.period_workflow import PeriodWorkflow
from twinhub.oracle.service import OracleService
from twinhub.security.signing import Issuer
from twinhub.services.claims import ClaimService
from twinhub.services.day_digests import DayDigests
from twinhub.services.ledger import Ledger
from twinhub.services.project_documents import ProjectDocuments
from twinhub.services.protocols import ProtocolService
from twinhub.services.surveys import SurveyService
from twinhub.settings import OracleSettings


@dataclass(frozen=True)
class Oracle:
    service: OracleService
    monitoring: MonitoringService
    documents: ProjectDocuments
    workflow: PeriodWorkflow
    days: DayDigests  # stove-days' digests kept for drafts, and the daily pass that fills them


def build_oracle(
    sessions: async_sessionmaker[AsyncSession],
    settings: OracleSettings,
    claims: ClaimService,
    protocols: ProtocolService,
    issuer: Issuer,
    ledger: Ledger,
    evidence_years: int = 0,
    surveys: SurveyService | None = None,
    max_attachment_bytes: int = 10_485_760,
    retention_days: int = 0,
) -> Oracle:
    documents = ProjectDocuments(sessions, ledger, max_attachment_bytes)
    days = DayDigests(sessions, retention_days)
    monitoring = MonitoringService(sessions, ledger, protocols, documents, surveys, days)
    return Oracle(
        OracleService(
            sessions,
            claims,
            protocols,
            issuer,
            poll_seconds=settings.poll_seconds,
            lease_seconds=settings.lease_seconds,
            max_attempts=settings.max_attempts,
            batch=settings.batch,
        ),
        monitoring,
        documents,
        PeriodWorkflow(sessions, ledger, monitoring, documents, evidence_years),
        days,
    )
