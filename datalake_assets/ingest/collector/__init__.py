"""A Segment-compatible collector: Segment's HTTP tracking API writing the raw archive.

``protocol`` (requests -> stamped lines, pure), ``spool`` (write-ahead, group-committed fsync),
``roller`` (spool segments -> hourly gzipped archive files), ``server`` (the HTTP service and
its life cycle). Run it with ``datalake collect``; see ``docs/guides/collect-events.md``.
"""

from datalake_assets.ingest.collector.server import Collector

__all__ = ["Collector"]
