"""The chain context's start: the node over a Platform, from ChainSettings. The REST
gateway needs no Platform and is built by `chain.gateway.app.create_gateway_app`."""

from __future__ import annotations

from twinhub.chain.node.server import NodeServer
from twinhub.platform import Platform


def build_node(platform: Platform) -> NodeServer:
    """The gRPC node over the platform's read path (`Platform.reads`), its answer cache
    and send path set by NODE_ANSWER_CACHE_MIB and NODE_ONE_BATCH."""
    return NodeServer(platform, platform.settings.chain)
