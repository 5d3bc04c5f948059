"""Governance end to end over HTTP: a group verifies a domain by vote and execution."""

from __future__ import annotations

from tests.conftest import Registry, unique
from tests.integration.registry.test_registry_basics import make_domain
from tests.support.claims_world import compliance_group


async def test_a_group_verifies_a_domain(registry: Registry) -> None:
    members = [f"did:ixo:org/{unique('m')}" for _ in range(3)]
    group = await compliance_group(registry, members, needed=2)
    project = await make_domain(
        registry, type="Project", **{"class": "did:ixo:protocol/project"}, metadata={"name": "P"}
    )
    keys = [registry.as_key(await registry.key(m, "reader", "writer")) for m in members]
    try:
        proposed = await keys[0].post(
            f"/v1/domains/{project['did']}/verification-proposals",
            json={"group": group, "evidence": {"audit": "ok"}},
        )
        assert proposed.status_code == 201, proposed.text
        proposal = proposed.json()
        assert proposal["status"] == "open"
        assert proposal["package"]["record"]["did"] == project["did"]
        url = f"/v1/proposals/{proposal['id']}"
        early = await keys[0].post(f"{url}/execute")
        assert early.status_code == 409
        assert (await keys[0].post(f"{url}/votes", json={"option": "yes"})).json()[
            "status"
        ] == "open"
        again = await keys[0].post(f"{url}/votes", json={"option": "no"})
        assert again.status_code == 409
        passed = await keys[1].post(f"{url}/votes", json={"option": "yes"})
        assert passed.json()["status"] == "passed"
        assert passed.json()["tally"]["yes"] == 2
        late = await keys[2].post(f"{url}/votes", json={"option": "no"})
        assert late.status_code == 409
        executed = await keys[2].post(f"{url}/execute")
        assert executed.status_code == 200, executed.text
        assert executed.json()["status"] == "executed"
        record = (await registry.client.get(f"/v1/domains/{project['did']}")).json()
        assert record["verified"] is True
        history = (await registry.client.get(f"/v1/domains/{project['did']}/history")).json()[
            "items"
        ]
        assert history[-1]["kind"] == "domain.verify"
        outsider = registry.as_key(await registry.key("did:ixo:org/outsider", "writer"))
        refused = await outsider.post(
            f"/v1/domains/{project['did']}/verification-proposals",
            json={"group": group},
        )
        assert refused.status_code == 403
        await outsider.aclose()
        assert (await registry.platform.ledger.verify()).ok
    finally:
        for client in keys:
            await client.aclose()
