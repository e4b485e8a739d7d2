"""Where one received hour of a source lives, everywhere a person's data can be: its archive
files, each table's files of the hour, its quarantine, its message-id index and its identity
index (``spec/layout.py`` names every path; this module lists them)."""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from datalake_assets.lake import storage
from datalake_assets.lake.formats import SourceTables, TableFormat, table_format
from datalake_assets.lake.records import read_schema_record
from datalake_assets.settings.formats_section import FormatConfig
from datalake_assets.spec import layout
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets.spec.naming import QUARANTINE

# The partitions of an hour that are not a table's (``HourFiles.parts``): "#" sets them apart,
# as no table's name can start with it.
QUARANTINE_PART, INDEX_PART, IDENTITIES_PART = "#quarantine", "#index", "#identities"
_ARCHIVE_HOUR_RE = re.compile(r"/day=(\d{4})-(\d{2})-(\d{2})/hr=(\d{2})/[^/]+$")


@dataclass(frozen=True)
class SourcePlace:
    """A source as the privacy code needs it (from the settings' ``[[sources]]``)."""

    source_id: str  # the archive's folder
    source_dir: str  # the lake's folder (id or slug)
    date_layout: str
    lake_root: str
    archive_root: str
    database: str = ""  # the catalog database of its tables ("": the source id)
    table_prefix: str = ""
    table_format: FormatConfig = field(default_factory=FormatConfig)

    @property
    def tables_format(self) -> TableFormat:
        """The lake's table format (``lake/formats/``): where a table's hour is read from
        and how its next version is committed."""
        return table_format(self.table_format, self.lake_root)

    @property
    def src(self) -> SourceTables:
        return SourceTables(
            self.source_dir, self.database or self.source_id, self.table_prefix, self.date_layout
        )


@dataclass
class HourFiles:
    """The files of one hour. ``dirs``: kind -> the partition directory holding them, for the
    per-hour directories (``quarantine``, ``index``, ``identities``) and each table."""

    hour: str  # compact YYYYMMDDHH
    archive: list[tuple[str, int]] = field(default_factory=list)
    tables: dict[str, tuple[str, list[str]]] = field(default_factory=dict)  # table -> dir, files
    quarantine: tuple[str, list[str]] = ("", [])
    index: tuple[str, list[str]] = ("", [])
    identities: tuple[str, list[str]] = ("", [])

    def parts(self) -> dict[str, tuple[str, list[str]]]:
        """Every partition of the hour in the lake: ``name -> (dir, files)``; tables by name,
        the others as ``QUARANTINE_PART``, ``INDEX_PART``, ``IDENTITIES_PART``."""
        out = dict(self.tables)
        out[QUARANTINE_PART], out[INDEX_PART], out[IDENTITIES_PART] = (
            self.quarantine,
            self.index,
            self.identities,
        )
        return out


class DamagedArchiveFile(RuntimeError):
    """An archive file that cannot be read to its end: the person may be in the unread part."""


def archive_lines(location: str) -> Iterator[bytes]:
    """The lines of an archive file, or ``DamagedArchiveFile`` (the sync quarantines the rest
    of such a file; an erasure cannot prove what it could not read)."""
    try:
        yield from storage.iter_lines(location)
    except (OSError, EOFError, zlib.error) as e:
        raise DamagedArchiveFile(
            f"archive file {location} cannot be read to its end ({type(e).__name__}); the "
            "request cannot search it: repair or delete the file, then run the request again"
        ) from None


def list_dirs(location: str) -> list[str]:
    """The sub-directories of a directory (locations); empty if it does not exist."""
    fs, path = storage.resolve(location)
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    except FileNotFoundError:
        return []
    return sorted(
        storage.to_location(location, i.path) for i in infos if i.type == pafs.FileType.Directory
    )


def _visible(location: str) -> bool:
    return not location.rsplit("/", 1)[-1].startswith((".", "_"))


def _hour_files(directory: str, hour: str) -> list[str]:
    """The Parquet files of ``hour`` in a partition directory (a coarse layout's day holds 24
    hours: the file names' hour prefix tells them apart)."""
    return [
        loc
        for loc, _ in storage.list_files(directory)
        if loc.endswith(".parquet") and _visible(loc) and layout.hour_of_data_file(loc) == hour
    ]


def _per_hour_files(directory: str) -> list[str]:
    return [
        loc
        for loc, _ in storage.list_files(directory)
        if loc.endswith(".parquet") and _visible(loc)
    ]


def table_names(place: SourcePlace) -> list[str]:
    """Every table of the source: its folders in the lake (``segment_type=<table>``) and the
    tables of its schema record (an Iceberg lake has no such folder)."""
    root = layout.join(place.lake_root, "data", place.source_dir)
    folders = {d.rsplit("segment_type=", 1)[1] for d in list_dirs(root) if "/segment_type=" in d}
    return sorted(folders | set(read_schema_record(place.lake_root, place.source_dir)))


def hour_files(
    place: SourcePlace, hour: str, tables: list[str] | None = None, stored: bool = False
) -> HourFiles:
    """The hour's files everywhere; ``stored``: every table file stored for the hour, read by
    readers or not (an erasure's proof), else the files readers read."""
    h = ArchiveHour.parse(hour)
    out = HourFiles(hour=h.compact)
    archive_dir = layout.archive_hour_dir(place.archive_root, place.source_id, h)
    out.archive = [
        (loc, size) for loc, size in storage.list_files(archive_dir) if layout.is_archive_file(loc)
    ]
    fmt = place.tables_format
    for t in table_names(place) if tables is None else tables:
        d = layout.table_partition_dir(place.lake_root, place.source_dir, t, place.date_layout, h)
        listed = (fmt.stored_files if stored else fmt.live_files)(place.src, t, h.compact)
        files = [loc for loc, _ in listed if _visible(loc)]
        if files:
            out.tables[t] = (d, files)
    q = layout.quarantine_dir(place.lake_root, place.source_dir, h)
    listed = (fmt.stored_files if stored else fmt.live_files)(place.src, QUARANTINE, h.compact)
    out.quarantine = (q, [loc for loc, _ in listed if _visible(loc)])
    i = layout.join(
        layout.index_root(place.lake_root, place.source_dir), layout.index_partition_path(h)
    )
    out.index = (i, _per_hour_files(i))
    ident = layout.join(
        layout.identity_index_root(place.lake_root, place.source_dir),
        layout.index_partition_path(h),
    )
    out.identities = (ident, _per_hour_files(ident))
    return out


def _modified(root: str) -> list[tuple[str, float]]:
    """``(location, modification time in s)`` of every file under ``root`` (one listing:
    local stat, S3's ``LastModified``, Azure's ``Last-Modified``)."""
    fs, path = storage.resolve(root)
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    except FileNotFoundError:
        return []
    return [
        (storage.to_location(root, i.path), i.mtime.timestamp() if i.mtime else 0.0)
        for i in infos
        if i.type == pafs.FileType.File
    ]


def archive_newest(place: SourcePlace) -> dict[str, float]:
    """The hours (compact) the source's raw archive holds files of: the time its newest file
    was written."""
    out: dict[str, float] = {}
    for loc, mtime in _modified(layout.join(place.archive_root, place.source_id)):
        m = _ARCHIVE_HOUR_RE.search(loc)
        if m and layout.is_archive_file(loc):
            hour = "".join(m.groups())
            out[hour] = max(out.get(hour, mtime), mtime)
    return out


def archive_hours(place: SourcePlace) -> set[str]:
    """The hours (compact) the source's raw archive holds files of."""
    return set(archive_newest(place))


def indexed_before(place: SourcePlace) -> dict[str, float]:
    """The hours with a per-hour identity index: when their oldest index file was written
    (by the hour's last sync, or an erasure)."""
    out: dict[str, float] = {}
    root = layout.identity_index_root(place.lake_root, place.source_dir)
    for loc, mtime in _modified(root):
        hour = layout.hour_of_index_file(loc)
        if hour is not None and loc.endswith(".parquet") and _visible(loc):
            out[hour] = min(out.get(hour, mtime), mtime)
    return out


def _index_hours(root: str) -> set[str]:
    return {
        h
        for loc, _ in storage.list_files(root, recursive=True)
        if (h := layout.hour_of_index_file(loc)) is not None
    }


def id_index_hours(place: SourcePlace) -> set[str]:
    """The hours the lake holds messages of (the message-id index has one folder per hour)."""
    return _index_hours(layout.index_root(place.lake_root, place.source_dir))


def identity_index_hours(place: SourcePlace) -> set[str]:
    """The hours that have an identity index (synced since the index exists): a folder per
    hour, and the ``hour`` column of files covering many hours (a compacted index)."""
    root = layout.identity_index_root(place.lake_root, place.source_dir)
    out = set()
    for loc, _ in storage.list_files(root, recursive=True):
        if not loc.endswith(".parquet") or not _visible(loc) or layout.is_identity_summary(loc):
            continue
        hour = layout.hour_of_index_file(loc)
        if hour is not None:
            out.add(hour)
            continue
        fs, path = storage.resolve(loc)
        if "hour" in pq.read_schema(path, filesystem=fs).names:
            out |= set(
                pq.read_table(path, columns=["hour"], filesystem=fs)
                .column("hour")
                .unique()
                .to_pylist()
            ) - {None}
    return out


def unindexed_hours(place: SourcePlace) -> list[str]:
    """Hours of the archive or the lake that the identity index does not describe whole: no
    index (synced before the index existed, or not synced yet), or an archive file written
    after the hour's index (a late file that landed after the hour's last sync, not indexed
    until the hour is synced again). A request scans them (``lookup.scan_hours``).

    A file that lands while a sync of its hour runs, after the sync listed the archive, is
    older than that sync's index and is only seen by a request once the hour is synced again
    (the archive sensor does that: the hour's fingerprint changed). A file copied in with an
    old modification time (``cp -p``, ``rsync -t``) passes for indexed: copy late files
    without keeping their times."""
    newest = archive_newest(place)
    indexed = indexed_before(place)
    late = {h for h, t in newest.items() if h in indexed and t >= indexed[h]}
    return sorted(((set(newest) | id_index_hours(place)) - identity_index_hours(place)) | late)
