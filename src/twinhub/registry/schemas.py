"""Request and response bodies of the registry API, as OpenAPI shows them.

Bodies are checked here for shape and type only; the registry's rules (protocol templates,
relationship kinds, DIDs) are checked by the services, which report every problem at once.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from twinhub.registry.params import Moment

INT64 = (-(2**63), 2**63 - 1)


def storable_problem(value: Any, path: str) -> str | None:
    """Why a JSON value cannot be stored faithfully (in the ledger's canonical JSON and in
    PostgreSQL), or None: numbers must be finite and integers fit 64 bits; no NUL anywhere,
    and no lone UTF-16 surrogate (JSON's "\\ud800" escape), which is not text."""
    if isinstance(value, str):
        if "\x00" in value:
            return f"{path}: NUL characters cannot be stored"
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return f"{path}: lone UTF-16 surrogates (\\ud800-\\udfff) are not text"
        return None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return None if INT64[0] <= value <= INT64[1] else f"{path}: integers must fit 64 bits"
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{path}: NaN and Infinity are not numbers"
    if isinstance(value, dict):
        for key, item in value.items():
            problem = storable_problem(key, path) or storable_problem(item, f"{path}.{key}")
            if problem:
                return problem
    if isinstance(value, list):
        for index, item in enumerate(value):
            problem = storable_problem(item, f"{path}[{index}]")
            if problem:
                return problem
    return None


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _storable(self) -> Self:
        for name, value in self.__dict__.items():
            if isinstance(value, BaseModel):
                continue  # checked by its own validator
            field = type(self).model_fields[name]
            problem = storable_problem(value, field.alias or name)
            if problem:
                raise ValueError(problem)
        return self


def as_utc(value: datetime | None) -> datetime | None:
    """ISO timestamps without a zone are read as UTC."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


class ServiceIn(Body):
    id: str = Field(examples=["#ingest"], description="Fragment identifier, '#<name>'.")
    type: str = Field(examples=["DataIngestion"])
    endpoint: str = Field(examples=["https://ingest.example.org/v1"])


class CredentialIn(Body):
    type: str = Field(examples=["Certification"])
    issuer: str = Field(examples=["did:ixo:org/certifier"])


class ProtocolIn(Body):
    type: Literal["Protocol"] = Field(description='Fixed kind marker "Protocol".')
    id: str | None = Field(
        None, description="Slug of the new DID did:ixo:protocol/<id>; from the name if absent."
    )
    name: str | None = Field(None, examples=["Clean cooking stove"])
    entityType: str | None = Field(None, description="Entity type it governs, e.g. Device.")
    twinClass: Literal["physical", "cognitive", "system", "oracle"] | None = None
    properties: dict[str, str] = Field(
        default_factory=dict,
        description="Property name to type: string, number, integer, boolean, object, "
        "array or date-time.",
        examples=[{"serialNumber": "string", "efficiency": "number"}],
    )
    required: list[str] = Field(default_factory=list, description="Properties that must be set.")
    relationships: dict[str, str] = Field(
        default_factory=dict,
        description="Relationship role to the kind of domain that fills it.",
        examples=[{"verifier": "Oracle", "operator": "Organisation"}],
    )
    services: list[ServiceIn] = Field(
        default_factory=list, description="Services every domain of the protocol inherits."
    )
    extends: str | None = Field(None, description="DID of a parent protocol to extend.")
    tokenClass: str | None = Field(
        None,
        description="Credits minted for approved claims under this protocol, e.g. CARBON.",
        examples=["CARBON"],
    )
    telemetry: dict[str, Any] | None = Field(
        None,
        description="What devices of this protocol report: {'fields': {name: {type, unit, "
        "min, max, enum, cumulative}}}; at most one numeric field is the cumulative meter.",
    )
    constraints: dict[str, Any] | None = Field(
        None,
        description="Rules on properties' values beside their type: property name to "
        "{minimum, maximum} (number, integer), {enum} (string, number, integer) or "
        "{minLength, maxLength} (string). Checked at every write of a domain or claim.",
        examples=[{"mealsCooked": {"minimum": 0, "maximum": 1000}}],
    )
    methodology: dict[str, Any] | None = Field(
        None,
        description="How approved claims' credits are computed: {id, version, title, "
        "reference, parameters: {name: {value, unit, source}}, inputs, formulas: [{name, "
        "expression (CEL), unit}], result}; refused with 422 naming the faulty formula.",
    )


class RelationshipIn(Body):
    type: str = Field(examples=["implements"], description="Relationship role.")
    target: str = Field(description="DID of the related domain.")


class DomainIn(Body):
    type: str = Field(examples=["Organisation"], description="Entity type.")
    class_: str | None = Field(
        None, alias="class", description="DID of the protocol that defines the entity class."
    )
    protocol: str | None = Field(None, description="The same as `class`; either may be sent.")
    id: str | None = Field(None, description="Slug of the new DID did:ixo:entity/<id>.")
    metadata: dict[str, Any] = Field(default_factory=dict, examples=[{"name": "Jiko Co-op"}])
    properties: dict[str, Any] = Field(default_factory=dict)
    controller: list[str] | str | None = Field(
        None, description="Controller DIDs; the caller's DID when absent."
    )
    services: list[ServiceIn] = Field(default_factory=list)
    verifiableCredential: list[CredentialIn] = Field(default_factory=list)
    relationships: dict[str, str | list[str]] | list[RelationshipIn] = Field(
        default_factory=dict,
        description="Relationship role to a domain DID (or several); or, as reads return "
        "them, a list of {type, target}.",
        examples=[{"implementedBy": "did:ixo:entity/abc"}],
    )
    validFrom: Moment | None = None
    validUntil: Moment | None = None

    @field_validator("validFrom", "validUntil")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return as_utc(value)

    def relationships_by_role(self) -> dict[str, list[str]]:
        """The relationships as role -> DIDs, whichever of the two shapes was sent: what a
        read returns (a list of {type, target}) can be written back as it is."""
        if isinstance(self.relationships, list):
            grouped: dict[str, list[str]] = {}
            for edge in self.relationships:
                grouped.setdefault(edge.type, []).append(edge.target)
            return grouped
        return {
            role: [dids] if isinstance(dids, str) else dids
            for role, dids in self.relationships.items()
        }


class EntityIn(DomainIn):
    protocol: str = Field(description="DID of the protocol used as template.")  # type: ignore[assignment]


class DomainPatchIn(Body):
    """JSON merge patch: absent fields stay; in metadata and properties, null removes a key."""

    metadata: dict[str, Any] | None = None
    properties: dict[str, Any] | None = None
    controller: list[str] | None = None
    services: list[ServiceIn] | None = None
    verifiableCredential: list[CredentialIn] | None = None
    validFrom: Moment | None = None
    validUntil: Moment | None = None

    @field_validator("validFrom", "validUntil")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return as_utc(value)


class ServiceOut(BaseModel):
    id: str
    type: str
    endpoint: str


class RelationshipOut(BaseModel):
    type: str
    target: str


class DomainOut(BaseModel):
    did: str
    type: str
    class_: str = Field(alias="class")
    protocol: str
    twinClass: Literal["physical", "cognitive", "system", "oracle"]
    controller: list[str]
    services: list[ServiceOut]
    inheritedServices: list[str]
    verifiableCredential: list[CredentialIn]
    metadata: dict[str, Any]
    properties: dict[str, Any]
    relationships: list[RelationshipOut]
    membershipGroup: str | None
    parent: str | None
    validFrom: str | None
    validUntil: str | None
    status: Literal["active", "deactivated"]
    verified: bool
    version: int
    createdAt: str
    updatedAt: str


class DomainPage(BaseModel):
    items: list[DomainOut]
    nextCursor: str | None
    total: int | None = None


class ProtocolOut(BaseModel):
    did: str
    type: Literal["Protocol"]
    name: str
    entityType: str | None
    twinClass: str | None
    extends: str | None
    properties: dict[str, str]
    required: list[str]
    relationships: dict[str, str]
    services: list[ServiceOut]
    tokenClass: str | None = None
    telemetry: dict[str, Any] | None = None
    constraints: dict[str, Any] | None = None
    methodology: dict[str, Any] | None = None
    effective: dict[str, Any] = Field(description="The template with everything inherited.")
    version: int
    createdAt: str
    updatedAt: str


class ProtocolPage(BaseModel):
    items: list[ProtocolOut]
    nextCursor: str | None
    total: int | None = None


class HistoryEntry(BaseModel):
    height: int
    txHash: str
    kind: str
    actor: str
    timestamp: str
    version: int | None
    record: dict[str, Any]


class HistoryPage(BaseModel):
    items: list[HistoryEntry]
    nextCursor: str | None


class GraphOut(BaseModel):
    root: str
    depth: int
    nodes: list[dict[str, Any]]
    edges: list[dict[str, str]]


class ErrorDetail(BaseModel):
    field: str
    error: str


class ErrorBody(BaseModel):
    code: str
    message: str
    details: list[ErrorDetail]


class ErrorOut(BaseModel):
    error: ErrorBody
