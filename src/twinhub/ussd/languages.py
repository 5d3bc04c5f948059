"""The menu language each phone and each customer chose, kept in `ussd_languages`.

Read once when a session starts (the phone's) and once at log-in (the customer's); the
session record carries the language after that, so other requests never ask the database.

A new session is the gateway's busiest path, and most phones never chose a language, so
reads go through a cache that remembers "no choice" too: Redis when the platform has it
(every worker sees a change at once: `remember` writes the database, then the cache), else
this process's own bounded LRU (without Redis the gateway is one process, and every change
goes through it). The database stays the record; a cache entry lives `ttl` seconds, so a
change made behind the gateway's back (a restore) shows within that time.

Benchmarks walk a new phone per session, so the cache misses once per session; through an
ORM session and aiosqlite's worker thread that miss cost about 0.9 ms of CPU, two thirds
of the gateway's work. On a SQLite file the miss is read instead through one read-only
sqlite3 connection, inline on the event loop (a primary-key look-up: microseconds), as the
node's read model does; an error there falls back to the ORM read, whose failures the
gateway already reports.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections import OrderedDict

from redis.asyncio import Redis
from redis.exceptions import RedisError
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.dialects import dialect_of
from twinhub.db.models import UssdLanguage
from twinhub.kernel.clock import utcnow
from twinhub.logging import get_logger

log = get_logger(__name__)
NONE = ""  # cached: this key chose no language
CACHE_TTL_SECONDS = 3600
LOCAL_ENTRIES = 100_000  # about 10 MB of phones in the process's own cache
SELECT_LANGUAGE = "SELECT language FROM ussd_languages WHERE key = ?"


def phone_key(phone_number: str) -> str:
    return f"phone:{phone_number}"


def customer_key(customer_id: str) -> str:
    return f"customer:{customer_id}"


class LanguageMemory:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        redis: Redis | None = None,
        prefix: str = "twinhub:",
        ttl: int = CACHE_TTL_SECONDS,
        local_entries: int = LOCAL_ENTRIES,
        sqlite_path: str | None = None,
    ) -> None:
        self._sessions = sessions
        self._sqlite_path = sqlite_path  # the database file, when it is SQLite on a file
        self._reader: sqlite3.Connection | None = None
        self._redis = redis
        self._prefix = f"{prefix}ussd:language:"
        self._ttl = ttl
        self._local: OrderedDict[str, tuple[float, str]] = OrderedDict()
        self._local_entries = local_entries

    async def recalled(self, key: str) -> str | None:
        """The code stored under `key` as stored (the caller checks it is still served)."""
        cached = await self._cached(key)
        if cached is not None:
            return cached or None
        read = self._read_file(key) if self._sqlite_path is not None else None
        if read is not None:
            found = read[0]
        else:
            async with self._sessions() as session:
                found = await session.scalar(
                    select(UssdLanguage.language).where(UssdLanguage.key == key)
                )
        # Only where nothing is cached: a choice remembered meanwhile must not be overwritten
        # by what this read saw before it.
        await self._cache({key: found or NONE}, only_new=True)
        return found

    def _read_file(self, key: str) -> tuple[str | None] | None:
        """(the stored code,) read through the read-only connection; None when that failed
        (the connection is dropped and reopened on the next miss)."""
        try:
            if self._reader is None:
                reader = sqlite3.connect(
                    f"file:{self._sqlite_path}?mode=ro",
                    uri=True,
                    isolation_level=None,  # autocommit: each read sees the newest commit
                )
                reader.execute("PRAGMA busy_timeout=1000")
                self._reader = reader
            row = self._reader.execute(SELECT_LANGUAGE, (key,)).fetchone()
        except sqlite3.Error as error:
            log.warning("ussd language read-only connection failed", error=type(error).__name__)
            self.close()
            return None
        return (row[0] if row else None,)

    def close(self) -> None:
        """Close the read-only connection (the next miss opens it again)."""
        if self._reader is not None:
            reader, self._reader = self._reader, None
            reader.close()

    async def remember(self, language: str, *keys: str) -> None:
        """Store `language` under every key, in one transaction (an upsert each)."""
        async with self._sessions.begin() as session:
            insert = dialect_of(session).insert
            for key in keys:
                statement = insert(UssdLanguage).values(
                    key=key, language=language, updated_at=utcnow()
                )
                await session.execute(
                    statement.on_conflict_do_update(
                        index_elements=["key"],
                        set_={"language": language, "updated_at": utcnow()},
                    )
                )
        await self._cache(dict.fromkeys(keys, language))

    def cached_now(self, key: str) -> str | None:
        """What `_cached` answers from this process's own cache, without awaiting; None
        when it does not know or the cache is Redis's (then `recalled` must be awaited)."""
        if self._redis is not None:
            return None
        entry = self._local.get(key)
        if entry is None or entry[0] < time.monotonic():
            return None
        self._local.move_to_end(key)
        return entry[1]

    async def _cached(self, key: str) -> str | None:
        """The cached code, NONE for "no choice", None when the cache does not know."""
        if self._redis is not None:
            try:
                value = await self._redis.get(self._prefix + key)
            except RedisError:  # the database answers instead
                return None
            return value.decode() if isinstance(value, bytes) else value
        return self.cached_now(key)

    async def _cache(self, values: dict[str, str], only_new: bool = False) -> None:
        if self._redis is not None:
            try:
                async with self._redis.pipeline(transaction=False) as pipe:
                    for key, value in values.items():
                        pipe.set(self._prefix + key, value, ex=self._ttl, nx=only_new)
                    await pipe.execute()
            except RedisError:
                # A stale entry would show the old language: drop what may be there.
                log.warning("ussd language cache not updated; entries dropped")
                with contextlib.suppress(RedisError):
                    await self._redis.delete(*(self._prefix + key for key in values))
            return
        now = time.monotonic()
        for key, value in values.items():
            held = self._local.get(key)
            if only_new and held is not None and held[0] >= now:
                continue
            self._local[key] = (now + self._ttl, value)
            self._local.move_to_end(key)
        while len(self._local) > self._local_entries:
            self._local.popitem(last=False)
