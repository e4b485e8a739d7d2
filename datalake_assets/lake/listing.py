"""Listing the raw archive: which hours of a source exist, and their files.

``<archive_root>/<source>/day=YYYY-MM-DD/hr=HH/<file>``, locally (``os.scandir``), on S3
(``list_objects_v2``) or on Azure (pyarrow's filesystem, one folder at a time). The archive
sensors list from their cursor's position on; the lake state and the Segment importer use the
same listers. Part of the lake's I/O layer.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import pyarrow.fs as pafs

from datalake_assets.lake import storage
from datalake_assets.spec import layout
from datalake_assets.spec.azure_uri import AZURE_SCHEMES, scheme_of
from datalake_assets.spec.layout import S3_SCHEMES, ArchiveHour

DEFAULT_LIST_LIMIT = 200_000  # entries (files, folders or keys) listed per call at most


@dataclass(frozen=True, order=True)
class ArchiveFile:
    name: str  # base name in the hour folder
    size: int
    version: str  # mtime in ns (local, Azure) or ETag (S3)


@dataclass
class Listing:
    """What one tick saw of a source's archive, from ``since`` on."""

    hours: dict[ArchiveHour, list[ArchiveFile]] = field(default_factory=dict)
    calls: int = 0  # folder listings (local) or list_objects_v2 requests (S3)
    entries: int = 0  # folder entries or keys returned
    truncated_at: ArchiveHour | None = None  # first hour not completely listed (list_limit)


class ArchiveLister(Protocol):
    def list_hours(
        self, archive_root: str, source_id: str, since: ArchiveHour, limit: int = DEFAULT_LIST_LIMIT
    ) -> Listing: ...


def _parse_day(name: str) -> str | None:
    if not name.startswith("day=") or len(name) != 14:
        return None
    try:
        datetime.strptime(name[4:], "%Y-%m-%d")
    except ValueError:
        return None
    return name[4:]


def _parse_hour(day: str, name: str) -> ArchiveHour | None:
    if not name.startswith("hr=") or len(name) != 5 or not name[3:].isdigit():
        return None
    hr = int(name[3:])
    if hr > 23:
        return None
    return ArchiveHour(datetime.strptime(day, "%Y-%m-%d").replace(hour=hr, tzinfo=UTC))


class LocalArchiveLister:
    """Walks ``<root>/<source>/day=*/hr=*/`` with ``os.scandir``, skipping days before ``since``
    by name (one listing of the source folder, then only the days at or after it)."""

    def list_hours(
        self, archive_root: str, source_id: str, since: ArchiveHour, limit: int = DEFAULT_LIST_LIMIT
    ) -> Listing:
        out = Listing()
        base = layout.join(archive_root, source_id)
        days = self._names(base, out, dirs_only=True)
        listed_one = False
        for day_name in sorted(days):
            day = _parse_day(day_name)
            if day is None or day < since.day:
                continue
            hours = self._names(f"{base}/{day_name}", out, dirs_only=True)
            for hr_name in sorted(hours):
                hour = _parse_hour(day, hr_name)
                if hour is None or hour < since:
                    continue
                if out.entries >= limit and listed_one:  # at least one hour a tick: progress
                    out.truncated_at = hour
                    return out
                listed_one = True
                files = self._files(f"{base}/{day_name}/{hr_name}", out)
                if files:
                    out.hours[hour] = files
        return out

    @staticmethod
    def _names(path: str, out: Listing, dirs_only: bool) -> list[str]:
        try:
            with os.scandir(path) as it:
                out.calls += 1
                names = [e.name for e in it if not dirs_only or e.is_dir()]
        except (FileNotFoundError, NotADirectoryError):
            return []
        out.entries += len(names)
        return names

    @staticmethod
    def _files(path: str, out: Listing) -> list[ArchiveFile]:
        files = []
        try:
            with os.scandir(path) as it:
                out.calls += 1
                for e in it:
                    out.entries += 1
                    if not layout.is_archive_file(e.name) or not e.is_file():
                        continue
                    try:
                        st = e.stat()
                    except FileNotFoundError:  # removed while listing
                        continue
                    files.append(ArchiveFile(e.name, st.st_size, str(st.st_mtime_ns)))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(files)


class Counted(Protocol):
    calls: int
    entries: int


def list_folder(location: str, out: Counted) -> list[pafs.FileInfo]:
    """The entries of one folder through pyarrow (on Azure one delimited listing: folders
    come back as prefixes); empty if it does not exist. Counts one call and its entries."""
    fs, path = storage.resolve(location)
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    except (FileNotFoundError, NotADirectoryError):
        return []
    out.calls += 1
    out.entries += len(infos)
    return infos


class FileSystemArchiveLister(LocalArchiveLister):
    """The local lister's walk (source folder, then the days and hours from ``since`` on)
    through pyarrow's filesystem: Azure (``abfss://``, ``az://``). A file's version is its
    modification time (pyarrow does not expose the ETag): a file replaced within the same
    second by one of the same size is not seen as changed; archive files are written once."""

    @staticmethod
    def _names(path: str, out: Listing, dirs_only: bool) -> list[str]:
        return [
            i.base_name
            for i in list_folder(path, out)
            if not dirs_only or i.type == pafs.FileType.Directory
        ]

    @staticmethod
    def _files(path: str, out: Listing) -> list[ArchiveFile]:
        return sorted(
            ArchiveFile(i.base_name, i.size or 0, str(i.mtime_ns or 0))
            for i in list_folder(path, out)
            if i.type == pafs.FileType.File and layout.is_archive_file(i.base_name)
        )


class S3ArchiveLister:
    """``list_objects_v2`` under ``<prefix>/<source>/``, ``StartAfter`` the position's key,
    paginated (``page_size`` keys a request, 1000 at most on S3). ``client`` defaults to
    ``boto3.client("s3")`` (credentials, region and ``AWS_ENDPOINT_URL_S3`` from the
    environment), created at the first tick."""

    def __init__(self, client: Any = None, page_size: int = 1000):
        if not 1 <= page_size <= 1000:
            raise ValueError(f"page_size must be from 1 to 1000, got {page_size!r}")
        self._client = client
        self.page_size = page_size

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3

            self._client = boto3.client("s3")
        return self._client

    @staticmethod
    def split(archive_root: str, source_id: str) -> tuple[str, str]:
        """``(bucket, key prefix of the source ending in '/')``."""
        rest = archive_root.split("://", 1)[1]
        bucket, _, prefix = rest.partition("/")
        return bucket, layout.join(prefix, source_id).lstrip("/") + "/"

    def list_hours(
        self, archive_root: str, source_id: str, since: ArchiveHour, limit: int = DEFAULT_LIST_LIMIT
    ) -> Listing:
        out = Listing()
        bucket, prefix = self.split(archive_root, source_id)
        # Keys of hour `since` extend this string, so they sort after it; earlier hours before.
        start_after = f"{prefix}day={since.day}/hr={since.hr}"
        kwargs: dict[str, Any] = {
            "Bucket": bucket,
            "Prefix": prefix,
            "StartAfter": start_after,
            "MaxKeys": self.page_size,
        }
        last_hour: ArchiveHour | None = None
        cut: ArchiveHour | None = None  # past the limit: finish this hour, then stop
        while True:
            page = self.client.list_objects_v2(**kwargs)
            out.calls += 1
            for obj in page.get("Contents", ()):
                out.entries += 1
                parts = obj["Key"][len(prefix) :].split("/")
                if len(parts) != 3:
                    continue
                day = _parse_day(parts[0])
                hour = _parse_hour(day, parts[1]) if day else None
                if hour is None or hour < since:
                    continue
                if cut is not None and hour > cut:
                    out.truncated_at = hour  # the next tick lists again from this hour
                    break
                last_hour = hour
                if layout.is_archive_file(parts[2]):
                    out.hours.setdefault(hour, []).append(
                        ArchiveFile(parts[2], int(obj["Size"]), str(obj.get("ETag", "")).strip('"'))
                    )
            if out.truncated_at is not None or not page.get("IsTruncated"):
                break
            if cut is None and out.entries >= limit and last_hour is not None:
                cut = last_hour
            kwargs["ContinuationToken"] = page["NextContinuationToken"]
        for files in out.hours.values():
            files.sort()
        return out


def lister_for(archive_root: str) -> ArchiveLister:
    scheme = scheme_of(archive_root)
    if not scheme:
        return LocalArchiveLister()
    if scheme in S3_SCHEMES:
        return S3ArchiveLister()
    if scheme in AZURE_SCHEMES:
        return FileSystemArchiveLister()
    raise ValueError(
        f"archive sensors list local folders, s3://, abfss:// and az:// roots; not {archive_root!r}"
    )


def fingerprint(files: Iterable[ArchiveFile]) -> str:
    """16 hex digits of SHA-256 over the sorted (name, size, version) of an hour's files."""
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(f"{f.name}\t{f.size}\t{f.version}\n".encode())
    return h.hexdigest()[:16]
