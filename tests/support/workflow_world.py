"""A validated project for the verification workflow, built over HTTP: a proponent, a
verifier and a registry, each a did:key of its own (signing client-side, as the CLI does),
the verifier accredited by the registry, a project document stored and validated."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import update

from tests.conftest import Registry, unique
from tests.support.claims_world import METERED_DAYS, METERED_START, World, build_world
from twinhub.db.models import TelemetryReading
from twinhub.security.signing import Issuer

CERTIFICATE = b"water boiling test, EPC-6L, 2026"
CERTIFICATE_DIGEST = "sha256:" + hashlib.sha256(CERTIFICATE).hexdigest()


def project_document(**parameters: Any) -> dict[str, Any]:
    """A project document: the methodology, country, parameters with their sources."""
    return {
        "methodology": {"id": "clean-cooking-mecd", "version": "2.1.0"},
        "country": "KE",
        "creditingPeriod": {"from": "2026-01-01", "to": "2032-12-31"},
        "baselineFuel": "charcoal",
        "leakage": "default",
        "parameters": {
            "fNRB": {
                "value": 0.88,
                "unit": "fraction",
                "source": "the methodology's default (test)",
                "year": 2024,
                "evidence": None,
                "status": "checked",
            },
            "EF_grid": {
                "value": 0.5,
                "unit": "tCO2/MWh",
                "source": "the methodology's default (test)",
                "year": 2024,
                "evidence": None,
                "status": "checked",
            },
            **parameters,
        },
        "monitoringPlan": {"measure": "meter", "reportingIntervalHours": 24},
        "stoveModels": {
            "EPC-6L": {
                "case": 1,
                "fuel": "electricity",
                "testCertificate": CERTIFICATE_DIGEST,
                "efficiency": {
                    "value": 0.85,
                    "unit": "fraction",
                    "source": "water boiling test (test)",
                    "year": 2026,
                    "evidence": CERTIFICATE_DIGEST,
                    "status": "checked",
                },
            }
        },
    }


def meter_record(stove: str) -> dict[str, Any]:
    return {
        "model": "EM-1",
        "serial": "m-" + stove.rsplit("/", 1)[-1],
        "accuracyClass": "1",
        "maxPermissibleError": 0.05,
        "calibratedOn": "2026-01-01",
        "calibrationDue": "2027-12-31",
        "certificate": CERTIFICATE_DIGEST,
        "registerMax": 99999,
    }


@dataclass
class Actor:
    key: Issuer
    client: httpx.AsyncClient
    seed: bytes = b""  # what a key file keeps (twinhub keys new)

    @property
    def did(self) -> str:
        return self.key.did


@dataclass
class Workflow:
    world: World
    project: str
    proponent: Actor
    verifier: Actor
    registry: Actor

    async def signed(self, actor: Actor, request_path: str, body: dict[str, Any]) -> dict[str, Any]:
        """The unsigned credential the API offers `actor`, signed with its key."""
        offered = await actor.client.post(request_path, json=body)
        assert offered.status_code == 200, offered.text
        credential = offered.json()
        return actor.key.sign(credential, credential["validFrom"])

    async def step(
        self, actor: Actor, period: int, step: str, route: str, **verdict: Any
    ) -> httpx.Response:
        """Ask for the step's credential, sign it, post it; the response (the request's own
        when the step is refused before anything is signed)."""
        base = f"/v1/domains/{self.project}/monitoring-periods/{period}"
        offered = await actor.client.post(
            f"{base}/credential-request", json={"step": step, **verdict}
        )
        if offered.status_code != 200:
            return offered
        credential = offered.json()
        signed = actor.key.sign(credential, credential["validFrom"])
        return await actor.client.post(f"{base}/{route}", json={"credential": signed})

    async def stove(self, kwh_per_day: float = 1.0, project: str | None = None) -> str:
        """A metered stove of the project (claims_world's), naming its model in the project
        document and carrying its meter's calibration record (+/-5 %: the figures of the
        methodology's worked example, so METERED_AMOUNT holds under the document too)."""
        stove = await self.world.metered_asset(
            project=project or self.project, kwh_per_day=kwh_per_day
        )
        patched = await self.world.operator_client.patch(
            f"/v1/domains/{stove}",
            json={"properties": {"stoveModel": "EPC-6L", "meter": meter_record(stove)}},
        )
        assert patched.status_code == 200, patched.text
        return stove

    async def draft(self, start: str = "2026-10-01", end: str = "2026-10-10") -> dict[str, Any]:
        made = await self.world.operator_client.post(
            f"/v1/domains/{self.project}/monitoring-periods", json={"from": start, "to": end}
        )
        assert made.status_code in (200, 201), made.text
        return made.json()

    async def through(self, period: int, sampled: list[str]) -> dict[str, Any]:
        """Submit, approve and issue `period`; the issued period."""
        submitted = await self.step(self.proponent, period, "submission", "submit")
        assert submitted.status_code == 200, submitted.text
        verified = await self.step(
            self.verifier,
            period,
            "verification",
            "verification",
            outcome="approved",
            findings=["sampled stoves' readings match"],
            sampledStoves=sampled,
        )
        assert verified.status_code == 200, verified.text
        issued = await self.step(self.registry, period, "issuance", "issuance")
        assert issued.status_code == 200, issued.text
        return issued.json()


async def actor(registry: Registry, world: World, *roles: str) -> Actor:
    seed = os.urandom(32)
    key = Issuer(seed)
    return Actor(key, await world.client(key.did, "reader", *roles), seed)


async def accredit(flow: Workflow, verifier: Actor, project: str) -> None:
    signed = await flow.signed(
        flow.registry,
        f"/v1/domains/{project}/credential-request",
        {"step": "accreditation", "verifier": verifier.did},
    )
    made = await flow.registry.client.post(
        f"/v1/domains/{project}/accreditations", json={"credential": signed}
    )
    assert made.status_code == 201, made.text


async def validate(flow: Workflow, document: dict[str, Any]) -> None:
    """Store `document` and have the verifier validate it. The document names the version
    of the methodology the built-in claim protocol carries in this database: a new
    deployment's 2.1.0, or 2.0.0 where a migration test moved the protocol down and up
    again (revisions 0013 and 0020 write what an existing deployment keeps) in a database
    other tests share (PostgreSQL: one a process)."""
    protocol = await flow.proponent.client.get("/v1/protocols/did:ixo:protocol/clean-cooking-claim")
    assert protocol.status_code == 200, protocol.text
    version = protocol.json()["effective"]["methodology"]["version"]
    document = {**document, "methodology": {**document["methodology"], "version": version}}
    stored = await flow.proponent.client.post(
        f"/v1/domains/{flow.project}/project-document", json={"document": document}
    )
    assert stored.status_code in (200, 201), stored.text
    signed = await flow.signed(
        flow.verifier, f"/v1/domains/{flow.project}/credential-request", {"step": "validation"}
    )
    validated = await flow.verifier.client.post(
        f"/v1/domains/{flow.project}/validation", json={"credential": signed}
    )
    assert validated.status_code == 201, validated.text


async def build_workflow(
    registry: Registry, validated: bool = True, world: World | None = None
) -> Workflow:
    world = world or await build_world(registry)
    proponent = await actor(registry, world, "proponent", "writer")
    project = await world.domain(
        world.operator_client,
        {
            "type": "Project",
            "class": "did:ixo:protocol/project",
            "metadata": {"name": unique("project")},
            "controller": [world.operator, proponent.did],
            "relationships": {"implementedBy": [world.organisation]},
        },
    )
    await world.govern(project, "verify")
    flow = Workflow(
        world,
        project,
        proponent,
        await actor(registry, world, "verifier"),
        await actor(registry, world, "registry"),
    )
    uploaded = await proponent.client.post(
        f"/v1/attachments?digest={CERTIFICATE_DIGEST}",
        content=CERTIFICATE,
        headers={"content-type": "application/pdf"},
    )
    assert uploaded.status_code == 201, uploaded.text
    await world.collection(project=project)
    if validated:
        await accredit(flow, flow.verifier, project)
        await validate(flow, project_document())
    return flow


async def workflow_over(
    operator: httpx.AsyncClient,
    project: str,
    make_actor: Callable[..., Awaitable[Actor]],
    world: World | None = None,
) -> Workflow:
    """The verification workflow of a verified project that `operator` controls, over any
    registry (in process or served): a proponent key (`make_actor(*roles)`) made a
    controller, a verifier accredited by a registry key, the project document validated."""
    proponent = await make_actor("proponent", "writer")
    found = await operator.get(f"/v1/domains/{project}")
    assert found.status_code == 200, found.text
    controllers = found.json()["controller"]
    patched = await operator.patch(
        f"/v1/domains/{project}", json={"controller": [*controllers, proponent.did]}
    )
    assert patched.status_code == 200, patched.text
    flow = Workflow(
        world,  # type: ignore[arg-type]  # None over a served registry: draft() needs no world
        project,
        proponent,
        await make_actor("verifier"),
        await make_actor("registry"),
    )
    uploaded = await proponent.client.post(
        f"/v1/attachments?digest={CERTIFICATE_DIGEST}",
        content=CERTIFICATE,
        headers={"content-type": "application/pdf"},
    )
    assert uploaded.status_code == 201, uploaded.text
    await accredit(flow, flow.verifier, project)
    await validate(flow, project_document())
    return flow


async def workflow_of(world: World, project: str | None = None) -> Workflow:
    """The verification workflow of a project of `world` (claims_world's, verified), made
    once per project (`workflow_over`)."""
    project = project or world.project
    if project not in world.workflows:

        async def make_actor(*roles: str) -> Actor:
            return await actor(world.registry, world, *roles)

        world.workflows[project] = await workflow_over(
            world.operator_client, project, make_actor, world
        )
    flow: Workflow = world.workflows[project]
    return flow


async def issue_through(flow: Workflow, operator: httpx.AsyncClient, after: date) -> dict[str, Any]:
    """Issue the project's approved claims awaiting issuance, as the registry does (issue
    #29: an approval is a draft figure, credits come with issuance): a one-day monitoring
    period after the claims' last day (`after`) and after the project's earlier periods,
    drafted by `operator`, submitted, verified and issued. The issued period, with the
    claims it carried (its report's `claims`)."""
    day = after
    listed = await operator.get(f"/v1/domains/{flow.project}/monitoring-periods")
    assert listed.status_code == 200, listed.text
    for period in listed.json()["items"]:
        if period["state"] != "rejected":
            day = max(day, date.fromisoformat(period["to"]) + timedelta(days=1))
    made = await operator.post(
        f"/v1/domains/{flow.project}/monitoring-periods",
        json={"from": day.isoformat(), "to": day.isoformat()},
    )
    assert made.status_code in (200, 201), made.text
    drafted = made.json()
    report = await operator.get(
        f"/v1/domains/{flow.project}/monitoring-periods/{drafted['id']}/report"
    )
    assert report.status_code == 200, report.text
    body = report.json()
    assert body.get("claims"), f"the period carries no claim: {body}"
    stoves = [row["stove"] for row in body["stoves"] + body["exclusions"]]
    issued = await flow.through(drafted["id"], stoves[:1])
    assert issued["state"] == "issued", issued
    return {**issued, "claims": body["claims"]}


async def issue_claims(
    world: World, project: str | None = None, after: date | None = None
) -> dict[str, Any]:
    """`issue_through` for a project of `world` (its metered claims' last day by default)."""
    flow = await workflow_of(world, project)
    day = after or (METERED_START.date() + timedelta(days=METERED_DAYS - 1))
    return await issue_through(flow, world.operator_client, day)


async def send_reading(
    registry: Registry, stove: str, seq: int, time: str, received_before: datetime | None = None
) -> None:
    """One cooking reading from the stove's device (a device token of its own). With
    `received_before`, its receipt time is set to just before that moment: a reading that
    was received then but committed only after whatever read the telemetry at that moment
    (an ingest in flight)."""
    token = await registry.client.post(f"/v1/domains/{stove}/device-tokens", json={})
    assert token.status_code == 201, token.text
    reading = {"seq": seq, "time": time, "values": {"session": "end", "energyKwh": 2.0}}
    async with registry.as_key(token.json()["token"]) as device:
        sent = await device.post(f"/v1/domains/{stove}/telemetry", json={"readings": [reading]})
    assert sent.status_code in (200, 202), sent.text
    if received_before is not None:
        async with registry.platform.sessionmaker() as session:
            await session.execute(
                update(TelemetryReading)
                .where(TelemetryReading.seq == seq)
                .values(received_at=received_before - timedelta(seconds=1))
            )
            await session.commit()
