"""The whole chain over HTTP on both backends: organisation → project (verified by vote) →
asset → claim → evaluation → signed credential → credits, then transfer and retirement."""

from __future__ import annotations

from tests.conftest import Registry, unique
from tests.support.claims_world import METERED_AMOUNT, build_world, metered_claim
from tests.support.workflow_world import issue_claims


async def test_an_approved_claim_becomes_a_credential_and_credits(registry: Registry) -> None:
    world = await build_world(registry)
    try:
        owner = f"did:ixo:customer/{unique('c')}"
        stove = await world.metered_asset(owner=owner)
        collection = await world.collection(quota=10)
        submitted = await world.operator_client.post(
            f"/v1/claim-collections/{collection['id']}/claims",
            json={"asset": stove, "data": metered_claim(42)},
        )
        assert submitted.status_code == 201, submitted.text
        claim = submitted.json()
        assert claim["status"] == "pending"
        approved = await world.oracle_client.post(
            f"/v1/claims/{claim['id']}/evaluations", json={"status": "approved"}
        )
        assert approved.status_code == 200, approved.text
        assert approved.json()["status"] == "approved"
        assert approved.json()["oracle"] == world.oracle
        credential = (await registry.client.get(f"/v1/claims/{claim['id']}/credential")).json()
        assert credential["credentialSubject"]["id"] == stove
        assert credential["credentialSubject"]["evaluation"]["amount"] == METERED_AMOUNT
        check = await registry.client.post("/v1/credentials/verify", json=credential)
        assert check.json() == {
            "verified": True,
            "problem": None,
            "issuer": credential["issuer"],
            "issuedByThisPlatform": True,
        }
        credential["credentialSubject"]["evaluation"]["amount"] = 700
        tampered = await registry.client.post("/v1/credentials/verify", json=credential)
        assert tampered.json()["verified"] is False
        assert approved.json()["credits"]["state"] == "awaiting issuance"
        none = (await registry.client.get(f"/v1/balances/{owner}")).json()["balances"]
        assert not [b for b in none if b["token"] == "CARBON"]  # minted at issuance
        await issue_claims(world)
        balances = (await registry.client.get(f"/v1/balances/{owner}")).json()["balances"]
        carbon = {"token": "CARBON", "amount": METERED_AMOUNT, "retired": 0, "decimals": 6}
        assert carbon in balances
        counts = (await registry.client.get(f"/v1/claim-collections/{collection['id']}")).json()
        assert counts["counts"]["approved"] == 1 and counts["counts"]["pending"] == 0
        # The owner (custodied by an admin) transfers and retires.
        buyer_client = await world.transfer_and_retire(owner, 3, 2)
        too_much = await buyer_client.post(
            "/v1/credits/CARBON/retirements", json={"amount": 2, "reason": "again"}
        )
        assert too_much.status_code == 409
        assert too_much.json()["error"]["code"] == "insufficient_credits"
        assert (await registry.platform.ledger.verify()).ok
        history = (await registry.client.get(f"/v1/domains/{stove}/history")).json()["items"]
        assert [h["kind"] for h in history][-2:] == ["claims.submit", "claims.evaluate"]
    finally:
        await world.close()


async def test_graphql_shows_claims_and_credits(registry: Registry) -> None:
    world = await build_world(registry)
    try:
        owner = f"did:ixo:customer/{unique('c')}"
        stove = await world.metered_asset(owner=owner)
        collection = await world.collection()
        claim = (
            await world.operator_client.post(
                f"/v1/claim-collections/{collection['id']}/claims",
                json={"asset": stove, "data": metered_claim(20)},
            )
        ).json()
        approved = await world.oracle_client.post(
            f"/v1/claims/{claim['id']}/evaluations", json={"status": "approved"}
        )
        assert approved.status_code == 200, approved.text
        waiting = await registry.client.post(
            "/graphql",
            json={
                "query": "query($id: String!) { claim(id: $id) { creditsState creditsPeriod } }",
                "variables": {"id": claim["id"]},
            },
        )
        assert waiting.json()["data"]["claim"] == {
            "creditsState": "awaiting issuance",
            "creditsPeriod": None,
        }
        issued = await issue_claims(world)
        query = (
            "query($id: String!, $holder: String!, $asset: String!) {"
            " claim(id: $id) { status amount credential asset creditsState creditsPeriod }"
            " claims(asset: $asset) { nodes { id status } }"
            " balances(holder: $holder) { token amount retired decimals }"
            ' creditClass(name: "CARBON") { minted supply } }'
        )
        answer = await registry.client.post(
            "/graphql",
            json={
                "query": query,
                "variables": {"id": claim["id"], "holder": owner, "asset": stove},
            },
        )
        data = answer.json()["data"]
        assert data["claim"] == {
            "status": "approved",
            "amount": METERED_AMOUNT,
            "credential": approved.json()["credential"],
            "asset": stove,
            "creditsState": "issued",
            "creditsPeriod": issued["id"],
        }
        assert data["claims"]["nodes"] == [{"id": claim["id"], "status": "approved"}]
        assert data["balances"] == [
            {"token": "CARBON", "amount": METERED_AMOUNT, "retired": 0, "decimals": 6}
        ]
        supply = (await registry.client.get("/v1/credits/CARBON")).json()
        assert data["creditClass"] == {"minted": supply["minted"], "supply": supply["supply"]}
    finally:
        await world.close()
