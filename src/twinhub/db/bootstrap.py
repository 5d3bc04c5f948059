"""The storage context's start: the database engine and its health watch, and the Redis
client when REDIS_URL is set, all from StorageSettings."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session

from twinhub.db.engine import create_engine, create_sessionmaker
from twinhub.db.health import DatabaseMonitor
from twinhub.settings import StorageSettings


@dataclass(frozen=True)
class Storage:
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    database: DatabaseMonitor
    redis: Redis | None


def build_storage(settings: StorageSettings, session_class: type[Session] = Session) -> Storage:
    """`session_class`: the sessions' own class (the platform's bus hears of its commits)."""
    engine = create_engine(settings)
    timeout = settings.connect_timeout_seconds
    redis = (
        Redis.from_url(
            settings.redis_url.get_secret_value(),
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            health_check_interval=30,
        )
        if settings.redis_url
        else None
    )
    return Storage(
        engine,
        create_sessionmaker(engine, session_class),
        DatabaseMonitor(engine, interval=settings.health_interval_seconds, timeout=timeout),
        redis,
    )
