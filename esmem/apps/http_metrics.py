"""Prometheus metrics of `esmem serve` (prometheus_client, in a registry of each app's own).

Labels are bounded by construction: the route TEMPLATE (`/v1/namespaces/{namespace}/recall`, never the
path a caller sent; `unmatched` when no route answered), the HTTP method and status, and a write's merge
outcome. A namespace is never a label: namespaces are as many as an agent platform's users, each would
be its own time series, and a namespace can name a person. Nothing else a caller sends (query, memory
text, API key or its name) reaches a metric.
"""
from __future__ import annotations

from typing import Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from esmem.domain.types import RecallResult, WriteResult

CONTENT_TYPE = CONTENT_TYPE_LATEST
# seconds: a recall is a few ms on a quiet engine; a batch write or an erase can take seconds
BUCKETS = (0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class HttpMetrics:
    """The counters and histograms of one app, and their text exposition."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("esmem_http_requests", "HTTP requests answered, by route template and status.",
                                ("method", "route", "status"), registry=self.registry)
        self.latency = Histogram("esmem_http_request_duration_seconds",
                                 "Time to answer an HTTP request, by route template and status.",
                                 ("method", "route", "status"), buckets=BUCKETS, registry=self.registry)
        self.recalls = Counter("esmem_recalls", "Recalls run (the recall and context routes).", registry=self.registry)
        self.recalled = Counter("esmem_recalled_memories", "Memories the recalls returned.", registry=self.registry)
        self.recall_engine = Histogram("esmem_recall_engine_seconds", "The engine's own time (took) per recall.",
                                       buckets=BUCKETS, registry=self.registry)
        self.remembered = Counter("esmem_remembered_memories",
                                  "Memories written, by the merge decision's outcome (added, superseded, duplicate, "
                                  "outdated, uncertain).", ("action",), registry=self.registry)

    def request(self, method: str, route: str | None, status: int, seconds: float) -> None:
        labels = (method, route or "unmatched", str(status))
        self.requests.labels(*labels).inc()
        self.latency.labels(*labels).observe(seconds)

    def recall(self, result: RecallResult) -> None:
        self.recalls.inc()
        self.recalled.inc(len(result.items))
        self.recall_engine.observe(result.engine_took_ms / 1000)

    def remember(self, results: Iterable[WriteResult]) -> None:
        for r in results:
            if not r.dry_run:
                self.remembered.labels(r.action).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
