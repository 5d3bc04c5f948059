"""What the console draws of a programme at scale: a domain graph with a project's stoves
grouped by state (not one node each), a group's stoves page by page, and the stoves that
have a place, for the map.

Around a project of 30,000 stoves the plain graph (DomainService.graph) returns 30,000
nodes; here the stoves are counted by one GROUP BY and listed only when a group is opened.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, and_, func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.dialects import dialect_of
from twinhub.db.models import Domain, Relationship
from twinhub.kernel.errors import FieldProblem, Invalid, NotFound
from twinhub.services.paging import decode_cursor, encode_cursor
from twinhub.services.protocols import GEO_REGION_MAX

STATES = ("verified", "unverified", "deactivated")
PROJECT_TYPES = {"project"}
ORGANISATION_TYPES = {"organisation", "organization"}
MAX_NEIGHBOURS = 100  # other domains shown around the root
MAX_PROJECTS = 50  # an organisation's projects shown
INLINE_STOVES = 12  # a project with this many stoves or fewer shows each one
MAX_MEMBERS_PAGE = 100
PLACES_SECONDS = 15.0  # how long the map's places of a scope are kept


def state_of(status: str, verified: bool) -> str:
    """A stove's state as the console colours it: verified, unverified or deactivated."""
    if status != "active":
        return "deactivated"
    return "verified" if verified else "unverified"


def _state_condition(state: str) -> Any:
    if state == "deactivated":
        return Domain.status != "active"
    return and_(Domain.status == "active", Domain.verified.is_(state == "verified"))


def _node(row: Domain) -> dict[str, Any]:
    return {
        "did": row.did,
        "type": row.type,
        "twinClass": row.twin_class,
        "name": row.meta.get("name") if isinstance(row.meta, dict) else None,
        "status": row.status,
        "verified": row.verified,
        "state": state_of(row.status, row.verified),
    }


@dataclass(frozen=True)
class Place:
    """A stove with a valid location."""

    did: str
    name: str | None
    state: str
    lat: float
    lon: float
    region: str | None
    household: str | None


class ProgrammeViews:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions
        # The map's places per scope, kept PLACES_SECONDS: at 30,000 stoves reading them
        # is 100-300 ms, and a reader zooms in and out of the same programme.
        self._places: dict[str | None, tuple[float, list[Place]]] = {}

    async def grouped_graph(self, did: str) -> dict[str, Any]:
        """The root, the domains one edge away that are not stoves of it, the projects of an
        organisation, and each project's stoves as groups by state ({project, state,
        count}); a small project's stoves are listed instead (INLINE_STOVES)."""
        async with self._sessions() as session:
            root = await session.get(Domain, did)
            if root is None:
                raise NotFound(f"No domain {did!r}.")
            edges = await self._edges_around(session, did)
            kind = root.type.lower()
            projects: list[str] = []
            if kind in PROJECT_TYPES:
                projects = [did]
            elif kind in ORGANISATION_TYPES:
                projects = [
                    e.source_did for e in edges if e.type == "implementedBy" and e.target_did == did
                ][:MAX_PROJECTS]
            counts = await self._group_counts(session, projects)
            inline: list[Relationship] = []
            for project in projects:
                total = sum(n for (p, _), n in counts.items() if p == project)
                if 0 < total <= INLINE_STOVES:
                    inline += list(
                        await session.scalars(
                            select(Relationship).where(
                                Relationship.type == "project",
                                Relationship.target_did == project,
                            )
                        )
                    )
            edges += [e for e in inline if e not in edges]
            dids = {did} | {e.source_did for e in edges} | {e.target_did for e in edges}
            rows = await session.scalars(select(Domain).where(Domain.did.in_(dids)))
            nodes = [_node(row) for row in sorted(rows, key=lambda r: r.seq)]
        inline_projects = {e.target_did for e in inline}
        groups = [
            {"project": project, "state": state, "count": count}
            for (project, state), count in sorted(counts.items())
            if project not in inline_projects and count
        ]
        return {
            "root": did,
            "nodes": nodes,
            "edges": [
                {"source": e.source_did, "type": e.type, "target": e.target_did} for e in edges
            ],
            "groups": groups,
        }

    @staticmethod
    async def _edges_around(session: AsyncSession, did: str) -> list[Relationship]:
        """Edges from the root, and edges into it from domains that are not physical (a
        project's or an organisation's stoves are grouped, never listed here)."""
        outgoing = select(Relationship).where(Relationship.source_did == did)
        incoming = (
            select(Relationship)
            .join(Domain, Domain.did == Relationship.source_did)
            .where(Relationship.target_did == did, Domain.twin_class != "physical")
            .order_by(Relationship.id)
            .limit(MAX_NEIGHBOURS)
        )
        found = list(await session.scalars(outgoing.order_by(Relationship.id)))
        return found[:MAX_NEIGHBOURS] + list(await session.scalars(incoming))

    @staticmethod
    async def _group_counts(
        session: AsyncSession, projects: list[str]
    ) -> dict[tuple[str, str], int]:
        if not projects:
            return {}
        rows = await session.execute(
            select(Relationship.target_did, Domain.status, Domain.verified, func.count())
            .join(Domain, Domain.did == Relationship.source_did)
            .where(
                Relationship.type == "project",
                Relationship.target_did.in_(projects),
                Domain.twin_class == "physical",
            )
            .group_by(Relationship.target_did, Domain.status, Domain.verified)
        )
        counts: dict[tuple[str, str], int] = {}
        for project, status, verified, count in rows:
            key = (project, state_of(status, verified))
            counts[key] = counts.get(key, 0) + int(count)
        return counts

    async def group_members(
        self, project: str, state: str, cursor: str | None, limit: int
    ) -> dict[str, Any]:
        """One page of a project's stoves in `state`, in creation order: {items, next,
        total}."""
        if state not in STATES:
            raise Invalid("Unknown state.", [FieldProblem("state", f"one of {', '.join(STATES)}")])
        if not 1 <= limit <= MAX_MEMBERS_PAGE:
            raise Invalid("Bad page size.", [FieldProblem("limit", f"1 to {MAX_MEMBERS_PAGE}")])
        after = decode_cursor(cursor)
        members = _stoves_of([project]).where(_state_condition(state))
        async with self._sessions() as session:
            if await session.get(Domain, project) is None:
                raise NotFound(f"No domain {project!r}.")
            rows = list(
                await session.scalars(
                    members.where(Domain.seq > after).order_by(Domain.seq).limit(limit + 1)
                )
            )
            total = await session.scalar(select(func.count()).select_from(members.subquery()))
        more = len(rows) > limit
        rows = rows[:limit]
        return {
            "project": project,
            "state": state,
            "items": [_node(row) for row in rows],
            "next": encode_cursor(rows[-1].seq) if more else None,
            "total": int(total or 0),
        }

    async def places(self, scope: str | None) -> list[Place]:
        """The stoves of a project, of an organisation's projects, or of every project
        (`scope` None) that have a valid location (properties.location, a geo-point); kept
        for PLACES_SECONDS, so a stove placed or moved shows on the map soon, not at once."""
        kept = self._places.get(scope)
        if kept is not None and time.monotonic() - kept[0] < PLACES_SECONDS:
            return kept[1]
        found = await self._read_places(scope)
        if len(self._places) > 100:  # one entry per scope asked about
            self._places.clear()
        self._places[scope] = (time.monotonic(), found)
        return found

    async def _read_places(self, scope: str | None) -> list[Place]:
        async with self._sessions() as session:
            projects: list[str] | None = None
            if scope is not None:
                root = await session.get(Domain, scope)
                if root is None:
                    raise NotFound(f"No domain {scope!r}.")
                if root.type.lower() in PROJECT_TYPES:
                    projects = [scope]
                elif root.type.lower() in ORGANISATION_TYPES:
                    projects = list(
                        await session.scalars(
                            select(Relationship.source_did).where(
                                Relationship.type == "implementedBy",
                                Relationship.target_did == scope,
                            )
                        )
                    )
                else:
                    raise Invalid(
                        "Maps are drawn for projects and organisations.",
                        [FieldProblem("did", f"{scope} is a {root.type}")],
                    )
            # Only what the map draws, picked out of the JSON by the database: decoding
            # 30,000 stoves' whole properties and metadata was most of the page's time.
            dialect = dialect_of(session)
            query = _stoves_of(projects).with_only_columns(
                Domain.did,
                Domain.meta["name"].as_string(),
                dialect.json_number(Domain.properties, ("location", "lat")),
                dialect.json_number(Domain.properties, ("location", "lon")),
                Domain.properties[("location", "region")].as_string(),
                Domain.status,
                Domain.verified,
                Domain.owner_customer_id,
            )
            # Through the connection: plain rows, without the ORM's per-row work.
            connection = await session.connection()
            rows = (await connection.execute(query.order_by(Domain.seq))).all()
        return [
            Place(did, name, state_of(status, verified), lat, lon, region, household)
            for did, name, lat, lon, region, status, verified, household in rows
            if _a_place(lat, lon, region)
        ]


def _a_place(lat: float | None, lon: float | None, region: str | None) -> bool:
    """Whether the columns read make a place the map can show (geo_point_problem's rule,
    which the stove protocol applies on every write; a location written before it, or
    with none, is left off the map)."""
    if lat is None or lon is None or not (math.isfinite(lat) and math.isfinite(lon)):
        return False
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        return False
    return region is None or 1 <= len(region.strip()) <= GEO_REGION_MAX


def _stoves_of(projects: list[str] | None) -> Select[tuple[Domain]]:
    """The physical domains with a `project` edge to one of `projects` (None: to any), the
    edge as EXISTS on the domain (the edges' unique index on source and type)."""
    edge = select(Relationship.id).where(
        Relationship.source_did == Domain.did, Relationship.type == "project"
    )
    if projects is not None:
        edge = edge.where(Relationship.target_did.in_(projects))
    return select(Domain).where(Domain.twin_class == "physical", edge.exists())
