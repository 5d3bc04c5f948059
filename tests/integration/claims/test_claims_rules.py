"""Claims, credentials and credits over HTTP on both backends (issue 4's rules).

1. verified only: collections, submissions and evaluations need a project that governance
   verified and nobody deactivated; re-verifying opens it again;
2. collections: oracle evaluators, a claim protocol with a verifier role, who may create,
   quota, window, state, lists and counts;
3. claims: data follows the protocol, JSON-safe integers, the asset is the project's, who
   may submit, client-chosen ids, Idempotency-Key;
4. evaluations: who evaluates, reason and amount, final and re-evaluable outcomes, history;
5. credentials: issued on approval, the same document everywhere, verified by the API and
   independently (eddsa-jcs-2022 re-implemented here), tampering detected, other issuers;
6. credits: owner, transfers, custody, insufficient balances, retirement, supply, ledger;
8. the default compliance group from settings.
(7, concurrency, is in test_claims_concurrency.py.)
"""

from __future__ import annotations

import copy
import hashlib
import os
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from pydantic import ValidationError

from tests.conftest import (
    BOOTSTRAP_KEY,
    Backend,
    Registry,
    fresh_postgres_database,
    running_registry,
    unique,
)
from tests.integration.registry.test_registry_rules import error_of, every_page
from tests.support.claims_world import CLAIM_PROTOCOL, METERED_AMOUNT, World, metered_claim
from tests.support.workflow_world import issue_claims
from twinhub.security.signing import Issuer
from twinhub.services.api_keys import BOOTSTRAP_PRINCIPAL
from twinhub.settings import Settings

DATA = {"reportType": "cooking", "mealsCooked": 42}
STATUSES = ("pending", "approved", "rejected", "flagged", "disputed", "invalidated")
FINAL = ("approved", "rejected", "disputed", "invalidated")
SAFE = 2**53 - 1


# -- helpers -------------------------------------------------------------------------------
def stranger() -> str:
    return f"did:ixo:org/{unique('stranger')}"


def customer() -> str:
    return f"did:ixo:customer/{unique('c')}"


async def submit(
    client: httpx.AsyncClient,
    collection: int,
    data: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    **fields: Any,
) -> httpx.Response:
    body = {"data": DATA if data is None else data, **fields}
    return await client.post(
        f"/v1/claim-collections/{collection}/claims", json=body, headers=headers
    )


async def submitted(client: httpx.AsyncClient, collection: int, **fields: Any) -> dict[str, Any]:
    response = await submit(client, collection, **fields)
    assert response.status_code == 201, response.text
    assert response.headers["location"] == f"/v1/claims/{response.json()['id']}"
    return response.json()


def outcome(status: str) -> dict[str, Any]:
    """A valid evaluation body for `status` under the CARBON protocol (an approval names
    no amount: credits follow from the methodology)."""
    if status == "approved":
        return {"status": status}
    return {"status": status, "reason": f"{status}: meter readings checked"}


async def evaluate(
    client: httpx.AsyncClient, claim: str, status: str, **fields: Any
) -> httpx.Response:
    body = {**outcome(status), **fields} if fields else outcome(status)
    return await client.post(f"/v1/claims/{claim}/evaluations", json=body)


async def evaluated(client: httpx.AsyncClient, claim: str, status: str, **fields: Any) -> dict:
    response = await evaluate(client, claim, status, **fields)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == status
    return response.json()


async def get_json(client: httpx.AsyncClient, path: str, **params: Any) -> Any:
    response = await client.get(path, params=params)
    assert response.status_code == 200, (path, response.text)
    return response.json()


async def counts(registry: Registry, collection: int) -> dict[str, int]:
    return (await get_json(registry.client, f"/v1/claim-collections/{collection}"))["counts"]


async def claim_of(registry: Registry, claim: str) -> dict[str, Any]:
    return await get_json(registry.client, f"/v1/claims/{claim}")


async def claims_in(registry: Registry, collection: int, **filters: str) -> list[dict]:
    return await every_page(
        registry.client, "/v1/claims", collection=collection, limit=3, **filters
    )


async def balance(registry: Registry, holder: str, token: str = "CARBON") -> dict[str, int]:
    held = (await get_json(registry.client, f"/v1/balances/{holder}"))["balances"]
    found = [b for b in held if b["token"] == token]
    assert len(found) <= 1, held
    return {k: found[0][k] for k in ("amount", "retired")} if found else {"amount": 0, "retired": 0}


async def token_state(registry: Registry, token: str = "CARBON") -> dict[str, int]:
    """The token's totals, zeros before anything was ever minted (a fresh database)."""
    response = await registry.client.get(f"/v1/credits/{token}")
    if response.status_code == 404:
        return {"minted": 0, "retired": 0, "supply": 0, "held": 0}
    assert response.status_code == 200, response.text
    return response.json()


async def movements_of(registry: Registry, holder: str) -> list[dict]:
    return await every_page(registry.client, "/v1/credit-movements", holder=holder, limit=2)


def assert_not_verified(response: httpx.Response, state: str = "not verified") -> None:
    error = error_of(response, 409, "domain_not_verified")
    assert "verified domains only" in error["message"], error
    assert state in error["message"], error


def fields_of(response: httpx.Response) -> list[str]:
    error = error_of(response, 422, "validation_failed")
    return [detail["field"] for detail in error["details"]]


async def collection_ids(registry: Registry, project: str) -> list[int]:
    items = await every_page(registry.client, "/v1/claim-collections", project=project, limit=1)
    return [item["id"] for item in items]


async def collection_request(
    client: httpx.AsyncClient, world: World, **fields: Any
) -> httpx.Response:
    body = {
        "project": world.project,
        "protocol": CLAIM_PROTOCOL,
        "evaluators": [world.oracle],
        **fields,
    }
    return await client.post("/v1/claim-collections", json=body)


# -- 1. verified only --------------------------------------------------------------------------


async def test_a_collection_needs_a_verified_project(registry: Registry, world: World) -> None:
    unverified = await world.project_domain(verified=False)
    refused = await collection_request(world.operator_client, world, project=unverified)
    assert_not_verified(refused)
    # Not even an admin may skip governance.
    assert_not_verified(await collection_request(registry.client, world, project=unverified))
    assert await collection_ids(registry, unverified) == []
    # Verified by a real vote, the same request succeeds.
    await world.govern(unverified, "verify")
    created = await collection_request(world.operator_client, world, project=unverified)
    assert created.status_code == 201, created.text
    assert await collection_ids(registry, unverified) == [created.json()["id"]]


async def test_a_revoked_project_takes_no_claims_until_verified_again(
    registry: Registry, world: World
) -> None:
    collection = (await world.collection())["id"]
    first = await submitted(world.operator_client, collection)
    await world.govern(world.project, "revoke")
    assert_not_verified(await submit(world.operator_client, collection))
    assert_not_verified(await submit(registry.client, collection))  # admins too
    assert_not_verified(await collection_request(world.operator_client, world))
    assert (await counts(registry, collection))["submitted"] == 1
    assert [c["id"] for c in await claims_in(registry, collection)] == [first["id"]]
    # A new verification, proposed, voted and executed, opens the project again.
    await world.govern(world.project, "verify")
    second = await submitted(world.operator_client, collection)
    assert (await counts(registry, collection))["submitted"] == 2
    assert [c["id"] for c in await claims_in(registry, collection)] == [first["id"], second["id"]]
    created = await collection_request(world.operator_client, world)
    assert created.status_code == 201, created.text


async def test_a_claim_of_a_revoked_project_is_not_evaluated(
    registry: Registry, world: World
) -> None:
    owner = customer()
    collection = (await world.collection())["id"]
    claim = (await world.approvable(collection, owner=owner))["id"]
    before = await counts(registry, collection)
    minted = (await token_state(registry))["minted"]
    await world.govern(world.project, "revoke")
    for status in ("approved", "rejected", "flagged"):
        assert_not_verified(await evaluate(world.oracle_client, claim, status))
    view = await claim_of(registry, claim)
    assert view["status"] == "pending" and view["evaluations"] == []
    assert view["credential"] is None and view["amount"] is None
    assert await counts(registry, collection) == before
    assert before["pending"] == 1 and before["evaluated"] == 0
    missing = await registry.client.get(f"/v1/claims/{claim}/credential")
    error_of(missing, 404, "not_found")
    assert await balance(registry, owner) == {"amount": 0, "retired": 0}
    assert await movements_of(registry, owner) == []
    assert (await token_state(registry))["minted"] == minted
    # Verified again, the very same claim is evaluated, and credited at issuance.
    await world.govern(world.project, "verify")
    await evaluated(world.oracle_client, claim, "approved")
    assert await balance(registry, owner) == {"amount": 0, "retired": 0}
    await issue_claims(world)
    assert await balance(registry, owner) == {"amount": METERED_AMOUNT, "retired": 0}
    assert (await counts(registry, collection))["approved"] == 1


async def test_a_deactivated_project_is_closed_to_claims(registry: Registry, world: World) -> None:
    collection = (await world.collection())["id"]
    pending = (await submitted(world.operator_client, collection))["id"]
    before = await counts(registry, collection)
    gone = await world.operator_client.delete(f"/v1/domains/{world.project}")
    assert gone.status_code == 200, gone.text
    assert gone.json()["status"] == "deactivated"
    assert_not_verified(await submit(world.operator_client, collection), "deactivated")
    assert_not_verified(await evaluate(world.oracle_client, pending, "approved"), "deactivated")
    assert_not_verified(await collection_request(world.operator_client, world), "deactivated")
    assert await counts(registry, collection) == before
    assert (await claim_of(registry, pending))["status"] == "pending"
    # ... and governance cannot verify it back.
    again = await world.group_clients[0].post(
        f"/v1/domains/{world.project}/verification-proposals",
        json={"group": world.group, "action": "verify"},
    )
    error_of(again, 409)


# -- 2. collections ---------------------------------------------------------------------------


async def test_a_collection_is_created_whole(registry: Registry, world: World) -> None:
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    end = start + timedelta(days=30)
    response = await collection_request(
        world.operator_client,
        world,
        name="Stove usage 2026",
        quota=100,
        startDate=start.isoformat(),
        endDate=end.isoformat(),
    )
    assert response.status_code == 201, response.text
    view = response.json()
    assert response.headers["location"] == f"/v1/claim-collections/{view['id']}"
    assert view["name"] == "Stove usage 2026"
    assert view["project"] == world.project and view["protocol"] == CLAIM_PROTOCOL
    assert view["admin"] == world.operator and view["evaluators"] == [world.oracle]
    assert view["state"] == "open" and view["quota"] == 100
    assert datetime.fromisoformat(view["startDate"]) == start
    assert datetime.fromisoformat(view["endDate"]) == end
    assert view["counts"] == {
        "submitted": 0,
        "evaluated": 0,
        "pending": 0,
        "approved": 0,
        "rejected": 0,
        "flagged": 0,
        "disputed": 0,
        "invalidated": 0,
    }
    assert await get_json(registry.client, f"/v1/claim-collections/{view['id']}") == view
    history = (await get_json(registry.client, f"/v1/domains/{world.project}/history"))["items"]
    history = history[-1]
    assert history["kind"] == "claims.collection.create"


async def test_bad_collections_are_refused_with_a_detail_per_field(
    registry: Registry, world: World
) -> None:
    stove = await world.asset()
    retired_oracle = await world.domain(
        world.oracle_client,
        {"type": "Oracle", "class": "did:ixo:protocol/oracle", "metadata": {"name": "Old"}},
    )
    gone = await world.oracle_client.delete(f"/v1/domains/{retired_oracle}")
    assert gone.status_code == 200, gone.text
    now = datetime.now(UTC)
    cases: list[tuple[dict[str, Any], list[str]]] = [
        ({"evaluators": [stove]}, ["evaluators[0]"]),  # a Device is no oracle
        ({"evaluators": [world.oracle, world.project]}, ["evaluators[1]"]),
        ({"evaluators": ["did:ixo:entity/no-such-oracle"]}, ["evaluators[0]"]),
        ({"evaluators": ["not a did"]}, ["evaluators[0]"]),
        ({"evaluators": [retired_oracle]}, ["evaluators[0]"]),
        ({"evaluators": [world.oracle, world.oracle]}, ["evaluators"]),
        ({"evaluators": []}, ["evaluators"]),
        ({"protocol": "did:ixo:protocol/no-such-protocol"}, ["protocol"]),
        ({"protocol": "did:ixo:protocol/organisation"}, ["protocol"]),  # no verifier role
        ({"quota": 0}, ["quota"]),
        ({"name": "n" * 201}, ["name"]),
        ({"startDate": now.isoformat(), "endDate": now.isoformat()}, ["endDate"]),
        (
            {"protocol": "did:ixo:protocol/no-such-protocol", "evaluators": [stove], "quota": -1},
            ["protocol", "quota"],
        ),
    ]
    for fields, expected in cases:
        response = await collection_request(world.operator_client, world, **fields)
        assert sorted(fields_of(response)) == sorted(expected), (fields, response.text)
    device = await collection_request(world.operator_client, world, evaluators=[stove])
    detail = error_of(device, 422)["details"][0]
    assert "Oracle" in detail["error"] and "Device" in detail["error"], detail
    # A project that is no Project, and one that does not exist.
    organisation = await collection_request(
        world.operator_client, world, project=world.organisation
    )
    assert fields_of(organisation) == ["project"]
    error_of(
        await collection_request(world.operator_client, world, project="did:ixo:entity/none"),
        404,
        "not_found",
    )
    assert await collection_ids(registry, world.project) == []


async def test_only_project_controllers_or_admins_create_collections(
    registry: Registry, world: World
) -> None:
    outsider = await world.client(stranger(), "reader", "writer")
    reader = await world.client(world.operator, "reader")
    error_of(await collection_request(outsider, world), 403, "forbidden")
    error_of(await collection_request(world.oracle_client, world), 403, "forbidden")
    error_of(await collection_request(reader, world), 403, "forbidden")
    assert await collection_ids(registry, world.project) == []
    by_admin = await collection_request(registry.client, world)
    assert by_admin.status_code == 201, by_admin.text
    assert by_admin.json()["admin"] == BOOTSTRAP_PRINCIPAL
    by_controller = await collection_request(world.operator_client, world)
    assert by_controller.status_code == 201, by_controller.text
    assert await collection_ids(registry, world.project) == [
        by_admin.json()["id"],
        by_controller.json()["id"],
    ]


async def test_a_full_collection_takes_no_more_claims(registry: Registry, world: World) -> None:
    collection = (await world.collection(quota=2))["id"]
    await submitted(world.operator_client, collection)
    await submitted(world.operator_client, collection)
    for client in (world.operator_client, registry.client):
        full = await submit(client, collection)
        assert "quota" in error_of(full, 409, "conflict")["message"]
    assert (await counts(registry, collection))["submitted"] == 2
    assert len(await claims_in(registry, collection)) == 2


async def test_claims_are_taken_only_inside_the_window(registry: Registry, world: World) -> None:
    now = datetime.now(UTC)
    later = (await world.collection(startDate=(now + timedelta(hours=1)).isoformat()))["id"]
    early = await submit(world.operator_client, later)
    assert "opens" in error_of(early, 409, "conflict")["message"]
    ended = (
        await world.collection(
            startDate=(now - timedelta(hours=2)).isoformat(),
            endDate=(now - timedelta(hours=1)).isoformat(),
        )
    )["id"]
    late = await submit(world.operator_client, ended)
    assert "ended" in error_of(late, 409, "conflict")["message"]
    # A naive timestamp is UTC: an end an hour from now (UTC) is still open.
    naive_end = (now + timedelta(hours=1)).replace(tzinfo=None).isoformat()
    current = (
        await world.collection(startDate=(now - timedelta(hours=1)).isoformat(), endDate=naive_end)
    )["id"]
    await submitted(world.operator_client, current)
    assert (await counts(registry, later))["submitted"] == 0
    assert (await counts(registry, ended))["submitted"] == 0
    assert (await counts(registry, current))["submitted"] == 1


async def test_collection_states_pause_reopen_and_close_for_good(
    registry: Registry, world: World
) -> None:
    collection = (await world.collection())["id"]
    url = f"/v1/claim-collections/{collection}"

    async def set_state(client: httpx.AsyncClient, state: str) -> httpx.Response:
        return await client.patch(url, json={"state": state})

    outsider = await world.client(stranger(), "reader", "writer")
    error_of(await set_state(outsider, "paused"), 403, "forbidden")
    error_of(await set_state(world.oracle_client, "closed"), 403, "forbidden")
    assert fields_of(await set_state(world.operator_client, "archived")) == ["state"]
    paused = await set_state(world.operator_client, "paused")
    assert paused.status_code == 200 and paused.json()["state"] == "paused", paused.text
    error_of(await submit(world.operator_client, collection), 409, "conflict")
    reopened = await set_state(registry.client, "open")  # an admin may too
    assert reopened.json()["state"] == "open", reopened.text
    pending = (await world.approvable(collection))["id"]
    closed = await set_state(world.operator_client, "closed")
    assert closed.json()["state"] == "closed", closed.text
    error_of(await submit(world.operator_client, collection), 409, "conflict")
    for state in ("open", "paused"):
        for client in (world.operator_client, registry.client):
            error_of(await set_state(client, state), 409, "conflict")
    assert (await set_state(world.operator_client, "closed")).status_code == 200
    assert (await get_json(registry.client, url))["state"] == "closed"
    assert (await counts(registry, collection))["submitted"] == 1
    # A claim submitted before the close is still evaluated.
    await evaluated(world.oracle_client, pending, "approved")


async def test_collections_are_listed_by_project(registry: Registry, world: World) -> None:
    other = await world.project_domain(verified=True)
    mine = [(await world.collection())["id"] for _ in range(3)]
    theirs = (await world.collection(project=other))["id"]
    assert await collection_ids(registry, world.project) == mine
    assert await collection_ids(registry, other) == [theirs]
    everything = await every_page(registry.client, "/v1/claim-collections", limit=2)
    ids = [c["id"] for c in everything]
    assert len(ids) == len(set(ids)) and {*mine, theirs} <= set(ids)
    assert ids == sorted(ids)
    error_of(await registry.client.get("/v1/claim-collections/999999999"), 404, "not_found")


async def test_counts_are_the_real_number_of_claims_by_status(
    registry: Registry, world: World
) -> None:
    collection = (await world.collection())["id"]
    plan = ["approved", "approved", "rejected", "flagged", "disputed", "invalidated"]
    plan += ["pending", "pending", "flagged-then-approved"]
    for step in plan:
        if "approved" in step:
            claim = (await world.approvable(collection))["id"]
        else:
            claim = (await submitted(world.operator_client, collection))["id"]
        if step == "flagged-then-approved":
            await evaluated(world.oracle_client, claim, "flagged")
            await evaluated(world.oracle_client, claim, "approved", reason="checked on site")
        elif step != "pending":
            await evaluated(world.oracle_client, claim, step)
    tally = await counts(registry, collection)
    listed = {
        status: len(await claims_in(registry, collection, status=status)) for status in STATUSES
    }
    assert listed == {
        "pending": 2,
        "approved": 3,
        "rejected": 1,
        "flagged": 1,
        "disputed": 1,
        "invalidated": 1,
    }
    assert {status: tally[status] for status in STATUSES} == listed
    assert tally["submitted"] == len(plan) == len(await claims_in(registry, collection))
    assert tally["evaluated"] == len(plan) - listed["pending"]
    error_of(await registry.client.get("/v1/claims", params={"status": "done"}), 422)


# -- 3. claims ------------------------------------------------------------------------------


async def test_a_submitted_claim_is_stored_as_sent(registry: Registry, world: World) -> None:
    stove = await world.metered_asset()
    collection = (await world.collection())["id"]
    data = {
        **metered_claim(),
        "fuelKg": 12.5,
        # the largest integers a JSON number carries exactly
        "evidence": {"photos": ["a.jpg"], "readings": [-SAFE, 0, 1.5, SAFE]},
    }
    claim = await submitted(world.operator_client, collection, asset=stove, data=data)
    assert claim["status"] == "pending" and claim["data"] == data
    assert claim["agent"] == world.operator and claim["asset"] == stove
    assert claim["collection"] == collection and claim["credential"] is None
    stored = await claim_of(registry, claim["id"])
    assert stored == {**claim, "evaluations": []}
    assert [c["id"] for c in await claims_in(registry, collection, asset=stove)] == [claim["id"]]
    assert [c["id"] for c in await claims_in(registry, collection, agent=world.operator)] == [
        claim["id"]
    ]
    # Such a claim signs and verifies: the credential's JSON carries it exactly.
    await evaluated(world.oracle_client, claim["id"], "approved")
    credential = await get_json(registry.client, f"/v1/claims/{claim['id']}/credential")
    assert credential["credentialSubject"]["claim"]["data"] == data
    assert independently_verified(credential)
    error_of(await registry.client.get("/v1/claims/no-such-claim"), 404, "not_found")


async def test_claim_data_follows_the_protocol(registry: Registry, world: World) -> None:
    collection = (await world.collection())["id"]
    cases: list[tuple[dict[str, Any], list[str]]] = [
        ({"reportType": "cooking", "colour": "red"}, ["data.colour"]),
        ({"reportType": 5}, ["data.reportType"]),
        ({"mealsCooked": 3}, ["data.reportType"]),
        ({}, ["data.reportType"]),
        ({"reportType": "cooking", "mealsCooked": "three"}, ["data.mealsCooked"]),
        ({"reportType": "cooking", "mealsCooked": 2.5}, ["data.mealsCooked"]),
        ({"reportType": "cooking", "mealsCooked": True}, ["data.mealsCooked"]),
        ({"reportType": "cooking", "fuelKg": "heavy"}, ["data.fuelKg"]),
        ({"reportType": "cooking", "periodStart": "yesterday"}, ["data.periodStart"]),
        ({"reportType": "cooking", "evidence": ["photo"]}, ["data.evidence"]),
        (
            {"colour": 1, "mealsCooked": "x"},
            ["data.colour", "data.mealsCooked", "data.reportType"],
        ),
        # beyond 2^53 a JSON number loses digits, and the credential's signature with them
        ({"reportType": "cooking", "mealsCooked": 2**53}, ["data.mealsCooked"]),
        ({"reportType": "cooking", "mealsCooked": -(2**53)}, ["data.mealsCooked"]),
        ({"reportType": "cooking", "evidence": {"n": [1, 2**60]}}, ["data.evidence.n[1]"]),
    ]
    for data, expected in cases:
        response = await submit(world.operator_client, collection, data=data)
        assert sorted(fields_of(response)) == expected, (data, response.text)
    # Beyond 64 bits, NaN, NUL: refused before any rule runs.
    for data in (
        {"reportType": "cooking", "mealsCooked": 2**64},
        {"reportType": "cooking\x00"},
    ):
        error_of(await submit(world.operator_client, collection, data=data), 422)
    nan = await world.operator_client.post(
        f"/v1/claim-collections/{collection}/claims",
        content=b'{"data": {"reportType": "cooking", "fuelKg": NaN}}',
        headers={"content-type": "application/json"},
    )
    assert "NaN" in error_of(nan, 422, "validation_failed")["details"][0]["error"]
    assert (await counts(registry, collection))["submitted"] == 0
    assert await claims_in(registry, collection) == []


async def test_the_asset_must_be_the_projects(registry: Registry, world: World) -> None:
    other = await world.project_domain(verified=True)
    foreign = await world.asset(project=other)
    retired = await world.asset()
    gone = await world.operator_client.delete(f"/v1/domains/{retired}")
    assert gone.status_code == 200, gone.text
    collection = (await world.collection())["id"]
    assert fields_of(await submit(world.operator_client, collection, asset=foreign)) == ["asset"]
    unknown = await submit(world.operator_client, collection, asset="did:ixo:entity/no-stove")
    assert fields_of(unknown) == ["asset"]
    assert fields_of(await submit(world.operator_client, collection, asset="stove")) == ["asset"]
    error_of(await submit(world.operator_client, collection, asset=retired), 409, "conflict")
    assert (await counts(registry, collection))["submitted"] == 0
    # The same asset is welcome in its own project's collection.
    theirs = (await world.collection(project=other))["id"]
    await submitted(world.operator_client, theirs, asset=foreign)


async def test_who_may_submit(registry: Registry, world: World) -> None:
    owner = customer()
    stove = await world.asset(owner=owner)
    someone_elses = await world.asset(owner=customer())
    collection = (await world.collection())["id"]
    owner_client = await world.client(owner, "reader", "writer")
    outsider = await world.client(stranger(), "reader", "writer")
    reader = await world.client(world.operator, "reader")
    anonymous = world.registry.as_key(None)
    world.opened.append(anonymous)
    by_project = await submitted(world.operator_client, collection)
    by_asset_controller = await submitted(owner_client, collection, asset=stove)
    january = {"periodStart": "2026-01-01T00:00:00Z", "periodEnd": "2026-02-01T00:00:00Z"}
    by_admin = await submitted(registry.client, collection, asset=stove, data={**DATA, **january})
    assert by_project["agent"] == world.operator
    assert by_asset_controller["agent"] == owner
    assert by_admin["agent"] == BOOTSTRAP_PRINCIPAL
    # The asset's controller speaks for that asset only, not for the project or others.
    error_of(await submit(owner_client, collection), 403, "forbidden")
    error_of(await submit(owner_client, collection, asset=someone_elses), 403, "forbidden")
    error_of(await submit(outsider, collection), 403, "forbidden")
    error_of(await submit(outsider, collection, asset=stove), 403, "forbidden")
    error_of(await submit(world.oracle_client, collection), 403, "forbidden")
    error_of(await submit(reader, collection), 403, "forbidden")
    error_of(await submit(anonymous, collection), 401, "unauthorized")
    assert (await counts(registry, collection))["submitted"] == 3
    agents = {c["agent"] for c in await claims_in(registry, collection)}
    assert agents == {world.operator, owner, BOOTSTRAP_PRINCIPAL}


async def test_a_client_chosen_id_names_one_claim(registry: Registry, world: World) -> None:
    collection = (await world.collection())["id"]
    other = (await world.collection())["id"]
    chosen = f"{unique('meter')}:2026-01.reading_1"
    claim = await submitted(world.operator_client, collection, id=chosen)
    assert claim["id"] == chosen
    assert (await claim_of(registry, chosen))["collection"] == collection
    for target in (collection, other):
        again = await submit(world.operator_client, target, id=chosen, data={"reportType": "fuel"})
        error_of(again, 409, "conflict")
    for bad in ("-leading", "with space", "a" * 101, "ü", "a/b"):
        assert fields_of(await submit(world.operator_client, collection, id=bad)) == ["id"], bad
    assert (await counts(registry, collection))["submitted"] == 1
    assert (await counts(registry, other))["submitted"] == 0
    assert (await claim_of(registry, chosen))["data"] == DATA


async def test_an_idempotency_key_replays_the_same_claim(registry: Registry, world: World) -> None:
    collection = (await world.collection())["id"]
    headers = {"Idempotency-Key": unique("submit")}
    first = await submit(world.operator_client, collection, headers=headers)
    second = await submit(world.operator_client, collection, headers=headers)
    assert first.status_code == second.status_code == 201, (first.text, second.text)
    assert second.json() == first.json()
    assert second.headers.get("idempotent-replayed") == "true"
    assert second.headers["location"] == first.headers["location"]
    # The same key with another body is a client error, not a second claim.
    changed = await submit(
        world.operator_client, collection, data={"reportType": "other"}, headers=headers
    )
    error_of(changed, 422)
    assert (await counts(registry, collection))["submitted"] == 1
    assert [c["id"] for c in await claims_in(registry, collection)] == [first.json()["id"]]
    # Another key is another claim.
    third = await submit(world.operator_client, collection, headers={"Idempotency-Key": "k2"})
    assert third.status_code == 201 and third.json()["id"] != first.json()["id"]
    assert (await counts(registry, collection))["submitted"] == 2


# -- 4. evaluations ---------------------------------------------------------------------------


async def test_only_the_collections_oracle_or_its_controllers_evaluate(
    registry: Registry, world: World
) -> None:
    collection = (await world.collection())["id"]
    first = (await world.approvable(collection))["id"]
    second = (await submitted(world.operator_client, collection))["id"]
    outsider = await world.client(stranger(), "reader", "writer")
    oracle_reader = await world.client(world.oracle_operator, "reader")
    oracle_itself = await world.client(world.oracle, "reader", "writer")
    other_oracle = await world.domain(
        world.oracle_client,
        {"type": "Oracle", "class": "did:ixo:protocol/oracle", "metadata": {"name": "Other"}},
    )
    # The project's controller, an admin who controls no evaluator, a stranger, a reader key,
    # and the oracle's controller naming an oracle that is not this collection's evaluator.
    for client in (world.operator_client, registry.client, outsider):
        error_of(await evaluate(client, first, "approved"), 403, "forbidden")
    error_of(await evaluate(oracle_reader, first, "approved"), 403, "forbidden")
    refused = await evaluate(world.oracle_client, first, "approved", oracle=other_oracle)
    error_of(refused, 403, "forbidden")
    untouched = await claim_of(registry, first)
    assert untouched["status"] == "pending" and untouched["evaluations"] == []
    assert (await counts(registry, collection))["evaluated"] == 0
    # The oracle's controller, and the oracle's own key, evaluate.
    by_controller = await evaluated(world.oracle_client, first, "approved", oracle=world.oracle)
    assert by_controller["oracle"] == world.oracle
    assert by_controller["evaluations"][0]["by"] == world.oracle_operator
    by_oracle = await evaluated(oracle_itself, second, "rejected")
    assert by_oracle["oracle"] == world.oracle
    assert by_oracle["evaluations"][0]["by"] == world.oracle
    error_of(await evaluate(world.oracle_client, "no-such-claim", "approved"), 404, "not_found")


async def test_an_oracle_controller_of_several_evaluators_names_one(
    registry: Registry, world: World
) -> None:
    second_oracle = await world.domain(
        world.oracle_client,
        {"type": "Oracle", "class": "did:ixo:protocol/oracle", "metadata": {"name": "Two"}},
    )
    collection = (await world.collection(evaluators=[world.oracle, second_oracle]))["id"]
    claim = (await world.approvable(collection))["id"]
    assert fields_of(await evaluate(world.oracle_client, claim, "approved")) == ["oracle"]
    done = await evaluated(world.oracle_client, claim, "approved", oracle=second_oracle)
    assert done["oracle"] == second_oracle
    # A deactivated evaluator evaluates no more.
    later = (await world.approvable(collection))["id"]
    gone = await world.oracle_client.delete(f"/v1/domains/{second_oracle}")
    assert gone.status_code == 200, gone.text
    error_of(
        await evaluate(world.oracle_client, later, "approved", oracle=second_oracle),
        403,
        "forbidden",
    )
    assert (await evaluated(world.oracle_client, later, "approved"))["oracle"] == world.oracle


async def test_evaluations_say_why_and_how_much(registry: Registry, world: World) -> None:
    collection = (await world.collection())["id"]
    claim = (await world.approvable(collection))["id"]
    silent = (await submitted(world.operator_client, collection))["id"]
    cases: list[tuple[dict[str, Any], list[str]]] = [
        ({"status": "rejected"}, ["reason"]),
        ({"status": "flagged"}, ["reason"]),
        ({"status": "disputed"}, ["reason"]),
        ({"status": "invalidated"}, ["reason"]),
        ({"status": "rejected", "reason": " leading space"}, ["reason"]),
        ({"status": "rejected", "reason": "r" * 1001}, ["reason"]),
        ({"status": "rejected", "reason": "bad", "amount": 5}, ["amount"]),
        ({"status": "flagged", "amount": 5}, ["amount", "reason"]),
        # Nobody names an amount: credits follow from the methodology.
        ({"status": "approved", "amount": 5}, ["amount"]),
        ({"status": "approved", "amount": 1_000_000_000}, ["amount"]),
        ({"status": "approved", "amount": -3}, ["amount"]),
        ({"status": "pending", "reason": "back"}, ["status"]),
        ({"status": "maybe", "reason": "unsure"}, ["status"]),
    ]
    for body, expected in cases:
        response = await world.oracle_client.post(f"/v1/claims/{claim}/evaluations", json=body)
        assert sorted(fields_of(response)) == expected, (body, response.text)
    view = await claim_of(registry, claim)
    assert view["status"] == "pending" and view["evaluations"] == []
    assert (await counts(registry, collection))["evaluated"] == 0
    # A claim about no stove computes nothing, so it cannot be approved.
    uncomputable = await evaluate(world.oracle_client, silent, "approved")
    assert fields_of(uncomputable) == ["status"] and "no stove" in uncomputable.text
    done = await evaluated(world.oracle_client, claim, "approved", reason="ok")
    assert done["amount"] == METERED_AMOUNT and done["reason"] == "ok"


async def test_approved_rejected_disputed_and_invalidated_are_final(
    registry: Registry, world: World
) -> None:
    collection = (await world.collection())["id"]
    claims = {}
    for status in FINAL:
        if status == "approved":
            claims[status] = (await world.approvable(collection))["id"]
        else:
            claims[status] = (await submitted(world.operator_client, collection))["id"]
        view = await evaluated(world.oracle_client, claims[status], status)
        assert view["oracle"] == world.oracle and view["evaluatedAt"] is not None
        assert (view["credential"] is not None) == (status == "approved")
    before = await counts(registry, collection)
    assert before == {
        "submitted": 4,
        "evaluated": 4,
        "pending": 0,
        "approved": 1,
        "rejected": 1,
        "flagged": 0,
        "disputed": 1,
        "invalidated": 1,
    }
    for status, claim in claims.items():
        for again in ("approved", "flagged", "rejected"):
            refused = await evaluate(world.oracle_client, claim, again)
            assert status in error_of(refused, 409, "conflict")["message"]
        view = await claim_of(registry, claim)
        assert view["status"] == status and len(view["evaluations"]) == 1
    assert await counts(registry, collection) == before


async def test_a_flagged_claim_is_evaluated_again(registry: Registry, world: World) -> None:
    owner = customer()
    collection = (await world.collection())["id"]
    claim = (await world.approvable(collection, owner=owner))["id"]
    oracle_itself = await world.client(world.oracle, "reader", "writer")
    await evaluated(world.oracle_client, claim, "flagged", reason="photo unreadable")
    flagged = await counts(registry, collection)
    assert (flagged["evaluated"], flagged["flagged"], flagged["pending"]) == (1, 1, 0)
    assert (await claim_of(registry, claim))["credential"] is None
    await evaluated(oracle_itself, claim, "flagged", reason="still unreadable")
    assert await counts(registry, collection) == flagged
    # Overriding the flag needs a recorded reason; the approval mints what is computed.
    assert fields_of(await evaluate(world.oracle_client, claim, "approved")) == ["reason"]
    await evaluated(world.oracle_client, claim, "approved", reason="photo retaken, fine")
    after = await counts(registry, collection)
    assert (after["evaluated"], after["flagged"], after["approved"], after["pending"]) == (
        1,
        0,
        1,
        0,
    )
    view = await claim_of(registry, claim)
    assert view["status"] == "approved" and view["amount"] == METERED_AMOUNT
    assert view["reason"] == "photo retaken, fine"
    history = [(e["status"], e["reason"], e["amount"], e["by"]) for e in view["evaluations"]]
    assert history == [
        ("flagged", "photo unreadable", None, world.oracle_operator),
        ("flagged", "still unreadable", None, world.oracle),
        ("approved", "photo retaken, fine", METERED_AMOUNT, world.oracle_operator),
    ]
    assert all(e["oracle"] == world.oracle for e in view["evaluations"])
    times = [datetime.fromisoformat(e["at"]) for e in view["evaluations"]]
    assert times == sorted(times)
    assert await balance(registry, owner) == {"amount": 0, "retired": 0}  # until issuance
    await issue_claims(world)
    assert await balance(registry, owner) == {"amount": METERED_AMOUNT, "retired": 0}
    error_of(await evaluate(world.oracle_client, claim, "flagged"), 409, "conflict")


async def test_a_protocol_without_a_token_class_mints_nothing(
    registry: Registry, world: World
) -> None:
    created = await registry.client.post(
        "/v1/protocols",
        json={
            "type": "Protocol",
            "id": unique("survey-claim"),
            "name": "Survey claim",
            "entityType": "Claim",
            "twinClass": "system",
            "properties": {"answer": "string"},
            "required": ["answer"],
            "relationships": {"verifier": "Oracle"},
        },
    )
    assert created.status_code == 201, created.text
    protocol = created.json()["did"]
    collection = (await world.collection(protocol=protocol))["id"]
    claim = (await submitted(world.operator_client, collection, data={"answer": "yes"}))["id"]
    assert sorted(fields_of(await submit(world.operator_client, collection, data=DATA))) == [
        "data.answer",
        "data.mealsCooked",
        "data.reportType",
    ]
    refused = await evaluate(world.oracle_client, claim, "approved", amount=3)
    assert fields_of(refused) == ["amount"]
    view = await world.oracle_client.post(
        f"/v1/claims/{claim}/evaluations", json={"status": "approved"}
    )
    assert view.status_code == 200, view.text
    assert view.json()["amount"] is None
    credential = await get_json(registry.client, f"/v1/claims/{claim}/credential")
    evaluation = credential["credentialSubject"]["evaluation"]
    assert "amount" not in evaluation and "tokenClass" not in evaluation
    assert credential["credentialSubject"]["claim"]["protocol"] == protocol
    assert await movements_of(registry, world.operator) == []


# -- 5. credentials -------------------------------------------------------------------------

B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def b58decode(text: str) -> bytes:
    number = 0
    for char in text:
        number = number * 58 + B58.index(char)
    body = number.to_bytes((number.bit_length() + 7) // 8, "big")
    return b"\0" * (len(text) - len(text.lstrip("1"))) + body


def b58encode(data: bytes) -> str:
    number, text = int.from_bytes(data, "big"), ""
    while number:
        number, digit = divmod(number, 58)
        text = B58[digit] + text
    return "1" * (len(data) - len(data.lstrip(b"\0"))) + text


def key_of_did(did: str) -> Ed25519PublicKey | None:
    """The Ed25519 key a did:key names: multibase z (base58btc), multicodec 0xed 0x01."""
    if not did.startswith("did:key:z"):
        return None
    try:
        raw = b58decode(did.removeprefix("did:key:z"))
    except ValueError:
        return None
    if len(raw) != 34 or raw[:2] != b"\xed\x01":
        return None
    return Ed25519PublicKey.from_public_bytes(raw[2:])


def hash_data(document: dict[str, Any], options: dict[str, Any]) -> bytes:
    """eddsa-jcs-2022: SHA-256(JCS(proof options + @context)) || SHA-256(JCS(document))."""
    config = {**options, "@context": document["@context"]}
    return (
        hashlib.sha256(rfc8785.dumps(config)).digest()
        + hashlib.sha256(rfc8785.dumps(document)).digest()
    )


def independently_verified(credential: dict[str, Any]) -> bool:
    """The Data Integrity check, from the specs alone, sharing no code with twinhub."""
    proof = credential.get("proof")
    if not isinstance(proof, dict) or proof.get("cryptosuite") != "eddsa-jcs-2022":
        return False
    if proof.get("type") != "DataIntegrityProof" or proof.get("proofPurpose") != "assertionMethod":
        return False
    did, _, fragment = str(proof.get("verificationMethod")).partition("#")
    if did != credential.get("issuer") or did != f"did:key:{fragment}":
        return False
    key = key_of_did(did)
    value = proof.get("proofValue")
    if key is None or not isinstance(value, str) or not value.startswith("z"):
        return False
    document = {k: v for k, v in credential.items() if k != "proof"}
    options = {k: v for k, v in proof.items() if k != "proofValue"}
    try:
        key.verify(b58decode(value[1:]), hash_data(document, options))
    except (InvalidSignature, ValueError):
        return False
    return True


def sign_independently(document: dict[str, Any], key: Ed25519PrivateKey, created: str) -> dict:
    """A credential signed by our own eddsa-jcs-2022 code with a did:key of our own."""
    raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    did = "did:key:z" + b58encode(b"\xed\x01" + raw)
    document = {**document, "issuer": did}
    options = {
        "type": "DataIntegrityProof",
        "cryptosuite": "eddsa-jcs-2022",
        "created": created,
        "verificationMethod": f"{did}#{did.removeprefix('did:key:')}",
        "proofPurpose": "assertionMethod",
    }
    signature = key.sign(hash_data(document, options))
    return {**document, "proof": {**options, "proofValue": "z" + b58encode(signature)}}


async def approved_credential(registry: Registry, world: World) -> tuple[dict, dict, str]:
    """A claim about a new metered stove, approved (METERED_AMOUNT CARBON, computed):
    (claim, credential, stove)."""
    collection = (await world.collection())["id"]
    claim = await world.approvable(collection, owner=customer())
    stove = claim["asset"]
    approved = await evaluated(world.oracle_client, claim["id"], "approved")
    credential = await get_json(registry.client, f"/v1/claims/{claim['id']}/credential")
    assert approved["credential"] == credential["id"]
    return approved, credential, stove


async def verify(registry: Registry, credential: dict[str, Any]) -> dict[str, Any]:
    return await verify_as(registry.client, credential)


async def verify_as(client: httpx.AsyncClient, credential: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/v1/credentials/verify", json=credential)
    assert response.status_code == 200, response.text
    return response.json()


async def test_an_approval_issues_a_credential_anyone_can_check(
    registry: Registry, world: World
) -> None:
    claim, credential, stove = await approved_credential(registry, world)
    by_id = await registry.client.get(f"/v1/credentials/{credential['id']}")
    by_claim = await registry.client.get(f"/v1/claims/{claim['id']}/credential")
    assert by_id.status_code == by_claim.status_code == 200
    assert by_id.content == by_claim.content and by_id.json() == credential
    assert credential["@context"] == ["https://www.w3.org/ns/credentials/v2"]
    assert credential["id"].startswith("urn:uuid:")
    assert credential["type"] == ["VerifiableCredential", "ClaimEvaluationCredential"]
    assert credential["issuer"].startswith("did:key:z6Mk")  # an Ed25519 did:key
    subject = credential["credentialSubject"]
    assert subject["id"] == stove
    assert subject["claim"]["id"] == claim["id"] and subject["claim"]["data"] == metered_claim()
    assert subject["claim"]["project"] == world.project
    assert subject["claim"]["protocol"] == CLAIM_PROTOCOL
    assert subject["claim"]["agent"] == world.operator
    assert subject["evaluation"]["status"] == "approved"
    assert subject["evaluation"]["oracle"] == world.oracle
    assert subject["evaluation"]["amount"] == METERED_AMOUNT
    assert subject["evaluation"]["tokenClass"] == "CARBON"
    # The API says it is ours and intact; so does a verifier that shares no code with it.
    reader = await world.client(stranger(), "reader")
    assert await verify_as(reader, credential) == {
        "verified": True,
        "problem": None,
        "issuer": credential["issuer"],
        "issuedByThisPlatform": True,
    }
    assert independently_verified(credential)
    # The issuer's DID document names the key that made the proof.
    issuer = await get_json(reader, "/v1/credentials/issuer")
    method = credential["proof"]["verificationMethod"]
    assert issuer["id"] == credential["issuer"] == method.split("#")[0]
    assert [m["id"] for m in issuer["verificationMethod"]] == [method]
    assert issuer["assertionMethod"] == [method]
    multikey = issuer["verificationMethod"][0]
    assert multikey["type"] == "Multikey" and multikey["controller"] == issuer["id"]
    published = key_of_did(f"did:key:{multikey['publicKeyMultibase']}")
    proof_key = key_of_did(credential["issuer"])
    assert published is not None and proof_key is not None
    assert published.public_bytes(Encoding.Raw, PublicFormat.Raw) == proof_key.public_bytes(
        Encoding.Raw, PublicFormat.Raw
    )
    # No credential for what was not approved, or does not exist.
    collection = claim["collection"]
    rejected = (await submitted(world.operator_client, collection))["id"]
    await evaluated(world.oracle_client, rejected, "rejected")
    for path in (
        f"/v1/claims/{rejected}/credential",
        "/v1/claims/no-such-claim/credential",
        "/v1/credentials/urn:uuid:00000000-0000-0000-0000-000000000000",
    ):
        error_of(await registry.client.get(path), 404, "not_found")


def tampered_copies(credential: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    other = Issuer(os.urandom(32))
    value = credential["proof"]["proofValue"]
    flipped = value[:20] + ("2" if value[20] != "2" else "3") + value[21:]

    def put(path: tuple[str, ...], new: Any) -> dict[str, Any]:
        changed = copy.deepcopy(credential)
        target = changed
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = new
        return changed

    def drop(path: tuple[str, ...]) -> dict[str, Any]:
        changed = copy.deepcopy(credential)
        target = changed
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
        return changed

    both = put(("issuer",), other.did)
    both["proof"]["verificationMethod"] = other.verification_method
    return [
        ("subject data", put(("credentialSubject", "claim", "data", "mealsCooked"), 43)),
        ("added data", put(("credentialSubject", "claim", "data", "fuelKg"), 1.5)),
        ("dropped data", drop(("credentialSubject", "claim", "data", "mealsCooked"))),
        ("amount", put(("credentialSubject", "evaluation", "amount"), 700)),
        ("amount as text", put(("credentialSubject", "evaluation", "amount"), "7")),
        ("subject", put(("credentialSubject", "id"), "did:ixo:entity/another-stove")),
        ("issuer", put(("issuer",), other.did)),
        ("issuer and method", both),
        ("method", put(("proof", "verificationMethod"), other.verification_method)),
        ("proof value", put(("proof", "proofValue"), flipped)),
        ("proof value not multibase", put(("proof", "proofValue"), value[1:])),
        ("proof created", put(("proof", "created"), "2020-01-01T00:00:00Z")),
        ("proof purpose", put(("proof", "proofPurpose"), "authentication")),
        ("cryptosuite", put(("proof", "cryptosuite"), "eddsa-rdfc-2022")),
        ("validFrom", put(("validFrom",), "2020-01-01T00:00:00Z")),
        ("type", put(("type",), ["VerifiableCredential"])),
        ("context", put(("@context",), ["https://www.w3.org/2018/credentials/v1"])),
        ("a new field", put(("validUntil",), "2099-01-01T00:00:00Z")),
        ("no proof", drop(("proof",))),
    ]


async def test_a_changed_credential_does_not_verify(registry: Registry, world: World) -> None:
    _, credential, _ = await approved_credential(registry, world)
    cases = tampered_copies(credential)
    assert len(cases) >= 15
    for name, changed in cases:
        assert changed != credential, name
        result = await verify(registry, changed)
        assert result["verified"] is False, (name, result)
        assert result["issuedByThisPlatform"] is False, (name, result)
        assert isinstance(result["problem"], str) and result["problem"], (name, result)
        assert not independently_verified(changed), name
    # The original, after all that, still verifies.
    assert (await verify(registry, credential))["verified"] is True
    assert independently_verified(credential)


async def test_other_issuers_credentials_verify_but_are_not_ours(
    registry: Registry, world: World
) -> None:
    _, credential, _ = await approved_credential(registry, world)
    document = {k: v for k, v in credential.items() if k != "proof"}
    other = Issuer(os.urandom(32))
    theirs = other.sign({**document, "issuer": other.did}, "2026-02-01T00:00:00Z")
    assert await verify(registry, theirs) == {
        "verified": True,
        "problem": None,
        "issuer": other.did,
        "issuedByThisPlatform": False,
    }
    assert independently_verified(theirs)
    # Signed by code that shares nothing with twinhub, the API still checks it.
    ours_elsewhere = sign_independently(
        document, Ed25519PrivateKey.generate(), "2026-02-01T00:00:00Z"
    )
    assert independently_verified(ours_elsewhere)
    result = await verify(registry, ours_elsewhere)
    assert result["verified"] is True and result["issuedByThisPlatform"] is False, result
    assert result["issuer"] == ours_elsewhere["issuer"]
    # Another key cannot speak for the platform's issuer.
    forged = other.sign(document, "2026-02-01T00:00:00Z")
    assert forged["issuer"] == credential["issuer"]
    assert (await verify(registry, forged))["verified"] is False
    assert not independently_verified(forged)


# -- 6. credits ----------------------------------------------------------------------------


async def test_credits_are_minted_moved_and_retired(registry: Registry, world: World) -> None:
    before = await token_state(registry)
    owner, buyer = customer(), f"did:ixo:org/{unique('buyer')}"
    collection = (await world.collection())["id"]
    claimed = await world.approvable(collection, owner=owner)
    about_stove, stove = claimed["id"], claimed["asset"]
    operators = (await world.approvable(collection))["id"]  # a stove the operator owns
    await evaluated(world.oracle_client, about_stove, "approved")
    await evaluated(world.oracle_client, operators, "approved")
    assert await balance(registry, owner) == {"amount": 0, "retired": 0}  # until issuance
    await issue_claims(world)
    registrar = world.workflows[world.project].registry.did
    # The asset's first controller owns its credits (M, in millionths, computed).
    m = METERED_AMOUNT
    assert await balance(registry, owner) == {"amount": m, "retired": 0}
    assert await balance(registry, world.operator) == {"amount": m, "retired": 0}
    owner_client = await world.client(owner, "reader", "writer")
    buyer_client = await world.client(buyer, "reader", "writer")
    outsider = await world.client(stranger(), "reader", "writer")

    async def move(client: httpx.AsyncClient, **body: Any) -> httpx.Response:
        return await client.post("/v1/credits/CARBON/transfers", json=body)

    by_owner = await move(owner_client, to=buyer, amount=3)
    assert by_owner.status_code == 201, by_owner.text
    assert {k: by_owner.json()[k] for k in ("kind", "token", "from", "to", "amount", "actor")} == {
        "kind": "transfer",
        "token": "CARBON",
        "from": owner,
        "to": buyer,
        "amount": 3,
        "actor": owner,
    }
    custodian = await move(registry.client, **{"from": owner, "to": buyer, "amount": 2})
    assert custodian.status_code == 201, custodian.text
    assert custodian.json()["actor"] == BOOTSTRAP_PRINCIPAL
    assert await balance(registry, owner) == {"amount": m - 5, "retired": 0}
    assert await balance(registry, buyer) == {"amount": 5, "retired": 0}
    # A retried transfer with its Idempotency-Key moves the credits once.
    retry = {"Idempotency-Key": unique("transfer")}
    once = await owner_client.post(
        "/v1/credits/CARBON/transfers", json={"to": buyer, "amount": 1}, headers=retry
    )
    twice = await owner_client.post(
        "/v1/credits/CARBON/transfers", json={"to": buyer, "amount": 1}, headers=retry
    )
    assert once.status_code == twice.status_code == 201, (once.text, twice.text)
    assert twice.json() == once.json() and twice.headers["idempotent-replayed"] == "true"
    back = await buyer_client.post("/v1/credits/CARBON/transfers", json={"to": owner, "amount": 1})
    assert back.status_code == 201, back.text
    assert await balance(registry, owner) == {"amount": m - 5, "retired": 0}
    assert await balance(registry, buyer) == {"amount": 5, "retired": 0}
    reader = await world.client(owner, "reader")
    height = await registry.platform.ledger.height()
    # A stranger (or the project's operator) cannot move someone else's credits.
    for client in (outsider, world.operator_client):
        error_of(await move(client, **{"from": owner, "to": buyer, "amount": 1}), 403)
    error_of(await move(reader, to=buyer, amount=1), 403, "forbidden")
    # More than the balance: refused, nothing moves.
    short = await move(owner_client, to=buyer, amount=m - 4)
    assert error_of(short, 409, "insufficient_credits")["details"] == [
        {"field": "amount", "error": f"at most {m - 5}"}
    ]
    error_of(await move(outsider, to=buyer, amount=1), 409, "insufficient_credits")
    for body, field in (
        ({"to": owner, "amount": 1}, "to"),
        ({"to": "nobody", "amount": 1}, "to"),
        ({"to": buyer, "amount": 0}, "amount"),
        ({"to": buyer, "amount": 10**15 + 1}, "amount"),
    ):
        assert fields_of(await move(owner_client, **body)) == [field], body
    error_of(
        await owner_client.post("/v1/credits/NOPE/transfers", json={"to": buyer, "amount": 1}), 404
    )
    assert await balance(registry, owner) == {"amount": m - 5, "retired": 0}
    assert await balance(registry, buyer) == {"amount": 5, "retired": 0}
    assert await registry.platform.ledger.height() == height
    # Retiring needs a reason.
    retirements = "/v1/credits/CARBON/retirements"
    assert fields_of(await buyer_client.post(retirements, json={"amount": 2})) == ["reason"]
    for reason in ("", " offset"):
        no_reason = await buyer_client.post(retirements, json={"amount": 2, "reason": reason})
        assert fields_of(no_reason) == ["reason"], reason
    too_many = await buyer_client.post(retirements, json={"amount": 6, "reason": "offset"})
    error_of(too_many, 409, "insufficient_credits")
    retired = await buyer_client.post(retirements, json={"amount": 2, "reason": "2026 offset"})
    assert retired.status_code == 201, retired.text
    assert retired.json()["kind"] == "retire" and retired.json()["reason"] == "2026 offset"
    custodied = await registry.client.post(
        retirements, json={"from": owner, "amount": 1, "reason": "on the owner's behalf"}
    )
    assert custodied.status_code == 201, custodied.text
    error_of(
        await outsider.post(retirements, json={"from": buyer, "amount": 1, "reason": "mine"}),
        403,
    )
    assert await balance(registry, buyer) == {"amount": 3, "retired": 2}
    assert await balance(registry, owner) == {"amount": m - 6, "retired": 1}
    # The token: supply is minted less retired, and it is exactly what all balances hold.
    after = await token_state(registry)
    assert after["minted"] - before["minted"] == 2 * m
    assert after["retired"] - before["retired"] == 3
    assert after["supply"] == after["minted"] - after["retired"] == after["held"]
    assert after["name"] == "CARBON" and after["protocol"] == CLAIM_PROTOCOL
    listed = await get_json(registry.client, "/v1/credits")
    assert [t for t in listed if t["name"] == "CARBON"] == [after]
    # Every movement, for each holder, in order.
    owner_moves = [(m["kind"], m["amount"]) for m in await movements_of(registry, owner)]
    assert owner_moves == [
        ("mint", m),
        ("transfer", 3),
        ("transfer", 2),
        ("transfer", 1),
        ("transfer", 1),
        ("retire", 1),
    ]
    buyer_moves = [(m["kind"], m["amount"]) for m in await movements_of(registry, buyer)]
    assert buyer_moves == [
        ("transfer", 3),
        ("transfer", 2),
        ("transfer", 1),
        ("transfer", 1),
        ("retire", 2),
    ]
    mint = (await movements_of(registry, owner))[0]
    assert mint["from"] is None and mint["to"] == owner and mint["claim"] == about_stove
    assert mint["actor"] == registrar  # minted by the registry's issuance
    heights = [m["ledgerHeight"] for m in await movements_of(registry, owner)]
    assert heights == sorted(heights) and len(set(heights)) == len(heights)
    # The ledger: intact, and it tells the story of the asset and of the owner.
    assert (await registry.platform.ledger.verify()).ok
    stove_history = (await get_json(registry.client, f"/v1/domains/{stove}/history"))["items"]
    assert [h["kind"] for h in stove_history][-2:] == ["claims.submit", "claims.evaluate"]
    owner_history = [t.kind for t in await registry.platform.ledger.history(owner)]
    assert owner_history == ["credits.mint"] + ["credits.transfer"] * 3 + ["credits.retire"]
    mint_tx = (await registry.platform.ledger.history(owner))[0]
    assert mint_tx.height == mint["ledgerHeight"] and mint_tx.payload["amount"] == m


# -- 8. the default compliance group from settings -----------------------------------------

COMPLIANCE = "did:ixo:group/compliance"


@asynccontextmanager
async def private_database(backend: Backend, tmp_path: Path) -> AsyncIterator[str]:
    """A database nobody else uses: PostgreSQL tests otherwise share one per run."""
    if backend.database == "postgresql":
        async with fresh_postgres_database("compliance") as url:
            yield url
    else:
        yield f"sqlite:///{tmp_path / secrets.token_hex(4)}.db"


async def test_the_default_compliance_group_comes_from_settings(
    backend: Backend, tmp_path: Path, settings_for: Callable[..., Settings]
) -> None:
    async with private_database(backend, tmp_path) as url:
        settings = settings_for(
            twinhub_bootstrap_api_key=BOOTSTRAP_KEY,
            database_url=url,
            compliance_group_members="did:ixo:org/a=2,did:ixo:org/b",
            compliance_group_threshold="absolute_count:2",
        )
        async with running_registry(settings) as registry:
            group = await get_json(registry.client, f"/v1/governance/groups/{COMPLIANCE}")
            assert group["members"] == [
                {"did": "did:ixo:org/a", "weight": 2},
                {"did": "did:ixo:org/b", "weight": 1},
            ]
            assert group["threshold"] == {"kind": "absolute_count", "value": 2, "quorum": None}
            assert group["default"] is True
            assert group["votingPeriodSeconds"] == 7 * 86400
            # A proposal that names no group goes to it; a's weight of 2 passes it alone.
            project = await registry.client.post(
                "/v1/domains",
                json={"type": "Project", "class": "did:ixo:protocol/project"},
            )
            assert project.status_code == 201, project.text
            did = project.json()["did"]
            async with registry.as_key(await registry.key("did:ixo:org/a", "writer")) as member:
                proposed = await member.post(f"/v1/domains/{did}/verification-proposals", json={})
                assert proposed.status_code == 201, proposed.text
                assert proposed.json()["group"] == COMPLIANCE
                assert proposed.json()["tally"]["total"] == 3
                proposal = proposed.json()["id"]
                voted = await member.post(f"/v1/proposals/{proposal}/votes", json={"option": "yes"})
                assert voted.json()["status"] == "passed", voted.text
                executed = await member.post(f"/v1/proposals/{proposal}/execute")
                assert executed.status_code == 200, executed.text
            assert (await get_json(registry.client, f"/v1/domains/{did}"))["verified"] is True
            history = [t.kind for t in await registry.platform.ledger.history(COMPLIANCE)]
            assert history == ["group.create"]


async def test_an_existing_default_group_is_left_alone(
    backend: Backend, tmp_path: Path, settings_for: Callable[..., Settings]
) -> None:
    async with private_database(backend, tmp_path) as url:
        first = settings_for(
            twinhub_bootstrap_api_key=BOOTSTRAP_KEY,
            database_url=url,
            compliance_group_members="did:ixo:org/a=2,did:ixo:org/b",
            compliance_group_threshold="absolute_count:2",
        )
        async with running_registry(first) as registry:
            made = await get_json(registry.client, f"/v1/governance/groups/{COMPLIANCE}")
        # Restarted with other settings, the platform keeps the group it made.
        second = settings_for(
            twinhub_bootstrap_api_key=BOOTSTRAP_KEY,
            database_url=url,
            compliance_group_members="did:ixo:org/c,did:ixo:org/d,did:ixo:org/e",
            compliance_group_threshold="absolute_percentage:0.5",
        )
        async with running_registry(second) as registry:
            assert await get_json(registry.client, f"/v1/governance/groups/{COMPLIANCE}") == made
            kinds = [t.kind for t in await registry.platform.ledger.history(COMPLIANCE)]
            assert kinds == ["group.create"]
    # A default group made through the API first: the settings' group is never made.
    async with private_database(backend, tmp_path) as url:
        plain = settings_for(twinhub_bootstrap_api_key=BOOTSTRAP_KEY, database_url=url)
        async with running_registry(plain) as registry:
            error_of(await registry.client.get(f"/v1/governance/groups/{COMPLIANCE}"), 404)
            created = await registry.client.post(
                "/v1/governance/groups",
                json={
                    "id": "board",
                    "name": "Board",
                    "members": [{"did": "did:ixo:org/z"}],
                    "threshold": {"kind": "absolute_count", "value": 1},
                    "default": True,
                },
            )
            assert created.status_code == 201, created.text
        configured = settings_for(
            twinhub_bootstrap_api_key=BOOTSTRAP_KEY,
            database_url=url,
            compliance_group_members="did:ixo:org/a",
            compliance_group_threshold="absolute_count:1",
        )
        async with running_registry(configured) as registry:
            error_of(await registry.client.get(f"/v1/governance/groups/{COMPLIANCE}"), 404)
            board = await get_json(registry.client, "/v1/governance/groups/did:ixo:group/board")
            assert board["default"] is True


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("COMPLIANCE_GROUP_MEMBERS", "notadid"),
        ("COMPLIANCE_GROUP_MEMBERS", "did:ixo:org/a=heavy"),
        ("COMPLIANCE_GROUP_MEMBERS", "did:ixo:org/a=0"),
        ("COMPLIANCE_GROUP_MEMBERS", "did:ixo:org/a,b"),
        ("COMPLIANCE_GROUP_THRESHOLD", "absolute_count"),
        ("COMPLIANCE_GROUP_THRESHOLD", "majority:0.5"),
        ("COMPLIANCE_GROUP_THRESHOLD", "absolute_percentage:half"),
        ("COMPLIANCE_GROUP_THRESHOLD", "threshold_quorum:0.5"),
        ("COMPLIANCE_GROUP_THRESHOLD", "absolute_count:1:0.5"),
    ],
)
def test_malformed_compliance_settings_are_refused(
    name: str, value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError) as raised:
        Settings(environment="test", data_dir=tmp_path)
    # The one error names the variable (its field now sits in the registry's section).
    errors = raised.value.errors()
    assert [Settings.environment_name_of(e["loc"]) for e in errors] == [name]
    assert [e["loc"] for e in errors] == [("registry", name.lower())]


def test_well_formed_compliance_settings_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPLIANCE_GROUP_MEMBERS", " did:ixo:org/a=2, did:ixo:org/b ,")
    monkeypatch.setenv("COMPLIANCE_GROUP_THRESHOLD", "threshold_quorum:0.5:0.3")
    settings = Settings(environment="test", data_dir=tmp_path)
    assert settings.registry.compliance_members == {"did:ixo:org/a": 2, "did:ixo:org/b": 1}
    assert settings.registry.compliance_threshold == ("threshold_quorum", 0.5, 0.3)
