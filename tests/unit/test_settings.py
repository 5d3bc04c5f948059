"""The nested settings read every variable the flat settings read, to the same value.

The table below was taken from the flat `Settings` before the sections (one per
context) replaced it: each variable with a value other than its default, and the value
the flat model made of it. A variable renamed or dropped by mistake fails here.
"""

from __future__ import annotations

import os
import re
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

from twinhub.settings import Settings, UssdSettings

# variable: (text set in the environment, the flat model's value rendered by `shown`)
FLAT_SAMPLES: dict[str, tuple[str, str]] = {
    "ENVIRONMENT": ("test", "test"),
    "DATA_DIR": ("/srv/twinhub-data", "/srv/twinhub-data"),
    "DATABASE_URL": (
        "postgresql://u:p@db.example/twinhub",
        "'postgresql://u:p@db.example/twinhub'",
    ),
    "DATABASE_CONNECT_TIMEOUT_SECONDS": ("3.5", "3.5"),
    "SQLITE_CACHE_MIB": ("65", "65"),
    "DATABASE_HEALTH_INTERVAL_SECONDS": ("2.5", "2.5"),
    "LEDGER_MAX_BATCH": ("257", "257"),
    "GOVERNANCE_BATCH_CHUNK": ("1001", "1001"),
    "GOVERNANCE_BATCH_RETRIES": ("4", "4"),
    "GOVERNANCE_BATCH_RETRY_SECONDS": ("1.5", "1.5"),
    "REDIS_URL": ("redis://cache.example:6379/2", "redis://cache.example:6379/2"),
    "REDIS_KEY_PREFIX": ("th-test:", "'th-test:'"),
    "HOST": ("0.0.0.0", "'0.0.0.0'"),
    "PORT": ("3001", "3001"),
    "LOG_LEVEL": ("debug", "'debug'"),
    "LOG_FORMAT": ("json", "'json'"),
    "PIN_ENCRYPTION_KEY": (
        "abababababababababababababababababababababababababababababababab",
        "abababababababababababababababababababababababababababababababab",
    ),
    "USSD_SERVICE_NAME": ("stoves", "'stoves'"),
    "USSD_SESSION_TTL_SECONDS": ("120.5", "120.5"),
    "USSD_SESSION_RETENTION_SECONDS": ("600.5", "600.5"),
    "USSD_MAX_SESSIONS": ("100001", "100001"),
    "USSD_LOCK_TIMEOUT_SECONDS": ("5.5", "5.5"),
    "USSD_MAX_PIN_ATTEMPTS": ("4", "4"),
    "USSD_MAX_BODY_BYTES": ("4097", "4097"),
    "USSD_RATE_LIMIT": ("7/second", "'7/second'"),
    "USSD_OPERATOR_TOKEN": ("operator-secret", "operator-secret"),
    "TRUST_PROXY_ENABLED": ("true", "True"),
    "TRUST_PROXY_HOPS": ("2", "2"),
    "METRICS_ENABLED": ("false", "False"),
    "REGISTRY_PORT": ("8001", "8001"),
    "TWINHUB_BOOTSTRAP_API_KEY": (
        "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk",
        "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk",
    ),
    "REGISTRY_MAX_BODY_BYTES": ("1048577", "1048577"),
    "REGISTRY_MAX_ATTACHMENT_BYTES": ("2097152", "2097152"),
    "REGISTRY_CERTIFICATE_RATE_LIMIT": ("7", "'7/minute'"),
    "REGISTRY_RATE_LIMIT": ("99", "'99/minute'"),
    "REGISTRY_PAGE_SIZE": ("51", "51"),
    "REGISTRY_MAX_PAGE_SIZE": ("501", "501"),
    "NODE_PORT": ("9091", "9091"),
    "GATEWAY_PORT": ("1318", "1318"),
    "CHAIN_ID": ("chain-7", "'chain-7'"),
    "NODE_ANSWER_CACHE_MIB": ("33", "33"),
    "NODE_ONE_BATCH": ("false", "False"),
    "NODE_MONIKER": ("moniker 7", "'moniker 7'"),
    "GATEWAY_GRPC_UPSTREAM": ("node.example:9091", "'node.example:9091'"),
    "GATEWAY_ROUTES_FROM": ("reflection", "'reflection'"),
    "GATEWAY_ROUTE_PREFIX": ("chain/ixo", "'chain/ixo'"),
    "GATEWAY_LEGACY_ROUTES": ("true", "True"),
    "GATEWAY_DISABLED_METHODS": (
        "ixo.claims.v1beta1.Query/DisputeList",
        "'ixo.claims.v1beta1.Query/DisputeList'",
    ),
    "GATEWAY_API_KEYS": ("t1,t2", "t1,t2"),
    "GATEWAY_CORS_ORIGINS": ("https://explorer.example", "'https://explorer.example'"),
    "GATEWAY_UPSTREAM_TIMEOUT_SECONDS": ("5.5", "5.5"),
    "GATEWAY_RATE_LIMIT": ("5/hour", "'5/hour'"),
    "CREDENTIAL_ISSUER_KEY": (
        "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd",
        "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd",
    ),
    "COMPLIANCE_GROUP_MEMBERS": (
        "did:ixo:org/a=2,did:ixo:org/b",
        "'did:ixo:org/a=2,did:ixo:org/b'",
    ),
    "COMPLIANCE_GROUP_THRESHOLD": ("threshold_quorum:0.5:0.3", "'threshold_quorum:0.5:0.3'"),
    "COMPLIANCE_GROUP_VOTING_PERIOD_SECONDS": ("604801", "604801"),
    "CONSOLE_ENABLED": ("false", "False"),
    "CONSOLE_SESSION_TTL_SECONDS": ("28801", "28801"),
    "CONSOLE_MAX_SESSIONS": ("10001", "10001"),
    "CONSOLE_USSD_URL": ("http://ussd.example/api/ussd", "'http://ussd.example/api/ussd'"),
    "GRAPHQL_MAX_BODY_BYTES": ("65537", "65537"),
    "GRAPHQL_MAX_DEPTH": ("11", "11"),
    "GRAPHQL_MAX_TOKENS": ("2001", "2001"),
    "GRAPHQL_MAX_ALIASES": ("21", "21"),
    "DATABASE_STATEMENT_TIMEOUT_SECONDS": ("5.5", "5.5"),
    "DATABASE_POOL_TIMEOUT_SECONDS": ("3.5", "3.5"),
    "DATABASE_PING_IDLE_SECONDS": ("2.5", "2.5"),
    "DATABASE_RETRY_AFTER_SECONDS": ("6", "6"),
    "HTTP_KEEP_ALIVE_SECONDS": ("75.5", "75.5"),
    "HTTP_HEADER_TIMEOUT_SECONDS": ("12.5", "12.5"),
    "HTTP_MAX_CONNECTIONS_PER_CLIENT": ("250", "250"),
    "WORKER_INDEX": ("3", "3"),
    "REGISTRY_REQUEST_TIMEOUT_SECONDS": ("8.5", "8.5"),
    "REGISTRY_WRITE_GRACE_SECONDS": ("30.5", "30.5"),
    "USSD_LOCKOUT_SECONDS": ("60.5", "60.5"),
    "USSD_LOCKOUT_MAX_SECONDS": ("3600.5", "3600.5"),
    "USSD_PHONE_MAX_PIN_ATTEMPTS": ("11", "11"),
    "API_KEY_FAILURE_LIMIT": ("3/minute", "'3/minute'"),
    "WORKERS": ("auto", "'auto'"),
    "TELEMETRY_BATCH_SIZE": ("1001", "1001"),
    "TELEMETRY_FUTURE_SKEW_SECONDS": ("300.5", "300.5"),
    "TELEMETRY_PAST_SKEW_DAYS": ("365.5", "365.5"),
    "EVIDENCE_RETENTION_YEARS": ("7", "7"),
    "TELEMETRY_OFFLINE_AFTER_SECONDS": ("3600.5", "3600.5"),
    "TELEMETRY_RETENTION_DAYS": ("731", "731"),
    "TELEMETRY_RATE_LIMIT": ("12/minute", "'12/minute'"),
    "TELEMETRY_PRUNE_INTERVAL_SECONDS": ("3600.5", "3600.5"),
    "MQTT_URL": ("mqtt://user:pw@broker.example:1883", "mqtt://user:pw@broker.example:1883"),
    "MQTT_TOPIC_PREFIX": ("stoves/x", "'stoves/x'"),
    "MQTT_SHARED_GROUP": ("grp-2", "'grp-2'"),
    "MQTT_CLIENT_ID": ("client-9", "'client-9'"),
    "MQTT_QOS": ("2", "2"),
    "MQTT_RECONNECT_MAX_SECONDS": ("30.5", "30.5"),
    "MQTT_KEEPALIVE_SECONDS": ("31", "31"),
    "SUPPORT_CONTACT": ("+254 700 000000", "'+254 700 000000'"),
    "USSD_DEFAULT_LANGUAGE": ("sw", "'sw'"),
    "USSD_DEFAULT_LANGUAGES": ("*384*1#=en,*384*2#=sw", "'*384*1#=en,*384*2#=sw'"),
    "USSD_TIMEZONE": ("Africa/Nairobi", "'Africa/Nairobi'"),
    "USSD_SURVEY_CONFIDENCE": ("0.95", "0.95"),
    "USSD_SURVEY_PRECISION": ("0.05", "0.05"),
    "USSD_SURVEY_EXPECTED_CV": ("0.4", "0.4"),
    "USSD_SURVEY_HOUSEHOLD_MIN": ("2", "2"),
    "USSD_SURVEY_HOUSEHOLD_MAX": ("25", "25"),
    "USSD_SURVEY_MAX_SAMPLE": ("400", "400"),
    "USSD_SURVEY_REFRESH_SECONDS": ("10.5", "10.5"),
    "BACKGROUND_WORKERS_ENABLED": ("false", "False"),
    "EVENTS_SEQUENCER_INTERVAL_SECONDS": ("1.0", "1.0"),
    "EVENTS_STREAM_HEARTBEAT_SECONDS": ("15.5", "15.5"),
    "EVENTS_RETENTION_DAYS": ("91", "91"),
    "EVENTS_PRUNE_INTERVAL_SECONDS": ("3600.5", "3600.5"),
    "WEBHOOK_TIMEOUT_SECONDS": ("10.5", "10.5"),
    "WEBHOOK_RETRY_HORIZON_SECONDS": ("86400.5", "86400.5"),
    "WEBHOOK_DISABLE_AFTER_SECONDS": ("172800.5", "172800.5"),
    "WEBHOOK_RETRY_BASE_SECONDS": ("5.5", "5.5"),
    "WEBHOOK_RETRY_MAX_DELAY_SECONDS": ("3600.5", "3600.5"),
    "WEBHOOK_CONCURRENCY": ("17", "17"),
    "WEBHOOK_CONCURRENCY_PER_ENDPOINT": ("3", "3"),
    "WEBHOOK_MAX_RESPONSE_BYTES": ("65537", "65537"),
    "WEBHOOK_POLL_INTERVAL_SECONDS": ("1.5", "1.5"),
    "WEBHOOK_ALLOW_PRIVATE_NETWORKS": ("true", "True"),
    "WEBHOOK_DENIED_HOSTS": ("twinhub.example,other.example", "'twinhub.example,other.example'"),
    "CLAIMS_EVALUATION_BATCH_MAX": ("1001", "1001"),
    "CLAIMS_EVALUATION_LINGER_SECONDS": ("0.002", "0.002"),
    "ORACLE_ENABLED": ("false", "False"),
    "ORACLE_POLL_SECONDS": ("1.5", "1.5"),
    "ORACLE_LEASE_SECONDS": ("60.5", "60.5"),
    "ORACLE_MAX_ATTEMPTS": ("4", "4"),
    "ORACLE_BATCH": ("51", "51"),
    "ORACLE_DRAFT_WAIT_SECONDS": ("2.5", "2.5"),
    "ORACLE_DRAFT_STALE_SECONDS": ("60.5", "60.5"),
    "ORACLE_DAY_DIGESTS_DAYS": ("7", "7"),
    "ORACLE_DAY_DIGESTS_INTERVAL_SECONDS": ("600.5", "600.5"),
}
# variable: the flat model's default, rendered by `shown`
FLAT_DEFAULTS: dict[str, str] = {
    "ENVIRONMENT": "development",
    "DATA_DIR": "data",
    "DATABASE_URL": "None",
    "DATABASE_CONNECT_TIMEOUT_SECONDS": "3.0",
    "SQLITE_CACHE_MIB": "64",
    "DATABASE_HEALTH_INTERVAL_SECONDS": "2.0",
    "LEDGER_MAX_BATCH": "256",
    "GOVERNANCE_BATCH_CHUNK": "1000",
    "GOVERNANCE_BATCH_RETRIES": "3",
    "GOVERNANCE_BATCH_RETRY_SECONDS": "1.0",
    "REDIS_URL": "None",
    "REDIS_KEY_PREFIX": "'twinhub:'",
    "HOST": "'127.0.0.1'",
    "PORT": "3000",
    "LOG_LEVEL": "'info'",
    "LOG_FORMAT": "'auto'",
    "PIN_ENCRYPTION_KEY": "None",
    "USSD_SERVICE_NAME": "'twinhub'",
    "USSD_SESSION_TTL_SECONDS": "120.0",
    "USSD_SESSION_RETENTION_SECONDS": "600.0",
    "USSD_MAX_SESSIONS": "100000",
    "USSD_LOCK_TIMEOUT_SECONDS": "5.0",
    "USSD_MAX_PIN_ATTEMPTS": "3",
    "USSD_MAX_BODY_BYTES": "4096",
    "USSD_RATE_LIMIT": "'100/minute'",
    "USSD_OPERATOR_TOKEN": "None",
    "TRUST_PROXY_ENABLED": "False",
    "TRUST_PROXY_HOPS": "1",
    "METRICS_ENABLED": "True",
    "REGISTRY_PORT": "8000",
    "TWINHUB_BOOTSTRAP_API_KEY": "None",
    "REGISTRY_MAX_BODY_BYTES": "1048576",
    "REGISTRY_MAX_ATTACHMENT_BYTES": "10485760",
    "REGISTRY_CERTIFICATE_RATE_LIMIT": "'60/minute'",
    "REGISTRY_RATE_LIMIT": "'1200/minute'",
    "REGISTRY_PAGE_SIZE": "50",
    "REGISTRY_MAX_PAGE_SIZE": "500",
    "NODE_PORT": "9090",
    "GATEWAY_PORT": "1317",
    "CHAIN_ID": "'twinhub-1'",
    "NODE_ANSWER_CACHE_MIB": "32",
    "NODE_ONE_BATCH": "True",
    "NODE_MONIKER": "'twinhub'",
    "GATEWAY_GRPC_UPSTREAM": "None",
    "GATEWAY_ROUTES_FROM": "'auto'",
    "GATEWAY_ROUTE_PREFIX": "'ixo'",
    "GATEWAY_LEGACY_ROUTES": "False",
    "GATEWAY_DISABLED_METHODS": "''",
    "GATEWAY_API_KEYS": "None",
    "GATEWAY_CORS_ORIGINS": "''",
    "GATEWAY_UPSTREAM_TIMEOUT_SECONDS": "5.0",
    "GATEWAY_RATE_LIMIT": "'6000/minute'",
    "CREDENTIAL_ISSUER_KEY": "None",
    "COMPLIANCE_GROUP_MEMBERS": "''",
    "COMPLIANCE_GROUP_THRESHOLD": "'absolute_percentage:0.51'",
    "COMPLIANCE_GROUP_VOTING_PERIOD_SECONDS": "604800",
    "CONSOLE_ENABLED": "True",
    "CONSOLE_SESSION_TTL_SECONDS": "28800",
    "CONSOLE_MAX_SESSIONS": "10000",
    "CONSOLE_USSD_URL": "None",
    "GRAPHQL_MAX_BODY_BYTES": "65536",
    "GRAPHQL_MAX_DEPTH": "10",
    "GRAPHQL_MAX_TOKENS": "2000",
    "GRAPHQL_MAX_ALIASES": "20",
    "DATABASE_STATEMENT_TIMEOUT_SECONDS": "5.0",
    "DATABASE_POOL_TIMEOUT_SECONDS": "3.0",
    "DATABASE_PING_IDLE_SECONDS": "1.0",
    "DATABASE_RETRY_AFTER_SECONDS": "5",
    "HTTP_KEEP_ALIVE_SECONDS": "75.0",
    "HTTP_HEADER_TIMEOUT_SECONDS": "10.0",
    "HTTP_MAX_CONNECTIONS_PER_CLIENT": "100",
    "WORKER_INDEX": "0",
    "REGISTRY_REQUEST_TIMEOUT_SECONDS": "8.0",
    "REGISTRY_WRITE_GRACE_SECONDS": "60.0",
    "USSD_LOCKOUT_SECONDS": "60.0",
    "USSD_LOCKOUT_MAX_SECONDS": "3600.0",
    "USSD_PHONE_MAX_PIN_ATTEMPTS": "10",
    "API_KEY_FAILURE_LIMIT": "'20/minute'",
    "WORKERS": "'1'",
    "TELEMETRY_BATCH_SIZE": "1000",
    "TELEMETRY_FUTURE_SKEW_SECONDS": "300.0",
    "TELEMETRY_PAST_SKEW_DAYS": "730.0",
    "EVIDENCE_RETENTION_YEARS": "2",
    "TELEMETRY_OFFLINE_AFTER_SECONDS": "3600.0",
    "TELEMETRY_RETENTION_DAYS": "730",
    "TELEMETRY_RATE_LIMIT": "'600/minute'",
    "TELEMETRY_PRUNE_INTERVAL_SECONDS": "3600.0",
    "MQTT_URL": "None",
    "MQTT_TOPIC_PREFIX": "'twinhub'",
    "MQTT_SHARED_GROUP": "'twinhub'",
    "MQTT_CLIENT_ID": "''",
    "MQTT_QOS": "1",
    "MQTT_RECONNECT_MAX_SECONDS": "30.0",
    "MQTT_KEEPALIVE_SECONDS": "30",
    "SUPPORT_CONTACT": "''",
    "USSD_DEFAULT_LANGUAGE": "'en'",
    "USSD_DEFAULT_LANGUAGES": "''",
    "USSD_TIMEZONE": "'UTC'",
    "USSD_SURVEY_CONFIDENCE": "0.9",
    "USSD_SURVEY_PRECISION": "0.1",
    "USSD_SURVEY_EXPECTED_CV": "0.5",
    "USSD_SURVEY_HOUSEHOLD_MIN": "1",
    "USSD_SURVEY_HOUSEHOLD_MAX": "30",
    "USSD_SURVEY_MAX_SAMPLE": "5000",
    "USSD_SURVEY_REFRESH_SECONDS": "30.0",
    "BACKGROUND_WORKERS_ENABLED": "True",
    "EVENTS_SEQUENCER_INTERVAL_SECONDS": "0.5",
    "EVENTS_STREAM_HEARTBEAT_SECONDS": "15.0",
    "EVENTS_RETENTION_DAYS": "90",
    "EVENTS_PRUNE_INTERVAL_SECONDS": "3600.0",
    "WEBHOOK_TIMEOUT_SECONDS": "10.0",
    "WEBHOOK_RETRY_HORIZON_SECONDS": "86400.0",
    "WEBHOOK_DISABLE_AFTER_SECONDS": "86400.0",
    "WEBHOOK_RETRY_BASE_SECONDS": "5.0",
    "WEBHOOK_RETRY_MAX_DELAY_SECONDS": "3600.0",
    "WEBHOOK_CONCURRENCY": "16",
    "WEBHOOK_CONCURRENCY_PER_ENDPOINT": "2",
    "WEBHOOK_MAX_RESPONSE_BYTES": "65536",
    "WEBHOOK_POLL_INTERVAL_SECONDS": "1.0",
    "WEBHOOK_ALLOW_PRIVATE_NETWORKS": "False",
    "WEBHOOK_DENIED_HOSTS": "''",
    "CLAIMS_EVALUATION_BATCH_MAX": "1000",
    "CLAIMS_EVALUATION_LINGER_SECONDS": "0.004",
    "ORACLE_ENABLED": "True",
    "ORACLE_POLL_SECONDS": "1.0",
    "ORACLE_LEASE_SECONDS": "60.0",
    "ORACLE_MAX_ATTEMPTS": "3",
    "ORACLE_BATCH": "50",
    "ORACLE_DRAFT_WAIT_SECONDS": "4.0",
    "ORACLE_DRAFT_STALE_SECONDS": "900.0",
    "ORACLE_DAY_DIGESTS_DAYS": "3",
    "ORACLE_DAY_DIGESTS_INTERVAL_SECONDS": "3600.0",
}


def shown(value: Any) -> str:
    """A setting's value as the table writes it."""
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, Path):
        return str(value)
    return repr(value)


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The process environment, emptied of every setting (conftest did; kept so here)."""
    for name in Settings.environment_names():
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_the_variables_are_the_flat_ones() -> None:
    assert sorted(Settings.environment_names()) == sorted(FLAT_DEFAULTS)
    assert len(Settings.environment_names()) == len(set(Settings.environment_names())) == 132


def test_defaults_are_unchanged(environment: pytest.MonkeyPatch) -> None:
    values = Settings().environment_values()
    assert {name: shown(value) for name, value in values.items()} == FLAT_DEFAULTS


@pytest.mark.parametrize("name", sorted(FLAT_SAMPLES))
def test_each_variable_sets_its_value(environment: pytest.MonkeyPatch, name: str) -> None:
    raw, expected = FLAT_SAMPLES[name]
    environment.setenv(name, raw)
    values = Settings().environment_values()
    assert shown(values[name]) == expected
    # ...and nothing else moved.
    others = {n: shown(v) for n, v in values.items() if n != name}
    assert others == {n: v for n, v in FLAT_DEFAULTS.items() if n != name}


@pytest.mark.parametrize("name", sorted(FLAT_SAMPLES))
def test_each_flat_keyword_sets_its_value(environment: pytest.MonkeyPatch, name: str) -> None:
    raw, expected = FLAT_SAMPLES[name]
    assert shown(Settings(**{name.lower(): raw}).environment_values()[name]) == expected


def test_names_are_case_insensitive_and_keywords_win(environment: pytest.MonkeyPatch) -> None:
    environment.setenv("ussd_rate_limit", "5")
    environment.setenv("REGISTRY_PAGE_SIZE", "7")
    settings = Settings(registry_page_size=9)
    assert settings.ussd.rate_limit == "5/minute"
    assert settings.registry.page_size == 9


def test_a_dotenv_file_is_read_only_when_asked(
    environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text("CHAIN_ID=from-file\nMQTT_QOS=2\nUNRELATED=1\n")
    environment.chdir(tmp_path)
    assert Settings().chain.chain_id == "twinhub-1"  # env_file=None: no .env by default
    from_file = Settings(_env_file=dotenv)  # type: ignore[call-arg]
    assert (from_file.chain.chain_id, from_file.telemetry.mqtt_qos) == ("from-file", 2)
    environment.setenv("CHAIN_ID", "from-env")
    assert Settings(_env_file=dotenv).chain.chain_id == "from-env"  # type: ignore[call-arg]


def test_section_names_are_not_variables(environment: pytest.MonkeyPatch) -> None:
    """A stray `USSD` or `STORAGE__...` variable is no setting, as before the sections."""
    environment.setenv("USSD", "not json")
    environment.setenv("STORAGE__DATABASE_URL", "postgresql://elsewhere/db")
    settings = Settings()
    assert settings.ussd == UssdSettings()
    assert settings.storage.database_url is None


def test_a_flat_keyword_overrides_a_whole_section() -> None:
    dumped = Settings(chain_id="one").model_dump()
    settings = Settings(**{**dumped, "chain_id": "two", "gateway_rate_limit": "3"})
    assert (settings.chain.chain_id, settings.chain.gateway_rate_limit) == ("two", "3/minute")
    assert Settings.model_validate({"chain_id": "three"}).chain.chain_id == "three"


def test_errors_name_the_variable(environment: pytest.MonkeyPatch) -> None:
    environment.setenv("REGISTRY_PAGE_SIZE", "0")
    with pytest.raises(ValidationError) as raised:
        Settings()
    (problem,) = raised.value.errors()
    assert Settings.environment_name_of(problem["loc"]) == "REGISTRY_PAGE_SIZE"
    with pytest.raises(ValidationError, match="64 hexadecimal characters"):
        Settings(pin_encryption_key="abc")
    with pytest.raises(ValidationError, match=re.escape("expected 'package.Service/Method'")):
        Settings(gateway_disabled_methods="nope")


def test_production_problems_are_unchanged(environment: pytest.MonkeyPatch) -> None:
    assert Settings(environment="production").problems_for_production() == [
        "PIN_ENCRYPTION_KEY is required in production (64 hex characters)",
        "CREDENTIAL_ISSUER_KEY is required in production (64 hex characters)",
    ]
    short = Settings(twinhub_bootstrap_api_key="short")
    assert short.problems_for_production() == [
        "TWINHUB_BOOTSTRAP_API_KEY must be at least 32 characters"
    ]


def test_every_field_is_described() -> None:
    for name, _section, _field, info in Settings.environment_fields():
        assert info.description, name


def test_conftest_cleared_every_variable() -> None:
    """conftest cleared every variable by `environment_names`: none is left set."""
    assert not [name for name in Settings.environment_names() if name in os.environ]


def test_a_copy_takes_flat_names_too() -> None:
    settings = Settings(oracle_enabled=False, chain_id="one")
    copied = settings.model_copy(update={"oracle_enabled": True, "oracle_poll_seconds": 9.0})
    assert (copied.oracle.enabled, copied.oracle.poll_seconds) == (True, 9.0)
    assert copied.chain.chain_id == "one" and settings.oracle.enabled is False


def test_a_refusal_names_its_setting_by_its_variable() -> None:
    from twinhub.settings import setting_name

    assert setting_name("events", "webhook_allow_private_networks") == (
        "WEBHOOK_ALLOW_PRIVATE_NETWORKS"
    )
    assert setting_name("registry", "max_body_bytes") == "REGISTRY_MAX_BODY_BYTES"
    with pytest.raises(KeyError):
        setting_name("registry", "no_such_limit")
