"""What a failed statement means for its caller: one classification, used by every
interface (issue 31 §1).

A value the database refuses (a NUL in text, a number past its column's range, a date it
cannot hold) is the request's fault, not an outage: when every database error counted as
"unreachable", two such requests a second kept the whole registry answering 503. Only a
failure to reach the database (or to hear from it in time) marks it down.

- UNREACHABLE: connection refused or lost, a timeout, the pool exhausted, the server out of
  resources or shutting down. The registry answers 503 and marks the database down; GraphQL
  an `unavailable` error; the node UNAVAILABLE; MQTT ingestion retries.
- BUSY: a transaction lost a race (serialization failure, deadlock, a lock not granted):
  503 (UNAVAILABLE, retried) for that request only.
- DATA: a value of the request the database refuses: 422 `validation_failed` (GraphQL's
  error of that code, the node's INVALID_ARGUMENT, an MQTT message dropped with its reason).
- CONFLICT: a constraint refused the row: 409 `conflict` (FAILED_PRECONDITION).
- FAULT: the registry's own bug (a statement that does not parse): 500 (INTERNAL), logged
  with its traceback.

What each database's driver says is read by its dialect (`Dialect.failure_of`: PostgreSQL's
SQLSTATE, SQLite's result codes); SQLAlchemy's own classes decide the rest.
"""

from __future__ import annotations

from enum import StrEnum

from sqlalchemy import exc

from twinhub.db.dialects import causes, every_dialect

__all__ = ["DATABASE_ERRORS", "RETRYABLE", "Failure", "causes", "classify"]


class Failure(StrEnum):
    UNREACHABLE = "unreachable"
    BUSY = "busy"
    DATA = "data"
    CONFLICT = "conflict"
    FAULT = "fault"


RETRYABLE = frozenset({Failure.UNREACHABLE, Failure.BUSY})
# The exceptions a database failure comes as, for interfaces that catch them by class: any
# error of SQLAlchemy, of the drivers (raised on their own connections), timeouts and
# sockets. `classify` says which of them is which.
DATABASE_ERRORS: tuple[type[BaseException], ...] = (
    exc.SQLAlchemyError,
    OSError,
    TimeoutError,
    *(kind for dialect in every_dialect() for kind in dialect.driver_errors()),
)


def classify(error: BaseException) -> Failure | None:
    """What `error` means for the request that met it; None when it is no database failure
    at all (a bug elsewhere, left to the interface's own handling)."""
    if isinstance(error, exc.DBAPIError) and error.connection_invalidated:
        return Failure.UNREACHABLE
    for dialect in every_dialect():
        found = dialect.failure_of(error)
        if found is not None:
            return Failure(found)
    if isinstance(error, exc.DataError):
        return Failure.DATA
    if isinstance(error, exc.IntegrityError):
        return Failure.CONFLICT
    if isinstance(
        error, exc.OperationalError | exc.InterfaceError | exc.TimeoutError | exc.DisconnectionError
    ):
        return Failure.UNREACHABLE
    if isinstance(error, exc.SQLAlchemyError):
        return Failure.FAULT
    if isinstance(error, OSError | TimeoutError):
        return Failure.UNREACHABLE
    if isinstance(error, DATABASE_ERRORS):
        return Failure.FAULT
    return None
