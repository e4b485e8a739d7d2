"""Deterministic, realistic and deliberately messy Segment traffic, written as a raw archive.

Layout (the input the lake's syncs read; see ``spec/layout.py``), one folder per source and
*received* hour (UTC)::

    <archive_root>/<source_id>/day=YYYY-MM-DD/hr=HH/part-0000.jsonl.gz
                                                    part-0001.jsonl.gz   (files_per_hour files)

Each file holds one JSON message per line, ``\\n``-terminated, gzip level 1 (or plain
``part-NNNN.jsonl`` with ``compress=False``). A file is written under a temporary dot-name
(``.part-0000.jsonl.gz.tmp``) in the same folder and renamed when complete, so readers, which
ignore dot-files, never see half a file. ``archive_root`` is a local path or any URI pyarrow
understands (``s3://bucket/prefix``, ``abfss://``, ``az://``; on S3 and blob-only Azure the
rename is a copy and a delete).

What one hour holds (``events_per_hour`` lines, exactly):

* Traffic of a web shop with a mobile app and a back end: a pool of recurring users (one per
  100 lines of an hour, 300 to 20,000; the same ``anonymousId``/``userId`` in every hour of one
  source, seed and ``events_per_hour``), each with one channel
  (``browser`` ~55 %, ``mobile`` ~35 %, ``server`` ~10 %) and its own ``context`` (``ip``,
  ``library``, ``userAgent``, ``locale``, ``timezone``; browsers add ``page`` and, half the time,
  ``campaign``; mobile adds ``device``, ``os``, ``app``, ``screen``, ``network``).
* All six types, about track 70 %, page 12 %, identify 7 %, screen 5 %, group 3 %, alias 3 %;
  pages come from browsers, screens from mobile. Twelve track events (``EVENTS``), each with
  its own properties: nested objects, arrays of objects and of strings, camelCase keys, keys
  with spaces, dots and ``%``, integers, floats, booleans, ``null``s, non-ASCII text, dates in
  several formats, and numbers sent as strings for about 10 % of the values of numeric
  properties (``"revenue": "29.99"``). For speed, a quarter of the track events get freshly
  drawn properties and the others reuse those of a recent event of the hour (with a new
  ``orderId`` where there is one), so identical property sets recur, as in real traffic.
* Common fields on every valid message: ``type``, ``messageId`` (uuid-like, random from the
  seeded generator: unique across hours, sources and seeds), ``anonymousId`` (always), ``userId`` (~60 %; anonymous browser messages
  sometimes carry ``"userId": null``), ``receivedAt`` (``YYYY-MM-DDTHH:MM:SS.mmmZ``, inside the
  hour of the folder), ``sentAt``, ``originalTimestamp``, ``timestamp`` (consistent:
  ``timestamp = receivedAt - (sentAt - originalTimestamp)``, device clocks are sometimes
  skewed), ``context``, ``integrations``, ``channel``, ``version`` (mostly 2, sometimes 1).
* Timestamps other than ``receivedAt`` in five formats (``TIMESTAMP_FORMATS``):
  ``...00.123Z``, ``...+02:00`` local time with offset, ``...00Z``, ``...00.123456Z`` and
  ``2026-11-21 10:00:00`` (no zone, meaning UTC).
* ``late_rate`` of the messages happened 1-5 days before they were received.
* ``duplicate_rate`` of the valid messages are delivered again later in the same hour
  (possibly in another file of the hour; rarely a third time): the identical body except a
  later ``receivedAt``.
* ``malformed_rate`` of the lines are defective, each exactly one of ``MALFORMED_KINDS``
  (truncated JSON, an array, no ``type``, ``type`` "bogus", no ``messageId``, a track without
  ``event``, neither ``userId`` nor ``anonymousId``); no valid line has any of these defects.

The summary (``GenerateSummary``) counts exactly what was written:
``lines == valid_messages + duplicate_lines + malformed_lines``.

Same arguments, same bytes: every hour draws from a ``random.Random`` seeded with
``(seed, source_id, hour)`` and the user pool from ``(seed, source_id)``; nothing reads the
clock or the OS's randomness, and an hour's bytes do not depend on the other hours of the
call. Files hold consecutive slices of the hour's received time, ``part-0000`` first.

Speed: an hour is streamed (1 MiB chunks; only pending re-deliveries are kept), messages are
built from per-user templates whose shared parts are pre-serialized (``orjson.Fragment``),
and one writer thread compresses and writes while the next lines are generated (zlib
releases the GIL), so a second core takes the gzip work. On a shared 2-vCPU AMD EPYC VM a
line (~1.1 KB) costs about 20-30 µs of CPU to generate and 12-18 µs to gzip: 2,000,000 lines
in 20 files took 53-75 s (27,000-38,000 lines/s, depending on the host's load), 21,000-27,000
lines per CPU-second.

The package, by what each part generates: ``traffic_mix`` (the shares of types and events,
the malformed kinds, the summary), ``timestamps`` (the five timestamp formats), ``message_ids``
(ids shaped like each library's), ``json_parts`` (shared parts serialized once),
``catalogue`` (the shop: products, line items, pages, campaigns, companies), ``users`` (the
recurring users, their devices and context templates), ``track_events`` (the properties of
each track event), ``hour_messages`` (the messages of one hour: valid and malformed),
``hour_writer`` (an hour's files and re-deliveries) and ``generate`` (``generate_archive``).
"""

from __future__ import annotations

from datalake_assets.ingest.demo.generate import generate_archive
from datalake_assets.ingest.demo.timestamps import TIMESTAMP_FORMATS
from datalake_assets.ingest.demo.traffic_mix import (
    EVENTS,
    MALFORMED_KINDS,
    MALFORMED_REASONS,
    TYPE_WEIGHTS,
    GenerateSummary,
)

__all__ = [
    "EVENTS",
    "MALFORMED_KINDS",
    "MALFORMED_REASONS",
    "TIMESTAMP_FORMATS",
    "TYPE_WEIGHTS",
    "GenerateSummary",
    "generate_archive",
]
