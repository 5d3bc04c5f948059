"""Who is asking: the caller every core service checks its rights against."""

from __future__ import annotations

from dataclasses import dataclass

from twinhub.kernel.errors import Forbidden

ROLES = ("admin", "writer", "reader", "proponent", "verifier", "registry")
# The roles of the verification workflow (issue 29): each acts with its own key, so an
# admin does not hold them by being admin (an admin alone cannot issue credits).
WORKFLOW_ROLES = ("proponent", "verifier", "registry")


@dataclass(frozen=True)
class Principal:
    """A DID, and the roles its API key grants (and which key: for the write log)."""

    did: str
    roles: frozenset[str]
    key_id: str | None = None

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles


def require_workflow_role(principal: Principal, role: str) -> None:
    """Raise Forbidden unless the principal's key grants `role` itself (no admin bypass)."""
    if role not in principal.roles:
        raise Forbidden(f"This needs the {role} role (an admin key does not hold it).")


def require_role(principal: Principal, *allowed: str) -> None:
    """Raise Forbidden unless the principal holds one of `allowed` (admin holds all but
    the workflow roles)."""
    if (principal.is_admin and not set(allowed) & set(WORKFLOW_ROLES)) or principal.roles & set(
        allowed
    ):
        return
    raise Forbidden(f"This needs the {' or '.join(allowed)} role.")
