"""The node: a gRPC server (grpc.aio) answering ixo's query services from the registry,
with server reflection (so gateways and tools learn its API) and the standard health
service. It shares the process' event loop and Platform with the other interfaces."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from twinhub.chain.node import reflection
from twinhub.chain.node.claims import ClaimsQuery
from twinhub.chain.node.common import VersionCache
from twinhub.chain.node.entity import EntityQuery, IidQuery
from twinhub.chain.node.tendermint import TendermintQuery
from twinhub.chain.node.token import TokenQuery
from twinhub.chain.protos.cosmos.base.tendermint.v1beta1 import (
    query_pb2_grpc as tendermint_grpc,
)
from twinhub.chain.protos.ixo.claims.v1beta1 import query_pb2_grpc as claims_grpc
from twinhub.chain.protos.ixo.entity.v1beta1 import query_pb2_grpc as entity_grpc
from twinhub.chain.protos.ixo.iid.v1beta1 import query_pb2_grpc as iid_grpc
from twinhub.chain.protos.ixo.token.v1beta1 import query_pb2_grpc as token_grpc
from twinhub.logging import get_logger
from twinhub.platform import Platform
from twinhub.services.read_model import ReadModel

log = get_logger(__name__)
SERVICES = (
    "ixo.entity.v1beta1.Query",
    "ixo.iid.v1beta1.Query",
    "ixo.claims.v1beta1.Query",
    "ixo.token.v1beta1.Query",
    "cosmos.base.tendermint.v1beta1.Service",
)
MAX_MESSAGE_BYTES = 4 * 1024 * 1024


class NodeServer:
    def __init__(self, platform: Platform) -> None:
        self.platform = platform
        self._server: grpc.aio.Server | None = None
        self._health = health.aio.HealthServicer()
        self._reads = ReadModel(platform)

    async def start(self, host: str, port: int, reuse_port: bool = False) -> int:
        """Listen on host:port (0 picks a free port); returns the bound port. `reuse_port`
        shares the port with other worker processes (`twinhub serve --workers`)."""
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.so_reuseport", 1 if reuse_port else 0),
            ]
        )
        shared = (self.platform, self._reads, VersionCache())
        entity_grpc.add_QueryServicer_to_server(EntityQuery(*shared), server)
        iid_grpc.add_QueryServicer_to_server(IidQuery(*shared), server)
        claims_grpc.add_QueryServicer_to_server(ClaimsQuery(*shared), server)
        token_grpc.add_QueryServicer_to_server(TokenQuery(*shared), server)
        tendermint_grpc.add_ServiceServicer_to_server(TendermintQuery(*shared), server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        reflection.enable(
            server, (*SERVICES, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name)
        )
        bound = server.add_insecure_port(f"{host}:{port}")
        if bound == 0:
            raise OSError(f"the node cannot listen on {host}:{port}")
        await server.start()
        for name in ("", *SERVICES):
            await self._health.set(name, health_pb2.HealthCheckResponse.SERVING)
        self._server = server
        log.info("node listening", host=host, port=bound)
        return bound

    async def stop(self, grace: float = 1.0) -> None:
        if self._server is not None:
            await self._health.enter_graceful_shutdown()
            await self._server.stop(grace)
            self._server = None
        self._reads.close()
