"""One clean-cooking programme, end to end, through all three interfaces over real sockets.

`twinhub serve` runs as its own process in production mode, as an operator would run it:
USSD, registry API (with GraphQL), protocol node and chain REST gateway, each on its own
loopback port, on both backends. API keys come from `twinhub keys create` as the README
says. The programme is then built only through the interfaces:

- the operator registers an organisation, a project and a stove; an oracle registers;
- the default compliance group (from settings) verifies the project by proposal and vote;
- a customer opens an account on USSD, is given the stove, and reports cooking on it;
- the oracle approves the claim through the API; its credential verifies;
- the credits show on USSD, in GraphQL and through the gateway.

After every step the same facts are read back through every interface and compared.
"""

from __future__ import annotations

import calendar
import hashlib
import json
import os
import re
import secrets
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import base58
import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from tests.conftest import (
    REDIS_URL,
    Backend,
    UssdClient,
    free_port,
    fresh_postgres_database,
    new_phone,
    new_session_id,
    unique,
)
from tests.integration.cli.test_cli import wait_healthy, wait_upstream_serving
from tests.support.cli import TWINHUB, run_cli, run_process
from tests.support.served import START_SECONDS
from tests.support.ussd_flows import Journey, create_account, log_in
from tests.support.workflow_world import Actor, issue_through, workflow_over
from twinhub.kernel.identifiers import customer_did
from twinhub.security.signing import Issuer

PIN = "40517"
FOOTER = "0. Back\n*. Exit"
CLAIM_PROTOCOL = "did:ixo:protocol/clean-cooking-claim"
# The month a phone report covers (the one just ended), as the English menus name it.
REPORTED_MONTH = calendar.month_name[(datetime.now(UTC).replace(day=1) - timedelta(days=1)).month]
SENT = re.compile(
    rf"^CON Report for {REPORTED_MONTH} sent\. Claim ([0-9a-f]{{6}}) is pending\."
    r"\n0\. Back\n\*\. Exit$"
)
GRAPHQL_FACTS = """
query($project: String!, $stove: String!, $holder: String!) {
  project: entity(id: $project) { entityVerified registryStatus controller version }
  stove: entity(id: $stove) { entityVerified registryStatus controller version }
  claims(asset: $stove) { nodes { id status agent amount credential } }
  balances(holder: $holder) { token amount retired }
}
"""


def did_key(seed_hex: str) -> str:
    """The did:key of an Ed25519 seed, derived here without twinhub's code."""
    public = (
        Ed25519PrivateKey.from_private_bytes(bytes.fromhex(seed_hex))
        .public_key()
        .public_bytes(Encoding.Raw, PublicFormat.Raw)
    )
    return "did:key:z" + base58.b58encode(b"\xed\x01" + public).decode()


@dataclass
class Served:
    """A `twinhub serve` process: its addresses, its environment, and what it logged."""

    process: subprocess.Popen[str]
    env: dict[str, str]
    ussd: str
    registry: str
    gateway: str
    secrets: list[str] = field(default_factory=list)
    made_keys: int = 0

    def key(self, did: str, *roles: str) -> str:
        """An API key for `did` (reader, writer unless `roles` name others), made the
        README's way: by the CLI. The first key of a served process is made by a
        `twinhub keys create` process of its own, as an operator's shell makes it; later ones
        by the same command in this process (tests/support/cli.py), which spares each
        ~1.5 s of CPU importing the platform again for what the first already showed."""
        asked = [flag for role in roles or ("reader", "writer") for flag in ("-r", role)]
        run = run_cli if self.made_keys else run_process
        made = run("keys", "create", did, *asked, env=self.env)
        self.made_keys += 1
        assert made.returncode == 0, made.stderr
        token = made.stdout.strip().splitlines()[-1]
        self.secrets.append(token)
        return token


@contextmanager
def serving(env: dict[str, str]) -> Iterator[Served]:
    ports = {name: free_port() for name in ("ussd", "registry", "node", "gateway")}
    process = subprocess.Popen(
        [
            *TWINHUB,
            "serve",
            "--port",
            str(ports["ussd"]),
            "--registry-port",
            str(ports["registry"]),
            "--node-port",
            str(ports["node"]),
            "--gateway-port",
            str(ports["gateway"]),
        ],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    served = Served(
        process=process,
        env=env,
        ussd=f"http://127.0.0.1:{ports['ussd']}",
        registry=f"http://127.0.0.1:{ports['registry']}",
        gateway=f"http://127.0.0.1:{ports['gateway']}",
    )
    try:
        for url in (served.ussd, served.registry):
            # A cold start imports the whole platform in three processes: on a loaded
            # machine that alone took 25-40 s, beside a second xdist worker over 60 s.
            answer = wait_healthy(f"{url}/health", process, deadline=START_SECONDS)
            assert answer.status_code == 200
        wait_upstream_serving(served.gateway, process)
        yield served
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    for secret in served.secrets:  # keys, PINs and seeds never reach the logs
        # As a whole token: a five-digit PIN also occurs inside timestamps' microseconds.
        alone = re.compile(rf"(?<![0-9A-Za-z]){re.escape(secret)}(?![0-9A-Za-z])")
        assert not alone.search(out) and not alone.search(err), secret


@pytest.fixture
def session_store(backend: Backend, request: pytest.FixtureRequest) -> dict[str, str]:
    """The session store settings of the backend (asked for outside the event loop)."""
    if backend.sessions != "redis":
        return {}
    run_prefix = request.getfixturevalue("redis_prefix")
    return {"REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": f"{run_prefix}e2e:"}


@pytest.fixture
async def served(
    backend: Backend, session_store: dict[str, str], tmp_path: Path
) -> AsyncIterator[Served]:
    members = [f"did:ixo:org/{unique('auditor')}" for _ in range(2)]
    issuer_seed, pin_key, bootstrap = (secrets.token_hex(32) for _ in range(3))
    env = {
        "ENVIRONMENT": "production",
        "DATA_DIR": str(tmp_path / "data"),
        "LOG_FORMAT": "json",
        "PIN_ENCRYPTION_KEY": pin_key,
        "CREDENTIAL_ISSUER_KEY": issuer_seed,
        "TWINHUB_BOOTSTRAP_API_KEY": bootstrap,
        "COMPLIANCE_GROUP_MEMBERS": ",".join(members),
        "COMPLIANCE_GROUP_THRESHOLD": "absolute_count:2",
        # A person evaluates here (the oracle's own end-to-end test is
        # tests/integration/oracle/test_oracle.py).
        "ORACLE_ENABLED": "false",
    }
    async with AsyncExitStack() as stack:
        if backend.database == "postgresql":
            env["DATABASE_URL"] = await stack.enter_async_context(fresh_postgres_database("e2e"))
        env |= session_store
        with serving(env) as running:
            running.secrets += [issuer_seed, pin_key, bootstrap, PIN]
            yield running


@dataclass
class Interfaces:
    """Clients of the served process, one per interface (and per key on the registry)."""

    served: Served
    ussd: UssdClient  # a handset behind a telecom gateway: one HTTP request a screen
    gateway: httpx.AsyncClient
    stack: AsyncExitStack

    async def registry(self, did: str, *roles: str) -> httpx.AsyncClient:
        client = httpx.AsyncClient(
            base_url=self.served.registry,
            headers={"Authorization": f"Bearer {self.served.key(did, *roles)}"},
            timeout=30,
        )
        return await self.stack.enter_async_context(client)

    async def actor(self, *roles: str) -> Actor:
        """A role holder of the verification workflow: a did:key of its own, and its
        client (tests/support/workflow_world)."""
        key = Issuer(os.urandom(32))
        return Actor(key, await self.registry(key.did, "reader", *roles))

    async def chain(self, path: str) -> dict[str, Any]:
        return (await self.chain_at(path))[1]

    async def chain_at(self, path: str) -> tuple[int, dict[str, Any]]:
        """A gateway answer and the ledger height it was read at."""
        response = await self.gateway.get(path)
        assert response.status_code == 200, (path, response.text)
        return int(response.headers["x-cosmos-block-height"]), response.json()


async def created(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await client.post(path, json=body)
    assert response.status_code == 201, response.text
    return response.json()


async def graphql(client: httpx.AsyncClient, query: str, **variables: Any) -> dict[str, Any]:
    response = await client.post("/graphql", json={"query": query, "variables": variables})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert "errors" not in answer, answer
    return answer["data"]


async def same_domain_everywhere(
    ui: Interfaces, reader: httpx.AsyncClient, did: str
) -> dict[str, Any]:
    """The domain as the registry, GraphQL and the gateway show it: they must agree."""
    record = (await reader.get(f"/v1/domains/{did}")).json()
    data = await graphql(
        reader,
        "query($id: String!) { entity(id: $id) "
        "{ entityVerified registryStatus controller version } }",
        id=did,
    )
    assert data["entity"] == {
        "entityVerified": record["verified"],
        "registryStatus": record["status"],
        "controller": record["controller"],
        "version": record["version"],
    }
    height, chain = await ui.chain_at(f"/ixo/entity/{did}")
    history = (await reader.get(f"/v1/domains/{did}/history")).json()["items"]
    assert history[-1]["version"] == record["version"]
    assert history[-1]["height"] <= height  # the gateway reads the ledger the registry wrote
    assert chain["entity"]["id"] == did
    assert chain["entity"]["entity_verified"] is record["verified"]
    assert chain["entity"]["metadata"]["version_id"] == str(record["version"])
    assert chain["iidDocument"]["controller"] == record["controller"]
    assert await ui.chain(f"/ixo/entity/{did}/verified") == {"entity_verified": record["verified"]}
    return record


async def same_claim_everywhere(
    ui: Interfaces, reader: httpx.AsyncClient, claim_id: str
) -> dict[str, Any]:
    """The claim through the registry, GraphQL and the gateway (one and in the list)."""
    record = (await reader.get(f"/v1/claims/{claim_id}")).json()
    data = await graphql(
        reader,
        "query($id: String!) { claim(id: $id) { status agent asset amount credential } }",
        id=claim_id,
    )
    assert data["claim"] == {
        key: record[key] for key in ("status", "agent", "asset", "amount", "credential")
    }
    chain = (await ui.chain(f"/ixo/claims/claim/{claim_id}"))["claim"]
    assert chain["claim_id"] == claim_id
    assert chain["agent_did"] == record["agent"]
    assert chain["collection_id"] == str(record["collection"])
    evaluation = chain["evaluation"]
    if record["status"] == "pending":
        assert evaluation is None and chain["evaluation_history"] == []
    else:
        assert evaluation["status"] == record["status"].upper()
        assert evaluation["oracle"] == record["oracle"]
        amount = [{"denom": "CARBON", "amount": str(record["amount"])}]
        assert evaluation["amount"] == (amount if record["amount"] else [])
    # The newest claim heads the reversed list (ixo's ClaimList has no filters).
    listed = await ui.chain("/ixo/claims/claims?pagination.reverse=true&pagination.limit=1")
    assert listed["claims"] == [chain]
    return record


async def test_a_clean_cooking_programme_from_phone_to_credit(served: Served) -> None:
    operator = f"did:ixo:org/{unique('jiko-operator')}"
    oracle_operator = f"did:ixo:org/{unique('emissions-oracle')}"
    auditors = list(filter(None, served.env["COMPLIANCE_GROUP_MEMBERS"].split(",")))
    async with AsyncExitStack() as stack:
        ui = Interfaces(
            served=served,
            ussd=UssdClient(
                await stack.enter_async_context(httpx.AsyncClient(base_url=served.ussd))
            ),
            gateway=await stack.enter_async_context(
                httpx.AsyncClient(base_url=served.gateway, timeout=30)
            ),
            stack=stack,
        )
        ops = await ui.registry(operator)
        oracle_api = await ui.registry(oracle_operator)
        auditor_apis = [await ui.registry(did) for did in auditors]

        # The operator registers the programme; the oracle registers itself.
        organisation = await created(
            ops,
            "/v1/domains",
            {
                "type": "Organisation",
                "class": "did:ixo:protocol/organisation",
                "metadata": {"name": "Jiko Cooperative"},
            },
        )
        project = await created(
            ops,
            "/v1/domains",
            {
                "type": "Project",
                "class": "did:ixo:protocol/project",
                "metadata": {"name": "Clean Cooking Kisumu"},
                "relationships": {"implementedBy": [organisation["did"]]},
            },
        )
        oracle = await created(
            oracle_api,
            "/v1/domains",
            {
                "type": "Oracle",
                "class": "did:ixo:protocol/oracle",
                "metadata": {"name": "Emissions Oracle"},
            },
        )
        assert (await same_domain_everywhere(ui, ops, project["did"]))["verified"] is False

        # A customer opens an account on a feature phone and is given a stove.
        phone = new_phone()
        customer_id = await create_account(ui.ussd, phone, "Akinyi Otieno", PIN)
        owner = customer_did(customer_id)
        stove = await created(
            ops,
            "/v1/domains",
            {
                "type": "Device",
                "class": "did:ixo:protocol/clean-cooking",
                "metadata": {"name": "Jiko K1"},
                "properties": {
                    "fuelType": "electric",
                    "serialNumber": unique("KSM"),
                    "efficiency": 0.85,
                    "householdSize": 5,
                    "ownerCustomerId": customer_id,
                    # A meter within the methodology's accuracy threshold, calibrated: its
                    # register counts as read (no conservativeness adjustment).
                    "meter": {
                        "model": "KSM-M1",
                        "serial": unique("M"),
                        "accuracyClass": "1",
                        "maxPermissibleError": 0.01,
                        "calibratedOn": "2026-01-05",
                        "calibrationDue": "2036-01-05",
                        "certificate": "sha256:"
                        + hashlib.sha256(b"KSM-M1 calibration").hexdigest(),
                        "registerMax": None,
                    },
                },
                "controller": [operator],
                "relationships": {"project": [project["did"]]},
            },
        )
        seen = await same_domain_everywhere(ui, ops, stove["did"])
        assert seen["properties"]["ownerCustomerId"] == customer_id
        journey, menu = await log_in(ui.ussd, phone, customer_id, PIN)
        assert menu.startswith("CON Hello Akinyi\n")
        listing = f"CON My Stoves\n1. Jiko K1 (active, unverified)\n{FOOTER}"
        assert await journey.send("4") == listing
        await journey.send("1")
        await journey.send("1")  # Report cooking
        assert (
            await journey.send("3")
            == f"CON Report 3 meals in {REPORTED_MONTH} for Jiko K1?\n1. Confirm\n{FOOTER}"
        )
        refused = await journey.send("1")
        assert refused == f"CON Project not verified yet.\n{FOOTER}"

        # The compliance group from the settings verifies the project by a real vote.
        async def verify(did: str) -> None:
            proposal = await created(
                auditor_apis[0],
                f"/v1/domains/{did}/verification-proposals",
                {"action": "verify", "evidence": {"audit": "site visit, 2026-11-20"}},
            )
            for api in auditor_apis:
                voted = await api.post(
                    f"/v1/proposals/{proposal['id']}/votes", json={"option": "yes"}
                )
                assert voted.status_code == 200, voted.text
            executed = await auditor_apis[1].post(f"/v1/proposals/{proposal['id']}/execute")
            assert executed.status_code == 200, executed.text

        await verify(project["did"])
        assert (await same_domain_everywhere(ui, ops, project["did"]))["verified"] is True
        # ...and its stoves in one batch proposal: only a verified stove's claims mint.
        batch = await created(
            auditor_apis[0],
            f"/v1/domains/{project['did']}/batch-verification-proposals",
            {"protocol": "did:ixo:protocol/clean-cooking", "evidence": {"enrolment": "KSM"}},
        )
        assert batch["package"]["batch"]["count"] == 1
        for api in auditor_apis:
            voted = await api.post(f"/v1/proposals/{batch['id']}/votes", json={"option": "yes"})
            assert voted.status_code == 200, voted.text
        executed = await auditor_apis[1].post(f"/v1/proposals/{batch['id']}/execute")
        progress = executed.json()["progress"]
        assert progress == {"done": 1, "total": 1, "stopped": None}, executed.text
        assert (await same_domain_everywhere(ui, ops, stove["did"]))["verified"] is True
        # Its meter is enrolled, and it reports a month of cooking.
        enrolled = await created(ops, f"/v1/domains/{stove['did']}/device-tokens", {})
        readings = []
        register = 0.0  # the meter's cumulative register, reported with every reading
        # The phone report below speaks for the month just ended: 30 days of cooking in it
        # (a February holds them in its 28 or 29 days).
        this_month = datetime.now(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        last_month = (this_month - timedelta(days=1)).replace(day=1)
        days_in_it = (this_month - last_month).days
        for day in range(30):
            base = last_month + timedelta(days=min(day, days_in_it - 1))
            for hour in (7, 18):
                at = base + timedelta(hours=hour)
                kwh = 0.5 + 0.05 * (day % 3 - 1)  # 0.9, 1.0, 1.1 kWh a day: 30 in all
                readings += [
                    {
                        "seq": day * 100 + hour,
                        "time": at.isoformat(),
                        "values": {"session": "start", "meterKwh": round(register, 6)},
                    },
                    {
                        "seq": day * 100 + hour + 1,
                        "time": (at + timedelta(minutes=40)).isoformat(),
                        "values": {
                            "session": "end",
                            "energyKwh": kwh,
                            "meterKwh": round(register + kwh, 6),
                        },
                    },
                ]
                register += kwh
        async with httpx.AsyncClient(
            base_url=ui.served.registry, headers={"Authorization": f"Bearer {enrolled['token']}"}
        ) as meter:
            sent_readings = await meter.post(
                f"/v1/domains/{stove['did']}/telemetry", json={"readings": readings}
            )
            assert sent_readings.status_code in (200, 202), sent_readings.text
        collection = await created(
            ops,
            "/v1/claim-collections",
            {"project": project["did"], "protocol": CLAIM_PROTOCOL, "evaluators": [oracle["did"]]},
        )
        chain_collection = (await ui.chain(f"/ixo/claims/collection/{collection['id']}"))[
            "collection"
        ]
        assert chain_collection["entity"] == project["did"]
        assert chain_collection["state"] == "OPEN"

        # The owner reports 14 meals on the stove: a confirmation, then a pending claim.
        journey = Journey(ui.ussd, phone, new_session_id())
        await journey.dial()
        for answer in ("2", "1", customer_id, PIN):
            await journey.send(answer)
        listing = f"CON My Stoves\n1. Jiko K1 (active, verified)\n{FOOTER}"
        assert await journey.send("4") == listing
        assert (await journey.send("1")).startswith("CON Jiko K1\nactive, project verified\n")
        await journey.send("1")
        assert await journey.send("14") == (
            f"CON Report 14 meals in {REPORTED_MONTH} for Jiko K1?\n1. Confirm\n{FOOTER}"
        )
        sent = SENT.match(await journey.send("1"))
        assert sent, "the report was not sent"
        pending = (
            await oracle_api.get(
                "/v1/claims", params={"collection": collection["id"], "status": "pending"}
            )
        ).json()["items"]
        [claim] = pending
        assert claim["id"].startswith(sent.group(1))
        assert {"reportType": "cooking", "mealsCooked": 14, "channel": "ussd"}.items() <= (
            claim["data"].items()  # and the month it covers
        )
        record = await same_claim_everywhere(ui, ops, claim["id"])
        assert (record["status"], record["agent"], record["asset"]) == (
            "pending",
            owner,
            stove["did"],
        )
        for _ in range(3):
            await journey.send("0")  # the stove, the list, the main menu
        day = datetime.fromisoformat(record["submittedAt"]).strftime("%d/%m/%y")
        assert await journey.send("5") == (
            f"CON My Claims\n{sent.group(1)} {day} pending\n{FOOTER}"
        )
        await journey.send("0")
        assert await journey.send("6") == f"CON My Credits\nNo credits yet.\n{FOOTER}"
        await journey.send("0")

        # The oracle approves through the registry API; the credits are what the
        # methodology computes from the month of telemetry (30 kWh: worked example 1).
        approved = await oracle_api.post(
            f"/v1/claims/{claim['id']}/evaluations", json={"status": "approved"}
        )
        assert approved.status_code == 200, approved.text
        record = await same_claim_everywhere(ui, ops, claim["id"])
        amount = 67984  # 0.06798450078 tCO2e in millionths, rounded down
        assert (record["status"], record["oracle"], record["amount"]) == (
            "approved",
            oracle["did"],
            amount,
        )

        # Its credential is signed by the platform's issuer key, and verifies; a forged copy
        # does not.
        credential = (await ops.get(f"/v1/claims/{claim['id']}/credential")).json()
        assert credential["id"] == record["credential"]
        assert credential["issuer"] == did_key(served.env["CREDENTIAL_ISSUER_KEY"])
        subject = json.dumps(credential["credentialSubject"])
        assert claim["id"] in subject and stove["did"] in subject
        verified = (await ops.post("/v1/credentials/verify", json=credential)).json()
        assert verified["verified"] is True and verified["issuedByThisPlatform"] is True
        forged = json.loads(
            json.dumps(credential).replace('"mealsCooked": 14', '"mealsCooked": 40')
        )
        assert forged != credential
        assert (await ops.post("/v1/credentials/verify", json=forged)).json()["verified"] is False
        chain_claim = (await ui.chain(f"/ixo/claims/claim/{claim['id']}"))["claim"]
        assert chain_claim["evaluation"]["verification_proof"] == credential["id"]

        # The approval is a draft figure: nothing is minted until the registry issues the
        # project's monitoring period that carries the claim (issue #29).
        assert await journey.send("6") == f"CON My Credits\nNo credits yet.\n{FOOTER}"
        await journey.send("0")
        assert await journey.send("5") == (
            f"CON My Claims\n{sent.group(1)} {day} approved, not issued\n{FOOTER}"
        )
        await journey.send("0")
        flow = await workflow_over(ops, project["did"], ui.actor)
        last_day = date.fromisoformat(claim["data"]["periodEnd"][:10]) - timedelta(days=1)
        issued = await issue_through(flow, ops, last_day)
        assert [c["claim"] for c in issued["claims"]] == [claim["id"]]

        # The credits: on the phone, in GraphQL, in the registry and through the gateway.
        assert await journey.send("6") == f"CON My Credits\nCARBON: 0.067984\n{FOOTER}"
        await journey.send("0")
        assert await journey.send("5") == (
            f"CON My Claims\n{sent.group(1)} {day} credits issued\n{FOOTER}"
        )
        facts = await graphql(
            ops, GRAPHQL_FACTS, project=project["did"], stove=stove["did"], holder=owner
        )
        assert facts["balances"] == [{"token": "CARBON", "amount": amount, "retired": 0}]
        assert facts["claims"]["nodes"] == [
            {
                "id": claim["id"],
                "status": "approved",
                "agent": owner,
                "amount": amount,
                "credential": credential["id"],
            }
        ]
        assert facts["project"]["entityVerified"] is True
        assert facts["stove"]["controller"] == [operator]  # the household owns, by property
        balances = (await ops.get(f"/v1/balances/{owner}")).json()
        assert [(b["token"], b["amount"]) for b in balances["balances"]] == [("CARBON", amount)]
        tokens = await ui.chain(f"/ixo/token/minter/{credential['issuer']}")
        [carbon] = [t for t in tokens["tokenDocs"] if t["name"] == "CARBON"]
        assert carbon["supply"] == str(amount)
        assert carbon["class"] == CLAIM_PROTOCOL
        assert (await ops.get("/v1/credits/CARBON")).json()["supply"] == amount
        assert (await journey.exit()) == "END Thank you for using twinhub. Goodbye."
