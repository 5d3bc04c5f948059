"""The telemetry context's start: the ingestion service (HTTP and MQTT), the stoves' care
watch and the rollup figures, built from TelemetrySettings; and its background work."""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import make_url

from twinhub.db.bootstrap import Storage
from twinhub.kernel.bus import Bus
from twinhub.kernel.ratelimit import RateLimiter
from twinhub.services.device_tokens import DeviceTokenService
from twinhub.services.domains import DomainService
from twinhub.services.protocols import ProtocolService
from twinhub.services.stove_care import StoveCare
from twinhub.settings import StorageSettings, TelemetrySettings
from twinhub.telemetry.figures import RollupTelemetry
from twinhub.telemetry.live import LiveHub, live_channel
from twinhub.telemetry.service import TelemetryService
from twinhub.telemetry.store import TelemetryStore


@dataclass(frozen=True)
class Telemetry:
    service: TelemetryService
    stove_care: StoveCare
    figures: RollupTelemetry  # the dashboards' telemetry figures, from the day rollups


def build_telemetry(
    settings: TelemetrySettings,
    storage: Storage,
    storage_settings: StorageSettings,
    protocols: ProtocolService,
    domains: DomainService,
    bus: Bus | None = None,
) -> Telemetry:
    sessions = storage.sessionmaker
    offline_after = settings.offline_after_seconds
    prefix = storage_settings.redis_key_prefix
    service = TelemetryService(
        # The bus hears of events its raw-driver writes commit (the sequencer numbers them).
        TelemetryStore(sessions, offline_after, bus=bus),
        settings,
        protocols,
        domains,
        RateLimiter.create(
            settings.rate_limit_item, storage_settings.redis_address, prefix, "telemetry"
        ),
        # With Redis, live streams carry every process's events (telemetry/live.py).
        LiveHub(storage.redis, live_channel(prefix)) if storage.redis is not None else LiveHub(),
    )
    return Telemetry(
        service, StoveCare(sessions, offline_after), RollupTelemetry(sessions, offline_after)
    )


def mqtt_client_id(settings: TelemetrySettings, storage: StorageSettings, worker: int) -> str:
    """The MQTT client id of worker `worker` of this deployment: MQTT_CLIENT_ID when set,
    else one derived from what makes the deployment (its database, topic prefix and shared
    group), never from the process. A restarted worker so resumes its own persistent
    session: a session named after a process id would stay subscribed to the shared group
    after the process ends, and the broker would keep handing it a share of the stream."""
    if settings.mqtt_client_id:
        base = settings.mqtt_client_id
        return base if worker == 0 else f"{base}-{worker}"
    # The database, without its password (rotating it makes no new deployment); the default
    # SQLite file by its full path, whatever directory the process starts in.
    database = storage.database_url or f"sqlite:///{storage.data_dir.resolve() / 'twinhub.db'}"
    url = make_url(database)._replace(password=None).render_as_string(hide_password=False)
    identity = "\n".join((url, settings.mqtt_topic_prefix, settings.mqtt_shared_group))
    return f"twinhub-{hashlib.sha256(identity.encode()).hexdigest()[:12]}-{worker}"


def start_telemetry_work(
    settings: TelemetrySettings,
    service: TelemetryService,
    tokens: DeviceTokenService,
    client_id: str,
) -> tuple[list[asyncio.Task[None]], Any]:
    """The telemetry background work: the retention pruner, the offline watch, and the MQTT
    subscriber (as `client_id`) when MQTT_URL is set (returned second, else None)."""
    tasks = [
        asyncio.create_task(service.run_pruner(), name="telemetry-prune"),
        asyncio.create_task(service.run_offline_watch(), name="telemetry-offline"),
    ]
    if settings.mqtt_url is None:
        return tasks, None
    from twinhub.telemetry.mqtt import MqttIngest

    mqtt = MqttIngest(settings, service, tokens, client_id)
    tasks.append(asyncio.create_task(mqtt.run(), name="telemetry-mqtt"))
    return tasks, mqtt
