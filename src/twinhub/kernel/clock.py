"""The clock: one place that says what "now" is, always timezone-aware UTC."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    """Now, in UTC; stored timestamps and every comparison with them use this."""
    return datetime.now(UTC)
