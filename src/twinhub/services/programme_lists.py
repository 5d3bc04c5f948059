"""The programme's long lists as pages (services.listing): stoves, households, claims,
support problems, events, webhooks and API keys, each searched, filtered and sorted by the
database, so that a page of 25 costs the same at 30 stoves as at 30,000.

A stove's region and village are its `properties.location.region` and `.village` (the
Device protocol's `location` object); it is online when its newest reading is younger than
TELEMETRY_OFFLINE_AFTER_SECONDS (the telemetry store's rule, the same setting).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Select, case, false, func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import (
    ApiKey,
    Claim,
    ClaimCollection,
    Customer,
    Domain,
    Event,
    Relationship,
    StoveProblem,
    TelemetryDevice,
    WebhookSubscription,
)
from twinhub.db.visibility import Viewer, domain_visible, event_visible
from twinhub.events.types import CATALOGUE
from twinhub.services.claims import credits_state
from twinhub.services.listing import ListPage, ListQuery, choose, fetch_page, matching

YES_NO = ("yes", "no")
STOVE_STATUSES = ("active", "deactivated")
CLAIM_STATUSES = ("open", "pending", "flagged", "approved", "rejected", "disputed", "invalidated")
PROBLEM_STATUSES = ("open", "resolved")
KEY_STATES = ("active", "revoked")
PROJECT_EDGE = "project"
FACETS = 60  # region or village choices offered at most
PLACES_SECONDS = 60.0  # how long the filters' choices of regions and villages are kept


def region_of(column: Any) -> Any:
    return column[("location", "region")].as_string()


def village_of(column: Any) -> Any:
    return column[("location", "village")].as_string()


def _linked_to(project: str) -> Select[Any]:
    """The twins with a `project` relationship to `project`."""
    return select(Relationship.source_did).where(
        Relationship.target_did == project, Relationship.type == PROJECT_EDGE
    )


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value else None


def mask_phone(phone: str) -> str:
    """Enough of a phone number to tell households apart on screen, not to dial it."""
    return phone[:5] + "•" * max(len(phone) - 8, 0) + phone[-3:] if len(phone) > 8 else phone


STOVE_ROWS = select(
    Domain.did,
    Domain.meta,
    Domain.status,
    Domain.verified,
    Domain.owner_customer_id,
    Domain.created_at,
    region_of(Domain.properties).label("region"),
    village_of(Domain.properties).label("village"),
)
HOUSEHOLD_ROWS = select(
    Customer.id,
    Customer.customer_id,
    Customer.full_name,
    Customer.phone_number,
    Customer.locked_at,
    Customer.created_at,
)


class ProgrammeLists:
    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], offline_after_seconds: float
    ) -> None:
        self._sessions = sessions
        self._offline_after = timedelta(seconds=offline_after_seconds)
        self._places: dict[str | None, tuple[float, dict[str, list[str]]]] = {}

    # -- stoves ------------------------------------------------------------------------------
    def _stove_query(self, asked: ListQuery, project: str | None) -> Select[Any]:
        """The filtered stoves; joined to their devices' state only when a filter or the
        sort reads it (the count of 30,000 stoves then scans one table, not two)."""
        since = datetime.now(UTC) - self._offline_after
        last = TelemetryDevice.last_time
        query = STOVE_ROWS.where(Domain.twin_class == "physical")
        online = choose(asked.filter("online"), YES_NO, "online")
        if online or asked.sort == "seen":
            query = query.outerjoin(TelemetryDevice, TelemetryDevice.did == Domain.did)
        if online == "yes":
            query = query.where(last >= since)
        elif online == "no":
            query = query.where((last.is_(None)) | (last < since))
        if project:
            query = query.where(Domain.did.in_(_linked_to(project)))
        status = choose(asked.filter("status"), STOVE_STATUSES, "status")
        if status:
            query = query.where(Domain.status == status)
        verified = choose(asked.filter("verified"), YES_NO, "verified")
        if verified:
            query = query.where(Domain.verified.is_(verified == "yes"))
        if asked.filter("region"):
            query = query.where(region_of(Domain.properties) == asked.filter("region"))
        if asked.filter("village"):
            query = query.where(village_of(Domain.properties) == asked.filter("village"))
        if asked.search:
            query = query.where(
                matching(
                    asked.search,
                    Domain.did,
                    Domain.meta["name"].as_string(),
                    Domain.serial,
                    Domain.owner_customer_id,
                )
            )
        return query

    async def stoves(
        self, asked: ListQuery, project: str | None = None
    ) -> ListPage[dict[str, Any]]:
        """Physical twins (of `project` when named), with where they are and whether they
        report."""
        query = self._stove_query(asked, project)
        sorts = {
            "registered": Domain.seq,
            "name": Domain.meta["name"].as_string(),
            "region": [region_of(Domain.properties), village_of(Domain.properties)],
            "seen": TelemetryDevice.last_time,
        }
        since = datetime.now(UTC) - self._offline_after
        async with self._sessions() as session:
            # The page's rows joined to their devices: the "seen" sort orders them too.
            rows = STOVE_ROWS.outerjoin(TelemetryDevice, TelemetryDevice.did == Domain.did)
            page = await fetch_page(
                session, query, asked, sorts, "registered", Domain.seq, rows=rows
            )
            dids = [row.did for row in page.items]
            seen = dict(
                (
                    await session.execute(
                        select(TelemetryDevice.did, TelemetryDevice.last_time).where(
                            TelemetryDevice.did.in_(dids)
                        )
                    )
                ).all()
            )
        items = []
        for row in page.items:
            last = seen.get(row.did)
            items.append(
                {
                    "did": row.did,
                    "name": (row.meta or {}).get("name") or row.did,
                    "region": row.region,
                    "village": row.village,
                    "status": row.status,
                    "verified": row.verified,
                    "owner": row.owner_customer_id,
                    "lastSeen": _iso(last),
                    "online": last is not None and _aware(last) >= since,
                    "registered": _iso(row.created_at),
                }
            )
        return ListPage(items, page.total, page.page, page.per_page)

    async def places(self, project: str | None = None) -> dict[str, list[str]]:
        """The regions and villages stoves are in, for the filters' choices: read from every
        stove (a scan of the table), so kept for PLACES_SECONDS; a stove in a new village
        is listed, and found by search, at once, and offered as a choice soon after."""
        kept = self._places.get(project)
        if kept is not None and time.monotonic() - kept[0] < PLACES_SECONDS:
            return kept[1]
        region, village = region_of(Domain.properties), village_of(Domain.properties)
        query = select(region, village).where(Domain.twin_class == "physical", region.is_not(None))
        if project:
            query = query.where(Domain.did.in_(_linked_to(project)))
        async with self._sessions() as session:
            rows = (await session.execute(query.group_by(region, village))).all()
        found = {
            "regions": sorted({r for r, _ in rows if r})[:FACETS],
            "villages": sorted({v for _, v in rows if v})[: FACETS * 10],
        }
        if len(self._places) > 100:  # one entry per project asked about
            self._places.clear()
        self._places[project] = (time.monotonic(), found)
        return found

    async def incoming(self, did: str, shown: int = 10) -> dict[str, dict[str, Any]]:
        """What points at `did`, by relationship type: how many, and the first `shown`
        (a project's 30,000 stoves are a count and a link, not a page of links)."""
        async with self._sessions() as session:
            counts = await session.execute(
                select(Relationship.type, func.count())
                .where(Relationship.target_did == did)
                .group_by(Relationship.type)
            )
            found: dict[str, dict[str, Any]] = {
                kind: {"count": int(count), "sources": []} for kind, count in counts
            }
            for kind in found:
                sources = await session.scalars(
                    select(Relationship.source_did)
                    .where(Relationship.target_did == did, Relationship.type == kind)
                    .order_by(Relationship.id)
                    .limit(shown)
                )
                found[kind]["sources"] = list(sources)
        return found

    # -- households --------------------------------------------------------------------------
    async def households(self, asked: ListQuery, viewer: Viewer) -> ListPage[dict[str, Any]]:
        """Customers (the households owning stoves), each with its stoves' places: for the
        viewers that see everything only, as `GET /v1/customers` (db/visibility.py)."""
        query = HOUSEHOLD_ROWS if viewer.everything else HOUSEHOLD_ROWS.where(false())
        if asked.filter("region"):
            query = query.where(
                Customer.customer_id.in_(
                    select(Domain.owner_customer_id).where(
                        Domain.owner_customer_id.is_not(None),
                        region_of(Domain.properties) == asked.filter("region"),
                    )
                )
            )
        locked = choose(asked.filter("locked"), YES_NO, "locked")
        if locked:
            query = query.where(
                Customer.locked_at.is_not(None) if locked == "yes" else Customer.locked_at.is_(None)
            )
        if asked.search:
            query = query.where(
                matching(
                    asked.search, Customer.full_name, Customer.customer_id, Customer.phone_number
                )
            )
        sorts = {"joined": Customer.id, "name": Customer.full_name}
        async with self._sessions() as session:
            page = await fetch_page(
                session, query, asked, sorts, "joined", Customer.id, rows=HOUSEHOLD_ROWS
            )
            owners = [row.customer_id for row in page.items]
            stoves: dict[str, list[dict[str, Any]]] = {}
            if owners:
                found = await session.execute(
                    select(
                        Domain.owner_customer_id,
                        Domain.did,
                        Domain.meta,
                        region_of(Domain.properties),
                        village_of(Domain.properties),
                    ).where(Domain.owner_customer_id.in_(owners))
                )
                for owner, did, meta, region, village in found:
                    stoves.setdefault(owner, []).append(
                        {
                            "did": did,
                            "name": (meta or {}).get("name") or did,
                            "region": region,
                            "village": village,
                        }
                    )
        items = [
            {
                "customerId": row.customer_id,
                "name": row.full_name,
                "phone": mask_phone(row.phone_number),
                "locked": row.locked_at is not None,
                "joined": _iso(row.created_at),
                "stoves": stoves.get(row.customer_id, []),
            }
            for row in page.items
        ]
        return ListPage(items, page.total, page.page, page.per_page)

    # -- claims ------------------------------------------------------------------------------
    async def claims(self, asked: ListQuery) -> ListPage[dict[str, Any]]:
        """Claims, by default the open ones (flagged first, then pending, oldest first)."""
        status = choose(asked.filter("status"), CLAIM_STATUSES, "status")
        query = select(Claim, ClaimCollection.project_did).join(
            ClaimCollection, ClaimCollection.id == Claim.collection_id
        )
        if status == "open":
            query = query.where(Claim.status.in_(("flagged", "pending")))
        elif status:
            query = query.where(Claim.status == status)
        if asked.filter("project"):
            query = query.where(ClaimCollection.project_did == asked.filter("project"))
        if asked.search:
            query = query.where(matching(asked.search, Claim.id, Claim.asset_did, Claim.agent))
        queue = case((Claim.status == "flagged", 0), (Claim.status == "pending", 1), else_=2)
        sorts = {"queue": [queue], "submitted": Claim.seq, "status": Claim.status}
        async with self._sessions() as session:
            page = await fetch_page(session, query, asked, sorts, "queue", Claim.seq)
        items = [
            {
                "id": claim.id,
                "status": claim.status,
                "asset": claim.asset_did,
                "agent": claim.agent,
                "project": project,
                "collection": claim.collection_id,
                "period": claim.period,
                "data": claim.data,
                "reason": claim.reason,
                "amount": claim.amount,
                "credits": credits_state(
                    claim.status, claim.amount, claim.period_id, claim.issued_at
                ),
                "submittedAt": _iso(claim.submitted_at),
            }
            for claim, project in page.items
        ]
        return ListPage(items, page.total, page.page, page.per_page)

    # -- support problems --------------------------------------------------------------------
    async def problems(self, asked: ListQuery, viewer: Viewer) -> ListPage[dict[str, Any]]:
        """Problems households reported about stoves `viewer` may see, by default the open
        ones, newest first."""
        query = select(StoveProblem).where(domain_visible(StoveProblem.stove_did, viewer))
        status = choose(asked.filter("status"), PROBLEM_STATUSES, "status")
        if status:
            query = query.where(StoveProblem.status == status)
        if asked.filter("kind"):
            query = query.where(StoveProblem.kind == asked.filter("kind"))
        if asked.search:
            query = query.where(
                matching(
                    asked.search,
                    StoveProblem.reference,
                    StoveProblem.stove_did,
                    StoveProblem.customer_id,
                )
            )
        sorts = {"reported": StoveProblem.id, "kind": StoveProblem.kind}
        async with self._sessions() as session:
            page = await fetch_page(session, query, asked, sorts, "reported", StoveProblem.id)
        items = [
            {
                "reference": p.reference,
                "stove": p.stove_did,
                "customer": p.customer_id,
                "kind": p.kind,
                "status": p.status,
                "reportedAt": _iso(p.reported_at),
                "resolvedAt": _iso(p.closed_at),
                "resolvedBy": p.resolved_by,
                "note": p.resolution_note,
            }
            for (p,) in page.items
        ]
        return ListPage(items, page.total, page.page, page.per_page)

    # -- events ------------------------------------------------------------------------------
    async def events(self, asked: ListQuery, viewer: Viewer) -> ListPage[dict[str, Any]]:
        """Committed events (numbered by the sequencer) `viewer` may read, newest first by
        default."""
        query = select(
            Event.event_id,
            Event.position,
            Event.type,
            Event.subject,
            Event.actor,
            Event.occurred_at,
        ).where(Event.position.is_not(None), event_visible(viewer))
        kind = choose(asked.filter("type"), sorted(CATALOGUE), "type")
        if kind:
            query = query.where(Event.type == kind)
        if asked.search:
            query = query.where(matching(asked.search, Event.subject, Event.event_id))
        sorts = {"position": Event.position}
        async with self._sessions() as session:
            page = await fetch_page(session, query, asked, sorts, "position", Event.position)
        items = [
            {
                "id": row.event_id,
                "position": row.position,
                "type": row.type,
                "subject": row.subject,
                "actor": row.actor,
                "occurredAt": _iso(row.occurred_at),
            }
            for row in page.items
        ]
        return ListPage(items, page.total, page.page, page.per_page)

    # -- webhooks ----------------------------------------------------------------------------
    async def webhooks(self, asked: ListQuery) -> ListPage[dict[str, Any]]:
        """Webhook subscriptions (the deleted ones too, when asked)."""
        query = select(WebhookSubscription)
        state = choose(asked.filter("state"), ("active", "deleted"), "state")
        if state == "active":
            query = query.where(WebhookSubscription.deleted_at.is_(None))
        elif state == "deleted":
            query = query.where(WebhookSubscription.deleted_at.is_not(None))
        if asked.search:
            query = query.where(
                matching(
                    asked.search,
                    WebhookSubscription.url,
                    WebhookSubscription.description,
                    WebhookSubscription.webhook_id,
                )
            )
        sorts = {"created": WebhookSubscription.id, "url": WebhookSubscription.url}
        async with self._sessions() as session:
            page = await fetch_page(session, query, asked, sorts, "created", WebhookSubscription.id)
        items = [
            {
                "id": w.webhook_id,
                "url": w.url,
                "events": w.event_types,
                "description": w.description,
                "createdBy": w.created_by,
                "createdAt": _iso(w.created_at),
                "deletedAt": _iso(w.deleted_at),
            }
            for (w,) in page.items
        ]
        return ListPage(items, page.total, page.page, page.per_page)

    # -- API keys ----------------------------------------------------------------------------
    async def api_keys(self, asked: ListQuery) -> ListPage[dict[str, Any]]:
        """API keys (never their secrets), active ones by default."""
        query = select(ApiKey)
        state = choose(asked.filter("state"), KEY_STATES, "state")
        if state == "active":
            query = query.where(ApiKey.revoked_at.is_(None))
        elif state == "revoked":
            query = query.where(ApiKey.revoked_at.is_not(None))
        if asked.search:
            query = query.where(
                matching(asked.search, ApiKey.principal, ApiKey.label, ApiKey.key_id)
            )
        sorts = {"created": ApiKey.id, "principal": ApiKey.principal}
        async with self._sessions() as session:
            page = await fetch_page(session, query, asked, sorts, "created", ApiKey.id)
        items = [
            {
                "keyId": k.key_id,
                "principal": k.principal,
                "roles": k.roles,
                "label": k.label,
                "createdAt": _iso(k.created_at),
                "revokedAt": _iso(k.revoked_at),
                "state": "revoked" if k.revoked_at else "active",
            }
            for (k,) in page.items
        ]
        return ListPage(items, page.total, page.page, page.per_page)


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)
