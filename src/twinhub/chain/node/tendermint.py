"""`cosmos.base.tendermint.v1beta1.Service`: who the node is and its blocks, which
explorers and chain clients ask before anything else.

twinhub has no consensus engine; its ledger is its chain. Each ledger transaction is one
block: the block's height is the transaction's height, its hash the transaction's hash,
its time the transaction's time, and its previous block id the previous transaction's
hash, so an explorer walking blocks walks twinhub's history and can check the chain of
hashes. A block carries no transactions (twinhub's writes are registry calls, not signed
Cosmos transactions), no commit signatures and no evidence: there are no validators.
`data_hash` is the SHA-256 of the ledger transaction's canonical payload and `app_hash`
the transaction's hash, so both pin the content the block stands for.
"""

from __future__ import annotations

import hashlib

import grpc

from twinhub import __version__
from twinhub.chain.node.common import Servicer, query, timestamp
from twinhub.chain.protos.cosmos.base.tendermint.v1beta1 import query_pb2 as q
from twinhub.chain.protos.cosmos.base.tendermint.v1beta1 import query_pb2_grpc, types_pb2
from twinhub.chain.protos.tendermint.p2p import types_pb2 as p2p
from twinhub.chain.protos.tendermint.types import block_pb2, evidence_pb2
from twinhub.chain.protos.tendermint.types import types_pb2 as tm
from twinhub.chain.protos.tendermint.version import types_pb2 as version
from twinhub.kernel.errors import Invalid, NotFound
from twinhub.services.ledger import Transaction, canonical_json

# The CometBFT v0.38 protocol versions whose wire formats the node's answers follow.
P2P_PROTOCOL, BLOCK_PROTOCOL = 8, 11


def _hash(hex_text: str) -> bytes:
    """A ledger hash (hex) as block-id bytes; the genesis' "previous hash" may be empty."""
    try:
        return bytes.fromhex(hex_text)
    except ValueError:
        return b""


def block_id(tx_hash: str) -> tm.BlockID:
    return tm.BlockID(hash=_hash(tx_hash), part_set_header=tm.PartSetHeader())


def _header_fields(chain_id: str, tx: Transaction) -> dict[str, object]:
    previous = _hash(tx.prev_hash) if tx.height > 1 else b""
    return {
        "version": version.Consensus(block=BLOCK_PROTOCOL),
        "chain_id": chain_id,
        "height": tx.height,
        "time": timestamp(tx.created_at),
        "last_block_id": tm.BlockID(hash=previous, part_set_header=tm.PartSetHeader()),
        "data_hash": hashlib.sha256(_canonical(tx)).digest(),
        "app_hash": _hash(tx.tx_hash),
    }


def _canonical(tx: Transaction) -> bytes:
    return canonical_json(tx.payload).encode()


def blocks(chain_id: str, tx: Transaction) -> tuple[tm.BlockID, block_pb2.Block, types_pb2.Block]:
    """The ledger transaction as a block id, a CometBFT block and an SDK block. Every
    field a Go node always writes (header, data, evidence, the zero part-set header) is
    set, so that the JSON shows them as a node's does."""
    fields = _header_fields(chain_id, tx)
    commit = tm.Commit(height=tx.height - 1, block_id=fields["last_block_id"])
    comet = block_pb2.Block(
        header=tm.Header(**fields),  # type: ignore[arg-type]
        data=tm.Data(),
        evidence=evidence_pb2.EvidenceList(),
        last_commit=commit,
    )
    sdk = types_pb2.Block(
        header=types_pb2.Header(**fields),  # type: ignore[arg-type]
        data=tm.Data(),
        evidence=evidence_pb2.EvidenceList(),
        last_commit=commit,
    )
    return block_id(tx.tx_hash), comet, sdk


class TendermintQuery(Servicer, query_pb2_grpc.ServiceServicer):
    def _node_id(self) -> str:
        """A stable 20-byte node id (hex), as CometBFT derives from its node key."""
        settings = self.platform.settings
        seed = f"{settings.chain.chain_id}/{settings.chain.node_moniker}".encode()
        return hashlib.sha256(seed).digest()[:20].hex()

    @query
    async def GetNodeInfo(
        self, request: q.GetNodeInfoRequest, context: grpc.aio.ServicerContext
    ) -> q.GetNodeInfoResponse:
        settings = self.platform.settings
        return q.GetNodeInfoResponse(
            default_node_info=p2p.DefaultNodeInfo(
                protocol_version=p2p.ProtocolVersion(p2p=P2P_PROTOCOL, block=BLOCK_PROTOCOL),
                default_node_id=self._node_id(),
                network=settings.chain.chain_id,
                version=__version__,
                moniker=settings.chain.node_moniker,
                other=p2p.DefaultNodeInfoOther(tx_index="off"),
            ),
            application_version=q.VersionInfo(
                name="twinhub", app_name="twinhub", version=__version__
            ),
        )

    @query
    async def GetSyncing(
        self, request: q.GetSyncingRequest, context: grpc.aio.ServicerContext
    ) -> q.GetSyncingResponse:
        return q.GetSyncingResponse(syncing=False)  # the ledger is local: always caught up

    async def _block_at(self, height: int) -> tuple[tm.BlockID, block_pb2.Block, types_pb2.Block]:
        tx = await self.platform.ledger.transaction(height)
        if tx is None:
            raise NotFound(f"no block at height {height}")
        return blocks(self.platform.settings.chain.chain_id, tx)

    @query
    async def GetLatestBlock(
        self, request: q.GetLatestBlockRequest, context: grpc.aio.ServicerContext
    ) -> q.GetLatestBlockResponse:
        height = await self.platform.ledger.height()
        if height == 0:
            raise NotFound("no block yet: the ledger is empty")
        ident, comet, sdk = await self._block_at(height)
        return q.GetLatestBlockResponse(block_id=ident, block=comet, sdk_block=sdk)

    @query
    async def GetBlockByHeight(
        self, request: q.GetBlockByHeightRequest, context: grpc.aio.ServicerContext
    ) -> q.GetBlockByHeightResponse:
        latest = await self.platform.ledger.height()
        if request.height < 1:
            raise Invalid("height must be greater than 0")
        if request.height > latest:
            raise Invalid(
                f"requested block height {request.height} is bigger than the chain length {latest}"
            )
        ident, comet, sdk = await self._block_at(request.height)
        return q.GetBlockByHeightResponse(block_id=ident, block=comet, sdk_block=sdk)
