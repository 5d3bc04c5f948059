"""The resources every interface shares, opened once per process: database, Redis, PIN key,
core services. Interfaces receive a Platform; none builds its own connections."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from twinhub.db.bootstrap import build_storage
from twinhub.db.migrate import upgrade_database
from twinhub.events.hub import EventsHub
from twinhub.events.types import CATALOGUE
from twinhub.kernel.bus import (
    API_KEYS_REVOKED,
    DELIVERIES_MADE,
    EVENTS_WRITTEN,
    SHARED_SIGNALS,
    Bus,
    Handler,
    Message,
)
from twinhub.kernel.principals import Principal
from twinhub.kernel.relay import Relay
from twinhub.logging import get_logger
from twinhub.oracle.bootstrap import build_oracle
from twinhub.oracle.period_drafts import PeriodDrafts
from twinhub.security.bootstrap import load_keys
from twinhub.services.bootstrap import build_customers, build_registry, build_surveys
from twinhub.services.builtin_protocols import SYSTEM_ACTOR, ensure_builtin_protocols
from twinhub.services.collection_members import members_join
from twinhub.services.governance import GroupSpec
from twinhub.services.ownership import adopt_legacy_owners
from twinhub.services.programme_lists import ProgrammeLists
from twinhub.services.read_model import ReadModel
from twinhub.services.summaries import SummaryService
from twinhub.settings import Settings
from twinhub.telemetry.bootstrap import build_telemetry, mqtt_client_id, start_telemetry_work

log = get_logger(__name__)
# Who the platform's own start-up writes are recorded as (adopting pre-0011 stove owners).
SYSTEM_PRINCIPAL = Principal(SYSTEM_ACTOR, frozenset({"admin"}))


# What runs after a transaction that recorded an event (or a signal) commits: the one table
# of in-process handlers (kernel.bus). Each hands the work to its worker and returns; the
# worker's own table (pending claims, pending deliveries, unnumbered events) is the truth
# it recovers from after a crash. "Claim approved -> credential and mint" is no row here:
# the credential and the credits are written in the approval's own ledger write
# (services.claims), so that none of them can exist without the others.
def _telemetry_forgets(platform: Platform) -> Handler:
    return lambda message: platform.telemetry.forget(message.subject)


def _claim_read_forgets(platform: Platform) -> Handler:
    def forget(message: Message) -> None:
        claim = message.data.get("claim")
        if isinstance(claim, dict):
            claim = claim.get("id")
        if isinstance(claim, str):
            platform.reads.claims.forget(claim)

    return forget


HANDLERS: tuple[tuple[str, str, Callable[[Platform], Handler]], ...] = (
    # Events committed unnumbered (customers, telemetry, stove problems) -> numbered.
    (EVENTS_WRITTEN, "sequencer numbers them", lambda p: p.events.events_written),
    # Event committed (numbered, fanned out to subscriptions) -> its webhook deliveries.
    (DELIVERIES_MADE, "dispatcher delivers", lambda p: p.events.deliveries_made),
    # Claim submitted -> the oracle evaluates it (approval: credential and mint with it).
    ("claim.submitted", "oracle evaluates", lambda p: p.oracle.claim_submitted),
    # API key revoked (here, or on another process through the relay) -> key cache forgotten.
    (API_KEYS_REVOKED, "key cache forgotten", lambda p: p.api_keys.revoked),
    # A domain changed or was deactivated -> telemetry forgets what it cached of it (and of
    # the twins it is a project or organisation of).
    ("domain.updated", "telemetry forgets it", _telemetry_forgets),
    ("domain.deactivated", "telemetry forgets it", _telemetry_forgets),
    # A claim evaluated, or credits minted for it -> its kept read answer is built again
    # (ReadModel: the answer is also checked against the claim's rows at every read; this
    # covers what the claim shows from elsewhere, in this process).
    ("claim.evaluated", "claim read forgotten", _claim_read_forgets),
    ("credits.minted", "claim read forgotten", _claim_read_forgets),
)


class Platform:
    """The composition root: each context is built by its own bootstrap from its own
    section of the settings; the attributes are what the interfaces use."""

    def __init__(self, settings: Settings) -> None:
        problems = settings.problems_for_production()
        if problems:
            raise RuntimeError("; ".join(problems))
        self.settings = settings
        # The bus hears of this platform's commits through its own session class.
        self.bus = Bus(CATALOGUE)
        session_class = self.bus.session_class()
        members_join(session_class)  # collection members with their collections' writes
        storage = build_storage(settings.storage, session_class)
        self.engine = storage.engine
        self.sessionmaker = sessions = storage.sessionmaker
        self.database = storage.database
        self.redis = storage.redis
        keys = load_keys(settings.security, settings.storage.data_dir, settings.environment)
        self.pin_cipher = keys.pin_cipher
        self.platform_key = keys.platform_key  # each use derives its own key from it (HKDF)
        self.events = EventsHub(
            sessions,
            settings.events,
            settings.webhooks,
            keys.platform_key,
            bus=self.bus,
            background=settings.server.background_workers_enabled,
        )
        bootstrap = settings.security.bootstrap_api_key
        registry = build_registry(
            sessions,
            settings.registry,
            issuer=keys.issuer,
            bootstrap_api_key=bootstrap.get_secret_value() if bootstrap else None,
            sequencer=self.events.sequencer,  # a batch numbers its own events
        )
        # The registry's services, under the names the interfaces use.
        self.ledger = registry.ledger
        self.protocols = registry.protocols
        self.domains = registry.domains
        self.governance = registry.governance
        self.credentials = registry.credentials
        self.credits = registry.credits
        self.claims = registry.claims
        self.collection_members = registry.collection_members
        self.stoves = registry.stoves
        self.idempotency = registry.idempotency
        self.api_keys = registry.api_keys
        self.device_tokens = registry.device_tokens
        self.customers = build_customers(sessions, settings.ussd, keys.pin_cipher)
        # Household surveys over USSD; an answered household size is a ledger write.
        self.surveys = build_surveys(sessions, settings.ussd, self.ledger, self.domains)
        telemetry = build_telemetry(
            settings.telemetry, storage, settings.storage, self.protocols, self.domains, self.bus
        )
        self.telemetry = telemetry.service
        self.stove_care = telemetry.stove_care
        self.summaries = SummaryService(sessions, telemetry.figures)  # dashboard figures
        # The console's long lists, a page at a time (stoves, households, claims, ...).
        self.lists = ProgrammeLists(sessions, settings.telemetry.offline_after_seconds)
        oracle = build_oracle(
            sessions,
            settings.oracle,
            self.claims,
            self.protocols,
            keys.issuer,
            self.ledger,
            settings.telemetry.evidence_retention_years,
            self.surveys,  # a period reads the sampled parameters the project's surveys fixed
            settings.registry.max_attachment_bytes,
            settings.telemetry.retention_days,  # no digest kept of a day about to be pruned
        )
        self.oracle = oracle.service
        self.day_digests = oracle.days
        self.monitoring = oracle.monitoring
        self.period_drafts = PeriodDrafts(self.sessionmaker, self.monitoring, settings.oracle)
        self.project_documents = oracle.documents  # PDDs, attachments, accreditation
        self.periods = oracle.workflow  # a monitoring period's verification workflow
        # The node's and the registry's hot reads, without an ORM session per request.
        self.reads = ReadModel(self)
        for topic, _, handler in HANDLERS:
            self.bus.on(topic, handler(self))
        # With Redis (several workers), the signals every process must hear cross over.
        self.relay = (
            Relay(
                self.bus,
                self.redis,
                f"{settings.storage.redis_key_prefix}bus",
                SHARED_SIGNALS,
            )
            if self.redis is not None
            else None
        )
        self.background: list[asyncio.Task[None]] = []
        self.mqtt: Any = None  # twinhub.telemetry.mqtt.MqttIngest when MQTT_URL is set
        self.started_at = time.monotonic()
        self._started = False

    async def start(self) -> None:
        """Migrate the schema and begin watching the database; safe to call twice."""
        if self._started:
            return
        self.bus.bind_loop()
        if self.relay is not None:
            await self.relay.start()
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
            self.background, self.mqtt = start_telemetry_work(
                self.settings.telemetry,
                self.telemetry,
                self.device_tokens,
                mqtt_client_id(
                    self.settings.telemetry,
                    self.settings.storage,
                    self.settings.server.worker_index,
                ),
            )
            if self.settings.oracle.enabled:
                self.background.append(asyncio.create_task(self.oracle.run(), name="oracle"))
                if self.settings.oracle.day_digests_days:
                    daily = self.day_digests.run(
                        self.settings.oracle.day_digests_interval_seconds,
                        self.settings.oracle.day_digests_days,
                    )
                    self.background.append(asyncio.create_task(daily, name="day-digests"))
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
        await self.governance.batches.stop()
        await self.events.stop()
        await self.period_drafts.stop()
        for task in self.background:
            task.cancel()
        await asyncio.gather(*self.background, return_exceptions=True)
        self.background = []
        await self.telemetry.live.stop()
        await self.reads.aclose()
        await self.database.stop()
        if self.relay is not None:
            await self.relay.stop()
        if self.redis is not None:
            await self.redis.aclose()
        await self.engine.dispose()
        self._started = False

    def uptime(self) -> float:
        return round(time.monotonic() - self.started_at, 3)
