"""Batch stove verification: one governance proposal verifying every stove of a project.

Seeds `--stoves` stoves of one project with bulk SQL (what is measured is verification, not
creation), then times, through the services the API routes call: the batch proposal (its
filter evaluated and the DIDs fixed in `proposal_items` by one INSERT ... SELECT), two
votes, and the execution, which verifies the stoves in chunks of `--chunk`, each chunk one
ledger write with a `domain.verify` transaction per stove. Checks afterwards that every
stove is verified and that the ledger's hash chain verifies. Pinned to one core; prints
stoves per second and CPU seconds per 1,000 stoves. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.ussd import pinned_to, run_metadata

GOAL_SECONDS = 300  # 100,000 stoves verified within five minutes on one core
RESULTS = Path(__file__).resolve().parent / "results"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stoves", type=int, default=100_000)
    parser.add_argument("--chunk", type=int, default=1000, help="stoves per ledger write")
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--cpu", type=int, default=None, help="core to pin to (default: first)")
    parser.add_argument("--tag", default=time.strftime("%Y%m%d-%H%M%S"))


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _seed(platform: Any, project: str, stoves: int) -> None:
    """`stoves` clean-cooking stoves linked to `project`, inserted in bulk."""
    from sqlalchemy import func, insert, select

    from twinhub.db.models import Domain, DomainController, Relationship
    from twinhub.kernel.clock import utcnow

    now = utcnow()
    async with platform.sessionmaker() as session:
        base = int(await session.scalar(select(func.max(Domain.seq))) or 0)
        for start in range(0, stoves, 5000):
            numbers = range(start, min(start + 5000, stoves))
            dids = [f"did:ixo:entity/bench-stove-{n:06d}" for n in numbers]
            await session.execute(
                insert(Domain),
                [
                    {
                        "did": did,
                        "seq": base + n + 1,
                        "type": "Device",
                        "class_did": "did:ixo:protocol/clean-cooking",
                        "twin_class": "physical",
                        "parent_did": None,
                        "controller": ["did:ixo:org/bench"],
                        "services": [],
                        "credentials": [],
                        "meta": {"name": f"Stove {n}"},
                        "properties": {"serialNumber": f"BV-{n:06d}", "fuelType": "lpg"},
                        "status": "active",
                        "verified": False,
                        "version": 1,
                        "created_at": now,
                        "updated_at": now,
                        "serial": f"BV-{n:06d}",
                    }
                    for n, did in zip(numbers, dids, strict=True)
                ],
            )
            await session.execute(
                insert(DomainController),
                [{"domain_did": did, "controller": "did:ixo:org/bench"} for did in dids],
            )
            await session.execute(
                insert(Relationship),
                [
                    {"source_did": did, "type": "project", "target_did": project, "created_at": now}
                    for did in dids
                ],
            )
        await session.commit()


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    from sqlalchemy import func, select

    from twinhub.db.models import Domain
    from twinhub.kernel.principals import Principal
    from twinhub.logging import configure_logging
    from twinhub.platform import Platform
    from twinhub.services.domains import DomainSpec
    from twinhub.services.governance import BatchSelection, GroupSpec
    from twinhub.settings import Settings

    workdir = Path(tempfile.mkdtemp(prefix="twinhub-bench-verify-"))
    database_url = None
    if args.database == "postgresql":
        from bench.postgres import create_postgres_database

        database_url = await create_postgres_database(args.postgres_url, "ver" + args.tag[-6:])
    configure_logging("warning", "console")
    platform = Platform(
        Settings(
            environment="development",
            data_dir=workdir,
            database_url=database_url,
            log_level="warning",
        )
    )
    await platform.start()
    members = [Principal(f"did:ixo:org/bench-member-{n}", frozenset({"writer"})) for n in (1, 2)]
    admin = Principal("did:ixo:org/bench", frozenset({"admin", "writer"}))
    result: dict[str, Any] = {"database": args.database, "stoves": args.stoves, "chunk": args.chunk}
    try:
        group = await platform.governance.create_group(
            GroupSpec(
                name="Bench compliance",
                members={m.did: 1 for m in members},
                threshold_kind="absolute_count",
                threshold=2,
                quorum=None,
                voting_period_seconds=3600,
            ),
            admin,
        )
        project = await platform.domains.create(
            DomainSpec(
                type="Project", protocol="did:ixo:protocol/project", metadata={"name": "Bench"}
            ),
            admin,
        )
        began = time.monotonic()
        await _seed(platform, project["did"], args.stoves)
        result["seed_seconds"] = round(time.monotonic() - began, 2)
        print(f"seeded {args.stoves} stoves in {result['seed_seconds']} s")
        platform.governance.batch_chunk = args.chunk
        began, cpu = time.monotonic(), _cpu()
        proposal = await platform.governance.propose_batch(
            BatchSelection(project["did"], protocol="did:ixo:protocol/clean-cooking"),
            {"audit": "bench"},
            group["did"],
            members[0],
        )
        result["propose_seconds"] = round(time.monotonic() - began, 2)
        result["propose_cpu_seconds"] = round(_cpu() - cpu, 2)
        for member in members:
            await platform.governance.vote(proposal["id"], "yes", member)
        began, cpu = time.monotonic(), _cpu()
        done = await platform.governance.execute_all(proposal["id"], members[0])
        seconds, cpu_seconds = time.monotonic() - began, _cpu() - cpu
        result["execute_seconds"] = round(seconds, 2)
        result["execute_cpu_seconds"] = round(cpu_seconds, 2)
        result["stoves_per_second"] = round(args.stoves / seconds, 1)
        result["cpu_ms_per_stove"] = round(cpu_seconds * 1000 / args.stoves, 3)
        result["progress"] = done["progress"]
        async with platform.sessionmaker() as session:
            verified = await session.scalar(
                select(func.count()).select_from(Domain).where(Domain.verified.is_(True))
            )
        began = time.monotonic()
        ledger = await platform.ledger.verify()
        result["ledger_verify_seconds"] = round(time.monotonic() - began, 2)
        result["verified"] = int(verified or 0)
        result["ledger_ok"] = ledger.ok
        if done["status"] != "executed" or result["verified"] < args.stoves or not ledger.ok:
            raise SystemExit(f"verification incomplete: {result}")
    finally:
        await platform.stop()
        if database_url is not None:
            from bench.postgres import drop_postgres_database

            await drop_postgres_database(args.postgres_url, database_url)
    return result


def run(args: argparse.Namespace) -> int:
    cpu = args.cpu if args.cpu is not None else sorted(os.sched_getaffinity(0))[0]
    with pinned_to(cpu):
        result = asyncio.run(bench(args))
    result["goal_seconds"] = GOAL_SECONDS
    result["load_average"] = os.getloadavg()
    result["meta"] = run_metadata((cpu, cpu), args.tag)
    total = result["propose_seconds"] + result["execute_seconds"]
    print(
        f"{args.stoves} stoves ({args.database}): proposal {result['propose_seconds']} s, "
        f"execution {result['execute_seconds']} s ({result['stoves_per_second']}/s, "
        f"{result['cpu_ms_per_stove']} ms CPU per stove), ledger verified "
        f"{result['ledger_ok']}; {total:.1f} s against the {GOAL_SECONDS} s goal; "
        f"load average {result['load_average'][0]:.1f}"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"verify-{args.database}.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0 if total <= GOAL_SECONDS else 1
