import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Context(_message.Message):
    __slots__ = ("key", "val")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VAL_FIELD_NUMBER: _ClassVar[int]
    key: str
    val: str
    def __init__(self, key: _Optional[str] = ..., val: _Optional[str] = ...) -> None: ...

class AccordedRight(_message.Message):
    __slots__ = ("type", "id", "mechanism", "message", "service")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    type: str
    id: str
    mechanism: str
    message: str
    service: str
    def __init__(self, type: _Optional[str] = ..., id: _Optional[str] = ..., mechanism: _Optional[str] = ..., message: _Optional[str] = ..., service: _Optional[str] = ...) -> None: ...

class LinkedResource(_message.Message):
    __slots__ = ("type", "id", "description", "mediaType", "serviceEndpoint", "proof", "encrypted", "right")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    MEDIATYPE_FIELD_NUMBER: _ClassVar[int]
    SERVICEENDPOINT_FIELD_NUMBER: _ClassVar[int]
    PROOF_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTED_FIELD_NUMBER: _ClassVar[int]
    RIGHT_FIELD_NUMBER: _ClassVar[int]
    type: str
    id: str
    description: str
    mediaType: str
    serviceEndpoint: str
    proof: str
    encrypted: str
    right: str
    def __init__(self, type: _Optional[str] = ..., id: _Optional[str] = ..., description: _Optional[str] = ..., mediaType: _Optional[str] = ..., serviceEndpoint: _Optional[str] = ..., proof: _Optional[str] = ..., encrypted: _Optional[str] = ..., right: _Optional[str] = ...) -> None: ...

class LinkedClaim(_message.Message):
    __slots__ = ("type", "id", "description", "serviceEndpoint", "proof", "encrypted", "right")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SERVICEENDPOINT_FIELD_NUMBER: _ClassVar[int]
    PROOF_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTED_FIELD_NUMBER: _ClassVar[int]
    RIGHT_FIELD_NUMBER: _ClassVar[int]
    type: str
    id: str
    description: str
    serviceEndpoint: str
    proof: str
    encrypted: str
    right: str
    def __init__(self, type: _Optional[str] = ..., id: _Optional[str] = ..., description: _Optional[str] = ..., serviceEndpoint: _Optional[str] = ..., proof: _Optional[str] = ..., encrypted: _Optional[str] = ..., right: _Optional[str] = ...) -> None: ...

class LinkedEntity(_message.Message):
    __slots__ = ("type", "id", "relationship", "service")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    RELATIONSHIP_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    type: str
    id: str
    relationship: str
    service: str
    def __init__(self, type: _Optional[str] = ..., id: _Optional[str] = ..., relationship: _Optional[str] = ..., service: _Optional[str] = ...) -> None: ...

class VerificationMethod(_message.Message):
    __slots__ = ("id", "type", "controller", "blockchainAccountID", "publicKeyHex", "publicKeyMultibase", "publicKeyBase58")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    BLOCKCHAINACCOUNTID_FIELD_NUMBER: _ClassVar[int]
    PUBLICKEYHEX_FIELD_NUMBER: _ClassVar[int]
    PUBLICKEYMULTIBASE_FIELD_NUMBER: _ClassVar[int]
    PUBLICKEYBASE58_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: str
    controller: str
    blockchainAccountID: str
    publicKeyHex: str
    publicKeyMultibase: str
    publicKeyBase58: str
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ..., controller: _Optional[str] = ..., blockchainAccountID: _Optional[str] = ..., publicKeyHex: _Optional[str] = ..., publicKeyMultibase: _Optional[str] = ..., publicKeyBase58: _Optional[str] = ...) -> None: ...

class Service(_message.Message):
    __slots__ = ("id", "type", "serviceEndpoint")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SERVICEENDPOINT_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: str
    serviceEndpoint: str
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ..., serviceEndpoint: _Optional[str] = ...) -> None: ...

class IidMetadata(_message.Message):
    __slots__ = ("versionId", "created", "updated", "deactivated")
    VERSIONID_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    UPDATED_FIELD_NUMBER: _ClassVar[int]
    DEACTIVATED_FIELD_NUMBER: _ClassVar[int]
    versionId: str
    created: _timestamp_pb2.Timestamp
    updated: _timestamp_pb2.Timestamp
    deactivated: bool
    def __init__(self, versionId: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., deactivated: _Optional[bool] = ...) -> None: ...
