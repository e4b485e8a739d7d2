"""The sync job's package on S3: a content-addressed zip of ``datalake_assets`` and
``dagster_pipes`` plus the entry script, staged under ``s3://<bucket>/_jobs/<sha256>/`` for both
AWS backends (``emr.py`` says how one ``run_sync`` uses it), and the S3 URI helpers they share."""

from __future__ import annotations

import hashlib
import io
import os
import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from datalake_assets.transform.pipes_entry import ENTRY_SCRIPT

JOBS_DIR = "_jobs"  # reserved prefix of the lake bucket: packages, Pipes files, serverless logs
PACKAGE_FILE = "datalake_assets.zip"
ENTRY_FILE = "pipes_entry.py"
BUNDLED_PACKAGES = ("datalake_assets", "dagster_pipes")  # pure Python, shipped in the zip
PACKAGE_REFRESH_S = 24 * 3600  # re-upload a package older than this (lifecycle rule: >= 2 days)

_S3_URI_RE = re.compile(r"s3[an]?://([^/]+)/?(.*)")


# ------------------------------------------------------------------------------------ S3 paths


def split_s3_uri(uri: str) -> tuple[str, str]:
    """``("bucket", "key/prefix")`` of ``s3://bucket/key/prefix`` (also ``s3a://``, ``s3n://``)."""
    m = _S3_URI_RE.fullmatch(uri)
    if not m or not m.group(1):
        raise ValueError(f"not an S3 URI: {uri!r} (expected s3://bucket/prefix)")
    return m.group(1), m.group(2)


def default_staging_prefix(lake_root: str) -> str:
    """``s3://<lake bucket>/_jobs/``: the bucket's reserved prefix for job files."""
    bucket, _ = split_s3_uri(lake_root)
    return f"s3://{bucket}/{JOBS_DIR}/"


def dir_uri(uri: str) -> str:
    return uri if uri.endswith("/") else uri + "/"


# ----------------------------------------------------------------------------------- packaging


def _package_files(package: str) -> Iterator[tuple[str, str]]:
    """``(path on disk, name in the zip)`` of a package's modules and data files, sorted."""
    import importlib

    module = importlib.import_module(package)
    root = os.path.dirname(module.__file__ or "")
    base = os.path.dirname(root)
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__" and not d.startswith(".")]
        for name in files:
            if name.endswith((".py", ".toml", ".typed")):
                path = os.path.join(folder, name)
                out.append((path, os.path.relpath(path, base).replace(os.sep, "/")))
    return iter(sorted(out, key=lambda p: p[1]))


def build_package(packages: tuple[str, ...] = BUNDLED_PACKAGES) -> bytes:
    """A zip for ``--py-files``: byte-identical for identical sources (sorted entries, fixed
    timestamps and modes), so its hash names it."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in packages:
            for path, name in _package_files(package):
                info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                with open(path, "rb") as f:
                    zf.writestr(info, f.read())
    return buf.getvalue()


@lru_cache(maxsize=1)
def _package() -> tuple[bytes, bytes, str]:
    body, entry = build_package(), ENTRY_SCRIPT.encode("utf-8")
    digest = hashlib.sha256(body + b"\0" + entry).hexdigest()
    return body, entry, digest


@dataclass(frozen=True)
class StagedPackage:
    sha256: str
    zip_uri: str
    entry_uri: str
    uploaded: tuple[str, ...]  # the files this call uploaded (empty: all were there)


def stage_package(
    s3: Any,
    staging_prefix: str,
    refresh_after_s: int = PACKAGE_REFRESH_S,
    package: tuple[bytes, bytes, str] | None = None,
) -> StagedPackage:
    """Upload the job's zip and entry script to ``<staging_prefix><sha256>/`` unless there
    (and fresher than ``refresh_after_s``)."""
    body, entry, digest = package or _package()
    bucket, prefix = split_s3_uri(dir_uri(staging_prefix))
    folder = f"{prefix}{digest}/"
    uploaded = []
    for name, data in ((PACKAGE_FILE, body), (ENTRY_FILE, entry)):
        key = folder + name
        if not _fresh(s3, bucket, key, len(data), refresh_after_s):
            s3.put_object(Bucket=bucket, Key=key, Body=data)
            uploaded.append(name)
    return StagedPackage(
        sha256=digest,
        zip_uri=f"s3://{bucket}/{folder}{PACKAGE_FILE}",
        entry_uri=f"s3://{bucket}/{folder}{ENTRY_FILE}",
        uploaded=tuple(uploaded),
    )


def _fresh(s3: Any, bucket: str, key: str, size: int, refresh_after_s: int) -> bool:
    from botocore.exceptions import ClientError

    try:
        head = s3.head_object(Bucket=bucket, Key=key)
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return False
        raise
    age = datetime.now(UTC) - head["LastModified"]
    return head.get("ContentLength") == size and age < timedelta(seconds=refresh_after_s)
