"""Issue 18's hole, closed on the submission side, over real HTTP on both backends:
claim values within the ranges the protocol declares, one counted claim per stove and
month whatever the channel (held by a unique index under concurrent submitters), serial
numbers unique per protocol, and stoves verified by one batch proposal before their
claims are approved."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from tests.conftest import Registry, restore_token_decimals, saved_token_decimals, unique
from tests.integration.claims.test_claims_rules import (
    customer,
    evaluate,
    evaluated,
    submit,
    submitted,
)
from tests.integration.registry.test_registry_rules import error_of
from tests.support.claims_world import METERED_AMOUNT, World, executed, metered_claim
from tests.support.workflow_world import issue_claims
from twinhub.db.models import Claim, LedgerTransaction

JANUARY = {"periodStart": "2026-01-01T00:00:00Z", "periodEnd": "2026-02-01T00:00:00Z"}


def fields_of(response: httpx.Response, status: int = 422) -> dict[str, str]:
    return {d["field"]: d["error"] for d in error_of(response, status)["details"]}


# -- 1. values within the protocol's declared ranges --------------------------------------
async def test_claim_values_outside_the_protocols_ranges_are_refused(world: World) -> None:
    stove = await world.asset()
    collection = (await world.collection())["id"]
    client = world.operator_client
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"reportType": "cooking", "mealsCooked": -3}, "data.mealsCooked", "at least 0"),
        ({"reportType": "cooking", "mealsCooked": 99_999_999}, "data.mealsCooked", "at most"),
        ({"reportType": "fuel", "fuelKg": -0.5}, "data.fuelKg", "at least 0"),
        ({"reportType": "banana"}, "data.reportType", '"cooking", "fuel"'),
        ({"reportType": "cooking", "channel": "pigeon"}, "data.channel", "expected one of"),
        ({"reportType": "cooking", "fuelType": ""}, "data.fuelType", "at least 1 character"),
    ]
    for data, field, words in cases:
        problems = fields_of(await submit(client, collection, data=data, asset=stove))
        assert list(problems) == [field] and words in problems[field], (data, problems)
    # Within the range, the edges included, a claim is taken.
    taken = await submitted(
        client, collection, asset=stove, data={"reportType": "cooking", "mealsCooked": 1000}
    )
    assert taken["data"]["mealsCooked"] == 1000


async def test_a_protocol_with_nonsense_rules_is_refused(registry: Registry) -> None:
    async def create(constraints: Any, properties: dict[str, str] | None = None) -> Any:
        return await registry.client.post(
            "/v1/protocols",
            json={
                "type": "Protocol",
                "id": unique("p"),
                "properties": properties or {"n": "integer", "s": "string", "b": "boolean"},
                "constraints": constraints,
            },
        )

    bad: list[tuple[Any, str]] = [
        ({"n": {"minimum": 10, "maximum": 1}}, "constraints.n"),
        ({"n": {"minimum": "zero"}}, "constraints.n.minimum"),
        ({"n": {"maximum": True}}, "constraints.n.maximum"),
        ({"n": {"enum": ["one", "two"]}}, "constraints.n.enum[0]"),
        ({"n": {"enum": []}}, "constraints.n.enum"),
        ({"n": {"enum": [1, 1]}}, "constraints.n.enum"),
        ({"s": {"minimum": 1}}, "constraints.s.minimum"),
        ({"s": {"minLength": 5, "maxLength": 2}}, "constraints.s"),
        ({"s": {"maxLength": -1}}, "constraints.s.maxLength"),
        ({"b": {"enum": [True]}}, "constraints.b.enum"),
        ({"n": {"pattern": "^x$"}}, "constraints.n"),
        ({"missing": {"minimum": 0}}, "constraints.missing"),
        ({"n": "0..10"}, "constraints.n"),
    ]
    for constraints, field in bad:
        problems = fields_of(await create(constraints))
        assert field in problems, (constraints, problems)
    made = await create({"n": {"minimum": 0, "maximum": 5}, "s": {"enum": ["a", "b"]}})
    assert made.status_code == 201, made.text
    assert made.json()["effective"]["constraints"]["n"] == {"minimum": 0, "maximum": 5}
    # A child inherits the rules, and may not retype a constrained property silently.
    child = await registry.client.post(
        "/v1/protocols",
        json={
            "type": "Protocol",
            "id": unique("c"),
            "extends": made.json()["did"],
            "properties": {"s": "integer"},
        },
    )
    assert "properties.s.enum[0]" in fields_of(child)
    builtin = await registry.client.get("/v1/protocols/did:ixo:protocol/clean-cooking-claim")
    assert builtin.json()["constraints"]["mealsCooked"] == {"minimum": 0, "maximum": 1000}


# -- 2. one counted claim per stove and month ---------------------------------------------
async def test_a_stove_month_is_counted_once(world: World) -> None:
    stove = await world.asset()
    collection = (await world.collection())["id"]
    other_collection = (await world.collection())["id"]
    client = world.operator_client
    first = await submitted(client, collection, asset=stove, data={"reportType": "cooking"})
    assert first["data"]["periodStart"].endswith("-01T00:00:00Z")  # the month it is sent in
    for target, data in (
        (collection, {"reportType": "fuel", "fuelKg": 2}),
        (other_collection, {"reportType": "cooking", "mealsCooked": 3}),
        (collection, {"reportType": "cooking", **first["data"]}),
    ):
        error = error_of(await submit(client, target, data=data, asset=stove), 409)
        assert error["code"] == "period_claimed"
        assert error["details"] == [{"field": "existingClaim", "error": first["id"]}]
    # Another month is another stove-period; a part of January is January.
    await submitted(client, collection, asset=stove, data={"reportType": "cooking", **JANUARY})
    part = {"periodStart": "2026-01-10T00:00:00Z", "periodEnd": "2026-01-17T00:00:00Z"}
    error_of(await submit(client, collection, asset=stove, data={**DATA, **part}), 409)
    # A period over two months, backwards, half given or in the future is refused.
    for period, field in (
        ({"periodStart": "2026-01-20T00:00:00Z", "periodEnd": "2026-02-05T00:00:00Z"}, "End"),
        ({"periodStart": "2026-03-20T00:00:00Z", "periodEnd": "2026-03-05T00:00:00Z"}, "End"),
        ({"periodStart": "2026-03-01T00:00:00Z"}, "End"),
        ({"periodStart": "2099-03-01T00:00:00Z", "periodEnd": "2099-03-05T00:00:00Z"}, "Start"),
    ):
        response = await submit(client, collection, asset=stove, data={**DATA, **period})
        assert list(fields_of(response)) == [f"data.period{field}"], period
    # A rejected report frees its month for a corrected one; a counted one (flagged for
    # review here: this month's credits can only be computed once it has ended) does not.
    await evaluated(world.oracle_client, first["id"], "rejected", reason="wrong fuel")
    corrected = await submitted(client, collection, asset=stove, data=DATA)
    await evaluated(world.oracle_client, corrected["id"], "flagged", reason="site visit due")
    error_of(await submit(client, collection, asset=stove, data=DATA), 409, "period_claimed")
    # Claims about no asset (the project itself) have no stove-period.
    await submitted(client, collection, data=DATA)
    await submitted(client, collection, data=DATA)


async def test_concurrent_submitters_store_one_claim_per_stove_month(
    registry: Registry, world: World
) -> None:
    stoves = [await world.asset() for _ in range(3)]
    collection = (await world.collection())["id"]
    clients = [world.operator_client, registry.client]

    async def one(index: int) -> httpx.Response:
        return await submit(
            clients[index % 2],
            collection,
            data={**DATA, "channel": "ussd" if index % 2 else "api"},
            asset=stoves[index % 3],
        )

    responses = await asyncio.gather(*(one(i) for i in range(30)))
    codes = sorted(r.status_code for r in responses)
    assert codes == [201] * 3 + [409] * 27, [r.text for r in responses if r.status_code >= 500]
    winners = {r.json()["asset"]: r.json()["id"] for r in responses if r.status_code == 201}
    assert set(winners) == set(stoves)
    for response in responses:
        if response.status_code == 409:
            [detail] = response.json()["error"]["details"]
            assert detail["error"] in winners.values()
    listed = await registry.client.get("/v1/claims", params={"collection": collection})
    assert len(listed.json()["items"]) == 3
    # The database itself holds the rule, for writers that skip the service's look-up
    # (another process whose claim is not committed yet when this one looks).
    winner = responses[[r.status_code for r in responses].index(201)].json()
    async with registry.platform.sessionmaker() as session:
        session.add(
            Claim(
                id=unique("direct"),
                seq=10**9,
                collection_id=collection,
                agent=world.operator,
                asset_did=winner["asset"],
                data=DATA,
                status="pending",
                submitted_at=datetime.now(UTC),
                period=winner["data"]["periodStart"][:7],  # the month just ended
            )
        )
        with pytest.raises(IntegrityError):
            await session.commit()


async def test_a_chosen_claim_id_is_taken_once(registry: Registry, world: World) -> None:
    # Checked under the ledger's turn with the stove-period, in one look-up, instead of a
    # savepoint around the row: a repeat, alone or among concurrent submissions (a
    # batch of the group commit), is a 409 and stores nothing.
    collection = (await world.collection())["id"]
    chosen = unique("chosen")
    client = world.operator_client
    first = await submitted(client, collection, id=chosen, data=DATA)
    again = error_of(await submit(client, collection, id=chosen, data=DATA), 409, "conflict")
    assert chosen in again["message"]
    stoves = [await world.asset() for _ in range(4)]
    racing = unique("racing")
    responses = await asyncio.gather(
        *(submit(client, collection, id=racing, data=DATA, asset=stove) for stove in stoves)
    )
    assert sorted(r.status_code for r in responses) == [201, 409, 409, 409]
    listed = await registry.client.get("/v1/claims", params={"collection": collection})
    ids = [item["id"] for item in listed.json()["items"]]
    assert sorted(ids) == sorted([first["id"], racing])


# -- 3. serial numbers unique per protocol -------------------------------------------------
async def test_serial_numbers_are_unique_per_protocol(world: World) -> None:
    serial = unique("SN")

    async def stove(number: str, protocol: str = "did:ixo:protocol/clean-cooking") -> Any:
        return await world.operator_client.post(
            "/v1/domains",
            json={
                "type": "Device",
                "class": protocol,
                "properties": {"serialNumber": number},
                "relationships": {"project": [world.project]},
            },
        )

    first = await stove(serial)
    assert first.status_code == 201, first.text
    twin = error_of(await stove(serial), 409, "serial_taken")
    assert twin["details"][0]["field"] == "properties.serialNumber"
    assert first.json()["did"] in twin["message"]
    # Another protocol's devices number themselves.
    assert (await stove(serial, "did:ixo:protocol/device")).status_code == 201
    # Nor may an update take a serial that is taken; a free one is fine.
    second = (await stove(unique("SN"))).json()["did"]
    patch = await world.operator_client.patch(
        f"/v1/domains/{second}", json={"properties": {"serialNumber": serial}}
    )
    error_of(patch, 409, "serial_taken")
    free = unique("SN")
    patch = await world.operator_client.patch(
        f"/v1/domains/{second}", json={"properties": {"serialNumber": free}}
    )
    assert patch.status_code == 200, patch.text
    # The old serial is free again once its stove renumbers.
    assert (await stove(first.json()["properties"]["serialNumber"] + "x")).status_code == 201
    # Racing creators: the unique index lets one through.
    racing = unique("SN")
    results = await asyncio.gather(*(stove(racing) for _ in range(8)))
    assert sorted(r.status_code for r in results) == [201] + [409] * 7


# -- 4. stoves verified by a batch proposal before their claims are approved ---------------
async def test_an_unverified_stoves_claim_is_not_approved(world: World) -> None:
    stove = await world.asset(verified=False)
    await world.cook(stove, 1.0)  # metered: its credits compute once it is verified
    collection = (await world.collection())["id"]
    claim = await submitted(world.operator_client, collection, asset=stove, data=metered_claim())
    refused = error_of(await evaluate(world.oracle_client, claim["id"], "approved"), 409)
    assert refused["code"] == "domain_not_verified" and stove in refused["message"]
    # Rejecting or flagging needs no verification; approving waits for it.
    await evaluated(world.oracle_client, claim["id"], "flagged", reason="stove not verified")
    await world.verify_batch(world.project, domains=[stove])
    approved = await evaluated(
        world.oracle_client, claim["id"], "approved", reason="verified by the batch"
    )
    assert approved["amount"] == METERED_AMOUNT


async def test_a_batch_proposal_verifies_a_projects_stoves(
    registry: Registry, world: World
) -> None:
    stoves = [await world.asset(owner=customer(), verified=False) for _ in range(7)]
    elsewhere = await world.asset(project=await world.project_domain(True), verified=False)
    world_group = world.group_clients[0]
    # Nothing to verify, a stranger's list, and a non-member are refused.
    listed = await world_group.post(
        f"/v1/domains/{world.project}/batch-verification-proposals",
        json={"group": world.group, "domains": [elsewhere]},
    )
    assert error_of(listed, 422)["details"][0]["field"] == "domains"
    outsider = await world.client(f"did:ixo:org/{unique('x')}", "reader", "writer")
    refused = await outsider.post(
        f"/v1/domains/{world.project}/batch-verification-proposals", json={"group": world.group}
    )
    error_of(refused, 403)
    # Every unverified stove of the project, by protocol filter, in chunks of 3.
    world.registry.app.state.platform.governance.batch_chunk = 3
    proposed = await world_group.post(
        f"/v1/domains/{world.project}/batch-verification-proposals",
        json={"group": world.group, "protocol": "did:ixo:protocol/clean-cooking"},
    )
    assert proposed.status_code == 201, proposed.text
    proposal = proposed.json()
    assert proposal["action"] == "verify-batch" and proposal["status"] == "open"
    assert proposal["package"]["batch"]["count"] == 7
    assert proposal["progress"] == {"done": 0, "total": 7, "stopped": None}
    items = (await registry.client.get(f"/v1/proposals/{proposal['id']}/items")).json()
    assert sorted(i["domain"] for i in items["items"]) == sorted(stoves)
    early = await world_group.post(f"/v1/proposals/{proposal['id']}/execute")
    error_of(early, 409)  # not passed yet
    await world.vote_all(proposal["id"])
    # More than one chunk: the first in the request, the rest in the background (202).
    started = await world_group.post(f"/v1/proposals/{proposal['id']}/execute")
    assert started.status_code == 202, started.text
    assert started.headers["location"] == f"/v1/proposals/{proposal['id']}"
    done = await executed(registry.client, proposal["id"])
    assert done["progress"] == {"done": 7, "total": 7, "stopped": None}
    for did in stoves:
        record = (await registry.client.get(f"/v1/domains/{did}")).json()
        assert record["verified"] is True and record["version"] == 2
    assert (await registry.client.get(f"/v1/domains/{elsewhere}")).json()["verified"] is False
    # Each verification is a ledger transaction like a single proposal's.
    async with world.registry.app.state.platform.sessionmaker() as session:
        verifies = await session.scalar(
            select(func.count())
            .select_from(LedgerTransaction)
            .where(LedgerTransaction.kind == "domain.verify")
            .where(LedgerTransaction.subject.in_(stoves))
        )
    assert verifies == 7
    error_of(await world_group.post(f"/v1/proposals/{proposal['id']}/execute"), 409)


DATA = {"reportType": "cooking", "mealsCooked": 42}


# -- 5. the migration on a deployment that already holds duplicates ------------------------
async def test_the_migration_keeps_the_first_of_existing_duplicates(
    registry: Registry, world: World
) -> None:
    """0010 on the test's backend, over data made before it: down to 0009, duplicates
    planted as the old schema allowed them, up again: the oldest keeps the key. And the way
    back up does not issue a claim awaiting issuance: 0027 marks issued exactly the claims a
    mint names (it once marked every approved claim with credits, so a claim another test
    of the run had approved was issued with no mint, and `ledger verify` named it)."""
    from alembic import command
    from sqlalchemy import Connection, text

    from twinhub.db.migrate import alembic_config
    from twinhub.services.ledger_state import reconcile

    _, _, issued = await world.approved_claim()
    await issue_claims(world)
    _, _, awaiting = await world.approved_claim()
    assert awaiting["credits"]["state"] == "awaiting issuance"
    first, second = await world.asset(), await world.asset()
    collection = (await world.collection())["id"]
    client = world.operator_client
    january = await submitted(client, collection, asset=first, data={**DATA, **JANUARY})
    later = {"periodStart": "2026-01-20T00:00:00Z", "periodEnd": "2026-01-25T00:00:00Z"}
    platform = registry.platform
    await platform.stop()
    decimals = await saved_token_decimals(platform.engine)
    config = alembic_config()

    def move(connection: Connection, target: str, down: bool) -> None:
        config.attributes["connection"] = connection
        (command.downgrade if down else command.upgrade)(config, target)

    async with platform.engine.begin() as connection:
        await connection.run_sync(move, "0009", True)
        serial = await connection.scalar(
            text("SELECT properties FROM domains WHERE did = :did"), {"did": first}
        )
        properties = serial if isinstance(serial, dict) else json.loads(serial)
        own = await connection.scalar(
            text("SELECT properties FROM domains WHERE did = :did"), {"did": second}
        )
        await connection.execute(
            text("UPDATE domains SET properties = :p WHERE did = :did"),
            {"p": json.dumps(properties), "did": second},
        )
        row = (
            await connection.execute(
                text("SELECT seq, collection_id, agent, submitted_at FROM claims WHERE id = :id"),
                {"id": january["id"]},
            )
        ).one()
        await connection.execute(
            text(
                "INSERT INTO claims (id, seq, collection_id, agent, asset_did, data, status, "
                "submitted_at) VALUES ('dup-1', :seq, :c, :agent, :asset, :data, 'pending', :at)"
            ),
            {
                "seq": row.seq + 1000,
                "c": row.collection_id,
                "agent": row.agent,
                "asset": first,
                "data": json.dumps({**DATA, **later}),
                "at": row.submitted_at,
            },
        )
    async with platform.engine.begin() as connection:
        await connection.run_sync(move, "head", False)
        serials = dict(
            (
                await connection.execute(
                    text("SELECT did, serial FROM domains WHERE did IN (:a, :b)"),
                    {"a": first, "b": second},
                )
            ).all()
        )
        periods = dict(
            (
                await connection.execute(
                    text("SELECT id, period FROM claims WHERE id IN (:a, 'dup-1')"),
                    {"a": january["id"]},
                )
            ).all()
        )
        constraints = await connection.scalar(
            text("SELECT constraints FROM protocols WHERE did = :did"),
            {"did": "did:ixo:protocol/clean-cooking-claim"},
        )
    await restore_token_decimals(platform.engine, decimals)
    await platform.start()
    assert serials == {first: properties["serialNumber"], second: None}
    assert periods == {january["id"]: "2026-01", "dup-1": None}
    assert constraints is not None  # the built-in claim protocol declares its ranges again
    # January stays counted once from here on.
    error_of(await submit(client, collection, asset=first, data={**DATA, **later}), 409)
    # The planted rows go, so that the ledger of the run's shared database reconciles.
    own_properties = own if isinstance(own, dict) else json.loads(own)
    async with platform.engine.begin() as connection:
        await connection.execute(text("DELETE FROM claims WHERE id = 'dup-1'"))
        await connection.execute(
            text("UPDATE domains SET properties = :p, serial = :s WHERE did = :did"),
            {"p": json.dumps(own_properties), "s": own_properties["serialNumber"], "did": second},
        )
    # Up through 0027 again: the claim a mint names is issued (when it was minted), the
    # other still awaits issuance, and `ledger verify` names neither.
    for claim, state in ((issued, "issued"), (awaiting, "awaiting issuance")):
        view = await client.get(f"/v1/claims/{claim['id']}")
        assert view.json()["credits"]["state"] == state, view.text
    ours = {f"claim {issued['id']}", f"claim {awaiting['id']}"}
    named = [str(d) for d in await reconcile(platform.sessionmaker) if d.where in ours]
    assert named == []
