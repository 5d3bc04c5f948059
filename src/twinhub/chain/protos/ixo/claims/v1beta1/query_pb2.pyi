from twinhub.chain.protos.cosmos.base.query.v1beta1 import pagination_pb2 as _pagination_pb2
from google.api import annotations_pb2 as _annotations_pb2
from twinhub.chain.protos.ixo.claims.v1beta1 import claims_pb2 as _claims_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class QueryParamsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QueryParamsResponse(_message.Message):
    __slots__ = ("params",)
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    params: _claims_pb2.Params
    def __init__(self, params: _Optional[_Union[_claims_pb2.Params, _Mapping]] = ...) -> None: ...

class QueryCollectionRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class QueryCollectionResponse(_message.Message):
    __slots__ = ("collection",)
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    collection: _claims_pb2.Collection
    def __init__(self, collection: _Optional[_Union[_claims_pb2.Collection, _Mapping]] = ...) -> None: ...

class QueryCollectionListRequest(_message.Message):
    __slots__ = ("pagination",)
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    pagination: _pagination_pb2.PageRequest
    def __init__(self, pagination: _Optional[_Union[_pagination_pb2.PageRequest, _Mapping]] = ...) -> None: ...

class QueryCollectionListResponse(_message.Message):
    __slots__ = ("collections", "pagination")
    COLLECTIONS_FIELD_NUMBER: _ClassVar[int]
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    collections: _containers.RepeatedCompositeFieldContainer[_claims_pb2.Collection]
    pagination: _pagination_pb2.PageResponse
    def __init__(self, collections: _Optional[_Iterable[_Union[_claims_pb2.Collection, _Mapping]]] = ..., pagination: _Optional[_Union[_pagination_pb2.PageResponse, _Mapping]] = ...) -> None: ...

class QueryClaimRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class QueryClaimResponse(_message.Message):
    __slots__ = ("claim",)
    CLAIM_FIELD_NUMBER: _ClassVar[int]
    claim: _claims_pb2.Claim
    def __init__(self, claim: _Optional[_Union[_claims_pb2.Claim, _Mapping]] = ...) -> None: ...

class QueryClaimListRequest(_message.Message):
    __slots__ = ("pagination",)
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    pagination: _pagination_pb2.PageRequest
    def __init__(self, pagination: _Optional[_Union[_pagination_pb2.PageRequest, _Mapping]] = ...) -> None: ...

class QueryClaimListResponse(_message.Message):
    __slots__ = ("claims", "pagination")
    CLAIMS_FIELD_NUMBER: _ClassVar[int]
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    claims: _containers.RepeatedCompositeFieldContainer[_claims_pb2.Claim]
    pagination: _pagination_pb2.PageResponse
    def __init__(self, claims: _Optional[_Iterable[_Union[_claims_pb2.Claim, _Mapping]]] = ..., pagination: _Optional[_Union[_pagination_pb2.PageResponse, _Mapping]] = ...) -> None: ...

class QueryDisputeRequest(_message.Message):
    __slots__ = ("proof",)
    PROOF_FIELD_NUMBER: _ClassVar[int]
    proof: str
    def __init__(self, proof: _Optional[str] = ...) -> None: ...

class QueryDisputeResponse(_message.Message):
    __slots__ = ("dispute",)
    DISPUTE_FIELD_NUMBER: _ClassVar[int]
    dispute: _claims_pb2.Dispute
    def __init__(self, dispute: _Optional[_Union[_claims_pb2.Dispute, _Mapping]] = ...) -> None: ...

class QueryDisputeListRequest(_message.Message):
    __slots__ = ("pagination",)
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    pagination: _pagination_pb2.PageRequest
    def __init__(self, pagination: _Optional[_Union[_pagination_pb2.PageRequest, _Mapping]] = ...) -> None: ...

class QueryDisputeListResponse(_message.Message):
    __slots__ = ("disputes", "pagination")
    DISPUTES_FIELD_NUMBER: _ClassVar[int]
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    disputes: _containers.RepeatedCompositeFieldContainer[_claims_pb2.Dispute]
    pagination: _pagination_pb2.PageResponse
    def __init__(self, disputes: _Optional[_Iterable[_Union[_claims_pb2.Dispute, _Mapping]]] = ..., pagination: _Optional[_Union[_pagination_pb2.PageResponse, _Mapping]] = ...) -> None: ...

class QueryIntentRequest(_message.Message):
    __slots__ = ("id", "agentAddress", "collectionId")
    ID_FIELD_NUMBER: _ClassVar[int]
    AGENTADDRESS_FIELD_NUMBER: _ClassVar[int]
    COLLECTIONID_FIELD_NUMBER: _ClassVar[int]
    id: str
    agentAddress: str
    collectionId: str
    def __init__(self, id: _Optional[str] = ..., agentAddress: _Optional[str] = ..., collectionId: _Optional[str] = ...) -> None: ...

class QueryIntentResponse(_message.Message):
    __slots__ = ("intent",)
    INTENT_FIELD_NUMBER: _ClassVar[int]
    intent: _claims_pb2.Intent
    def __init__(self, intent: _Optional[_Union[_claims_pb2.Intent, _Mapping]] = ...) -> None: ...

class QueryIntentListRequest(_message.Message):
    __slots__ = ("pagination",)
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    pagination: _pagination_pb2.PageRequest
    def __init__(self, pagination: _Optional[_Union[_pagination_pb2.PageRequest, _Mapping]] = ...) -> None: ...

class QueryIntentListResponse(_message.Message):
    __slots__ = ("intents", "pagination")
    INTENTS_FIELD_NUMBER: _ClassVar[int]
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    intents: _containers.RepeatedCompositeFieldContainer[_claims_pb2.Intent]
    pagination: _pagination_pb2.PageResponse
    def __init__(self, intents: _Optional[_Iterable[_Union[_claims_pb2.Intent, _Mapping]]] = ..., pagination: _Optional[_Union[_pagination_pb2.PageResponse, _Mapping]] = ...) -> None: ...

class QueryCollectionMemberRequest(_message.Message):
    __slots__ = ("collectionId", "memberAddress")
    COLLECTIONID_FIELD_NUMBER: _ClassVar[int]
    MEMBERADDRESS_FIELD_NUMBER: _ClassVar[int]
    collectionId: str
    memberAddress: str
    def __init__(self, collectionId: _Optional[str] = ..., memberAddress: _Optional[str] = ...) -> None: ...

class QueryCollectionMemberResponse(_message.Message):
    __slots__ = ("member_budget",)
    MEMBER_BUDGET_FIELD_NUMBER: _ClassVar[int]
    member_budget: _claims_pb2.MemberBudget
    def __init__(self, member_budget: _Optional[_Union[_claims_pb2.MemberBudget, _Mapping]] = ...) -> None: ...

class QueryCollectionMemberListRequest(_message.Message):
    __slots__ = ("collectionId", "pagination")
    COLLECTIONID_FIELD_NUMBER: _ClassVar[int]
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    collectionId: str
    pagination: _pagination_pb2.PageRequest
    def __init__(self, collectionId: _Optional[str] = ..., pagination: _Optional[_Union[_pagination_pb2.PageRequest, _Mapping]] = ...) -> None: ...

class QueryCollectionMemberListResponse(_message.Message):
    __slots__ = ("member_budgets", "pagination")
    MEMBER_BUDGETS_FIELD_NUMBER: _ClassVar[int]
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    member_budgets: _containers.RepeatedCompositeFieldContainer[_claims_pb2.MemberBudget]
    pagination: _pagination_pb2.PageResponse
    def __init__(self, member_budgets: _Optional[_Iterable[_Union[_claims_pb2.MemberBudget, _Mapping]]] = ..., pagination: _Optional[_Union[_pagination_pb2.PageResponse, _Mapping]] = ...) -> None: ...

class QueryDisputeBySubjectRequest(_message.Message):
    __slots__ = ("subjectId", "targetRole")
    SUBJECTID_FIELD_NUMBER: _ClassVar[int]
    TARGETROLE_FIELD_NUMBER: _ClassVar[int]
    subjectId: str
    targetRole: _claims_pb2.DisputeTargetRole
    def __init__(self, subjectId: _Optional[str] = ..., targetRole: _Optional[_Union[_claims_pb2.DisputeTargetRole, str]] = ...) -> None: ...

class QueryDisputeBySubjectResponse(_message.Message):
    __slots__ = ("dispute",)
    DISPUTE_FIELD_NUMBER: _ClassVar[int]
    dispute: _claims_pb2.Dispute
    def __init__(self, dispute: _Optional[_Union[_claims_pb2.Dispute, _Mapping]] = ...) -> None: ...

class QueryDisputeListForSubjectRequest(_message.Message):
    __slots__ = ("subjectId",)
    SUBJECTID_FIELD_NUMBER: _ClassVar[int]
    subjectId: str
    def __init__(self, subjectId: _Optional[str] = ...) -> None: ...

class QueryDisputeListForSubjectResponse(_message.Message):
    __slots__ = ("disputes",)
    DISPUTES_FIELD_NUMBER: _ClassVar[int]
    disputes: _containers.RepeatedCompositeFieldContainer[_claims_pb2.Dispute]
    def __init__(self, disputes: _Optional[_Iterable[_Union[_claims_pb2.Dispute, _Mapping]]] = ...) -> None: ...

class QueryAgentDepositBalanceRequest(_message.Message):
    __slots__ = ("collectionId", "agentAddress")
    COLLECTIONID_FIELD_NUMBER: _ClassVar[int]
    AGENTADDRESS_FIELD_NUMBER: _ClassVar[int]
    collectionId: str
    agentAddress: str
    def __init__(self, collectionId: _Optional[str] = ..., agentAddress: _Optional[str] = ...) -> None: ...

class QueryAgentDepositBalanceResponse(_message.Message):
    __slots__ = ("balance",)
    BALANCE_FIELD_NUMBER: _ClassVar[int]
    balance: _claims_pb2.AgentDepositBalance
    def __init__(self, balance: _Optional[_Union[_claims_pb2.AgentDepositBalance, _Mapping]] = ...) -> None: ...

class QueryAgentDepositBalanceListRequest(_message.Message):
    __slots__ = ("collectionId", "pagination")
    COLLECTIONID_FIELD_NUMBER: _ClassVar[int]
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    collectionId: str
    pagination: _pagination_pb2.PageRequest
    def __init__(self, collectionId: _Optional[str] = ..., pagination: _Optional[_Union[_pagination_pb2.PageRequest, _Mapping]] = ...) -> None: ...

class QueryAgentDepositBalanceListResponse(_message.Message):
    __slots__ = ("balances", "pagination")
    BALANCES_FIELD_NUMBER: _ClassVar[int]
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    balances: _containers.RepeatedCompositeFieldContainer[_claims_pb2.AgentDepositBalance]
    pagination: _pagination_pb2.PageResponse
    def __init__(self, balances: _Optional[_Iterable[_Union[_claims_pb2.AgentDepositBalance, _Mapping]]] = ..., pagination: _Optional[_Union[_pagination_pb2.PageResponse, _Mapping]] = ...) -> None: ...
