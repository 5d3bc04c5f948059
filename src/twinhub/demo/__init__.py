"""`twinhub demo`: a clean-cooking programme in Zambia that earns credits, loaded through
the core services.

What it makes (fixed identifiers, so a second run finds everything and adds nothing):
an operator organisation with its membership group, a project it implements, an oracle,
a compliance group that verifies the project and its stoves by real proposals and votes,
the project's claim collection, and stoves (electric pressure cookers), each owned by a
USSD customer (who share one demo PIN so that anyone can dial in), each with its model,
household size and metered, calibrated meter. For the verification workflow it makes a
proponent, a verifier and a registry, each with its own did:key (key files under the data
folder, `demo-keys/`); the proponent stores the project design document and its evidence
(twinhub.demo.evidence), the registry accredits the verifier, the verifier validates the
document, and a household survey confirms the recorded household sizes. The stoves'
meters report the last full calendar month (`load_telemetry`), so a monitoring period over
that month computes credits, which the roles take through submit, verify and issue.
"""

from __future__ import annotations

import calendar
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from twinhub.kernel.errors import Invalid, NotFound
from twinhub.kernel.principals import Principal
from twinhub.platform import Platform
from twinhub.services.claims import CollectionSpec
from twinhub.services.domains import DomainPatch, DomainSpec
from twinhub.services.governance import BatchSelection, GroupSpec

from .evidence import Keys, store_evidence, stove_properties, survey_households
from .evidence import validated_document as _validated_document
from .keys import RoleKey, role_key

OPERATOR = "did:ixo:org/demo-coop-operator"
ORACLE_OPERATOR = "did:ixo:org/demo-emissions-oracle"
COMPLIANCE_MEMBERS = tuple(f"did:ixo:org/demo-compliance-{n}" for n in (1, 2, 3))
ORGANISATION = "did:ixo:entity/demo-cooking-coop"
PROJECT = "did:ixo:entity/demo-clean-cooking-zambia"
ORACLE = "did:ixo:entity/demo-emissions-oracle"
GROUP = "did:ixo:group/demo-compliance"
CLAIM_PROTOCOL = "did:ixo:protocol/clean-cooking-claim"
DEMO_PIN = "48151"  # passes the weak-PIN rules; printed for the people trying the demo
PHONE_PREFIX = "+2609700"  # Zambian mobile numbers for the demo: +2609700NNNNN
ROLES = ("proponent", "verifier", "registry")  # the workflow's, each with its own key
FIRST_NAMES = ("Mwila", "Chanda", "Bwalya", "Mutale", "Namukolo", "Chileshe", "Musonda", "Taonga")


def telemetry_month(today: date | None = None) -> tuple[date, date]:
    """The last full calendar month before `today` (UTC): (first day, last day)."""
    today = today or datetime.now(UTC).date()
    last = today.replace(day=1) - timedelta(days=1)
    return last.replace(day=1), last


def installed_on(today: date | None = None) -> date:
    """When the demo's stoves were installed: a week before their month of telemetry."""
    return telemetry_month(today)[0] - timedelta(days=7)


@dataclass
class DemoReport:
    created: dict[str, int] = field(default_factory=dict)
    collection: int = 0
    sample_phone: str = ""
    sample_customer: str = ""
    sample_stove: str = ""
    keys: dict[str, RoleKey] = field(default_factory=dict)
    workflow: list[str] = field(default_factory=list)  # the steps this run took
    survey: str = ""
    answers: int = 0

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
    total = 10 + stoves
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
                metadata={"name": "Lusaka Cooking Co-operative"},
                properties={"legalName": "Lusaka Clean Cooking Co-operative", "country": "ZM"},
                controller=[OPERATOR],
                local_id="demo-cooking-coop",
            ),
            OPERATOR,
        ),
    )
    advance("organisation")
    keys = Keys(*[await role_key(platform, role) for role in ROLES])
    report.keys = {key.role: key for key in (keys.proponent, keys.verifier, keys.registry)}
    for key in report.keys.values():
        report.count("role keys", key.created)
    advance("role keys")
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
                metadata={"name": "Clean Cooking Zambia"},
                properties={"country": "ZM", "methodology": "clean-cooking-mecd 2.1.0"},
                controller=[OPERATOR, keys.proponent.did],  # the proponent is credited
                relationships={"implementedBy": [ORGANISATION], "verifier": [ORACLE]},
                local_id="demo-clean-cooking-zambia",
            ),
            OPERATOR,
        ),
    )
    await _proponent_controls(platform, keys.proponent.did)
    advance("project")
    await _verify_project(platform, report)
    advance("verification")
    report.collection = await _collection(platform, report)
    advance("claim collection")
    installed = installed_on()
    for n in range(1, stoves + 1):
        await _customer_and_stove(platform, n, report, keys, installed)
        advance("stoves")
    await _verify_stoves(platform, report)
    advance("stove verification")
    report.workflow = await _validated_document(platform, PROJECT, keys)
    advance("design document, accreditation, validation")
    report.survey, report.answers = await survey_households(platform, PROJECT, keys, phone_of)
    advance("household survey")
    advance("done")
    return report


def phone_of(stove: str) -> str:
    """The phone of the household owning demo stove `did:ixo:entity/demo-stove-NNNN`."""
    return f"{PHONE_PREFIX}{int(stove.rsplit('-', 1)[1]):05d}"


async def _proponent_controls(platform: Platform, proponent: str) -> None:
    """The proponent controls the project (credits are minted to it): added to a project a
    run before its key existed made."""
    project = await platform.domains.get(PROJECT)
    if proponent not in project["controller"]:
        patch = DomainPatch(controller=[*project["controller"], proponent])
        await platform.domains.update(PROJECT, patch, as_actor(OPERATOR), None)


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


async def _customer_and_stove(
    platform: Platform, n: int, report: DemoReport, keys: Keys, installed: date
) -> None:
    phone = f"{PHONE_PREFIX}{n:05d}"
    customer = await platform.customers.by_phone(phone)
    if customer is None:
        name = f"{FIRST_NAMES[n % len(FIRST_NAMES)]} Demo{n}"
        customer = await platform.customers.create(phone, name, DEMO_PIN)
        report.count("customers", True)
    properties, calibration = stove_properties(n, installed)
    did = f"did:ixo:entity/demo-stove-{n:04d}"
    try:
        await platform.domains.get(did)
    except NotFound:  # its meter's calibration record first: the stove cites it
        await store_evidence(platform, keys, [(calibration, "text/plain")])
    made = await _domain(
        platform,
        DomainSpec(
            type="Device",
            protocol="did:ixo:protocol/clean-cooking",
            metadata={"name": f"EPC {n:03d}"},
            properties={
                **properties,
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


METER_LABEL = "demo meter"  # the label of the device tokens the demo makes


async def _meter_token(platform: Platform, did: str, actor: Principal) -> str:
    """A device token for the demo's meter posts: a token is shown only once, so a second
    run rotates the one the first made (one active token per device, never two)."""
    tokens = platform.device_tokens
    active = [
        view
        for view in await tokens.list(did, actor)
        if view.revoked_at is None and view.label == METER_LABEL
    ]
    if not active:
        token, _ = await tokens.create(did, actor, METER_LABEL)
        return str(token)
    for extra in active[1:]:  # left by an earlier version of the demo
        await tokens.revoke(did, extra.id, actor)
    token, _ = await tokens.rotate(did, active[0].id, actor)
    return str(token)


async def load_telemetry(
    platform: Platform, stoves: int, progress: Callable[[int, int], None]
) -> Any:
    """The last full calendar month of simulated telemetry for the demo stoves (sessions
    and the meter's register), through the HTTP ingestion path; the readings are fixed by
    (stove, day), so a second run in the same month adds none."""
    from twinhub.simulator import Stove, simulate

    first, last = telemetry_month()
    days = calendar.monthrange(first.year, first.month)[1]
    until = datetime.combine(last + timedelta(days=1), datetime.min.time(), UTC)
    actor = as_actor(OPERATOR)
    devices = []
    for n in range(1, stoves + 1):
        did = f"did:ixo:entity/demo-stove-{n:04d}"
        devices.append(Stove(did, await _meter_token(platform, did, actor), n))
    return await simulate(platform, stoves, days, False, progress, stove_list=devices, until=until)
