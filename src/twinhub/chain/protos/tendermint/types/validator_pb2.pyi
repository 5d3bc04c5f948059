from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor

class BlockIDFlag(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BLOCK_ID_FLAG_UNKNOWN: _ClassVar[BlockIDFlag]
    BLOCK_ID_FLAG_ABSENT: _ClassVar[BlockIDFlag]
    BLOCK_ID_FLAG_COMMIT: _ClassVar[BlockIDFlag]
    BLOCK_ID_FLAG_NIL: _ClassVar[BlockIDFlag]
BLOCK_ID_FLAG_UNKNOWN: BlockIDFlag
BLOCK_ID_FLAG_ABSENT: BlockIDFlag
BLOCK_ID_FLAG_COMMIT: BlockIDFlag
BLOCK_ID_FLAG_NIL: BlockIDFlag
