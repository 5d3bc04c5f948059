"""`twinhub demo`: a realistic clean-cooking programme, loaded through the core services.

What it makes (fixed identifiers, so a second run finds everything and adds nothing):
an operator organisation with its membership group, a project it implements, an oracle
that verifies the project's claims, a compliance group that verifies the project by a
real proposal and vote, the project's claim collection, and a few hundred stoves, each
owned by a USSD customer. The customers share one demo PIN so that anyone can dial in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from twinhub.kernel.errors import Invalid, NotFound
from twinhub.kernel.principals import Principal
from twinhub.platform import Platform
from twinhub.services.claims import CollectionSpec
from twinhub.services.domains import DomainSpec
from twinhub.services.governance import BatchSelection, GroupSpec

OPERATOR = "did:ixo:org/demo-jiko-operator"
ORACLE_OPERATOR = "did:ixo:org/demo-emissions-oracle"
COMPLIANCE_MEMBERS = tuple(f"did:ixo:org/demo-compliance-{n}" for n in (1, 2, 3))
ORGANISATION = "did:ixo:entity/demo-jiko-coop"
PROJECT = "did:ixo:entity/demo-clean-cooking-kenya"
ORACLE = "did:ixo:entity/demo-emissions-oracle"
GROUP = "did:ixo:group/demo-compliance"
CLAIM_PROTOCOL = "did:ixo:protocol/clean-cooking-claim"
DEMO_PIN = "48151"  # passes the weak-PIN rules; printed for the people trying the demo
PHONE_PREFIX = "+2547009"  # Kenyan mobile numbers reserved for the demo: +2547009NNNNN
FIRST_NAMES = ("Wanjiru", "Akinyi", "Njeri", "Atieno", "Chebet", "Mumbua", "Nafula", "Zawadi")


@dataclass
class DemoReport:
    created: dict[str, int] = field(default_factory=dict)
    collection: int = 0
    sample_phone: str = ""
    sample_customer: str = ""
    sample_stove: str = ""

    def count(self, what: str, made: bool) -> None:
        self.created[what] = self.created.get(what, 0) + (1 if made else 0)


Progress = Callable[[str, int, int], None]


def as_actor(did: str, *roles: str) -> Principal:
    return Principal(did, frozenset(roles or ("writer",)))


async def _domain(platform: Platform, spec: DomainSpec, actor: str) -> bool:
    """Create the domain unless it exists; True when this run made it."""
    did = f"did:ixo:entity/{spec.local_id}"
    try:
        await platform.domains.get(did)
        return False
    except NotFound:
        await platform.domains.create(spec, as_actor(actor))
        return True


async def load_demo(platform: Platform, stoves: int, progress: Progress) -> DemoReport:
    report = DemoReport()
    total = 7 + stoves
    step = 0

    def advance(label: str) -> None:
        nonlocal step
        step += 1
        progress(label, step, total)

    report.count(
        "organisations",
        await _domain(
            platform,
            DomainSpec(
                type="Organisation",
                protocol="did:ixo:protocol/organisation",
                metadata={"name": "Jiko Co-operative"},
                properties={"legalName": "Jiko Clean Cooking Co-operative", "country": "KE"},
                controller=[OPERATOR],
                local_id="demo-jiko-coop",
            ),
            OPERATOR,
        ),
    )
    advance("organisation")
    report.count(
        "oracles",
        await _domain(
            platform,
            DomainSpec(
                type="Oracle",
                protocol="did:ixo:protocol/oracle",
                metadata={"name": "Emissions oracle"},
                properties={"model": "usage-to-tCO2e v1", "evaluates": ["cooking", "fuel"]},
                controller=[ORACLE_OPERATOR],
                local_id="demo-emissions-oracle",
            ),
            ORACLE_OPERATOR,
        ),
    )
    advance("oracle")
    report.count(
        "projects",
        await _domain(
            platform,
            DomainSpec(
                type="Project",
                protocol="did:ixo:protocol/project",
                metadata={"name": "Clean Cooking Kenya"},
                properties={"country": "KE", "methodology": "Gold Standard TPDDTEC"},
                controller=[OPERATOR],
                relationships={"implementedBy": [ORGANISATION], "verifier": [ORACLE]},
                local_id="demo-clean-cooking-kenya",
            ),
            OPERATOR,
        ),
    )
    advance("project")
    await _verify_project(platform, report)
    advance("verification")
    report.collection = await _collection(platform, report)
    advance("claim collection")
    for n in range(1, stoves + 1):
        await _customer_and_stove(platform, n, report)
        advance("stoves")
    await _verify_stoves(platform, report)
    advance("stove verification")
    advance("done")
    return report


async def _verify_project(platform: Platform, report: DemoReport) -> None:
    """A compliance group of three verifies the project: a proposal, two yes votes, run."""
    try:
        await platform.governance.group(GROUP)
    except NotFound:
        await platform.governance.create_group(
            GroupSpec(
                name="Demo compliance",
                slug="demo-compliance",
                members=dict.fromkeys(COMPLIANCE_MEMBERS, 1),
                threshold_kind="absolute_count",
                threshold=2,
                quorum=None,
                voting_period_seconds=7 * 86400,
            ),
            as_actor(OPERATOR, "admin"),
        )
        report.count("governance groups", True)
    if (await platform.domains.get(PROJECT))["verified"]:
        return
    proposer = as_actor(COMPLIANCE_MEMBERS[0])
    proposal = await platform.governance.propose(
        PROJECT, "verify", {"siteVisit": "2026-10-12", "auditor": "demo"}, GROUP, proposer
    )
    for member in COMPLIANCE_MEMBERS[:2]:
        await platform.governance.vote(proposal["id"], "yes", as_actor(member))
    await platform.governance.execute(proposal["id"], proposer)
    report.count("verifications", True)


async def _verify_stoves(platform: Platform, report: DemoReport) -> None:
    """The same group verifies every unverified stove of the project in one batch proposal
    (only verified stoves' claims are approved); nothing to do on a second run."""
    proposer = as_actor(COMPLIANCE_MEMBERS[0])
    try:
        proposal = await platform.governance.propose_batch(
            BatchSelection(PROJECT, protocol="did:ixo:protocol/clean-cooking"),
            {"enrolment": "installation records", "auditor": "demo"},
            GROUP,
            proposer,
        )
    except Invalid:  # every stove is verified already
        return
    for member in COMPLIANCE_MEMBERS[:2]:
        await platform.governance.vote(proposal["id"], "yes", as_actor(member))
    await platform.governance.execute_all(proposal["id"], proposer)  # to its end, in place
    report.count("batch verifications", True)


async def _collection(platform: Platform, report: DemoReport) -> int:
    page = await platform.claims.collections.collections(PROJECT, None, 100)
    for view in page.items:
        if view["protocol"] == CLAIM_PROTOCOL and view["state"] == "open":
            return int(view["id"])
    view = await platform.claims.collections.create_collection(
        CollectionSpec(
            project=PROJECT,
            protocol=CLAIM_PROTOCOL,
            evaluators=[ORACLE],
            name="Clean Cooking Kenya usage reports",
        ),
        as_actor(OPERATOR),
    )
    report.count("claim collections", True)
    return int(view["id"])


async def _customer_and_stove(platform: Platform, n: int, report: DemoReport) -> None:
    phone = f"{PHONE_PREFIX}{n:05d}"
    customer = await platform.customers.by_phone(phone)
    if customer is None:
        name = f"{FIRST_NAMES[n % len(FIRST_NAMES)]} Demo{n}"
        customer = await platform.customers.create(phone, name, DEMO_PIN)
        report.count("customers", True)
    made = await _domain(
        platform,
        DomainSpec(
            type="Device",
            protocol="did:ixo:protocol/clean-cooking",
            metadata={"name": f"Jiko {n:03d}"},
            properties={
                "serialNumber": f"JK-{n:05d}",
                "fuelType": "charcoal",
                "model": "Jiko Poa",
                "ownerCustomerId": customer.customer_id,  # the household the stove is
            },
            controller=[OPERATOR],
            relationships={"project": [PROJECT], "operator": [ORGANISATION]},
            local_id=f"demo-stove-{n:04d}",
        ),
        OPERATOR,
    )
    report.count("stoves", made)
    if n == 1:
        report.sample_phone = phone
        report.sample_customer = customer.customer_id
        report.sample_stove = f"did:ixo:entity/demo-stove-{n:04d}"


async def load_telemetry(
    platform: Platform, stoves: int, progress: Callable[[int, int], None]
) -> Any:
    """A month of simulated telemetry for the demo stoves, through the HTTP ingestion path;
    the readings are fixed by (stove, day), so a second run on the same day adds none."""
    from twinhub.simulator import Stove, simulate

    actor = as_actor(OPERATOR)
    devices = []
    for n in range(1, stoves + 1):
        did = f"did:ixo:entity/demo-stove-{n:04d}"
        token, _ = await platform.device_tokens.create(did, actor, "demo meter")
        devices.append(Stove(did, token, n))
    return await simulate(platform, stoves, 30, False, progress, stove_list=devices)
