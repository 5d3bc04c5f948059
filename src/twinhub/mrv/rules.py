"""The MRV rules that are not a formula: which domains take part in credit issuance.

Written once here and called by every place that applies it: a claim's approval
(services.claims), the oracle's evaluation (oracle.service), and a monitoring period's
exclusions (mrv.periods, from the facts services.mrv_inputs reads).
"""

from __future__ import annotations

ACTIVE = "active"  # a domain's status while it is in use (services.domains writes it)


def takes_part(verified: bool | None, status: str | None) -> bool:
    """Rule: verified domains only. A domain (a stove, a project) earns credits, and a claim
    about it is approved, only while governance has verified it and it is active."""
    return bool(verified) and status == ACTIVE
