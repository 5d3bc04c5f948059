"""gRPC status ↔ HTTP status, and the one error body every gateway answer uses:
`{"code": <gRPC code number>, "message": "...", "details": []}` (the Cosmos gateway's shape).

Messages of statuses a client can act on (not found, invalid argument, ...) come from the
node, which writes them for clients. Statuses that describe the machinery (unavailable,
internal, deadline) get fixed texts instead, so no address, stack or driver error leaks.
"""

from __future__ import annotations

import grpc
import orjson

HTTP_STATUS: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DATA_LOSS: 500,
    grpc.StatusCode.UNAUTHENTICATED: 401,
}

# Statuses whose upstream text is replaced: it would describe servers, not the request.
FIXED_MESSAGES: dict[grpc.StatusCode, str] = {
    grpc.StatusCode.UNAVAILABLE: "the chain node is unavailable; try again shortly",
    grpc.StatusCode.DEADLINE_EXCEEDED: "the chain node did not answer in time",
    grpc.StatusCode.UNKNOWN: "the chain node failed to answer",
    grpc.StatusCode.INTERNAL: "the chain node failed to answer",
    grpc.StatusCode.DATA_LOSS: "the chain node failed to answer",
    grpc.StatusCode.CANCELLED: "the request was cancelled",
}
MAX_MESSAGE_CHARS = 500


class GatewayError(Exception):
    """A request that ends in an error body; `http_status` overrides the mapped status
    (405 for a wrong HTTP method, which has no gRPC status of its own)."""

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        http_status: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.http_status = http_status or HTTP_STATUS.get(code, 500)
        self.headers = headers or {}

    @classmethod
    def from_rpc(cls, code: grpc.StatusCode, details: str | None) -> GatewayError:
        """The error for a status the node answered, with a message safe to show."""
        message = FIXED_MESSAGES.get(code) or (details or code.name.lower().replace("_", " "))
        return cls(code, message[:MAX_MESSAGE_CHARS])

    def body(self) -> bytes:
        return error_body(self.code, self.message)


def error_body(code: grpc.StatusCode, message: str) -> bytes:
    return orjson.dumps({"code": code.value[0], "message": message, "details": []})
