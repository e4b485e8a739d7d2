"""The collector's roller: one named archive file per segment, crash-safe, local or S3."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from datalake_assets.ingest.collector.roller import archive_location, roll_segment
from datalake_assets.ingest.collector.spool_files import ClosedSegment, parse_segment_path
from datalake_assets_tests.ingest.collector.helpers import archive_lines


def make_segment(tmp_path: Path, body: bytes) -> ClosedSegment:
    folder = tmp_path / "spool" / "src1"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "2026112110-20261121T100000-cccccccccccc.wal"
    path.write_bytes(body)
    seg = parse_segment_path(str(path))
    assert seg is not None
    return seg


def test_roll_writes_one_named_file_and_deletes_the_segment(tmp_path):
    archive = str(tmp_path / "archive")
    seg = make_segment(tmp_path, b'{"a":1}\n{"b":2}\n{"torn')
    final = roll_segment(archive, seg)
    assert (
        final
        == archive_location(archive, seg)
        == (
            f"{archive}/src1/day=2026-11-21/hr=10/"
            "collector-2026112110-20261121T100000-cccccccccccc.jsonl.gz"
        )
    )
    assert gzip.decompress(Path(final).read_bytes()) == b'{"a":1}\n{"b":2}\n'
    assert not os.path.exists(seg.path)
    assert os.listdir(os.path.dirname(final)) == [os.path.basename(final)]


def test_a_roll_repeated_after_a_crash_never_duplicates(tmp_path, monkeypatch):
    from datalake_assets.ingest.collector import roller as roller_mod

    archive = str(tmp_path / "archive")
    body = b"".join(b'{"n":%d}\n' % i for i in range(1000))
    seg = make_segment(tmp_path, body)
    hour_dir = Path(archive_location(archive, seg)).parent
    # 1. crash after the temporary file was written, before its rename: a leftover .tmp-
    hour_dir.mkdir(parents=True)
    (hour_dir / (".tmp-" + seg.archive_name)).write_bytes(b"half a gzip")
    # 2. crash after the rename, before the segment was deleted
    real_remove = os.remove

    def crash(path):
        raise OSError("simulated crash")

    monkeypatch.setattr(roller_mod.os, "remove", crash)
    with pytest.raises(OSError, match="simulated crash"):
        roll_segment(archive, seg)
    monkeypatch.setattr(roller_mod.os, "remove", real_remove)
    assert os.path.exists(seg.path)
    roll_segment(archive, seg)  # the restart's roll
    assert os.listdir(hour_dir) == [seg.archive_name]
    assert archive_lines(archive) == [{"n": i} for i in range(1000)]


def test_roll_to_s3_with_moto(tmp_path, monkeypatch, moto_endpoint):
    import boto3

    from datalake_assets.lake import storage

    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_endpoint)
        boto3.client("s3", endpoint_url=moto_endpoint).create_bucket(Bucket="arch")
        # The real path: pyarrow's S3 filesystem reads the endpoint variable when created,
        # so the cached filesystems are dropped before and after.
        storage._fs_for.cache_clear()
        seg = make_segment(tmp_path, b'{"a":1}\n{"b":2}\n')
        final = roll_segment("s3://arch/raw", seg)
        assert final == (
            "s3://arch/raw/src1/day=2026-11-21/hr=10/"
            "collector-2026112110-20261121T100000-cccccccccccc.jsonl.gz"
        )
        assert gzip.decompress(storage.read_bytes(final)) == b'{"a":1}\n{"b":2}\n'
        assert not os.path.exists(seg.path)
        assert [loc for loc, _ in storage.list_files("s3://arch/raw", recursive=True)] == [final]
    finally:
        storage._fs_for.cache_clear()
