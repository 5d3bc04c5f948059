"""The node's claims and token queries on its read model (services/read_model.py) answer
byte for byte what the services' path answered (the path the node took before, and still
takes where the read model has no database of its own), pages included; a write is seen by
the next query; a keyed claims page is an index range whatever its number. On both
backends."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta, timezone

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from sqlalchemy.engine import make_url

from tests.conftest import BACKENDS, Registry, unique
from tests.support.chain_gateway import running_node
from tests.support.claims_world import METERED_AMOUNT, World, metered_claim
from tests.support.workflow_world import issue_claims
from twinhub.chain.node.answers import Dispatcher, QueryFailed
from twinhub.chain.node.claims import ClaimsQuery
from twinhub.chain.node.common import VersionCache, timestamp
from twinhub.chain.node.token import TokenQuery
from twinhub.chain.protos.cosmos.base.query.v1beta1.pagination_pb2 import PageRequest
from twinhub.chain.protos.ixo.claims.v1beta1 import claims_pb2
from twinhub.chain.protos.ixo.claims.v1beta1 import query_pb2 as claims_q
from twinhub.chain.protos.ixo.claims.v1beta1 import query_pb2_grpc as claims_grpc
from twinhub.chain.protos.ixo.token.v1beta1 import query_pb2 as token_q
from twinhub.chain.protos.ixo.token.v1beta1 import query_pb2_grpc as token_grpc
from twinhub.platform import Platform
from twinhub.services.paging import Window
from twinhub.services.read_model import CLAIM_PAGES, MOVEMENTS_OF, ReadModel, claim_stamp

CLAIMS = "/ixo.claims.v1beta1.Query/"
TOKENS = "/ixo.token.v1beta1.Query/"


class ServiceReads(ReadModel):
    """The read model with its own reads switched off: the node's queries then go through
    the services, as they all did before."""

    @property
    def fast(self) -> bool:
        return False


def dispatcher(platform: Platform, reads: ReadModel, messages: int = 20_000) -> Dispatcher:
    """A node's dispatcher for the claims and token services, keeping no answers and at
    most `messages` built messages."""
    found = Dispatcher(reads, 0)
    shared = (platform, reads, VersionCache(messages))
    found.add(ClaimsQuery(*shared), claims_q.DESCRIPTOR.services_by_name["Query"])
    found.add(TokenQuery(*shared), token_q.DESCRIPTOR.services_by_name["Query"])
    return found


async def reply(node: Dispatcher, path: str, request: bytes) -> tuple[str, bytes]:
    """A query's answer bytes, or its failure's status and message."""
    try:
        return "OK", (await node.answer(path, request)).body
    except QueryFailed as failure:
        return failure.code.name, failure.message.encode()


async def programme(world: World) -> str:
    """Claims in two collections, with one, two and no evaluations (approved, rejected,
    flagged then approved, pending), and CARBON transferred and retired; the id of the
    pending claim."""
    owner = f"did:ixo:customer/{unique('c')}"
    await world.approved_claim(owner)
    await issue_claims(world)  # its credits: minted by the registry's issuance
    collection = (await world.collection())["id"]
    rejected = await world.approvable(collection)
    flagged = await world.approvable(collection)
    pending = await world.approvable(collection)
    for claim, body in (
        (rejected, {"status": "rejected", "reason": "wrong fuel"}),
        (flagged, {"status": "flagged", "reason": "odd readings"}),
        (flagged, {"status": "approved", "reason": "checked on site"}),
    ):
        done = await world.oracle_client.post(f"/v1/claims/{claim['id']}/evaluations", json=body)
        assert done.status_code == 200, done.text
    await world.transfer_and_retire(owner, 3, 2)
    return str(pending["id"])


async def test_claims_and_tokens_replies_equal_the_services(
    registry: Registry, world: World
) -> None:
    pending = await programme(world)
    platform = registry.platform
    fast_reads, service_reads = ReadModel(platform), ServiceReads(platform)
    assert fast_reads.fast  # a file SQLite database and PostgreSQL both have it
    fast, old = dispatcher(platform, fast_reads), dispatcher(platform, service_reads)
    # Keeping two messages, a page often meets a claim read without its evaluations (its
    # message was built) whose message the page's other claims then pushed out.
    tiny = dispatcher(platform, fast_reads, messages=2)
    minter = platform.credentials.issuer.did
    try:
        # Pages by key, forwards and backwards, walked to the end by the keys given out.
        compared = 0
        for reverse in (False, True):
            page = PageRequest(limit=3, reverse=reverse)
            for _ in range(400):
                asked = claims_q.QueryClaimListRequest(pagination=page).SerializeToString()
                status, body = await reply(fast, CLAIMS + "ClaimList", asked)
                assert (status, body) == await reply(old, CLAIMS + "ClaimList", asked)
                assert (status, body) == await reply(tiny, CLAIMS + "ClaimList", asked)
                listed = claims_q.QueryClaimListResponse.FromString(body)
                compared += len(listed.claims)
                if not listed.pagination.next_key:
                    break
                page = PageRequest(limit=3, reverse=reverse, key=listed.pagination.next_key)
        assert compared >= 8
        # A page's keys carry each claim's stamp as its row does, so a page finds the
        # claims built at that stamp (else every page would build its claims again).
        keys = (await fast_reads.claims.claim_keys(Window(limit=50, reverse=True))).items
        rows = await fast_reads.claims.claim_rows([key[0] for key in keys])
        assert len(rows) == len(keys) >= 4
        assert all(claim_stamp(key) == rows[key[0]].stamp for key in keys)
        assert {rows[key[0]].status for key in keys} >= {"pending", "approved", "rejected"}
        singles: list[tuple[str, bytes]] = []
        for options in (
            {},
            {"limit": 2, "offset": 1},
            {"limit": 2, "count_total": True},
            {"limit": 1000, "reverse": True},
            {"key": b"1", "offset": 1},  # refused alike
            {"key": b"x"},
        ):
            request = claims_q.QueryClaimListRequest(pagination=PageRequest(**options))
            singles.append((CLAIMS + "ClaimList", request.SerializeToString()))
        newest = claims_q.QueryClaimListRequest(pagination=PageRequest(reverse=True, limit=4))
        listed = claims_q.QueryClaimListResponse.FromString(
            (await fast.answer(CLAIMS + "ClaimList", newest.SerializeToString())).body
        )
        histories = {len(c.evaluation_history) for c in listed.claims}
        assert histories == {0, 1, 2}  # pending, rejected, flagged then approved
        assert pending in {c.claim_id for c in listed.claims}
        for claim_id in [c.claim_id for c in listed.claims] + ["no-such-claim", "!bad", ""]:
            request = claims_q.QueryClaimRequest(id=claim_id)
            singles.append((CLAIMS + "Claim", request.SerializeToString()))
        for name in ("CARBON", "NOPE", "carbon", ""):
            metadata = token_q.QueryTokenMetadataRequest(id=name)
            singles.append((TOKENS + "TokenMetadata", metadata.SerializeToString()))
            doc = token_q.QueryTokenDocRequest(minter=minter, contract_address=name)
            singles.append((TOKENS + "TokenDoc", doc.SerializeToString()))
        for who, options in (
            (minter, {}),
            (minter, {"limit": 1, "count_total": True}),
            (minter, {"limit": 1, "key": b"1"}),
            (minter, {"limit": 1, "offset": 1, "reverse": True}),
            ("did:ixo:org/nobody", {}),
            ("", {}),
        ):
            request = token_q.QueryTokenListRequest(minter=who, pagination=PageRequest(**options))
            singles.append((TOKENS + "TokenList", request.SerializeToString()))
        for path, asked in singles * 2:  # the second time from the built messages
            expected = await reply(old, path, asked)
            assert await reply(fast, path, asked) == expected, (path, asked)
            assert await reply(tiny, path, asked) == expected, (path, asked)
        # The token list carries the retirement and the transfer, read by the read model.
        tokens = token_q.QueryTokenListResponse.FromString(
            (await fast.answer(TOKENS + "TokenList", singles[-6][1])).body
        )
        carbon = next(t for t in tokens.tokenDocs if t.name == "CARBON")
        assert [r.reason for r in carbon.retired][-1] == "2026 offset"
        assert [t.amount for t in carbon.transferred][-1] == "3"
    finally:
        await fast_reads.aclose()
        await service_reads.aclose()


async def test_a_write_is_seen_by_the_next_claims_and_token_query(
    registry: Registry, world: World
) -> None:
    """Through the node's gRPC server, which keeps answers per database version."""
    await world.approved_claim()
    await issue_claims(world)  # CARBON exists from here on
    collection = (await world.collection())["id"]
    minter = registry.platform.credentials.issuer.did
    async with (
        running_node(registry.platform) as address,
        grpc.aio.insecure_channel(address) as channel,
    ):
        claims = claims_grpc.QueryStub(channel)
        tokens = token_grpc.QueryStub(channel)
        newest = claims_q.QueryClaimListRequest(pagination=PageRequest(reverse=True, limit=1))
        first = await claims.ClaimList(newest)
        assert await claims.ClaimList(newest) == first  # kept
        listed = token_q.QueryTokenListRequest(minter=minter)
        supply = {t.name: int(t.supply) for t in (await tokens.TokenList(listed)).tokenDocs}
        claim = await world.approvable(collection)
        after = await claims.ClaimList(newest)
        assert after.claims[0].claim_id == claim["id"] != first.claims[0].claim_id
        found = (await claims.Claim(claims_q.QueryClaimRequest(id=claim["id"]))).claim
        assert not found.HasField("evaluation")
        evaluated = await world.oracle_client.post(
            f"/v1/claims/{claim['id']}/evaluations", json={"status": "approved"}
        )
        assert evaluated.status_code == 200, evaluated.text
        found = (await claims.Claim(claims_q.QueryClaimRequest(id=claim["id"]))).claim
        assert found.evaluation.status == claims_pb2.APPROVED
        assert [(c.denom, c.amount) for c in found.evaluation.amount] == [
            ("CARBON", str(METERED_AMOUNT))
        ]
        now = {t.name: int(t.supply) for t in (await tokens.TokenList(listed)).tokenDocs}
        assert now == supply  # an approval mints nothing
        await issue_claims(world)
        now = {t.name: int(t.supply) for t in (await tokens.TokenList(listed)).tokenDocs}
        assert now["CARBON"] == supply["CARBON"] + METERED_AMOUNT
        missing = claims_q.QueryClaimRequest(id=f"claim-{unique('x')}")
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await claims.Claim(missing)
        assert unknown.value.code() is grpc.StatusCode.NOT_FOUND
        submitted = await world.operator_client.post(
            f"/v1/claim-collections/{collection}/claims",
            json={"asset": await world.metered_asset(), "data": metered_claim()},
        )
        assert submitted.status_code == 201, submitted.text
        assert (await claims.ClaimList(newest)).claims[0].claim_id == submitted.json()["id"]


@pytest.mark.parametrize("backend", [BACKENDS[0]], indirect=True, ids=str)  # SQLite's plan
def test_a_keyed_claims_page_and_a_tokens_movements_are_index_ranges(
    registry: Registry,
) -> None:
    """Page 1,000 by key costs what page 1 does: SQLite's plan walks the seq index from
    the key (a SEARCH), with no OFFSET to skip; only an offset a client asks for scans. A
    token's retirements are read on their index, not found among every mint."""
    url = make_url(registry.platform.settings.storage.resolved_database_url)
    assert url.get_backend_name() == "sqlite"  # PostgreSQL runs the same statements
    connection = sqlite3.connect(f"file:{url.database}?mode=ro", uri=True)
    try:
        for reverse in (False, True):
            statement = CLAIM_PAGES[(True, reverse)]
            plan = connection.execute(f"EXPLAIN QUERY PLAN {statement}", (49950, 51, 0))
            details = " ".join(row[-1] for row in plan)
            assert "SEARCH claims USING INDEX" in details and "seq" in details, details
            assert "TEMP B-TREE" not in details, details
        plan = connection.execute(f"EXPLAIN QUERY PLAN {MOVEMENTS_OF}", ("CARBON", "retire"))
        details = " ".join(row[-1] for row in plan)
        assert "USING INDEX ix_credit_movements_token_kind" in details, details
        assert "TEMP B-TREE" not in details, details
    finally:
        connection.close()


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 11, 26, 18, 6, 57, 123456, tzinfo=UTC),
        datetime(2026, 11, 26, 18, 6, 57, 123456, tzinfo=timezone(timedelta(hours=3))),
        datetime(2026, 11, 26, 18, 6, 57),  # naive: UTC, as stored on SQLite
        datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC),
        "2026-11-26 18:06:57.000001",
        "2026-11-26T18:06:57+00:00",
    ],
)
def test_timestamps_are_what_from_datetime_makes(value: datetime | str) -> None:
    expected = Timestamp()
    expected.FromDatetime(datetime.fromisoformat(value) if isinstance(value, str) else value)
    assert timestamp(value) == expected


async def test_a_claims_page_is_kept_until_a_claim_of_it_is_evaluated(
    registry: Registry, world: World
) -> None:
    """`ClaimList` keeps a page's joined items under its print (`Servicer.page`); an
    evaluation changes the claim's stamp, so the page is built again, equal to the
    services' answer."""
    platform = registry.platform
    pending = await programme(world)  # the newest claim: on the newest page
    fast_reads, service_reads = ReadModel(platform), ServiceReads(platform)
    claims = ClaimsQuery(platform, fast_reads, VersionCache())
    fast = Dispatcher(fast_reads, 0)
    fast.add(claims, claims_q.DESCRIPTOR.services_by_name["Query"])
    old = dispatcher(platform, service_reads)
    path = "/ixo.claims.v1beta1.Query/ClaimList"
    asked = claims_q.QueryClaimListRequest(
        pagination=PageRequest(limit=4, reverse=True)
    ).SerializeToString()
    try:
        first = await reply(fast, path, asked)
        assert first[0] == "OK" and first == await reply(old, path, asked)
        listed = claims_q.QueryClaimListResponse.FromString(first[1])
        assert pending in {c.claim_id for c in listed.claims}
        kept = dict(claims.pages.items)
        assert len(kept) == 1
        assert await reply(fast, path, asked) == first
        assert dict(claims.pages.items) == kept  # the same page, kept under the same print
        done = await world.oracle_client.post(
            f"/v1/claims/{pending}/evaluations", json={"status": "approved"}
        )
        assert done.status_code == 200, done.text
        after = await reply(fast, path, asked)
        assert after != first and after == await reply(old, path, asked)
        assert len(claims.pages.items) == 2  # built again under the new print
    finally:
        await fast_reads.aclose()
        await service_reads.aclose()
