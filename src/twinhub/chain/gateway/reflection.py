"""Learn a node's API from its gRPC server reflection: which services it offers and the
file descriptors that declare them, including their google.api.http options.

Uses the asyncio reflection stub (one bidirectional stream per attempt) rather than the
synchronous descriptor database, so that learning never blocks the event loop.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2
from grpc import aio
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

# Services every gRPC server may carry that have nothing to transcode.
INFRASTRUCTURE_PREFIXES = ("grpc.reflection.", "grpc.health.")


class ReflectionError(Exception):
    """The node answered the reflection request with an error, or not at all."""


async def learn(
    channel: aio.Channel, deadline: float
) -> tuple[list[str], list[descriptor_pb2.FileDescriptorProto]]:
    """(service names, the files declaring them and their dependencies) within `deadline` s."""
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    stream = stub.ServerReflectionInfo(timeout=deadline)
    try:
        listed = await _ask(stream, reflection_pb2.ServerReflectionRequest(list_services=""))
        services = [
            service.name
            for service in listed.list_services_response.service
            if not service.name.startswith(INFRASTRUCTURE_PREFIXES)
        ]
        files: dict[str, descriptor_pb2.FileDescriptorProto] = {}
        for service in services:
            answer = await _ask(
                stream, reflection_pb2.ServerReflectionRequest(file_containing_symbol=service)
            )
            _collect(answer, files)
        missing = _missing(files)
        while missing:  # a server may answer a file without its dependencies
            for name in missing:
                answer = await _ask(
                    stream, reflection_pb2.ServerReflectionRequest(file_by_filename=name)
                )
                _collect(answer, files)
            still = _missing(files)
            if still & missing:
                raise ReflectionError(f"the node does not describe {sorted(still)[0]}")
            missing = still
        await stream.done_writing()
    finally:
        stream.cancel()
    return services, list(files.values())


async def _ask(
    stream: aio.StreamStreamCall, request: reflection_pb2.ServerReflectionRequest
) -> reflection_pb2.ServerReflectionResponse:
    await stream.write(request)
    answer = await stream.read()
    if answer is aio.EOF:
        raise ReflectionError("the node closed the reflection stream")
    if answer.HasField("error_response"):
        raise ReflectionError(answer.error_response.error_message or "reflection error")
    return answer


def _collect(
    answer: reflection_pb2.ServerReflectionResponse,
    files: dict[str, descriptor_pb2.FileDescriptorProto],
) -> None:
    for raw in answer.file_descriptor_response.file_descriptor_proto:
        file = descriptor_pb2.FileDescriptorProto.FromString(raw)
        files.setdefault(file.name, file)


def _missing(files: dict[str, descriptor_pb2.FileDescriptorProto]) -> set[str]:
    return {dep for file in files.values() for dep in file.dependency if dep not in files}
