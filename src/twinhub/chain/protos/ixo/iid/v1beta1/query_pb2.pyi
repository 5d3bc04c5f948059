from twinhub.chain.protos.cosmos.base.query.v1beta1 import pagination_pb2 as _pagination_pb2
from google.api import annotations_pb2 as _annotations_pb2
from twinhub.chain.protos.ixo.iid.v1beta1 import iid_pb2 as _iid_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class QueryIidDocumentsRequest(_message.Message):
    __slots__ = ("pagination",)
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    pagination: _pagination_pb2.PageRequest
    def __init__(self, pagination: _Optional[_Union[_pagination_pb2.PageRequest, _Mapping]] = ...) -> None: ...

class QueryIidDocumentsResponse(_message.Message):
    __slots__ = ("iidDocuments", "pagination")
    IIDDOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    PAGINATION_FIELD_NUMBER: _ClassVar[int]
    iidDocuments: _containers.RepeatedCompositeFieldContainer[_iid_pb2.IidDocument]
    pagination: _pagination_pb2.PageResponse
    def __init__(self, iidDocuments: _Optional[_Iterable[_Union[_iid_pb2.IidDocument, _Mapping]]] = ..., pagination: _Optional[_Union[_pagination_pb2.PageResponse, _Mapping]] = ...) -> None: ...

class QueryIidDocumentRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class QueryIidDocumentResponse(_message.Message):
    __slots__ = ("iidDocument",)
    IIDDOCUMENT_FIELD_NUMBER: _ClassVar[int]
    iidDocument: _iid_pb2.IidDocument
    def __init__(self, iidDocument: _Optional[_Union[_iid_pb2.IidDocument, _Mapping]] = ...) -> None: ...
