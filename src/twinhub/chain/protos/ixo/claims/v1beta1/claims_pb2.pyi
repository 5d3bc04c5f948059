import datetime

from twinhub.chain.protos.cosmos.base.v1beta1 import coin_pb2 as _coin_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CollectionState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OPEN: _ClassVar[CollectionState]
    PAUSED: _ClassVar[CollectionState]
    CLOSED: _ClassVar[CollectionState]

class CollectionIntentOptions(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ALLOW: _ClassVar[CollectionIntentOptions]
    DENY: _ClassVar[CollectionIntentOptions]
    REQUIRED: _ClassVar[CollectionIntentOptions]

class EvaluationStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PENDING: _ClassVar[EvaluationStatus]
    APPROVED: _ClassVar[EvaluationStatus]
    REJECTED: _ClassVar[EvaluationStatus]
    DISPUTED: _ClassVar[EvaluationStatus]
    INVALIDATED: _ClassVar[EvaluationStatus]
    FLAGGED: _ClassVar[EvaluationStatus]

class IntentStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACTIVE: _ClassVar[IntentStatus]
    FULFILLED: _ClassVar[IntentStatus]
    EXPIRED: _ClassVar[IntentStatus]

class PaymentType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SUBMISSION: _ClassVar[PaymentType]
    APPROVAL: _ClassVar[PaymentType]
    EVALUATION: _ClassVar[PaymentType]
    REJECTION: _ClassVar[PaymentType]

class PaymentStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NO_PAYMENT: _ClassVar[PaymentStatus]
    PROMISED: _ClassVar[PaymentStatus]
    AUTHORIZED: _ClassVar[PaymentStatus]
    GUARANTEED: _ClassVar[PaymentStatus]
    PAID: _ClassVar[PaymentStatus]
    FAILED: _ClassVar[PaymentStatus]
    DISPUTED_PAYMENT: _ClassVar[PaymentStatus]

class DisputeTargetRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DISPUTE_TARGET_ROLE_UNSPECIFIED: _ClassVar[DisputeTargetRole]
    DISPUTE_TARGET_ROLE_SUBMITTER: _ClassVar[DisputeTargetRole]
    DISPUTE_TARGET_ROLE_EVALUATOR: _ClassVar[DisputeTargetRole]

class DisputeStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DISPUTE_STATUS_OPEN: _ClassVar[DisputeStatus]
    DISPUTE_STATUS_AWARDED: _ClassVar[DisputeStatus]
    DISPUTE_STATUS_DISMISSED: _ClassVar[DisputeStatus]
OPEN: CollectionState
PAUSED: CollectionState
CLOSED: CollectionState
ALLOW: CollectionIntentOptions
DENY: CollectionIntentOptions
REQUIRED: CollectionIntentOptions
PENDING: EvaluationStatus
APPROVED: EvaluationStatus
REJECTED: EvaluationStatus
DISPUTED: EvaluationStatus
INVALIDATED: EvaluationStatus
FLAGGED: EvaluationStatus
ACTIVE: IntentStatus
FULFILLED: IntentStatus
EXPIRED: IntentStatus
SUBMISSION: PaymentType
APPROVAL: PaymentType
EVALUATION: PaymentType
REJECTION: PaymentType
NO_PAYMENT: PaymentStatus
PROMISED: PaymentStatus
AUTHORIZED: PaymentStatus
GUARANTEED: PaymentStatus
PAID: PaymentStatus
FAILED: PaymentStatus
DISPUTED_PAYMENT: PaymentStatus
DISPUTE_TARGET_ROLE_UNSPECIFIED: DisputeTargetRole
DISPUTE_TARGET_ROLE_SUBMITTER: DisputeTargetRole
DISPUTE_TARGET_ROLE_EVALUATOR: DisputeTargetRole
DISPUTE_STATUS_OPEN: DisputeStatus
DISPUTE_STATUS_AWARDED: DisputeStatus
DISPUTE_STATUS_DISMISSED: DisputeStatus

class Params(_message.Message):
    __slots__ = ("collection_sequence", "ixo_account", "network_fee_percentage", "node_fee_percentage", "intent_sequence")
    COLLECTION_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    IXO_ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FEE_PERCENTAGE_FIELD_NUMBER: _ClassVar[int]
    NODE_FEE_PERCENTAGE_FIELD_NUMBER: _ClassVar[int]
    INTENT_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    collection_sequence: int
    ixo_account: str
    network_fee_percentage: str
    node_fee_percentage: str
    intent_sequence: int
    def __init__(self, collection_sequence: _Optional[int] = ..., ixo_account: _Optional[str] = ..., network_fee_percentage: _Optional[str] = ..., node_fee_percentage: _Optional[str] = ..., intent_sequence: _Optional[int] = ...) -> None: ...

class AdjudicationDid(_message.Message):
    __slots__ = ("did", "reward_percentage")
    DID_FIELD_NUMBER: _ClassVar[int]
    REWARD_PERCENTAGE_FIELD_NUMBER: _ClassVar[int]
    did: str
    reward_percentage: str
    def __init__(self, did: _Optional[str] = ..., reward_percentage: _Optional[str] = ...) -> None: ...

class Collection(_message.Message):
    __slots__ = ("id", "entity", "admin", "protocol", "start_date", "end_date", "quota", "count", "evaluated", "approved", "rejected", "disputed", "state", "payments", "signer", "invalidated", "escrow_account", "intents", "flagged", "flagged_active", "service_agent_deposit_required", "evaluator_deposit_required", "dispute_deposit_amount", "penalty_amount_per_dispute", "disputes_open", "disputes_awarded", "disputes_dismissed", "min_deposit_period", "adjudicators")
    ID_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    ADMIN_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    START_DATE_FIELD_NUMBER: _ClassVar[int]
    END_DATE_FIELD_NUMBER: _ClassVar[int]
    QUOTA_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    EVALUATED_FIELD_NUMBER: _ClassVar[int]
    APPROVED_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    DISPUTED_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PAYMENTS_FIELD_NUMBER: _ClassVar[int]
    SIGNER_FIELD_NUMBER: _ClassVar[int]
    INVALIDATED_FIELD_NUMBER: _ClassVar[int]
    ESCROW_ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    INTENTS_FIELD_NUMBER: _ClassVar[int]
    FLAGGED_FIELD_NUMBER: _ClassVar[int]
    FLAGGED_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    SERVICE_AGENT_DEPOSIT_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    EVALUATOR_DEPOSIT_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    DISPUTE_DEPOSIT_AMOUNT_FIELD_NUMBER: _ClassVar[int]
    PENALTY_AMOUNT_PER_DISPUTE_FIELD_NUMBER: _ClassVar[int]
    DISPUTES_OPEN_FIELD_NUMBER: _ClassVar[int]
    DISPUTES_AWARDED_FIELD_NUMBER: _ClassVar[int]
    DISPUTES_DISMISSED_FIELD_NUMBER: _ClassVar[int]
    MIN_DEPOSIT_PERIOD_FIELD_NUMBER: _ClassVar[int]
    ADJUDICATORS_FIELD_NUMBER: _ClassVar[int]
    id: str
    entity: str
    admin: str
    protocol: str
    start_date: _timestamp_pb2.Timestamp
    end_date: _timestamp_pb2.Timestamp
    quota: int
    count: int
    evaluated: int
    approved: int
    rejected: int
    disputed: int
    state: CollectionState
    payments: Payments
    signer: str
    invalidated: int
    escrow_account: str
    intents: CollectionIntentOptions
    flagged: int
    flagged_active: int
    service_agent_deposit_required: _containers.RepeatedCompositeFieldContainer[_coin_pb2.Coin]
    evaluator_deposit_required: _containers.RepeatedCompositeFieldContainer[_coin_pb2.Coin]
    dispute_deposit_amount: _containers.RepeatedCompositeFieldContainer[_coin_pb2.Coin]
    penalty_amount_per_dispute: _containers.RepeatedCompositeFieldContainer[_coin_pb2.Coin]
    disputes_open: int
    disputes_awarded: int
    disputes_dismissed: int
    min_deposit_period: _duration_pb2.Duration
    adjudicators: _containers.RepeatedCompositeFieldContainer[AdjudicationDid]
    def __init__(self, id: _Optional[str] = ..., entity: _Optional[str] = ..., admin: _Optional[str] = ..., protocol: _Optional[str] = ..., start_date: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_date: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., quota: _Optional[int] = ..., count: _Optional[int] = ..., evaluated: _Optional[int] = ..., approved: _Optional[int] = ..., rejected: _Optional[int] = ..., disputed: _Optional[int] = ..., state: _Optional[_Union[CollectionState, str]] = ..., payments: _Optional[_Union[Payments, _Mapping]] = ..., signer: _Optional[str] = ..., invalidated: _Optional[int] = ..., escrow_account: _Optional[str] = ..., intents: _Optional[_Union[CollectionIntentOptions, str]] = ..., flagged: _Optional[int] = ..., flagged_active: _Optional[int] = ..., service_agent_deposit_required: _Optional[_Iterable[_Union[_coin_pb2.Coin, _Mapping]]] = ..., evaluator_deposit_required: _Optional[_Iterable[_Union[_coin_pb2.Coin, _Mapping]]] = ..., dispute_deposit_amount: _Optional[_Iterable[_Union[_coin_pb2.Coin, _Mapping]]] = ..., penalty_amount_per_dispute: _Optional[_Iterable[_Union[_coin_pb2.Coin, _Mapping]]] = ..., disputes_open: _Optional[int] = ..., disputes_awarded: _Optional[int] = ..., disputes_dismissed: _Optional[int] = ..., min_deposit_period: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., adjudicators: _Optional[_Iterable[_Union[AdjudicationDid, _Mapping]]] = ...) -> None: ...

class Payments(_message.Message):
    __slots__ = ("submission", "evaluation", "approval", "rejection")
    SUBMISSION_FIELD_NUMBER: _ClassVar[int]
    EVALUATION_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    REJECTION_FIELD_NUMBER: _ClassVar[int]
    submission: Payment
    evaluation: Payment
    approval: Payment
    rejection: Payment
    def __init__(self, submission: _Optional[_Union[Payment, _Mapping]] = ..., evaluation: _Optional[_Union[Payment, _Mapping]] = ..., approval: _Optional[_Union[Payment, _Mapping]] = ..., rejection: _Optional[_Union[Payment, _Mapping]] = ...) -> None: ...

class Payment(_message.Message):
    __slots__ = ("account", "amount", "contract_1155_payment", "timeout_ns", "cw20_payment", "is_oracle_payment", "cw1155_payment")
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    CONTRACT_1155_PAYMENT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_NS_FIELD_NUMBER: _ClassVar[int]
    CW20_PAYMENT_FIELD_NUMBER: _ClassVar[int]
    IS_ORACLE_PAYMENT_FIELD_NUMBER: _ClassVar[int]
    CW1155_PAYMENT_FIELD_NUMBER: _ClassVar[int]
    account: str
    amount: _containers.RepeatedCompositeFieldContainer[_coin_pb2.Coin]
    contract_1155_payment: Contract1155Payment
    timeout_ns: _duration_pb2.Duration
    cw20_payment: _containers.RepeatedCompositeFieldContainer[CW20Payment]
    is_oracle_payment: bool
    cw1155_payment: _containers.RepeatedCompositeFieldContainer[CW1155Payment]
    def __init__(self, account: _Optional[str] = ..., amount: _Optional[_Iterable[_Union[_coin_pb2.Coin, _Mapping]]] = ..., contract_1155_payment: _Optional[_Union[Contract1155Payment, _Mapping]] = ..., timeout_ns: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., cw20_payment: _Optional[_Iterable[_Union[CW20Payment, _Mapping]]] = ..., is_oracle_payment: _Optional[bool] = ..., cw1155_payment: _Optional[_Iterable[_Union[CW1155Payment, _Mapping]]] = ...) -> None: ...

class Contract1155Payment(_message.Message):
    __slots__ = ("address", "token_id", "amount")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    address: str
    token_id: str
    amount: int
    def __init__(self, address: _Optional[str] = ..., token_id: _Optional[str] = ..., amount: _Optional[int] = ...) -> None: ...

class CW1155Payment(_message.Message):
    __slots__ = ("address", "token_id", "amount")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    address: str
    token_id: _containers.RepeatedScalarFieldContainer[str]
    amount: int
    def __init__(self, address: _Optional[str] = ..., token_id: _Optional[_Iterable[str]] = ..., amount: _Optional[int] = ...) -> None: ...

class CW1155IntentPayment(_message.Message):
    __slots__ = ("address", "tokens")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    address: str
    tokens: _containers.RepeatedCompositeFieldContainer[CW1155IntentPaymentToken]
    def __init__(self, address: _Optional[str] = ..., tokens: _Optional[_Iterable[_Union[CW1155IntentPaymentToken, _Mapping]]] = ...) -> None: ...

class CW1155IntentPaymentToken(_message.Message):
    __slots__ = ("token_id", "amount")
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    token_id: str
    amount: int
    def __init__(self, token_id: _Optional[str] = ..., amount: _Optional[int] = ...) -> None: ...

class CW20Payment(_message.Message):
    __slots__ = ("address", "amount")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    address: str
    amount: int
    def __init__(self, address: _Optional[str] = ..., amount: _Optional[int] = ...) -> None: ...

class CW20Output(_message.Message):
    __slots__ = ("address", "contract_address", "amount")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CONTRACT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    address: str
    contract_address: str
    amount: int
    def __init__(self, address: _Optional[str] = ..., contract_address: _Optional[str] = ..., amount: _Optional[int] = ...) -> None: ...

class Claim(_message.Message):
    __slots__ = ("collection_id", "agent_did", "agent_address", "submission_date", "claim_id", "evaluation", "payments_status", "use_intent", "amount", "cw20_payment", "cw1155_payment", "cw1155_intent_payment", "member_address", "evaluation_history")
    COLLECTION_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_DID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    SUBMISSION_DATE_FIELD_NUMBER: _ClassVar[int]
    CLAIM_ID_FIELD_NUMBER: _ClassVar[int]
    EVALUATION_FIELD_NUMBER: _ClassVar[int]
    PAYMENTS_STATUS_FIELD_NUMBER: _ClassVar[int]
    USE_INTENT_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    CW20_PAYMENT_FIELD_NUMBER: _ClassVar[int]
    CW1155_PAYMENT_FIELD_NUMBER: _ClassVar[int]
    CW1155_INTENT_PAYMENT_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    EVALUATION_HISTORY_FIELD_NUMBER: _ClassVar[int]
    collection_id: str
    agent_did: str
    agent_address: str
    submission_date: _timestamp_pb2.Timestamp
    claim_id: str
    evaluation: Evaluation
    payments_status: ClaimPayments
    use_intent: bool
    amount: _containers.RepeatedCompositeFieldContainer[_coin_pb2.Coin]
    cw20_payment: _containers.RepeatedCompositeFieldContainer[CW20Payment]
    cw1155_payment: _containers.RepeatedCompositeFieldContainer[CW1155Payment]
    cw1155_intent_payment: _containers.RepeatedCompositeFieldContainer[CW1155IntentPayment]
    member_address: str
    evaluation_history: _containers.RepeatedCompositeFieldContainer[Evaluation]
    def __init__(self, collection_id: _Optional[str] = ..., agent_did: _Optional[str] = ..., agent_address: _Optional[str] = ..., submission_date: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., claim_id: _Optional[str] = ..., evaluation: _Optional[_Union[Evaluation, _Mapping]] = ..., payments_status: _Optional[_Union[ClaimPayments, _Mapping]] = ..., use_intent: _Optional[bool] = ..., amount: _Optional[_Iterable[_Union[_coin_pb2.Coin, _Mapping]]] = ..., cw20_payment: _Optional[_Iterable[_Union[CW20Payment, _Mapping]]] = ..., cw1155_payment: _Optional[_Iterable[_Union[CW1155Payment, _Mapping]]] = ..., cw1155_intent_payment: _Optional[_Iterable[_Union[CW1155IntentPayment, _Mapping]]] = ..., member_address: _Optional[str] = ..., evaluation_history: _Optional[_Iterable[_Union[Evaluation, _Mapping]]] = ...) -> None: ...

class ClaimPayments(_message.Message):
    __slots__ = ("submission", "evaluation", "approval", "rejection")
    SUBMISSION_FIELD_NUMBER: _ClassVar[int]
    EVALUATION_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    REJECTION_FIELD_NUMBER: _ClassVar[int]
    submission: PaymentStatus
    evaluation: PaymentStatus
    approval: PaymentStatus
    rejection: PaymentStatus
    def __init__(self, submission: _Optional[_Union[PaymentStatus, str]] = ..., evaluation: _Optional[_Union[PaymentStatus, str]] = ..., approval: _Optional[_Union[PaymentStatus, str]] = ..., rejection: _Optional[_Union[PaymentStatus, str]] = ...) -> None: ...

class Evaluation(_message.Message):
    __slots__ = ("claim_id", "collection_id", "oracle", "agent_did", "agent_address", "status", "reason", "verification_proof", "evaluation_date", "amount", "cw20_payment", "cw1155_payment", "cw1155_intent_payment")
    CLAIM_ID_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_ID_FIELD_NUMBER: _ClassVar[int]
    ORACLE_FIELD_NUMBER: _ClassVar[int]
    AGENT_DID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    VERIFICATION_PROOF_FIELD_NUMBER: _ClassVar[int]
    EVALUATION_DATE_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    CW20_PAYMENT_FIELD_NUMBER: _ClassVar[int]
    CW1155_PAYMENT_FIELD_NUMBER: _ClassVar[int]
    CW1155_INTENT_PAYMENT_FIELD_NUMBER: _ClassVar[int]
    claim_id: str
    collection_id: str
    oracle: str
    agent_did: str
    agent_address: str
    status: EvaluationStatus
    reason: int
    verification_proof: str
    evaluation_date: _timestamp_pb2.Timestamp
    amount: _containers.RepeatedCompositeFieldContainer[_coin_pb2.Coin]
    cw20_payment: _containers.RepeatedCompositeFieldContainer[CW20Payment]
    cw1155_payment: _containers.RepeatedCompositeFieldContainer[CW1155Payment]
    cw1155_intent_payment: _containers.RepeatedCompositeFieldContainer[CW1155IntentPayment]
    def __init__(self, claim_id: _Optional[str] = ..., collection_id: _Optional[str] = ..., oracle: _Optional[str] = ..., agent_did: _Optional[str] = ..., agent_address: _Optional[str] = ..., status: _Optional[_Union[EvaluationStatus, str]] = ..., reason: _Optional[int] = ..., verification_proof: _Optional[str] = ..., evaluation_date: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., amount: _Optional[_Iterable[_Union[_coin_pb2.Coin, _Mapping]]] = ..., cw20_payment: _Optional[_Iterable[_Union[CW20Payment, _Mapping]]] = ..., cw1155_payment: _Optional[_Iterable[_Union[CW1155Payment, _Mapping]]] = ..., cw1155_intent_payment: _Optional[_Iterable[_Union[CW1155IntentPayment, _Mapping]]] = ...) -> None: ...

class Dispute(_message.Message):
    __slots__ = ("subject_id", "type", "data", "target_role", "disputer_address", "disputer_did", "dispute_deposit", "submitted_at", "status", "resolution")
    SUBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    TARGET_ROLE_FIELD_NUMBER: _ClassVar[int]
    DISPUTER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    DISPUTER_DID_FIELD_NUMBER: _ClassVar[int]
    DISPUTE_DEPOSIT_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_AT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    subject_id: str
    type: int
    data: DisputeData
    target_role: DisputeTargetRole
    disputer_address: str
    disputer_did: str
    dispute_deposit: _containers.RepeatedCompositeFieldContainer[_coin_pb2.Coin]
    submitted_at: _timestamp_pb2.Timestamp
    status: DisputeStatus
    resolution: DisputeResolution
    def __init__(self, subject_id: _Optional[str] = ..., type: _Optional[int] = ..., data: _Optional[_Union[DisputeData, _Mapping]] = ..., target_role: _Optional[_Union[DisputeTargetRole, str]] = ..., disputer_address: _Optional[str] = ..., disputer_did: _Optional[str] = ..., dispute_deposit: _Optional[_Iterable[_Union[_coin_pb2.Coin, _Mapping]]] = ..., submitted_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., status: _Optional[_Union[DisputeStatus, str]] = ..., resolution: _Optional[_Union[DisputeResolution, _Mapping]] = ...) -> None: ...

class DisputeData(_message.Message):
    __slots__ = ("uri", "type", "proof", "encrypted")
    URI_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PROOF_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTED_FIELD_NUMBER: _ClassVar[int]
    uri: str
    type: str
    proof: str
    encrypted: bool
    def __init__(self, uri: _Optional[str] = ..., type: _Optional[str] = ..., proof: _Optional[str] = ..., encrypted: _Optional[bool] = ...) -> None: ...

class DisputeResolution(_message.Message):
    __slots__ = ("adjudicator_did", "adjudicator_address", "adjudicator_payout_address", "resolved_at", "data", "intended_penalty", "actual_penalty_paid", "winner_amount", "adjudicator_amount", "winner_address", "loser_address")
    ADJUDICATOR_DID_FIELD_NUMBER: _ClassVar[int]
    ADJUDICATOR_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ADJUDICATOR_PAYOUT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_AT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    INTENDED_PENALTY_FIELD_NUMBER: _ClassVar[int]
    ACTUAL_PENALTY_PAID_FIELD_NUMBER: _ClassVar[int]
    WINNER_AMOUNT_FIELD_NUMBER: _ClassVar[int]
    ADJUDICATOR_AMOUNT_FIELD_NUMBER: _ClassVar[int]
    WINNER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LOSER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    adjudicator_did: str
    adjudicator_address: str
    adjudicator_payout_address: str
    resolved_at: _timestamp_pb2.Timestamp
    data: DisputeData
    intended_penalty: _containers.RepeatedCompositeFieldContainer[_coin_pb2.Coin]
    actual_penalty_paid: _containers.RepeatedCompositeFieldContainer[_coin_pb2.Coin]
    winner_amount: _containers.RepeatedCompositeFieldContainer[_coin_pb2.Coin]
    adjudicator_amount: _containers.RepeatedCompositeFieldContainer[_coin_pb2.Coin]
    winner_address: str
    loser_address: str
    def __init__(self, adjudicator_did: _Optional[str] = ..., adjudicator_address: _Optional[str] = ..., adjudicator_payout_address: _Optional[str] = ..., resolved_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., data: _Optional[_Union[DisputeData, _Mapping]] = ..., intended_penalty: _Optional[_Iterable[_Union[_coin_pb2.Coin, _Mapping]]] = ..., actual_penalty_paid: _Optional[_Iterable[_Union[_coin_pb2.Coin, _Mapping]]] = ..., winner_amount: _Optional[_Iterable[_Union[_coin_pb2.Coin, _Mapping]]] = ..., adjudicator_amount: _Optional[_Iterable[_Union[_coin_pb2.Coin, _Mapping]]] = ..., winner_address: _Optional[str] = ..., loser_address: _Optional[str] = ...) -> None: ...

class AgentDepositBalance(_message.Message):
    __slots__ = ("collection_id", "agent_address", "amount", "withdrawable_at")
    COLLECTION_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    WITHDRAWABLE_AT_FIELD_NUMBER: _ClassVar[int]
    collection_id: str
    agent_address: str
    amount: _containers.RepeatedCompositeFieldContainer[_coin_pb2.Coin]
    withdrawable_at: _timestamp_pb2.Timestamp
    def __init__(self, collection_id: _Optional[str] = ..., agent_address: _Optional[str] = ..., amount: _Optional[_Iterable[_Union[_coin_pb2.Coin, _Mapping]]] = ..., withdrawable_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Intent(_message.Message):
    __slots__ = ("id", "agent_did", "agent_address", "collection_id", "claim_id", "created_at", "expire_at", "status", "amount", "cw20_payment", "from_address", "escrow_address", "cw1155_payment", "cw1155_intent_payment", "member_address")
    ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_DID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_ID_FIELD_NUMBER: _ClassVar[int]
    CLAIM_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_AT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    CW20_PAYMENT_FIELD_NUMBER: _ClassVar[int]
    FROM_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ESCROW_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CW1155_PAYMENT_FIELD_NUMBER: _ClassVar[int]
    CW1155_INTENT_PAYMENT_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    id: str
    agent_did: str
    agent_address: str
    collection_id: str
    claim_id: str
    created_at: _timestamp_pb2.Timestamp
    expire_at: _timestamp_pb2.Timestamp
    status: IntentStatus
    amount: _containers.RepeatedCompositeFieldContainer[_coin_pb2.Coin]
    cw20_payment: _containers.RepeatedCompositeFieldContainer[CW20Payment]
    from_address: str
    escrow_address: str
    cw1155_payment: _containers.RepeatedCompositeFieldContainer[CW1155Payment]
    cw1155_intent_payment: _containers.RepeatedCompositeFieldContainer[CW1155IntentPayment]
    member_address: str
    def __init__(self, id: _Optional[str] = ..., agent_did: _Optional[str] = ..., agent_address: _Optional[str] = ..., collection_id: _Optional[str] = ..., claim_id: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expire_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., status: _Optional[_Union[IntentStatus, str]] = ..., amount: _Optional[_Iterable[_Union[_coin_pb2.Coin, _Mapping]]] = ..., cw20_payment: _Optional[_Iterable[_Union[CW20Payment, _Mapping]]] = ..., from_address: _Optional[str] = ..., escrow_address: _Optional[str] = ..., cw1155_payment: _Optional[_Iterable[_Union[CW1155Payment, _Mapping]]] = ..., cw1155_intent_payment: _Optional[_Iterable[_Union[CW1155IntentPayment, _Mapping]]] = ..., member_address: _Optional[str] = ...) -> None: ...

class MemberBudget(_message.Message):
    __slots__ = ("collection_id", "member_address", "period", "period_spend_limit", "period_spent", "period_cw20_spend_limit", "period_cw20_spent", "period_reset_at")
    COLLECTION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    PERIOD_SPEND_LIMIT_FIELD_NUMBER: _ClassVar[int]
    PERIOD_SPENT_FIELD_NUMBER: _ClassVar[int]
    PERIOD_CW20_SPEND_LIMIT_FIELD_NUMBER: _ClassVar[int]
    PERIOD_CW20_SPENT_FIELD_NUMBER: _ClassVar[int]
    PERIOD_RESET_AT_FIELD_NUMBER: _ClassVar[int]
    collection_id: str
    member_address: str
    period: _duration_pb2.Duration
    period_spend_limit: _containers.RepeatedCompositeFieldContainer[_coin_pb2.Coin]
    period_spent: _containers.RepeatedCompositeFieldContainer[_coin_pb2.Coin]
    period_cw20_spend_limit: _containers.RepeatedCompositeFieldContainer[CW20Payment]
    period_cw20_spent: _containers.RepeatedCompositeFieldContainer[CW20Payment]
    period_reset_at: _timestamp_pb2.Timestamp
    def __init__(self, collection_id: _Optional[str] = ..., member_address: _Optional[str] = ..., period: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., period_spend_limit: _Optional[_Iterable[_Union[_coin_pb2.Coin, _Mapping]]] = ..., period_spent: _Optional[_Iterable[_Union[_coin_pb2.Coin, _Mapping]]] = ..., period_cw20_spend_limit: _Optional[_Iterable[_Union[CW20Payment, _Mapping]]] = ..., period_cw20_spent: _Optional[_Iterable[_Union[CW20Payment, _Mapping]]] = ..., period_reset_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
