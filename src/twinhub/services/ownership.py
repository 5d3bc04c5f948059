"""Which household a stove belongs to: its `ownerCustomerId` property, and nothing else.

Rules that live here (the property itself is checked by the domain service):
- a stove belongs to at most one household, the customer its `ownerCustomerId` names; the
  credits of its approved claims are minted to that customer's DID (at the issuance that
  carries them: services.claim_issuance), and the customer sees
  it (and reports on it) over USSD;
- assigning a stove that already has a household is a move; a move may name the household
  it expects to take the stove from, and is refused (Conflict) when another holds it;
- customer DIDs are dropped from a stove's controllers when it is assigned (a household
  owns a stove, it does not administer its record), unless nobody else would remain;
- before migration 0011 a stove was a household's when the customer's DID was its FIRST
  controller; `adopt_legacy_owners` turns each such stove into one with `ownerCustomerId`,
  through the ledger, once, when the platform starts.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import Customer, Domain, DomainController
from twinhub.kernel.errors import Conflict, Invalid, NotFound, StaleVersion
from twinhub.kernel.identifiers import customer_did
from twinhub.kernel.principals import Principal
from twinhub.logging import get_logger
from twinhub.services.customer_ids import is_valid_customer_id
from twinhub.services.domains import (
    ACTIVE,
    OWNER_PROPERTY,
    DomainFilter,
    DomainPatch,
    DomainService,
    owner_of,
)
from twinhub.services.twin_classes import same_kind

log = get_logger(__name__)
CUSTOMER_DID_PREFIX = customer_did("")
_SCAN = 200


class OwnerMismatch(Conflict):
    """A move named the household it expected to take the stove from, and another has it."""

    code = "owner_mismatch"


async def stove_owner(domains: DomainService, stove: str) -> str | None:
    """The customer ID of the household the stove belongs to, or None (NotFound: no such
    domain)."""
    return owner_of((await domains.get(stove))["properties"])


async def stoves_of_customer(domains: DomainService, customer_id: str) -> list[dict[str, Any]]:
    """Every stove (Device domain) of the household, oldest first, as resolved records."""
    records: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page = await domains.list(DomainFilter(owner=customer_id), cursor, _SCAN)
        records += [r for r in page.items if same_kind(r["type"], "Device")]
        cursor = page.next_cursor
        if cursor is None:
            return records


def _without_customers(controller: list[str]) -> list[str] | None:
    """The controllers without customer DIDs, or None when nothing would change (or nobody
    would remain)."""
    kept = [c for c in controller if not c.startswith(CUSTOMER_DID_PREFIX)]
    return kept if kept and len(kept) != len(controller) else None


async def assign_stove(
    domains: DomainService,
    stove: str,
    customer_id: str | None,
    actor: Principal,
    expected_owner: str | None = None,
    free_only: bool = False,
) -> dict[str, Any]:
    """Give the stove to the household `customer_id` (None: to no household); the new
    record. With `expected_owner`, only if that household holds it now (a move); with
    `free_only`, only if no other household holds it (an assignment that moves nothing)."""
    record = await domains.get(stove)
    if not same_kind(record["type"], "Device"):
        raise Invalid(f"{stove} is a {record['type']}, not a stove (Device).")
    current = owner_of(record["properties"])
    held = f"household {current}" if current else "no household"
    if expected_owner is not None and current != expected_owner:
        raise OwnerMismatch(f"{stove} belongs to {held}, not to {expected_owner}.")
    if free_only and current not in (None, customer_id):
        raise OwnerMismatch(
            f"{stove} belongs to {held}; name it as the household to move the stove from."
        )
    if current == customer_id:
        return record
    patch = DomainPatch(properties={OWNER_PROPERTY: customer_id})
    if customer_id is not None:
        patch.controller = _without_customers(record["controller"])
    # The version read above: a concurrent change in between is refused, not overwritten.
    return await domains.update(stove, patch, actor, record["version"])


async def adopt_legacy_owners(
    sessions: async_sessionmaker[AsyncSession], domains: DomainService, actor: Principal
) -> int:
    """Stoves whose first controller is an existing customer's DID and that name no owner
    get `ownerCustomerId` (the one way since 0011); how many were adopted. Idempotent, so
    every process may run it at start."""
    async with sessions() as session:
        candidates = list(
            await session.execute(
                select(Domain.did, Domain.controller, Domain.type)
                .where(
                    Domain.owner_customer_id.is_(None),
                    Domain.status == ACTIVE,
                    Domain.did.in_(
                        select(DomainController.domain_did).where(
                            DomainController.controller.startswith(CUSTOMER_DID_PREFIX)
                        )
                    ),
                )
                .order_by(Domain.seq)
            )
        )
        owners = {}
        for did, controller, kind in candidates:
            first = controller[0] if controller else ""
            customer_id = first.removeprefix(CUSTOMER_DID_PREFIX)
            if (
                first.startswith(CUSTOMER_DID_PREFIX)
                and same_kind(kind, "Device")
                and is_valid_customer_id(customer_id)
            ):
                owners[did] = customer_id
        existing = await _existing_customers(session, set(owners.values()))
    adopted = 0
    for did, customer_id in owners.items():
        if customer_id not in existing:
            continue
        try:
            await assign_stove(domains, did, customer_id, actor, expected_owner=None)
        except (Conflict, NotFound, StaleVersion) as error:  # changed meanwhile
            log.info("stove not adopted", stove=did, reason=type(error).__name__)
            continue
        adopted += 1
    if adopted:
        log.info("stoves given ownerCustomerId from their first controller", count=adopted)
    return adopted


async def _existing_customers(session: AsyncSession, ids: set[str]) -> set[str]:
    if not ids:
        return set()
    rows = await session.scalars(select(Customer.customer_id).where(Customer.customer_id.in_(ids)))
    return set(rows)
