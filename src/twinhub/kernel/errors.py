"""Failures of the core services, named by what went wrong rather than by HTTP status.

Each interface maps them to its own convention: JSON errors for the registry API, gRPC
status codes for the chain node, a notice on a USSD screen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FieldProblem:
    field: str
    error: str


class ServiceError(Exception):
    code = "error"

    def __init__(self, message: str, details: list[FieldProblem] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or []

    def fields(self) -> dict[str, Any]:
        """The `error` object of the JSON error body: code, message, details."""
        details = [{"field": d.field, "error": d.error} for d in self.details]
        return {"code": self.code, "message": self.message, "details": details}


class NotFound(ServiceError):
    code = "not_found"


class Invalid(ServiceError):
    """The request is well formed but breaks a rule (a property of the wrong type, ...)."""

    code = "validation_failed"


class Conflict(ServiceError):
    code = "conflict"


class NotVerified(Conflict):
    """The verified-only rule: the domain must be verified by governance for this."""

    code = "domain_not_verified"


class InsufficientCredits(Conflict):
    code = "insufficient_credits"


class Forbidden(ServiceError):
    code = "forbidden"


class TooLarge(ServiceError):
    """More items in one request than the configured limit allows."""

    code = "too_large"


class StaleVersion(ServiceError):
    code = "precondition_failed"


@dataclass
class Problems:
    """Collects every field problem before failing, so a caller learns them all at once."""

    items: list[FieldProblem] = field(default_factory=list)

    def add(self, name: str, error: str) -> None:
        self.items.append(FieldProblem(name, error))

    def raise_if_any(self, message: str = "The request breaks the registry's rules.") -> None:
        if self.items:
            raise Invalid(message, self.items)
