"""The gateway's pure parts without sockets: route matching, transcoding and rendering."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import json_format

from twinhub.chain.gateway.errors import GatewayError
from twinhub.chain.gateway.render import LEGACY_DEC_FIELDS, legacy_dec, to_json
from twinhub.chain.gateway.routes import RouteTable, compiled_source, served_path
from twinhub.chain.gateway.transcode import build_request
from twinhub.chain.protos.ixo.claims.v1beta1 import claims_pb2
from twinhub.chain.protos.ixo.claims.v1beta1 import query_pb2 as claims_q


@pytest.fixture(scope="module")
def table() -> RouteTable:
    pool, bindings = compiled_source()
    return RouteTable.build(pool, bindings, prefix="ixo", legacy=True)


@pytest.mark.parametrize(
    ("path", "method", "values"),
    [
        ("/ixo/entity/params", "Params", {}),
        ("/ixo/entity/did:ixo:entity/abc", "Entity", {"id": "did:ixo:entity/abc"}),
        (
            "/ixo/entity/did:ixo:entity/abc/verified",
            "EntityVerified",
            {"id": "did:ixo:entity/abc"},
        ),
        (
            "/ixo/entity/did:ixo:entity/abc/iiddocument",
            "EntityIidDocument",
            {"id": "did:ixo:entity/abc"},
        ),
        # Percent-encoded: %2F never splits a value, so this is one id.
        (
            "/ixo/entity/did%3Aixo%3Aentity%2Fabc%2Fverified",
            "Entity",
            {"id": "did:ixo:entity/abc/verified"},
        ),
        ("/ixo/entity", "EntityList", {}),
        ("/ixo/did/dids/did:ixo:entity/a/b", "IidDocument", {"id": "did:ixo:entity/a/b"}),
        ("/ixo/claims/collection/5", "Collection", {"id": "5"}),
        ("/ixo/claims/collection/5/members", "CollectionMemberList", {"collectionId": "5"}),
        (
            "/ixo/claims/collection/5/member/ixo1abc",
            "CollectionMember",
            {"collectionId": "5", "memberAddress": "ixo1abc"},
        ),
        (
            "/ixo/claims/intent/ixo1agent/7/i-1",
            "Intent",
            {"agentAddress": "ixo1agent", "collectionId": "7", "id": "i-1"},
        ),
        ("/ixo/token/minter/did:key:z6Mkabc", "TokenList", {"minter": "did:key:z6Mkabc"}),
        (
            "/ixo/token/minter/did:key:z6Mkabc/CARBON",
            "TokenDoc",
            {"minter": "did:key:z6Mkabc", "contract_address": "CARBON"},
        ),
        (
            "/ixo/token/minter/did%3Aixo%3Aorg%2Fx/CARBON",
            "TokenDoc",
            {"minter": "did:ixo:org/x", "contract_address": "CARBON"},
        ),
        ("/ixo/entity/config", "Params", {}),  # legacy alias beats {id}
        ("/did/did:ixo:entity/abc", "IidDocument", {"id": "did:ixo:entity/abc"}),
        ("/ixo/claim/c-1", "Claim", {"id": "c-1"}),
    ],
)
def test_matching(table: RouteTable, path: str, method: str, values: dict[str, str]) -> None:
    found = table.match(path)
    assert found is not None, path
    route, bound = found
    assert route.method.name == method
    assert bound == values


@pytest.mark.parametrize("path", ["/ixo", "/ixo/", "/ixo/entity/", "/ixo/nothing", "/cosmos/x"])
def test_unserved_paths(table: RouteTable, path: str) -> None:
    assert table.match(path) is None


def test_a_value_that_is_not_utf8_is_refused(table: RouteTable) -> None:
    with pytest.raises(UnicodeDecodeError):
        table.match("/ixo/entity/%FF")


def test_prefix_replaces_only_the_ixo_segment() -> None:
    assert served_path("/ixo/entity/{id}", "chain") == "/chain/entity/{id}"
    assert served_path("/ixo", "api/ixo") == "/api/ixo"
    assert served_path("/did/{id}", "chain") == "/did/{id}"
    assert served_path("/ixon/x", "chain") == "/ixon/x"
    pool, bindings = compiled_source()
    nested = RouteTable.build(pool, bindings, prefix="api/v1", legacy=False)
    found = nested.match("/api/v1/entity/did:ixo:entity/x/verified")
    assert found is not None and found[0].method.name == "EntityVerified"


def test_transcoding_fills_fields_by_name_and_type(table: RouteTable) -> None:
    found = table.match("/ixo/claims/dispute-by-subject/s-1/DISPUTE_TARGET_ROLE_EVALUATOR")
    assert found is not None
    route, values = found
    request = build_request(route.method.request_type, values, b"")
    assert request.subjectId == "s-1" and request.targetRole == 2
    by_number = build_request(route.method.request_type, {"targetRole": "1"}, b"")
    assert by_number.targetRole == 1
    with pytest.raises(GatewayError) as bad:
        build_request(route.method.request_type, {"targetRole": "JUDGE"}, b"")
    assert bad.value.http_status == 400 and "DISPUTE_TARGET_ROLE_SUBMITTER" in bad.value.message
    listing = build_request(
        claims_q.QueryClaimListRequest,
        {},
        b"pagination.limit=5&pagination.reverse=True&pagination.countTotal=1&pagination.key=AQ%3D%3D",
    )
    assert listing.pagination.limit == 5 and listing.pagination.reverse
    assert listing.pagination.count_total and listing.pagination.key == b"\x01"
    # A query parameter never overrides a path-bound field.
    path_wins = build_request(claims_q.QueryClaimRequest, {"id": "a"}, b"id=b")
    assert path_wins.id == "a"
    with pytest.raises(GatewayError):
        build_request(claims_q.QueryClaimListRequest, {}, b"pagination.limit=%FF")


def test_rendering_follows_cosmos_conventions() -> None:
    claim = claims_pb2.Claim(
        claim_id="c",
        evaluation_history=[claims_pb2.Evaluation(status=claims_pb2.FLAGGED)],
    )
    rendered = to_json(claims_q.QueryClaimResponse(claim=claim))["claim"]
    assert rendered["evaluation"] is None and rendered["submission_date"] is None
    assert rendered["payments_status"] is None
    history = rendered["evaluation_history"][0]
    assert history["status"] == "FLAGGED" and history["evaluation_date"] is None
    assert history["reason"] == 0 and history["cw20_payment"] == []
    collection = to_json(
        claims_q.QueryCollectionResponse(
            collection=claims_pb2.Collection(
                id="1",
                quota=2**63,
                adjudicators=[claims_pb2.AdjudicationDid(reward_percentage="2500000000000000000")],
            )
        )
    )["collection"]
    assert collection["quota"] == str(2**63)
    assert collection["adjudicators"] == [{"did": "", "reward_percentage": "2.500000000000000000"}]
    assert collection["payments"] is None


@pytest.mark.parametrize(
    ("wire", "text"),
    [
        ("100000000000000000", "0.100000000000000000"),
        ("1500000000000000000", "1.500000000000000000"),
        ("0", "0.000000000000000000"),
        ("-5", "-0.000000000000000005"),
        ("", ""),
        ("0.5", "0.5"),
    ],
)
def test_legacy_dec(wire: str, text: str) -> None:
    assert legacy_dec(wire) == text


def reference_json(message: Any) -> Any:
    """What the renderer must write, built the slow way: json_format, then the Cosmos
    conventions (null for unset messages and empty bytes, LegacyDec as decimal text)."""
    data = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )

    def complete(descriptor: Any, value: dict[str, Any]) -> None:
        decimals = LEGACY_DEC_FIELDS.get(descriptor.full_name, frozenset())
        for field in descriptor.fields:
            key = field.name
            if key in decimals:
                value[key] = legacy_dec(value[key])
            elif field.type == field.TYPE_BYTES and not field.is_repeated:
                value[key] = value.get(key) or None
            elif field.type != field.TYPE_MESSAGE or field.message_type.full_name.startswith(
                "google.protobuf."
            ):
                if field.type == field.TYPE_MESSAGE and not field.is_repeated:
                    value.setdefault(key, None)
            elif field.is_repeated:
                for item in value[key]:
                    complete(field.message_type, item)
            elif field.containing_oneof is None:
                if value.get(key) is None:
                    value[key] = None
                else:
                    complete(field.message_type, value[key])

    complete(message.DESCRIPTOR, data)
    return data


def sample_messages() -> list[Any]:
    from google.protobuf.duration_pb2 import Duration
    from google.protobuf.timestamp_pb2 import Timestamp

    from twinhub.chain.protos.cosmos.base.query.v1beta1 import pagination_pb2
    from twinhub.chain.protos.cosmos.base.v1beta1 import coin_pb2
    from twinhub.chain.protos.ixo.entity.v1beta1 import entity_pb2
    from twinhub.chain.protos.ixo.entity.v1beta1 import query_pb2 as entity_q
    from twinhub.chain.protos.ixo.iid.v1beta1 import iid_pb2, types_pb2

    stamp = Timestamp(seconds=1_700_000_000, nanos=123_000_000)
    entity = entity_pb2.Entity(
        id="did:ixo:entity/a",
        type="Device",
        start_date=stamp,
        status=1,
        credentials=["c1"],
        metadata=entity_pb2.EntityMetadata(version_id="3", created=stamp),
        accounts=[entity_pb2.EntityAccount(name="admin", address="ixo1x")],
    )
    document = iid_pb2.IidDocument(
        id="did:ixo:entity/a",
        context=[types_pb2.Context(key="class", val="did:ixo:protocol/p")],
        verificationMethod=[
            types_pb2.VerificationMethod(id="k", publicKeyMultibase="z6Mk"),
            types_pb2.VerificationMethod(id="empty"),
        ],
        metadata=types_pb2.IidMetadata(versionId="1", deactivated=True),
    )
    collection = claims_pb2.Collection(
        id="7",
        count=2**40,
        state=claims_pb2.PAUSED,
        payments=claims_pb2.Payments(
            submission=claims_pb2.Payment(
                account="a",
                amount=[coin_pb2.Coin(denom="uixo", amount="5")],
                timeout_ns=Duration(seconds=90),
            )
        ),
        min_deposit_period=Duration(seconds=3600, nanos=5),
        adjudicators=[claims_pb2.AdjudicationDid(did="d", reward_percentage="1")],
    )
    return [
        entity_q.QueryEntityResponse(entity=entity, iidDocument=document),
        entity_q.QueryEntityResponse(),
        entity_q.QueryEntityListResponse(
            entities=[entity, entity_pb2.Entity()],
            pagination=pagination_pb2.PageResponse(next_key=b"\x00+/", total=9),
        ),
        entity_q.QueryEntityListResponse(pagination=pagination_pb2.PageResponse()),
        claims_q.QueryCollectionResponse(collection=collection),
        claims_q.QueryParamsResponse(
            params=claims_pb2.Params(network_fee_percentage="25000000000000000")
        ),
        claims_q.QueryClaimResponse(
            claim=claims_pb2.Claim(
                claim_id="c",
                evaluation=claims_pb2.Evaluation(status=claims_pb2.APPROVED, evaluation_date=stamp),
                payments_status=claims_pb2.ClaimPayments(approval=claims_pb2.PAID),
            )
        ),
    ]


@pytest.mark.parametrize("index", range(7))
def test_renderer_agrees_with_json_format(index: int) -> None:
    message = sample_messages()[index]
    assert to_json(message) == reference_json(message)


@pytest.mark.parametrize(
    ("seconds", "nanos"),
    [(0, 0), (1_700_000_000, 5), (1_700_000_000, 120_000), (-1, 999_000_000), (253402300799, 0)],
)
def test_timestamps_as_protobuf_writes_them(seconds: int, nanos: int) -> None:
    from google.protobuf.timestamp_pb2 import Timestamp

    stamp = Timestamp(seconds=seconds, nanos=nanos)
    assert to_json(stamp) == stamp.ToJsonString()
