"""gRPC server reflection for the node: `grpc.reflection.v1` and `v1alpha`, answering from
descriptors that carry `json_name`.

grpcio-reflection answers from the descriptors the generated modules register, and protoc
leaves `json_name` out of those, so reflection-driven tools (grpcurl, gateways) would
print `relayer_node` where the protos say `relayerNode`. The node therefore serves from a
private pool built from the shipped descriptor set (which protoc writes with `json_name`),
plus the health and reflection files with `json_name` filled in the same way.

grpcio-reflection implements only v1alpha. v1 is the same protocol under another package
name (identical messages, field names and numbers), so the v1 service is the same
servicer registered under the v1 name, and its file descriptor is v1alpha's renamed.
"""

from __future__ import annotations

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import FileDescriptor
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection, reflection_pb2

from twinhub.chain.descriptors import file_descriptor_set

V1_SERVICE = "grpc.reflection.v1.ServerReflection"
V1ALPHA_SERVICE = reflection.SERVICE_NAME


def json_name(field_name: str) -> str:
    """protoc's JSON name of a field: underscores dropped, the letter after each one
    upper-cased (`relayer_node` → `relayerNode`)."""
    parts = field_name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _fill_json_names(messages: list[descriptor_pb2.DescriptorProto]) -> None:
    for message in messages:
        for field in message.field:
            if not field.HasField("json_name"):
                field.json_name = json_name(field.name)
        _fill_json_names(list(message.nested_type))


def _file_proto(descriptor: FileDescriptor) -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto()
    descriptor.CopyToProto(proto)
    _fill_json_names(list(proto.message_type))
    return proto


def v1_reflection_file() -> descriptor_pb2.FileDescriptorProto:
    """v1alpha's reflection.proto under the v1 name and package."""
    proto = _file_proto(reflection_pb2.DESCRIPTOR)
    proto.name = "grpc/reflection/v1/reflection.proto"
    proto.package = "grpc.reflection.v1"
    proto.ClearField("options")
    old, new = ".grpc.reflection.v1alpha.", ".grpc.reflection.v1."
    for message in proto.message_type:
        for field in message.field:
            if field.HasField("type_name"):
                field.type_name = field.type_name.replace(old, new)
    for service in proto.service:
        for method in service.method:
            method.input_type = method.input_type.replace(old, new)
            method.output_type = method.output_type.replace(old, new)
    return proto


def reflection_pool() -> descriptor_pool.DescriptorPool:
    """Every file the node describes, with `json_name` on every field."""
    pool = descriptor_pool.DescriptorPool()
    shipped = file_descriptor_set().file
    for file in shipped:
        _fill_json_names(list(file.message_type))
        pool.Add(file)
    for extra in (_file_proto(health_pb2.DESCRIPTOR), _file_proto(reflection_pb2.DESCRIPTOR)):
        pool.Add(extra)
    pool.Add(v1_reflection_file())
    return pool


def enable(server: grpc.aio.Server, services: tuple[str, ...]) -> None:
    """Serve reflection (v1 and v1alpha) for `services` and for itself."""
    names = (*services, V1_SERVICE, V1ALPHA_SERVICE)
    servicer = reflection.ReflectionServicer(names, pool=reflection_pool())
    handler = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    for service in (V1ALPHA_SERVICE, V1_SERVICE):
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service, {"ServerReflectionInfo": handler}),)
        )
