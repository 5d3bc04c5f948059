from twinhub.chain.protos.cosmos.base.query.v1beta1 import pagination_pb2 as _pagination_pb2
from google.api import annotations_pb2 as _annotations_pb2
from twinhub.chain.protos.ixo.token.v1beta1 import token_pb2 as _token_pb2
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
    params: _token_pb2.Params
    def __init__(self, params: _Optional[_Union[_token_pb2.Params, _Mapping]] = ...) -> None: ...

class QueryTokenListRequest(_message.Message):
    __slots__ = ("pagination", "minter")
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    MINTER_FIELD_NUMBER: _ClassVar[int]
    pagination: _pagination_pb2.PageRequest
    minter: str
    def __init__(self, pagination: _Optional[_Union[_pagination_pb2.PageRequest, _Mapping]] = ..., minter: _Optional[str] = ...) -> None: ...

class QueryTokenListResponse(_message.Message):
    __slots__ = ("pagination", "tokenDocs")
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    TOKENDOCS_FIELD_NUMBER: _ClassVar[int]
    pagination: _pagination_pb2.PageResponse
    tokenDocs: _containers.RepeatedCompositeFieldContainer[_token_pb2.Token]
    def __init__(self, pagination: _Optional[_Union[_pagination_pb2.PageResponse, _Mapping]] = ..., tokenDocs: _Optional[_Iterable[_Union[_token_pb2.Token, _Mapping]]] = ...) -> None: ...

class QueryTokenDocRequest(_message.Message):
    __slots__ = ("minter", "contract_address")
    MINTER_FIELD_NUMBER: _ClassVar[int]
    CONTRACT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    minter: str
    contract_address: str
    def __init__(self, minter: _Optional[str] = ..., contract_address: _Optional[str] = ...) -> None: ...

class QueryTokenDocResponse(_message.Message):
    __slots__ = ("tokenDoc",)
    TOKENDOC_FIELD_NUMBER: _ClassVar[int]
    tokenDoc: _token_pb2.Token
    def __init__(self, tokenDoc: _Optional[_Union[_token_pb2.Token, _Mapping]] = ...) -> None: ...

class QueryTokenMetadataRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class QueryTokenMetadataResponse(_message.Message):
    __slots__ = ("name", "description", "decimals", "image", "index", "properties")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    DECIMALS_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    decimals: str
    image: str
    index: str
    properties: TokenMetadataProperties
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., decimals: _Optional[str] = ..., image: _Optional[str] = ..., index: _Optional[str] = ..., properties: _Optional[_Union[TokenMetadataProperties, _Mapping]] = ...) -> None: ...

class TokenMetadataProperties(_message.Message):
    __slots__ = ("collection", "cap", "linkedResources")
    CLASS_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    CAP_FIELD_NUMBER: _ClassVar[int]
    LINKEDRESOURCES_FIELD_NUMBER: _ClassVar[int]
    collection: str
    cap: str
    linkedResources: _containers.RepeatedCompositeFieldContainer[_token_pb2.TokenData]
    def __init__(self, collection: _Optional[str] = ..., cap: _Optional[str] = ..., linkedResources: _Optional[_Iterable[_Union[_token_pb2.TokenData, _Mapping]]] = ..., **kwargs) -> None: ...
