"""The collector's Prometheus metrics (``GET /metrics``, Prometheus' text format).

Each ``Collector`` has a ``CollectorRegistry`` of its own, never the process-wide default one:
two collectors in one process (the tests, a worker forked from a parent that imported this
module) would otherwise share, or refuse to register twice, the same series.

Counted as requests are answered (``http_handler.py``): the requests by endpoint and status,
the messages accepted, rejected (by reason) and suppressed by endpoint, the requests refused
whole by reason. Read at each scrape (``_SpoolAndRollerState``): the bytes in the spool, the
age of its oldest segment, rolls done and failed, requests in progress. Every name is listed,
with its meaning, in ``docs/guides/collect-events.md``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector as PrometheusCollector

from datalake_assets.ingest.collector import protocol
from datalake_assets.ingest.collector.roller import Roller
from datalake_assets.ingest.collector.spool_files import (
    parse_segment_path,
    segment_created_at,
    source_dirs,
)

PREFIX = "datalake_collector"
CONTENT_TYPE = CONTENT_TYPE_LATEST
OTHER_ENDPOINT = "other"  # a path that is no endpoint: one label, whatever the path


def endpoint_label(path: str) -> str:
    """The endpoint a request path names, in Segment's words (``track``, ``batch``,
    ``import``...): the short paths (``/v1/t``, ``/v1/b``) count as their long ones, and any
    other path as ``other``, so a scanner cannot grow the number of series."""
    if path not in protocol.ENDPOINTS:
        return OTHER_ENDPOINT
    message_type = protocol.ENDPOINTS[path]
    if message_type is not None:
        return message_type
    return "import" if path.rstrip("/") == "/v1/import" else "batch"


def spool_state(spool_dir: str, now: float) -> tuple[int, int, float]:
    """``(bytes, segments, age of the oldest in seconds)`` of the segments in a spool, open or
    waiting for the roller (0 seconds when there is none). The age counts from the segment's
    creation, which its name carries: it grows while the archive is unreachable."""
    size, count, oldest = 0, 0, None
    for folder in source_dirs(spool_dir):
        try:
            names = os.listdir(folder)
        except FileNotFoundError:  # a folder emptied and removed meanwhile
            continue
        for name in names:
            seg = parse_segment_path(os.path.join(folder, name))
            if seg is None:
                continue
            try:
                size += os.stat(seg.path).st_size
            except FileNotFoundError:  # rolled meanwhile
                continue
            count += 1
            created = segment_created_at(seg.segment_id)
            if created is not None and (oldest is None or created < oldest):
                oldest = created
    return size, count, 0.0 if oldest is None else max(0.0, now - oldest)


class _SpoolAndRollerState(PrometheusCollector):
    """What is read at each scrape rather than counted: the spool on disk, the roller's
    counters, the requests in progress."""

    def __init__(self, spool_dir: str, roller: Roller, in_progress: Callable[[], int]) -> None:
        self.spool_dir = spool_dir
        self.roller = roller
        self.in_progress = in_progress

    def collect(self) -> Iterator[Metric]:
        size, count, age = spool_state(self.spool_dir, time.time())
        yield GaugeMetricFamily(
            f"{PREFIX}_spool_bytes", "Bytes in the spool's segments not yet archived.", size
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_spool_segments", "Spool segments not yet archived (open or waiting).", count
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_spool_oldest_segment_age_seconds",
            "Age of the oldest spool segment not yet archived (0: the spool is empty).",
            age,
        )
        yield CounterMetricFamily(
            f"{PREFIX}_segments_rolled",
            "Spool segments rolled into the archive.",
            self.roller.rolled,
        )
        yield CounterMetricFamily(
            f"{PREFIX}_archive_upload_failures",
            "Failed attempts to write a segment to the archive (each is retried).",
            self.roller.failures,
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_requests_in_progress", "POST requests being handled.", self.in_progress()
        )


class CollectorMetrics:
    """One collector's metrics and the registry that exposes them."""

    def __init__(self, spool_dir: str, roller: Roller, in_progress: Callable[[], int]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            f"{PREFIX}_requests",
            "POST requests answered, by endpoint and HTTP status.",
            ("endpoint", "status"),
            registry=r,
        )
        self.requests_rejected = Counter(
            f"{PREFIX}_requests_rejected",
            "Requests refused whole (no message of theirs archived), by reason.",
            ("reason",),
            registry=r,
        )
        self.events_accepted = Counter(
            f"{PREFIX}_events_accepted",
            "Messages written to the spool (acknowledged), by endpoint.",
            ("endpoint",),
            registry=r,
        )
        self.events_rejected = Counter(
            f"{PREFIX}_events_rejected",
            "Messages of an accepted request rejected alone, by endpoint and reason.",
            ("endpoint", "reason"),
            registry=r,
        )
        self.events_suppressed = Counter(
            f"{PREFIX}_events_suppressed",
            "Messages answered as accepted, then dropped (suppressed identities), by endpoint.",
            ("endpoint",),
            registry=r,
        )
        r.register(_SpoolAndRollerState(spool_dir, roller, in_progress))

    def answered(self, endpoint: str, status: int) -> None:
        self.requests.labels(endpoint, str(status)).inc()

    def request_rejected(self, reason: str) -> None:
        self.requests_rejected.labels(reason).inc()

    def messages(
        self, endpoint: str, accepted: int, rejected: list[dict[str, object]], suppressed: int
    ) -> None:
        if accepted:
            self.events_accepted.labels(endpoint).inc(accepted)
        for r in rejected:
            self.events_rejected.labels(endpoint, str(r["code"])).inc()
        if suppressed:
            self.events_suppressed.labels(endpoint).inc(suppressed)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
