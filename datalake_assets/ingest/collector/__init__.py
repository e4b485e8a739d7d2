"""A Segment-compatible collector: Segment's HTTP tracking API writing the raw archive.

``protocol`` (the request: endpoints, decoding, write key), ``message_rules`` (a request's
messages -> stamped lines, pure; ``clock_skew``: their times), ``spool`` (write-ahead,
group-committed fsync), ``roller`` (spool segments -> hourly gzipped archive files),
``http_handler`` (the HTTP handling; ``readiness`` and ``metrics``: ``/ready`` and
``/metrics``), ``server`` (the service and its life cycle). Run it
with ``datalake collect``; see ``docs/guides/collect-events.md``.
"""

from datalake_assets.ingest.collector.server import Collector

__all__ = ["Collector"]
