"""Import of Segment's S3-destination archive into the raw archive's hourly layout.

Segment's S3 destination writes, per source and *received* day (UTC)::

    <segment_archive>/segment-logs/<segment source id>/<day epoch ms>/<file>.gz

(gzipped JSON lines, several files a day; ``<day epoch ms>`` is midnight UTC of the day in
milliseconds, e.g. ``1700006400000`` for 2023-11-15). The importer reads each file once,
streaming, and routes every line by the hour of its ``receivedAt`` into our layout::

    <archive_root>/<source id>/day=YYYY-MM-DD/hr=HH/segment-<file id>.jsonl.gz

so the sync, the archive sensors and backfills work on it unchanged (docs/concepts/segment-import.md).

* ``<file id>``: 16 hex digits of SHA-256 over ``<segment source id>/<day ms>/<file name>``.
  Output names are deterministic: importing a file again replaces its outputs, never adds.
* Routing: a line whose ``receivedAt`` parses (``types.parse_timestamp``, the sync's rule) goes
  to that hour, even outside the folder's day (clock edges). A line that is not JSON, not an
  object, or whose ``receivedAt`` is missing or unparseable goes *as it is* to hour 00 of the
  folder's day and is counted (``unrouted``): the sync then quarantines the first two kinds
  with their reason, and writes the last with ``received_at`` NULL, which its blocking
  ``schema_conformance`` check reports. Nothing is dropped but blank lines (which the sync does
  not count either).
* Outputs are staged under hidden ``.tmp-`` names (``storage.StagedFile``) and appear complete.
  An hour whose new output is byte-identical to the one there is left alone.
* Manifest per input file: ``<archive_root>/<source id>/_imports/<file id>.json`` (``_``:
  invisible to the sync and the sensors), with the file's size and version (ETag on S3, mtime
  in ns locally), its lines and the lines of each output hour. A file whose size and version
  match its manifest is skipped; one that changed is imported again, its outputs replaced and
  those of hours it no longer has removed. ``lines_in = sum(lines of every output hour)`` is
  checked for every file before anything is committed.
* Memory: one gzip stream (~300 KB) per output hour of the file being read (a Segment day
  file spans ~24 hours), whatever the file's size.

Modules: ``segment_layout`` (names and days), ``segment_listing`` (day folders, local or S3),
``segment_routing`` (a line to its hour, an hour's gzip output); here, the importer and its report.
"""

from __future__ import annotations

import json
import sys
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from datalake_assets.ingest.segment_layout import (
    HOUR_US,
    day_ms_of,
    day_of,
    file_id,
    hour_of_index,
    manifest_location,
    output_name,
    segment_source_dir,
)
from datalake_assets.ingest.segment_listing import (
    SegmentLister,
    SegmentListing,
    SegmentObject,
    segment_lister_for,
)
from datalake_assets.ingest.segment_routing import HourOutput, route
from datalake_assets.lake import storage
from datalake_assets.spec import layout
from datalake_assets.spec.layout import ArchiveHour

MANIFEST_VERSION = 1
READ_AHEAD = 8 << 20  # S3: one GET per 8 MiB of an input file (64 KiB reads otherwise)
MAX_OPEN_HOURS = 512  # output hours of one input file (a Segment day file spans ~24)


class ImportFailure(Exception):
    """An input file that could not be imported (unreadable, or its lines do not reconcile)."""


# ------------------------------------------------------------------------------------ reports


@dataclass
class FileReport:
    name: str
    file_id: str
    day: str
    status: str  # "imported" | "unchanged" | "failed"
    lines_in: int = 0
    blank_lines: int = 0
    unrouted: dict[str, int] = field(default_factory=dict)
    hours: dict[str, int] = field(default_factory=dict)  # "YYYY-MM-DDTHH" -> lines
    hours_changed: list[str] = field(default_factory=list)  # rewritten or removed outputs
    hours_removed: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class ImportReport:
    """What an import did, over one or more day folders."""

    source_id: str
    segment_source_id: str
    days: list[str] = field(default_factory=list)
    files: list[FileReport] = field(default_factory=list)
    invalid_folders: list[str] = field(default_factory=list)
    ignored_files: int = 0

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    @property
    def lines_in(self) -> int:
        return sum(f.lines_in for f in self.files if f.status == "imported")

    @property
    def unrouted(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.files:
            if f.status == "imported":
                for reason, n in f.unrouted.items():
                    out[reason] = out.get(reason, 0) + n
        return dict(sorted(out.items()))

    @property
    def hours_changed(self) -> list[ArchiveHour]:
        return sorted({ArchiveHour.parse(h) for f in self.files for h in f.hours_changed})

    @property
    def failures(self) -> list[FileReport]:
        return [f for f in self.files if f.status == "failed"]

    def summary(self) -> dict[str, Any]:
        changed = self.hours_changed
        return {
            "source_id": self.source_id,
            "segment_source_id": self.segment_source_id,
            "days": len(self.days),
            "files": len(self.files),
            "files_imported": self.count("imported"),
            "files_unchanged": self.count("unchanged"),
            "files_failed": self.count("failed"),
            "lines_in": self.lines_in,
            "unrouted": self.unrouted,
            "hours_changed": [str(h) for h in changed],
            "invalid_folders": self.invalid_folders,
            "ignored_files": self.ignored_files,
            "failures": {f"{f.day}/{f.name}": f.error for f in self.failures},
        }


# ----------------------------------------------------------------------------------- importer


class SegmentImporter:
    """Imports one Segment source's day folders into one source of the raw archive."""

    def __init__(
        self,
        segment_archive: str,
        segment_source_id: str,
        archive_root: str,
        source_id: str,
        *,
        lister: SegmentLister | None = None,
        spool_dir: str | None = None,
    ):
        self.segment_archive = segment_archive
        self.segment_source_id = segment_source_id
        self.archive_root = archive_root
        self.source_id = source_id
        self.lister = lister or segment_lister_for(segment_archive)
        self.spool_dir = spool_dir  # local temporary files of S3 outputs (default: $TMPDIR)

    @classmethod
    def for_source(cls, archive_root: str, source: Any, **kw: Any) -> SegmentImporter:
        """From ``settings.SourceSettings`` (which must have a ``segment_archive``)."""
        if not source.segment_archive:
            raise ValueError(f"source {source.id!r} has no segment_archive to import")
        return cls(source.segment_archive, source.segment_source_id, archive_root, source.id, **kw)

    # -- listing

    def list(self, first_day: str | None = None, last_day: str | None = None) -> SegmentListing:
        since = day_ms_of(first_day) if first_day else None
        until = day_ms_of(last_day) if last_day else None
        return self.lister.list_days(
            self.segment_archive, self.segment_source_id, since, until, limit=sys.maxsize
        )

    # -- importing

    def import_range(
        self,
        first_day: str | None = None,
        last_day: str | None = None,
        *,
        force: bool = False,
        progress: Callable[[str, ImportReport], None] | None = None,
    ) -> ImportReport:
        """Every day folder from ``first_day`` to ``last_day`` (inclusive, ``YYYY-MM-DD``;
        ``None``: unbounded), oldest first. ``progress(day, report of that day)`` after each."""
        listing = self.list(first_day, last_day)
        report = ImportReport(
            self.source_id,
            self.segment_source_id,
            invalid_folders=listing.invalid,
            ignored_files=listing.ignored,
        )
        for ms in sorted(listing.days):
            day = self.import_day(ms, listing.days[ms], force=force)
            report.days += day.days
            report.files += day.files
            if progress:
                progress(day_of(ms), day)
        return report

    def import_day(
        self, day: int | str, files: Iterable[SegmentObject] | None = None, *, force: bool = False
    ) -> ImportReport:
        """One day folder (epoch ms or ``YYYY-MM-DD``); ``files`` as listed, else listed now."""
        ms = day if isinstance(day, int) else day_ms_of(day)
        report = ImportReport(self.source_id, self.segment_source_id, days=[day_of(ms)])
        if files is None:
            listing = self.lister.list_days(
                self.segment_archive, self.segment_source_id, ms, ms, limit=sys.maxsize
            )
            files = listing.days.get(ms, [])
            report.ignored_files = listing.ignored
        for obj in sorted(files):
            report.files.append(self.import_file(ms, obj, force=force))
        return report

    def import_file(self, day_ms: int, obj: SegmentObject, *, force: bool = False) -> FileReport:
        """Import one file unless its manifest says it is unchanged (``force``: even then).
        A file that fails is reported (``status="failed"``) with nothing of it committed."""
        fid = file_id(self.segment_source_id, day_ms, obj.name)
        day = day_of(day_ms)
        try:
            previous = self.read_manifest(fid)
        except OSError as e:
            return FileReport(obj.name, fid, day, "failed", error=f"manifest: {e}")
        if (
            previous
            and not force
            and previous.get("size") == obj.size
            and previous.get("version") == obj.version
        ):
            return FileReport(
                obj.name,
                fid,
                day,
                "unchanged",
                lines_in=previous.get("lines_in", 0),
                blank_lines=previous.get("blank_lines", 0),
                unrouted=previous.get("unrouted", {}),
                hours={h: v["lines"] for h, v in previous.get("hours", {}).items()},
            )
        try:
            return self._import(day_ms, obj, fid, previous)
        except (OSError, zlib.error, EOFError, ImportFailure) as e:
            return FileReport(obj.name, fid, day, "failed", error=f"{type(e).__name__}: {e}")

    def _import(
        self, day_ms: int, obj: SegmentObject, fid: str, previous: dict | None
    ) -> FileReport:
        location = (
            f"{segment_source_dir(self.segment_archive, self.segment_source_id)}/"
            f"{day_ms}/{obj.name}"
        )
        fallback = day_ms * 1000 // HOUR_US  # hour 00 of the folder's day
        name = output_name(fid)
        outputs: dict[int, HourOutput] = {}
        report = FileReport(obj.name, fid, day_of(day_ms), "imported")
        try:
            read_ahead = READ_AHEAD if "://" in location else None
            for raw in storage.iter_lines(location, buffer_size=read_ahead):
                if not raw.strip():
                    report.blank_lines += 1
                    continue
                report.lines_in += 1
                index, reason = route(raw)
                if index is None:
                    index = fallback
                    report.unrouted[reason] = report.unrouted.get(reason, 0) + 1  # type: ignore
                out = outputs.get(index)
                if out is None:
                    if len(outputs) >= MAX_OPEN_HOURS:
                        raise ImportFailure(
                            f"lines of more than {MAX_OPEN_HOURS} received hours in one file: "
                            "not a Segment day file?"
                        )
                    hour = hour_of_index(index)
                    target = layout.join(
                        layout.archive_hour_dir(self.archive_root, self.source_id, hour), name
                    )
                    out = outputs[index] = HourOutput(storage.StagedFile(target, self.spool_dir))
                out.write(raw)
            routed = sum(o.lines for o in outputs.values())
            if routed != report.lines_in:  # every line in exactly one hour: checked, not hoped
                raise ImportFailure(f"{report.lines_in} lines read but {routed} routed")
            digests = {index: out.finish() for index, out in outputs.items()}
        except BaseException:
            for out in outputs.values():
                out.staged.abort()
            raise

        old_hours: dict[str, dict] = (previous or {}).get("hours", {})
        hours: dict[str, dict] = {}
        try:
            for index in sorted(outputs):
                out, key = outputs[index], str(hour_of_index(index))
                hours[key] = {
                    "lines": out.lines,
                    "bytes": out.staged.size,
                    "sha256": digests[index],
                }
                old = old_hours.get(key)
                if (
                    old
                    and old.get("sha256") == digests[index]
                    and storage.exists(out.staged.location)
                ):
                    out.staged.abort()  # the same bytes are there: leave them (and their mtime)
                    continue
                out.staged.commit()
                report.hours_changed.append(key)
        except BaseException:
            for out in outputs.values():
                out.staged.abort()
            raise
        for key in sorted(set(old_hours) - set(hours)):  # hours this file no longer has
            hour = ArchiveHour.parse(key)
            storage.delete_file(
                layout.join(layout.archive_hour_dir(self.archive_root, self.source_id, hour), name)
            )
            report.hours_removed.append(key)
        report.hours_changed = sorted(set(report.hours_changed) | set(report.hours_removed))
        report.hours = {k: v["lines"] for k, v in hours.items()}
        manifest = {
            "v": MANIFEST_VERSION,
            "input": location,
            "segment_source_id": self.segment_source_id,
            "day": day_of(day_ms),
            "name": obj.name,
            "size": obj.size,
            "version": obj.version,
            "file_id": fid,
            "output": name,
            "lines_in": report.lines_in,
            "blank_lines": report.blank_lines,
            "unrouted": dict(sorted(report.unrouted.items())),
            "hours": hours,
            "imported_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        storage.write_bytes_atomic(
            manifest_location(self.archive_root, self.source_id, fid),
            json.dumps(manifest, indent=1).encode(),
        )
        return report

    def read_manifest(self, fid: str) -> dict | None:
        location = manifest_location(self.archive_root, self.source_id, fid)
        try:
            data = json.loads(storage.read_bytes(location))
        except FileNotFoundError:
            return None
        except ValueError:
            return None  # corrupt: the file is imported again, which rewrites it
        return data if isinstance(data, dict) and data.get("v") == MANIFEST_VERSION else None


def hour_ranges(
    hours: Iterable[ArchiveHour], max_hours: int
) -> list[tuple[ArchiveHour, ArchiveHour]]:
    """Contiguous runs of hours, each at most ``max_hours`` long: ``[(first, last)]``."""
    out: list[tuple[ArchiveHour, ArchiveHour]] = []
    first = last = None
    n = 0
    for h in sorted(set(hours)):
        if first is not None and h == last.next() and n < max_hours:  # type: ignore[union-attr]
            last, n = h, n + 1
            continue
        if first is not None:
            out.append((first, last))  # type: ignore[arg-type]
        first = last = h
        n = 1
    if first is not None:
        out.append((first, last))  # type: ignore[arg-type]
    return out
