"""The resources every interface shares, opened once per process: database, Redis, PIN key,
core services. Interfaces receive a Platform; none builds its own connections."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from redis.asyncio import Redis

from twinhub.db.engine import create_engine, create_sessionmaker
from twinhub.db.health import DatabaseMonitor
from twinhub.db.migrate import upgrade_database
from twinhub.events.hub import EventsHub
from twinhub.events.types import CATALOGUE
from twinhub.kernel.bus import DELIVERIES_MADE, EVENTS_WRITTEN, Bus, Handler
from twinhub.kernel.principals import Principal
from twinhub.kernel.ratelimit import RateLimiter
from twinhub.logging import get_logger
from twinhub.security.keys import load_key
from twinhub.security.pins import PinCipher, load_pin_key
from twinhub.security.signing import Issuer
from twinhub.services.api_keys import ApiKeyService
from twinhub.services.builtin_protocols import SYSTEM_ACTOR, ensure_builtin_protocols
from twinhub.services.claims import ClaimService
from twinhub.services.collection_members import CollectionMemberService, members_join
from twinhub.services.credentials import CredentialService
from twinhub.services.credits import CreditService
from twinhub.services.customers import CustomerService
from twinhub.services.device_tokens import DeviceTokenService
from twinhub.services.domains import DomainService
from twinhub.services.governance import GovernanceService, GroupSpec
from twinhub.services.idempotency import IdempotencyService
from twinhub.services.ledger import Ledger
from twinhub.services.ownership import adopt_legacy_owners
from twinhub.services.protocols import ProtocolService
from twinhub.services.stove_care import StoveCare
from twinhub.services.stoves import StoveService
from twinhub.services.summaries import SummaryService
from twinhub.settings import Settings
from twinhub.telemetry.figures import RollupTelemetry
from twinhub.telemetry.live import LiveHub, live_channel
from twinhub.telemetry.service import TelemetryService
from twinhub.telemetry.store import TelemetryStore

log = get_logger(__name__)
ISSUER_KEY_FILE = "credential-issuer.key"
# Who the platform's own start-up writes are recorded as (adopting pre-0011 stove owners).
SYSTEM_PRINCIPAL = Principal(SYSTEM_ACTOR, frozenset({"admin"}))

# What runs after a transaction that recorded an event (or a signal) commits: the one table
# of in-process handlers (kernel.bus). Each hands the work to its worker and returns; the
# worker's own table (pending claims, pending deliveries, unnumbered events) is the truth
# it recovers from after a crash. "Claim approved -> credential and mint" is no row here:
# the credential and the credits are written in the approval's own ledger write
# (services.claims), so that none of them can exist without the others.
HANDLERS: tuple[tuple[str, str, Callable[[Platform], Handler]], ...] = (
    # Events committed unnumbered (customers, telemetry, stove problems) -> numbered.
    (EVENTS_WRITTEN, "sequencer numbers them", lambda p: p.events.events_written),
    # Event committed (numbered, fanned out to subscriptions) -> its webhook deliveries.
    (DELIVERIES_MADE, "dispatcher delivers", lambda p: p.events.deliveries_made),
    # Claim submitted -> the oracle evaluates it (approval: credential and mint with it).
    ("claim.submitted", "oracle evaluates", lambda p: p.oracle.claim_submitted),
)


class Platform:
    def __init__(self, settings: Settings) -> None:
        problems = settings.problems_for_production()
        if problems:
            raise RuntimeError("; ".join(problems))
        self.settings = settings
        self.engine = create_engine(settings)
        # The bus hears of this platform's commits through its own session class.
        self.bus = Bus(CATALOGUE)
        session_class = self.bus.session_class()
        members_join(session_class)  # collection members with their collections' writes
        self.sessionmaker = create_sessionmaker(self.engine, session_class)
        self.database = DatabaseMonitor(
            self.engine,
            interval=settings.database_health_interval_seconds,
            timeout=settings.database_connect_timeout_seconds,
        )
        pin_key = load_pin_key(settings)
        self.pin_cipher = PinCipher(pin_key)
        # The platform's secret key; each use derives its own key from it (HKDF).
        self.platform_key = pin_key
        self.redis: Redis | None = (
            Redis.from_url(
                settings.redis_url.get_secret_value(),
                socket_timeout=settings.database_connect_timeout_seconds,
                socket_connect_timeout=settings.database_connect_timeout_seconds,
                health_check_interval=30,
            )
            if settings.redis_url
            else None
        )
        self.customers = CustomerService(
            self.sessionmaker,
            self.pin_cipher,
            settings.ussd_max_pin_attempts,
            phone_max_pin_attempts=settings.ussd_phone_max_pin_attempts,
            lockout_seconds=settings.ussd_lockout_seconds,
            lockout_max_seconds=settings.ussd_lockout_max_seconds,
        )
        self.ledger = Ledger(self.sessionmaker, max_batch=settings.ledger_max_batch)
        self.protocols = ProtocolService(self.sessionmaker, self.ledger)
        self.domains = DomainService(self.sessionmaker, self.ledger, self.protocols)
        self.governance = GovernanceService(
            self.sessionmaker,
            self.ledger,
            self.domains,
            batch_chunk=settings.governance_batch_chunk,
            batch_retries=settings.governance_batch_retries,
            batch_retry_seconds=settings.governance_batch_retry_seconds,
        )
        issuer_key = load_key(
            settings, settings.credential_issuer_key, "CREDENTIAL_ISSUER_KEY", ISSUER_KEY_FILE
        )
        self.credentials = CredentialService(self.sessionmaker, Issuer(issuer_key))
        self.credits = CreditService(self.sessionmaker, self.ledger)
        self.claims = ClaimService(
            self.sessionmaker,
            self.ledger,
            self.protocols,
            self.credentials,
            batch_max=settings.claims_evaluation_batch_max,
            linger=settings.claims_evaluation_linger_seconds,
        )
        self.collection_members = CollectionMemberService(self.sessionmaker)
        self.stoves = StoveService(self.domains, self.claims, self.credits)
        self.stove_care = StoveCare(self.sessionmaker, settings.telemetry_offline_after_seconds)
        self.idempotency = IdempotencyService(self.sessionmaker)
        # Dashboard figures; telemetry's from the store's day rollups.
        self.summaries = SummaryService(
            self.sessionmaker,
            RollupTelemetry(self.sessionmaker, settings.telemetry_offline_after_seconds),
        )
        bootstrap = settings.twinhub_bootstrap_api_key
        self.api_keys = ApiKeyService(
            self.sessionmaker, bootstrap.get_secret_value() if bootstrap else None
        )
        self.events = EventsHub(self.sessionmaker, settings, pin_key, bus=self.bus)
        self.ledger.sequencer = self.events.sequencer  # a batch numbers its own events
        self.device_tokens = DeviceTokenService(self.sessionmaker)
        self.telemetry = TelemetryService(
            TelemetryStore(
                self.sessionmaker,
                self.engine.dialect.name == "postgresql",
                settings.telemetry_offline_after_seconds,
                bus=self.bus,
            ),
            settings,
            self.protocols,
            self.domains,
            RateLimiter.create(
                settings.telemetry_rate_limit_item,
                settings.redis_url.get_secret_value() if settings.redis_url else None,
                settings.redis_key_prefix,
                "telemetry",
            ),
            # With Redis, live streams carry every process's events (telemetry/live.py).
            LiveHub(self.redis, live_channel(settings.redis_key_prefix))
            if self.redis is not None
            else LiveHub(),
        )
        from twinhub.oracle.service import OracleService

        self.oracle = OracleService(
            self.sessionmaker,
            self.claims,
            self.protocols,
            self.credentials.issuer,
            poll_seconds=settings.oracle_poll_seconds,
            lease_seconds=settings.oracle_lease_seconds,
            max_attempts=settings.oracle_max_attempts,
            batch=settings.oracle_batch,
        )
        from twinhub.oracle.monitoring import MonitoringService

        self.monitoring = MonitoringService(self.sessionmaker, self.claims, self.protocols)
        for topic, _, handler in HANDLERS:
            self.bus.on(topic, handler(self))
        self.background: list[asyncio.Task[None]] = []
        self.mqtt: Any = None  # twinhub.telemetry.mqtt.MqttIngest when MQTT_URL is set
        self.started_at = time.monotonic()
        self._started = False

    async def start(self) -> None:
        """Migrate the schema and begin watching the database; safe to call twice."""
        if self._started:
            return
        self.bus.bind_loop()
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
        if self.settings.background_workers_enabled:
            self.background = start_telemetry(self)
            if self.settings.oracle_enabled:
                self.background.append(asyncio.create_task(self.oracle.run(), name="oracle"))
            # Batch verifications a stopped process left part-done carry on by themselves.
            await self.governance.batches.resume()
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
        members = self.settings.compliance_members
        if not members:
            return
        kind, value, quorum = self.settings.compliance_threshold
        spec = GroupSpec(
            name="Compliance",
            slug="compliance",
            members=members,
            threshold_kind=kind,
            threshold=value,
            quorum=quorum,
            voting_period_seconds=self.settings.compliance_group_voting_period_seconds,
            is_default=True,
        )
        if await self.governance.ensure_default_group(spec):
            log.info("default compliance group created", members=len(members))

    async def stop(self) -> None:
        # Batch runners (started by execute requests whatever BACKGROUND_WORKERS_ENABLED
        # says) first: each cancelled chunk rolls back whole while the database is there.
        await self.governance.batches.stop()
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
    if platform.settings.mqtt_url is not None:
        from twinhub.telemetry.mqtt import MqttIngest

        platform.mqtt = MqttIngest(platform.settings, platform.telemetry, platform.device_tokens)
        tasks.append(asyncio.create_task(platform.mqtt.run(), name="telemetry-mqtt"))
    return tasks
