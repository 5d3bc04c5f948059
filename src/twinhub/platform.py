"""The resources every interface shares, opened once per process: database, Redis, PIN key,
core services. Interfaces receive a Platform; none builds its own connections."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from redis.asyncio import Redis

from twinhub.db.engine import create_engine, create_sessionmaker
from twinhub.db.health import DatabaseMonitor
from twinhub.db.migrate import upgrade_database
from twinhub.events.hub import EventsHub
from twinhub.logging import get_logger
from twinhub.security.keys import load_key
from twinhub.security.pins import PinCipher, load_pin_key
from twinhub.security.signing import Issuer
from twinhub.services.api_keys import ApiKeyService
from twinhub.services.builtin_protocols import SYSTEM_ACTOR, ensure_builtin_protocols
from twinhub.services.claims import ClaimService
from twinhub.services.collection_members import CollectionMemberService
from twinhub.services.credentials import CredentialService
from twinhub.services.credits import CreditService
from twinhub.services.customers import CustomerService
from twinhub.services.device_tokens import DeviceTokenService
from twinhub.services.domains import DomainService
from twinhub.services.governance import GovernanceService, GroupSpec
from twinhub.services.idempotency import IdempotencyService
from twinhub.services.ledger import Ledger
from twinhub.services.ownership import adopt_legacy_owners
from twinhub.services.principals import Principal
from twinhub.services.protocols import ProtocolService
from twinhub.services.stove_care import StoveCare
from twinhub.services.stoves import StoveService
from twinhub.services.summaries import SummaryService
from twinhub.settings import Settings
from twinhub.telemetry.figures import RollupTelemetry
from twinhub.telemetry.live import LiveHub, live_channel
from twinhub.telemetry.service import TelemetryService
from twinhub.telemetry.store import TelemetryStore
from twinhub.web.ratelimit import RateLimiter

log = get_logger(__name__)
ISSUER_KEY_FILE = "credential-issuer.key"
# Who the platform's own start-up writes are recorded as (adopting pre-0011 stove owners).
SYSTEM_PRINCIPAL = Principal(SYSTEM_ACTOR, frozenset({"admin"}))


class Platform:
    def __init__(self, settings: Settings) -> None:
        problems = settings.problems_for_production()
        if problems:
            raise RuntimeError("; ".join(problems))
        self.settings = settings
        self.engine = create_engine(settings)
        self.sessionmaker = create_sessionmaker(self.engine)
        self.database = DatabaseMonitor(
            self.engine,
            interval=settings.storage.health_interval_seconds,
            timeout=settings.storage.connect_timeout_seconds,
        )
        pin_key = load_pin_key(settings)
        self.pin_cipher = PinCipher(pin_key)
        # The platform's secret key; each use derives its own key from it (HKDF).
        self.platform_key = pin_key
        self.redis: Redis | None = (
            Redis.from_url(
                settings.storage.redis_url.get_secret_value(),
                socket_timeout=settings.storage.connect_timeout_seconds,
                socket_connect_timeout=settings.storage.connect_timeout_seconds,
                health_check_interval=30,
            )
            if settings.storage.redis_url
            else None
        )
        self.customers = CustomerService(
            self.sessionmaker,
            self.pin_cipher,
            settings.ussd.max_pin_attempts,
            phone_max_pin_attempts=settings.ussd.phone_max_pin_attempts,
            lockout_seconds=settings.ussd.lockout_seconds,
            lockout_max_seconds=settings.ussd.lockout_max_seconds,
        )
        self.ledger = Ledger(self.sessionmaker, max_batch=settings.storage.ledger_max_batch)
        self.protocols = ProtocolService(self.sessionmaker, self.ledger)
        self.domains = DomainService(self.sessionmaker, self.ledger, self.protocols)
        self.governance = GovernanceService(
            self.sessionmaker,
            self.ledger,
            self.domains,
            batch_chunk=settings.registry.governance_batch_chunk,
            batch_retries=settings.registry.governance_batch_retries,
            batch_retry_seconds=settings.registry.governance_batch_retry_seconds,
        )
        issuer_key = load_key(
            settings,
            settings.security.credential_issuer_key,
            "CREDENTIAL_ISSUER_KEY",
            ISSUER_KEY_FILE,
        )
        self.credentials = CredentialService(self.sessionmaker, Issuer(issuer_key))
        self.credits = CreditService(self.sessionmaker, self.ledger)
        self.claims = ClaimService(
            self.sessionmaker,
            self.ledger,
            self.protocols,
            self.credentials,
            self.credits,
            batch_max=settings.oracle.evaluation_batch_max,
            linger=settings.oracle.evaluation_linger_seconds,
        )
        self.collection_members = CollectionMemberService(self.sessionmaker)
        self.stoves = StoveService(self.domains, self.claims, self.credits)
        self.stove_care = StoveCare(self.sessionmaker, settings.telemetry.offline_after_seconds)
        self.idempotency = IdempotencyService(self.sessionmaker)
        # Dashboard figures; telemetry's from the store's day rollups.
        self.summaries = SummaryService(
            self.sessionmaker,
            RollupTelemetry(self.sessionmaker, settings.telemetry.offline_after_seconds),
        )
        bootstrap = settings.security.bootstrap_api_key
        self.api_keys = ApiKeyService(
            self.sessionmaker, bootstrap.get_secret_value() if bootstrap else None
        )
        self.events = EventsHub(self.sessionmaker, settings, pin_key)
        self.ledger.sequencer = self.events.sequencer  # a batch numbers its own events
        self.device_tokens = DeviceTokenService(self.sessionmaker)
        self.telemetry = TelemetryService(
            TelemetryStore(
                self.sessionmaker,
                self.engine.dialect.name == "postgresql",
                settings.telemetry.offline_after_seconds,
            ),
            settings,
            self.protocols,
            self.domains,
            RateLimiter.create(
                settings.telemetry.rate_limit_item,
                settings.storage.redis_url.get_secret_value()
                if settings.storage.redis_url
                else None,
                settings.storage.redis_key_prefix,
                "telemetry",
            ),
            # With Redis, live streams carry every process's events (telemetry/live.py).
            LiveHub(self.redis, live_channel(settings.storage.redis_key_prefix))
            if self.redis is not None
            else LiveHub(),
        )
        from twinhub.oracle.service import OracleService

        self.oracle = OracleService(
            self.sessionmaker,
            self.claims,
            self.protocols,
            self.credentials.issuer,
            poll_seconds=settings.oracle.poll_seconds,
            lease_seconds=settings.oracle.lease_seconds,
            max_attempts=settings.oracle.max_attempts,
            batch=settings.oracle.batch,
        )
        from twinhub.oracle.monitoring import MonitoringService

        self.monitoring = MonitoringService(self.sessionmaker, self.claims, self.protocols)
        self.background: list[asyncio.Task[None]] = []
        self.mqtt: Any = None  # twinhub.telemetry.mqtt.MqttIngest when MQTT_URL is set
        self.started_at = time.monotonic()
        self._started = False

    async def start(self) -> None:
        """Migrate the schema and begin watching the database; safe to call twice."""
        if self._started:
            return
        await upgrade_database(self.engine)
        created = await ensure_builtin_protocols(self.protocols)
        if created:
            log.info("built-in protocols created", count=created)
        await self._ensure_compliance_group()
        await adopt_legacy_owners(self.sessionmaker, self.domains, SYSTEM_PRINCIPAL)
        self.database.start()
        await self.events.start()
        # Whatever BACKGROUND_WORKERS_ENABLED says: every registry process ingests HTTP
        # readings and serves live streams, so each sends its events to the others.
        self.telemetry.live.start()
        if self.settings.server.background_workers_enabled:
            self.background = start_telemetry(self)
            if self.settings.oracle.enabled:
                self.background.append(asyncio.create_task(self.oracle.run(), name="oracle"))
            # Batch verifications a stopped process left part-done carry on by themselves.
            await self.governance.resume_batches()
        self._started = True
        log.info(
            "platform started",
            environment=self.settings.environment.value,
            database=self.engine.url.get_backend_name(),
            session_store="redis" if self.redis else "memory",
        )

    async def _ensure_compliance_group(self) -> None:
        """The configured default compliance group, made once (an admin may also make one
        through the API); an existing default group is left as it is."""
        members = self.settings.registry.compliance_members
        if not members:
            return
        kind, value, quorum = self.settings.registry.compliance_threshold
        spec = GroupSpec(
            name="Compliance",
            slug="compliance",
            members=members,
            threshold_kind=kind,
            threshold=value,
            quorum=quorum,
            voting_period_seconds=self.settings.registry.compliance_group_voting_period_seconds,
            is_default=True,
        )
        if await self.governance.ensure_default_group(spec):
            log.info("default compliance group created", members=len(members))

    async def stop(self) -> None:
        # Batch runners (started by execute requests whatever BACKGROUND_WORKERS_ENABLED
        # says) first: each cancelled chunk rolls back whole while the database is there.
        await self.governance.stop_batches()
        await self.events.stop()
        for task in self.background:
            task.cancel()
        await asyncio.gather(*self.background, return_exceptions=True)
        self.background = []
        await self.telemetry.live.stop()
        await self.database.stop()
        if self.redis is not None:
            await self.redis.aclose()
        await self.engine.dispose()
        self._started = False

    def uptime(self) -> float:
        return round(time.monotonic() - self.started_at, 3)


def start_telemetry(platform: Platform) -> list[asyncio.Task[None]]:
    """The telemetry background work: the retention pruner, the offline watch, and the MQTT
    subscriber when MQTT_URL is set."""
    tasks = [
        asyncio.create_task(platform.telemetry.run_pruner(), name="telemetry-prune"),
        asyncio.create_task(platform.telemetry.run_offline_watch(), name="telemetry-offline"),
    ]
    if platform.settings.telemetry.mqtt_url is not None:
        from twinhub.telemetry.mqtt import MqttIngest

        platform.mqtt = MqttIngest(platform.settings, platform.telemetry, platform.device_tokens)
        tasks.append(asyncio.create_task(platform.mqtt.run(), name="telemetry-mqtt"))
    return tasks
