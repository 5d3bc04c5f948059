from twinhub.chain.protos.cosmos.base.query.v1beta1 import pagination_pb2 as _pagination_pb2
from google.api import annotations_pb2 as _annotations_pb2
from twinhub.chain.protos.ixo.entity.v1beta1 import entity_pb2 as _entity_pb2
from twinhub.chain.protos.ixo.iid.v1beta1 import iid_pb2 as _iid_pb2
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
    params: _entity_pb2.Params
    def __init__(self, params: _Optional[_Union[_entity_pb2.Params, _Mapping]] = ...) -> None: ...

class QueryEntityRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class QueryEntityResponse(_message.Message):
    __slots__ = ("entity", "iidDocument")
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    IIDDOCUMENT_FIELD_NUMBER: _ClassVar[int]
    entity: _entity_pb2.Entity
    iidDocument: _iid_pb2.IidDocument
    def __init__(self, entity: _Optional[_Union[_entity_pb2.Entity, _Mapping]] = ..., iidDocument: _Optional[_Union[_iid_pb2.IidDocument, _Mapping]] = ...) -> None: ...

class QueryEntityMetadataRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class QueryEntityMetadataResponse(_message.Message):
    __slots__ = ("entity",)
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    entity: _entity_pb2.Entity
    def __init__(self, entity: _Optional[_Union[_entity_pb2.Entity, _Mapping]] = ...) -> None: ...

class QueryEntityIidDocumentRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class QueryEntityIidDocumentResponse(_message.Message):
    __slots__ = ("iidDocument",)
    IIDDOCUMENT_FIELD_NUMBER: _ClassVar[int]
    iidDocument: _iid_pb2.IidDocument
    def __init__(self, iidDocument: _Optional[_Union[_iid_pb2.IidDocument, _Mapping]] = ...) -> None: ...

class QueryEntityVerifiedRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class QueryEntityVerifiedResponse(_message.Message):
    __slots__ = ("entity_verified",)
    ENTITY_VERIFIED_FIELD_NUMBER: _ClassVar[int]
    entity_verified: bool
    def __init__(self, entity_verified: _Optional[bool] = ...) -> None: ...

class QueryEntityListRequest(_message.Message):
    __slots__ = ("pagination",)
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    pagination: _pagination_pb2.PageRequest
    def __init__(self, pagination: _Optional[_Union[_pagination_pb2.PageRequest, _Mapping]] = ...) -> None: ...

class QueryEntityListResponse(_message.Message):
    __slots__ = ("entities", "pagination")
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    entities: _containers.RepeatedCompositeFieldContainer[_entity_pb2.Entity]
    pagination: _pagination_pb2.PageResponse
    def __init__(self, entities: _Optional[_Iterable[_Union[_entity_pb2.Entity, _Mapping]]] = ..., pagination: _Optional[_Union[_pagination_pb2.PageResponse, _Mapping]] = ...) -> None: ...
