"""A programme at scale for the console's tests and benchmark: the demo (three stoves, its
documents, survey, periods and telemetry) plus a second project of 30,000 stoves in ten
regions of villages, each owned by a household, some verified, some online, with claims in
every status, day rollups, reported problems, a webhook and API keys for three roles.

`build_large_programme(url, stoves)` fills the (migrated or empty) database at `url` and
returns what it made (`LargeProgramme`). It goes through the platform's own write paths,
in process: stoves are `DomainService.create` calls many at a time, so the ledger commits
them in batches (group commit, one hash-chained transaction each); claims, evaluations,
problems and the verification of a share of the stoves through their services. Only what
has no service to write it in bulk goes straight in through `twinhub.db.bulk`: the
households (a customer each, its PIN encrypted as the service does) and the telemetry the
dashboard and the online filter read (device state and the project's day rollups).

A SQLite programme is built once per test process and size (a template file, ~20 s for
30,000 stoves on a quiet core) and copied for each caller; the facts come with the copy.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import secrets
import shutil
import tempfile
import threading
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REGIONS = (
    "Central",
    "Copperbelt",
    "Eastern",
    "Luapula",
    "Lusaka",
    "Muchinga",
    "Northern",
    "North-Western",
    "Southern",
    "Western",
)
VILLAGES_PER_REGION = 30
# Each province's capital (approximate, decimal degrees): a region's villages lie around it.
CENTRES = {
    "Central": (-14.44, 28.45),
    "Copperbelt": (-12.97, 28.64),
    "Eastern": (-13.64, 32.65),
    "Luapula": (-11.20, 28.89),
    "Lusaka": (-15.42, 28.28),
    "Muchinga": (-10.55, 32.08),
    "Northern": (-10.21, 31.18),
    "North-Western": (-12.18, 26.39),
    "Southern": (-16.81, 26.98),
    "Western": (-15.25, 23.13),
}
LARGE_ORGANISATION = "did:ixo:entity/scale-cooking-coop"
LARGE_PROJECT = "did:ixo:entity/scale-clean-cooking"
LARGE_OPERATOR = "did:ixo:org/scale-operator"
STOVE_PROTOCOL = "did:ixo:protocol/clean-cooking"
PHONE_PREFIX = "+2609600"  # the demo's households are +2609700...
CONCURRENT_CREATES = 256  # claims submitted at once: the ledger commits them together
BULK_CHUNK = 2000  # stoves per ledger write
PROBLEM_KINDS = ("noStart", "smoke", "broken", "meter", "other")


@dataclass
class LargeProgramme:
    """What `build_large_programme` made: names to find things by, and counts to check
    the console's figures against."""

    url: str
    stoves: int
    project: str = LARGE_PROJECT
    organisation: str = LARGE_ORGANISATION
    demo_project: str = ""
    admin_key: str = ""  # an admin API key (signs in to every page)
    writer_key: str = ""  # the large project's operator
    oracle_key: str = ""  # the oracle's operator (a writer): evaluates the project's claims
    reader_key: str = ""
    first_stove: str = ""
    last_stove: str = ""
    verified: int = 0  # stoves of the large project verified
    online: int = 0  # stoves of the large project online now (a reading in the last hour)
    regions: dict[str, int] = field(default_factory=dict)  # stoves per region
    villages: dict[str, int] = field(default_factory=dict)  # stoves per village
    claims: dict[str, int] = field(default_factory=dict)  # claims of the large project by status
    flagged_claim: str = ""
    pending_claim: str = ""
    problems: int = 0  # open problems reported about the large project's stoves
    households: int = 0  # every customer, the demo's included
    survey: str = ""
    period: int = 0  # the demo project's monitoring period (a draft)
    webhook: str = ""
    seconds: float = 0.0  # what building it took (0 for a copy of the template)
    steps: dict[str, float] = field(default_factory=dict)  # seconds of each step

    def stove(self, n: int) -> str:
        return stove_did(n)


def stove_did(n: int) -> str:
    return f"did:ixo:entity/scale-stove-{n:05d}"


def region_of(n: int) -> str:
    return REGIONS[n % len(REGIONS)]


def village_of(n: int) -> str:
    return f"{region_of(n)} village {(n // len(REGIONS)) % VILLAGES_PER_REGION + 1:02d}"


def place_of(n: int) -> dict[str, Any]:
    """Stove n's place: its village around its region's centre, the stove a little off
    the village's middle (deterministic, within about half a degree)."""
    lat, lon = CENTRES[region_of(n)]
    village = (n // len(REGIONS)) % VILLAGES_PER_REGION
    lat += ((village * 7) % 11 - 5) * 0.08 + (n % 13) * 0.001
    lon += ((village * 5) % 11 - 5) * 0.08 + (n % 17) * 0.001
    return {
        "lat": round(lat, 5),
        "lon": round(lon, 5),
        "region": region_of(n),
        "village": village_of(n),
    }


def is_verified(n: int) -> bool:
    return n % 6 == 0  # one stove in six


def is_online(n: int) -> bool:
    return n % 3 == 0  # one in three reported in the last minutes


# -- the template, once per process and size ---------------------------------------------------
_templates: dict[int, tuple[Path, LargeProgramme]] = {}
_lock = threading.Lock()


def build_large_programme(url: str, stoves: int = 30_000) -> LargeProgramme:
    """The programme in the database at `url` (SQLite: a copy of this process's template,
    made on first use; another database: built there). Callable from inside a running
    event loop: the work runs in a thread of its own."""
    if not url.startswith("sqlite:///"):
        return _in_thread(_build(url, stoves))
    target = Path(url.removeprefix("sqlite:///"))
    with _lock:
        if stoves not in _templates:
            if not _templates:
                atexit.register(drop_templates)  # the templates leave with the process
            folder = Path(tempfile.mkdtemp(prefix=f"twinhub-large-{stoves}-"))
            made = _in_thread(_build(f"sqlite:///{folder / 'twinhub.db'}", stoves))
            _templates[stoves] = (folder / "twinhub.db", made)
        template, made = _templates[stoves]
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, target)
    return LargeProgramme(**{**asdict(made), "url": url, "seconds": 0.0})


def drop_templates() -> None:
    """Remove this process's templates (the end of a test session)."""
    with _lock:
        for path, _ in _templates.values():
            shutil.rmtree(path.parent, ignore_errors=True)
        _templates.clear()


def _in_thread(work: Any) -> Any:
    result: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(asyncio.run(work))
        except BaseException as error:  # handed to the caller's thread
            errors.append(error)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    if errors:
        raise errors[0]
    return result[0]


# -- building --------------------------------------------------------------------------------
async def _build(url: str, stoves: int) -> LargeProgramme:
    import time

    from twinhub.platform import Platform
    from twinhub.settings import Settings

    # The demo's thousands of telemetry posts would log an audit line each (the CLI's
    # `twinhub demo` quiets them the same way); the ledger records every write.
    logging.getLogger("twinhub.audit").setLevel(logging.WARNING)
    began = time.monotonic()
    data_dir = Path(tempfile.mkdtemp(prefix="twinhub-large-data-"))
    platform = Platform(
        Settings(
            environment="test",
            database_url=url,
            data_dir=data_dir,
            redis_url=None,
            log_level="warning",
            oracle_enabled=False,
            background_workers_enabled=False,
            pin_encryption_key=secrets.token_hex(32),
            webhook_allow_private_networks=True,  # the webhook below points at loopback
        )
    )
    await platform.start()
    try:
        made = LargeProgramme(url=url, stoves=stoves)
        lap = time.monotonic()

        def step(name: str) -> None:
            nonlocal lap
            made.steps[name] = round(time.monotonic() - lap, 2)
            lap = time.monotonic()

        await _demo(platform, made)
        step("demo")
        await _keys(platform, made)
        await _organisation_and_project(platform)
        customers = await _households(platform, stoves)
        step("households")
        await _stoves(platform, stoves, customers, made)
        step("stoves")
        await _verify_share(platform, stoves, made)
        step("verification")
        await _claims(platform, stoves, made)
        step("claims")
        await _telemetry(platform, stoves, made)
        step("telemetry")
        await _problems(platform, stoves, customers, made)
        await _webhook(platform, made)
        step("problems")
        made.households = stoves + 3
        made.seconds = round(time.monotonic() - began, 1)
        return made
    finally:
        await platform.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def _actor(did: str, *roles: str) -> Any:
    from twinhub.kernel.principals import Principal

    return Principal(did, frozenset(roles or ("writer",)))


async def _demo(platform: Any, made: LargeProgramme) -> None:
    """The demo programme (three stoves): its documents, survey, telemetry and a draft
    monitoring period over its month of telemetry."""
    from twinhub import demo

    report = await demo.load_demo(platform, 3, lambda *_: None)
    await demo.load_telemetry(platform, 3, lambda *_: None)
    made.demo_project = demo.PROJECT
    made.survey = report.survey
    first, last = demo.telemetry_month()
    view, _ = await platform.monitoring.run(demo.PROJECT, first, last, _actor(demo.OPERATOR))
    made.period = int(view["id"])


async def _keys(platform: Any, made: LargeProgramme) -> None:
    from twinhub.demo import ORACLE_OPERATOR

    made.admin_key, _ = await platform.api_keys.create(
        "did:ixo:org/scale-admin", ["admin", "writer", "reader"], "large programme admin"
    )
    made.writer_key, _ = await platform.api_keys.create(LARGE_OPERATOR, ["writer"], "operator")
    made.oracle_key, _ = await platform.api_keys.create(ORACLE_OPERATOR, ["writer"], "oracle")
    made.reader_key, _ = await platform.api_keys.create(
        "did:ixo:org/scale-reader", ["reader"], "reader"
    )


async def _organisation_and_project(platform: Any) -> None:
    from twinhub.demo import COMPLIANCE_MEMBERS, GROUP
    from twinhub.services.domains import DomainSpec

    operator = _actor(LARGE_OPERATOR)
    await platform.domains.create(
        DomainSpec(
            type="Organisation",
            protocol="did:ixo:protocol/organisation",
            metadata={"name": "Zambia Cooking at Scale"},
            properties={"country": "ZM"},
            controller=[LARGE_OPERATOR],
            local_id="scale-cooking-coop",
        ),
        operator,
    )
    await platform.domains.create(
        DomainSpec(
            type="Project",
            protocol="did:ixo:protocol/project",
            metadata={"name": "Clean Cooking at Scale"},
            properties={"country": "ZM", "methodology": "clean-cooking-mecd 2.1.0"},
            controller=[LARGE_OPERATOR],
            relationships={"implementedBy": [LARGE_ORGANISATION]},
            local_id="scale-clean-cooking",
        ),
        operator,
    )
    proposer = _actor(COMPLIANCE_MEMBERS[0])
    proposal = await platform.governance.propose(
        LARGE_PROJECT, "verify", {"siteVisit": "2026-10-20"}, GROUP, proposer
    )
    for member in COMPLIANCE_MEMBERS[:2]:
        await platform.governance.vote(proposal["id"], "yes", _actor(member))
    await platform.governance.execute(proposal["id"], proposer)


async def _households(platform: Any, stoves: int) -> list[str]:
    """A customer per stove, in bulk (the service opens one account per transaction); the
    PIN encrypted under each customer's own context, as CustomerService does."""
    from twinhub.db.bulk import insert_rows
    from twinhub.db.models import Customer
    from twinhub.demo import DEMO_PIN, FIRST_NAMES
    from twinhub.kernel.clock import utcnow
    from twinhub.services.customer_ids import new_customer_id
    from twinhub.services.customers import _pin_context

    ids: list[str] = []
    seen: set[str] = set()
    while len(ids) < stoves:
        customer_id = new_customer_id()
        if customer_id not in seen:
            seen.add(customer_id)
            ids.append(customer_id)
    now = utcnow()
    rows = [
        {
            "customer_id": customer_id,
            "phone_number": f"{PHONE_PREFIX}{n:05d}",
            "full_name": f"{FIRST_NAMES[n % len(FIRST_NAMES)]} {region_of(n)} {n}",
            "pin_ciphertext": platform.pin_cipher.encrypt(DEMO_PIN, _pin_context(customer_id)),
            "failed_pin_attempts": 0,
            "created_at": now,
            "updated_at": now,
        }
        for n, customer_id in enumerate(ids, 1)
    ]
    async with platform.sessionmaker.begin() as session:
        connection = await session.connection()
        for start in range(0, len(rows), 5000):
            await insert_rows(connection, Customer.__table__, rows[start : start + 5000])
    return ids


def _stove_spec(n: int, customer_id: str, installed: datetime) -> Any:
    from twinhub.services.domains import DomainSpec

    return DomainSpec(
        type="Device",
        protocol=STOVE_PROTOCOL,
        metadata={"name": f"Stove {n:05d}"},
        properties={
            "serialNumber": f"SC-{n:05d}",
            "fuelType": "electric",
            "stoveModel": "EPC-8L" if n % 4 == 0 else "EPC-6L",
            "efficiency": 0.82 if n % 4 == 0 else 0.85,
            "householdSize": 3 + (n * 7) % 5,
            "installedAt": installed.isoformat(),
            "ownerCustomerId": customer_id,
            "location": place_of(n),
        },
        controller=[LARGE_OPERATOR],
        relationships={"project": [LARGE_PROJECT], "operator": [LARGE_ORGANISATION]},
        local_id=f"scale-stove-{n:05d}",
    )


async def _stoves(platform: Any, stoves: int, customers: list[str], made: LargeProgramme) -> None:
    """The first stove through DomainService.create (the registry's rules accept the
    shape), the others through the ledger in chunks: one ledger write per chunk, a
    `domain.create` transaction per stove holding the record the service would hold (the
    service's own row and record builders), the rows by `twinhub.db.bulk`. The service's
    one-at-a-time checks (owner, relationship targets, serial) cost 5 ms a stove here."""
    from twinhub.db.bulk import insert_rows
    from twinhub.db.models import Domain
    from twinhub.kernel.clock import utcnow
    from twinhub.services.domains import (
        COLUMN_NAMES,
        CONTROLLERS,
        DOMAINS,
        RELATIONSHIPS,
        Staged,
        _row_values,
        serial_of,
        stored_record,
    )

    operator = _actor(LARGE_OPERATOR)
    installed = datetime.now(UTC) - timedelta(days=60)
    await platform.domains.create(_stove_spec(1, customers[0], installed), operator)
    protocol = await platform.protocols.get(STOVE_PROTOCOL)
    for start in range(2, stoves + 1, BULK_CHUNK):
        numbers = range(start, min(start + BULK_CHUNK, stoves + 1))
        async with platform.ledger.write() as write:
            now = utcnow()
            domains, controllers, edges = [], [], []
            for n in numbers:
                spec = _stove_spec(n, customers[n - 1], installed)
                did = stove_did(n)
                values = _row_values(
                    did,
                    spec.type,
                    protocol,
                    spec,
                    spec.controller,
                    None,
                    serial_of(spec.properties),
                    now,
                )
                values["seq"] = await write.next_seq(Domain.seq)
                links = [
                    Staged(source_did=did, type=kind, target_did=target, created_at=now)
                    for kind, targets in spec.relationships.items()
                    for target in targets
                ]
                record = stored_record(Staged(**values), links)
                await write.append("domain.create", did, LARGE_OPERATOR, {"record": record})
                domains.append({COLUMN_NAMES.get(k, k): v for k, v in values.items()})
                controllers += [{"domain_did": did, "controller": c} for c in spec.controller]
                edges += [vars(link) for link in links]
            connection = await write.session.connection()
            await insert_rows(connection, DOMAINS, domains)
            await insert_rows(connection, CONTROLLERS, controllers)
            await insert_rows(connection, RELATIONSHIPS, edges)
    made.first_stove, made.last_stove = stove_did(1), stove_did(stoves)
    for n in range(1, stoves + 1):
        made.regions[region_of(n)] = made.regions.get(region_of(n), 0) + 1
        made.villages[village_of(n)] = made.villages.get(village_of(n), 0) + 1


async def _verify_share(platform: Any, stoves: int, made: LargeProgramme) -> None:
    """One stove in six verified, by the demo's compliance group in one batch proposal of
    exactly those (the services the API's batch route calls)."""
    from twinhub.demo import COMPLIANCE_MEMBERS, GROUP
    from twinhub.services.governance import BatchSelection

    chosen = [stove_did(n) for n in range(1, stoves + 1) if is_verified(n)]
    proposer = _actor(COMPLIANCE_MEMBERS[0])
    proposal = await platform.governance.propose_batch(
        BatchSelection(LARGE_PROJECT, domains=chosen), {"enrolment": "scale"}, GROUP, proposer
    )
    for member in COMPLIANCE_MEMBERS[:2]:
        await platform.governance.vote(proposal["id"], "yes", _actor(member))
    await platform.governance.execute_all(proposal["id"], proposer)
    made.verified = len(chosen)


async def _claims(platform: Any, stoves: int, made: LargeProgramme) -> None:
    """A claim collection of the large project and a claim about one stove in fifty
    (a month each): most pending, some flagged with a reason, some rejected."""
    from twinhub.demo import CLAIM_PROTOCOL, ORACLE, ORACLE_OPERATOR
    from twinhub.services.claims import CollectionSpec

    operator = _actor(LARGE_OPERATOR)
    collection = await platform.claims.collections.create_collection(
        CollectionSpec(
            project=LARGE_PROJECT,
            protocol=CLAIM_PROTOCOL,
            evaluators=[ORACLE],
            name="Scale usage reports",
        ),
        operator,
    )
    month = {"periodStart": "2026-01-01T00:00:00Z", "periodEnd": "2026-02-01T00:00:00Z"}
    numbers = [n for n in range(1, stoves + 1) if n % 50 == 3]
    ids: list[str] = []
    for start in range(0, len(numbers), CONCURRENT_CREATES):
        views = await asyncio.gather(
            *(
                platform.claims.submissions.submit(
                    collection["id"],
                    {"reportType": "cooking", "mealsCooked": 40 + n % 50, **month},
                    operator,
                    asset=stove_did(n),
                    claim_id=f"scale-claim-{n:05d}",
                )
                for n in numbers[start : start + CONCURRENT_CREATES]
            )
        )
        ids += [view["id"] for view in views]
    counts = {"pending": len(ids)}
    evaluator = _actor(ORACLE_OPERATOR)
    for index, claim in enumerate(ids):
        if index % 5 == 1:
            await platform.claims.evaluations.evaluate(
                claim, "flagged", evaluator, "Meals exceed the stove's daily capacity"
            )
            counts["flagged"] = counts.get("flagged", 0) + 1
        elif index % 5 == 2:
            await platform.claims.evaluations.evaluate(
                claim, "rejected", evaluator, "No metered cooking in that month"
            )
            counts["rejected"] = counts.get("rejected", 0) + 1
        else:
            continue
        counts["pending"] -= 1
    made.claims = counts
    made.flagged_claim = ids[1]
    made.pending_claim = ids[0]


async def _telemetry(platform: Any, stoves: int, made: LargeProgramme) -> None:
    """Each stove's device state (last reading: one in four in the last minutes, the others
    days ago) and the project's day rollups for the last 30 days, in bulk."""
    from twinhub.db.bulk import insert_rows
    from twinhub.db.models import TelemetryDevice, TelemetryRollup
    from twinhub.mrv.rollups import ENERGY, SESSIONS
    from twinhub.telemetry.wide import blob, encode

    now = datetime.now(UTC).replace(microsecond=0)
    devices = []
    for n in range(1, stoves + 1):
        last = now - (timedelta(minutes=n % 50) if is_online(n) else timedelta(days=2 + n % 9))
        devices.append(
            {
                "did": stove_did(n),
                "last_time": last,
                "last_seq": 1000 + n,
                "latest": {"energyKwh": 0.12, "temperatureC": 88.0},
                "meter": 100.0 + n % 900,
                "readings": 1000,
                "updated_at": last,
            }
        )
    today = now.replace(hour=0, minute=0, second=0)
    rollups = []
    for back in range(1, 31):
        day = today - timedelta(days=back)
        sessions = stoves * (1.5 + (back % 7) / 10)
        kwh = sessions * (0.3 + (back % 5) / 20)  # energy per session varies by the day
        figures = {
            field_name: (stoves, round(total, 3), 0.0, round(total / stoves * 3, 3))
            for field_name, total in ((ENERGY, kwh), (SESSIONS, sessions))
        }
        fields, cells = encode(figures)
        rollups.append(
            {
                "scope": LARGE_PROJECT,
                "interval": "day",
                "bucket": day,
                "fields": fields,
                "cells": blob(cells),
            }
        )
    async with platform.sessionmaker.begin() as session:
        connection = await session.connection()
        for start in range(0, len(devices), 5000):
            await insert_rows(connection, TelemetryDevice.__table__, devices[start : start + 5000])
        await insert_rows(connection, TelemetryRollup.__table__, rollups)
    made.online = sum(1 for n in range(1, stoves + 1) if is_online(n))


async def _problems(platform: Any, stoves: int, customers: list[str], made: LargeProgramme) -> None:
    """Problems households reported over USSD, through the stove-care service."""
    count = 0
    for n in range(7, stoves + 1, max(stoves // 150, 1)):
        await platform.stove_care.report_problem(
            customers[n - 1], stove_did(n), PROBLEM_KINDS[n % len(PROBLEM_KINDS)]
        )
        count += 1
    made.problems = count


async def _webhook(platform: Any, made: LargeProgramme) -> None:
    view = await platform.events.webhooks.create(
        "http://127.0.0.1:9/twinhub-hooks",
        ["claim.evaluated", "stove.problem_reported"],
        "programme office",
        _actor("did:ixo:org/scale-admin", "admin"),
    )
    made.webhook = view["id"]


def main() -> None:
    """`python -m tests.support.large_programme [stoves]`: build one into a temp folder
    and print the facts and the time it took."""
    import sys

    from twinhub.logging import configure_logging

    configure_logging("warning", "console")
    stoves = int(sys.argv[1]) if len(sys.argv) > 1 else 30_000
    folder = Path(tempfile.mkdtemp(prefix="twinhub-large-"))
    made = _in_thread(_build(f"sqlite:///{folder / 'twinhub.db'}", stoves))
    print(json.dumps({**asdict(made), "villages": len(made.villages)}, indent=1, default=str))
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
