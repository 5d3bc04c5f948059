"""What every query servicer of the node shares: errors as gRPC statuses, the block height
header, Cosmos pagination and timestamps."""

from __future__ import annotations

import functools
import typing
from collections.abc import Awaitable, Callable, Hashable
from datetime import UTC, datetime
from typing import Any, TypeVar

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from twinhub.chain.protos.cosmos.base.query.v1beta1 import pagination_pb2
from twinhub.db.failures import DATABASE_ERRORS, RETRYABLE, Failure, classify
from twinhub.kernel.bounds import integer_problem
from twinhub.kernel.errors import Conflict, Forbidden, Invalid, NotFound, ServiceError
from twinhub.logging import get_logger
from twinhub.platform import Platform
from twinhub.services.paging import Window, WindowPage
from twinhub.services.read_model import ReadModel

log = get_logger(__name__)
HEIGHT_HEADER = "x-cosmos-block-height"
DEFAULT_LIMIT = 100  # Cosmos' default page size
MAX_LIMIT = 1000


STATUS = {
    NotFound: grpc.StatusCode.NOT_FOUND,
    Invalid: grpc.StatusCode.INVALID_ARGUMENT,
    Conflict: grpc.StatusCode.FAILED_PRECONDITION,
    Forbidden: grpc.StatusCode.PERMISSION_DENIED,
}
R = TypeVar("R")


class VersionCache:
    """Protobuf messages built once per record version: a domain's messages depend only on
    its row at one version (a change of any field, edge or status makes a new version),
    on its protocol (immutable) and on its links' types (fixed at creation); a claim's on
    its stamp (see `ClaimRow.stamp`). Bounded; the oldest entries go first. A page's loop
    reads `items` directly, (kind, id, version) -> entry: a method call per row counted."""

    def __init__(self, size: int = 20_000) -> None:
        self.size = size
        self.items: dict[tuple[str, Hashable, Hashable], Any] = {}

    def get(self, kind: str, did: Hashable, version: Hashable) -> Any:
        return self.items.get((kind, did, version))

    def put(self, kind: str, did: Hashable, version: Hashable, message: R) -> R:
        if len(self.items) >= self.size:
            del self.items[next(iter(self.items))]
        self.items[(kind, did, version)] = message
        return message


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encoded_field(number: int, payload: bytes) -> bytes:
    """Field `number` holding `payload` (a serialised message) as protobuf encodes it: its
    tag, its length, the bytes. A repeated message field is its items so encoded one after
    another, so a page's answer is its items' encodings (made once per version) joined and
    the rest of the answer's fields appended (they come after the items by field number):
    no message is built or serialised per page. Tests hold the result to the answer built
    as a message, byte for byte."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


PAGES_KEPT = 256  # pages' joined items kept by each servicer (`Servicer.page`)


class Servicer:
    """Base of the query servicers: holds the platform every answer comes from, the
    node's read path over it, the messages built per version and the pages built from
    them (`page`)."""

    def __init__(
        self,
        platform: Platform,
        reads: ReadModel | None = None,
        cache: VersionCache | None = None,
    ) -> None:
        self.platform = platform
        self.reads = reads or platform.reads
        self.cache = cache or VersionCache()
        self.pages = VersionCache(min(PAGES_KEPT, self.cache.size))

    async def page(
        self,
        kind: str,
        shown: Window,
        build: Callable[[Window], Awaitable[tuple[bytes, int | None]]],
    ) -> tuple[bytes, int | None]:
        """A page's items joined (see `encoded_field`) and its next key: `build(shown)`,
        kept under the page's print (`ReadModel.page_print`, one statement returning one
        text), so a page whose rows have the same versions (stamps) as when it was built
        reads no rows and joins nothing. Why: with its items built, a page of 50 still
        stepped and made 51 rows into Python tuples and looked up 50 items, the largest
        part of a page read after a commit (bench/README.md). Kept only when the print
        read after building is the one read before (no commit in between changed it)."""
        printed = await self.reads.page_print(kind, shown)
        place = (shown.key, shown.offset, shown.limit, shown.reverse)
        kept = self.pages.get(kind, place, printed)
        if kept is None:
            kept = await build(shown)
            if await self.reads.page_print(kind, shown) == printed:
                self.pages.put(kind, place, printed, kept)
        return kept  # type: ignore[no-any-return]

    async def page_answer(
        self,
        kind: str,
        request: Any,
        build: Callable[[Window], Awaitable[tuple[bytes, int | None]]],
        response: Callable[..., Any],
    ) -> bytes:
        """A list query's answer as bytes: the page's items (`page`) and then `response`
        holding only its pagination (the items' field comes first in every list answer)."""
        shown = window(request)
        joined, next_key = await self.page(kind, shown, build)
        total = await self.reads.page_total(kind, shown)
        return joined + response(pagination=pagination(next_key, total)).SerializeToString()


def query(
    method: Callable[[Any, Any, grpc.aio.ServicerContext], Awaitable[R]],
) -> Callable[[Any, Any, grpc.aio.ServicerContext], Awaitable[R]]:
    """Wrap a query method: send the ledger height first, turn service errors into
    statuses, and never leak an internal error's text to the caller. The node's server
    calls the unwrapped method (`__wrapped__`) through answers.Dispatcher, which does the
    same around kept answers, and takes an answer already serialised (bytes) as it is; the
    wrapper serves a servicer registered the generated way, whose handler serialises a
    message, so it parses such bytes back into the method's answer type."""

    @functools.wraps(method)
    async def wrapper(self: Servicer, request: Any, context: grpc.aio.ServicerContext) -> R:
        try:
            height = await self.reads.height()
            await context.send_initial_metadata(((HEIGHT_HEADER, str(height)),))
            check_requested_height(context, height)
            answer = await method(self, request, context)
            if type(answer) is bytes:
                return _answer_type(method).FromString(answer)  # type: ignore[no-any-return]
            return answer
        except ServiceError as error:
            await context.abort(status_of(error), error.message)
        except DATABASE_ERRORS as error:
            code, message = database_status(error, method.__name__)
            await context.abort(code, message)
        raise AssertionError("unreachable")  # abort() raises

    return wrapper


def database_status(error: BaseException, method: str) -> tuple[grpc.StatusCode, str]:
    """A failed statement's gRPC status, by what it means (db/failures.py): a value the
    database refuses is the caller's INVALID_ARGUMENT, never an outage."""
    failure = classify(error) or Failure.FAULT
    if failure in RETRYABLE:
        log.warning("node query failed: database unavailable", method=method)
        return grpc.StatusCode.UNAVAILABLE, "the database is unavailable"
    if failure is Failure.DATA:
        return (
            grpc.StatusCode.INVALID_ARGUMENT,
            "a value of the request cannot be stored or compared",
        )
    if failure is Failure.CONFLICT:
        return grpc.StatusCode.FAILED_PRECONDITION, "the request conflicts with what is stored"
    log.error("node query failed", method=method, error=type(error).__name__)
    return grpc.StatusCode.INTERNAL, "internal error; logged"


def _answer_type(method: Callable[..., Any]) -> Any:
    """The message class a query method answers (the first of its return annotation's
    `X | bytes`)."""
    hint = typing.get_type_hints(method)["return"]
    return next(t for t in typing.get_args(hint) or (hint,) if t is not bytes)


def status_of(error: ServiceError) -> grpc.StatusCode:
    """The gRPC status of a service error."""
    return next(
        (code for kind, code in STATUS.items() if isinstance(error, kind)),
        grpc.StatusCode.FAILED_PRECONDITION,
    )


def check_requested_height(context: grpc.aio.ServicerContext, latest: int) -> None:
    """Cosmos lets a query ask for a past height in `x-cosmos-block-height`; see
    `requested_height_problem`."""
    asked = next((v for k, v in context.invocation_metadata() or () if k == HEIGHT_HEADER), None)
    if asked is None:
        return
    text = asked if isinstance(asked, str) else asked.decode("latin-1")
    problem = requested_height_problem(text, latest)
    if problem is not None:
        raise Invalid(problem)


def requested_height_problem(text: str, latest: int) -> str | None:
    """Why a query asking for height `text` is refused (None: it is not). twinhub's state
    is its latest one (the ledger keeps the transactions, not a state per height), so like
    a pruned node it answers the latest height, and refuses any other rather than answer
    for it with today's data. 0 or no header means the latest."""
    if not (text.isascii() and text.isdigit()) or len(text) > 19:
        return f"{HEIGHT_HEADER} must be a block height (a whole number), got {text!r}"
    height = int(text)
    if height > latest:
        return f"cannot query with height {height} in the future (latest height: {latest})"
    if 0 < height < latest:
        return (
            f"failed to load state at height {height}: this node keeps only the latest "
            f"state (latest height: {latest})"
        )
    return None


EPOCH = datetime(1970, 1, 1)
EPOCH_UTC = EPOCH.replace(tzinfo=UTC)


def timestamp(value: datetime | str | None) -> Timestamp | None:
    """A datetime (or its ISO text) as a protobuf Timestamp; a naive one is UTC, as
    `Timestamp.FromDatetime` takes it. The same values as FromDatetime at half its cost
    (no time tuple), which counted when a page of 50 claims built 100 of them."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    since = value - (EPOCH if value.tzinfo is None else EPOCH_UTC)
    return Timestamp(seconds=since.days * 86400 + since.seconds, nanos=since.microseconds * 1000)


def window(request: Any) -> Window:
    """A request's Cosmos PageRequest as a service Window; a key and an offset together are
    refused, and a request without one gets the default page."""
    if not request.HasField("pagination"):
        return Window(limit=DEFAULT_LIMIT)
    page: pagination_pb2.PageRequest = request.pagination
    if page.key and page.offset:
        raise Invalid("pagination: give a key or an offset, not both")
    key = None
    if page.key:
        text = page.key.decode("ascii", "replace")
        if not text.isdigit() or len(text) > 19:
            raise Invalid("pagination.key is not a key this node gave out")
        key = int(text)
        if integer_problem(key) is not None:  # sequence numbers are BIGINT
            raise Invalid("pagination.key is not a key this node gave out")
    if page.offset > 2**62:
        raise Invalid("pagination.offset is too large")
    limit = page.limit or DEFAULT_LIMIT
    if limit > MAX_LIMIT:
        raise Invalid(f"pagination.limit is at most {MAX_LIMIT}")
    return Window(key, page.offset, limit, page.reverse, page.count_total)


def page_response(page: WindowPage[Any]) -> pagination_pb2.PageResponse:
    return pagination(page.next_key, page.total)


def pagination(next_key: int | None, total: int | None) -> pagination_pb2.PageResponse:
    return pagination_pb2.PageResponse(
        next_key=str(next_key).encode() if next_key is not None else b"", total=total or 0
    )
