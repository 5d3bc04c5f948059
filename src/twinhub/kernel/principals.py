"""Who is asking: the caller every core service checks its rights against."""

from __future__ import annotations

from dataclasses import dataclass

from twinhub.kernel.errors import Forbidden

ROLES = ("admin", "writer", "reader")


@dataclass(frozen=True)
class Principal:
    """A DID, and the roles its API key grants (and which key: for the write log)."""

    did: str
    roles: frozenset[str]
    key_id: str | None = None

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles


def require_role(principal: Principal, *allowed: str) -> None:
    """Raise Forbidden unless the principal holds one of `allowed` (admin holds all)."""
    if principal.is_admin or principal.roles & set(allowed):
        return
    raise Forbidden(f"This needs the {' or '.join(allowed)} role.")
