"""Prometheus metrics of the USSD gateway, in a registry of its own per app instance.

Every session step counts its outcome and observes its latency. Through prometheus_client
that is a dozen Python calls and three lock round trips per request, as much as the
session store's whole load and save; so the step only adds to plain numbers here
(`reply`, `session_started`), and they are moved into the Prometheus metrics whenever the
registry is collected (a scrape, `get_sample_value`): the figures read are the same.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector


class UssdMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        # Registered first, so a collection moves the pending counts before the metrics
        # below are read.
        self.registry.register(_Flush(self))
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
        self._bounds: list[float] = list(self.latency._upper_bounds)  # ends with +Inf
        self._outcomes: dict[str, int] = {}  # outcome: replies not yet counted
        self._buckets = [0] * len(self._bounds)  # observations not yet counted, per bucket
        self._seconds = 0.0
        self._started = 0

    def reply(self, outcome: str, seconds: float) -> None:
        """One reply of the session step: `replies.labels(outcome).inc()` and
        `latency.observe(seconds)`, counted when the registry is next collected."""
        outcomes = self._outcomes
        pending = outcomes.get(outcome)
        if pending is None:
            self.replies.labels(outcome)  # the series exists (and is timed) from now on
            pending = 0
        outcomes[outcome] = pending + 1
        self._buckets[bisect_left(self._bounds, seconds)] += 1  # the first bound >= it
        self._seconds += seconds

    def session_started(self) -> None:
        """`sessions_started.inc()`, counted when the registry is next collected."""
        self._started += 1

    def flush(self) -> None:
        """Move the pending counts into the Prometheus metrics. Runs on the event loop's
        thread, as the step does (the /metrics endpoint and tests collect there), so no
        count is lost between reading and clearing."""
        outcomes, self._outcomes = self._outcomes, {}
        for outcome, count in outcomes.items():
            self.replies.labels(outcome).inc(count)
        if self._started:
            started, self._started = self._started, 0
            self.sessions_started.inc(started)
        if self._seconds or any(self._buckets):
            # Histogram.observe adds to the first bucket whose bound is >= the value, and
            # to the sum; the same additions, in bulk (its private values: pinned version).
            latency = self.latency
            for index, count in enumerate(self._buckets):
                if count:
                    latency._buckets[index].inc(count)
            latency._sum.inc(self._seconds)
            self._buckets = [0] * len(self._bounds)
            self._seconds = 0.0


class _Flush(Collector):
    """A collector of nothing that flushes the pending counts when it is collected."""

    def __init__(self, metrics: UssdMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterable[Metric]:
        self._metrics.flush()
        return ()
