"""The server's Prometheus metrics, in a registry of its own (two servers in one process count apart)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


class Metrics:
    def __init__(self):
        self.registry = CollectorRegistry()
        self.requests = Counter("hmde_requests", "HTTP requests answered", ["route", "status"], registry=self.registry)
        self.latency = Histogram("hmde_request_seconds", "Time to answer a request", ["route"],
                                 buckets=LATENCY_BUCKETS, registry=self.registry)
        self.batch_texts = Histogram("hmde_batch_texts", "Texts per model call (requests gathered together)",
                                     buckets=BATCH_BUCKETS, registry=self.registry)
        self.batch_seconds = Histogram("hmde_batch_seconds", "Time of one model call", buckets=LATENCY_BUCKETS,
                                       registry=self.registry)
        self.queued = Gauge("hmde_queued_texts", "Texts waiting for the model or being embedded",
                            registry=self.registry)
        self.rejected = Counter("hmde_rejected", "Requests refused with 503 because the queue was full",
                                registry=self.registry)

    def observe_batch(self, texts: int, seconds: float) -> None:
        self.batch_texts.observe(texts)
        self.batch_seconds.observe(seconds)

    def text(self) -> bytes:
        return generate_latest(self.registry)
