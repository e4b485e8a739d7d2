"""The same erasure on an ``s3://`` lake and archive (moto): the object-store commit, the
archive replaced object by object, the S3 lease as the source's lock."""

import os

import pytest

from datalake_assets.privacy.forget import forget
from datalake_assets.privacy.forget_request import ForgetRequest
from datalake_assets.spec.identity import identity
from datalake_assets_tests.privacy.people import (
    lake_snapshot,
    load,
    settings_text,
    target_traces,
    without_target,
)
from datalake_assets_tests.privacy.test_forget import target_hashes

pytestmark = pytest.mark.spark


def upload(client, bucket: str, root: str) -> None:
    for part in ("archive", "lake"):
        for folder, _, names in os.walk(os.path.join(root, part)):
            for name in names:
                path = os.path.join(folder, name)
                client.upload_file(path, bucket, os.path.relpath(path, root))


def download(client, bucket: str, root: str) -> None:
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for obj in page.get("Contents", []):
            if obj["Key"].endswith("/"):
                continue
            path = os.path.join(root, obj["Key"])
            os.makedirs(os.path.dirname(path), exist_ok=True)
            client.download_file(bucket, obj["Key"], path)


@pytest.mark.slow
def test_forget_on_s3(indexed_lake, moto_bucket, tmp_path):
    client, bucket = moto_bucket
    local = os.path.dirname(indexed_lake.lake_root)
    hashes = target_hashes(indexed_lake)  # the key is uploaded with the lake
    before = lake_snapshot(indexed_lake)
    upload(client, bucket, local)
    text = (
        settings_text(local)
        .replace(f'"{local}/archive"', f'"s3://{bucket}/archive"')
        .replace(f'"{local}/lake"', f'"s3://{bucket}/lake"')
    )
    (tmp_path / "s3").mkdir()
    settings = load(str(tmp_path / "s3"), text)
    assert settings.lake_root == f"s3://{bucket}/lake"

    result = forget(
        settings, ForgetRequest("r-s3", (identity("user_id", "u-target"),), follow_links=True)
    )
    assert result.status == "completed", result
    assert result.rows_remaining == 0 and result.archive_lines_removed == 13

    mirror = tmp_path / "mirror"
    download(client, bucket, str(mirror))
    after = lake_snapshot(load(str(mirror)))
    assert target_traces(after, hashes) == []
    assert without_target(after, hashes) == without_target(before, hashes)
