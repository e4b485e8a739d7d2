"""Small helpers to write hand-made archive hours for tests."""

from __future__ import annotations

import gzip
import os

import orjson

from datalake_assets.spec.layout import ArchiveHour, archive_hour_dir


def msg(mid: str, hour: str = "2026-11-21T10", minute: int = 0, **kw) -> dict:
    h = ArchiveHour.parse(hour)
    base = {
        "type": "track",
        "event": "Order Completed",
        "messageId": mid,
        "anonymousId": "anon-1",
        "receivedAt": f"{h.day}T{h.hr}:{minute:02d}:00.000Z",
        "timestamp": f"{h.day}T{h.hr}:{minute:02d}:00.000Z",
        "context": {"library": {"name": "analytics-python", "version": "2.3"}},
    }
    base.update(kw)
    return base


def write_hour(
    archive_root: str, source_id: str, hour: str, lines: list, name: str = "part-0000.jsonl.gz"
) -> str:
    directory = archive_hour_dir(archive_root, source_id, ArchiveHour.parse(hour))
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    body = b"".join(
        (line if isinstance(line, bytes) else orjson.dumps(line)) + b"\n" for line in lines
    )
    with open(path, "wb") as f:
        f.write(gzip.compress(body) if name.endswith(".gz") else body)
    return path
