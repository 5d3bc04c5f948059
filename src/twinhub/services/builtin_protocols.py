"""Protocols every twinhub deployment starts with, so the seed's examples work at once.

They cover the domain types of the specification (Organisation, Project, Asset, Device,
Protocol-governed stoves, Oracle, Request) and the membership group every organisation
gets. Created through the ledger like any other protocol, on start, when missing.
"""

from __future__ import annotations

from twinhub.services.errors import Conflict
from twinhub.services.protocols import ProtocolService, ProtocolSpec
from twinhub.telemetry.schema import STOVE_TELEMETRY

SYSTEM_ACTOR = "did:ixo:org/twinhub"

BUILTIN: list[ProtocolSpec] = [
    ProtocolSpec(
        name="Organisation",
        slug="organisation",
        entity_type="Organisation",
        twin_class="cognitive",
        properties={"legalName": "string", "country": "string", "website": "string"},
        relationships={"implements": "Project"},
    ),
    ProtocolSpec(
        name="Membership group",
        slug="membership-group",
        entity_type="Group",
        twin_class="cognitive",
        properties={"description": "string"},
    ),
    ProtocolSpec(
        name="Project",
        slug="project",
        entity_type="Project",
        twin_class="cognitive",
        properties={
            "country": "string",
            "methodology": "string",
            "startDate": "date-time",
            "description": "string",
        },
        relationships={"implementedBy": "Organisation", "verifier": "Oracle"},
    ),
    ProtocolSpec(
        name="Asset",
        slug="asset",
        twin_class="physical",
        properties={"serialNumber": "string", "model": "string", "location": "object"},
        relationships={"project": "Project", "owner": "Organisation"},
    ),
    ProtocolSpec(
        name="Device",
        slug="device",
        entity_type="Device",
        twin_class="physical",
        properties={"serialNumber": "string", "model": "string", "location": "object"},
        relationships={"project": "Project", "operator": "Organisation"},
    ),
    ProtocolSpec(
        name="Clean cooking stove",
        slug="clean-cooking",
        entity_type="Device",
        twin_class="physical",
        extends="did:ixo:protocol/device",
        properties={
            "fuelType": "string",
            "installedAt": "date-time",
            "efficiency": "number",
            "ownerCustomerId": "string",
        },
        relationships={"verifier": "Oracle", "operator": "Organisation"},
        telemetry=STOVE_TELEMETRY,
    ),
    ProtocolSpec(
        name="Oracle",
        slug="oracle",
        entity_type="Oracle",
        twin_class="oracle",
        properties={"model": "string", "evaluates": "array"},
        relationships={"operator": "Organisation"},
    ),
    ProtocolSpec(
        name="Clean cooking claim",
        slug="clean-cooking-claim",
        entity_type="Claim",
        twin_class="system",
        properties={
            "reportType": "string",
            "mealsCooked": "integer",
            "fuelKg": "number",
            "fuelType": "string",
            "periodStart": "date-time",
            "periodEnd": "date-time",
            "channel": "string",
            "evidence": "object",
        },
        required=["reportType"],
        relationships={"verifier": "Oracle"},
        token_class="CARBON",  # noqa: S106 (a credit class, not a secret)
    ),
    ProtocolSpec(
        name="Request",
        slug="request",
        entity_type="Request",
        twin_class="system",
        properties={"description": "string", "dueDate": "date-time"},
        relationships={"requestedBy": "Organisation", "project": "Project"},
    ),
]


async def ensure_builtin_protocols(protocols: ProtocolService) -> int:
    """Create the missing ones (parents first); returns how many were created."""
    created = 0
    for spec in BUILTIN:
        did = f"did:ixo:protocol/{spec.slug}"
        if await protocols.exists(did):
            continue
        try:
            await protocols.create(spec, SYSTEM_ACTOR)
            created += 1
        except Conflict:
            pass  # another process created it a moment ago
    return created
