"""Protocols every twinhub deployment starts with, so the seed's examples work at once.

They cover the domain types of the specification (Organisation, Project, Asset, Device,
Protocol-governed stoves, Oracle, Request) and the membership group every organisation
gets. Created through the ledger like any other protocol, on start, when missing.
"""

from __future__ import annotations

from twinhub.kernel.errors import Conflict
from twinhub.mrv.builtin import CLEAN_COOKING, builtin_document
from twinhub.mrv.telemetry_schema import STOVE_TELEMETRY
from twinhub.services.protocols import ProtocolService, ProtocolSpec

SYSTEM_ACTOR = "did:ixo:org/twinhub"

# A household cooks a few meals a day and burns a few kg of fuel a day; a report covers at
# most one calendar month (services.claims), so 1000 of either is far above any real month
# and far below a typo's 99,999,999. The USSD menu asks for 1 to 1000 as well.
MAX_PER_PERIOD = 1000
REPORT_TYPES = ["cooking", "fuel", "monitoring-period"]
CHANNELS = ["ussd", "api", "app", "sms", "web"]
CLAIM_CONSTRAINTS: dict[str, dict[str, object]] = {
    "reportType": {"enum": REPORT_TYPES},
    "mealsCooked": {"minimum": 0, "maximum": MAX_PER_PERIOD},
    "fuelKg": {"minimum": 0, "maximum": MAX_PER_PERIOD},
    "fuelType": {"minLength": 1, "maxLength": 64},
    "channel": {"enum": CHANNELS},
}
STOVE_CONSTRAINTS: dict[str, dict[str, object]] = {
    "efficiency": {"minimum": 0, "maximum": 1},  # a fraction of the fuel's energy
    "fuelType": {"minLength": 1, "maxLength": 64},
}

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
        constraints={"serialNumber": {"minLength": 1, "maxLength": 64}},
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
            "householdSize": "integer",
            # The model the project's design document lists it under (its case and tested
            # figures), and its meter's record (mrv/meter.py): the methodology reads both.
            "stoveModel": "string",
            "meter": "object",
            # The survey answer that confirmed householdSize (services.surveys writes both).
            "householdSizeConfirmation": "object",
            # Where the stove cooks (optional): {lat, lon, region?}, checked as a place, for
            # the console's map.
            "location": "geo-point",
        },
        relationships={"verifier": "Oracle", "operator": "Organisation"},
        telemetry=STOVE_TELEMETRY,
        constraints=STOVE_CONSTRAINTS,
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
        constraints=CLAIM_CONSTRAINTS,
        # Approved claims' credits follow from this, computed from the stove's telemetry.
        methodology=builtin_document(CLEAN_COOKING),
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
