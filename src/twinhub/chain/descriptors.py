"""The ixo query services as descriptors, for the gRPC node and the REST gateway.

The generated modules live in `twinhub.chain.protos` (written from proto/ by
tools/gen_protos.py). Beside them sits `descriptors.binpb`, a FileDescriptorSet of every
proto file with its imports, so the gateway can build its route table from the
google.api.http rules without importing (and registering) every generated module.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

# Imported for its side effect too: it registers the google.api.http extension, without
# which method options parse with the rule left as an unknown field.
from google.api import annotations_pb2, http_pb2
from google.protobuf import descriptor_pb2

PROTOS_PACKAGE = "twinhub.chain.protos"
DESCRIPTOR_SET = "descriptors.binpb"
QUERY_SERVICES = (
    "ixo.entity.v1beta1.Query",
    "ixo.iid.v1beta1.Query",
    "ixo.claims.v1beta1.Query",
    "ixo.token.v1beta1.Query",
    "cosmos.base.tendermint.v1beta1.Service",
)


@dataclass(frozen=True, slots=True)
class HttpRoute:
    """One google.api.http binding of an RPC method."""

    service: str  # full service name, e.g. "ixo.entity.v1beta1.Query"
    method: str  # e.g. "Entity"
    verb: str  # "get", "post", ... or the custom verb
    path: str  # template, e.g. "/ixo/entity/{id}"
    body: str  # request field sent as the body ("" for GET)
    input_type: str  # full message name, no leading dot
    output_type: str


def file_descriptor_set() -> descriptor_pb2.FileDescriptorSet:
    """Parse the shipped descriptor set anew on each call, so no caller alters another's."""
    data = resources.files(PROTOS_PACKAGE).joinpath(DESCRIPTOR_SET).read_bytes()
    return descriptor_pb2.FileDescriptorSet.FromString(data)


def _bindings(rule: http_pb2.HttpRule) -> list[tuple[str, str, str]]:
    """The (verb, path, body) pairs of a rule and its additional bindings."""
    found = []
    for binding in (rule, *rule.additional_bindings):
        pattern = binding.WhichOneof("pattern")
        if pattern is None:
            continue
        if pattern == "custom":
            found.append((binding.custom.kind, binding.custom.path, binding.body))
        else:
            found.append((pattern, getattr(binding, pattern), binding.body))
    return found


def http_routes(services: tuple[str, ...] = QUERY_SERVICES) -> list[HttpRoute]:
    """Every HTTP binding of the named services, in declaration order.

    Raises KeyError naming any service the descriptor set does not contain, so a typo or a
    stale set fails loudly instead of serving fewer routes.
    """
    routes: list[HttpRoute] = []
    seen: set[str] = set()
    for file in file_descriptor_set().file:
        for service in file.service:
            full_name = f"{file.package}.{service.name}" if file.package else service.name
            if full_name not in services:
                continue
            seen.add(full_name)
            for method in service.method:
                rule = method.options.Extensions[annotations_pb2.http]
                routes.extend(
                    HttpRoute(
                        service=full_name,
                        method=method.name,
                        verb=verb,
                        path=path,
                        body=body,
                        input_type=method.input_type.lstrip("."),
                        output_type=method.output_type.lstrip("."),
                    )
                    for verb, path, body in _bindings(rule)
                )
    missing = [name for name in services if name not in seen]
    if missing:
        raise KeyError(f"not in {DESCRIPTOR_SET}: {', '.join(missing)}")
    return routes
