"""The node's unary answers in one send: the height header, the message and the status
handed to gRPC's core as one batch.

Why: a Cosmos node sends `x-cosmos-block-height` in a response's initial metadata (its
HTTP/2 headers) and Cosmos clients read it there (grpc-go's `grpc.Header`, ixo's gateways),
so it cannot move to the trailers. grpc.aio sends initial metadata that carries anything
only through `ServicerContext.send_initial_metadata`, a batch of its own that the handler
awaits before its answer's batch (which may carry only empty initial metadata): two trips
through gRPC's core and the completion queue and two writes per call. A bare grpc.aio
server answering fixed bytes lost 15-28 % of its rate to that header alone (bench/README.md,
the `+header` ceiling). gRPC's core takes initial metadata, message and status in one batch
(grpc.aio itself so sends a reply whose initial metadata is empty), and the frames on the
wire are the same.

How: grpc.aio hands every unary-unary call to the module function
`cygrpc._handle_unary_unary_rpc`, which its dispatcher looks up by name on each call.
`install()` puts a wrapper in its place: a call whose handler is a `OneBatchHandler` is
served here (receive the request, ask the handler for its reply, start one batch); any other
(health, reflection) goes to grpc's own function unchanged. These are grpc's private names:
`install()` checks that they are there with the arguments this module passes, and when they
are not it changes nothing and returns False; a `OneBatchHandler` then answers through
grpc.aio's public path (`unary_unary` below: the header's own send, then the answer), with
the same bytes. Tests hold the node's answers and headers on the installed path and on the
public one. What the wrapper skips of grpc's function is only what a bytes-in, bytes-out
handler does not use: (de)serialisers, the sync-handler branch and the per-call context for
grpc's observability plugin (not used by twinhub).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from twinhub.logging import get_logger

log = get_logger(__name__)
Metadata = tuple[tuple[str, str], ...]
# (initial metadata, answer bytes or None for an error, status, status details)
Reply = tuple[Metadata, bytes | None, grpc.StatusCode, str]

# The private grpc names used, with the arguments each must take.
_NEEDED = {
    "_handle_unary_unary_rpc": ("method_handler", "rpc_state", "loop"),
    "_receive_message": ("grpc_call_wrapper", "loop"),
    "execute_batch": ("grpc_call_wrapper", "operations", "loop"),
}
_original: Any = None  # grpc's own function, while install() has replaced it


class OneBatchHandler:
    """A unary-unary method handler (bytes in, bytes out) whose `reply` answers a request's
    bytes with a `Reply`. It has the attributes grpc.aio reads of a method handler."""

    __slots__ = ("reply",)
    request_streaming = False
    response_streaming = False
    request_deserializer = None
    response_serializer = None
    unary_stream = None
    stream_unary = None
    stream_stream = None

    def __init__(self, reply: Callable[[bytes], Awaitable[Reply]]) -> None:
        self.reply = reply

    async def unary_unary(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        """grpc.aio's public path, used when `install()` could not take the call: the
        initial metadata in a send of its own, then the answer or the error status."""
        header, body, code, details = await self.reply(request)
        if header:
            await context.send_initial_metadata(header)
        if body is None:
            await context.abort(code, details)
            raise AssertionError("unreachable")  # abort() raises
        return body


def install() -> bool:
    """Serve `OneBatchHandler`s in one batch in this process (idempotent); False when this
    grpc's internals are not the expected ones (the public path then serves them)."""
    global _original
    if _original is not None:
        return True
    try:
        from grpc._cython import cygrpc
    except ImportError:  # pragma: no cover - grpc always ships it
        return False
    for name, arguments in _NEEDED.items():
        code = getattr(getattr(cygrpc, name, None), "__code__", None)
        if code is None or tuple(code.co_varnames[: code.co_argcount]) != arguments:
            log.warning("grpc internals differ: the node sends its header separately", name=name)
            return False
    original = cygrpc._handle_unary_unary_rpc
    receive = cygrpc._receive_message
    execute = cygrpc.execute_batch
    metadata_op = cygrpc.SendInitialMetadataOperation
    message_op = cygrpc.SendMessageOperation
    status_op = cygrpc.SendStatusFromServerOperation
    ok = grpc.StatusCode.OK.value[0]

    async def handle_unary_unary(method_handler: Any, rpc_state: Any, loop: Any) -> None:
        if type(method_handler) is not OneBatchHandler:
            await original(method_handler, rpc_state, loop)
            return
        request = await receive(rpc_state, loop)
        if request is None:  # the client cancelled before sending it
            return
        header, body, code, details = await method_handler.reply(request)
        if body is None:
            ops: tuple[Any, ...] = (
                metadata_op(header, 0),
                status_op((), code.value[0], details, 0),
            )
        else:
            ops = (metadata_op(header, 0), message_op(body, 0), status_op((), ok, "", 0))
        await execute(rpc_state, ops, loop)

    cygrpc._handle_unary_unary_rpc = handle_unary_unary
    _original = original
    return True


def uninstall() -> None:
    """Give grpc.aio's unary calls back to grpc's own function (tests compare the paths)."""
    global _original
    if _original is not None:
        from grpc._cython import cygrpc

        cygrpc._handle_unary_unary_rpc = _original
        _original = None


def installed() -> bool:
    """Whether `install()` has taken grpc.aio's unary calls in this process."""
    return _original is not None
