"""Listing a Segment source's day folders, locally (``os.scandir``), on S3
(``list_objects_v2``, with the archive sensor's client) or on Azure (pyarrow, one folder at a
time): which files each day holds, with the size and version that tell the importer whether a
file changed."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow.fs as pafs

from datalake_assets.ingest.segment_layout import (
    SEGMENT_LOGS,
    is_input_file,
    parse_day_folder,
    segment_source_dir,
)
from datalake_assets.lake.listing import S3ArchiveLister, list_folder
from datalake_assets.spec import layout
from datalake_assets.spec.azure_uri import AZURE_SCHEMES, scheme_of
from datalake_assets.spec.layout import S3_SCHEMES

DEFAULT_LIST_LIMIT = 200_000  # folder entries or keys listed per call at most (sensor ticks)


@dataclass(frozen=True, order=True)
class SegmentObject:
    name: str  # base name in the day folder
    size: int
    version: str  # ETag (S3) or mtime in ns (local, Azure)


@dataclass
class SegmentListing:
    """Day folders of one Segment source, from ``since`` on."""

    days: dict[int, list[SegmentObject]] = field(default_factory=dict)
    invalid: list[str] = field(default_factory=list)  # folders that are not a day's epoch ms
    ignored: int = 0  # files that are not ``*.gz`` or are hidden (``.``/``_``)
    calls: int = 0
    entries: int = 0
    truncated_at: int | None = None  # first day not listed (limit): list again from there


class SegmentLister(Protocol):
    def list_days(
        self,
        segment_archive: str,
        segment_source_id: str,
        since: int | None = None,
        until: int | None = None,
        limit: int = DEFAULT_LIST_LIMIT,
    ) -> SegmentListing: ...


class LocalSegmentLister:
    """``os.scandir`` of the source folder, then of each day folder from ``since`` on."""

    def list_days(
        self,
        segment_archive: str,
        segment_source_id: str,
        since: int | None = None,
        until: int | None = None,
        limit: int = DEFAULT_LIST_LIMIT,
    ) -> SegmentListing:
        out = SegmentListing()
        base = segment_source_dir(segment_archive, segment_source_id)
        days = []
        for name, is_dir in self._scan(base, out):
            if not is_dir:
                continue
            ms = parse_day_folder(name)
            if ms is None:
                out.invalid.append(name)
            elif (since is None or ms >= since) and (until is None or ms <= until):
                days.append((ms, name))
        for ms, name in sorted(days):
            if out.entries >= limit and out.days:
                out.truncated_at = ms
                break
            files = []
            for entry in self._scan_files(f"{base}/{name}", out):
                if entry is None:
                    out.ignored += 1
                else:
                    files.append(entry)
            out.days[ms] = sorted(files)
        out.invalid.sort()
        return out

    @staticmethod
    def _scan(path: str, out: SegmentListing) -> list[tuple[str, bool]]:
        try:
            with os.scandir(path) as it:
                out.calls += 1
                names = [(e.name, e.is_dir()) for e in it]
        except (FileNotFoundError, NotADirectoryError):
            return []
        out.entries += len(names)
        return names

    @staticmethod
    def _scan_files(path: str, out: SegmentListing) -> list[SegmentObject | None]:
        found: list[SegmentObject | None] = []
        try:
            with os.scandir(path) as it:
                out.calls += 1
                for e in it:
                    out.entries += 1
                    if not e.is_file():
                        continue
                    if not is_input_file(e.name):
                        found.append(None)
                        continue
                    try:
                        st = e.stat()
                    except FileNotFoundError:
                        continue
                    found.append(SegmentObject(e.name, st.st_size, str(st.st_mtime_ns)))
        except (FileNotFoundError, NotADirectoryError):
            pass
        return found


class FileSystemSegmentLister(LocalSegmentLister):
    """The local lister's walk through pyarrow's filesystem (Azure); versions are modification
    times, as for the archive (``lake.listing.FileSystemArchiveLister``)."""

    @staticmethod
    def _scan(path: str, out: SegmentListing) -> list[tuple[str, bool]]:
        return [(i.base_name, i.type == pafs.FileType.Directory) for i in list_folder(path, out)]

    @staticmethod
    def _scan_files(path: str, out: SegmentListing) -> list[SegmentObject | None]:
        return [
            (
                SegmentObject(i.base_name, i.size or 0, str(i.mtime_ns or 0))
                if is_input_file(i.base_name)
                else None
            )
            for i in list_folder(path, out)
            if i.type == pafs.FileType.File
        ]


class S3SegmentLister(S3ArchiveLister):
    """``list_objects_v2`` under ``<prefix>/segment-logs/<id>/``, ``StartAfter`` the first day
    wanted. Day folders of 13 digits (2001-09-09 to 2286) sort by name as by time, so a listing
    from a day returns that day and the later ones only. The client and page size are the
    archive sensor's (``lake.listing.S3ArchiveLister``)."""

    @staticmethod
    def split(segment_archive: str, segment_source_id: str) -> tuple[str, str]:
        """``(bucket, key prefix of the Segment source ending in '/')``."""
        rest = segment_archive.split("://", 1)[1]
        bucket, _, prefix = rest.partition("/")
        return bucket, layout.join(prefix, SEGMENT_LOGS, segment_source_id).lstrip("/") + "/"

    def list_days(
        self,
        segment_archive: str,
        segment_source_id: str,
        since: int | None = None,
        until: int | None = None,
        limit: int = DEFAULT_LIST_LIMIT,
    ) -> SegmentListing:
        out = SegmentListing()
        bucket, prefix = self.split(segment_archive, segment_source_id)
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": self.page_size}
        if since is not None:
            kwargs["StartAfter"] = f"{prefix}{since}"  # the day's keys extend this string
        invalid: set[str] = set()
        current: int | None = None
        done = False
        while not done:
            page = self.client.list_objects_v2(**kwargs)
            out.calls += 1
            for obj in page.get("Contents", ()):
                out.entries += 1
                folder, _, name = obj["Key"][len(prefix) :].partition("/")
                ms = parse_day_folder(folder)
                if ms is None:
                    invalid.add(folder)
                    continue
                if (since is not None and ms < since) or (until is not None and ms > until):
                    if until is not None and ms > until and len(folder) == 13:
                        done = True  # 13-digit days sort by time: nothing wanted follows
                        break
                    continue
                if ms != current:
                    if out.entries > limit and out.days:
                        out.truncated_at = ms
                        done = True
                        break
                    current = ms
                    out.days.setdefault(ms, [])
                if not name or "/" in name:
                    continue  # folder marker, or a deeper key: not a Segment file
                if not is_input_file(name):
                    out.ignored += 1
                    continue
                out.days[ms].append(
                    SegmentObject(name, int(obj["Size"]), str(obj.get("ETag", "")).strip('"'))
                )
            if done or not page.get("IsTruncated"):
                break
            kwargs["ContinuationToken"] = page["NextContinuationToken"]
        for files in out.days.values():
            files.sort()
        out.invalid = sorted(invalid)
        return out


def segment_lister_for(segment_archive: str) -> SegmentLister:
    scheme = scheme_of(segment_archive)
    if not scheme:
        return LocalSegmentLister()
    if scheme in S3_SCHEMES:
        return S3SegmentLister()
    if scheme in AZURE_SCHEMES:
        return FileSystemSegmentLister()
    raise ValueError(
        "Segment archives are local folders, s3://, abfss:// or az:// URIs; not "
        f"{segment_archive!r}"
    )
