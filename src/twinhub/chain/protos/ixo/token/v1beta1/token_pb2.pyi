from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Params(_message.Message):
    __slots__ = ("ixo1155_contract_code",)
    IXO1155_CONTRACT_CODE_FIELD_NUMBER: _ClassVar[int]
    ixo1155_contract_code: int
    def __init__(self, ixo1155_contract_code: _Optional[int] = ...) -> None: ...

class Token(_message.Message):
    __slots__ = ("minter", "contract_address", "name", "description", "image", "type", "cap", "supply", "paused", "stopped", "retired", "cancelled", "transferred")
    MINTER_FIELD_NUMBER: _ClassVar[int]
    CONTRACT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CLASS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    CAP_FIELD_NUMBER: _ClassVar[int]
    SUPPLY_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    STOPPED_FIELD_NUMBER: _ClassVar[int]
    RETIRED_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    TRANSFERRED_FIELD_NUMBER: _ClassVar[int]
    minter: str
    contract_address: str
    name: str
    description: str
    image: str
    type: str
    cap: str
    supply: str
    paused: bool
    stopped: bool
    retired: _containers.RepeatedCompositeFieldContainer[TokensRetired]
    cancelled: _containers.RepeatedCompositeFieldContainer[TokensCancelled]
    transferred: _containers.RepeatedCompositeFieldContainer[CreditsTransferred]
    def __init__(self, minter: _Optional[str] = ..., contract_address: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., image: _Optional[str] = ..., type: _Optional[str] = ..., cap: _Optional[str] = ..., supply: _Optional[str] = ..., paused: _Optional[bool] = ..., stopped: _Optional[bool] = ..., retired: _Optional[_Iterable[_Union[TokensRetired, _Mapping]]] = ..., cancelled: _Optional[_Iterable[_Union[TokensCancelled, _Mapping]]] = ..., transferred: _Optional[_Iterable[_Union[CreditsTransferred, _Mapping]]] = ..., **kwargs) -> None: ...

class TokensRetired(_message.Message):
    __slots__ = ("id", "reason", "jurisdiction", "amount", "owner")
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    JURISDICTION_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    id: str
    reason: str
    jurisdiction: str
    amount: str
    owner: str
    def __init__(self, id: _Optional[str] = ..., reason: _Optional[str] = ..., jurisdiction: _Optional[str] = ..., amount: _Optional[str] = ..., owner: _Optional[str] = ...) -> None: ...

class CreditsTransferred(_message.Message):
    __slots__ = ("id", "reason", "jurisdiction", "amount", "owner", "authorization_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    JURISDICTION_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZATION_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    reason: str
    jurisdiction: str
    amount: str
    owner: str
    authorization_id: str
    def __init__(self, id: _Optional[str] = ..., reason: _Optional[str] = ..., jurisdiction: _Optional[str] = ..., amount: _Optional[str] = ..., owner: _Optional[str] = ..., authorization_id: _Optional[str] = ...) -> None: ...

class TokensCancelled(_message.Message):
    __slots__ = ("id", "reason", "amount", "owner")
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    id: str
    reason: str
    amount: str
    owner: str
    def __init__(self, id: _Optional[str] = ..., reason: _Optional[str] = ..., amount: _Optional[str] = ..., owner: _Optional[str] = ...) -> None: ...

class TokenProperties(_message.Message):
    __slots__ = ("id", "index", "name", "collection", "tokenData")
    ID_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    TOKENDATA_FIELD_NUMBER: _ClassVar[int]
    id: str
    index: str
    name: str
    collection: str
    tokenData: _containers.RepeatedCompositeFieldContainer[TokenData]
    def __init__(self, id: _Optional[str] = ..., index: _Optional[str] = ..., name: _Optional[str] = ..., collection: _Optional[str] = ..., tokenData: _Optional[_Iterable[_Union[TokenData, _Mapping]]] = ...) -> None: ...

class TokenData(_message.Message):
    __slots__ = ("uri", "encrypted", "proof", "type", "id")
    URI_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTED_FIELD_NUMBER: _ClassVar[int]
    PROOF_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    uri: str
    encrypted: bool
    proof: str
    type: str
    id: str
    def __init__(self, uri: _Optional[str] = ..., encrypted: _Optional[bool] = ..., proof: _Optional[str] = ..., type: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...
