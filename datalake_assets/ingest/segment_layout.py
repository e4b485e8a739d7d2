"""Names in Segment's S3-destination archive and in the import's output: Segment's day folders
(``<day epoch ms>``) and their days, the hour index (hours since 1970) a line is routed to, and
the deterministic names of an input file's id, outputs and manifest (``segment_import.py``)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from datalake_assets.spec import layout
from datalake_assets.spec.layout import ArchiveHour

SEGMENT_LOGS = "segment-logs"
MANIFEST_DIR = "_imports"
OUTPUT_PREFIX = "segment-"
OUTPUT_SUFFIX = ".jsonl.gz"
DAY_MS = 86_400_000
HOUR_US = 3_600_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_day_folder(name: str) -> int | None:
    """Epoch ms of a Segment day folder name, or ``None`` unless it is the midnight (UTC) of
    a day from 1970 to 9999 written as plain digits."""
    if not name.isdigit() or not name.isascii() or len(name) > 15:
        return None
    ms = int(name)
    if ms % DAY_MS or str(ms) != name or ms >= 253_402_300_800_000:
        return None
    return ms


def day_ms_of(day: str) -> int:
    """``YYYY-MM-DD`` -> epoch ms of its midnight UTC."""
    d = datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC)
    return int((d - _EPOCH).total_seconds()) * 1000


def day_of(ms: int) -> str:
    return (_EPOCH + timedelta(milliseconds=ms)).strftime("%Y-%m-%d")


def hour_of_index(index: int) -> ArchiveHour:
    return ArchiveHour(_EPOCH + timedelta(hours=index))


def segment_source_dir(segment_archive: str, segment_source_id: str) -> str:
    return layout.join(segment_archive, SEGMENT_LOGS, segment_source_id)


def file_id(segment_source_id: str, day_ms: int, name: str) -> str:
    """Stable id of an input file: the same file always gets the same outputs' names."""
    return hashlib.sha256(f"{segment_source_id}/{day_ms}/{name}".encode()).hexdigest()[:16]


def output_name(fid: str) -> str:
    return f"{OUTPUT_PREFIX}{fid}{OUTPUT_SUFFIX}"


def manifest_location(archive_root: str, source_id: str, fid: str) -> str:
    return layout.join(archive_root, source_id, MANIFEST_DIR, f"{fid}.json")


def is_input_file(name: str) -> bool:
    return name.endswith(".gz") and not name.startswith((".", "_"))
