"""The chain node (interface C's gRPC side): ixo's query services over twinhub's data."""

from twinhub.chain.node.server import NodeServer

__all__ = ["NodeServer"]
