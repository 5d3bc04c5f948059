"""Governance over HTTP on both backends: thresholds at their edges, expiry, who may do what,
revocation, the default group, the verified flag, concurrency and the ledger."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from tests.conftest import Backend, Registry, unique
from tests.integration.registry.test_registry_basics import make_domain

GROUPS = "/v1/governance/groups"
A, B, C = 0, 1, 2  # members of weight 3, 2 and 1 in the [3, 2, 1] groups


@dataclass
class Group:
    did: str
    members: list[str]
    clients: list[httpx.AsyncClient]


@dataclass
class Council:
    """Creates groups whose members each hold an API key; closes every client at the end."""

    registry: Registry
    opened: list[httpx.AsyncClient] = field(default_factory=list)

    async def client(self, did: str, *roles: str) -> httpx.AsyncClient:
        client = self.registry.as_key(await self.registry.key(did, *roles))
        self.opened.append(client)
        return client

    async def group(
        self,
        weights: list[int],
        kind: str,
        value: float,
        quorum: float | None = None,
        period: int = 3600,
        default: bool = False,
    ) -> Group:
        members = [f"did:ixo:org/{unique('member')}" for _ in weights]
        response = await self.registry.client.post(
            GROUPS,
            json=group_body(members, weights, kind, value, quorum, period, default),
        )
        assert response.status_code == 201, response.text
        clients = [await self.client(m, "reader", "writer") for m in members]
        return Group(response.json()["did"], members, clients)


def group_body(
    members: list[str],
    weights: list[int],
    kind: str,
    value: float,
    quorum: float | None = None,
    period: int = 3600,
    default: bool = False,
) -> dict[str, Any]:
    threshold: dict[str, Any] = {"kind": kind, "value": value}
    if quorum is not None:
        threshold["quorum"] = quorum
    return {
        "id": unique("group"),
        "name": "Compliance",
        "members": [{"did": m, "weight": w} for m, w in zip(members, weights, strict=True)],
        "threshold": threshold,
        "votingPeriodSeconds": period,
        "default": default,
    }


@pytest.fixture
async def council(registry: Registry) -> AsyncIterator[Council]:
    made = Council(registry)
    yield made
    for client in made.opened:
        await client.aclose()


async def propose(
    client: httpx.AsyncClient,
    domain: str,
    group: str | None = None,
    action: str = "verify",
    expect: int = 201,
) -> dict[str, Any]:
    body: dict[str, Any] = {"action": action, "evidence": {"audit": unique("a")}}
    if group is not None:
        body["group"] = group
    response = await client.post(f"/v1/domains/{domain}/verification-proposals", json=body)
    assert response.status_code == expect, response.text
    return response.json()


async def vote(client: httpx.AsyncClient, proposal: int, option: str) -> httpx.Response:
    return await client.post(f"/v1/proposals/{proposal}/votes", json={"option": option})


async def status_of(registry: Registry, proposal: int) -> dict[str, Any]:
    response = await registry.client.get(f"/v1/proposals/{proposal}")
    assert response.status_code == 200, response.text
    return response.json()


async def wait_until_decided(registry: Registry, proposal: int, seconds: float = 5) -> dict:
    """Poll until the proposal leaves `open` (its period ended), within a deadline."""
    deadline = time.monotonic() + seconds
    while True:
        view = await status_of(registry, proposal)
        if view["status"] != "open" or time.monotonic() > deadline:
            return view
        await asyncio.sleep(0.1)


async def history_kinds(registry: Registry, domain: str) -> list[str]:
    response = await registry.client.get(f"/v1/domains/{domain}/history")
    assert response.status_code == 200, response.text
    return [entry["kind"] for entry in response.json()["items"]]


async def verified(registry: Registry, domain: str) -> bool:
    return (await registry.client.get(f"/v1/domains/{domain}")).json()["verified"]


async def play(
    registry: Registry, council: Council, weights: list[int], threshold: tuple, steps: list
) -> None:
    """Cast `steps` [(member, option, status after)] on a fresh proposal of a fresh group."""
    kind, value, quorum = threshold
    group = await council.group(weights, kind, value, quorum)
    domain = (await make_domain(registry))["did"]
    proposal = await propose(group.clients[0], domain, group.did)
    assert proposal["status"] == "open"
    assert proposal["tally"] == {
        "yes": 0,
        "no": 0,
        "abstain": 0,
        "remaining": sum(weights),
        "total": sum(weights),
    }
    for number, (member, option, expected) in enumerate(steps):
        response = await vote(group.clients[member], proposal["id"], option)
        assert response.status_code == 200, (threshold, steps, number, response.text)
        assert response.json()["status"] == expected, (threshold, steps[: number + 1])
    final = await status_of(registry, proposal["id"])
    assert final["status"] == steps[-1][2]
    cast = {option: 0 for option in ("yes", "no", "abstain")}
    for member, option, _ in steps:
        cast[option] += weights[member]
    assert {k: final["tally"][k] for k in cast} == cast
    assert final["tally"]["remaining"] == sum(weights) - sum(cast.values())
    if final["status"] != "open":  # a decided proposal takes no more votes
        voters = {member for member, _, _ in steps}
        for member in set(range(len(weights))) - voters:
            late = await vote(group.clients[member], proposal["id"], "yes")
            assert late.status_code == 409, late.text


# -- 1. thresholds ---------------------------------------------------------------------------

W = [3, 2, 1]

ABSOLUTE_COUNT_CASES = [
    (3, [(B, "yes", "open"), (C, "yes", "passed")]),  # 2 is short; 2 + 1 = 3 reaches it
    (3, [(A, "yes", "passed")]),
    (3, [(B, "no", "open"), (C, "no", "open"), (A, "yes", "passed")]),  # 0 + 3 still can
    (3, [(A, "no", "open"), (B, "abstain", "rejected")]),  # 0 + 1 remaining < 3
    (4, [(A, "no", "rejected")]),  # 0 + 3 remaining < 4
    (4, [(A, "yes", "open"), (C, "yes", "passed")]),
    (4, [(C, "no", "open"), (B, "no", "rejected")]),
    (6, [(A, "yes", "open"), (B, "yes", "open"), (C, "yes", "passed")]),
    (6, [(A, "yes", "open"), (C, "abstain", "rejected")]),
]


@pytest.mark.parametrize("value,steps", ABSOLUTE_COUNT_CASES)
async def test_absolute_count_at_its_boundaries(
    registry: Registry, council: Council, value: int, steps: list
) -> None:
    await play(registry, council, W, ("absolute_count", value, None), steps)


ABSOLUTE_PERCENTAGE_CASES = [
    (W, 0.5, [(B, "yes", "open"), (C, "yes", "passed")]),  # exactly 3 of 6 passes
    (W, 0.5, [(A, "yes", "passed")]),
    (W, 0.5, [(B, "yes", "open"), (A, "no", "open"), (C, "no", "rejected")]),  # 2 + 1, then 2
    (W, 0.5, [(A, "no", "open"), (B, "abstain", "rejected")]),
    (W, 0.51, [(A, "yes", "open"), (C, "yes", "passed")]),  # 50% is below 51%
    (W, 0.51, [(A, "yes", "open"), (B, "no", "open"), (C, "no", "rejected")]),
    (W, 1.0, [(A, "yes", "open"), (B, "yes", "open"), (C, "yes", "passed")]),
    (W, 1.0, [(C, "abstain", "rejected")]),
    # 0.3 x 10 and 0.7 x 10 are not exactly 3 and 7 in floating point; the weights are.
    ([1] * 10, 0.3, [(0, "yes", "open"), (1, "yes", "open"), (2, "yes", "passed")]),
    ([1] * 10, 0.7, [(i, "yes", "open") for i in range(6)] + [(6, "yes", "passed")]),
    ([1] * 10, 0.7, [(i, "no", "open") for i in range(3)] + [(3, "no", "rejected")]),
]


@pytest.mark.parametrize("weights,value,steps", ABSOLUTE_PERCENTAGE_CASES)
async def test_absolute_percentage_at_its_boundaries(
    registry: Registry, council: Council, weights: list[int], value: float, steps: list
) -> None:
    await play(registry, council, weights, ("absolute_percentage", value, None), steps)


THRESHOLD_QUORUM_CASES = [
    # threshold 0.5, quorum 0.5 of 6: 3 voted and yes >= half of yes + no.
    (0.5, [(A, "yes", "passed")]),  # quorum met, and no remaining vote can undo it
    (0.5, [(B, "yes", "open"), (C, "yes", "passed")]),
    (0.5, [(B, "yes", "open"), (A, "no", "open"), (C, "yes", "passed")]),  # 3 vs 3 is half
    (0.5, [(B, "yes", "open"), (A, "no", "open"), (C, "no", "rejected")]),
    (0.5, [(A, "no", "open"), (B, "no", "rejected")]),  # at best 1 yes against 5
    # Abstentions count toward the quorum but not in the threshold's yes + no.
    (0.5, [(A, "abstain", "open"), (B, "yes", "passed")]),
    (0.5, [(A, "abstain", "open"), (C, "yes", "open"), (B, "no", "rejected")]),
    (0.5, [(C, "no", "open"), (A, "abstain", "open"), (B, "yes", "passed")]),  # 2 vs 1
    (0.5, [(A, "abstain", "open"), (B, "abstain", "open"), (C, "abstain", "rejected")]),
    # quorum 0.9: the threshold holds however the rest vote, but too few have voted.
    (0.9, [(A, "yes", "open"), (B, "yes", "open"), (C, "no", "passed")]),
]


@pytest.mark.parametrize("quorum,steps", THRESHOLD_QUORUM_CASES)
async def test_threshold_quorum_at_its_boundaries(
    registry: Registry, council: Council, quorum: float, steps: list
) -> None:
    await play(registry, council, W, ("threshold_quorum", 0.5, quorum), steps)


async def test_threshold_quorum_decides_at_the_end_of_the_period(
    registry: Registry, council: Council
) -> None:
    group = await council.group(
        W, "threshold_quorum", 0.5, 0.5, period=3
    )  # the votes below must land inside it, even on a slow machine
    a, b, c = group.clients
    domain = (await make_domain(registry))["did"]
    # Threshold met (1 yes, 0 no) but quorum not (1 of 3): open, then rejected at the end.
    short = await propose(a, domain, group.did)
    assert (await vote(c, short["id"], "yes")).json()["status"] == "open"
    # The abstention makes the quorum (4 of 3); 1 yes of 1 yes + 0 no meets the threshold.
    abstained = await propose(a, domain, group.did)
    assert (await vote(a, abstained["id"], "abstain")).json()["status"] == "open"
    assert (await vote(c, abstained["id"], "yes")).json()["status"] == "open"
    # Quorum met, threshold not: 1 yes against 2 no.
    against = await propose(a, domain, group.did)
    assert (await vote(c, against["id"], "yes")).json()["status"] == "open"
    assert (await vote(b, against["id"], "no")).json()["status"] == "open"

    decided = await wait_until_decided(registry, short["id"])
    assert decided["status"] == "rejected", decided
    assert decided["decidedAt"] is not None
    assert (await wait_until_decided(registry, abstained["id"]))["status"] == "passed"
    assert (await wait_until_decided(registry, against["id"]))["status"] == "rejected"
    # A proposal passed at the end of its period still executes afterwards.
    executed = await b.post(f"/v1/proposals/{abstained['id']}/execute")
    assert executed.status_code == 200, executed.text
    assert await verified(registry, domain) is True


# -- group validation ------------------------------------------------------------------------

INVALID_GROUPS = [
    ("absolute_count", 7, None, {}),  # above the total weight 6
    ("absolute_count", 0, None, {}),
    ("absolute_count", 2.5, None, {}),
    ("absolute_count", -1, None, {}),
    ("absolute_percentage", 0, None, {}),
    ("absolute_percentage", 1.01, None, {}),
    ("absolute_percentage", -0.5, None, {}),
    ("threshold_quorum", 0.5, None, {}),  # quorum missing
    ("threshold_quorum", 0.5, 0, {}),
    ("threshold_quorum", 0.5, 1.5, {}),
    ("threshold_quorum", 0, 0.5, {}),
    ("threshold_quorum", 1.2, 0.5, {}),
    ("absolute_count", 2, 0.5, {}),  # only threshold_quorum has a quorum
    ("absolute_percentage", 0.5, 0.5, {}),
    ("majority", 0.5, None, {}),
    ("absolute_count", 2, None, {"members": []}),
    ("absolute_count", 1, None, {"members": [{"did": "alice", "weight": 1}]}),
    ("absolute_count", 1, None, {"members": [{"did": "did:ixo:org/x", "weight": 0}]}),
    ("absolute_count", 2, None, {"votingPeriodSeconds": 0}),
    ("absolute_count", 2, None, {"votingPeriodSeconds": 366 * 86400 + 1}),
    ("absolute_count", 2, None, {"name": ""}),
    ("absolute_count", 2, None, {"id": "Not A Slug!"}),
]


async def test_invalid_groups_are_refused(registry: Registry, council: Council) -> None:
    members = [f"did:ixo:org/{unique('m')}" for _ in W]
    for kind, value, quorum, overrides in INVALID_GROUPS:
        body = {**group_body(members, W, kind, value, quorum), **overrides}
        response = await registry.client.post(GROUPS, json=body)
        assert response.status_code == 422, (kind, value, quorum, overrides, response.text)
        missing = await registry.client.get(f"{GROUPS}/did:ixo:group/{body['id']}")
        assert missing.status_code in (404, 422), missing.text
    # The edges that are valid.
    for kind, value, quorum, period in [
        ("absolute_count", 6, None, 1),
        ("absolute_count", 1, None, 366 * 86400),
        ("absolute_percentage", 1, None, 3600),
        ("threshold_quorum", 1, 1, 3600),
    ]:
        body = group_body(members, W, kind, value, quorum, period)
        response = await registry.client.post(GROUPS, json=body)
        assert response.status_code == 201, (kind, value, response.text)
        fetched = await registry.client.get(f"{GROUPS}/{response.json()['did']}")
        assert fetched.status_code == 200
        assert fetched.json()["threshold"] == {"kind": kind, "value": value, "quorum": quorum}
        assert sorted(m["weight"] for m in fetched.json()["members"]) == [1, 2, 3]
    again = await registry.client.post(GROUPS, json=body)
    assert again.status_code == 409, again.text
    # Only an admin creates groups, even one naming the caller as a member.
    writer = await council.client(members[0], "reader", "writer")
    refused = await writer.post(GROUPS, json=group_body(members, W, "absolute_count", 2))
    assert refused.status_code == 403, refused.text
    anonymous = registry.as_key(None)
    council.opened.append(anonymous)
    assert (await anonymous.post(GROUPS, json=body)).status_code == 401
    assert (await registry.client.get(f"{GROUPS}/did:ixo:group/{unique('none')}")).status_code == (
        404
    )


# -- 2. expiry -------------------------------------------------------------------------------


async def test_an_unvoted_proposal_expires_rejected(registry: Registry, council: Council) -> None:
    group = await council.group(W, "absolute_count", 3, period=1)
    a, b, _ = group.clients
    domain = (await make_domain(registry))["did"]
    polled = await propose(a, domain, group.did)
    unread = await propose(a, domain, group.did)  # nobody reads it before it is voted on
    unexecuted = await propose(a, domain, group.did)
    assert polled["status"] == unread["status"] == "open"
    decided = await wait_until_decided(registry, polled["id"])
    assert decided["status"] == "rejected", decided
    assert (await vote(b, polled["id"], "yes")).status_code == 409
    # `unread` was proposed a moment after `polled`: let its own period end too, unread.
    ends = datetime.fromisoformat(unread["expiresAt"])
    await asyncio.sleep(max(0.0, (ends - datetime.now(UTC)).total_seconds()) + 0.05)
    late = await vote(b, unread["id"], "yes")
    assert late.status_code == 409, late.text
    assert (await status_of(registry, unread["id"]))["status"] == "rejected"
    for proposal in (polled, unexecuted):
        refused = await a.post(f"/v1/proposals/{proposal['id']}/execute")
        assert refused.status_code == 409, refused.text
    assert (await status_of(registry, unexecuted["id"]))["status"] == "rejected"
    assert await verified(registry, domain) is False
    assert "domain.verify" not in await history_kinds(registry, domain)


# -- 3. who may do what ----------------------------------------------------------------------


async def test_only_members_propose_and_vote_once(registry: Registry, council: Council) -> None:
    group = await council.group(W, "absolute_count", 5)
    other = await council.group([1], "absolute_count", 1)
    a, b, c = group.clients
    outsider = await council.client(f"did:ixo:org/{unique('outsider')}", "reader", "writer")
    domain = (await make_domain(registry))["did"]
    await propose(outsider, domain, group.did, expect=403)
    await propose(other.clients[0], domain, group.did, expect=403)
    await propose(registry.client, domain, group.did, expect=403)  # an admin is no member
    await propose(a, f"did:ixo:org/{unique('nowhere')}", group.did, expect=404)
    await propose(a, domain, f"did:ixo:group/{unique('nowhere')}", expect=404)
    bad_action = await a.post(
        f"/v1/domains/{domain}/verification-proposals",
        json={"group": group.did, "action": "approve"},
    )
    assert bad_action.status_code == 422, bad_action.text

    proposal = await propose(b, domain, group.did)
    assert proposal["proposer"] == group.members[B]
    url = f"/v1/proposals/{proposal['id']}"
    assert (await vote(outsider, proposal["id"], "yes")).status_code == 403
    assert (await vote(other.clients[0], proposal["id"], "yes")).status_code == 403
    assert (await vote(registry.client, proposal["id"], "yes")).status_code == 403
    assert (await vote(a, proposal["id"], "maybe")).status_code == 422
    first = await vote(a, proposal["id"], "yes")
    assert first.status_code == 200, first.text
    for option in ("yes", "no", "abstain"):
        again = await vote(a, proposal["id"], option)
        assert again.status_code == 409, again.text
    view = await status_of(registry, proposal["id"])
    assert view["tally"]["yes"] == 3 and view["tally"]["no"] == 0
    assert [(v["voter"], v["option"], v["weight"]) for v in view["votes"]] == [
        (group.members[A], "yes", 3)
    ]
    # Open: nobody executes it yet, and an outsider never.
    assert (await a.post(f"{url}/execute")).status_code == 409
    assert (await registry.client.post(f"{url}/execute")).status_code == 409
    assert (await outsider.post(f"{url}/execute")).status_code == 403
    assert (await vote(b, proposal["id"], "yes")).json()["status"] == "passed"
    assert (await outsider.post(f"{url}/execute")).status_code == 403
    assert (await other.clients[0].post(f"{url}/execute")).status_code == 403
    assert await verified(registry, domain) is False
    assert (await c.post(f"{url}/execute")).status_code == 200
    assert (await c.post(f"{url}/execute")).status_code == 409  # executed already
    assert (await registry.client.post(f"{url}/execute")).status_code == 409
    assert (await vote(c, proposal["id"], "no")).status_code == 409
    assert (await status_of(registry, proposal["id"]))["status"] == "executed"


async def test_rejected_proposals_do_not_execute(registry: Registry, council: Council) -> None:
    group = await council.group(W, "absolute_count", 4)
    a, _, c = group.clients
    domain = (await make_domain(registry))["did"]
    proposal = await propose(c, domain, group.did)
    assert (await vote(a, proposal["id"], "no")).json()["status"] == "rejected"
    for client in (a, c, registry.client):
        refused = await client.post(f"/v1/proposals/{proposal['id']}/execute")
        assert refused.status_code == 409, refused.text
    assert await verified(registry, domain) is False


async def test_the_admin_executes_a_passed_proposal(registry: Registry, council: Council) -> None:
    group = await council.group([1], "absolute_count", 1)
    domain = (await make_domain(registry))["did"]
    proposal = await propose(group.clients[0], domain, group.did)
    assert (await vote(group.clients[0], proposal["id"], "yes")).json()["status"] == "passed"
    executed = await registry.client.post(f"/v1/proposals/{proposal['id']}/execute")
    assert executed.status_code == 200, executed.text
    assert executed.json()["executedAt"] is not None
    assert await verified(registry, domain) is True


async def test_unknown_proposals_are_not_found(registry: Registry, council: Council) -> None:
    member = (await council.group([1], "absolute_count", 1)).clients[0]
    # Proposal ids are 32-bit: every id in range that does not exist is a 404, and ids
    # outside the range are refused as invalid (422) before reaching the database.
    for proposal in (999_999_999, 2**31 - 1):
        url = f"/v1/proposals/{proposal}"
        assert (await registry.client.get(url)).status_code == 404, proposal
        assert (await vote(member, proposal, "yes")).status_code == 404, proposal
        assert (await member.post(f"{url}/execute")).status_code == 404, proposal
    for proposal in (0, 2**31, 2**62):
        assert (await registry.client.get(f"/v1/proposals/{proposal}")).status_code == 422


async def test_a_domains_proposals_are_listed(registry: Registry, council: Council) -> None:
    group = await council.group([2, 1], "absolute_count", 2)
    domain = (await make_domain(registry))["did"]
    elsewhere = (await make_domain(registry))["did"]
    first = await propose(group.clients[1], domain, group.did)
    assert (await vote(group.clients[0], first["id"], "no")).json()["status"] == "rejected"
    second = await propose(group.clients[0], domain, group.did, action="revoke")
    await propose(group.clients[0], elsewhere, group.did)
    listed = await registry.client.get(f"/v1/domains/{domain}/verification-proposals")
    assert listed.status_code == 200, listed.text
    assert [(p["id"], p["action"], p["status"]) for p in listed.json()] == [
        (first["id"], "verify", "rejected"),
        (second["id"], "revoke", "open"),
    ]
    unknown = f"did:ixo:org/{unique('nowhere')}"
    missing = await registry.client.get(f"/v1/domains/{unknown}/verification-proposals")
    assert missing.status_code == 404, missing.text


# -- 4. revocation ---------------------------------------------------------------------------


async def test_a_revocation_clears_the_verified_flag(registry: Registry, council: Council) -> None:
    group = await council.group(W, "absolute_percentage", 0.5)
    a, b, c = group.clients
    domain = (await make_domain(registry))["did"]
    grant = await propose(c, domain, group.did)
    assert grant["action"] == "verify"
    assert (await vote(a, grant["id"], "yes")).json()["status"] == "passed"
    assert (await b.post(f"/v1/proposals/{grant['id']}/execute")).status_code == 200
    assert await verified(registry, domain) is True

    revoke = await propose(b, domain, group.did, action="revoke")
    assert revoke["action"] == "revoke"
    assert revoke["package"]["record"]["verified"] is True
    assert (await vote(b, revoke["id"], "yes")).json()["status"] == "open"
    assert (await vote(c, revoke["id"], "yes")).json()["status"] == "passed"
    assert await verified(registry, domain) is True  # passing alone changes nothing
    executed = await a.post(f"/v1/proposals/{revoke['id']}/execute")
    assert executed.status_code == 200, executed.text
    assert executed.json()["status"] == "executed"
    assert await verified(registry, domain) is False

    history = (await registry.client.get(f"/v1/domains/{domain}/history")).json()["items"]
    governed = [e for e in history if e["kind"] in ("domain.verify", "domain.revoke")]
    assert [e["kind"] for e in governed] == ["domain.verify", "domain.revoke"]
    assert [e["record"]["verified"] for e in governed] == [True, False]
    assert history[-1]["kind"] == "domain.revoke"
    assert governed[0]["version"] < governed[1]["version"]


# -- 5. the default group --------------------------------------------------------------------


async def test_the_latest_default_group_takes_ungrouped_proposals(
    registry: Registry, council: Council, backend: Backend
) -> None:
    domain = (await make_domain(registry))["did"]
    if backend.database == "sqlite":  # a fresh database: no default group yet
        nobody = await council.group([1], "absolute_count", 1)
        unassigned = await nobody.clients[0].post(
            f"/v1/domains/{domain}/verification-proposals", json={}
        )
        assert unassigned.status_code == 422, unassigned.text
    first = await council.group(W, "absolute_count", 3, default=True)
    proposal = await propose(first.clients[0], domain)
    assert proposal["group"] == first.did
    second = await council.group([1, 1], "absolute_count", 2, default=True)
    proposal = await propose(second.clients[1], domain)
    assert proposal["group"] == second.did
    assert proposal["tally"]["total"] == 2
    # A member of the former default group is no member of the new one.
    await propose(first.clients[0], domain, expect=403)
    assert (await registry.client.get(f"{GROUPS}/{first.did}")).json()["default"] is False
    assert (await registry.client.get(f"{GROUPS}/{second.did}")).json()["default"] is True
    # A group created later without `default` leaves the default alone.
    await council.group([1], "absolute_count", 1)
    assert (await propose(second.clients[0], domain))["group"] == second.did


async def test_concurrently_created_default_groups_leave_one_default(
    registry: Registry, council: Council
) -> None:
    members = [f"did:ixo:org/{unique('m')}" for _ in range(3)]
    bodies = [group_body(members, W, "absolute_count", 1, default=True) for _ in range(4)]
    responses = await asyncio.gather(*(registry.client.post(GROUPS, json=b) for b in bodies))
    assert [r.status_code for r in responses] == [201] * 4
    flags = [
        (await registry.client.get(f"{GROUPS}/{r.json()['did']}")).json()["default"]
        for r in responses
    ]
    assert flags.count(True) == 1, flags


# -- 6. verified changes only by execution ---------------------------------------------------


ENTITY = "query($id: String!) { entity(id: $id) { id entityVerified } }"


async def entity_verified(registry: Registry, domain: str) -> bool:
    response = await registry.client.post(
        "/graphql", json={"query": ENTITY, "variables": {"id": domain}}
    )
    assert response.status_code == 200, response.text
    assert "errors" not in response.json(), response.text
    return response.json()["data"]["entity"]["entityVerified"]


async def test_verified_changes_only_through_execution(
    registry: Registry, council: Council
) -> None:
    created = await registry.client.post(
        "/v1/domains",
        json={
            "type": "Organisation",
            "class": "did:ixo:protocol/organisation",
            "metadata": {"name": "Self-verified"},
            "verified": True,
        },
    )
    assert created.status_code == 422, created.text
    domain = (await make_domain(registry))["did"]
    for patch in ({"verified": True}, {"verified": True, "metadata": {"name": "X"}}):
        refused = await registry.client.patch(f"/v1/domains/{domain}", json=patch)
        assert refused.status_code == 422, refused.text
    assert await verified(registry, domain) is False
    assert await entity_verified(registry, domain) is False

    group = await council.group([2, 1], "absolute_count", 2)
    proposal = await propose(group.clients[1], domain, group.did)
    assert (await vote(group.clients[0], proposal["id"], "yes")).json()["status"] == "passed"
    assert await entity_verified(registry, domain) is False
    assert (await group.clients[1].post(f"/v1/proposals/{proposal['id']}/execute")).is_success
    assert await verified(registry, domain) is True
    assert await entity_verified(registry, domain) is True
    # An ordinary change afterwards keeps the flag.
    patched = await registry.client.patch(f"/v1/domains/{domain}", json={"metadata": {"n": 1}})
    assert patched.status_code == 200, patched.text
    assert patched.json()["verified"] is True


async def test_a_deactivated_domain_cannot_be_verified(
    registry: Registry, council: Council
) -> None:
    group = await council.group([1], "absolute_count", 1)
    member = group.clients[0]
    domain = (await make_domain(registry))["did"]
    proposal = await propose(member, domain, group.did)
    assert (await vote(member, proposal["id"], "yes")).json()["status"] == "passed"
    deleted = await registry.client.delete(f"/v1/domains/{domain}")
    assert deleted.status_code == 200, deleted.text
    await propose(member, domain, group.did, expect=409)
    # Passed before the deactivation: executing it now would change a deactivated record.
    executed = await member.post(f"/v1/proposals/{proposal['id']}/execute")
    assert executed.status_code == 409, executed.text
    assert await verified(registry, domain) is False


# -- 7. concurrency --------------------------------------------------------------------------


async def test_concurrent_votes_each_count_once(registry: Registry, council: Council) -> None:
    weights = [1, 2, 3, 4, 5]
    # Quorum 1: nothing is decided before the last of the five votes.
    group = await council.group(weights, "threshold_quorum", 0.5, 1.0)
    domain = (await make_domain(registry))["did"]
    proposal = await propose(group.clients[0], domain, group.did)
    options = ["abstain", "no", "yes", "yes", "yes"]
    responses = await asyncio.gather(
        *(vote(client, proposal["id"], o) for client, o in zip(group.clients, options, strict=True))
    )
    assert [r.status_code for r in responses] == [200] * 5, [r.text for r in responses]
    view = await status_of(registry, proposal["id"])
    assert view["tally"] == {"yes": 12, "no": 2, "abstain": 1, "remaining": 0, "total": 15}
    assert sorted(v["voter"] for v in view["votes"]) == sorted(group.members)
    assert view["status"] == "passed"
    # Exactly one response saw the last vote, and that one says passed.
    assert sorted(r.json()["status"] for r in responses) == ["open"] * 4 + ["passed"]

    # One member voting five times at once: one vote counts.
    second = await propose(group.clients[0], domain, group.did)
    repeated = await asyncio.gather(*(vote(group.clients[4], second["id"], "no") for _ in range(5)))
    assert sorted(r.status_code for r in repeated) == [200] + [409] * 4
    view = await status_of(registry, second["id"])
    assert view["tally"]["no"] == 5 and len(view["votes"]) == 1
    assert (await registry.platform.ledger.verify()).ok


async def test_concurrent_executions_apply_once(registry: Registry, council: Council) -> None:
    group = await council.group([1, 1, 1, 1, 1], "absolute_count", 3)
    domain = (await make_domain(registry))["did"]
    proposal = await propose(group.clients[0], domain, group.did)
    # Five concurrent yes votes: the third passes it; the later ones find it closed.
    votes = await asyncio.gather(*(vote(c, proposal["id"], "yes") for c in group.clients))
    codes = sorted(r.status_code for r in votes)
    assert codes == [200] * 3 + [409] * 2, [r.text for r in votes]
    assert (await status_of(registry, proposal["id"]))["tally"]["yes"] == 3

    executors = [*group.clients, registry.client]
    results = await asyncio.gather(
        *(c.post(f"/v1/proposals/{proposal['id']}/execute") for c in executors)
    )
    assert sorted(r.status_code for r in results) == [200] + [409] * 5, [r.text for r in results]
    assert (await history_kinds(registry, domain)).count("domain.verify") == 1
    assert await verified(registry, domain) is True
    assert (await registry.platform.ledger.verify()).ok


# -- 8. the ledger after all of it ------------------------------------------------------------


async def test_the_ledger_verifies_after_a_full_cycle(registry: Registry, council: Council) -> None:
    group = await council.group(W, "threshold_quorum", 0.5, 0.5)
    a, b, c = group.clients
    domain = (await make_domain(registry))["did"]
    for action in ("verify", "revoke", "verify"):
        proposal = await propose(a, domain, group.did, action=action)
        await vote(c, proposal["id"], "no")
        await vote(b, proposal["id"], "yes")
        assert (await vote(a, proposal["id"], "abstain")).json()["status"] == "passed"
        assert (await c.post(f"/v1/proposals/{proposal['id']}/execute")).status_code == 200
    rejected = await propose(b, domain, group.did, action="revoke")
    assert (await vote(a, rejected["id"], "no")).json()["status"] == "open"
    assert (await vote(b, rejected["id"], "no")).json()["status"] == "rejected"
    kinds = await history_kinds(registry, domain)
    assert [k for k in kinds if k.startswith("domain.") and k != "domain.create"] == [
        "domain.verify",
        "domain.revoke",
        "domain.verify",
    ]
    assert await verified(registry, domain) is True
    report = await registry.platform.ledger.verify()
    assert report.ok, report
