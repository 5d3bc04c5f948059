"""Households for operators: the customers API and CLI, and `ownerCustomerId` as the one way a
stove belongs to a household (USSD listing, credits, events, pre-0010 stoves adopted)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.conftest import Registry, new_phone, restore_token_decimals, saved_token_decimals
from tests.support.claims_world import METERED_AMOUNT, World, build_world, metered_claim
from tests.support.cli import base_env, run_cli
from tests.support.workflow_world import issue_claims
from twinhub.kernel.identifiers import customer_did
from twinhub.kernel.principals import Principal
from twinhub.platform import SYSTEM_PRINCIPAL, Platform
from twinhub.services.customers import CustomerView
from twinhub.services.ledger_state import reconcile
from twinhub.services.ownership import adopt_legacy_owners, stove_owner, stoves_of_customer
from twinhub.settings import Settings

PIN, WRONG = "58213", "60719"


async def new_customer(registry: Registry, name: str = "Amina Otieno") -> CustomerView:
    return await registry.platform.customers.create(new_phone(), name, PIN)


def error_of(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code, error
    return error


async def test_find_show_and_unlock_a_customer(registry: Registry) -> None:
    customer = await new_customer(registry)
    found = await registry.client.get("/v1/customers", params={"phone": customer.phone_number})
    assert found.status_code == 200, found.text
    [item] = found.json()["items"]
    assert item["customerId"] == customer.customer_id
    assert item["did"] == customer_did(customer.customer_id)
    assert item["fullName"] == "Amina Otieno" and item["locked"] is False
    by_id = await registry.client.get("/v1/customers", params={"id": customer.customer_id})
    assert by_id.json()["items"] == [item]
    assert (await registry.client.get("/v1/customers", params={"phone": new_phone()})).json() == {
        "items": []
    }
    # Three wrong PINs from the customer's own phone lock the account for that phone.
    for _ in range(registry.platform.customers.max_pin_attempts):
        await registry.platform.customers.login(customer.customer_id, WRONG, customer.phone_number)
    shown = (await registry.client.get(f"/v1/customers/{customer.customer_id}")).json()
    assert shown["locked"] is True
    assert [lock["scope"] for lock in shown["lockouts"]] == ["own"]
    assert shown["lockouts"][0]["lockedUntil"] is not None
    lifted = await registry.client.delete(f"/v1/customers/{customer.customer_id}/lockouts")
    assert lifted.status_code == 204, lifted.text
    assert (await registry.client.get(f"/v1/customers/{customer.customer_id}")).json()[
        "locked"
    ] is False
    login = await registry.platform.customers.login(
        customer.customer_id, PIN, customer.phone_number
    )
    assert login.outcome.value == "ok"
    again = await registry.client.delete(f"/v1/customers/{customer.customer_id}/lockouts")
    error_of(again, 404, "not_found")


async def test_customer_routes_are_for_admins_and_refuse_bad_input(registry: Registry) -> None:
    """An organisation's keys never read people's records (even of its stoves' households:
    any writer may name any customer as its stove's household); admins and the registry
    role do (tests/integration/events/test_tenancy.py)."""
    customer = await new_customer(registry)
    writer = registry.as_key(await registry.key("did:ixo:org/field-team", "reader", "writer"))
    async with writer:
        for path in ("/v1/customers?id=" + customer.customer_id, "/v1/customers/12345674"):
            error_of(await writer.get(path), 403, "forbidden")
        error_of(
            await writer.delete(f"/v1/customers/{customer.customer_id}/lockouts"), 403, "forbidden"
        )
    error_of(await registry.client.get("/v1/customers"), 422, "validation_failed")
    both = await registry.client.get(
        "/v1/customers", params={"id": customer.customer_id, "phone": customer.phone_number}
    )
    error_of(both, 422, "validation_failed")
    bad_phone = await registry.client.get("/v1/customers", params={"phone": "0700 000 001"})
    assert error_of(bad_phone, 422, "validation_failed")["details"][0]["field"] == "phone"
    unknown = customer.customer_id[:-1] + str((int(customer.customer_id[-1]) + 1) % 10)
    error_of(await registry.client.get(f"/v1/customers/{unknown}"), 404, "not_found")
    error_of(await registry.client.get("/v1/customers/abc"), 422, "validation_failed")


async def assign(
    registry: Registry, customer_id: str, stove: str, source: str | None = None
) -> Any:
    body = {"stove": stove, **({"from": source} if source else {})}
    return await registry.client.post(f"/v1/customers/{customer_id}/stoves", json=body)


async def test_assign_and_move_a_stove_between_households(registry: Registry) -> None:
    world: World = await build_world(registry)
    try:
        await world.collection()
        first, second = await new_customer(registry), await new_customer(registry, "Juma Ali")
        stove = await world.metered_asset()  # verified, metered, of no household
        assert await stove_owner(registry.platform.domains, stove) is None

        given = await assign(registry, first.customer_id, stove)
        assert given.status_code == 200, given.text
        assert given.json()["properties"]["ownerCustomerId"] == first.customer_id
        listed = await registry.client.get(f"/v1/customers/{first.customer_id}/stoves")
        assert [s["did"] for s in listed.json()["items"]] == [stove]
        ussd_view = await registry.platform.stoves.stoves_of(first.customer_id)
        assert [s.did for s in ussd_view] == [stove]

        # Not taken by accident: a stove another household holds moves only when the
        # household it leaves is named, and named right.
        error_of(await assign(registry, second.customer_id, stove), 409, "owner_mismatch")
        wrong = await assign(registry, second.customer_id, stove, second.customer_id)
        error_of(wrong, 409, "owner_mismatch")
        moved = await assign(registry, second.customer_id, stove, first.customer_id)
        assert moved.status_code == 200, moved.text
        assert await stoves_of_customer(registry.platform.domains, first.customer_id) == []
        assert await stove_owner(registry.platform.domains, stove) == second.customer_id

        # The household reports on its metered days, and the credits are theirs.
        household = Principal(customer_did(second.customer_id), frozenset({"writer"}))
        collection = (await world.collection())["id"]
        claim = await registry.platform.claims.submissions.submit(
            collection, metered_claim(3), household, asset=stove
        )
        approved = await world.oracle_client.post(
            f"/v1/claims/{claim['id']}/evaluations", json={"status": "approved"}
        )
        assert approved.status_code == 200, approved.text
        holder = customer_did(second.customer_id)
        assert await registry.platform.credits.balances(holder) == []  # until issuance
        await issue_claims(world)
        balances = await registry.platform.credits.balances(holder)
        assert [int(b["amount"]) for b in balances] == [METERED_AMOUNT]
        claims = (await registry.client.get(f"/v1/customers/{second.customer_id}/claims")).json()
        assert [(c["id"], c["status"]) for c in claims["items"]] == [(claim["id"], "approved")]

        # A household's stove leaves it; a household that does not hold it cannot free it.
        path = f"/v1/customers/{first.customer_id}/stoves/{stove}"
        error_of(await registry.client.delete(path), 404, "not_found")
        freed = await registry.client.delete(f"/v1/customers/{second.customer_id}/stoves/{stove}")
        assert freed.status_code == 200, freed.text
        assert "ownerCustomerId" not in freed.json()["properties"]

        events = [
            (e.type, e.data)
            for e in await registry.platform.events.store.all_records()
            if e.type.startswith("stove.") and e.data.get("stove") == stove
        ]
        assert [(t, {k: v for k, v in d.items() if k != "ledger"}) for t, d in events] == [
            ("stove.assigned", {"stove": stove, "customerId": first.customer_id}),
            ("stove.moved", {"stove": stove, "from": first.customer_id, "to": second.customer_id}),
            ("stove.moved", {"stove": stove, "from": second.customer_id, "to": None}),
        ]
        assert await reconcile(registry.platform.sessionmaker) == []
    finally:
        await world.close()


async def test_owner_customer_id_must_name_a_customer(registry: Registry) -> None:
    world = await build_world(registry)
    try:
        stove = await world.asset()
        customer = await new_customer(registry)
        for value, problem in (
            ("12345678", "expected a customer ID"),  # fails its check digit
            (customer.customer_id[:-1] + "x", "expected a customer ID"),
        ):
            patched = await world.operator_client.patch(
                f"/v1/domains/{stove}", json={"properties": {"ownerCustomerId": value}}
            )
            details = error_of(patched, 422, "validation_failed")["details"]
            assert details[0]["field"] == "properties.ownerCustomerId"
            assert problem in details[0]["error"]
        # A stove created for a household through the plain domains API is that household's.
        created = await world.operator_client.post(
            "/v1/domains",
            json={
                "type": "Device",
                "class": "did:ixo:protocol/clean-cooking",
                "properties": {"ownerCustomerId": customer.customer_id},
                "relationships": {"project": [world.project]},
            },
        )
        assert created.status_code == 201, created.text
        mine = await stoves_of_customer(registry.platform.domains, customer.customer_id)
        assert [s["did"] for s in mine] == [created.json()["did"]]
        # Not a stove: no household to give it to.
        error_of(
            await assign(registry, customer.customer_id, world.project), 422, "validation_failed"
        )
    finally:
        await world.close()


async def test_stoves_owned_the_pre_0011_way_are_adopted(registry: Registry) -> None:
    world = await build_world(registry)
    try:
        customer = await new_customer(registry)
        legacy = await world.asset(owner=customer_did(customer.customer_id))
        stranger = await world.asset(owner="did:ixo:customer/not-a-customer")
        assert await stove_owner(registry.platform.domains, legacy) is None
        platform = registry.platform
        assert await adopt_legacy_owners(platform.sessionmaker, platform.domains, SYSTEM_PRINCIPAL)
        record = await platform.domains.get(legacy)
        assert record["properties"]["ownerCustomerId"] == customer.customer_id
        assert record["controller"] == [world.operator]
        assert await stove_owner(platform.domains, stranger) is None
        again = await adopt_legacy_owners(platform.sessionmaker, platform.domains, SYSTEM_PRINCIPAL)
        assert again == 0
        assert await reconcile(platform.sessionmaker) == []
    finally:
        await world.close()


def test_customers_cli(tmp_path: Path) -> None:
    env = base_env(tmp_path)
    env["PIN_ENCRYPTION_KEY"] = "ab" * 32
    settings = Settings(data_dir=tmp_path / "data", pin_encryption_key=env["PIN_ENCRYPTION_KEY"])

    async def setup() -> tuple[str, str, str]:
        from twinhub.services.domains import DomainSpec

        platform = Platform(settings)
        await platform.start()
        try:
            one = await platform.customers.create("+254700000001", "Amina Otieno", PIN)
            two = await platform.customers.create("+254700000002", "Juma Ali", PIN)
            for _ in range(3):
                await platform.customers.login(one.customer_id, WRONG, "+254700000001")
            stove = await platform.domains.create(
                DomainSpec(
                    type="Device",
                    protocol="did:ixo:protocol/clean-cooking",
                    metadata={"name": "Jiko 7"},
                ),
                SYSTEM_PRINCIPAL,
            )
            return one.customer_id, two.customer_id, stove["did"]
        finally:
            await platform.stop()

    one, two, stove = asyncio.run(setup())
    found = run_cli("customers", "find", "+254700000001", env=env)
    assert found.returncode == 0, found.stderr
    assert found.stdout.split("\t")[:3] == [one, "Amina Otieno", "+254700000001"]
    assert "locked out" in found.stdout
    assigned = run_cli("customers", "assign-stove", stove, one, env=env)
    assert assigned.returncode == 0, assigned.stderr
    taken = run_cli("customers", "assign-stove", stove, two, env=env)
    assert taken.returncode == 1 and f"belongs to household {one}" in taken.stderr
    shown = run_cli("customers", "show", one, env=env)
    assert shown.returncode == 0, shown.stderr
    assert "stoves: 1" in shown.stdout and f"{stove}\tJiko 7\tactive" in shown.stdout
    assert "locked (own)" in shown.stdout
    assert run_cli("customers", "unlock", one, env=env).returncode == 0
    assert "not locked" in run_cli("customers", "show", one, env=env).stdout
    refused = run_cli("customers", "move-stove", stove, "--to", two, "--from", two, env=env)
    assert refused.returncode == 1 and "not to" in refused.stderr
    moved = run_cli("customers", "move-stove", stove, "--to", two, "--from", one, env=env)
    assert moved.returncode == 0, moved.stderr
    assert "stoves: 1" in run_cli("customers", "show", two, env=env).stdout
    assert run_cli("customers", "show", "10000009", env=env).returncode == 1
    verified = run_cli("ledger", "verify", env=env)
    assert verified.returncode == 0, verified.stderr


async def test_the_migration_copies_owners_into_the_column(registry: Registry) -> None:
    """0011 on the test's backend: down to 0010 drops the column, up again fills it from
    each record's ownerCustomerId."""
    from alembic import command
    from sqlalchemy import Connection, inspect, text

    from twinhub.db.migrate import alembic_config
    from twinhub.services.domains import DomainSpec

    platform = registry.platform
    customer = await new_customer(registry)
    stove = await platform.domains.create(
        DomainSpec(
            type="Device",
            protocol="did:ixo:protocol/clean-cooking",
            properties={"ownerCustomerId": customer.customer_id},
        ),
        SYSTEM_PRINCIPAL,
    )
    await platform.stop()  # no background work while the schema moves
    decimals = await saved_token_decimals(platform.engine)
    config = alembic_config()

    def move(connection: Connection, target: str, down: bool) -> list[str]:
        config.attributes["connection"] = connection
        (command.downgrade if down else command.upgrade)(config, target)
        return [c["name"] for c in inspect(connection).get_columns("domains")]

    async with platform.engine.begin() as connection:
        assert "owner_customer_id" not in await connection.run_sync(move, "0010", True)
    async with platform.engine.begin() as connection:
        assert "owner_customer_id" in await connection.run_sync(move, "head", False)
        owner = await connection.scalar(
            text("SELECT owner_customer_id FROM domains WHERE did = :did"), {"did": stove["did"]}
        )
    assert owner == customer.customer_id
    await restore_token_decimals(platform.engine, decimals)
    await platform.start()
    assert [s["did"] for s in await stoves_of_customer(platform.domains, customer.customer_id)] == [
        stove["did"]
    ]
