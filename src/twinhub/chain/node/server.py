"""The node: a gRPC server (grpc.aio) answering ixo's query services from the registry,
with server reflection (so gateways and tools learn its API) and the standard health
service. It shares the process' event loop and Platform with the other interfaces.

The query services are served as bytes by a `Dispatcher` (answers.py), which keeps
serialised answers per database version; a gateway in the same process reaches the
dispatcher directly (`answers.local_node`)."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from twinhub.chain.node import reflection
from twinhub.chain.node.answers import Dispatcher, register_local, unregister_local
from twinhub.chain.node.claims import ClaimsQuery
from twinhub.chain.node.common import VersionCache
from twinhub.chain.node.entity import EntityQuery, IidQuery
from twinhub.chain.node.tendermint import TendermintQuery
from twinhub.chain.node.token import TokenQuery
from twinhub.chain.protos.cosmos.base.tendermint.v1beta1 import query_pb2 as tendermint_q
from twinhub.chain.protos.ixo.claims.v1beta1 import query_pb2 as claims_q
from twinhub.chain.protos.ixo.entity.v1beta1 import query_pb2 as entity_q
from twinhub.chain.protos.ixo.iid.v1beta1 import query_pb2 as iid_q
from twinhub.chain.protos.ixo.token.v1beta1 import query_pb2 as token_q
from twinhub.logging import get_logger
from twinhub.platform import Platform
from twinhub.settings import ChainSettings

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
    def __init__(self, platform: Platform, settings: ChainSettings) -> None:
        self.platform = platform
        self._settings = settings
        self._server: grpc.aio.Server | None = None
        self._health = health.aio.HealthServicer()
        self._reads = platform.reads  # the platform's, closed when it stops
        cache_mib = settings.node_answer_cache_mib
        self.dispatcher = Dispatcher(self._reads, cache_mib * 1024 * 1024)
        self._local: list[str] = []

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
        for servicer, module, name in (
            (EntityQuery(*shared), entity_q, "Query"),
            (IidQuery(*shared), iid_q, "Query"),
            (ClaimsQuery(*shared), claims_q, "Query"),
            (TokenQuery(*shared), token_q, "Query"),
            (TendermintQuery(*shared), tendermint_q, "Service"),
        ):
            self.dispatcher.add(servicer, module.DESCRIPTOR.services_by_name[name])
        server.add_generic_rpc_handlers(
            self.dispatcher.generic_handlers(self._settings.node_one_batch)
        )
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
        self._local = register_local(host, bound, self.dispatcher)
        log.info("node listening", host=host, port=bound)
        return bound

    async def stop(self, grace: float = 1.0) -> None:
        unregister_local(self._local, self.dispatcher)
        self._local = []
        if self._server is not None:
            await self._health.enter_graceful_shutdown()
            await self._server.stop(grace)
            self._server = None
