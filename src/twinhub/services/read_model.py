"""The chain node's read path: the ledger height and domain records without an ORM session
per request.

A profile of the node (py-spy, GetEntity under h2load) showed most of each request spent
setting up database access rather than in SQL: an AsyncSession for the one-row ledger
height and another for the entity, each crossing aiosqlite's worker thread and
SQLAlchemy's greenlet bridge, with the statement rebuilt each time. The same SELECTs take
tens of microseconds in plain sqlite3.

So on SQLite the node reads through one long-lived, read-only sqlite3 connection in WAL
mode, inline on the event loop: each read is a primary-key look-up or a bounded keyset
page (no OFFSET scan unless a client asks for an offset), short enough that handing it to
a thread would cost more than it saves. Outside a transaction every statement sees the
newest committed state, as the writer's WAL commits land. The ledger height is cached and
re-read only when `PRAGMA data_version` says another connection has committed since.

The records are the ones the domain service builds (`stored_record` with inheritance
resolved), field for field; tests hold the two to that. On PostgreSQL (and an in-memory
SQLite database, which another connection cannot open) this falls back to the services.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy.engine import make_url

from twinhub.platform import Platform
from twinhub.services.domains import resolve_inheritance
from twinhub.services.paging import Window, WindowPage

# Fixed statements (sqlite3 keeps them prepared); every value is a bound parameter.
SELECT_DOMAINS = (
    "SELECT did, seq, type, class_did, twin_class, parent_did, controller, services, "
    "credentials, metadata, properties, valid_from, valid_until, status, verified, version, "
    "created_at, updated_at FROM domains "
)
BY_DID = SELECT_DOMAINS + "WHERE did = ?"
BY_DIDS = SELECT_DOMAINS + "WHERE did IN (SELECT value FROM json_each(?))"  # noqa: S608
# A page is walked on the seq index reading only (did, seq, version); whole rows are
# fetched only for the ones whose messages are not built yet.
SELECT_KEYS = "SELECT did, seq, version FROM domains "
PAGES = {  # (has a key, reverse) -> statement; LIMIT and OFFSET are parameters
    (False, False): SELECT_KEYS + "ORDER BY seq LIMIT ? OFFSET ?",
    (False, True): SELECT_KEYS + "ORDER BY seq DESC LIMIT ? OFFSET ?",
    (True, False): SELECT_KEYS + "WHERE seq > ? ORDER BY seq LIMIT ? OFFSET ?",
    (True, True): SELECT_KEYS + "WHERE seq < ? ORDER BY seq DESC LIMIT ? OFFSET ?",
}
EDGES = "SELECT type, target_did FROM relationships WHERE source_did = ?"
TYPES = "SELECT did, type FROM domains WHERE did IN (SELECT value FROM json_each(?))"


def _iso(text: str | None) -> str | None:
    """A stored UTC datetime as the services render it (isoformat with +00:00)."""
    if text is None:
        return None
    return datetime.fromisoformat(text).replace(tzinfo=UTC).isoformat()


@dataclass(frozen=True, slots=True)
class DomainRow:
    """One domain row as stored; `record()` decodes it only when a caller needs it (the
    node keeps built messages per version, so most rows are never decoded)."""

    did: str
    version: int
    seq: int
    raw: tuple[Any, ...] | None  # None: not fetched, the caller had it built already

    def record(self, edges: Iterable[tuple[str, str]] = ()) -> dict[str, Any]:
        """The record `stored_record` makes of this row and its outgoing edges."""
        (did, _seq, kind, class_did, twin, parent, controller, services, credentials,
         meta, properties, valid_from, valid_until, status, verified, version, created,
         updated) = self.raw or ()  # fmt: skip
        return {
            "did": did,
            "type": kind,
            "class": class_did,
            "twinClass": twin,
            "controller": orjson.loads(controller),
            "services": orjson.loads(services),
            "verifiableCredential": orjson.loads(credentials),
            "metadata": orjson.loads(meta),
            "properties": orjson.loads(properties),
            "relationships": [{"type": t, "target": target} for t, target in sorted(edges)],
            "parent": parent,
            "validFrom": _iso(valid_from),
            "validUntil": _iso(valid_until),
            "status": status,
            "verified": bool(verified),
            "version": version,
            "createdAt": _iso(created),
            "updatedAt": _iso(updated),
        }


def _row(raw: tuple[Any, ...]) -> DomainRow:
    return DomainRow(did=raw[0], version=raw[15], seq=raw[1], raw=raw)


class ReadModel:
    """Reads of the node's hot queries; see the module docstring."""

    def __init__(self, platform: Platform) -> None:
        self._platform = platform
        url = make_url(platform.settings.resolved_database_url)
        database = url.database if url.get_backend_name() == "sqlite" else None
        self._path = database if database and database != ":memory:" else None
        self._cache_kib = platform.settings.sqlite_cache_mib * 1024
        self._connection: sqlite3.Connection | None = None
        self._data_version = -1
        self._height = 0

    @property
    def fast(self) -> bool:
        """Whether reads go through the direct connection (SQLite on a file)."""
        return self._path is not None

    def _db(self) -> sqlite3.Connection:
        if self._connection is None:
            assert self._path is not None
            connection = sqlite3.connect(
                f"file:{self._path}?mode=ro",
                uri=True,
                isolation_level=None,  # autocommit: each statement sees the newest commit
                cached_statements=64,
            )
            connection.execute("PRAGMA busy_timeout=1000")
            connection.execute(f"PRAGMA cache_size=-{self._cache_kib}")
            connection.execute(f"PRAGMA mmap_size={self._cache_kib * 1024 * 4}")
            self._connection = connection
        return self._connection

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
            self._data_version = -1

    async def height(self) -> int:
        """The ledger height, re-read only after another connection has committed."""
        if self._path is None:
            return await self._platform.ledger.height()
        db = self._db()
        (version,) = db.execute("PRAGMA data_version").fetchone()
        if version != self._data_version:
            found = db.execute("SELECT height FROM ledger_head WHERE id = 1").fetchone()
            self._height = found[0] if found else 0
            self._data_version = version
        return self._height

    async def domain_row(self, did: str) -> DomainRow | None:
        """The stored row of `did` (None when unknown); None on the fallback path too, so
        check `fast` first."""
        if self._path is None:
            return None
        raw = self._db().execute(BY_DID, (did,)).fetchone()
        return _row(raw) if raw else None

    async def domain(self, row: DomainRow) -> dict[str, Any]:
        """The resolved record of a row: its edges, and what it inherits from its protocol."""
        edges = self._db().execute(EDGES, (row.did,)).fetchall()
        protocol = await self._platform.protocols.get(row.raw[3])
        return resolve_inheritance(row.record(edges), protocol)

    async def types_of(self, dids: list[str]) -> dict[str, str]:
        if self._path is None:
            return await self._platform.domains.types_of(dids)
        if not dids:
            return {}
        rows = self._db().execute(TYPES, (orjson.dumps(dids).decode(),))
        return dict(rows.fetchall())

    async def domain_page(
        self, window: Window, built: Callable[[str, int], bool] = lambda did, version: False
    ) -> WindowPage[DomainRow]:
        """A Cosmos page of every domain by creation order: after the key (keyset, one
        index range whatever the page number) or, when a client asks, at an offset. Rows
        for which `built(did, version)` is true come without their columns."""
        keyed = window.key is not None
        params = [window.key] if keyed else []
        params += [window.limit + 1, window.offset]
        db = self._db()
        keys = db.execute(PAGES[(keyed, window.reverse)], params).fetchall()
        more = len(keys) > window.limit
        keys = keys[: window.limit]
        missing = [did for did, _seq, version in keys if not built(did, version)]
        fetched: dict[str, tuple[Any, ...]] = {}
        if missing:
            found = db.execute(BY_DIDS, (orjson.dumps(missing).decode(),)).fetchall()
            fetched = {raw[0]: raw for raw in found}
        rows = []
        for did, seq, version in keys:
            raw = fetched.get(did)
            # A row fetched after a newer commit carries its own (newer) version.
            rows.append(_row(raw) if raw else DomainRow(did, version, seq, None))
        total = await asyncio.to_thread(self._count) if window.count_total else None
        return WindowPage(rows, keys[-1][1] if more and keys else None, total)

    def _count(self) -> int:
        """Counting is a scan: it runs on a worker thread, off the event loop."""
        assert self._path is not None
        connection = sqlite3.connect(f"file:{self._path}?mode=ro", uri=True)
        try:
            return int(connection.execute("SELECT count(*) FROM domains").fetchone()[0])
        finally:
            connection.close()
