"""Prometheus metrics of the USSD gateway, in a registry of its own per app instance."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram


class UssdMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.replies = Counter(
            "twinhub_ussd_replies",
            "USSD replies by outcome: con, end, invalid, unavailable, rate_limited, retry.",
            ["outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "twinhub_ussd_request_seconds",
            "Time to answer POST /api/ussd.",
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0),
            registry=self.registry,
        )
        self.sessions_started = Counter(
            "twinhub_ussd_sessions_started", "USSD sessions begun.", registry=self.registry
        )
