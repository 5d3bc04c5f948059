"""Every environment variable twinhub reads, in one place, with defaults that run anywhere.

The defaults let `twinhub serve` start on a fresh machine: an SQLite file and a generated
development PIN key under `DATA_DIR`, sessions in process memory. Production
(`ENVIRONMENT=production`) refuses to start without the secrets it needs; see
`Settings.problems_for_production`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from pathlib import Path

from limits import RateLimitItem, parse
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

_HEX_KEY = re.compile(r"^[0-9a-fA-F]{64}$")
_METHOD_NAME = re.compile(
    r"^[A-Za-z_][A-Za-z0-9_.]*\.[A-Za-z_][A-Za-z0-9_]*/[A-Za-z_][A-Za-z0-9_]*$"
)
_ORIGIN = re.compile(r"^https?://[^/\s]+/?$")


@dataclass(frozen=True)
class WebhookSettings:
    """What webhook delivery needs to know (WEBHOOK_* variables), in one value."""

    timeout: float
    retry_horizon: float
    retry_base: float
    retry_max_delay: float
    concurrency: int
    concurrency_per_endpoint: int
    max_response_bytes: int
    poll_interval: float
    allow_private_networks: bool
    denied_hosts: frozenset[str]
    own_ports: frozenset[int]
    own_host: str


class Environment(StrEnum):
    development = "development"
    production = "production"
    test = "test"


class Settings(BaseSettings):
    """Read once at start; passed down explicitly, never imported as a global."""

    model_config = SettingsConfigDict(env_file=None, extra="ignore", frozen=True)

    environment: Environment = Field(
        Environment.development, description="Reported by the health records."
    )
    data_dir: Path = Field(
        Path("data"), description="Folder for the SQLite file and the development PIN key."
    )
    database_url: str | None = Field(
        None,
        description="postgresql://... or sqlite:///...; default: an SQLite file in DATA_DIR.",
    )
    database_connect_timeout_seconds: float = Field(3.0, gt=0)
    sqlite_cache_mib: int = Field(
        64, ge=2, le=4096, description="SQLite page cache per connection (memory map: 4x)."
    )
    database_health_interval_seconds: float = Field(
        2.0, gt=0, description="How often the database is probed between requests."
    )
    # -- ledger (group commit; docs/ledger.md) --
    ledger_max_batch: int = Field(
        256,
        ge=1,
        le=10_000,
        description="Most writes one ledger commit carries (queued writes share a commit).",
    )
    # -- governance: batch verification (README "Verified stoves only") --
    governance_batch_chunk: int = Field(
        1000,
        ge=1,
        le=10_000,
        description="Domains a batch verification proposal verifies per ledger write.",
    )
    governance_batch_retries: int = Field(
        3,
        ge=0,
        le=100,
        description="Retries of a failing chunk of a background batch execution before it "
        "is left for a manual execute.",
    )
    governance_batch_retry_seconds: float = Field(
        1.0, gt=0, le=3600, description="First back-off of a failing chunk; doubled after each."
    )
    redis_url: SecretStr | None = Field(
        None,
        description="When set, USSD and console sessions and rate-limit counters live in "
        "Redis, and the live telemetry streams carry every process's events.",
    )
    redis_key_prefix: str = Field(
        "twinhub:", description="Prefix of every Redis key twinhub writes."
    )

    host: str = Field("127.0.0.1", description="Interface the servers bind to.")
    port: int = Field(3000, ge=1, le=65535, description="USSD gateway port (the seed's PORT).")

    log_level: str = Field("info")
    log_format: str = Field("auto", pattern="^(auto|json|console)$")

    pin_encryption_key: SecretStr | None = Field(
        None, description="64 hex characters (AES-256); generated under DATA_DIR in development."
    )

    ussd_service_name: str = Field("twinhub", max_length=20)
    ussd_session_ttl_seconds: float = Field(
        120.0, gt=0, description="Inactivity after which a USSD session expires."
    )
    ussd_session_retention_seconds: float = Field(
        600.0,
        ge=0,
        description="How long an expired or ended session is remembered, to answer 'dial again'.",
    )
    ussd_max_sessions: int = Field(
        100_000, ge=10, description="Memory store cap; least recently used sessions go first."
    )
    ussd_lock_timeout_seconds: float = Field(
        5.0, gt=0, description="How long a request waits for another request of its session."
    )
    ussd_max_pin_attempts: int = Field(3, ge=1, le=10)
    ussd_max_body_bytes: int = Field(4096, ge=512)
    ussd_rate_limit: str = Field(
        "100/minute", description="Per client IP, in 'N/period' form; a bare N means per minute."
    )
    ussd_operator_token: SecretStr | None = Field(
        None, description="Bearer token for the debug and session-list endpoints."
    )
    trust_proxy_enabled: bool = Field(
        False, description="Take the client IP from X-Forwarded-For (behind a reverse proxy)."
    )
    trust_proxy_hops: int = Field(
        1, ge=1, description="Number of trusted proxies that appended to X-Forwarded-For."
    )
    metrics_enabled: bool = True

    registry_port: int = Field(8000, ge=1, le=65535, description="Registry API port.")
    twinhub_bootstrap_api_key: SecretStr | None = Field(
        None, description="An admin API key that exists from start (first use, tests)."
    )
    registry_max_body_bytes: int = Field(
        1_048_576, ge=1024, description="Larger registry request bodies are refused (413)."
    )
    registry_rate_limit: str = Field(
        "1200/minute", description="Per API key principal, in 'N/period' form (bare N: per minute)."
    )
    registry_page_size: int = Field(50, ge=1, le=1000, description="Default page size of lists.")
    registry_max_page_size: int = Field(
        500, ge=1, le=10_000, description="Largest page a client may ask for."
    )

    node_port: int = Field(9090, ge=0, le=65535, description="Chain node (gRPC) port.")
    gateway_port: int = Field(1317, ge=0, le=65535, description="Chain REST gateway port.")
    chain_id: str = Field(
        "twinhub-1",
        pattern=r"^[A-Za-z0-9._-]{1,50}$",
        description="The chain id the node reports (node info, block headers).",
    )
    node_answer_cache_mib: int = Field(
        32,
        ge=0,
        le=4096,
        description="Chain node: serialised answers kept per database version (0: none).",
    )
    node_one_batch: bool = Field(
        True,
        description="Chain node: send the height header, answer and status in one batch "
        "through grpc's internals (chain/node/one_batch.py; checked at start, grpc's public "
        "path when they differ); false: always the public path (a header send of its own).",
    )
    node_moniker: str = Field(
        "twinhub",
        pattern=r"^[A-Za-z0-9._ -]{1,70}$",
        description="The node's name in its node info.",
    )
    gateway_grpc_upstream: str | None = Field(
        None,
        pattern=r"^[^\s/]+:[0-9]{1,5}$",
        description="host:port of the node the gateway forwards to; default: a node started "
        "in the same process on NODE_PORT.",
    )
    gateway_routes_from: str = Field(
        "auto",
        pattern="^(auto|descriptors|reflection)$",
        description="Where the route table comes from: the compiled descriptors, the "
        "upstream's gRPC reflection, or auto (reflection when an upstream is given).",
    )
    gateway_route_prefix: str = Field(
        "ixo",
        pattern=r"^[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*$",
        description="First path segment(s) of the ixo routes (the protos say 'ixo').",
    )
    gateway_legacy_routes: bool = Field(
        False, description="Also serve the retired claims, config and amino-era routes."
    )
    gateway_disabled_methods: str = Field(
        "",
        description="Comma list of gRPC methods (pkg.Service/Method) answered 501.",
    )
    gateway_api_keys: SecretStr | None = Field(
        None,
        description="Comma list of bearer tokens; when set, every route needs one.",
    )
    gateway_cors_origins: str = Field(
        "", description="Comma list of origins browsers may call from; empty: none."
    )
    gateway_upstream_timeout_seconds: float = Field(
        5.0, gt=0, le=300, description="Deadline of each call to the node (504 beyond it)."
    )
    gateway_rate_limit: str = Field(
        "6000/minute", description="Per client IP, in 'N/period' form (bare N: per minute)."
    )

    credential_issuer_key: SecretStr | None = Field(
        None,
        description="64 hex characters: the Ed25519 seed that signs verifiable credentials; "
        "generated under DATA_DIR in development.",
    )
    compliance_group_members: str = Field(
        "",
        description="'did[=weight],...': the default compliance group made on start "
        "when none exists.",
    )
    compliance_group_threshold: str = Field(
        "absolute_percentage:0.51",
        description="'kind:value[:quorum]' of that group (absolute_count, "
        "absolute_percentage, threshold_quorum).",
    )
    compliance_group_voting_period_seconds: int = Field(7 * 86400, ge=60, le=366 * 86400)

    # -- operator console (/console on the registry port) -----------------------------------
    console_enabled: bool = Field(True, description="Serve the operator console at /console.")
    console_session_ttl_seconds: int = Field(
        8 * 3600, ge=60, le=7 * 86400, description="A console sign-in lasts this long."
    )
    console_max_sessions: int = Field(
        10_000,
        ge=10,
        description="Cap of console sessions in one process (memory store; Redis ones expire).",
    )
    console_ussd_url: str | None = Field(
        None,
        description="The USSD gateway's /api/ussd the console's phone simulator forwards to; "
        "default http://127.0.0.1:PORT/api/ussd.",
    )
    # -- hardening: request limits, database timeouts, lock-outs, processes ------------------
    graphql_max_body_bytes: int = Field(
        65_536, ge=1024, description="Larger /graphql request bodies are refused (413)."
    )
    graphql_max_depth: int = Field(10, ge=1, le=100, description="Deepest selection allowed.")
    graphql_max_tokens: int = Field(
        2_000,
        ge=100,
        le=1_000_000,
        description="Most lexical tokens one GraphQL document may hold.",
    )
    graphql_max_aliases: int = Field(20, ge=1, le=1000, description="Most aliases per document.")
    database_statement_timeout_seconds: float = Field(
        5.0, gt=0, le=600, description="Longest a single SQL statement may run."
    )
    database_pool_timeout_seconds: float = Field(
        3.0, gt=0, le=600, description="Longest a request waits for a free database connection."
    )
    database_retry_after_seconds: int = Field(
        5, ge=1, le=3600, description="Retry-After of the 503 answered while the database is down."
    )
    http_keep_alive_seconds: float = Field(
        75.0,
        gt=0,
        le=3600,
        description="How long an idle HTTP keep-alive connection stays open; longer than "
        "any client's or proxy's own idle timeout, so the client always closes first.",
    )
    registry_request_timeout_seconds: float = Field(
        8.0,
        gt=0,
        le=3600,
        description="Longest an API request may take before its answer starts: beyond it "
        "the work is cancelled and 503 answered (streams, once started, are not cut).",
    )
    ussd_lockout_seconds: float = Field(
        60.0, gt=0, description="First lock-out after USSD_MAX_PIN_ATTEMPTS wrong PINs."
    )
    ussd_lockout_max_seconds: float = Field(
        3600.0, gt=0, description="Longest lock-out; each further lock-out doubles, up to it."
    )
    ussd_phone_max_pin_attempts: int = Field(
        10,
        ge=1,
        le=1000,
        description="Wrong PINs from one phone (any account) before it is locked.",
    )
    api_key_failure_limit: str = Field(
        "20/minute", description="Failed API-key attempts per client IP before 429."
    )
    workers: str = Field(
        "1", pattern=r"^(auto|[1-9][0-9]{0,2})$", description="Processes of `twinhub serve`."
    )
    # -- telemetry (issue 12) ---------------------------------------------------------------
    telemetry_batch_size: int = Field(
        1000, ge=1, le=100_000, description="Most readings in one HTTP batch or MQTT message."
    )
    telemetry_future_skew_seconds: float = Field(
        300.0, ge=0, description="Readings timed further ahead than this are rejected."
    )
    telemetry_offline_after_seconds: float = Field(
        3600.0, gt=0, description="A twin with no reading for this long is shown offline."
    )
    telemetry_retention_days: int = Field(
        730, ge=0, description="Raw readings older than this are pruned (0: kept); rollups stay."
    )
    telemetry_rate_limit: str = Field(
        "600/minute", description="Telemetry requests/messages per device ('N/period')."
    )
    telemetry_prune_interval_seconds: float = Field(3600.0, gt=0)
    mqtt_url: SecretStr | None = Field(
        None, description="mqtt://[user:password@]host:port of the broker; unset: MQTT is off."
    )
    mqtt_topic_prefix: str = Field(
        "twinhub", pattern=r"^[^#+$\s][^#+\s]*$", description="Devices publish to <prefix>/<did>."
    )
    mqtt_shared_group: str = Field(
        "twinhub", pattern=r"^[A-Za-z0-9_-]{1,64}$", description="MQTT 5 shared subscription group."
    )
    mqtt_client_id: str = Field(
        "", max_length=64, description="Client id (empty: twinhub-<host>-<pid>)."
    )
    mqtt_qos: int = Field(1, ge=1, le=2, description="Subscription QoS (at least once).")
    mqtt_reconnect_max_seconds: float = Field(30.0, gt=0, description="Backoff ceiling.")
    mqtt_keepalive_seconds: int = Field(
        30,
        ge=1,
        le=65535,
        description="MQTT keep-alive asked for (a broker's Server Keep Alive overrides it); "
        "a broker silent for twice this long is taken as gone and reconnected to.",
    )

    support_contact: str = Field(
        "", max_length=40, description="Shown on the locked-account screen, e.g. a phone number."
    )
    # -- USSD languages (issue 17; see src/twinhub/ussd/i18n.py) ----------------------------
    ussd_default_language: str = Field(
        "en",
        max_length=16,
        description="Menu language of a phone with no remembered choice: en, fr, sw, ny, bem "
        "(an unknown code falls back to en).",
    )
    ussd_default_languages: str = Field(
        "",
        max_length=2000,
        description="Default language per service code, e.g. '*384*1#=en,*384*2#=sw'; "
        "codes not listed use USSD_DEFAULT_LANGUAGE.",
    )
    ussd_timezone: str = Field(
        "UTC",
        max_length=64,
        description="IANA zone of the households' clocks, for times on USSD screens "
        "(e.g. Africa/Nairobi).",
    )

    # -- Events and webhooks (see WebhookSettings) ----------------------------------------
    background_workers_enabled: bool = Field(
        True,
        description="Run background work in this process: the event sequencer, the webhook "
        "dispatcher, the telemetry pruner and offline watch, the MQTT subscriber (any number "
        "of processes may; they share the work safely).",
    )
    events_sequencer_interval_seconds: float = Field(
        0.5, gt=0, le=60, description="How often to look for events other processes committed."
    )
    events_stream_heartbeat_seconds: float = Field(
        15.0, gt=0, le=300, description="Comment line sent on an idle event stream."
    )
    events_retention_days: int = Field(
        90,
        ge=0,
        description="Events older than this are pruned (0: kept for ever), never while a "
        "webhook delivery of a live subscription is pending or failed (replayable).",
    )
    events_prune_interval_seconds: float = Field(
        3600.0, gt=0, description="How often the event pruner runs."
    )
    webhook_timeout_seconds: float = Field(
        10.0, gt=0, le=120, description="Whole-request deadline of one delivery attempt."
    )
    webhook_retry_horizon_seconds: float = Field(
        86_400.0, gt=0, description="How long a delivery is retried before it is marked failed."
    )
    webhook_retry_base_seconds: float = Field(
        5.0, gt=0, description="First back-off; doubled after each failure (with jitter)."
    )
    webhook_retry_max_delay_seconds: float = Field(
        3600.0, gt=0, description="Longest wait between two attempts."
    )
    webhook_concurrency: int = Field(
        16, ge=1, le=1000, description="Deliveries in flight at once in one process."
    )
    webhook_concurrency_per_endpoint: int = Field(
        2,
        ge=1,
        le=100,
        description="In flight at once for one subscription (one slow "
        "receiver never takes every slot).",
    )
    webhook_max_response_bytes: int = Field(
        65_536, ge=0, description="Response bodies are read up to this size, then cut off."
    )
    webhook_poll_interval_seconds: float = Field(
        1.0, gt=0, le=60, description="How often the dispatcher looks for due deliveries."
    )
    webhook_allow_private_networks: bool = Field(
        False,
        description="Allow webhook URLs on loopback, private, link-local or reserved "
        "addresses (tests, closed networks); never for the platform's own ports.",
    )
    webhook_denied_hosts: str = Field(
        "",
        description="Comma list of host names webhooks may never target (e.g. the "
        "platform's public name).",
    )

    # -- Oracle (issue 18) ------------------------------------------------------------------
    claims_evaluation_batch_max: int = Field(
        1000,
        ge=1,
        le=10_000,
        description="Most evaluations one POST /v1/claims/evaluations carries (one ledger "
        "write: larger batches hold the write turn longer).",
    )
    claims_evaluation_linger_seconds: float = Field(
        0.004,
        ge=0,
        le=0.1,
        description="How long concurrent single evaluations (POST /v1/claims/{id}/evaluations) "
        "wait, at most, for the callers of the batch before them to come back and join the "
        "next batch (services/coalesce.py); a lone evaluation never waits. 0 turns it off.",
    )
    oracle_enabled: bool = Field(
        True,
        description="Run the claim oracle with the background work (`twinhub serve oracle` "
        "runs it alone); any number of processes may, leases keep them from doubling work.",
    )
    oracle_poll_seconds: float = Field(
        1.0, gt=0, le=60, description="How often the oracle looks for pending claims."
    )
    oracle_lease_seconds: float = Field(
        60.0,
        gt=0,
        le=3600,
        description="How long one oracle holds a claim it evaluates; a "
        "crashed oracle's claims are taken over when this runs out.",
    )
    oracle_max_attempts: int = Field(
        3,
        ge=1,
        le=100,
        description="Evaluations of one claim cut short (a crash) before the "
        "oracle flags it for a person instead of trying again.",
    )
    oracle_batch: int = Field(50, ge=1, le=1000, description="Claims leased per look.")

    @field_validator(
        "ussd_rate_limit",
        "registry_rate_limit",
        "gateway_rate_limit",
        "api_key_failure_limit",
        "telemetry_rate_limit",
    )
    @classmethod
    def _rate_limit_parses(cls, value: str) -> str:
        value = value.strip()
        if value.isdigit():
            value = f"{value}/minute"
        parse(value)  # raises ValueError with a clear message when malformed
        return value

    @field_validator("redis_url", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        """`REDIS_URL=` (empty) means no Redis, as leaving it out does."""
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("gateway_disabled_methods")
    @classmethod
    def _methods_parse(cls, value: str) -> str:
        for name in split_list(value):
            if not _METHOD_NAME.match(name):
                raise ValueError(f"expected 'package.Service/Method', got {name!r}")
        return value

    @field_validator("gateway_cors_origins")
    @classmethod
    def _origins_parse(cls, value: str) -> str:
        for origin in split_list(value):
            if origin != "*" and not _ORIGIN.match(origin):
                raise ValueError(f"expected 'scheme://host[:port]', got {origin!r}")
        return value

    @field_validator("pin_encryption_key", "credential_issuer_key")
    @classmethod
    def _key_is_hex(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not _HEX_KEY.match(value.get_secret_value()):
            raise ValueError("the key must be 64 hexadecimal characters (256 bits)")
        return value

    @field_validator("compliance_group_members")
    @classmethod
    def _members_parse(cls, value: str) -> str:
        parse_members(value)
        return value

    @field_validator("compliance_group_threshold")
    @classmethod
    def _threshold_parses(cls, value: str) -> str:
        parse_threshold(value)
        return value

    @cached_property
    def compliance_members(self) -> dict[str, int]:
        return parse_members(self.compliance_group_members)

    @cached_property
    def compliance_threshold(self) -> tuple[str, float, float | None]:
        return parse_threshold(self.compliance_group_threshold)

    @cached_property
    def rate_limit(self) -> RateLimitItem:
        return parse(self.ussd_rate_limit)

    @cached_property
    def registry_rate_limit_item(self) -> RateLimitItem:
        return parse(self.registry_rate_limit)

    @cached_property
    def api_key_failure_limit_item(self) -> RateLimitItem:
        return parse(self.api_key_failure_limit)

    @cached_property
    def telemetry_rate_limit_item(self) -> RateLimitItem:
        return parse(self.telemetry_rate_limit)

    @cached_property
    def gateway_rate_limit_item(self) -> RateLimitItem:
        return parse(self.gateway_rate_limit)

    @cached_property
    def gateway_disabled(self) -> frozenset[str]:
        return frozenset(split_list(self.gateway_disabled_methods))

    @cached_property
    def gateway_origins(self) -> frozenset[str]:
        return frozenset(o.rstrip("/") for o in split_list(self.gateway_cors_origins))

    @cached_property
    def gateway_tokens(self) -> tuple[bytes, ...]:
        keys = self.gateway_api_keys.get_secret_value() if self.gateway_api_keys else ""
        return tuple(key.encode() for key in split_list(keys))

    @cached_property
    def webhooks(self) -> WebhookSettings:
        """The webhook settings as one value object, for the dispatcher and URL policy."""
        return WebhookSettings(
            timeout=self.webhook_timeout_seconds,
            retry_horizon=self.webhook_retry_horizon_seconds,
            retry_base=self.webhook_retry_base_seconds,
            retry_max_delay=self.webhook_retry_max_delay_seconds,
            concurrency=self.webhook_concurrency,
            concurrency_per_endpoint=self.webhook_concurrency_per_endpoint,
            max_response_bytes=self.webhook_max_response_bytes,
            poll_interval=self.webhook_poll_interval_seconds,
            allow_private_networks=self.webhook_allow_private_networks,
            denied_hosts=frozenset(h.lower() for h in split_list(self.webhook_denied_hosts)),
            own_ports=frozenset({self.port, self.registry_port, self.gateway_port, self.node_port}),
            own_host=self.host,
        )

    @property
    def console_ussd_endpoint(self) -> str:
        return self.console_ussd_url or f"http://127.0.0.1:{self.port}/api/ussd"

    @property
    def resolved_database_url(self) -> str:
        """The async SQLAlchemy URL, whatever spelling the operator used."""
        url = self.database_url or f"sqlite:///{(self.data_dir / 'twinhub.db').as_posix()}"
        return normalise_database_url(url)

    def problems_for_production(self) -> list[str]:
        """What stops this configuration from running in production (empty when fine)."""
        problems = []
        if self.environment is Environment.production and self.pin_encryption_key is None:
            problems.append("PIN_ENCRYPTION_KEY is required in production (64 hex characters)")
        if self.environment is Environment.production and self.credential_issuer_key is None:
            problems.append("CREDENTIAL_ISSUER_KEY is required in production (64 hex characters)")
        bootstrap = self.twinhub_bootstrap_api_key
        if bootstrap is not None and len(bootstrap.get_secret_value()) < 32:
            problems.append("TWINHUB_BOOTSTRAP_API_KEY must be at least 32 characters")
        return problems


def split_list(text: str) -> list[str]:
    """'a, b,,c' -> ['a', 'b', 'c']: the comma lists of the settings."""
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_members(text: str) -> dict[str, int]:
    """'did:ixo:org/a=2, did:ixo:org/b' -> {did: weight}; weight 1 when not given."""
    members: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        did, _, weight = item.partition("=")
        if not did.startswith("did:") or (weight and not weight.strip().isdigit()):
            raise ValueError(f"expected 'did[=weight]', got {item!r}")
        members[did.strip()] = members.get(did.strip(), 0) + int(weight or 1)
    if any(w < 1 for w in members.values()):
        raise ValueError("weights are whole numbers of at least 1")
    return members


def parse_threshold(text: str) -> tuple[str, float, float | None]:
    """'absolute_percentage:0.51' or 'threshold_quorum:0.5:0.3' -> (kind, value, quorum)."""
    parts = text.split(":")
    kinds = ("absolute_count", "absolute_percentage", "threshold_quorum")
    try:
        if parts[0] not in kinds or len(parts) != (3 if parts[0] == kinds[2] else 2):
            raise ValueError
        return parts[0], float(parts[1]), float(parts[2]) if len(parts) == 3 else None
    except ValueError:
        raise ValueError(
            f"expected 'kind:value' or 'threshold_quorum:value:quorum' (kinds: {kinds})"
        ) from None


def normalise_database_url(url: str) -> str:
    """Map the plain driver names operators write to the async drivers twinhub uses."""
    for plain, driver in (
        ("postgresql://", "postgresql+asyncpg://"),
        ("postgres://", "postgresql+asyncpg://"),
        ("postgresql+psycopg://", "postgresql+asyncpg://"),
        ("sqlite://", "sqlite+aiosqlite://"),
    ):
        if url.startswith(plain):
            return driver + url[len(plain) :]
    return url
