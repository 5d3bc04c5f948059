"""Who may see what a domain's private data says: the one rule every read applies.

Public registry facts (domain records, protocols, claims as the ledger shows them) are for
every reader. What a domain's private side says (its events, the households of its stoves,
their problem reports, its telemetry, the webhook deliveries about it) is for:

- a principal that controls the domain (its API keys: an organisation's keys share its DID);
- a party to it: a principal controlling a domain this one names, as its parent or as the
  target of one of its relationships (a stove's project, its operator organisation). Only
  the domain's controllers choose what it names, so nobody makes themselves a party;
- the registry role and admins, who see everything.

An event is about the DID in its `subject`: a domain, or a credit holder. A viewer sees the
events about domains it may see, about itself (the credits it holds), about its own webhooks,
and the public ones (protocols). Events about a household's DID (the credits it holds) and
customers' records are for who sees everything: any writer may name any existing customer as
its stove's household, so owning a stove a household is named on proves nothing.

Each rule is a SQL condition, so reads filter in the database and pages stay whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Select, literal, or_, select, true, union
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import Domain, DomainController, Event, Relationship, WebhookSubscription
from twinhub.kernel.principals import Principal

SEES_EVERYTHING = frozenset({"admin", "registry"})
# Events that say nothing private: what the registry publishes anyway.
PUBLIC_EVENT_TYPES = ("protocol.created",)


@dataclass(frozen=True)
class Viewer:
    """Whose eyes a read is for: a principal's DID, and whether it sees everything."""

    did: str
    everything: bool


# The platform's own reads (operators' checks, tests): everything.
EVERYTHING = Viewer("", everything=True)


def viewer_of(principal: Principal) -> Viewer:
    return Viewer(principal.did, bool(principal.roles & SEES_EVERYTHING))


def visible_domains(viewer: Viewer) -> Select[Any]:
    """The DIDs of the domains whose private data `viewer` may see (not for everything)."""
    controlled = select(DomainController.domain_did).where(
        DomainController.controller == viewer.did
    )
    return select(
        union(
            controlled,
            select(Domain.did).where(Domain.parent_did.in_(controlled)),
            select(Relationship.source_did).where(Relationship.target_did.in_(controlled)),
        ).subquery()
    )


def domain_visible(column: Any, viewer: Viewer) -> ColumnElement[bool]:
    """`column` (a domain DID) names a domain whose private data `viewer` may see."""
    if viewer.everything:
        return true()
    return column.in_(visible_domains(viewer))


def event_visible(viewer: Viewer) -> ColumnElement[bool]:
    """An events row `viewer` may read (and have delivered to its webhooks)."""
    if viewer.everything:
        return true()
    own_webhooks = select(WebhookSubscription.webhook_id).where(
        WebhookSubscription.created_by == viewer.did
    )
    return or_(
        Event.type.in_(PUBLIC_EVENT_TYPES),
        Event.subject == viewer.did,
        Event.subject.in_(visible_domains(viewer)),
        Event.subject.in_(own_webhooks),
    )


async def sees_domain(sessions: async_sessionmaker[AsyncSession], did: str, viewer: Viewer) -> bool:
    """Whether `viewer` may see the private data (telemetry, ...) of the domain `did`."""
    if viewer.everything:
        return True
    async with sessions() as session:
        found = await session.scalar(
            select(literal(True)).where(literal(did).in_(visible_domains(viewer)))
        )
    return found is not None


def owned_webhook(viewer: Viewer) -> ColumnElement[bool]:
    """A webhook subscription `viewer` may read: its own, or any for who sees everything."""
    if viewer.everything:
        return true()
    return WebhookSubscription.created_by == viewer.did
