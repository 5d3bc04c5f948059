"""`cosmos.base.tendermint.v1beta1.Service` over real gRPC and through the REST gateway, on
both backends: node info with the configured chain id, and blocks that are the ledger's
transactions (height, hash, time, the previous block's hash)."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import grpc
import pytest

from tests.conftest import Registry, RegistryFactory
from tests.support.chain_gateway import gateway_settings, running_gateway, running_node
from twinhub.chain.protos.cosmos.base.tendermint.v1beta1 import query_pb2 as q
from twinhub.chain.protos.cosmos.base.tendermint.v1beta1 import query_pb2_grpc


@pytest.fixture
async def registry(make_registry: RegistryFactory) -> Registry:
    return await make_registry(chain_id="twinhub-test-7", node_moniker="probe")


@pytest.fixture
async def node(registry: Registry) -> AsyncIterator[str]:
    async with running_node(registry.platform) as address:
        yield address


async def _grow_ledger(registry: Registry) -> None:
    """Two registry writes, so the ledger has a few blocks past its genesis ones."""
    for name in ("Block One", "Block Two"):
        made = await registry.client.post(
            "/v1/domains",
            json={
                "type": "Organisation",
                "class": "did:ixo:protocol/organisation",
                "metadata": {"name": name},
            },
        )
        assert made.status_code == 201, made.text


async def test_node_info_and_blocks_over_grpc(registry: Registry, node: str) -> None:
    await _grow_ledger(registry)
    ledger = registry.platform.ledger
    latest = await ledger.height()
    async with grpc.aio.insecure_channel(node) as channel:
        stub = query_pb2_grpc.ServiceStub(channel)
        info = await stub.GetNodeInfo(q.GetNodeInfoRequest())
        assert info.default_node_info.network == "twinhub-test-7"
        assert info.default_node_info.moniker == "probe"
        assert len(bytes.fromhex(info.default_node_info.default_node_id)) == 20
        assert info.application_version.app_name == "twinhub"
        assert (await stub.GetSyncing(q.GetSyncingRequest())).syncing is False
        head = await stub.GetLatestBlock(q.GetLatestBlockRequest())
        tx = await ledger.transaction(latest)
        previous = await ledger.transaction(latest - 1)
        assert tx is not None and previous is not None
        assert head.block_id.hash == bytes.fromhex(tx.tx_hash)
        header = head.sdk_block.header
        assert header.height == latest and header.chain_id == "twinhub-test-7"
        assert header.time.ToDatetime().replace(tzinfo=tx.created_at.tzinfo) == tx.created_at
        assert header.last_block_id.hash == bytes.fromhex(previous.tx_hash)
        comet = head.block.header  # the CometBFT form says the same
        assert (comet.height, comet.chain_id, comet.app_hash) == (
            header.height,
            header.chain_id,
            header.app_hash,
        )
        one = await stub.GetBlockByHeight(q.GetBlockByHeightRequest(height=latest - 1))
        assert one.block_id.hash == header.last_block_id.hash  # the chain links up
        for height in (0, -3, latest + 1):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.GetBlockByHeight(q.GetBlockByHeightRequest(height=height))
            assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT, height


async def test_tendermint_routes_through_the_gateway(registry: Registry, node: str) -> None:
    await _grow_ledger(registry)
    latest = await registry.platform.ledger.height()
    tx = await registry.platform.ledger.transaction(latest)
    assert tx is not None
    settings = gateway_settings(registry.platform.settings)
    async with running_gateway(settings, node) as gateway:
        info = await gateway.get("/cosmos/base/tendermint/v1beta1/node_info")
        assert info.status_code == 200, info.text
        node_info = info.json()["default_node_info"]
        assert node_info["network"] == "twinhub-test-7"
        assert node_info["protocol_version"] == {"p2p": "8", "block": "11", "app": "0"}
        assert node_info["other"] == {"tx_index": "off", "rpc_address": ""}
        syncing = await gateway.get("/cosmos/base/tendermint/v1beta1/syncing")
        assert syncing.json() == {"syncing": False}
        latest_block = (await gateway.get("/cosmos/base/tendermint/v1beta1/blocks/latest")).json()
        assert base64.b64decode(latest_block["block_id"]["hash"]) == bytes.fromhex(tx.tx_hash)
        assert latest_block["block_id"]["part_set_header"] == {"total": 0, "hash": None}
        header = latest_block["sdk_block"]["header"]
        assert header["height"] == str(latest) and header["chain_id"] == "twinhub-test-7"
        assert header["time"].endswith("Z") and header["version"] == {"block": "11", "app": "0"}
        assert latest_block["sdk_block"]["data"] == {"txs": []}
        assert latest_block["sdk_block"]["evidence"] == {"evidence": []}
        by_height = await gateway.get(f"/cosmos/base/tendermint/v1beta1/blocks/{latest}")
        assert by_height.json()["block_id"] == latest_block["block_id"]
        too_high = await gateway.get(f"/cosmos/base/tendermint/v1beta1/blocks/{latest + 5}")
        assert too_high.status_code == 400 and too_high.json()["code"] == 3
        not_a_height = await gateway.get("/cosmos/base/tendermint/v1beta1/blocks/abc")
        assert not_a_height.status_code == 400 and not_a_height.json()["code"] == 3
        # What twinhub does not serve (no bank, no staking, no transactions) answers in the
        # Cosmos error shape, as a node without that module does.
        for path in (
            "/cosmos/bank/v1beta1/balances/ixo1abc",
            "/cosmos/tx/v1beta1/txs/ABCD",
            "/cosmos/base/tendermint/v1beta1/validatorsets/latest",
        ):
            missing = await gateway.get(path)
            assert missing.status_code == 404, path
            assert set(missing.json()) == {"code", "message", "details"}
            assert missing.json()["code"] == 5
