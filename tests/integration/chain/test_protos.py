"""The committed protobuf code is what proto/ generates, and it matches ixo's wire contract."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from google.api import annotations_pb2
from google.protobuf import json_format

from twinhub.chain.descriptors import QUERY_SERVICES, file_descriptor_set, http_routes

ROOT = Path(__file__).resolve().parents[3]
GENERATED = ROOT / "src" / "twinhub" / "chain" / "protos"
PROTOS = "twinhub.chain.protos"
QUERY_MODULES = {
    "ixo.entity.v1beta1.Query": f"{PROTOS}.ixo.entity.v1beta1.query_pb2",
    "ixo.iid.v1beta1.Query": f"{PROTOS}.ixo.iid.v1beta1.query_pb2",
    "ixo.claims.v1beta1.Query": f"{PROTOS}.ixo.claims.v1beta1.query_pb2",
    "ixo.token.v1beta1.Query": f"{PROTOS}.ixo.token.v1beta1.query_pb2",
    "cosmos.base.tendermint.v1beta1.Service": f"{PROTOS}.cosmos.base.tendermint.v1beta1.query_pb2",
}


def _tree(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def test_committed_code_is_what_the_generator_writes(tmp_path: Path) -> None:
    out = tmp_path / "protos"
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_protos.py"), "--out", str(out)],
        check=True,
        cwd=tmp_path,
    )
    fresh, committed = _tree(out), _tree(GENERATED)
    assert sorted(fresh) == sorted(committed), "run ./dev protos and commit the result"
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"stale generated files (run ./dev protos): {stale}"


def _service(full_name: str):
    module = importlib.import_module(QUERY_MODULES[full_name])
    return module.DESCRIPTOR.services_by_name[full_name.rsplit(".", 1)[1]]


def _http_get(full_name: str, method: str) -> str:
    options = _service(full_name).methods_by_name[method].GetOptions()
    rule = options.Extensions[annotations_pb2.http]
    assert rule.WhichOneof("pattern") == "get"
    return rule.get


@pytest.mark.parametrize("full_name", QUERY_SERVICES)
def test_every_query_method_has_an_http_get_rule(full_name: str) -> None:
    service = _service(full_name)
    assert service.full_name == full_name
    assert service.methods, full_name
    for method in service.methods:
        root = "/ixo/" if full_name.startswith("ixo.") else "/cosmos/"
        assert _http_get(full_name, method.name).startswith(root), method.full_name


@pytest.mark.parametrize("full_name", QUERY_SERVICES)
def test_grpc_modules_offer_stub_servicer_and_registration(full_name: str) -> None:
    grpc_module = importlib.import_module(QUERY_MODULES[full_name] + "_grpc")
    name = full_name.rsplit(".", 1)[1]
    assert hasattr(grpc_module, f"{name}Stub")
    assert hasattr(grpc_module, f"{name}Servicer")
    assert hasattr(grpc_module, f"add_{name}Servicer_to_server")


def test_method_names_and_routes_follow_ixo() -> None:
    entity = {m.name for m in _service("ixo.entity.v1beta1.Query").methods}
    assert entity == {
        "Params",
        "Entity",
        "EntityMetaData",
        "EntityIidDocument",
        "EntityVerified",
        "EntityList",
    }
    assert _http_get("ixo.entity.v1beta1.Query", "Entity") == "/ixo/entity/{id}"
    assert _http_get("ixo.entity.v1beta1.Query", "EntityList") == "/ixo/entity"
    assert _http_get("ixo.iid.v1beta1.Query", "IidDocument") == "/ixo/did/dids/{id}"
    assert _http_get("ixo.claims.v1beta1.Query", "Dispute") == "/ixo/claims/dispute/{proof}"
    assert (
        _http_get("ixo.token.v1beta1.Query", "TokenDoc")
        == "/ixo/token/minter/{minter}/{contract_address}"
    )


def test_field_numbers_follow_ixo_and_cosmos() -> None:
    from twinhub.chain.protos.cosmos.base.query.v1beta1 import pagination_pb2
    from twinhub.chain.protos.ixo.claims.v1beta1 import claims_pb2
    from twinhub.chain.protos.ixo.entity.v1beta1 import entity_pb2
    from twinhub.chain.protos.ixo.iid.v1beta1 import iid_pb2
    from twinhub.chain.protos.ixo.token.v1beta1 import token_pb2

    def numbers(message) -> dict[str, int]:
        return {field.name: field.number for field in message.DESCRIPTOR.fields}

    assert numbers(pagination_pb2.PageRequest) == {
        "key": 1,
        "offset": 2,
        "limit": 3,
        "count_total": 4,
        "reverse": 5,
    }
    assert numbers(pagination_pb2.PageResponse) == {"next_key": 1, "total": 2}
    assert numbers(entity_pb2.Entity)["entity_verified"] == 8
    assert numbers(entity_pb2.Entity)["accounts"] == 10
    assert numbers(iid_pb2.IidDocument)["verificationMethod"] == 4
    assert numbers(iid_pb2.IidDocument)["metadata"] == 16
    assert numbers(claims_pb2.Collection)["state"] == 13
    assert numbers(claims_pb2.Collection)["adjudicators"] == 29
    assert numbers(claims_pb2.CW20Payment) == {"address": 1, "amount": 3}
    assert numbers(token_pb2.Token)["supply"] == 9
    assert claims_pb2.EvaluationStatus.Value("FLAGGED") == 5
    assert claims_pb2.PaymentStatus.Value("DISPUTED_PAYMENT") == 6
    assert claims_pb2.DisputeTargetRole.Value("DISPUTE_TARGET_ROLE_EVALUATOR") == 2


def test_iid_document_keeps_ixo_declared_camel_case_names() -> None:
    from twinhub.chain.protos.ixo.iid.v1beta1 import iid_pb2, types_pb2

    document = iid_pb2.IidDocument(
        id="did:ixo:entity/x",
        verificationMethod=[types_pb2.VerificationMethod(id="k1", publicKeyMultibase="z6Mk")],
    )
    as_json = json_format.MessageToDict(document, preserving_proto_field_name=True)
    assert as_json["verificationMethod"] == [{"id": "k1", "publicKeyMultibase": "z6Mk"}]
    assert iid_pb2.IidDocument.FromString(document.SerializeToString()) == document


def test_message_classes_name_their_real_module() -> None:
    from twinhub.chain.protos.ixo.entity.v1beta1 import entity_pb2

    assert entity_pb2.Entity.__module__ == f"{PROTOS}.ixo.entity.v1beta1.entity_pb2"


def test_descriptor_set_gives_the_same_routes_as_the_modules() -> None:
    names = {file.name for file in file_descriptor_set().file}
    assert {"google/api/http.proto", "ixo/iid/v1beta1/types.proto"} <= names
    from_set = {(r.service, r.method): (r.verb, r.path) for r in http_routes()}
    from_modules = {
        (name, method.name): ("get", _http_get(name, method.name))
        for name in QUERY_SERVICES
        for method in _service(name).methods
    }
    assert from_set == from_modules
    assert len(from_set) == 6 + 2 + 15 + 4 + 4  # entity, iid, claims, token, tendermint


def test_unknown_service_is_refused() -> None:
    with pytest.raises(KeyError, match=r"ixo\.nope\.v1\.Query"):
        http_routes(("ixo.nope.v1.Query",))
