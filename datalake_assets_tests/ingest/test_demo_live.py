"""The demo's current hour fed minute by minute (``ingest/demo/live.py``, ``datalake dev``)."""

from __future__ import annotations

import gzip
from datetime import timedelta
from pathlib import Path

import orjson

from datalake_assets.ingest.demo import generate_archive
from datalake_assets.ingest.demo.live import LiveDemo
from datalake_assets.spec.layout import ArchiveHour, archive_hour_dir

SRC = "demo"
HOUR = ArchiveHour.parse("2026-11-21T10")


def files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def received(path: Path) -> list[str]:
    out = []
    for line in gzip.decompress(path.read_bytes()).splitlines():
        try:
            m = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # the demo's malformed lines
        if isinstance(m, dict) and isinstance(m.get("receivedAt"), str):
            out.append(m["receivedAt"])
    return out


def test_each_minute_arrives_once_it_is_over_and_the_hour_is_the_generators(tmp_path):
    archive = tmp_path / "archive"
    feed = LiveDemo(str(archive), SRC, tmp_path / "staging", 600, seed=7)
    folder = Path(archive_hour_dir(str(archive), SRC, HOUR))

    now = HOUR.start + timedelta(minutes=20, seconds=15)
    assert feed.publish_due(now) == 20
    assert files(folder) == [f"part-{m:04d}.jsonl.gz" for m in range(20)]  # no dot-file left
    for name in files(folder):  # nothing received after the moment it arrived
        assert max(received(folder / name)) <= f"{now:%Y-%m-%dT%H:%M:%S}", name
    assert feed.publish_due(now + timedelta(seconds=5)) == 0
    assert feed.publish_due(HOUR.start + timedelta(minutes=21, seconds=11)) == 1

    # the next hour: the rest of this one first, the new one staged, none of it due yet
    after = HOUR.start + timedelta(hours=1, seconds=30)
    assert feed.publish_due(after) == 39
    assert len(files(folder)) == 60
    nxt = Path(archive_hour_dir(str(archive), SRC, ArchiveHour.of(after)))
    assert files(nxt) == []
    assert feed.publish_due(after + timedelta(minutes=1)) == 1 and len(files(nxt)) == 1

    # what arrived is the generator's hour, line for line (600 lines: events_per_hour)
    whole = tmp_path / "whole"
    generate_archive(str(whole), SRC, [HOUR], events_per_hour=600, files_per_hour=60, seed=7)
    one_shot = Path(archive_hour_dir(str(whole), SRC, HOUR))
    for name in files(one_shot):
        fed = gzip.decompress((folder / name).read_bytes())
        assert fed == gzip.decompress((one_shot / name).read_bytes()), name
    lines = sum(len(gzip.decompress((folder / n).read_bytes()).splitlines()) for n in files(folder))
    assert lines == 600
