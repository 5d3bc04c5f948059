"""The gRPC side of the gateway: one channel to the node, unary calls by method path.

Calls go through the channel's generic `unary_unary(path, serializer, deserializer)`, so
any method the route table knows (compiled or reflected) can be called without generated
stubs. The node's initial metadata carries `x-cosmos-block-height`, which the gateway
forwards, also on error answers.

Reconnection: a channel whose connection failed waits out a backoff before it tries again,
so the first request after the node came back could still fail. When a call fails because
the channel is not connected, the channel is replaced and the call tried once more on the
new one: while the node is down that second try is refused at once (503), and once it is
back the very first request succeeds.

A node in the gateway's own process (`twinhub serve gateway` without an upstream) is
called in-process instead (`chain.node.answers.local_node`): same answers, statuses and
height, without HTTP/2, the gRPC client or parsing the answer, and the rendered JSON is
kept with the node's kept answer, so a repeated read renders nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
from google.protobuf.message import Message

from twinhub.chain.gateway.errors import GatewayError
from twinhub.chain.gateway.render import render
from twinhub.chain.gateway.routes import Method
from twinhub.chain.node.answers import QueryFailed, local_node
from twinhub.logging import get_logger

log = get_logger(__name__)
HEIGHT_HEADER = "x-cosmos-block-height"
CHANNEL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
    ("grpc.enable_retries", 0),  # retries are decided here, where the reason is known
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2000),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 5_000),
)


class Upstream:
    """The node the gateway forwards to, at `target` (`host:port`)."""

    def __init__(self, target: str, timeout: float) -> None:
        self.target = target
        self.timeout = timeout
        self._channel = self._open()
        self._callables: dict[str, grpc.aio.UnaryUnaryMultiCallable] = {}
        self._retired: set[asyncio.Task[None]] = set()

    def _open(self) -> grpc.aio.Channel:
        return grpc.aio.insecure_channel(self.target, options=list(CHANNEL_OPTIONS))

    @property
    def channel(self) -> grpc.aio.Channel:
        return self._channel

    async def call_json(
        self, method: Method, request: Message, height: str | None = None
    ) -> tuple[bytes, str | None]:
        """The node's answer rendered as Cosmos JSON, and the block height; GatewayError
        for any failed status. In-process when the node runs here (see the docstring)."""
        node = local_node(self.target)
        if node is None:
            response, at = await self.call(method, request, height)
            return render(response), at
        try:
            async with asyncio.timeout(self.timeout):
                answer = await node.answer(method.path, request.SerializeToString(), height)
        except QueryFailed as failure:
            error = GatewayError.from_rpc(failure.code, failure.message)
            if failure.height is not None:
                error.headers[HEIGHT_HEADER] = str(failure.height)
            raise error from None
        except TimeoutError:
            raise GatewayError.from_rpc(grpc.StatusCode.DEADLINE_EXCEEDED, None) from None
        if answer.json is None:
            answer.json = render(method.response_type.FromString(answer.body))
        return answer.json, str(answer.height)

    async def call(
        self, method: Method, request: Message, height: str | None = None
    ) -> tuple[Message, str | None]:
        """The node's answer and block height; GatewayError for any failed status.

        `height` is the client's `x-cosmos-block-height`, passed on for the node to judge."""
        channel = self._channel
        metadata = ((HEIGHT_HEADER, height),) if height is not None else None
        try:
            return await self._call_once(method, request, metadata)
        except grpc.aio.AioRpcError as error:
            if error.code() is not grpc.StatusCode.UNAVAILABLE or self._connected(channel):
                raise _gateway_error(error) from None
        self.reconnect(channel)
        try:
            return await self._call_once(method, request, metadata)
        except grpc.aio.AioRpcError as error:
            raise _gateway_error(error) from None

    async def _call_once(
        self, method: Method, request: Message, metadata: tuple[tuple[str, str], ...] | None
    ) -> tuple[Message, str | None]:
        callable_ = self._callables.get(method.path)
        if callable_ is None:
            callable_ = self._channel.unary_unary(
                method.path,
                request_serializer=method.request_type.SerializeToString,
                response_deserializer=method.response_type.FromString,
            )
            self._callables[method.path] = callable_
        call = callable_(request, timeout=self.timeout, metadata=metadata)
        response = await call
        return response, _height(await call.initial_metadata())

    @staticmethod
    def _connected(channel: grpc.aio.Channel) -> bool:
        return channel.get_state(try_to_connect=False) is grpc.ChannelConnectivity.READY

    @property
    def connected(self) -> bool:
        """Whether the current channel has a live connection to the node."""
        return self._connected(self._channel)

    def reconnect(self, failed: grpc.aio.Channel) -> None:
        """Replace `failed` by a fresh channel (once, however many calls saw it fail)."""
        if failed is not self._channel:
            return
        self._channel = self._open()
        self._callables = {}
        task = asyncio.get_running_loop().create_task(failed.close(grace=1.0))
        self._retired.add(task)
        task.add_done_callback(self._retired.discard)

    async def close(self) -> None:
        await self._channel.close(grace=1.0)
        if self._retired:
            await asyncio.gather(*self._retired, return_exceptions=True)


def _height(metadata: Any) -> str | None:
    if not metadata:
        return None
    for key, value in metadata:
        if key == HEIGHT_HEADER:
            return value if isinstance(value, str) else value.decode("ascii", "replace")
    return None


def _gateway_error(error: grpc.aio.AioRpcError) -> GatewayError:
    failure = GatewayError.from_rpc(error.code(), error.details())
    height = _height(error.initial_metadata())
    if height is not None:
        failure.headers[HEIGHT_HEADER] = height
    return failure
