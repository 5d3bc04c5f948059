"""A monitoring period computed under methodology 1.0.0 (the sessions' sum credited), on a
protocol that still carries it as a deployment before revision 0020 did, recomputes with
`verify-report` after the protocol moved on to 2.0.0: the report names its methodology's
digest, and the document twinhub shipped under that digest recomputes it as it was issued.
"""

from __future__ import annotations

from importlib import resources

import orjson
from sqlalchemy import func, select, update

from tests.conftest import Registry, unique
from tests.support.claims_world import CLAIM_PROTOCOL, build_world
from twinhub.db.models import Protocol
from twinhub.mrv.builtin import CLEAN_COOKING, builtin_document, past_document
from twinhub.mrv.methodology import digest_of

ONE = orjson.loads(
    resources.files("twinhub.mrv")
    .joinpath("methodologies", "clean-cooking-mecd-1.0.0.json")
    .read_bytes()
)


async def _legacy_protocol(registry: Registry) -> str:
    """A copy of the built-in claim protocol carrying methodology 1.0.0, written as an old
    deployment stored it (registration today refuses 1.0.0: one of its parameters is used
    by no formula)."""
    did = f"did:ixo:protocol/{unique('mecd-one')}"
    async with registry.platform.sessionmaker() as session, session.begin():
        claim = await session.get(Protocol, CLAIM_PROTOCOL)
        assert claim is not None
        top = await session.scalar(select(func.max(Protocol.seq)))
        session.add(
            Protocol(
                did=did,
                name="Clean cooking claim (methodology 1.0.0)",
                entity_type=claim.entity_type,
                twin_class=claim.twin_class,
                parent_did=claim.parent_did,
                properties=claim.properties,
                required=claim.required,
                relationships=claim.relationships,
                services=claim.services,
                token_class=claim.token_class,
                telemetry=claim.telemetry,
                methodology=ONE,
                constraints=claim.constraints,
                seq=(top or 0) + 1,
            )
        )
    return did


async def test_a_1_0_0_report_recomputes_after_the_protocol_moved_on(
    registry: Registry,
) -> None:
    world = await build_world(registry)
    try:
        stoves = [await world.metered_asset(kwh_per_day=k) for k in (1.0, 2.0)]
        legacy = await _legacy_protocol(registry)
        await world.collection(protocol=legacy)
        path = f"/v1/domains/{world.project}/monitoring-periods"
        made = await world.operator_client.post(
            path, json={"from": "2026-10-01", "to": "2026-10-10"}
        )
        assert made.status_code == 201, made.text
        period = made.json()
        report = (await registry.client.get(f"{path}/{period['id']}/report")).json()
        # Computed as 1.0.0 computed: its digest, the sessions' sum, 1.0.0's report shape.
        assert report["methodology"]["version"] == "1.0.0"
        assert report["methodology"]["digest"] == digest_of(ONE)
        assert "document" not in report and "fleet" not in report
        assert {row["stove"] for row in report["stoves"]} == set(stoves)
        for row in report["stoves"]:
            assert set(row["inputs"]) == {
                "energy_kwh",
                "fuel_kg",
                "stove_efficiency",
                "household_size",
                "days",
            }
            assert row["inputs"]["energy_kwh"] == row["usage"]["quantity"]
        assert period["credits"]["amount"] > 0
        assert await registry.platform.monitoring.verify(report) == []

        # The protocol moves on to 2.0.0 (as revision 0020 moved the built-in one): the
        # report still recomputes, under the 1.0.0 document twinhub shipped.
        async with registry.platform.sessionmaker() as session, session.begin():
            await session.execute(
                update(Protocol)
                .where(Protocol.did == legacy)
                .values(methodology=builtin_document(CLEAN_COOKING))
            )
        registry.platform.protocols._views.pop(legacy, None)
        assert past_document(report["methodology"]["digest"]) == ONE
        assert await registry.platform.monitoring.verify(report) == []
        edited = {**report, "credits": {**report["credits"], "amount": 1}}
        assert any("credits" in d for d in await registry.platform.monitoring.verify(edited))
    finally:
        await world.close()
