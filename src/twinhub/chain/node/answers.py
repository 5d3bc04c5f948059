"""The node's answers as bytes: every query method served through one generic gRPC handler
that takes the request's bytes and returns the answer's bytes, with the answers kept per
data version.

Why: after the read path stopped building database sessions (services/read_model.py), a
profile of the node under load showed most of what was left in protobuf (parsing the
request, building and serialising the answer) and in the per-method wrapper. A query's
answer depends only on the request and the database, so an answer is kept, serialised,
under (method, request bytes) for as long as the database has not changed: a repeated
query costs a version check (SQLite `PRAGMA data_version`, PostgreSQL's current snapshot:
see `ReadModel.version`), a dictionary look-up and the send, with no protobuf work at all.
Any commit, by any connection or process, changes the version and drops every kept answer,
so a write is visible to the next query. Answers larger than `MAX_ANSWER_BYTES` (and
requests larger than `MAX_KEY_BYTES`) are not kept.

The same `Dispatcher.answer` serves the REST gateway when the gateway runs in the node's
process (`local_node`): the gateway then skips the HTTP/2 hop, the gRPC client and the
answer's parsing, and keeps its rendered JSON on the answer (`Answer.json`), so a repeated
REST read renders nothing either.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError

from twinhub.chain.node import one_batch
from twinhub.chain.node.common import (
    HEIGHT_HEADER,
    database_status,
    requested_height_problem,
    status_of,
)
from twinhub.chain.node.one_batch import OneBatchHandler, Reply
from twinhub.db.failures import DATABASE_ERRORS
from twinhub.kernel.errors import ServiceError
from twinhub.logging import get_logger
from twinhub.services.read_model import ReadModel

log = get_logger(__name__)
MAX_KEY_BYTES = 1024  # requests are ids and page requests: a few dozen bytes
MAX_ANSWER_BYTES = 1024 * 1024
_OK = grpc.StatusCode.OK


class QueryFailed(Exception):
    """A query's failure as a gRPC status; `height` is the header to send with it (None
    when the database could not tell it)."""

    def __init__(self, code: grpc.StatusCode, message: str, height: int | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.height = height


@dataclass(slots=True, eq=False)
class Answer:
    """One serialised answer and the height it was read at. `json` is the REST gateway's
    rendering of it, filled on the gateway's first use (it lives as long as the answer)."""

    body: bytes
    height: int
    header: tuple[tuple[str, str], ...] = field(init=False)
    json: bytes | None = None

    def __post_init__(self) -> None:
        self.header = ((HEIGHT_HEADER, str(self.height)),)


class AnswerCache:
    """Answers by (method path, request bytes), all of one data version; a new version
    empties it. Bounded in bytes; when full, the oldest answers go first."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: dict[tuple[str, bytes], Answer] = {}
        self._bytes = 0
        self._version: object = None

    def get(self, version: object, key: tuple[str, bytes]) -> Answer | None:
        if version != self._version:
            self._items.clear()
            self._bytes = 0
            self._version = version
            return None
        return self._items.get(key)

    def put(self, version: object, key: tuple[str, bytes], answer: Answer) -> None:
        size = len(answer.body) + len(key[1]) + 200  # the entry's own overhead, roughly
        if (
            version is None
            or version != self._version
            or len(key[1]) > MAX_KEY_BYTES
            or len(answer.body) > MAX_ANSWER_BYTES
            or size > self.max_bytes
        ):
            return
        while self._items and self._bytes + size > self.max_bytes:
            old_key = next(iter(self._items))
            old = self._items.pop(old_key)
            self._bytes -= len(old.body) + len(old_key[1]) + 200
        self._items[key] = answer
        self._bytes += size

    def __len__(self) -> int:
        return len(self._items)


# (the method's body, its servicer, the request's parser): the body is called as
# body(servicer, request, None), with no wrapper coroutine between.
Method = tuple[Callable[[Any, Any, Any], Awaitable[Any]], object, Callable[[bytes], Any]]


class Dispatcher:
    """Every query method of the node's servicers by its gRPC path, answered as bytes."""

    def __init__(self, reads: ReadModel, cache_bytes: int) -> None:
        self.reads = reads
        self.cache = AnswerCache(cache_bytes) if cache_bytes > 0 else None
        self._methods: dict[str, Method] = {}

    def add(self, servicer: object, service: ServiceDescriptor) -> None:
        """Serve `service`'s methods from `servicer`: methods written with `@query` (see
        common.py) are called without a gRPC context and answer a message or its bytes;
        any other is UNIMPLEMENTED."""
        for method in service.methods:
            bound = getattr(servicer, method.name, None)
            body = getattr(bound, "__wrapped__", None)
            parse = message_factory.GetMessageClass(method.input_type).FromString
            path = f"/{service.full_name}/{method.name}"
            self._methods[path] = (body or _unimplemented, servicer, parse)

    def generic_handlers(self, one_send: bool = True) -> list[grpc.GenericRpcHandler]:
        """One generic handler for every query method, bytes in and bytes out (no
        (de)serialiser: the dispatcher parses only what it has not answered already),
        answering in one send where grpc allows it (one_batch.py) unless `one_send` is
        False (NODE_ONE_BATCH)."""
        if one_send:
            one_batch.install()
        return [_Handlers(self)]

    async def reply(self, path: str, request: bytes, asked: str | None = None) -> Reply:
        """`answer` as a one_batch reply: the height header with the answer or the error."""
        try:
            found = await self.answer(path, request, asked)
        except QueryFailed as failure:
            header = () if failure.height is None else ((HEIGHT_HEADER, str(failure.height)),)
            return header, None, failure.code, failure.message
        return found.header, found.body, _OK, ""

    def paths(self) -> list[str]:
        """The gRPC paths of every method served."""
        return list(self._methods)

    async def answer(self, path: str, request: bytes, asked: str | None = None) -> Answer:
        """The answer to `request` (serialised) on `path`, kept or computed; QueryFailed
        for an error status. `asked` is the client's `x-cosmos-block-height`, if any."""
        height: int | None = None
        try:
            version = await self.reads.version()
            key = (path, request)
            cache = self.cache
            if cache is not None and version is not None:
                found = cache.get(version, key)
                if found is not None:
                    _check_height(asked, found.height)
                    return found
            method = self._methods.get(path)
            if method is None:
                raise QueryFailed(grpc.StatusCode.UNIMPLEMENTED, "Method not found!", None)
            height = await self.reads.height(version)
            _check_height(asked, height)
            call, servicer, parse = method
            try:
                message = parse(request)
            except DecodeError:
                raise QueryFailed(
                    grpc.StatusCode.INVALID_ARGUMENT, "the request is not a valid message", height
                ) from None
            response = await call(servicer, message, None)
            # A method may answer its serialised message itself (pages joined from items
            # encoded once per version: see common.encoded_field).
            body = response if type(response) is bytes else response.SerializeToString()
            made = Answer(body, height)
            if cache is not None and version is not None:
                cache.put(version, key, made)
            return made
        except ServiceError as error:
            raise QueryFailed(status_of(error), error.message, height) from None
        except DATABASE_ERRORS as error:
            code, message = database_status(error, path)
            raise QueryFailed(code, message, None) from None


class _Handlers(grpc.GenericRpcHandler):
    """The dispatcher's methods by path: one handler per method, shared by its calls, and
    one of its own for a call that asks for a height (rare)."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self._dispatcher = dispatcher
        self._handlers = {
            path: OneBatchHandler(functools.partial(dispatcher.reply, path))
            for path in dispatcher.paths()
        }

    def service(self, details: grpc.HandlerCallDetails) -> OneBatchHandler | None:
        handler = self._handlers.get(details.method)  # type: ignore[attr-defined]
        if handler is not None:
            asked = _asked(details.invocation_metadata)  # type: ignore[attr-defined]
            if asked is not None:
                return OneBatchHandler(
                    functools.partial(self._dispatcher.reply, details.method, asked=asked)  # type: ignore[attr-defined]
                )
        return handler


async def _unimplemented(servicer: Any, request: Any, context: Any) -> Any:
    raise QueryFailed(grpc.StatusCode.UNIMPLEMENTED, "Method not implemented!", None)


def _asked(metadata: Iterable[tuple[str, Any]] | None) -> str | None:
    for key, value in metadata or ():
        if key == HEIGHT_HEADER:
            return value if isinstance(value, str) else value.decode("latin-1")
    return None


def _check_height(asked: str | None, height: int) -> None:
    if asked is None:
        return
    problem = requested_height_problem(asked, height)
    if problem is not None:
        raise QueryFailed(grpc.StatusCode.INVALID_ARGUMENT, problem, height)


# The nodes of this process by the addresses a client in this process would dial.
_LOCAL: dict[str, Dispatcher] = {}


def register_local(host: str, port: int, dispatcher: Dispatcher) -> list[str]:
    """Make `dispatcher` reachable in-process under the addresses of host:port; returns
    them (to unregister)."""
    if host in ("0.0.0.0", "", "::", "[::]"):  # noqa: S104 - a wildcard bind is loopback too
        hosts = ["127.0.0.1", "localhost", "[::1]"]
    elif host in ("127.0.0.1", "localhost"):
        hosts = ["127.0.0.1", "localhost"]
    else:
        hosts = [f"[{host}]" if ":" in host and not host.startswith("[") else host]
    addresses = [f"{h}:{port}" for h in hosts]
    for address in addresses:
        _LOCAL[address] = dispatcher
    return addresses


def unregister_local(addresses: Iterable[str], dispatcher: Dispatcher) -> None:
    for address in addresses:
        if _LOCAL.get(address) is dispatcher:
            del _LOCAL[address]


def local_node(target: str) -> Dispatcher | None:
    """The node of this process that `target` (host:port, as a gRPC client names it)
    reaches, if it runs here."""
    return _LOCAL.get(target.removeprefix("dns:///").removeprefix("ipv4:"))
