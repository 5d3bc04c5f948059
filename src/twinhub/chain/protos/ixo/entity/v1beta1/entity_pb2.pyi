import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Params(_message.Message):
    __slots__ = ("nftContractAddress", "nftContractMinter", "createSequence")
    NFTCONTRACTADDRESS_FIELD_NUMBER: _ClassVar[int]
    NFTCONTRACTMINTER_FIELD_NUMBER: _ClassVar[int]
    CREATESEQUENCE_FIELD_NUMBER: _ClassVar[int]
    nftContractAddress: str
    nftContractMinter: str
    createSequence: int
    def __init__(self, nftContractAddress: _Optional[str] = ..., nftContractMinter: _Optional[str] = ..., createSequence: _Optional[int] = ...) -> None: ...

class Entity(_message.Message):
    __slots__ = ("id", "type", "start_date", "end_date", "status", "relayer_node", "credentials", "entity_verified", "metadata", "accounts")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    START_DATE_FIELD_NUMBER: _ClassVar[int]
    END_DATE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RELAYER_NODE_FIELD_NUMBER: _ClassVar[int]
    CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    ENTITY_VERIFIED_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ACCOUNTS_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: str
    start_date: _timestamp_pb2.Timestamp
    end_date: _timestamp_pb2.Timestamp
    status: int
    relayer_node: str
    credentials: _containers.RepeatedScalarFieldContainer[str]
    entity_verified: bool
    metadata: EntityMetadata
    accounts: _containers.RepeatedCompositeFieldContainer[EntityAccount]
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ..., start_date: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_date: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., status: _Optional[int] = ..., relayer_node: _Optional[str] = ..., credentials: _Optional[_Iterable[str]] = ..., entity_verified: _Optional[bool] = ..., metadata: _Optional[_Union[EntityMetadata, _Mapping]] = ..., accounts: _Optional[_Iterable[_Union[EntityAccount, _Mapping]]] = ...) -> None: ...

class EntityAccount(_message.Message):
    __slots__ = ("name", "address")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    name: str
    address: str
    def __init__(self, name: _Optional[str] = ..., address: _Optional[str] = ...) -> None: ...

class EntityMetadata(_message.Message):
    __slots__ = ("version_id", "created", "updated")
    VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    UPDATED_FIELD_NUMBER: _ClassVar[int]
    version_id: str
    created: _timestamp_pb2.Timestamp
    updated: _timestamp_pb2.Timestamp
    def __init__(self, version_id: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
