"""USSD session records and where they live: process memory (default) or Redis.

A record outlives its activity: after `ttl` of inactivity it is *expired*, and an ended
session is *ended*; either is kept `retention` seconds longer so that a late request gets
"dial again" instead of silently starting over, and a gateway retry of the final request
gets the same final reply. Redis holds records serialised (orjson); process memory holds
each as a tuple of its field values (no parsing or writing per request, smaller than the
JSON, and left alone by the garbage collector), made into a new Session at every load.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from operator import itemgetter
from typing import Any, Protocol

import orjson

ACTIVE, ENDED = "active", "ended"


# Not slotted: orjson writes a dataclass with a `__dict__` from that dict directly (a fifth
# of the time it takes to read a slotted one field by field), and `loads` can fill the dict
# in one call; every USSD request loads and saves one record.
@dataclass
class Session:
    session_id: str
    phone_number: str
    service_code: str
    state: str
    status: str = ACTIVE
    message: str = ""
    # The last request's `text` holds every digit typed, PINs included, so only a keyed
    # digest and its length are kept: enough to spot a gateway retry and to tell which
    # answers a longer text adds, and nothing a reader of Redis or memory can use. (An
    # HMAC's hex in Redis, an int in process memory: see `process_digest`.)
    last_text_digest: str | int | None = None
    last_text_length: int = 0
    last_reply: str = ""
    customer_id: str | None = None
    language: str = ""  # the menus' language code, set when the session starts
    scratch: dict[str, str] = field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0

    @property
    def is_authenticated(self) -> bool:
        return self.customer_id is not None

    def is_expired(self, now: float, ttl: float) -> bool:
        return self.status == ACTIVE and now - self.updated_at > ttl

    def dumps(self) -> bytes:
        return orjson.dumps(self)  # orjson serialises dataclasses natively, and fast

    @classmethod
    def loads(cls, blob: bytes) -> Session:
        values = orjson.loads(blob)
        if list(values) == _FIELDS:  # as `dumps` writes it: every field, in order
            session = object.__new__(cls)
            session.__dict__ = values  # the parsed dict itself: no copy
            return session
        values.pop("last_text", None)  # a record saved before texts were digested
        return cls(**values)  # an older record's missing fields take their defaults


_FIELDS = [f.name for f in fields(Session)]
# A record of the memory store: the field values but scratch's in `_NAMES` order, whatever
# the order of the Session's dict, and a copy of scratch apart (None when empty).
_NAMES = [name for name in _FIELDS if name != "scratch"]
_ROW = itemgetter(*_NAMES)


def _session(row: tuple[Any, ...], scratch: dict[str, str] | None) -> Session:
    """A new Session of a memory store's record: its own dicts, to change freely."""
    values = dict(zip(_NAMES, row, strict=True))
    values["scratch"] = dict(scratch) if scratch else {}
    session = object.__new__(Session)
    session.__dict__ = values
    return session


def process_digest() -> Callable[[str, str], int] | None:
    """The memory store's keyed digest of a session's text: Python's string hash (SipHash
    under a key drawn at random when the interpreter starts) of the session id and the text,
    a twentieth of an HMAC's cost. The records it guards never leave this process, whose
    memory also holds the HMAC's key, so a reader of memory is no better off with either,
    and Redis (other processes, another machine) keeps the HMAC. None, to keep the HMAC,
    when hashing is not keyed at random (PYTHONHASHSEED set: then anyone could compute it)."""
    if not sys.flags.hash_randomization or os.environ.get("PYTHONHASHSEED", "random") != "random":
        return None

    def digest(text: str, context: str) -> int:
        return hash(f"{context}\x00{text}")

    return digest


class SessionBusy(Exception):
    """Another request of the same session held it for longer than the lock timeout."""


class SessionStore(Protocol):
    ttl: float

    def lock(self, session_id: str) -> Any:
        """Async context manager serialising the requests of one session."""

    async def load(self, session_id: str) -> Session | None: ...
    async def save(self, session: Session) -> None: ...
    async def active_ids(self) -> list[str]: ...
    async def ping(self) -> bool: ...
    async def close(self) -> None: ...


class KeyedLocks:
    """One lock per key, created on demand and dropped when nobody holds or waits.

    A key's entry is `[lock, users]`. Nearly every hold is uncontended (one session's
    requests arrive one after another), and then no asyncio.Lock is made at all: the
    entry alone marks the key held. The first waiter makes the Lock and takes it on the
    holder's behalf (it is free, so that takes no turn of the loop), then waits on it like
    every later waiter: fairness, time-outs and cancellation are asyncio.Lock's own."""

    def __init__(self) -> None:
        self._locks: dict[str, list[Any]] = {}

    def hold(self, key: str, wait: float) -> _Held:
        """An async context manager holding `key`'s lock; SessionBusy after `wait` seconds."""
        return _Held(self._locks, key, wait)

    def __len__(self) -> int:
        return len(self._locks)


class _Held:
    """`KeyedLocks.hold` as a plain class: a generator-based context manager cost a tenth
    of a USSD request's own work."""

    __slots__ = ("_entry", "_key", "_locks", "_wait")

    def __init__(self, locks: dict[str, list[Any]], key: str, wait: float) -> None:
        self._locks = locks
        self._key = key
        self._wait = wait

    async def __aenter__(self) -> None:
        entry = self._locks.get(self._key)
        if entry is None:  # free: held from now on, without a Lock
            self._entry = self._locks[self._key] = [None, 1]
            return
        entry[1] += 1
        self._entry = entry
        try:
            lock = entry[0]
            if lock is None:  # the holder had no Lock: make it, taken for the holder
                lock = entry[0] = asyncio.Lock()
                await lock.acquire()  # free, so it returns at once
            try:
                async with asyncio.timeout(self._wait):
                    await lock.acquire()
            except TimeoutError:
                raise SessionBusy(self._key) from None
        except BaseException:
            self._leave()
            raise

    async def __aexit__(self, *_: object) -> None:
        entry = self._entry
        if entry[0] is not None:
            entry[0].release()
        if entry[1] == 1:  # _leave, inline
            del self._locks[self._key]
        else:
            entry[1] -= 1

    def _leave(self) -> None:
        entry = self._entry
        if entry[1] == 1:
            del self._locks[self._key]
        else:
            entry[1] -= 1


_Record = tuple[float, bool, tuple[Any, ...], dict[str, str] | None]


class MemorySessionStore:
    """Sessions of one process, bounded: oldest-touched records go first when over the cap.

    The dictionary is kept in order of last save, so with one TTL for everyone the records
    that can be forgotten are always at its front: purging is amortised O(1).
    """

    def __init__(
        self,
        ttl: float,
        retention: float,
        max_sessions: int,
        lock_timeout: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ttl = ttl
        self._keep = ttl + retention
        self._max = max_sessions
        self._lock_timeout = lock_timeout
        self._clock = clock
        # session id: (saved at, active, _ROW of the session, copy of its scratch or None)
        self._records: OrderedDict[str, _Record] = OrderedDict()
        self._locks = KeyedLocks()
        # The engine digests texts with this when it is not None (see process_digest).
        self.text_digest = process_digest()

    def lock(self, session_id: str) -> Any:
        return _Held(self._locks._locks, session_id, self._lock_timeout)  # KeyedLocks.hold

    @property
    def held(self) -> dict[str, Any]:
        """The sessions whose lock a request holds or waits for (keys only: do not change)."""
        return self._locks._locks

    async def load(self, session_id: str) -> Session | None:
        return self.load_now(session_id)

    async def save(self, session: Session) -> None:
        self.save_now(session)

    def load_now(self, session_id: str) -> Session | None:
        """`load` without awaiting (the engine calls it so: one coroutine fewer)."""
        records = self._records
        if records and next(iter(records.values()))[0] < self._clock() - self._keep:
            self._purge()  # something to forget (the test of _purge's loop, inline)
        record = records.get(session_id)
        return _session(record[2], record[3]) if record else None

    def save_now(self, session: Session) -> None:
        """`save` without awaiting."""
        records, session_id, now = self._records, session.session_id, self._clock()
        scratch = session.scratch
        records[session_id] = (
            now,
            session.status == ACTIVE,
            _ROW(session.__dict__),
            dict(scratch) if scratch else None,  # nothing done to the session later shows
        )
        records.move_to_end(session_id)
        while len(records) > self._max:
            records.popitem(last=False)
        if next(iter(records.values()))[0] < now - self._keep:
            self._purge()  # as in load_now

    def _purge(self) -> None:
        horizon = self._clock() - self._keep
        records = self._records
        while records:
            first = next(iter(records.values()))
            if first[0] >= horizon:
                break
            records.popitem(last=False)

    async def active_ids(self) -> list[str]:
        horizon = self._clock() - self.ttl
        active = []
        for session_id in reversed(self._records):
            saved_at, is_active, _, _ = self._records[session_id]
            if saved_at < horizon:
                break  # everything further back is older still
            if is_active:
                active.append(session_id)
        return active

    def __len__(self) -> int:
        return len(self._records)

    async def ping(self) -> bool:
        return True

    async def close(self) -> None:
        self._records.clear()
