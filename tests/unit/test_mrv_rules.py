"""The MRV rules written once: verified domains only, and the rollup field names the
telemetry store writes and the methodology and dashboard read."""

from __future__ import annotations

import pytest

from twinhub.mrv.rollups import ENERGY, SESSIONS, counted_field
from twinhub.mrv.rules import takes_part
from twinhub.telemetry.figures import ENERGY_FIELD, SESSION_FIELD


@pytest.mark.parametrize(
    ("verified", "status", "earns"),
    [
        (True, "active", True),
        (False, "active", False),
        (None, "active", False),
        (True, "deactivated", False),
        (True, None, False),
    ],
)
def test_only_verified_active_domains_take_part(
    verified: bool | None, status: str | None, earns: bool
) -> None:
    assert takes_part(verified, status) is earns


def test_rollup_field_names_are_the_stores() -> None:
    assert counted_field("session", "start") == SESSIONS
    assert (ENERGY_FIELD, SESSION_FIELD) == (ENERGY, SESSIONS)
