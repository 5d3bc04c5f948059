"""A period's registry facts come through the driver (the dialect's stove_facts) as the ORM
read them: properties decoded, verified, status, and enrolment counting only a token that is
not revoked; a stove that is not a domain comes back unverified and unenrolled. Real
database, SQLite and PostgreSQL (a database of this module's own)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import date

import pytest

from tests.conftest import fresh_postgres_database
from twinhub.db.models import DeviceToken, Domain
from twinhub.kernel.clock import utcnow
from twinhub.platform import Platform
from twinhub.services.mrv_inputs import stove_periods
from twinhub.settings import Settings


@pytest.fixture(scope="module")
async def postgres_url() -> AsyncIterator[str]:
    """A PostgreSQL database of this module's own: its domains are written past the ledger,
    which the other modules' reconciliations of the shared database would report."""
    async with fresh_postgres_database("facts") as url:
        yield url


def _stove(name: str, properties: dict, verified: bool, seq: int) -> Domain:
    now = utcnow()
    return Domain(
        did=f"did:ixo:entity/facts-{name}",
        seq=10_000_000 + seq,
        type="Device",
        class_did="did:ixo:protocol/clean-cooking",
        twin_class="physical",
        controller=["did:ixo:org/facts"],
        services=[],
        credentials=[],
        meta={},
        properties=properties,
        status="active" if verified else "suspended",
        verified=verified,
        version=1,
        created_at=now,
        updated_at=now,
    )


def _token(name: str, did: str, revoked: bool) -> DeviceToken:
    return DeviceToken(
        token_id=name,
        domain_did=did,
        secret_sha256="0" * 64,
        created_by="did:ixo:org/facts",
        revoked_at=utcnow() if revoked else None,
    )


async def test_facts_and_enrolment_as_stored(settings_for: Callable[..., Settings]) -> None:
    platform = Platform(settings_for(background_workers_enabled=False))
    await platform.start()
    try:
        properties = {"householdSize": 4, "efficiency": 0.5, "meter": {"serial": "M-1"}}
        active = _stove("active", properties, True, 1)
        revoked = _stove("revoked", {"householdSize": 3}, True, 2)
        both = _stove("both", {}, False, 3)
        bare = _stove("bare", {"householdSize": 2}, True, 4)
        async with platform.sessionmaker() as session, session.begin():
            session.add_all([active, revoked, both, bare])
            await session.flush()
            session.add_all(
                [
                    _token("fa1", active.did, False),
                    _token("fr1", revoked.did, True),
                    _token("fb1", both.did, True),
                    _token("fb2", both.did, False),
                ]
            )
        stranger = "did:ixo:entity/facts-stranger"
        dids = [active.did, revoked.did, both.did, bare.did, stranger]
        async with platform.sessionmaker() as session:
            found = await stove_periods(session, dids, date(2026, 9, 1), date(2026, 9, 30))
        by = {p.stove: p for p in found}
        assert [p.stove for p in found] == dids
        assert (by[active.did].enrolled, by[revoked.did].enrolled) == (True, False)
        assert (by[both.did].enrolled, by[bare.did].enrolled) == (True, False)
        assert by[active.did].household_size == 4 and by[active.did].stove_efficiency == 0.5
        assert by[active.did].meter == {"serial": "M-1"}
        assert (by[both.did].verified, by[both.did].status) == (False, "suspended")
        assert (by[active.did].verified, by[active.did].status) == (True, "active")
        assert (by[stranger].verified, by[stranger].enrolled, by[stranger].status) == (
            False,
            False,
            None,
        )
    finally:
        await platform.stop()
