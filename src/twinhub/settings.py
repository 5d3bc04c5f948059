"""Every environment variable twinhub reads, in one place, with defaults that run anywhere.

The settings are grouped by context (storage, security, registry, USSD, telemetry, oracle,
events, chain, console, ...): each context's services receive only their own group. The
variable names stay flat (`DATABASE_URL`, `USSD_RATE_LIMIT`, ...): each nested field names
its variable in `validation_alias`, and `Settings` routes the flat names (from the
environment, a dotenv file or keyword arguments) into the groups.

The defaults let `twinhub serve` start on a fresh machine: an SQLite file and a generated
development PIN key under `DATA_DIR`, sessions in process memory. Production
(`ENVIRONMENT=production`) refuses to start without the secrets it needs; see
`Settings.problems_for_production`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any

from limits import RateLimitItem, parse
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

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
    disable_after: float
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


def checked_rate_limit(value: str) -> str:
    """'N/period' checked; a bare N means per minute."""
    value = value.strip()
    if value.isdigit():
        value = f"{value}/minute"
    parse(value)  # raises ValueError with a clear message when malformed
    return value


RateLimit = Annotated[str, AfterValidator(checked_rate_limit)]
"""A rate limit setting ('N/period'), checked as it is read."""


class _Section(BaseModel):
    """One context's settings: read-only, each field named by its environment variable."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True
    )


class StorageSettings(_Section):
    """Where data lives: the database, the data folder, Redis."""

    data_dir: Path = Field(
        Path("data"),
        validation_alias="DATA_DIR",
        description="Folder for the SQLite file and the development PIN key.",
    )
    database_url: str | None = Field(
        None,
        validation_alias="DATABASE_URL",
        description="`postgresql://user:pass@host/db` (asyncpg) or `sqlite:///path`; "
        "unset: an SQLite file in DATA_DIR.",
    )
    connect_timeout_seconds: float = Field(
        3.0,
        validation_alias="DATABASE_CONNECT_TIMEOUT_SECONDS",
        gt=0,
        description="Connect/probe timeout.",
    )
    statement_timeout_seconds: float = Field(
        5.0,
        validation_alias="DATABASE_STATEMENT_TIMEOUT_SECONDS",
        gt=0,
        le=600,
        description=(
            "Longest one SQL statement may run (PostgreSQL: the server's `statement_timeout` "
            "and the client's own deadline, so a hung connection is given up; SQLite: the "
            "longest wait for another writer's lock, and a running statement is interrupted "
            "past it)."
        ),
    )
    pool_timeout_seconds: float = Field(
        3.0,
        validation_alias="DATABASE_POOL_TIMEOUT_SECONDS",
        gt=0,
        le=600,
        description="Longest a request waits for a free pooled connection.",
    )
    ping_idle_seconds: float = Field(
        1.0,
        validation_alias="DATABASE_PING_IDLE_SECONDS",
        ge=0,
        le=3600,
        description=(
            "A pooled PostgreSQL connection idle longer than this is pinged before use (a "
            "dead one is replaced); one in steady use is not (0: ping on every checkout)."
        ),
    )
    retry_after_seconds: int = Field(
        5,
        validation_alias="DATABASE_RETRY_AFTER_SECONDS",
        ge=1,
        le=3600,
        description="`Retry-After` of the registry's 503 while the database is down.",
    )
    health_interval_seconds: float = Field(
        2.0,
        validation_alias="DATABASE_HEALTH_INTERVAL_SECONDS",
        gt=0,
        description="How often the database is probed between requests.",
    )
    sqlite_cache_mib: int = Field(
        64,
        validation_alias="SQLITE_CACHE_MIB",
        ge=2,
        le=4096,
        description=(
            "SQLite page cache per connection (and a memory map of 4x that); SQLite's own "
            "default is 2 MiB."
        ),
    )
    redis_url: SecretStr | None = Field(
        None,
        validation_alias="REDIS_URL",
        description=(
            "When set, USSD sessions, console sessions and rate-limit counters live in Redis "
            "(shared by processes), and the live telemetry streams carry every process's "
            "events (Redis pub/sub)."
        ),
    )
    redis_key_prefix: str = Field(
        "twinhub:",
        validation_alias="REDIS_KEY_PREFIX",
        description="Prefix of every Redis key twinhub writes.",
    )

    @field_validator("redis_url", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        """`REDIS_URL=` (empty) means no Redis, as leaving it out does."""
        return None if isinstance(value, str) and not value.strip() else value

    @property
    def resolved_database_url(self) -> str:
        """The async SQLAlchemy URL, whatever spelling the operator used."""
        url = self.database_url or f"sqlite:///{(self.data_dir / 'twinhub.db').as_posix()}"
        return normalise_database_url(url)

    @property
    def redis_address(self) -> str | None:
        """REDIS_URL in clear, or None: what the rate limiters and session stores connect to."""
        return self.redis_url.get_secret_value() if self.redis_url else None


class ServerSettings(_Section):
    """How the processes run: the interface they bind, how many, which do background work."""

    host: str = Field(
        "127.0.0.1",
        validation_alias="HOST",
        description="Interface the servers bind to (`0.0.0.0` in a container).",
    )
    workers: str = Field(
        "1",
        validation_alias="WORKERS",
        pattern=r"^(auto|[1-9][0-9]{0,2})$",
        description=(
            "Processes of each kind `twinhub serve` runs (`auto`: one per core); more than 1 "
            "needs `REDIS_URL`."
        ),
    )
    worker_index: int = Field(
        0,
        validation_alias="WORKER_INDEX",
        ge=0,
        le=999,
        description=(
            "This process's number among the workers of its kind (0 to WORKERS-1); `twinhub "
            "serve` sets it for each worker. It names the worker's MQTT session, so a "
            "restarted worker resumes its own: give each process its own number when you run "
            "`twinhub serve api` under a process manager yourself."
        ),
    )
    http_keep_alive_seconds: float = Field(
        75.0,
        validation_alias="HTTP_KEEP_ALIVE_SECONDS",
        gt=0,
        le=3600,
        description=(
            "How long every HTTP port keeps an idle keep-alive connection open; keep it "
            "longer than the idle timeout of the USSD aggregator's or proxy's connection "
            "pool, so the client always closes first and no request meets a socket the server"
            " just closed."
        ),
    )
    http_header_timeout_seconds: float = Field(
        10.0,
        validation_alias="HTTP_HEADER_TIMEOUT_SECONDS",
        gt=0,
        le=600,
        description=(
            "Every HTTP port: a request's headers must have arrived this long after its "
            "first byte (or after the connection opened); a client still sending them is "
            "answered 408 and closed, so clients that trickle headers cannot hold "
            "connections."
        ),
    )
    http_max_connections_per_client: int = Field(
        100,
        validation_alias="HTTP_MAX_CONNECTIONS_PER_CLIENT",
        ge=0,
        le=100_000,
        description=(
            "Every HTTP port: open connections one client address may hold on one process "
            "(`0`: no cap); one more is answered 503 and closed. Counted by the connecting "
            "address: behind a reverse proxy or a USSD aggregator's pool every request comes "
            "from its few addresses, so raise it above their connection pools (or set 0 and "
            "let the proxy cap per client)."
        ),
    )
    background_workers_enabled: bool = Field(
        True,
        validation_alias="BACKGROUND_WORKERS_ENABLED",
        description=(
            "Run the background work in this process: event sequencer, webhook dispatcher, "
            "telemetry retention pruner, offline watch and MQTT subscriber (any number of "
            "processes may; they share the work safely). `twinhub serve ussd` never runs "
            "them, so the phones' process does no background work."
        ),
    )


class ObservabilitySettings(_Section):
    """Logs and metrics."""

    log_level: str = Field(
        "info", validation_alias="LOG_LEVEL", description="`debug`, `info`, `warning`, `error`."
    )
    log_format: str = Field(
        "auto",
        validation_alias="LOG_FORMAT",
        pattern="^(auto|json|console)$",
        description="`json`, `console`, or `auto` (console on a terminal, JSON otherwise).",
    )
    metrics_enabled: bool = Field(
        True,
        validation_alias="METRICS_ENABLED",
        description="Serve Prometheus metrics at `/metrics`.",
    )


class SecuritySettings(_Section):
    """Keys, secrets and who is trusted to say where a request came from."""

    pin_encryption_key: SecretStr | None = Field(
        None,
        validation_alias="PIN_ENCRYPTION_KEY",
        description=(
            '**prod** 64 hex characters (AES-256); `python -c "import secrets; '
            'print(secrets.token_hex(32))"`. Unset outside production: generated once '
            "under DATA_DIR."
        ),
    )
    credential_issuer_key: SecretStr | None = Field(
        None,
        validation_alias="CREDENTIAL_ISSUER_KEY",
        description=(
            "**prod** 64 hex characters: the Ed25519 seed that signs verifiable credentials "
            "(the issuer is the `did:key` of its public key). Unset outside production: "
            "generated once under DATA_DIR."
        ),
    )
    bootstrap_api_key: SecretStr | None = Field(
        None,
        validation_alias="TWINHUB_BOOTSTRAP_API_KEY",
        description=(
            "An admin API key that exists from start (first use, tests); at least 32 characters."
        ),
    )
    api_key_failure_limit: RateLimit = Field(
        "20/minute",
        validation_alias="API_KEY_FAILURE_LIMIT",
        description=(
            "Failed API-key attempts per client IP (registry); 429 with `Retry-After` beyond it."
        ),
    )
    trust_proxy_enabled: bool = Field(
        False,
        validation_alias="TRUST_PROXY_ENABLED",
        description="Take the client IP from `X-Forwarded-For` (set it behind a reverse proxy).",
    )
    trust_proxy_hops: int = Field(
        1,
        validation_alias="TRUST_PROXY_HOPS",
        ge=1,
        description="How many trusted proxies appended to `X-Forwarded-For`.",
    )

    @field_validator("pin_encryption_key", "credential_issuer_key")
    @classmethod
    def _key_is_hex(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not _HEX_KEY.match(value.get_secret_value()):
            raise ValueError("the key must be 64 hexadecimal characters (256 bits)")
        return value

    @cached_property
    def api_key_failure_limit_item(self) -> RateLimitItem:
        return parse(self.api_key_failure_limit)


class RegistrySettings(_Section):
    """The registry API (REST and GraphQL), its ledger writes, claim evaluations and governance."""

    port: int = Field(
        8000, validation_alias="REGISTRY_PORT", ge=1, le=65535, description="Registry API port."
    )
    max_body_bytes: int = Field(
        1_048_576,
        validation_alias="REGISTRY_MAX_BODY_BYTES",
        ge=1024,
        description="Larger registry request bodies get 413.",
    )
    max_attachment_bytes: int = Field(
        10_485_760,
        validation_alias="REGISTRY_MAX_ATTACHMENT_BYTES",
        ge=1024,
        le=1_073_741_824,
        description=(
            "Largest evidence attachment (`POST /v1/attachments`: test certificates, "
            "calibration records), stored whole in the database; larger ones get 413. "
            "Applies to that route only; every other body keeps `REGISTRY_MAX_BODY_BYTES`."
        ),
    )
    rate_limit: RateLimit = Field(
        "1200/minute",
        validation_alias="REGISTRY_RATE_LIMIT",
        description=(
            "Per API key principal (all its keys together); 429 with `Retry-After` beyond it;"
            " shared through Redis when `REDIS_URL` is set."
        ),
    )
    certificate_rate_limit: RateLimit = Field(
        "60/minute",
        validation_alias="REGISTRY_CERTIFICATE_RATE_LIMIT",
        description=(
            "Per client IP (see `TRUST_PROXY_ENABLED`) on the public retirement-certificate "
            "routes, which need no API key; 429 with `Retry-After` beyond it; shared "
            "through Redis when `REDIS_URL` is set."
        ),
    )
    page_size: int = Field(
        50,
        validation_alias="REGISTRY_PAGE_SIZE",
        ge=1,
        le=1000,
        description="Default page size of registry lists.",
    )
    max_page_size: int = Field(
        500,
        validation_alias="REGISTRY_MAX_PAGE_SIZE",
        ge=1,
        le=10_000,
        description="Largest page a client may ask for (`limit`).",
    )
    request_timeout_seconds: float = Field(
        8.0,
        validation_alias="REGISTRY_REQUEST_TIMEOUT_SECONDS",
        gt=0,
        le=3600,
        description=(
            "Longest a registry request (`/v1/`, `/graphql`) may take before its answer "
            "starts; past it a JSON 503 with `Retry-After` is answered and the work is "
            "cancelled, whatever the cause (a hung database included), except a write already "
            "in the ledger's turn (see `REGISTRY_WRITE_GRACE_SECONDS`). Event streams, once "
            "started, are not cut."
        ),
    )
    write_grace_seconds: float = Field(
        60.0,
        validation_alias="REGISTRY_WRITE_GRACE_SECONDS",
        gt=0,
        le=3600,
        description=(
            "A request past its deadline while its write holds the ledger's turn is answered "
            "503 on time but not cancelled (the writes sharing its database transaction would "
            "fail with it): it ends by itself, or is cancelled this long after the deadline."
        ),
    )
    graphql_max_body_bytes: int = Field(
        65_536,
        validation_alias="GRAPHQL_MAX_BODY_BYTES",
        ge=1024,
        description="Larger `/graphql` bodies get 413.",
    )
    graphql_max_tokens: int = Field(
        2_000,
        validation_alias="GRAPHQL_MAX_TOKENS",
        ge=100,
        le=1_000_000,
        description="A GraphQL document with more lexical tokens is refused while parsed.",
    )
    graphql_max_depth: int = Field(
        10,
        validation_alias="GRAPHQL_MAX_DEPTH",
        ge=1,
        le=100,
        description="Deepest selection allowed (introspection is bounded by tokens).",
    )
    graphql_max_aliases: int = Field(
        20,
        validation_alias="GRAPHQL_MAX_ALIASES",
        ge=1,
        le=1000,
        description="Most aliases in one document.",
    )
    governance_batch_chunk: int = Field(
        1000,
        validation_alias="GOVERNANCE_BATCH_CHUNK",
        ge=1,
        le=10_000,
        description=(
            "Domains a batch verification proposal verifies per ledger write (each chunk "
            "committed with its progress)."
        ),
    )
    governance_batch_retries: int = Field(
        3,
        validation_alias="GOVERNANCE_BATCH_RETRIES",
        ge=0,
        le=100,
        description=(
            "Retries of a failing chunk of a background batch execution (with doubling "
            "back-off) before it is left, part-done, for a manual execute (a warning is "
            "logged)."
        ),
    )
    governance_batch_retry_seconds: float = Field(
        1.0,
        validation_alias="GOVERNANCE_BATCH_RETRY_SECONDS",
        gt=0,
        le=3600,
        description="First back-off of a failing batch chunk; doubled after each failure.",
    )
    compliance_group_members: str = Field(
        "",
        validation_alias="COMPLIANCE_GROUP_MEMBERS",
        description=(
            "`did[=weight],...`: on start, the default compliance group "
            "`did:ixo:group/compliance` is made with these members unless a default group "
            "exists."
        ),
    )
    compliance_group_threshold: str = Field(
        "absolute_percentage:0.51",
        validation_alias="COMPLIANCE_GROUP_THRESHOLD",
        description=(
            "That group's rule: `absolute_count:N`, `absolute_percentage:F` or "
            "`threshold_quorum:F:Q`."
        ),
    )
    compliance_group_voting_period_seconds: int = Field(
        7 * 86400,
        validation_alias="COMPLIANCE_GROUP_VOTING_PERIOD_SECONDS",
        ge=60,
        le=366 * 86400,
        description="That group's voting period.",
    )

    ledger_max_batch: int = Field(
        256,
        validation_alias="LEDGER_MAX_BATCH",
        ge=1,
        le=10_000,
        description=(
            "Most writes one ledger commit carries: writes queued behind each other share one"
            " database transaction and commit (group commit, `docs/ledger.md`)."
        ),
    )
    claims_evaluation_batch_max: int = Field(
        1000,
        validation_alias="CLAIMS_EVALUATION_BATCH_MAX",
        ge=1,
        le=10_000,
        description=(
            "Most evaluations one `POST /v1/claims/evaluations` carries (413 beyond it); the "
            "list is one ledger write, so larger lists hold the write turn longer."
        ),
    )
    claims_evaluation_linger_seconds: float = Field(
        0.004,
        validation_alias="CLAIMS_EVALUATION_LINGER_SECONDS",
        ge=0,
        le=0.1,
        description=(
            "How long, at most, concurrent single evaluations (and claim submissions) wait "
            "for the callers of the batch before them to come back and join the next batch (a "
            "lone call never waits; 0 turns it off; at most 0.1)."
        ),
    )

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
    def rate_limit_item(self) -> RateLimitItem:
        return parse(self.rate_limit)

    @cached_property
    def certificate_rate_limit_item(self) -> RateLimitItem:
        return parse(self.certificate_rate_limit)

    @cached_property
    def compliance_members(self) -> dict[str, int]:
        return parse_members(self.compliance_group_members)

    @cached_property
    def compliance_threshold(self) -> tuple[str, float, float | None]:
        return parse_threshold(self.compliance_group_threshold)


class UssdSettings(_Section):
    """The USSD gateway: sessions, PIN lock-outs, languages."""

    port: int = Field(
        3000, validation_alias="PORT", ge=1, le=65535, description="USSD gateway port."
    )
    service_name: str = Field(
        "twinhub",
        validation_alias="USSD_SERVICE_NAME",
        max_length=20,
        description="Name on the welcome and goodbye screens (at most 20 characters).",
    )
    session_ttl_seconds: float = Field(
        120.0,
        validation_alias="USSD_SESSION_TTL_SECONDS",
        gt=0,
        description="Inactivity after which a session expires.",
    )
    session_retention_seconds: float = Field(
        600.0,
        validation_alias="USSD_SESSION_RETENTION_SECONDS",
        ge=0,
        description=(
            'How long an expired or ended session is remembered, to answer "dial again" and '
            "replay retries."
        ),
    )
    max_sessions: int = Field(
        100_000,
        validation_alias="USSD_MAX_SESSIONS",
        ge=10,
        description="Cap of the in-memory store (oldest-touched records go first).",
    )
    lock_timeout_seconds: float = Field(
        5.0,
        validation_alias="USSD_LOCK_TIMEOUT_SECONDS",
        gt=0,
        description="How long a request waits for another request of the same session.",
    )
    max_pin_attempts: int = Field(
        3,
        validation_alias="USSD_MAX_PIN_ATTEMPTS",
        ge=1,
        le=10,
        description=(
            "Wrong PINs in a row before an account is locked (counted apart for its own phone"
            " and for other phones)."
        ),
    )
    phone_max_pin_attempts: int = Field(
        10,
        validation_alias="USSD_PHONE_MAX_PIN_ATTEMPTS",
        ge=1,
        le=1000,
        description=(
            "Wrong PINs from one phone, at any account or unknown IDs, before the phone is locked."
        ),
    )
    lockout_seconds: float = Field(
        60.0,
        validation_alias="USSD_LOCKOUT_SECONDS",
        gt=0,
        description="Length of a first lock-out; each further one of the same key doubles.",
    )
    lockout_max_seconds: float = Field(
        3600.0, validation_alias="USSD_LOCKOUT_MAX_SECONDS", gt=0, description="Longest lock-out."
    )
    max_body_bytes: int = Field(
        4096,
        validation_alias="USSD_MAX_BODY_BYTES",
        ge=512,
        description="Larger request bodies are invalid input.",
    )
    rate_limit: RateLimit = Field(
        "100/minute",
        validation_alias="USSD_RATE_LIMIT",
        description="Per client IP on `/api/ussd*`; `N/second|minute|hour` or a bare N per minute.",
    )
    operator_token: SecretStr | None = Field(
        None,
        validation_alias="USSD_OPERATOR_TOKEN",
        description="Bearer token for the debug and session-list endpoints (see below).",
    )
    support_contact: str = Field(
        "",
        validation_alias="SUPPORT_CONTACT",
        max_length=40,
        description="Shown on the locked-account screen, e.g. a helpline number.",
    )
    default_language: str = Field(
        "en",
        validation_alias="USSD_DEFAULT_LANGUAGE",
        max_length=16,
        description=(
            "Menu language of a phone with no remembered choice: `en`, `fr`, `sw`, `ny`, "
            "`bem` (anything else: `en`)."
        ),
    )
    default_languages: str = Field(
        "",
        validation_alias="USSD_DEFAULT_LANGUAGES",
        max_length=2000,
        description=(
            "Default language per service code, e.g. `*384*1#=en,*384*2#=sw`; unknown entries"
            " are logged and ignored."
        ),
    )
    timezone: str = Field(
        "UTC",
        validation_alias="USSD_TIMEZONE",
        max_length=64,
        description=(
            "IANA zone of the households' clocks, for times on USSD screens (e.g. "
            "`Africa/Nairobi`)."
        ),
    )
    survey_confidence: float = Field(
        0.9,
        validation_alias="USSD_SURVEY_CONFIDENCE",
        gt=0,
        lt=1,
        description="A new survey's confidence level unless it names one (90/10: 0.9).",
    )
    survey_precision: float = Field(
        0.1,
        validation_alias="USSD_SURVEY_PRECISION",
        gt=0,
        lt=1,
        description="A new survey's target relative precision unless it names one (90/10: 0.1).",
    )
    survey_expected_cv: float = Field(
        0.5,
        validation_alias="USSD_SURVEY_EXPECTED_CV",
        gt=0,
        le=10,
        description=(
            "Expected coefficient of variation of household sizes, which sizes a sample when "
            "a survey names no size."
        ),
    )
    survey_household_min: int = Field(
        1,
        validation_alias="USSD_SURVEY_HOUSEHOLD_MIN",
        ge=1,
        le=999,
        description="Fewest people a household may answer eat from its stove.",
    )
    survey_household_max: int = Field(
        30,
        validation_alias="USSD_SURVEY_HOUSEHOLD_MAX",
        ge=1,
        le=999,
        description="Most people a household may answer eat from its stove.",
    )
    survey_max_sample: int = Field(
        5000,
        validation_alias="USSD_SURVEY_MAX_SAMPLE",
        ge=2,
        description="Largest sample a survey draws.",
    )
    survey_refresh_seconds: float = Field(
        30.0,
        validation_alias="USSD_SURVEY_REFRESH_SECONDS",
        ge=0,
        description=(
            "How long a process trusts its list of phones a survey asks; a survey drawn in "
            "another process reaches new USSD sessions within this time."
        ),
    )

    @cached_property
    def rate_limit_item(self) -> RateLimitItem:
        return parse(self.rate_limit)


class TelemetrySettings(_Section):
    """Telemetry ingestion over HTTP and MQTT, retention and the offline watch."""

    batch_size: int = Field(
        1000,
        validation_alias="TELEMETRY_BATCH_SIZE",
        ge=1,
        le=100_000,
        description="Most readings in one HTTP batch or MQTT message (413 beyond it).",
    )
    future_skew_seconds: float = Field(
        300.0,
        validation_alias="TELEMETRY_FUTURE_SKEW_SECONDS",
        ge=0,
        description=(
            "Readings timed further ahead of their receipt than this are quarantined with "
            "their reason (stored, listed, never rolled up or credited)."
        ),
    )
    past_skew_days: float = Field(
        730.0,
        validation_alias="TELEMETRY_PAST_SKEW_DAYS",
        ge=0,
        description=(
            "Readings timed further before their receipt than this are quarantined (`0`: no "
            "limit); a device buffering offline for months stays within it, a clock reset to "
            "1970 does not. Readings before the twin's `validFrom` (its enrolment) are "
            "quarantined whatever this says."
        ),
    )
    offline_after_seconds: float = Field(
        3600.0,
        validation_alias="TELEMETRY_OFFLINE_AFTER_SECONDS",
        gt=0,
        description="A twin with no reading for this long shows `online: false`.",
    )
    retention_days: int = Field(
        730,
        validation_alias="TELEMETRY_RETENTION_DAYS",
        ge=0,
        description="Raw readings older than this are pruned (`0`: kept forever); rollups stay.",
    )
    evidence_retention_years: int = Field(
        2,
        validation_alias="EVIDENCE_RETENTION_YEARS",
        ge=0,
        le=100,
        description=(
            "Readings and day rollups behind a submitted or issued monitoring period are kept "
            "this many years after the end of the project's crediting period, whatever "
            "TELEMETRY_RETENTION_DAYS says. The default follows the record-keeping rule of "
            "keeping monitoring records at least two years after the end of the last "
            "crediting period (as the CDM and Verra's VM0042 v2.2 §9.3 state it); Gold "
            "Standard's own Principles & Requirements text could not be checked when this "
            "was set: confirm it for your programme."
        ),
    )
    prune_interval_seconds: float = Field(
        3600.0,
        validation_alias="TELEMETRY_PRUNE_INTERVAL_SECONDS",
        gt=0,
        description="How often the retention pruner runs.",
    )
    rate_limit: RateLimit = Field(
        "600/minute",
        validation_alias="TELEMETRY_RATE_LIMIT",
        description=(
            "Telemetry requests or MQTT messages per device; 429 (HTTP) or a counted drop "
            "(MQTT) beyond it."
        ),
    )
    mqtt_url: SecretStr | None = Field(
        None,
        validation_alias="MQTT_URL",
        description="`mqtt://[user:pass@]host:1883` (or `mqtts://`); unset: MQTT ingestion is off.",
    )
    mqtt_topic_prefix: str = Field(
        "twinhub",
        validation_alias="MQTT_TOPIC_PREFIX",
        pattern=r"^[^#+$\s][^#+\s]*$",
        description="Devices publish to `<prefix>/<twin DID>`.",
    )
    mqtt_shared_group: str = Field(
        "twinhub",
        validation_alias="MQTT_SHARED_GROUP",
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="MQTT 5 shared subscription group: processes of one group split the stream.",
    )
    mqtt_client_id: str = Field(
        "",
        validation_alias="MQTT_CLIENT_ID",
        max_length=64,
        description=(
            "Empty: `twinhub-<deployment>-<worker>`, where `<deployment>` is a digest of the "
            "database's identity (its URL without the password, or the SQLite file's path), "
            "the topic prefix and the shared group, and `<worker>` is WORKER_INDEX: stable "
            "across restarts, so a restarted worker resumes its own broker session and the "
            "messages left unacknowledged in it. Set it when several hosts share one "
            "database (one id per host); worker N>0 appends `-N`."
        ),
    )
    mqtt_qos: int = Field(
        1,
        validation_alias="MQTT_QOS",
        ge=1,
        le=2,
        description="Subscription QoS (1: at least once; duplicates are harmless).",
    )
    mqtt_reconnect_max_seconds: float = Field(
        30.0,
        validation_alias="MQTT_RECONNECT_MAX_SECONDS",
        gt=0,
        description="Ceiling of the reconnect backoff while the broker is away.",
    )
    mqtt_keepalive_seconds: int = Field(
        30,
        validation_alias="MQTT_KEEPALIVE_SECONDS",
        ge=1,
        le=65535,
        description=(
            "Keep-alive asked of the broker (a broker's Server Keep Alive overrides it); a "
            "broker silent for twice as long is taken as gone and reconnected to."
        ),
    )

    @cached_property
    def rate_limit_item(self) -> RateLimitItem:
        return parse(self.rate_limit)


class OracleSettings(_Section):
    """The claim oracle: the worker that evaluates pending claims (MRV)."""

    enabled: bool = Field(
        True,
        validation_alias="ORACLE_ENABLED",
        description=(
            "Run the claim oracle with the background work (`BACKGROUND_WORKERS_ENABLED`); "
            "`twinhub serve oracle` runs it alone."
        ),
    )
    poll_seconds: float = Field(
        1.0,
        validation_alias="ORACLE_POLL_SECONDS",
        gt=0,
        le=60,
        description="How often the oracle looks for pending claims.",
    )
    lease_seconds: float = Field(
        60.0,
        validation_alias="ORACLE_LEASE_SECONDS",
        gt=0,
        le=3600,
        description=(
            "How long one oracle process holds a claim; a crashed oracle's claims are taken "
            "over after it."
        ),
    )
    max_attempts: int = Field(
        3,
        validation_alias="ORACLE_MAX_ATTEMPTS",
        ge=1,
        le=100,
        description=(
            "Leases of one claim that ran out (crashes) before the oracle flags it for a person."
        ),
    )
    batch: int = Field(
        50, validation_alias="ORACLE_BATCH", ge=1, le=1000, description="Claims leased per look."
    )
    draft_wait_seconds: float = Field(
        4.0,
        validation_alias="ORACLE_DRAFT_WAIT_SECONDS",
        ge=0,
        le=3600,
        description=(
            "How long `POST .../monitoring-periods` waits for its draft before answering 202 "
            "with a `Location` to poll (the draft carries on in the background, with its "
            "progress); at most three quarters of `REGISTRY_REQUEST_TIMEOUT_SECONDS` is used."
        ),
    )
    draft_stale_seconds: float = Field(
        900.0,
        validation_alias="ORACLE_DRAFT_STALE_SECONDS",
        ge=10,
        le=86_400,
        description=(
            "A background draft whose progress has not moved for this long is reported as "
            "stopped (its process ended): draft the period again."
        ),
    )
    day_digests_days: int = Field(
        3,
        validation_alias="ORACLE_DAY_DIGESTS_DAYS",
        ge=0,
        le=366,
        description=(
            "The daily pass digests the stove-days of this many closed days before today "
            "and keeps each day's digest, so a monitoring period's draft reads one small row "
            "a stove-day instead of its readings (`0`: no pass; drafts still keep what they "
            "digest). Days whose readings arrive later than this are digested by the draft."
        ),
    )
    day_digests_interval_seconds: float = Field(
        3600.0,
        validation_alias="ORACLE_DAY_DIGESTS_INTERVAL_SECONDS",
        gt=0,
        description="How often the daily pass looks for stove-days to digest.",
    )


class EventsSettings(_Section):
    """The event log, its streams and webhook delivery."""

    sequencer_interval_seconds: float = Field(
        0.5,
        validation_alias="EVENTS_SEQUENCER_INTERVAL_SECONDS",
        gt=0,
        le=60,
        description=(
            "How often events committed by other processes are looked for (this process's own"
            " are numbered at once)."
        ),
    )
    stream_heartbeat_seconds: float = Field(
        15.0,
        validation_alias="EVENTS_STREAM_HEARTBEAT_SECONDS",
        gt=0,
        le=300,
        description="Comment line sent on an idle event stream, so proxies keep it open.",
    )
    retention_days: int = Field(
        90,
        validation_alias="EVENTS_RETENTION_DAYS",
        ge=0,
        description=(
            "Events older than this are pruned (`0`: kept forever), never while unnumbered or"
            " while a webhook delivery of a live subscription is pending or failed "
            "(replayable); their finished deliveries go with them."
        ),
    )
    prune_interval_seconds: float = Field(
        3600.0,
        validation_alias="EVENTS_PRUNE_INTERVAL_SECONDS",
        gt=0,
        description=(
            "How often the event pruner runs (beside the sequencer, where background work runs)."
        ),
    )
    webhook_timeout_seconds: float = Field(
        10.0,
        validation_alias="WEBHOOK_TIMEOUT_SECONDS",
        gt=0,
        le=120,
        description="Whole-request deadline of one delivery attempt (connect, send, answer).",
    )
    webhook_retry_horizon_seconds: float = Field(
        86_400.0,
        validation_alias="WEBHOOK_RETRY_HORIZON_SECONDS",
        gt=0,
        description="How long a delivery is retried before it is marked failed.",
    )
    webhook_disable_after_seconds: float = Field(
        86_400.0,
        validation_alias="WEBHOOK_DISABLE_AFTER_SECONDS",
        gt=0,
        description=(
            "A subscription whose receiver has answered no attempt with a 2xx for this long "
            "is disabled (event `webhook.disabled`) until re-enabled."
        ),
    )
    webhook_retry_base_seconds: float = Field(
        5.0,
        validation_alias="WEBHOOK_RETRY_BASE_SECONDS",
        gt=0,
        description="First back-off, doubled after each failure, with jitter (half to all of it).",
    )
    webhook_retry_max_delay_seconds: float = Field(
        3600.0,
        validation_alias="WEBHOOK_RETRY_MAX_DELAY_SECONDS",
        gt=0,
        description="Longest wait between two attempts (a `Retry-After` is honoured up to it).",
    )
    webhook_concurrency: int = Field(
        16,
        validation_alias="WEBHOOK_CONCURRENCY",
        ge=1,
        le=1000,
        description="Delivery attempts in flight at once in one process.",
    )
    webhook_concurrency_per_endpoint: int = Field(
        2,
        validation_alias="WEBHOOK_CONCURRENCY_PER_ENDPOINT",
        ge=1,
        le=100,
        description=(
            "Attempts in flight at once for one subscription, so a slow receiver never takes "
            "every slot."
        ),
    )
    webhook_max_response_bytes: int = Field(
        65_536,
        validation_alias="WEBHOOK_MAX_RESPONSE_BYTES",
        ge=0,
        description="A receiver's answer is read up to this size, then cut off.",
    )
    webhook_poll_interval_seconds: float = Field(
        1.0,
        validation_alias="WEBHOOK_POLL_INTERVAL_SECONDS",
        gt=0,
        le=60,
        description="How often the dispatcher looks for due deliveries "
        "(new events wake it at once).",
    )
    webhook_allow_private_networks: bool = Field(
        False,
        validation_alias="WEBHOOK_ALLOW_PRIVATE_NETWORKS",
        description=(
            "Allow webhook URLs on loopback, private, link-local, shared or reserved "
            "addresses (tests, closed networks)."
        ),
    )
    webhook_denied_hosts: str = Field(
        "",
        validation_alias="WEBHOOK_DENIED_HOSTS",
        description=(
            "Comma list of host names webhooks may never target, e.g. the platform's own "
            "public name."
        ),
    )


class ChainSettings(_Section):
    """The chain node (gRPC) and its REST gateway."""

    node_port: int = Field(
        9090, validation_alias="NODE_PORT", ge=0, le=65535, description="Chain node (gRPC) port."
    )
    gateway_port: int = Field(
        1317,
        validation_alias="GATEWAY_PORT",
        ge=0,
        le=65535,
        description="Chain REST gateway port.",
    )
    chain_id: str = Field(
        "twinhub-1",
        validation_alias="CHAIN_ID",
        pattern=r"^[A-Za-z0-9._-]{1,50}$",
        description="The chain id the node reports (node info, block headers).",
    )
    node_moniker: str = Field(
        "twinhub",
        validation_alias="NODE_MONIKER",
        pattern=r"^[A-Za-z0-9._ -]{1,70}$",
        description="The node's name in its node info.",
    )
    node_one_batch: bool = Field(
        True,
        validation_alias="NODE_ONE_BATCH",
        description=(
            "The node hands its height header, answer and status to gRPC's core in one batch "
            "(`chain/node/one_batch.py`, which uses grpc's internal names; checked at start, "
            "with grpc's public path when they differ); `false` keeps the public path, where "
            "the header is a send of its own (about a sixth of a bare answer's cost)."
        ),
    )
    node_answer_cache_mib: int = Field(
        32,
        validation_alias="NODE_ANSWER_CACHE_MIB",
        ge=0,
        le=4096,
        description=(
            "The node keeps serialised query answers up to this size, per database version "
            "(any commit drops them all); `0` keeps none."
        ),
    )
    gateway_grpc_upstream: str | None = Field(
        None,
        validation_alias="GATEWAY_GRPC_UPSTREAM",
        pattern=r"^[^\s/]+:[0-9]{1,5}$",
        description=(
            "`host:port` of the node the gateway fronts; unset: a node started in the same "
            "process on `NODE_PORT`."
        ),
    )
    gateway_routes_from: str = Field(
        "auto",
        validation_alias="GATEWAY_ROUTES_FROM",
        pattern="^(auto|descriptors|reflection)$",
        description=(
            "Where the route table comes from: `descriptors` (compiled into twinhub), "
            "`reflection` (the upstream's gRPC reflection), `auto` (reflection when "
            "`GATEWAY_GRPC_UPSTREAM` is set)."
        ),
    )
    gateway_route_prefix: str = Field(
        "ixo",
        validation_alias="GATEWAY_ROUTE_PREFIX",
        pattern=r"^[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*$",
        description="First path segment(s) of the ixo routes: `chain` serves `/chain/entity/{id}`.",
    )
    gateway_legacy_routes: bool = Field(
        False,
        validation_alias="GATEWAY_LEGACY_ROUTES",
        description="Also serve the retired routes (see the chain REST gateway).",
    )
    gateway_disabled_methods: str = Field(
        "",
        validation_alias="GATEWAY_DISABLED_METHODS",
        description=(
            "Comma list of gRPC methods answered 501, e.g. `ixo.claims.v1beta1.Query/DisputeList`."
        ),
    )
    gateway_api_keys: SecretStr | None = Field(
        None,
        validation_alias="GATEWAY_API_KEYS",
        description=(
            "Comma list of accepted tokens; when set every route needs `Authorization: Bearer"
            " <token>` (401 without, 403 wrong)."
        ),
    )
    gateway_cors_origins: str = Field(
        "",
        validation_alias="GATEWAY_CORS_ORIGINS",
        description=(
            "Comma list of origins (`https://explorer.example`) granted CORS for GET; empty: "
            "no grant ever."
        ),
    )
    gateway_upstream_timeout_seconds: float = Field(
        5.0,
        validation_alias="GATEWAY_UPSTREAM_TIMEOUT_SECONDS",
        gt=0,
        le=300,
        description="Deadline of each call to the node; beyond it 504.",
    )
    gateway_rate_limit: RateLimit = Field(
        "6000/minute",
        validation_alias="GATEWAY_RATE_LIMIT",
        description="Per client IP (see `TRUST_PROXY_ENABLED`); 429 with `Retry-After` beyond it.",
    )

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


class ConsoleSettings(_Section):
    """The operator console at /console on the registry port."""

    enabled: bool = Field(
        True,
        validation_alias="CONSOLE_ENABLED",
        description="Serve the operator console at `/console` on the registry port.",
    )
    session_ttl_seconds: int = Field(
        8 * 3600,
        validation_alias="CONSOLE_SESSION_TTL_SECONDS",
        ge=60,
        le=7 * 86400,
        description="How long a console sign-in lasts (the key is still checked on every click).",
    )
    max_sessions: int = Field(
        10_000,
        validation_alias="CONSOLE_MAX_SESSIONS",
        ge=10,
        description=(
            "Without Redis: signed-in console sessions one process holds (oldest-used dropped"
            " first); with `REDIS_URL` sessions live in Redis, shared by every worker, and "
            "expire there."
        ),
    )
    ussd_url: str | None = Field(
        None,
        validation_alias="CONSOLE_USSD_URL",
        description="The USSD gateway the console's phone simulator forwards to; "
        "unset: `http://127.0.0.1:PORT/api/ussd`.",
    )


def _section(model: type[_Section]) -> Any:
    """A section field of Settings, built from its defaults unless given."""
    return Field(default_factory=model, description=(model.__doc__ or "").strip())


class Settings(BaseSettings):
    """Read once at start; passed down explicitly, never imported as a global.

    Each context's services receive their own section (`settings.telemetry`, ...)."""

    model_config = SettingsConfigDict(env_file=None, extra="ignore", frozen=True)

    environment: Environment = Field(
        Environment.development,
        description="`development`, `production` or `test`; reported by the health records.",
    )
    storage: StorageSettings = _section(StorageSettings)
    server: ServerSettings = _section(ServerSettings)
    observability: ObservabilitySettings = _section(ObservabilitySettings)
    security: SecuritySettings = _section(SecuritySettings)
    registry: RegistrySettings = _section(RegistrySettings)
    ussd: UssdSettings = _section(UssdSettings)
    telemetry: TelemetrySettings = _section(TelemetrySettings)
    oracle: OracleSettings = _section(OracleSettings)
    events: EventsSettings = _section(EventsSettings)
    chain: ChainSettings = _section(ChainSettings)
    console: ConsoleSettings = _section(ConsoleSettings)

    def __init__(self, **values: Any) -> None:
        # Flat keyword names (`database_url=...`, as the variables are named) go into their
        # sections before the sources merge, so they override the environment field by field.
        super().__init__(**nest_flat_names(values))

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The environment and dotenv files are read by the flat variable names only."""
        return (
            init_settings,
            _FlatVariables(settings_cls, env_settings),
            _FlatVariables(settings_cls, dotenv_settings),
            file_secret_settings,
        )

    @model_validator(mode="before")
    @classmethod
    def _route_flat_names(cls, data: Any) -> Any:
        """`Settings.model_validate({'database_url': ...})` works as the keywords do."""
        return nest_flat_names(data) if isinstance(data, Mapping) else data

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> Settings:
        """A copy with `update` applied; flat names (`oracle_enabled=...`) go into their
        sections, as the keyword arguments do."""
        if update:
            routed: dict[str, Any] = {}
            for key, value in nest_flat_names(update).items():
                current = getattr(self, key, None)
                if isinstance(current, _Section) and isinstance(value, Mapping):
                    value = current.model_copy(update=dict(value))
                routed[key] = value
            update = routed
        return super().model_copy(update=update, deep=deep)

    @classmethod
    def environment_names(cls) -> list[str]:
        """Every environment variable the settings read, upper-case, in section order."""
        return list(_routes_by_name())

    @classmethod
    def environment_fields(cls) -> Iterator[tuple[str, str | None, str, FieldInfo]]:
        """(variable, section or None, field name, field) for every variable: what the
        settings documentation is generated from."""
        for name, field in cls.model_fields.items():
            model = _section_model(field)
            if model is None:
                yield _variable_of(name, field), None, name, field
                continue
            for inner, inner_field in model.model_fields.items():
                yield _variable_of(inner, inner_field), name, inner, inner_field

    @classmethod
    def environment_name_of(cls, loc: tuple[int | str, ...]) -> str:
        """The variable a validation error's location points at (for messages)."""
        routes = {(section, field): env for env, (section, field) in _routes_by_name().items()}
        aliases = set(_routes_by_name())
        if loc and isinstance(loc[-1], str) and loc[-1].upper() in aliases:
            return loc[-1].upper()
        if len(loc) >= 2 and (loc[0], loc[1]) in routes:
            return routes[(str(loc[0]), str(loc[1]))]
        return "_".join(str(part) for part in loc).upper()

    def environment_values(self) -> dict[str, Any]:
        """Every variable's effective value, by variable name, in section order."""
        values: dict[str, Any] = {}
        for env, (section, field) in _routes_by_name().items():
            holder = self if section is None else getattr(self, section)
            values[env] = getattr(holder, field)
        return values

    @cached_property
    def webhooks(self) -> WebhookSettings:
        """The webhook settings as one value object, for the dispatcher and URL policy."""
        events = self.events
        return WebhookSettings(
            timeout=events.webhook_timeout_seconds,
            retry_horizon=events.webhook_retry_horizon_seconds,
            disable_after=events.webhook_disable_after_seconds,
            retry_base=events.webhook_retry_base_seconds,
            retry_max_delay=events.webhook_retry_max_delay_seconds,
            concurrency=events.webhook_concurrency,
            concurrency_per_endpoint=events.webhook_concurrency_per_endpoint,
            max_response_bytes=events.webhook_max_response_bytes,
            poll_interval=events.webhook_poll_interval_seconds,
            allow_private_networks=events.webhook_allow_private_networks,
            denied_hosts=frozenset(h.lower() for h in split_list(events.webhook_denied_hosts)),
            own_ports=frozenset(
                {
                    self.ussd.port,
                    self.registry.port,
                    self.chain.gateway_port,
                    self.chain.node_port,
                }
            ),
            own_host=self.server.host,
        )

    @property
    def console_ussd_endpoint(self) -> str:
        return self.console.ussd_url or f"http://127.0.0.1:{self.ussd.port}/api/ussd"

    def problems_for_production(self) -> list[str]:
        """What stops this configuration from running in production (empty when fine)."""
        problems = []
        security = self.security
        if self.environment is Environment.production and security.pin_encryption_key is None:
            problems.append("PIN_ENCRYPTION_KEY is required in production (64 hex characters)")
        if self.environment is Environment.production and security.credential_issuer_key is None:
            problems.append("CREDENTIAL_ISSUER_KEY is required in production (64 hex characters)")
        bootstrap = security.bootstrap_api_key
        if bootstrap is not None and len(bootstrap.get_secret_value()) < 32:
            problems.append("TWINHUB_BOOTSTRAP_API_KEY must be at least 32 characters")
        return problems


def _section_model(field: FieldInfo) -> type[_Section] | None:
    annotation = field.annotation
    if isinstance(annotation, type) and issubclass(annotation, _Section):
        return annotation
    return None


def _variable_of(name: str, field: FieldInfo) -> str:
    alias = field.validation_alias if isinstance(field.validation_alias, str) else None
    return (alias or field.alias or name).upper()


_routes: dict[str, tuple[str | None, str]] = {}


def setting_name(section: str, field: str) -> str:
    """The environment variable of `section.field`, for an error message that depends on
    it (a refusal names the setting that would allow the request); KeyError for a field
    that is no setting, so a renamed one fails its tests instead of naming nothing."""
    for env, route in _routes_by_name().items():
        if route == (section, field):
            return env
    raise KeyError(f"{section}.{field} is no setting")


def _routes_by_name() -> dict[str, tuple[str | None, str]]:
    """VARIABLE -> (section or None, field name), built once from the models."""
    if not _routes:
        for env, section, field, _info in Settings.environment_fields():
            _routes[env] = (section, field)
    return _routes


def nest_flat_names(values: Mapping[str, Any]) -> dict[str, Any]:
    """{'database_url': x, 'ussd': {...}} -> {'storage': {'database_url': x}, 'ussd': {...}}.

    Flat names are the variables' names in lower case (as the keyword arguments were
    spelled before the sections) or upper case; they win over a section given as a whole.
    Anything else is passed through unchanged."""
    routes = _routes_by_name()
    nested: dict[str, Any] = {}
    flat: list[tuple[str | None, str, Any]] = []
    for key, value in values.items():
        route = routes.get(key.upper()) if isinstance(key, str) else None
        if route is not None and (key == key.lower() or key == key.upper()):
            flat.append((route[0], route[1], value))
        else:
            nested[key] = value
    for section, field, value in flat:
        if section is None:
            nested[field] = value
            continue
        current = nested.get(section)
        if isinstance(current, BaseModel):
            current = current.model_dump()
        elif not isinstance(current, Mapping):
            current = {}
        nested[section] = {**current, field: value}
    return nested


class _FlatVariables(PydanticBaseSettingsSource):
    """The environment (or a dotenv file) read by the flat variable names, routed into the
    sections; no other variable is looked at (no `STORAGE`, no `STORAGE__...`)."""

    def __init__(self, settings_cls: type[BaseSettings], inner: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        self._inner = inner

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        if not isinstance(self._inner, EnvSettingsSource):
            return {}
        found: dict[str, Any] = {}
        variables = self._inner.env_vars  # lower-case names: the settings are case-insensitive
        for env in _routes_by_name():
            value = variables.get(env.lower())
            if value is not None:
                found[env] = value
        return nest_flat_names(found)


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
