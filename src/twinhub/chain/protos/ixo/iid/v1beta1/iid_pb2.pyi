from twinhub.chain.protos.ixo.iid.v1beta1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class IidDocument(_message.Message):
    __slots__ = ("context", "id", "controller", "verificationMethod", "service", "authentication", "assertionMethod", "keyAgreement", "capabilityInvocation", "capabilityDelegation", "linkedResource", "linkedClaim", "accordedRight", "linkedEntity", "alsoKnownAs", "metadata")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    VERIFICATIONMETHOD_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    AUTHENTICATION_FIELD_NUMBER: _ClassVar[int]
    ASSERTIONMETHOD_FIELD_NUMBER: _ClassVar[int]
    KEYAGREEMENT_FIELD_NUMBER: _ClassVar[int]
    CAPABILITYINVOCATION_FIELD_NUMBER: _ClassVar[int]
    CAPABILITYDELEGATION_FIELD_NUMBER: _ClassVar[int]
    LINKEDRESOURCE_FIELD_NUMBER: _ClassVar[int]
    LINKEDCLAIM_FIELD_NUMBER: _ClassVar[int]
    ACCORDEDRIGHT_FIELD_NUMBER: _ClassVar[int]
    LINKEDENTITY_FIELD_NUMBER: _ClassVar[int]
    ALSOKNOWNAS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    context: _containers.RepeatedCompositeFieldContainer[_types_pb2.Context]
    id: str
    controller: _containers.RepeatedScalarFieldContainer[str]
    verificationMethod: _containers.RepeatedCompositeFieldContainer[_types_pb2.VerificationMethod]
    service: _containers.RepeatedCompositeFieldContainer[_types_pb2.Service]
    authentication: _containers.RepeatedScalarFieldContainer[str]
    assertionMethod: _containers.RepeatedScalarFieldContainer[str]
    keyAgreement: _containers.RepeatedScalarFieldContainer[str]
    capabilityInvocation: _containers.RepeatedScalarFieldContainer[str]
    capabilityDelegation: _containers.RepeatedScalarFieldContainer[str]
    linkedResource: _containers.RepeatedCompositeFieldContainer[_types_pb2.LinkedResource]
    linkedClaim: _containers.RepeatedCompositeFieldContainer[_types_pb2.LinkedClaim]
    accordedRight: _containers.RepeatedCompositeFieldContainer[_types_pb2.AccordedRight]
    linkedEntity: _containers.RepeatedCompositeFieldContainer[_types_pb2.LinkedEntity]
    alsoKnownAs: str
    metadata: _types_pb2.IidMetadata
    def __init__(self, context: _Optional[_Iterable[_Union[_types_pb2.Context, _Mapping]]] = ..., id: _Optional[str] = ..., controller: _Optional[_Iterable[str]] = ..., verificationMethod: _Optional[_Iterable[_Union[_types_pb2.VerificationMethod, _Mapping]]] = ..., service: _Optional[_Iterable[_Union[_types_pb2.Service, _Mapping]]] = ..., authentication: _Optional[_Iterable[str]] = ..., assertionMethod: _Optional[_Iterable[str]] = ..., keyAgreement: _Optional[_Iterable[str]] = ..., capabilityInvocation: _Optional[_Iterable[str]] = ..., capabilityDelegation: _Optional[_Iterable[str]] = ..., linkedResource: _Optional[_Iterable[_Union[_types_pb2.LinkedResource, _Mapping]]] = ..., linkedClaim: _Optional[_Iterable[_Union[_types_pb2.LinkedClaim, _Mapping]]] = ..., accordedRight: _Optional[_Iterable[_Union[_types_pb2.AccordedRight, _Mapping]]] = ..., linkedEntity: _Optional[_Iterable[_Union[_types_pb2.LinkedEntity, _Mapping]]] = ..., alsoKnownAs: _Optional[str] = ..., metadata: _Optional[_Union[_types_pb2.IidMetadata, _Mapping]] = ...) -> None: ...
