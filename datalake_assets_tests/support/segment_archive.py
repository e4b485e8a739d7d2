"""A Segment S3-destination archive for tests (``segment-logs/<source>/<day epoch ms>/``):
its messages, files and days, and the settings of a source that imports it."""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import orjson

from datalake_assets.ingest import segment_layout as sl
from datalake_assets.lake import storage
from datalake_assets.spec import layout
from datalake_assets_tests.support.archive_builders import msg
from datalake_assets_tests.support.settings_files import load_lake_toml

SOURCE = "web-prod"  # our source id
SEGMENT_ID = "gLrbTPPs3s"  # Segment's source id in segment-logs/
D1, D2 = "2026-11-20", "2026-11-21"
MS1, MS2 = sl.day_ms_of(D1), sl.day_ms_of(D2)


def seg_msg(mid: str, received: str | None, **kw) -> bytes:
    m = msg(mid, **kw)
    if received is None:
        del m["receivedAt"]
    else:
        m["receivedAt"] = received
    return orjson.dumps(m)


def gz(lines: list[bytes], members: int = 1) -> bytes:
    """Gzipped JSON lines, in ``members`` concatenated gzip members (Segment writes one)."""
    body = [line + b"\n" for line in lines]
    step = max(1, -(-len(body) // members))
    return b"".join(gzip.compress(b"".join(body[i : i + step])) for i in range(0, len(body), step))


def put(segment_root: str, day_ms: int | str, name: str, data: bytes) -> str:
    """Write an object of Segment's archive, byte for byte (S3: one PUT, as Segment does)."""
    location = f"{sl.segment_source_dir(segment_root, SEGMENT_ID)}/{day_ms}/{name}"
    fs, path = storage.resolve(location)
    if "://" not in location:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    with fs.open_output_stream(path, compression=None) as f:  # pyarrow would gzip a ".gz"
        f.write(data)
    return location


def expected_hour(line: bytes, day: str) -> str:
    """The test's own statement of the rule: receivedAt's hour, else hour 00 of the day."""
    try:
        obj = json.loads(line)
        ts = datetime.fromisoformat(obj["receivedAt"])
        ts = ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)  # no zone: UTC
        return ts.strftime("%Y-%m-%dT%H")
    except (ValueError, TypeError, KeyError, AttributeError):
        return f"{day}T00"


FILE_A = [  # day 1: several hours, both day edges, the four kinds of unroutable lines
    seg_msg("a1", "2026-11-20T00:10:00.000Z"),
    seg_msg("a2", "2026-11-20T05:30:00.000Z"),
    seg_msg("a3", "2026-11-20T05:45:59.999Z"),
    seg_msg("a4", "2026-11-20T23:59:59.999Z"),
    seg_msg("a5-next-day", "2026-11-21T00:00:00.100Z"),  # received day's edge: goes to its hour
    seg_msg("a6-prev-day", "2026-11-19T23:59:59Z"),
    b'{"type": "track", "messageId": "broken',  # not JSON
    b"[1, 2, 3]",  # JSON, not an object
    seg_msg("a7-no-received", None),
    seg_msg("a8-bad-received", "yesterday at noon"),
    b"",  # blank: carries nothing, not counted (as in the sync)
    seg_msg("a9", "2026-11-20T05:01:00Z"),
]
FILE_B = [  # day 1, a second file
    seg_msg("b1", "2026-11-20T10:00:00.000Z"),
    seg_msg("b2", "2026-11-20T10:59:59.000Z"),
    seg_msg("b3", "2026-11-20T13:30:00+02:00"),  # 11:30 UTC
    seg_msg("b4", "2026-11-20 11:45:00"),  # no zone: UTC, as the sync reads it
]
FILE_C = [seg_msg("c1", "2026-11-21T01:00:00Z"), seg_msg("c2", "2026-11-21T02:15:00Z")]


def build_segment_archive(root: str) -> dict[str, tuple[str, list[bytes]]]:
    """Two day folders, three files (one of two gzip members), and what must be skipped."""
    files = {
        "1763600000000.aaaa.gz": (D1, FILE_A),
        "1763610000000.bbbb.gz": (D1, FILE_B),
        "1763700000000.cccc.gz": (D2, FILE_C),
    }
    for name, (day, lines) in files.items():
        put(root, sl.day_ms_of(day), name, gz(lines, members=2 if "aaaa" in name else 1))
    put(root, MS1, "README.txt", b"not an export")  # not *.gz: ignored
    put(root, MS1, ".in-progress.gz", b"x")  # hidden: ignored
    for folder in ("notes", str(MS1 + 1), "12ab"):  # not a midnight's epoch ms: reported
        put(root, folder, "x.gz", gz([seg_msg("z", "2026-11-20T00:00:00Z")]))
    return files


def archive_files(archive_root: str) -> dict[str, bytes]:
    """Every file under the source's archive folder, by relative path."""
    base = layout.join(archive_root, SOURCE)
    return {
        loc[len(base) + 1 :]: raw_bytes(loc) for loc, _ in storage.list_files(base, recursive=True)
    }


def raw_bytes(location: str) -> bytes:
    """The stored bytes (pyarrow would decompress a ".gz" name by default)."""
    fs, path = storage.resolve(location)
    with fs.open_input_stream(path, compression=None) as f:
        return f.read()


def output_lines(archive_root: str) -> dict[str, Counter]:
    """Output hour files -> Counter of their lines."""
    out = {}
    for rel, data in archive_files(archive_root).items():
        if rel.startswith("day="):
            out[rel] = Counter(gzip.decompress(data).split(b"\n")[:-1])
    return out


def settings_file(tmp_path: Path, segment_archive: str, extra: str = "", source_extra: str = ""):
    return load_lake_toml(
        tmp_path,
        f'archive_root = "archive"\nlake_root = "lake"\n{extra}'
        f'[[sources]]\nid = "{SOURCE}"\nslug = "web_prod"\nstart = "2026-11-01-00:00"\n'
        f'segment_archive = "{segment_archive}"\nsegment_source_id = "{SEGMENT_ID}"\n'
        f"{source_extra}",
    )
