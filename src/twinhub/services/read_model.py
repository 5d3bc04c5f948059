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
resolved), field for field; tests hold the two to that. The node's claims and token
queries (Claim, ClaimList, TokenMetadata, TokenList, TokenDoc) read here too: a claim and
its evaluations, keyset pages of claims on their seq index, token classes and their
retirements and transfers, only the columns the node's messages carry; tests hold their
answers to the services' as well. On PostgreSQL the same statements run on an asyncpg
pool of the node's own; an in-memory SQLite database, which another connection cannot
open, falls back to the services.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, Protocol

import orjson
from sqlalchemy import JSON
from sqlalchemy.engine import make_url

from twinhub.db.failures import Failure, classify
from twinhub.db.models import Claim, Evaluation, UtcDateTime
from twinhub.kernel.identifiers import is_did
from twinhub.services.domains import DomainService, resolve_inheritance
from twinhub.services.ledger import Ledger
from twinhub.services.paging import Window, WindowPage, encode_cursor
from twinhub.services.protocols import ProtocolService
from twinhub.settings import Settings

# Fixed statements (sqlite3 keeps them prepared); every value is a bound parameter.
SELECT_DOMAINS = (
    "SELECT did, seq, type, class_did, twin_class, parent_did, controller, services, "
    "credentials, metadata, properties, valid_from, valid_until, status, verified, version, "
    "created_at, updated_at FROM domains "
)
BY_DID = SELECT_DOMAINS + "WHERE did = ?"
KEY_BY_DID = "SELECT did, seq, version FROM domains WHERE did = ?"
BY_DIDS = SELECT_DOMAINS + "WHERE did IN (SELECT value FROM json_each(?))"  # noqa: S608
# A page is walked on the seq index reading only (did, seq, version); whole rows are
# fetched only for the ones whose messages are not built yet.
SELECT_KEYS = "SELECT did, seq, version FROM domains "


def _keyset_pages(select: str) -> dict[tuple[bool, bool], str]:
    """(has a key, reverse) -> the page statement walking `select`'s table on its seq
    index; the key (if any), LIMIT and OFFSET are parameters."""
    return {
        (False, False): select + "ORDER BY seq LIMIT ? OFFSET ?",
        (False, True): select + "ORDER BY seq DESC LIMIT ? OFFSET ?",
        (True, False): select + "WHERE seq > ? ORDER BY seq LIMIT ? OFFSET ?",
        (True, True): select + "WHERE seq < ? ORDER BY seq DESC LIMIT ? OFFSET ?",
    }


PAGES = _keyset_pages(SELECT_KEYS)
# The registry's list pages (`DomainRecords.list_page`): after a sequence number, all
# domains or those of one type or class, on the (type, seq) and (class_did, seq) indexes.
LIST_KEYS = {
    None: SELECT_KEYS + "WHERE seq > ? ORDER BY seq LIMIT ?",
    "type": SELECT_KEYS + "WHERE type = ? AND seq > ? ORDER BY seq LIMIT ?",
    "class": SELECT_KEYS + "WHERE class_did = ? AND seq > ? ORDER BY seq LIMIT ?",
}
KEPT_ITEMS = 16384  # rendered list items kept by `list_page` (about 1 KiB each)
KEPT_PAGES = 256  # list pages kept by `list_page`
EDGES = "SELECT type, target_did FROM relationships WHERE source_did = ?"
TYPES = "SELECT did, type FROM domains WHERE did IN (SELECT value FROM json_each(?))"
COUNT = "SELECT count(*) FROM domains"
KEPT_ANSWERS = 4096  # records kept by `record_now` (about 2 KiB each with their rows)


def _numbered(statement: str) -> str:
    """A statement's `?` parameters as PostgreSQL's `$1, $2, ...`."""
    parts = statement.split("?")
    return parts[0] + "".join(f"${n}{rest}" for n, rest in enumerate(parts[1:], start=1))


# PostgreSQL's forms of the same statements (JSON columns come back as text, as in SQLite).
PG_BY_DID = _numbered(BY_DID)
PG_KEY_BY_DID = _numbered(KEY_BY_DID)
PG_BY_DIDS = SELECT_DOMAINS + "WHERE did = ANY($1::text[])"
PG_PAGES = {shape: _numbered(statement) for shape, statement in PAGES.items()}
PG_LIST_KEYS = {kind: _numbered(statement) for kind, statement in LIST_KEYS.items()}
PG_EDGES = _numbered(EDGES)
PG_TYPES = "SELECT did, type FROM domains WHERE did = ANY($1::text[])"
PG_POOL_SIZE = 4


async def _nothing_to_reset(connection: Any) -> None:
    """The records pool's connections only run single read statements: no SET, LISTEN,
    advisory lock or cursor outlives one. asyncpg's default reset on every release
    (`pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL`) was a round trip of its
    own after each statement, as many as the reads themselves. (asyncpg still rolls back a
    transaction left open before calling this.)"""


# Claims and credit tokens (the node's ixo claims and token queries): only the columns the
# node's messages carry. A claims page is walked on the unique seq index, as domains are.
SELECT_CLAIMS = (
    "SELECT id, seq, collection_id, agent, status, credential_id, submitted_at, evaluated_at "
    "FROM claims "
)
CLAIM_BY_ID = SELECT_CLAIMS + "WHERE id = ?"
CLAIMS_BY_IDS = SELECT_CLAIMS + "WHERE id IN (SELECT value FROM json_each(?))"  # noqa: S608
# A page is walked reading each claim's id, seq and stamp (`claim_stamp`) only; whole rows
# are read for the claims whose messages are not built at that stamp.
SELECT_CLAIM_KEYS = "SELECT id, seq, status, evaluated_at, credential_id FROM claims "
CLAIM_PAGES = _keyset_pages(SELECT_CLAIM_KEYS)
SELECT_EVALUATIONS = "SELECT claim_id, oracle, actor, status, amount, created_at FROM evaluations "
EVALUATIONS_OF = SELECT_EVALUATIONS + "WHERE claim_id = ? ORDER BY id"
EVALUATIONS_OF_MANY = (
    SELECT_EVALUATIONS + "WHERE claim_id IN (SELECT value FROM json_each(?)) ORDER BY id"  # noqa: S608
)
COLLECTION_PROTOCOL = "SELECT protocol_did FROM claim_collections WHERE id = ?"
COUNT_CLAIMS = "SELECT count(*) FROM claims"
TOKEN_BY_NAME = "SELECT name, protocol_did, minted FROM credit_tokens WHERE name = ?"  # noqa: S105
TOKENS = "SELECT name, protocol_did, minted FROM credit_tokens ORDER BY name"
MOVEMENTS_OF = (
    "SELECT id, reason, amount, sender FROM credit_movements "
    "WHERE token = ? AND kind = ? ORDER BY id"
)


class Columns:
    """Every column of a table's model, read as stored and loaded as the ORM loads it into
    an object with the model's attribute names (its times UTC-aware, its JSON decoded):
    the registry's claim read (`ClaimRecords.claim_now`) reads the claim and its
    evaluations so, and any column either gains is in its stamp and in the row."""

    def __init__(self, model: Any) -> None:
        table = model.__table__
        mapper = model.__mapper__
        self.names = ", ".join(column.name for column in table.columns)
        self.table = table.name
        self._loads: list[tuple[str, Callable[[Any], Any]]] = []
        for column in table.columns:
            kind = column.type
            if isinstance(kind, UtcDateTime):
                load: Callable[[Any], Any] = _utc
            elif isinstance(kind, JSON):
                load = _json
            else:
                load = _same
            self._loads.append((mapper.get_property_by_column(column).key, load))

    def loaded(self, raw: tuple[Any, ...]) -> SimpleNamespace:
        pairs = zip(self._loads, raw, strict=True)
        return SimpleNamespace(**{key: load(value) for (key, load), value in pairs})


def _utc(value: str | datetime | None) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _json(value: Any) -> Any:
    return orjson.loads(value) if isinstance(value, str | bytes) else value


def _same(value: Any) -> Any:
    return value


CLAIM_COLUMNS = Columns(Claim)
EVALUATION_COLUMNS = Columns(Evaluation)
CLAIM_STAMP = f"SELECT {CLAIM_COLUMNS.names} FROM claims WHERE id = ?"  # noqa: S608
EVALUATIONS_STAMP = (
    f"SELECT {EVALUATION_COLUMNS.names} FROM evaluations WHERE claim_id = ? ORDER BY id"  # noqa: S608
)
PG_CLAIM_STAMP = _numbered(CLAIM_STAMP)
# The registry's claims list of one collection (`ClaimRecords.collection_page`), on the
# (collection_id, seq) index: whole rows, each its item's stamp.
COLLECTION_PAGE = (
    f"SELECT {CLAIM_COLUMNS.names} FROM claims "  # noqa: S608
    "WHERE collection_id = ? AND seq > ? ORDER BY seq LIMIT ?"
)
PG_COLLECTION_PAGE = _numbered(COLLECTION_PAGE)
PG_EVALUATIONS_STAMP = _numbered(EVALUATIONS_STAMP)
# What the registry renders a claim's answer from: its row and its evaluations, loaded.
ClaimRender = Callable[[Any, list[Any]], bytes]
# What it renders a claims list's items from: the claims' rows, loaded.
ItemsRender = Callable[[list[Any]], list[bytes]]
PG_CLAIM_BY_ID = _numbered(CLAIM_BY_ID)
PG_CLAIMS_BY_IDS = SELECT_CLAIMS + "WHERE id = ANY($1::text[])"
PG_CLAIM_PAGES = {shape: _numbered(statement) for shape, statement in CLAIM_PAGES.items()}


def _printed(
    pages: dict[tuple[bool, bool], str], item: str, pg: bool
) -> dict[tuple[bool, bool], str]:
    """The page statements of `pages` as one text naming each row of the page by `item`
    (an expression of its seq and version or stamp), joined in SQL: one row of one column
    for the whole page (see `ReadModel.page_print`)."""
    joined = f"string_agg({item}, ',')" if pg else f"group_concat({item}, ',')"
    return {shape: f"SELECT {joined} FROM ({page}) AS page" for shape, page in pages.items()}  # noqa: S608


DOMAIN_PRINTS = _printed(PAGES, "seq || '.' || version", pg=False)
PG_DOMAIN_PRINTS = _printed(PG_PAGES, "concat(seq, '.', version)", pg=True)
CLAIM_PRINTS = _printed(
    CLAIM_PAGES,
    "seq || '.' || status || '.' || ifnull(evaluated_at, '') || '.' || ifnull(credential_id, '')",
    pg=False,
)
PG_CLAIM_PRINTS = _printed(
    PG_CLAIM_PAGES, "concat(seq, '.', status, '.', evaluated_at, '.', credential_id)", pg=True
)
PG_EVALUATIONS_OF = _numbered(EVALUATIONS_OF)
PG_EVALUATIONS_OF_MANY = SELECT_EVALUATIONS + "WHERE claim_id = ANY($1::text[]) ORDER BY id"
PG_COLLECTION_PROTOCOL = _numbered(COLLECTION_PROTOCOL)
PG_TOKEN_BY_NAME = _numbered(TOKEN_BY_NAME)
PG_MOVEMENTS_OF = _numbered(MOVEMENTS_OF)
HEIGHT = "SELECT height FROM ledger_head WHERE id = 1"
# PostgreSQL: the snapshot and the height of one statement (one snapshot for both).
PG_STATE = (
    "SELECT pg_current_snapshot()::text, coalesce((SELECT height FROM ledger_head WHERE id = 1), 0)"
)


def _iso_of(value: str | datetime | None) -> str | None:
    """A stored UTC datetime (SQLite: text, PostgreSQL: a datetime) as the services render
    it (isoformat with +00:00)."""
    if value is None:
        return None
    if isinstance(value, str):
        return datetime.fromisoformat(value).replace(tzinfo=UTC).isoformat()
    return value.astimezone(UTC).isoformat()


# A record has up to four times, and the same ones are read again and again (every read of
# a twin): each converted once (the cache's hits cost no Python call).
_iso = functools.lru_cache(maxsize=8192)(_iso_of)


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


@dataclass(frozen=True, slots=True)
class EvaluationRow:
    """One evaluation of a claim, as the node's message needs it; `at` as stored (UTC:
    naive text on SQLite, an aware datetime on PostgreSQL)."""

    oracle: str
    actor: str
    status: str
    amount: int | None
    at: str | datetime


@dataclass(frozen=True, slots=True)
class ClaimRow:
    """One claim as the node's message needs it, times as stored (see EvaluationRow).
    `evaluations` (oldest first) is None when the caller had the claim's message built
    for its `stamp` already and so was not read."""

    id: str
    seq: int
    collection: int
    agent: str
    status: str
    credential: str | None
    submitted_at: str | datetime
    evaluated_at: str | datetime | None
    evaluations: tuple[EvaluationRow, ...] | None

    @property
    def stamp(self) -> tuple[Any, ...]:
        """What changes with each evaluation of the claim (every evaluation sets its
        status and time, an approval its credential, in the same commit): a claim's message
        is the same for as long as its stamp is (its collection, agent and submission never
        change)."""
        return (self.status, self.evaluated_at, self.credential)


def claim_stamp(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """`ClaimRow.stamp` of a claim's key as `claim_keys` gives it, (id, seq, *stamp): a
    page checks fifty of them without building rows."""
    return key[2:]


@dataclass(frozen=True, slots=True)
class TokenRow:
    name: str
    protocol: str
    minted: int


@dataclass(frozen=True, slots=True)
class MovementRow:
    id: int
    reason: str | None
    amount: int
    sender: str | None


def _evaluation(raw: tuple[Any, ...]) -> EvaluationRow:
    return EvaluationRow(raw[1], raw[2], raw[3], raw[4], raw[5])


def claim_row(raw: tuple[Any, ...], evaluations: Iterable[EvaluationRow] | None) -> ClaimRow:
    """A claim's row (`SELECT_CLAIMS`) with its evaluations (None: not read)."""
    return ClaimRow(*raw, None if evaluations is None else tuple(evaluations))


def _json_answer(body: bytes) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """A JSON body with the raw headers Starlette's `Response(body,
    media_type="application/json")` gives it, in its order."""
    return [
        (b"content-length", str(len(body)).encode("latin-1")),
        (b"content-type", b"application/json"),
    ], body


class ReadSources(Protocol):
    """What the read model reads through besides its own connection: the settings and the
    services whose caches it shares. The platform is one; naming only these keeps the read
    model below the platform that builds it."""

    @property
    def settings(self) -> Settings: ...

    @property
    def ledger(self) -> Ledger: ...

    @property
    def protocols(self) -> ProtocolService: ...

    @property
    def domains(self) -> DomainService: ...


class ReadModel:
    """Reads of the node's hot queries (see the module docstring): the connections, the
    ledger height and page prints here; records in `domains`, claims and tokens in
    `claims`."""

    def __init__(self, sources: ReadSources) -> None:
        self._sources = sources
        url = make_url(sources.settings.storage.resolved_database_url)
        database = url.database if url.get_backend_name() == "sqlite" else None
        self._path = database if database and database != ":memory:" else None
        self._cache_kib = sources.settings.storage.sqlite_cache_mib * 1024
        self._connection: sqlite3.Connection | None = None
        self._data_version: object = None  # the version `_height` was read at
        self._height = 0
        self._pg_url = (
            url.set(drivername="postgresql").render_as_string(hide_password=False)
            if url.get_backend_name() == "postgresql"
            else None
        )
        self._pg: Any = None  # asyncpg.Connection, opened on first use
        self._pool: Any = None  # asyncpg.Pool for the records, opened on first use
        self._pool_opening = asyncio.Lock()
        self._pg_lock = asyncio.Lock()
        self._pg_started = 0  # state reads begun so far
        self._pg_done = 0  # the number of the last state read that finished
        self._pg_state: tuple[str, int] | None = None
        self.domains = DomainRecords(self, sources)
        self.claims = ClaimRecords(self)

    @property
    def on_postgresql(self) -> bool:
        """Whether the statements run on PostgreSQL (else on the SQLite file, if any)."""
        return self._pg_url is not None

    @property
    def on_file(self) -> bool:
        """Whether there is a SQLite file to read inline (not PostgreSQL, not in memory)."""
        return self._path is not None

    @property
    def fast(self) -> bool:
        """Whether records are read here (SQLite on a file, PostgreSQL), not by the
        services."""
        return self._path is not None or self._pg_url is not None

    def connection(self) -> sqlite3.Connection:
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
        self._data_version = None
        if self._pg is not None:
            self._pg.terminate()
            self._pg = None
        if self._pool is not None:
            self._pool.terminate()
            self._pool = None

    async def aclose(self) -> None:
        """close(), letting PostgreSQL know the connection ends."""
        if self._pg is not None:
            pg, self._pg = self._pg, None
            with contextlib.suppress(Exception):
                await asyncio.wait_for(pg.close(), 2.0)
        if self._pool is not None:
            pool, self._pool = self._pool, None
            with contextlib.suppress(Exception):
                await asyncio.wait_for(pool.close(), 2.0)
        self.close()

    async def version(self) -> object | None:
        """The database's version (see the module docstring); None when there is no cheap
        one (an in-memory SQLite database): then nothing may be kept across queries."""
        if self._path is not None:
            return self.connection().execute("PRAGMA data_version").fetchone()[0]
        if self._pg_url is not None:
            return (await self._pg_read())[0]
        return None

    async def height(self, version: object | None = None) -> int:
        """The ledger height; `version` is one `version()` just returned (the height is
        re-read only when the database has changed since it was last read)."""
        if self._pg_url is not None:
            state = self._pg_state
            if version is not None and state is not None and state[0] == version:
                return state[1]
            return (await self._pg_read())[1]
        if self._path is None:
            return await self._sources.ledger.height()
        db = self.connection()
        if version is None:
            version = db.execute("PRAGMA data_version").fetchone()[0]
        if version != self._data_version:
            found = db.execute(HEIGHT).fetchone()
            self._height = found[0] if found else 0
            self._data_version = version
        return self._height

    async def _pg_read(self) -> tuple[str, int]:
        """(snapshot, height) from a statement that began after this call did."""
        arrived = self._pg_started
        async with self._pg_lock:
            if self._pg_done > arrived and self._pg_state is not None:
                return self._pg_state  # read by a statement begun after we arrived
            self._pg_started += 1
            number = self._pg_started
            try:
                if self._pg is None:
                    self._pg = await self._pg_connect()
                snapshot, height = await self._pg.fetchrow(PG_STATE)
            except Exception as error:
                pg, self._pg = self._pg, None
                if pg is not None:
                    pg.terminate()
                if isinstance(error, OSError) or classify(error) is not Failure.UNREACHABLE:
                    raise
                raise ConnectionError("the database is unavailable") from error
            self._pg_state = (snapshot, int(height))
            self._pg_done = number
            return self._pg_state

    def _pg_options(self) -> dict[str, Any]:
        settings = self._sources.settings
        statement = settings.storage.statement_timeout_seconds
        return {
            "timeout": settings.storage.connect_timeout_seconds,
            "command_timeout": statement + 0.5,
            "server_settings": {
                "statement_timeout": str(int(statement * 1000)),
                "application_name": "twinhub-node-reads",
            },
        }

    async def _pg_connect(self) -> Any:
        import asyncpg

        return await asyncpg.connect(self._pg_url, **self._pg_options())

    async def fetch(self, statement: str, *args: Any) -> list[tuple[Any, ...]]:
        """Rows of one statement on the records pool (asyncpg prepares and keeps each
        statement per connection); a database out of reach is ConnectionError, as in
        `version`; any other failure comes as the driver raised it."""
        import asyncpg

        try:
            if self._pool is None:
                async with self._pool_opening:
                    if self._pool is None:
                        self._pool = await asyncpg.create_pool(
                            self._pg_url,
                            min_size=1,
                            max_size=PG_POOL_SIZE,
                            reset=_nothing_to_reset,
                            **self._pg_options(),
                        )
            async with self._pool.acquire() as connection:
                return [tuple(row) for row in await connection.fetch(statement, *args)]
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
            # A value the database refuses (db/failures.py) is the request's, not an outage.
            if isinstance(error, OSError) or classify(error) is not Failure.UNREACHABLE:
                raise
            raise ConnectionError("the database is unavailable") from error

    async def page_print(self, kind: str, window: Window) -> str:
        """The page `window` of domains (`kind` "domains") or claims ("claims") named in one
        text: each row's seq and version (a claim's stamp) as SQL joins them, the row after
        the page included (it decides the next key). Two equal texts are the same page with
        the same items: a node keeps a page's joined items under it and reads no row of a
        page it has built (`Servicer.pages`); one statement, one value to hash."""
        keyed = window.key is not None
        params: list[Any] = [window.key] if keyed else []
        params += [window.limit + 1, window.offset]
        shape = (keyed, window.reverse)
        if kind == "domains":
            found = await self.rows(DOMAIN_PRINTS[shape], PG_DOMAIN_PRINTS[shape], *params)
        else:
            found = await self.rows(CLAIM_PRINTS[shape], PG_CLAIM_PRINTS[shape], *params)
        return str(found[0][0] or "")

    async def page_total(self, kind: str, window: Window) -> int | None:
        """The count of domains or claims (see `page_print`) when the page asks for it."""
        return await self.total(window, COUNT if kind == "domains" else COUNT_CLAIMS)

    async def total(self, window: Window, statement: str) -> int | None:
        """The row count a page asked for (`count_total`), else None."""
        if not window.count_total:
            return None
        if self._pg_url is not None:
            return int((await self.fetch(statement))[0][0])
        return await asyncio.to_thread(self._count, statement)

    def _count(self, statement: str = COUNT) -> int:
        """Counting is a scan: it runs on a worker thread, off the event loop."""
        assert self._path is not None
        connection = sqlite3.connect(f"file:{self._path}?mode=ro", uri=True)
        try:
            return int(connection.execute(statement).fetchone()[0])
        finally:
            connection.close()

    async def rows(self, statement: str, pg_statement: str, *args: Any) -> list[tuple[Any, ...]]:
        """Rows of one fixed statement: inline on the SQLite connection, or on the pool."""
        if self._pg_url is not None:
            return await self.fetch(pg_statement, *args)
        return self.connection().execute(statement, args).fetchall()


class DomainRecords:
    """Domain records and their pages, read as the domain service builds them."""

    def __init__(self, reads: ReadModel, sources: ReadSources) -> None:
        self._reads = reads
        self._sources = sources
        # did: (row, edges, protocol view, response headers, body) of `record_now`'s answers
        self._answers: dict[str, tuple[tuple[Any, ...], list[Any], Any, list[Any], bytes]] = {}
        # (did, version): a list item as rendered; (filter, value, after, limit): [the
        # page's keys, its body, the data_version its keys were last read at].
        self._items: dict[tuple[str, int], bytes] = {}
        self._pages: dict[tuple[Any, ...], list[Any]] = {}

    async def list_page(
        self,
        kind: str | None,
        value: str | None,
        after: int,
        limit: int,
        render: Callable[[list[dict[str, Any]]], list[bytes]],
    ) -> bytes:
        """The body of a registry list page (`GET /v1/domains`, `type` or `class` or no
        filter, after the sequence number `after`): `{"items": [...], "nextCursor": ...,
        "total": null}` with each item as `render` renders records (the general route's
        encoding). One index range reads the page's keys (did, seq, version); a domain's
        item is rendered once per version and kept, as the node keeps its messages, and
        the page itself is kept under its keys. On a SQLite file a page is given again
        without reading its keys while no other connection has committed."""
        page_key = (kind, value, after, limit)
        version = None
        if self._reads.on_file:
            kept_now = self.list_now(kind, value, after, limit)
            if kept_now is not None:
                return kept_now[1]
            version = self._reads.connection().execute("PRAGMA data_version").fetchone()[0]
        params: list[Any] = [] if kind is None else [value]
        params += [after, limit + 1]
        keys = await self._reads.rows(LIST_KEYS[kind], PG_LIST_KEYS[kind], *params)
        kept = self._pages.get(page_key)
        if kept is not None and kept[0] == keys:
            kept[2] = version
            return kept[1]  # type: ignore[no-any-return]
        more = len(keys) > limit
        shown = keys[:limit]
        items = self._items
        missing = [did for did, _seq, version_ in shown if (did, version_) not in items]
        whole = True  # every item rendered at its key's version
        if missing:
            rows = await self.domain_rows(missing)
            built = [await self.domain(row) for row in rows.values()]
            for record, rendered in zip(built, render(built), strict=True):
                if len(items) >= KEPT_ITEMS:
                    del items[next(iter(items))]  # the oldest kept
                items[record["did"], record["version"]] = rendered
        parts = []
        for did, _seq, version_ in shown:
            item = items.get((did, version_))
            if item is None:  # changed (or gone) since its key was read: not kept
                whole = False
                rows = await self.domain_rows([did])
                if did not in rows:
                    continue
                item = render([await self.domain(rows[did])])[0]
            parts.append(item)
        cursor = encode_cursor(shown[-1][1]) if more and shown else None
        body = b"".join(
            (
                b'{"items":[',
                b",".join(parts),
                b'],"nextCursor":',
                orjson.dumps(cursor),
                b',"total":null}',
            )
        )
        if whole:
            if page_key not in self._pages and len(self._pages) >= KEPT_PAGES:
                del self._pages[next(iter(self._pages))]
            headers = [
                (b"content-length", str(len(body)).encode("latin-1")),
                (b"content-type", b"application/json"),
            ]
            self._pages[page_key] = [keys, body, version, headers]
        return body

    def list_now(
        self, kind: str | None, value: str | None, after: int, limit: int
    ) -> tuple[list[tuple[bytes, bytes]], bytes] | None:
        """A kept `list_page` (raw headers and body), read inline from the SQLite file:
        given when no other connection has committed since its keys were read, or when
        its keys, read again, are the same; None otherwise, for `list_page` to build."""
        kept = self._pages.get((kind, value, after, limit))
        if kept is None or not self._reads.on_file:
            return None
        db = self._reads.connection()
        version = db.execute("PRAGMA data_version").fetchone()[0]
        if version != kept[2]:
            params: list[Any] = [] if kind is None else [value]
            params += [after, limit + 1]
            if db.execute(LIST_KEYS[kind], params).fetchall() != kept[0]:
                return None
            kept[2] = version
        return kept[3], kept[1]

    async def domain_row(self, did: str) -> DomainRow | None:
        """The stored row of `did` (None when unknown); None on the fallback path too, so
        check `fast` first."""
        if self._reads.on_postgresql:
            found = await self._reads.fetch(PG_BY_DID, did)
            return _row(found[0]) if found else None
        if not self._reads.on_file:
            return None
        raw = self._reads.connection().execute(BY_DID, (did,)).fetchone()
        return _row(raw) if raw else None

    async def domain_key(self, did: str) -> tuple[str, int, int] | None:
        """(did, seq, version) of `did` (None when unknown, or on the fallback path): a
        query whose answer is built for that version reads no more (the whole row is a few
        times dearer, its JSON columns made into strings)."""
        if self._reads.on_postgresql:
            found = await self._reads.fetch(PG_KEY_BY_DID, did)
            return found[0] if found else None
        if not self._reads.on_file:
            return None
        return self._reads.connection().execute(KEY_BY_DID, (did,)).fetchone()  # type: ignore[no-any-return]

    async def domain(self, row: DomainRow) -> dict[str, Any]:
        """The resolved record of a row: its edges, and what it inherits from its protocol."""
        if self._reads.on_postgresql:
            edges = await self._reads.fetch(PG_EDGES, row.did)
        else:
            edges = self._reads.connection().execute(EDGES, (row.did,)).fetchall()
        protocol = await self._sources.protocols.get(row.raw[3])
        return resolve_inheritance(row.record(edges), protocol)

    def record_now(self, did: str) -> tuple[list[tuple[bytes, bytes]], bytes] | None:
        """The hot read's answer for `did` (`_record_response(await self.domain(row))`'s
        raw headers and body), read inline from the SQLite file; None when it cannot be
        answered so (not a SQLite file, not a DID, no such domain, its protocol not loaded
        yet), for the awaited path to answer. The two statements run on every call; the
        record built from their rows is kept, and given again for as long as the row, the
        edges and the protocol view are the ones it was built from (protocols never
        change): equal inputs, equal record, without decoding five JSON columns and
        encoding the record again."""
        if not self._reads.on_file:
            return None
        kept = self._answers.get(did)
        if kept is None and not is_did(did):  # a kept DID passed this check already
            return None
        db = self._reads.connection()
        raw = db.execute(BY_DID, (did,)).fetchone()
        if raw is None:
            return None
        edges = db.execute(EDGES, (did,)).fetchall()
        view = self._sources.protocols.get_now(raw[3])
        if view is None:
            return None
        if kept is not None and kept[2] is view and kept[0] == raw and kept[1] == edges:
            return kept[3], kept[4]
        record = resolve_inheritance(_row(raw).record(edges), view)
        body = orjson.dumps(record)
        headers = [
            (b"etag", f'"{record["version"]}"'.encode("latin-1")),
            (b"content-length", str(len(body)).encode("latin-1")),
            (b"content-type", b"application/json"),
        ]
        if kept is None and len(self._answers) >= KEPT_ANSWERS:
            del self._answers[next(iter(self._answers))]  # the oldest kept
        self._answers[did] = (raw, edges, view, headers, body)
        return headers, body

    async def types_of(self, dids: list[str]) -> dict[str, str]:
        if not self._reads.fast:
            return await self._sources.domains.types_of(dids)
        if not dids:
            return {}
        if self._reads.on_postgresql:
            return dict(await self._reads.fetch(PG_TYPES, dids))
        rows = self._reads.connection().execute(TYPES, (orjson.dumps(dids).decode(),))
        return dict(rows.fetchall())

    async def domain_keys(self, window: Window) -> WindowPage[tuple[str, int, int]]:
        """A Cosmos page of every domain by creation order as (did, seq, version): after the
        key (keyset, one index range whatever the page number) or, when a client asks, at an
        offset. The node builds each domain's message once per version, so a page needs only
        these to know which rows to read (`domain_rows`)."""
        keyed = window.key is not None
        params = [window.key] if keyed else []
        params += [window.limit + 1, window.offset]
        if self._reads.on_postgresql:
            keys = await self._reads.fetch(PG_PAGES[(keyed, window.reverse)], *params)
        else:
            keys = (
                self._reads.connection().execute(PAGES[(keyed, window.reverse)], params).fetchall()
            )
        more = len(keys) > window.limit
        keys = keys[: window.limit]
        total = await self._reads.total(window, COUNT)
        return WindowPage(keys, keys[-1][1] if more and keys else None, total)

    async def domain_rows(self, dids: list[str]) -> dict[str, DomainRow]:
        """The stored rows of `dids` by DID, in one statement (unknown ones are left out).
        A row read after a newer commit than its page's carries its own (newer) version."""
        if not dids:
            return {}
        if self._reads.on_postgresql:
            found = await self._reads.fetch(PG_BY_DIDS, dids)
        else:
            found = (
                self._reads.connection().execute(BY_DIDS, (orjson.dumps(dids).decode(),)).fetchall()
            )
        return {raw[0]: _row(raw) for raw in found}

    async def domain_page(
        self, window: Window, built: Callable[[str, int], bool] = lambda did, version: False
    ) -> WindowPage[DomainRow]:
        """`domain_keys` as rows: those for which `built(did, version)` is true come without
        their columns."""
        page = await self.domain_keys(window)
        fetched = await self.domain_rows(
            [did for did, _seq, version in page.items if not built(did, version)]
        )
        rows = [
            fetched.get(did) or DomainRow(did, version, seq, None)
            for did, seq, version in page.items
        ]
        return WindowPage(rows, page.next_key, page.total)


class ClaimRecords:
    """Claims with their evaluations, and credit tokens with their movements (the node's
    ixo claims and token queries)."""

    def __init__(self, reads: ReadModel) -> None:
        self._reads = reads
        self._collection_protocols: dict[int, str] = {}
        # id: [stamp, raw headers, body, the data_version the stamp was last read at] of
        # the registry's claim reads (`claim_now`, `claim_answer`).
        self._answers: dict[str, list[Any]] = {}
        # A claim's row: its list item as rendered; (collection, after, limit): [the page's
        # rows, its body, the data_version its rows were last read at, its raw headers].
        self._items: dict[tuple[Any, ...], bytes] = {}
        self._pages: dict[tuple[int, int, int], list[Any]] = {}

    def claim_now(
        self, claim_id: str, render: ClaimRender
    ) -> tuple[list[tuple[bytes, bytes]], bytes] | None:
        """The registry's answer to `GET /v1/claims/{claim_id}` (raw headers and body),
        read inline from the SQLite file; None when it cannot be answered so (not a SQLite
        file, no such claim), for the awaited path to answer. The body is `render`'s of the
        claim's row and evaluations, kept under their stamp (every column of both) and
        given again while the stamp is unchanged; nothing is read at all while no other
        connection has committed since the stamp was last read (`PRAGMA data_version`)."""
        if not self._reads.on_file:
            return None
        db = self._reads.connection()
        version = db.execute("PRAGMA data_version").fetchone()[0]
        kept = self._answers.get(claim_id)
        if kept is not None and kept[3] == version:
            return kept[1], kept[2]
        stamp = (
            db.execute(CLAIM_STAMP, (claim_id,)).fetchone(),
            db.execute(EVALUATIONS_STAMP, (claim_id,)).fetchall(),
        )
        return self._answer(claim_id, stamp, version, kept, render)

    async def claim_answer(
        self, claim_id: str, render: ClaimRender
    ) -> tuple[list[tuple[bytes, bytes]], bytes] | None:
        """`claim_now` awaited: on PostgreSQL's pool, or on the SQLite file; None for an
        unknown claim or without a database to read here (in-memory SQLite), for the
        claim service to answer."""
        if not self._reads.fast:
            return None
        if self._reads.on_file:
            return self.claim_now(claim_id, render)
        found = await self._reads.fetch(PG_CLAIM_STAMP, claim_id)
        evaluations = await self._reads.fetch(PG_EVALUATIONS_STAMP, claim_id)
        stamp = (found[0] if found else None), evaluations
        return self._answer(claim_id, stamp, None, self._answers.get(claim_id), render)

    def _answer(
        self,
        claim_id: str,
        stamp: tuple[Any, Any],
        version: object,
        kept: list[Any] | None,
        render: ClaimRender,
    ) -> tuple[list[tuple[bytes, bytes]], bytes] | None:
        if stamp[0] is None:
            return None
        if kept is not None and kept[0] == stamp:
            kept[3] = version
            return kept[1], kept[2]
        row = CLAIM_COLUMNS.loaded(stamp[0])
        headers, body = _json_answer(render(row, [EVALUATION_COLUMNS.loaded(e) for e in stamp[1]]))
        if kept is None and len(self._answers) >= KEPT_ANSWERS:
            del self._answers[next(iter(self._answers))]  # the oldest kept
        self._answers[claim_id] = [stamp, headers, body, version]
        return headers, body

    async def collection_page(
        self, collection: int, after: int, limit: int, render: ItemsRender
    ) -> bytes:
        """The body of a registry claims list of one collection after the sequence number
        `after` (`GET /v1/claims?collection=`): `{"items": [...], "nextCursor": ...}`, each
        item as `render` renders claims' rows (the general route's encoding), kept under
        the row it was rendered from (every column), and the page kept under its rows; on
        a SQLite file given again without reading while nothing was committed since."""
        kept_now = self.collection_now(collection, after, limit)
        if kept_now is not None:
            return kept_now[1]
        version = None
        if self._reads.on_file:
            version = self._reads.connection().execute("PRAGMA data_version").fetchone()[0]
        rows = await self._reads.rows(
            COLLECTION_PAGE, PG_COLLECTION_PAGE, collection, after, limit + 1
        )
        page_key = (collection, after, limit)
        kept = self._pages.get(page_key)
        if kept is not None and kept[0] == rows:
            kept[2] = version
            return kept[1]  # type: ignore[no-any-return]
        shown = rows[:limit]
        items = self._items
        missing = [row for row in shown if row not in items]
        if missing:
            for row, rendered in zip(
                missing, render([CLAIM_COLUMNS.loaded(row) for row in missing]), strict=True
            ):
                if len(items) >= KEPT_ITEMS:
                    del items[next(iter(items))]  # the oldest kept
                items[row] = rendered
        cursor = encode_cursor(shown[-1][1]) if len(rows) > limit and shown else None
        body = b"".join(
            (
                b'{"items":[',
                b",".join(items[row] for row in shown),
                b'],"nextCursor":',
                orjson.dumps(cursor),
                b"}",
            )
        )
        if page_key not in self._pages and len(self._pages) >= KEPT_PAGES:
            del self._pages[next(iter(self._pages))]
        headers = [
            (b"content-length", str(len(body)).encode("latin-1")),
            (b"content-type", b"application/json"),
        ]
        self._pages[page_key] = [rows, body, version, headers]
        return body

    def collection_now(
        self, collection: int, after: int, limit: int
    ) -> tuple[list[tuple[bytes, bytes]], bytes] | None:
        """A kept `collection_page` (raw headers and body) read inline from the SQLite file,
        as `DomainRecords.list_now`; None when there is none or it changed."""
        kept = self._pages.get((collection, after, limit))
        if kept is None or not self._reads.on_file:
            return None
        db = self._reads.connection()
        version = db.execute("PRAGMA data_version").fetchone()[0]
        if version != kept[2]:
            if db.execute(COLLECTION_PAGE, (collection, after, limit + 1)).fetchall() != kept[0]:
                return None
            kept[2] = version
        return kept[3], kept[1]

    def forget(self, claim_id: str) -> None:
        """Build the claim's answer again at its next read: something it shows changed
        that its stamp may not (told by the bus)."""
        self._answers.pop(claim_id, None)

    async def claim(
        self, claim_id: str, built: Callable[[str, Any], bool] = lambda claim, stamp: False
    ) -> ClaimRow | None:
        """A claim (None when unknown): a primary-key read, and an index read of its
        evaluations unless `built(id, stamp)` says its message is built already."""
        found = await self._reads.rows(CLAIM_BY_ID, PG_CLAIM_BY_ID, claim_id)
        if not found:
            return None
        row = claim_row(found[0], None)
        if built(row.id, row.stamp):
            return row
        evaluations = await self._reads.rows(EVALUATIONS_OF, PG_EVALUATIONS_OF, claim_id)
        return claim_row(found[0], map(_evaluation, evaluations))

    async def claim_keys(self, window: Window) -> WindowPage[tuple[Any, ...]]:
        """A Cosmos page of every claim by submission order, as `domain_keys`: after the key
        on the seq index (the same cost for page 1 and page 1,000), or at an offset when a
        client asks for one. Items are (id, seq, *stamp) (see `claim_stamp`); `claim_rows`
        reads the claims whose messages are not built at their stamps."""
        keyed = window.key is not None
        params: list[Any] = [window.key] if keyed else []
        params += [window.limit + 1, window.offset]
        shape = (keyed, window.reverse)
        keys = await self._reads.rows(CLAIM_PAGES[shape], PG_CLAIM_PAGES[shape], *params)
        more = len(keys) > window.limit
        keys = keys[: window.limit]
        total = await self._reads.total(window, COUNT_CLAIMS)
        return WindowPage(keys, keys[-1][1] if more and keys else None, total)

    async def claim_rows(self, ids: list[str]) -> dict[str, ClaimRow]:
        """The claims `ids` by id with their evaluations, in two statements (unknown ones
        are left out). A claim read after a newer commit than its page's carries its own
        (newer) stamp."""
        if not ids:
            return {}
        if self._reads.on_postgresql:
            found = await self._reads.fetch(PG_CLAIMS_BY_IDS, ids)
        else:
            found = (
                self._reads.connection()
                .execute(CLAIMS_BY_IDS, (orjson.dumps(ids).decode(),))
                .fetchall()
            )
        history = await self.evaluations_of(ids)
        return {raw[0]: claim_row(raw, history.get(raw[0], ())) for raw in found}

    async def evaluations_of(self, ids: list[str]) -> dict[str, list[EvaluationRow]]:
        """The evaluations of the claims `ids` (oldest first), in one statement."""
        history: dict[str, list[EvaluationRow]] = {}
        if not ids:
            return history
        if self._reads.on_postgresql:
            found = await self._reads.fetch(PG_EVALUATIONS_OF_MANY, ids)
        else:
            statement = self._reads.connection().execute(
                EVALUATIONS_OF_MANY, (orjson.dumps(ids).decode(),)
            )
            found = statement.fetchall()
        for raw in found:
            history.setdefault(raw[0], []).append(_evaluation(raw))
        return history

    async def collection_protocol(self, collection_id: int) -> str | None:
        """The protocol of a claim collection (None when unknown). A collection's protocol
        is fixed at creation, so it is kept once read."""
        known = self._collection_protocols.get(collection_id)
        if known is None:
            found = await self._reads.rows(
                COLLECTION_PROTOCOL, PG_COLLECTION_PROTOCOL, collection_id
            )
            if not found:
                return None
            known = self._collection_protocols[collection_id] = found[0][0]
        return known

    async def token(self, name: str) -> TokenRow | None:
        found = await self._reads.rows(TOKEN_BY_NAME, PG_TOKEN_BY_NAME, name)
        return TokenRow(*found[0]) if found else None

    async def tokens(self) -> list[TokenRow]:
        """Every credit token class by name (one per protocol's token class: a handful)."""
        return [TokenRow(*raw) for raw in await self._reads.rows(TOKENS, TOKENS)]

    async def movements(self, token: str, kind: str) -> list[MovementRow]:
        """Every movement of one kind (retire, transfer) of a token, oldest first."""
        found = await self._reads.rows(MOVEMENTS_OF, PG_MOVEMENTS_OF, token, kind)
        return [MovementRow(*raw) for raw in found]
