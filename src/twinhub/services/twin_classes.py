"""The seed's four canonical twin classes, derived from a domain's protocol and type.

A protocol may name its class outright; otherwise the entity type decides, and a type
nobody listed is a twin system (it describes relations between real-world entities).
"""

from __future__ import annotations

PHYSICAL, COGNITIVE, SYSTEM, ORACLE = "physical", "cognitive", "system", "oracle"
TWIN_CLASSES = (PHYSICAL, COGNITIVE, SYSTEM, ORACLE)

_BY_TYPE = {
    **dict.fromkeys(
        ("device", "asset", "stove", "sensor", "monitor", "meter", "inventory", "vehicle"),
        PHYSICAL,
    ),
    **dict.fromkeys(
        (
            "organisation",
            "organization",
            "project",
            "funder",
            "agent",
            "group",
            "dao",
            "person",
            "investor",
            "company",
            "cooperative",
        ),
        COGNITIVE,
    ),
    **dict.fromkeys(("oracle", "evaluator", "verifier"), ORACLE),
}


def twin_class(entity_type: str, protocol_class: str | None) -> str:
    return protocol_class or _BY_TYPE.get(entity_type.strip().lower(), SYSTEM)


def same_kind(entity_type: str, kind: str) -> bool:
    """Whether a domain of `entity_type` fills a role declared for `kind` ('Oracle', ...)."""
    normal = {"organization": "organisation"}
    a, b = entity_type.strip().lower(), kind.strip().lower()
    return normal.get(a, a) == normal.get(b, b)
