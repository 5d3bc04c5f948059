from twinhub.chain.protos.cosmos.base.tendermint.v1beta1 import types_pb2 as _types_pb2
from google.api import annotations_pb2 as _annotations_pb2
from twinhub.chain.protos.tendermint.p2p import types_pb2 as _types_pb2_1
from twinhub.chain.protos.tendermint.types import block_pb2 as _block_pb2
from twinhub.chain.protos.tendermint.types import types_pb2 as _types_pb2_1_1
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetBlockByHeightRequest(_message.Message):
    __slots__ = ("height",)
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    height: int
    def __init__(self, height: _Optional[int] = ...) -> None: ...

class GetBlockByHeightResponse(_message.Message):
    __slots__ = ("block_id", "block", "sdk_block")
    BLOCK_ID_FIELD_NUMBER: _ClassVar[int]
    BLOCK_FIELD_NUMBER: _ClassVar[int]
    SDK_BLOCK_FIELD_NUMBER: _ClassVar[int]
    block_id: _types_pb2_1_1.BlockID
    block: _block_pb2.Block
    sdk_block: _types_pb2.Block
    def __init__(self, block_id: _Optional[_Union[_types_pb2_1_1.BlockID, _Mapping]] = ..., block: _Optional[_Union[_block_pb2.Block, _Mapping]] = ..., sdk_block: _Optional[_Union[_types_pb2.Block, _Mapping]] = ...) -> None: ...

class GetLatestBlockRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetLatestBlockResponse(_message.Message):
    __slots__ = ("block_id", "block", "sdk_block")
    BLOCK_ID_FIELD_NUMBER: _ClassVar[int]
    BLOCK_FIELD_NUMBER: _ClassVar[int]
    SDK_BLOCK_FIELD_NUMBER: _ClassVar[int]
    block_id: _types_pb2_1_1.BlockID
    block: _block_pb2.Block
    sdk_block: _types_pb2.Block
    def __init__(self, block_id: _Optional[_Union[_types_pb2_1_1.BlockID, _Mapping]] = ..., block: _Optional[_Union[_block_pb2.Block, _Mapping]] = ..., sdk_block: _Optional[_Union[_types_pb2.Block, _Mapping]] = ...) -> None: ...

class GetSyncingRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetSyncingResponse(_message.Message):
    __slots__ = ("syncing",)
    SYNCING_FIELD_NUMBER: _ClassVar[int]
    syncing: bool
    def __init__(self, syncing: _Optional[bool] = ...) -> None: ...

class GetNodeInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetNodeInfoResponse(_message.Message):
    __slots__ = ("default_node_info", "application_version")
    DEFAULT_NODE_INFO_FIELD_NUMBER: _ClassVar[int]
    APPLICATION_VERSION_FIELD_NUMBER: _ClassVar[int]
    default_node_info: _types_pb2_1.DefaultNodeInfo
    application_version: VersionInfo
    def __init__(self, default_node_info: _Optional[_Union[_types_pb2_1.DefaultNodeInfo, _Mapping]] = ..., application_version: _Optional[_Union[VersionInfo, _Mapping]] = ...) -> None: ...

class VersionInfo(_message.Message):
    __slots__ = ("name", "app_name", "version", "git_commit", "build_tags", "go_version", "build_deps", "cosmos_sdk_version")
    NAME_FIELD_NUMBER: _ClassVar[int]
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    GIT_COMMIT_FIELD_NUMBER: _ClassVar[int]
    BUILD_TAGS_FIELD_NUMBER: _ClassVar[int]
    GO_VERSION_FIELD_NUMBER: _ClassVar[int]
    BUILD_DEPS_FIELD_NUMBER: _ClassVar[int]
    COSMOS_SDK_VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    app_name: str
    version: str
    git_commit: str
    build_tags: str
    go_version: str
    build_deps: _containers.RepeatedCompositeFieldContainer[Module]
    cosmos_sdk_version: str
    def __init__(self, name: _Optional[str] = ..., app_name: _Optional[str] = ..., version: _Optional[str] = ..., git_commit: _Optional[str] = ..., build_tags: _Optional[str] = ..., go_version: _Optional[str] = ..., build_deps: _Optional[_Iterable[_Union[Module, _Mapping]]] = ..., cosmos_sdk_version: _Optional[str] = ...) -> None: ...

class Module(_message.Message):
    __slots__ = ("path", "version", "sum")
    PATH_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SUM_FIELD_NUMBER: _ClassVar[int]
    path: str
    version: str
    sum: str
    def __init__(self, path: _Optional[str] = ..., version: _Optional[str] = ..., sum: _Optional[str] = ...) -> None: ...
