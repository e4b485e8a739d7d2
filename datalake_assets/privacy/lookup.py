"""Which hours hold a person: from the identity index, never from the tables.

``find_hours`` reads, in each index file of the source, only the ``identity`` column, and only
the row groups whose min/max statistics can hold one of the hashes (a compacted index sorted
by identity is pruned to a few row groups; an hourly file is one small read). A file may
carry an ``hour`` column (a compacted index covering many hours); otherwise its folder
(``hour=<YYYYMMDDHH>``) names its hour. ``bytes_read`` counts every byte read from storage,
footers included.

Hours without an identity index (synced before it existed, or not synced yet) are not in the
index: ``scan_hours`` reads them, their archive lines or, when the archive of the hour is gone,
the identity columns of their table files.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from datalake_assets.lake import storage
from datalake_assets.lake.identities import LINK
from datalake_assets.privacy.hours import HourFiles, SourcePlace, archive_lines, hour_files
from datalake_assets.privacy.index_files import CountingFile, Reads
from datalake_assets.privacy.matching import Matcher, _decode
from datalake_assets.privacy.summary_lookup import find_hours_compacted
from datalake_assets.spec import layout
from datalake_assets.spec.identity import LINKING_TYPES


@dataclass(frozen=True)
class LookupResult:
    hours: frozenset[str]  # compact YYYYMMDDHH
    bytes_read: int
    files_read: int


WHOLE_FILE_BYTES = 64 << 10  # pyarrow reads a file's last 64 KiB first anyway


def index_files(lake_root: str, source_dir: str) -> list[tuple[str, int]]:
    """``[(location, size)]`` of the source's identity-index files."""
    root = layout.identity_index_root(lake_root, source_dir)
    return [
        (loc, size)
        for loc, size in storage.list_files(root, recursive=True)
        if loc.endswith(".parquet")
        and not loc.rsplit("/", 1)[-1].startswith((".", "_"))
        and not layout.is_identity_summary(loc)
    ]


def _may_hold(stats, wanted_sorted: list[str]) -> bool:
    """Whether a row group whose ``identity`` statistics are ``stats`` may hold a wanted hash."""
    if stats is None or not stats.has_min_max:
        return True
    i = bisect.bisect_left(wanted_sorted, stats.min)  # the first wanted hash >= min
    return i < len(wanted_sorted) and wanted_sorted[i] <= stats.max


@dataclass
class _Read:
    bytes: int = 0
    files: int = 0
    tables: list[tuple[str | None, pa.Table]] = field(default_factory=list)  # (hour, rows)


def _read_index(
    lake_root: str,
    source_dir: str,
    columns: list[str],
    prune: Iterable[str] | None,
    only_hours: Iterable[str] | None = None,
) -> _Read:
    """``columns`` of every index file (plus ``hour`` where a file has one); with ``prune``,
    only the row groups whose identity range may hold one of those hashes; with
    ``only_hours``, only the per-hour files of those hours (and every many-hour file)."""
    out = _Read()
    wanted = sorted(prune) if prune is not None else None
    keep = set(only_hours) if only_hours is not None else None
    for location, size in index_files(lake_root, source_dir):
        hour = layout.hour_of_index_file(location)
        if keep is not None and hour is not None and hour not in keep:
            continue
        # a small file in one read; a larger one by ranges, only what is needed (counted)
        counted = None
        if size <= WHOLE_FILE_BYTES:
            source = pa.BufferReader(storage.read_bytes(location))
        else:
            fs, path = storage.resolve(location)
            counted = Reads()
            source = CountingFile(fs.open_input_file(path), counted)
        try:
            pf = pq.ParquetFile(source)
            names = pf.schema_arrow.names
            cols = columns + (["hour"] if "hour" in names else [])
            ident = names.index("identity")
            groups = [
                i
                for i in range(pf.metadata.num_row_groups)
                if wanted is None
                or _may_hold(pf.metadata.row_group(i).column(ident).statistics, wanted)
            ]
            table = pf.read_row_groups(groups, columns=cols) if groups else None
        finally:
            source.close()
        out.bytes += counted.bytes if counted is not None else size
        out.files += 1
        if table is not None and table.num_rows:
            out.tables.append((hour, table))
    return out


def _hours_of(hour: str | None, table: pa.Table) -> set[str]:
    if "hour" in table.column_names:
        return {h for h in pc.unique(table.column("hour")).to_pylist() if h}
    return {hour} if hour else set()


def find_hours(lake_root: str, source_dir: str, hashes: frozenset[str]) -> LookupResult:
    """The hours of the source whose identity index lists one of ``hashes``: the per-hour
    files through the monthly summaries (``summary.find_hours_compacted``: a summary answers
    for the hours unchanged since it was written, the others are read per hour), plus any
    other file covering many hours."""
    if not hashes:
        return LookupResult(frozenset(), 0, 0)
    compacted = find_hours_compacted(lake_root, source_dir, hashes)
    read = _read_index(lake_root, source_dir, ["identity"], hashes, only_hours=())
    read.bytes += compacted.bytes_read
    read.files += compacted.files_read
    value_set = pa.array(sorted(hashes), pa.string())
    hours: set[str] = set(compacted.hours)
    for hour, table in read.tables:
        hit = table.filter(pc.is_in(table.column("identity"), value_set=value_set))
        if hit.num_rows:
            hours |= _hours_of(hour, hit)
    return LookupResult(frozenset(hours), read.bytes, read.files)


def follow_links(
    lake_root: str, source_dir: str, hashes: frozenset[str], depth: int
) -> frozenset[str]:
    """``hashes`` and every identity linked to them, ``depth`` steps away at most.

    Links come from the index's link rows (``table = LINK``): the sync writes one for each
    pair of identities that one ``identify`` or ``alias`` call carries (the userId, the
    anonymousId, the previousId and the listed traits of the call: ``spec.identity.links_of``).
    Other calls link nothing, so a shared device's anonymousId does not chain strangers
    together. A step adds the identities on the other side of a link row of an identity found
    so far (either column); ``depth`` 0 adds nothing, 1 the identities seen together with the
    requested ones, 2 theirs, and so on (``[privacy] link_depth``, default 2). Only indexed
    hours are read: ``scan_hours`` finds the links of hours without an index.

    Both identities of a link are present in the link's hour, so a step reads the link rows
    of the hours that hold the frontier only (``find_hours`` first); a file covering many
    hours (an ``hour`` column) is read whole.
    """
    found = set(hashes)
    frontier = set(hashes)
    for _ in range(depth):
        if not frontier:
            break
        hours = find_hours(lake_root, source_dir, frozenset(frontier)).hours
        read = _read_index(
            lake_root, source_dir, ["identity", "table", "linked"], None, only_hours=hours
        )
        new: set[str] = set()
        value_set = pa.array(sorted(frontier), pa.string())
        for _, table in read.tables:
            links = table.filter(pc.equal(table.column("table"), LINK))
            if not links.num_rows:
                continue
            a = pc.fill_null(pc.is_in(links.column("identity"), value_set=value_set), False)
            b = pc.fill_null(pc.is_in(links.column("linked"), value_set=value_set), False)
            new |= set(links.filter(a).column("linked").to_pylist())
            new |= set(links.filter(b).column("identity").to_pylist())
        new.discard(None)
        frontier = new - found
        found |= frontier
    return frozenset(found)


# ------------------------------------------------------------------------- unindexed hours


@dataclass
class ScanResult:
    hours: set[str] = field(default_factory=set)  # hours holding a matched line or row
    links: set[tuple[str, str]] = field(default_factory=set)  # hashed pairs (identify/alias)
    bytes_read: int = 0
    files_read: int = 0


def scan_hours(
    place: SourcePlace, hours: Iterable[str], matcher: Matcher, want_links: bool = False
) -> ScanResult:
    """Find the person in hours that have no identity index: the archive lines of each hour
    (decoded and matched as ``matching`` says), or, for an hour whose archive is gone, the
    identity columns of its table files and its quarantine. ``want_links``: also collect the
    hashed link pairs of its ``identify``/``alias`` lines (every line is then read)."""
    out = ScanResult()
    for hour in hours:
        files = hour_files(place, hour)
        found = (
            _scan_archive(files.archive, matcher, want_links, out)
            if files.archive
            else _scan_lake(files, matcher, out)
        )
        if found:
            out.hours.add(hour)
    return out


def _scan_archive(
    archive: list[tuple[str, int]], matcher: Matcher, want_links: bool, out: ScanResult
) -> bool:
    found = False
    for location, size in archive:
        out.files_read += 1
        out.bytes_read += size
        for raw in archive_lines(location):
            if not raw.strip():
                continue
            if want_links:
                obj = _decode(raw)
                if type(obj) is dict and obj.get("type") in LINKING_TYPES:
                    out.links |= matcher.links(obj)
            if not found and matcher.line(raw)[0]:
                found = True
                if not want_links:
                    return True
    return found


def _scan_lake(files: HourFiles, matcher: Matcher, out: ScanResult) -> bool:
    """An hour whose archive is gone (a retention rule): its tables' identity columns and its
    quarantine, the only columns read."""
    for _, locations in files.tables.values():
        for location in locations:
            fs, path = storage.resolve(location)
            cols = [c for c in pq.read_schema(path, filesystem=fs).names if c in matcher.columns]
            out.files_read += 1
            if not cols:
                continue
            table = pq.read_table(path, columns=cols, filesystem=fs)
            out.bytes_read += table.nbytes
            if pc.any(matcher.row_mask(table, frozenset())).as_py():
                return True
    for location in files.quarantine[1]:
        fs, path = storage.resolve(location)
        table = pq.read_table(path, filesystem=fs)
        out.files_read += 1
        out.bytes_read += table.nbytes
        if pc.any(matcher.quarantine_mask(table, frozenset())).as_py():
            return True
    return False
