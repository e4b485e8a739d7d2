"""``lake/storage.py`` on S3, counted request by request: moto behind the test proxy.

A sync writes a few dozen small files per hour; every avoidable request per file is paid in
latency and in S3's request charges. These tests hold the request pattern of a write."""

from __future__ import annotations

import uuid

import boto3
import pytest

from datalake_assets.lake import storage
from datalake_assets_tests.reliability.s3_fault_proxy import FaultProxy


@pytest.fixture()
def s3(moto_endpoint, monkeypatch):
    """A fresh bucket; pyarrow reaches moto through a proxy that records every request."""
    host, port = moto_endpoint.rsplit("/", 1)[1].rsplit(":", 1)
    proxy = FaultProxy(host, int(port)).start()
    seen: list[tuple[str, str]] = []

    def record(method, path, headers, body):  # fails nothing: only records
        seen.append((method, path))

    proxy.fail = record
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    name = f"st-{uuid.uuid4().hex[:12]}"  # new bucket: storage's per-bucket filesystem is new
    client = boto3.client("s3", endpoint_url=moto_endpoint)
    client.create_bucket(Bucket=name)
    yield {"bucket": name, "seen": seen, "client": client}
    proxy.stop()


def _keys(client, bucket: str) -> list[str]:
    return sorted(o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", []))


def test_a_small_file_is_one_put_and_directories_cost_nothing(s3):
    bucket, seen = s3["bucket"], s3["seen"]
    directory = f"s3://{bucket}/lake/_staging/src/run/data/segment_type=pages/day=2026-11-21"
    storage.create_dir(directory)
    assert seen == []  # S3 has no directories: no marker objects, no request
    storage.write_bytes_atomic(f"{directory}/part-0.json", b'{"n": 1}')
    assert seen == [
        (
            "PUT",
            f"/{bucket}/lake/_staging/src/run/data/segment_type%3Dpages/"
            "day%3D2026-11-21/part-0.json",
        )
    ]
    # only the file exists: no empty "directory/" objects on the way to it
    assert _keys(s3["client"], bucket) == [
        "lake/_staging/src/run/data/segment_type=pages/day=2026-11-21/part-0.json"
    ]
    assert storage.read_bytes(f"{directory}/part-0.json") == b'{"n": 1}'
    assert storage.list_files(f"s3://{bucket}/lake/_staging/src/run/data", recursive=True) == [
        (f"{directory}/part-0.json", 8)
    ]


def test_a_write_into_a_missing_bucket_still_fails(s3):
    # Opening the stream no longer checks the bucket: the error must come at the write/close.
    with pytest.raises(OSError, match="bucket does not exist"):
        storage.write_bytes_atomic(f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/x.json", b"{}")
