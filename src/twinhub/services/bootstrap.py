"""The registry context's start: its services (ledger, protocols, domains, governance,
claims, credits, credentials, keys, ...) built from RegistrySettings; and the households'
accounts, whose PIN lock-outs the USSD settings set (the USSD gateway itself, an interface
above the platform, is built by `ussd.app.create_ussd_app`).

Only what the registry's own settings cannot say is passed in: the database, the signing
issuer and the bootstrap API key (security), and the events sequencer that numbers each
ledger batch's events in the batch's transaction."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.events.sequencer import Sequencer
from twinhub.security.pins import PinCipher
from twinhub.security.signing import Issuer
from twinhub.services.api_keys import ApiKeyService
from twinhub.services.claims import ClaimService
from twinhub.services.collection_members import CollectionMemberService
from twinhub.services.credentials import CredentialService
from twinhub.services.credits import CreditService
from twinhub.services.customers import CustomerService
from twinhub.services.device_tokens import DeviceTokenService
from twinhub.services.domains import DomainService
from twinhub.services.governance import GovernanceService
from twinhub.services.idempotency import IdempotencyService
from twinhub.services.ledger import Ledger
from twinhub.services.protocols import ProtocolService
from twinhub.services.retirement_certificates import RetirementCertificates
from twinhub.services.stoves import StoveService
from twinhub.services.surveys import SurveyRules, SurveyService
from twinhub.settings import RegistrySettings, UssdSettings


@dataclass(frozen=True)
class Registry:
    ledger: Ledger
    protocols: ProtocolService
    domains: DomainService
    governance: GovernanceService
    credentials: CredentialService
    credits: CreditService
    claims: ClaimService
    collection_members: CollectionMemberService
    stoves: StoveService
    idempotency: IdempotencyService
    api_keys: ApiKeyService
    device_tokens: DeviceTokenService


def build_registry(
    sessions: async_sessionmaker[AsyncSession],
    settings: RegistrySettings,
    *,
    issuer: Issuer,
    bootstrap_api_key: str | None,
    sequencer: Sequencer | None,
) -> Registry:
    ledger = Ledger(sessions, max_batch=settings.ledger_max_batch, sequencer=sequencer)
    protocols = ProtocolService(sessions, ledger)
    domains = DomainService(sessions, ledger, protocols)
    credentials = CredentialService(sessions, issuer)
    # Retiring credits signs a certificate with the platform's key, in the same write.
    credits = CreditService(sessions, ledger, RetirementCertificates(sessions, issuer))
    claims = ClaimService(
        sessions,
        ledger,
        protocols,
        credentials,
        batch_max=settings.claims_evaluation_batch_max,
        linger=settings.claims_evaluation_linger_seconds,
    )
    return Registry(
        ledger=ledger,
        protocols=protocols,
        domains=domains,
        governance=GovernanceService(
            sessions,
            ledger,
            domains,
            batch_chunk=settings.governance_batch_chunk,
            batch_retries=settings.governance_batch_retries,
            batch_retry_seconds=settings.governance_batch_retry_seconds,
        ),
        credentials=credentials,
        credits=credits,
        claims=claims,
        collection_members=CollectionMemberService(sessions),
        stoves=StoveService(domains, claims, credits),
        idempotency=IdempotencyService(sessions),
        api_keys=ApiKeyService(sessions, bootstrap_api_key),
        device_tokens=DeviceTokenService(sessions),
    )


def build_customers(
    sessions: async_sessionmaker[AsyncSession], settings: UssdSettings, cipher: PinCipher
) -> CustomerService:
    """The households' accounts, with the PIN lock-outs USSD_* sets."""
    return CustomerService(
        sessions,
        cipher,
        settings.max_pin_attempts,
        phone_max_pin_attempts=settings.phone_max_pin_attempts,
        lockout_seconds=settings.lockout_seconds,
        lockout_max_seconds=settings.lockout_max_seconds,
    )


def build_surveys(
    sessions: async_sessionmaker[AsyncSession],
    settings: UssdSettings,
    ledger: Ledger | None = None,
    domains: DomainService | None = None,
) -> SurveyService:
    """Household surveys, under the USSD_SURVEY_* defaults and limits; an answered household
    size is written to the stove's record through `ledger` and `domains`."""
    return SurveyService(
        sessions,
        SurveyRules(
            confidence=settings.survey_confidence,
            precision=settings.survey_precision,
            expected_cv=settings.survey_expected_cv,
            household_min=settings.survey_household_min,
            household_max=max(settings.survey_household_min, settings.survey_household_max),
            max_sample=settings.survey_max_sample,
            refresh_seconds=settings.survey_refresh_seconds,
        ),
        ledger=ledger,
        domains=domains,
    )
