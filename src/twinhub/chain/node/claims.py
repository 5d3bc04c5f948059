"""`ixo.claims.v1beta1.Query`: claim collections, claims and their evaluations.

twinhub keeps no disputes or intents: their single-item queries answer NOT_FOUND and
their lists are empty. Collection members (its evaluators and the agents that submitted
claims, see services/collection_members.py) and agent deposits come from their tables.
An evaluation's `reason` is a number on ixo; twinhub's reasons are text (in the registry
API), so it is 0 here, and an approval's `verification_proof` is the id of the credential
it issued.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import replace
from typing import Any

import grpc
from google.protobuf.duration_pb2 import Duration

from twinhub.chain.node.common import (
    Servicer,
    encoded_field,
    page_response,
    query,
    timestamp,
    window,
)
from twinhub.chain.protos.cosmos.base.query.v1beta1 import pagination_pb2
from twinhub.chain.protos.cosmos.base.v1beta1 import coin_pb2
from twinhub.chain.protos.ixo.claims.v1beta1 import claims_pb2, query_pb2_grpc
from twinhub.chain.protos.ixo.claims.v1beta1 import query_pb2 as q
from twinhub.kernel.errors import Invalid, NotFound
from twinhub.services.claims import CLAIM_ID
from twinhub.services.collection_members import DepositBalance, Member
from twinhub.services.paging import Window
from twinhub.services.read_model import ClaimRow

# QueryClaimResponse.claim and QueryClaimListResponse.claims: one number, so a claim encoded
# as that field is the first answer whole and an item of the second.
CLAIM_FIELD = q.QueryClaimResponse.CLAIM_FIELD_NUMBER
assert CLAIM_FIELD == q.QueryClaimListResponse.CLAIMS_FIELD_NUMBER
assert CLAIM_FIELD < q.QueryClaimListResponse.PAGINATION_FIELD_NUMBER
STATES = {"open": claims_pb2.OPEN, "paused": claims_pb2.PAUSED, "closed": claims_pb2.CLOSED}
STATUSES = {
    "pending": claims_pb2.PENDING,
    "approved": claims_pb2.APPROVED,
    "rejected": claims_pb2.REJECTED,
    "disputed": claims_pb2.DISPUTED,
    "invalidated": claims_pb2.INVALIDATED,
    "flagged": claims_pb2.FLAGGED,
}


def payments(view: dict[str, Any]) -> claims_pb2.Payments:
    """What a collection pays per stage, as a chain collection always carries. twinhub pays
    nothing for submission, evaluation or rejection, and on approval pays the amount the
    oracle decided: ixo's `is_oracle_payment`. (twinhub mints it when the registry issues
    the project's monitoring period that carries the claim; ixo's messages have no field
    for that, so a claim's evaluation shows the oracle's figure either way.) The paying
    account is the collection's admin; no stage waits (`timeout_ns` 0s, written as a node
    writes it)."""

    def stage(oracle_decides: bool = False) -> claims_pb2.Payment:
        return claims_pb2.Payment(
            account=view["admin"], timeout_ns=Duration(), is_oracle_payment=oracle_decides
        )

    return claims_pb2.Payments(
        submission=stage(), evaluation=stage(), approval=stage(True), rejection=stage()
    )


def collection_message(view: dict[str, Any]) -> claims_pb2.Collection:
    counts = view["counts"]
    return claims_pb2.Collection(
        id=str(view["id"]),
        entity=view["project"],
        admin=view["admin"],
        protocol=view["protocol"],
        start_date=timestamp(view["startDate"]),
        end_date=timestamp(view["endDate"]),
        quota=view["quota"] or 0,  # 0: no quota, as on ixo
        count=counts["submitted"],
        evaluated=counts["evaluated"],
        approved=counts["approved"],
        rejected=counts["rejected"],
        disputed=counts["disputed"],
        state=STATES[view["state"]],
        invalidated=counts["invalidated"],
        flagged=counts["flagged"],
        flagged_active=counts["flagged"],
        payments=payments(view),
        # Non-nullable on ixo (gogoproto): a node always writes it, 0s when no deposit.
        min_deposit_period=Duration(),
    )


def evaluation_message(
    claim: dict[str, Any], entry: dict[str, Any], token: str | None
) -> claims_pb2.Evaluation:
    amount = entry["amount"]
    return claims_pb2.Evaluation(
        claim_id=claim["id"],
        collection_id=str(claim["collection"]),
        oracle=entry["oracle"],
        agent_did=entry["by"],
        status=STATUSES[entry["status"]],
        verification_proof=(claim["credential"] or "") if entry["status"] == "approved" else "",
        evaluation_date=timestamp(entry["at"]),
        amount=[coin_pb2.Coin(denom=token, amount=str(amount))] if amount and token else [],
    )


def claim_message(claim: dict[str, Any], token: str | None) -> claims_pb2.Claim:
    history = [evaluation_message(claim, e, token) for e in claim.get("evaluations", [])]
    return claims_pb2.Claim(
        collection_id=str(claim["collection"]),
        agent_did=claim["agent"],
        submission_date=timestamp(claim["submittedAt"]),
        claim_id=claim["id"],
        evaluation=history[-1] if history else None,
        evaluation_history=history,
    )


def claim_row_message(claim: ClaimRow, token: str | None) -> claims_pb2.Claim:
    """`claim_message` of a read-model row: the same message, without the service's view."""
    collection = str(claim.collection)
    history = [
        claims_pb2.Evaluation(
            claim_id=claim.id,
            collection_id=collection,
            oracle=e.oracle,
            agent_did=e.actor,
            status=STATUSES[e.status],
            verification_proof=(claim.credential or "") if e.status == "approved" else "",
            evaluation_date=timestamp(e.at),
            amount=[coin_pb2.Coin(denom=token, amount=str(e.amount))] if e.amount and token else [],
        )
        for e in claim.evaluations or ()
    ]
    return claims_pb2.Claim(
        collection_id=collection,
        agent_did=claim.agent,
        submission_date=timestamp(claim.submitted_at),
        claim_id=claim.id,
        evaluation=history[-1] if history else None,
        evaluation_history=history,
    )


def member_message(member: Member) -> claims_pb2.MemberBudget:
    """A collection member as ixo's MemberBudget; `period` is written even when 0s, as a
    node writes its non-nullable fields. The limit and spending are in the collection's
    credits; twinhub sets no budgets, so both lists are usually empty."""
    period = Duration()
    period.FromSeconds(member.period_seconds)
    return claims_pb2.MemberBudget(
        collection_id=str(member.collection_id),
        member_address=member.member,
        period=period,
        period_reset_at=timestamp(member.period_reset_at),
    )


def deposit_message(balance: DepositBalance) -> claims_pb2.AgentDepositBalance:
    return claims_pb2.AgentDepositBalance(
        collection_id=str(balance.collection_id),
        agent_address=balance.agent,
        amount=[coin_pb2.Coin(denom=d, amount=str(a)) for d, a in balance.amounts],
        withdrawable_at=timestamp(balance.withdrawable_at),
    )


class ClaimsQuery(Servicer, query_pb2_grpc.QueryServicer):
    """Claim and ClaimList read through the node's read model (inline statements, keyset
    pages) where it has one, as the entity queries do; the services otherwise."""

    async def _token_of(self, collection_id: int) -> str | None:
        if self.reads.fast:
            protocol_did = await self.reads.claims.collection_protocol(collection_id)
            if protocol_did is None:
                raise NotFound(f"No claim collection {collection_id}.")
        else:
            protocol_did = (await self.platform.claims.collections.collection(collection_id))[
                "protocol"
            ]
        protocol = await self.platform.protocols.get(protocol_did)
        return protocol.effective_token_class

    def _built(self, claim_id: str, stamp: Hashable) -> bool:
        return self.cache.get("claim", claim_id, stamp) is not None

    async def _claim(self, row: ClaimRow) -> bytes:
        """A claim's message encoded as field 1 (`CLAIM_FIELD`), built once per stamp: both
        `QueryClaimResponse` and an item of `QueryClaimListResponse.claims`. A row read
        without its evaluations (its message was built) whose message has left the cache
        since is read again."""
        cached = self.cache.get("claim", row.id, row.stamp)
        if cached is not None:
            return cached
        if row.evaluations is None:
            row = await self.reads.claims.claim(row.id) or row
            if row.evaluations is None:  # gone meanwhile (claims are never deleted)
                raise NotFound(f"No claim {row.id!r}.")
        message = claim_row_message(row, await self._token_of(row.collection))
        encoded = encoded_field(CLAIM_FIELD, message.SerializeToString())
        return self.cache.put("claim", row.id, row.stamp, encoded)

    async def _claim_items(self, shown: Window) -> tuple[bytes, int | None]:
        """A page's encoded claims (see `_claim`) joined and its next key; whole rows and
        evaluations are read only for the claims not built at their stamps."""
        page = await self.reads.claims.claim_keys(replace(shown, count_total=False))
        items = self.cache.items
        # A key is (id, seq, *stamp): read_model.claim_stamp, inline for fifty of them.
        parts = [items.get(("claim", key[0], key[2:])) for key in page.items]
        if None in parts:
            wanted = [key[0] for key, part in zip(page.items, parts, strict=True) if part is None]
            rows = await self.reads.claims.claim_rows(wanted)
            for index, key in enumerate(page.items):
                if parts[index] is None:
                    row = rows.get(key[0]) or await self.reads.claims.claim(key[0])
                    if row is None:  # claims are never deleted
                        raise NotFound(f"No claim {key[0]!r}.")
                    parts[index] = await self._claim(row)
        return b"".join(parts), page.next_key

    @staticmethod
    def _collection_id(text: str) -> int:
        if not (text.isascii() and text.isdigit()) or not 1 <= int(text) < 2**31:
            raise Invalid("id must be a collection number such as 1")
        return int(text)

    @query
    async def Params(
        self, request: q.QueryParamsRequest, context: grpc.aio.ServicerContext
    ) -> q.QueryParamsResponse:
        return q.QueryParamsResponse(
            params=claims_pb2.Params(
                collection_sequence=await self.platform.claims.collections.collection_sequence()
                + 1,
                network_fee_percentage="0",
                node_fee_percentage="0",
            )
        )

    @query
    async def Collection(
        self, request: q.QueryCollectionRequest, context: grpc.aio.ServicerContext
    ) -> q.QueryCollectionResponse:
        view = await self.platform.claims.collections.collection(self._collection_id(request.id))
        return q.QueryCollectionResponse(collection=collection_message(view))

    @query
    async def CollectionList(
        self, request: q.QueryCollectionListRequest, context: grpc.aio.ServicerContext
    ) -> q.QueryCollectionListResponse:
        page = await self.platform.claims.collections.collections_window(window(request))
        return q.QueryCollectionListResponse(
            collections=[collection_message(v) for v in page.items],
            pagination=page_response(page),
        )

    @query
    async def Claim(
        self, request: q.QueryClaimRequest, context: grpc.aio.ServicerContext
    ) -> q.QueryClaimResponse | bytes:
        if not request.id:
            raise Invalid("id is required")
        if self.reads.fast:
            found = None
            if CLAIM_ID.match(request.id):
                found = await self.reads.claims.claim(request.id, self._built)
            if found is None:
                raise NotFound(f"No claim {request.id!r}.")
            return await self._claim(found)  # the answer's one field, serialised
        claim = await self.platform.claims.views.claim(request.id)
        token = await self._token_of(claim["collection"])
        return q.QueryClaimResponse(claim=claim_message(claim, token))

    @query
    async def ClaimList(
        self, request: q.QueryClaimListRequest, context: grpc.aio.ServicerContext
    ) -> q.QueryClaimListResponse | bytes:
        tokens: dict[int, str | None] = {}
        if self.reads.fast:
            return await self.page_answer(
                "claims", request, self._claim_items, q.QueryClaimListResponse
            )
        page = await self.platform.claims.views.claims_window(window(request))
        claims = []
        for claim in page.items:
            if claim["collection"] not in tokens:
                tokens[claim["collection"]] = await self._token_of(claim["collection"])
            claims.append(claim_message(claim, tokens[claim["collection"]]))
        return q.QueryClaimListResponse(claims=claims, pagination=page_response(page))

    @query
    async def Dispute(
        self, request: q.QueryDisputeRequest, context: grpc.aio.ServicerContext
    ) -> q.QueryDisputeResponse:
        raise NotFound(f"No dispute {request.proof!r}.")

    @query
    async def DisputeList(
        self, request: q.QueryDisputeListRequest, context: grpc.aio.ServicerContext
    ) -> q.QueryDisputeListResponse:
        window(request)  # a malformed page request is still refused
        return q.QueryDisputeListResponse(pagination=pagination_pb2.PageResponse())

    @query
    async def Intent(
        self, request: q.QueryIntentRequest, context: grpc.aio.ServicerContext
    ) -> q.QueryIntentResponse:
        raise NotFound(f"No intent {request.id!r}.")

    @query
    async def IntentList(
        self, request: q.QueryIntentListRequest, context: grpc.aio.ServicerContext
    ) -> q.QueryIntentListResponse:
        window(request)
        return q.QueryIntentListResponse(pagination=pagination_pb2.PageResponse())

    @query
    async def DisputeBySubject(
        self, request: q.QueryDisputeBySubjectRequest, context: grpc.aio.ServicerContext
    ) -> q.QueryDisputeBySubjectResponse:
        raise NotFound(f"No dispute about {request.subjectId!r}.")

    @query
    async def DisputeListForSubject(
        self, request: q.QueryDisputeListForSubjectRequest, context: grpc.aio.ServicerContext
    ) -> q.QueryDisputeListForSubjectResponse:
        return q.QueryDisputeListForSubjectResponse()

    @query
    async def CollectionMember(
        self, request: q.QueryCollectionMemberRequest, context: grpc.aio.ServicerContext
    ) -> q.QueryCollectionMemberResponse:
        collection_id = self._collection_id(request.collectionId)
        if not request.memberAddress:
            raise Invalid("memberAddress is required")
        member = await self.platform.collection_members.member(collection_id, request.memberAddress)
        return q.QueryCollectionMemberResponse(member_budget=member_message(member))

    @query
    async def CollectionMemberList(
        self, request: q.QueryCollectionMemberListRequest, context: grpc.aio.ServicerContext
    ) -> q.QueryCollectionMemberListResponse:
        collection_id = self._collection_id(request.collectionId)
        page = await self.platform.collection_members.members_window(collection_id, window(request))
        return q.QueryCollectionMemberListResponse(
            member_budgets=[member_message(m) for m in page.items],
            pagination=page_response(page),
        )

    @query
    async def AgentDepositBalance(
        self, request: q.QueryAgentDepositBalanceRequest, context: grpc.aio.ServicerContext
    ) -> q.QueryAgentDepositBalanceResponse:
        collection_id = self._collection_id(request.collectionId)
        if not request.agentAddress:
            raise Invalid("agentAddress is required")
        balance = await self.platform.collection_members.deposit(
            collection_id, request.agentAddress
        )
        return q.QueryAgentDepositBalanceResponse(balance=deposit_message(balance))

    @query
    async def AgentDepositBalanceList(
        self, request: q.QueryAgentDepositBalanceListRequest, context: grpc.aio.ServicerContext
    ) -> q.QueryAgentDepositBalanceListResponse:
        collection_id = self._collection_id(request.collectionId)
        page = await self.platform.collection_members.deposits_window(
            collection_id, window(request)
        )
        return q.QueryAgentDepositBalanceListResponse(
            balances=[deposit_message(b) for b in page.items], pagination=page_response(page)
        )
