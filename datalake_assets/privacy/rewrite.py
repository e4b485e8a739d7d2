"""Erase a person from one hour of one source: plan, commit, rewrite the archive, prove.

1. **Plan** (``plan_hour``; reads only, the lake is untouched): the hour's archive lines that
   match (``matching.py``) give the person's message ids (kept as keyed hashes). Every Parquet
   file of the hour, in every table (``tracks`` too), the quarantine, the message-id index
   (``_index``) and the identity index (``_identities``), is checked; each file holding a
   trace is rewritten into the run's staging area without those rows, with the file's own
   schema and compression. The hour's other files in those partitions are linked (or copied)
   next to them, so each staged directory is the partition's complete next version.
2. **Commit** (``commit_hour``): ``lake/commit.py``'s journal and swaps, exactly as a sync
   commits: a reader sees the old or the new partition, never a mix, and a kill after the
   journal is rolled forward by the next sync or request of the source.
3. **Archive** (``rewrite_archive``, after the commit): each archive file of the hour that
   holds a matching line is replaced (whole, atomically) with those lines emptied, so the
   other lines keep their numbers (``_rewrite_file``); a file left with no line is deleted. The archive goes last because its lines are where the person's
   message ids come from: a kill before it leaves them for the re-run to find.

A partition whose every row was the person's is swapped with an empty version (a directory
with the commit marker only), as a sync swaps an hour whose table lost all rows: the
partition stays registered in the catalog and reads as zero rows, the table keeps its schema.
"""

from __future__ import annotations

import os
import shutil
import zlib
from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from datalake_assets.lake import commit, faults, storage
from datalake_assets.lake.formats import TablesToCommit
from datalake_assets.lake.records import read_schema_record
from datalake_assets.privacy.hours import (
    IDENTITIES_PART,
    INDEX_PART,
    QUARANTINE_PART,
    HourFiles,
    SourcePlace,
    archive_lines,
    hour_files,
)
from datalake_assets.privacy.matching import Matcher
from datalake_assets.privacy.state import HourRecord
from datalake_assets.spec import layout
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets.spec.naming import QUARANTINE  # a request's rows removed from it

_GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class HourPlan:
    hour: str
    run_id: str
    record: HourRecord
    swaps: list[commit.Swap] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)  # the table format's commits (Iceberg)
    archive: list[str] = field(default_factory=list)  # archive files to rewrite

    @property
    def nothing_to_do(self) -> bool:
        return not self.swaps and not self.steps and not self.archive


# ---------------------------------------------------------------------------------- plan


def scan_archive(files: HourFiles, matcher: Matcher) -> tuple[Counter[str], set[str]]:
    """``(lines matched per archive file location, keyed hashes of their message ids)``."""
    lines: Counter[str] = Counter()
    mids: set[str] = set()
    for location, _ in files.archive:
        for raw in archive_lines(location):
            if not raw.strip():
                continue
            hit, mid = matcher.line(raw)
            if hit:
                lines[location] += 1
                if mid is not None:
                    mids.add(matcher.mid_hash(mid))
    return lines, mids


def _read(
    location: str, matcher: Matcher | None = None, hour: str | None = None
) -> tuple[pa.Table | None, str, pa.Schema]:
    """A Parquet file (with ``matcher``: only its message id and identity columns, None when
    it has none), its compression (kept when the file is rewritten) and its schema. ``hour``:
    only the hour's rows of a file that holds several (an Iceberg file of compacted data,
    with ``day`` and ``hr`` columns: ``lake/formats/iceberg_compact.py``)."""
    fs, path = storage.resolve(location)
    pf = pq.ParquetFile(fs.open_input_file(path))
    md = pf.metadata
    codec = (
        md.row_group(0).column(0).compression.lower()
        if md.num_row_groups and md.num_columns
        else "snappy"
    )
    codec = "none" if codec == "uncompressed" else codec
    names = pf.schema_arrow.names
    cols = (
        None if matcher is None else [c for c in names if c in matcher.columns or c == "message_id"]
    )
    if cols == []:
        return None, codec, pf.schema_arrow
    by_hour = hour is not None and "day" in names and "hr" in names
    table = pf.read(columns=None if cols is None else cols + ["day", "hr"] * by_hour)
    if by_hour:
        h = ArchiveHour.parse(hour)  # type: ignore[arg-type]
        table = table.filter(pc.and_(pc.equal(table["day"], h.day), pc.equal(table["hr"], h.hr)))
        table = table if cols is None else table.select(cols)
    return table, codec, pf.schema_arrow


def traces(
    kind: str, location: str, matcher: Matcher, mids: set[str], hour: str | None = None
) -> tuple[int, pa.Table | None, str]:
    """``(rows of the person, the file's other rows or None when it is not to be rewritten,
    its compression)`` of one Parquet file of an hour's partition ``kind`` (a table, or
    ``QUARANTINE_PART``, ``INDEX_PART``, ``IDENTITIES_PART``)."""
    is_table = not kind.startswith("#")
    table, codec, _ = _read(location, matcher if is_table else None, hour if is_table else None)
    if table is None or not table.num_rows:
        return 0, None, codec
    removed = pc.sum(_mask_of(kind, table, matcher, mids)).as_py() or 0
    if not removed:
        return 0, None, codec
    if is_table:  # the projection found rows: now the whole file
        table = _read(location, hour=hour)[0]
    return removed, table.filter(pc.invert(_mask_of(kind, table, matcher, mids))), codec


def _mask_of(kind: str, table: pa.Table, matcher: Matcher, mids: set[str]) -> pa.Array:
    if kind == QUARANTINE_PART:
        return matcher.quarantine_mask(table, mids)
    if kind == INDEX_PART:
        return matcher.mid_mask(table.column("message_id"), mids)
    if kind == IDENTITIES_PART:
        hashes = pa.array(sorted(matcher.hashes), pa.string())
        mask = pc.is_in(table.column("identity"), value_set=hashes)
        if "linked" in table.column_names:
            mask = pc.or_(
                mask, pc.fill_null(pc.is_in(table.column("linked"), value_set=hashes), False)
            )
        return pc.fill_null(mask, False)
    return matcher.row_mask(table, mids)


def table_mids(files: HourFiles, matcher: Matcher) -> set[str]:
    """Keyed hashes of the message ids of the hour's rows that match by identity column (the
    archive of the hour may be gone, or hold fewer lines than the lake)."""
    out: set[str] = set()
    for _, locations in files.tables.values():
        for location in locations:
            fs, path = storage.resolve(location)
            names = pq.read_schema(path, filesystem=fs).names
            cols = [c for c in names if c in matcher.columns or c == "message_id"]
            if "message_id" not in cols or len(cols) < 2:
                continue
            t = _read(location, matcher, files.hour)[0]
            hit = t.filter(matcher.row_mask(t, frozenset()))
            out |= {matcher.mid_hash(m) for m in hit.column("message_id").to_pylist() if m}
    return out


def plan_hour(
    place: SourcePlace, hour: str, matcher: Matcher, run_id: str, known_mids: set[str]
) -> HourPlan:
    """Stage the hour's next version (module doc, step 1). ``known_mids``: hashed message ids
    of the person in this hour that an earlier (killed) run of the request found."""
    files = hour_files(place, hour)
    lines, mids = scan_archive(files, matcher)
    mids |= known_mids | table_mids(files, matcher)
    record = HourRecord(
        archive={loc.rsplit("/", 1)[-1]: n for loc, n in lines.items()}, message_ids=sorted(mids)
    )
    plan = HourPlan(hour=files.hour, run_id=run_id, record=record, archive=sorted(lines))
    staging = layout.staging_dir(place.lake_root, place.source_dir, run_id)
    # the tables' next versions are staged as a sync stages them, for the table format
    staged_data = layout.join(staging, "data", place.source_dir)
    h = ArchiveHour.parse(hour)
    seq = 0
    tables: list[str] = []
    quarantine = ""  # the staged quarantine's root, once the hour's quarantine changed
    for kind, (directory, locations) in sorted(files.parts().items()):
        changed: dict[str, tuple[pa.Table, str] | None] = {}  # location -> rows kept
        for location in locations:
            removed, kept, codec = traces(kind, location, matcher, mids, files.hour)
            if not removed:
                continue
            # an index file keeps existing, empty: its folder says the hour is indexed
            keep_empty = kind in (INDEX_PART, IDENTITIES_PART)
            changed[location] = (
                (kept, codec) if kept is not None and (kept.num_rows or keep_empty) else None
            )
            if kind in (INDEX_PART, IDENTITIES_PART):
                record.index_entries += removed
            else:
                name = QUARANTINE if kind == QUARANTINE_PART else kind
                record.rows[name] = record.rows.get(name, 0) + removed
        if not changed:
            continue
        # tables and the quarantine: staged as a sync stages them, committed by the format
        is_table = not kind.startswith("#")
        if is_table:
            staged = layout.join(
                layout.segment_type_dir(staged_data, kind),
                layout.date_partition_path(place.date_layout, h),
            )
        elif kind == QUARANTINE_PART:
            staged = layout.join(
                layout.staged_quarantine_root(staging), layout.hour_partition_path(h)
            )
        else:
            staged = layout.join(staging, directory[len(place.lake_root) :])
        _make_dir(staged)
        if kind == INDEX_PART:  # the hour's ledgers of archive files stay with its id index
            locations = locations + _ledgers(directory)  # (transform/open_hour.py)
        for location in locations:
            if location not in changed:
                _link(location, layout.join(staged, location.rsplit("/", 1)[-1]))
                continue
            record.files += 1
            if changed[location] is None:
                continue  # every row was the person's: the file is not carried over
            kept, codec = changed[location]  # type: ignore[misc]
            seq += 1
            out = layout.join(staged, layout.data_file_name(h, run_id, seq, 0))
            fs, path = storage.resolve(out)
            pq.write_table(kept, path, filesystem=fs, compression=codec)
        if is_table:
            tables.append(kind)
        elif kind == QUARANTINE_PART:
            quarantine = layout.staged_quarantine_root(staging)
        else:
            plan.swaps.append(commit.Swap(staged=staged, target=directory, hours=(files.hour,)))
    if tables or quarantine:  # their hour replaced by its staged version, as the format commits
        columns = read_schema_record(place.lake_root, place.source_dir)
        swaps, steps = place.tables_format.plan(
            TablesToCommit(
                src=place.src,
                run_id=run_id,
                staged_data_root=staged_data,
                hours=(files.hour,),
                tables={t: tuple(tuple(c) for c in columns.get(t, ())) for t in tables},
                quarantine_staged=quarantine,
            )
        )
        plan.swaps, plan.steps = swaps + plan.swaps, steps
    record.files += len(plan.archive)
    return plan


def _ledgers(directory: str) -> list[str]:
    return [loc for loc, _ in storage.list_files(directory) if layout.is_hour_files(loc)]


def _make_dir(location: str) -> None:
    fs, path = storage.resolve(location)
    fs.create_dir(path, recursive=True)


def _link(src: str, dst: str) -> None:
    """An unchanged file of the hour into the staged partition: a hard link locally (no
    copy), a server-side copy on S3."""
    if storage.is_uri(src):
        fs, s = storage.resolve(src)
        fs.copy_file(s, storage.resolve(dst)[1])
        return
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


# -------------------------------------------------------------------------------- commit


def commit_hour(place: SourcePlace, plan: HourPlan) -> None:
    """Swap the staged partitions in (journal first: a kill is rolled forward)."""
    if plan.swaps or plan.steps:
        faults.checkpoint("forget_staged")
        commit.commit(
            place.lake_root,
            place.source_dir,
            plan.run_id,
            plan.swaps,
            plan.steps,
            place.tables_format.apply,
        )
    storage.delete_dir(layout.staging_dir(place.lake_root, place.source_dir, plan.run_id))
    faults.checkpoint("forget_committed")


# ------------------------------------------------------------------------------- archive


def rewrite_archive(plan: HourPlan, matcher: Matcher) -> int:
    """Replace each planned archive file without the person's lines; returns lines removed."""
    removed = 0
    for i, location in enumerate(plan.archive):
        removed += _rewrite_file(location, matcher)
        if i == 0:
            faults.checkpoint("forget_archive")
    return removed


def _rewrite_file(location: str, matcher: Matcher) -> int:
    """The file again, each of the person's lines replaced by an empty line: the sync skips
    blank lines, so every other line keeps its line number (what the quarantine records
    point at) and a replay of the file makes exactly the lake the erasure left. A file left
    with no other line is deleted."""
    fs, path = storage.resolve(location)
    with fs.open_input_stream(path, compression=None) as f:
        gz = f.read(2) == _GZIP_MAGIC
    staged = storage.StagedFile(location)
    deflate = zlib.compressobj(6, zlib.DEFLATED, 31) if gz else None  # gzip in, gzip out
    removed = kept = 0
    try:
        for raw in archive_lines(location):
            if raw.strip() and matcher.line(raw)[0]:
                removed += 1
                raw = b""
            elif raw.strip():
                kept += 1
            data = raw + b"\n"
            staged.write(deflate.compress(data) if deflate else data)
        if deflate:
            staged.write(deflate.flush())
        if not removed:  # nothing of the person (an earlier run rewrote it): leave it be
            staged.abort()
            return 0
        if not kept:
            staged.abort()
            storage.delete_file(location)
            return removed
        staged.commit()
    except BaseException:
        staged.abort()
        raise
    return removed


# --------------------------------------------------------------------------------- proof


def prove_hour(place: SourcePlace, hour: str, matcher: Matcher, mids: set[str]) -> Counter[str]:
    """What remains of the person in the hour, re-read from storage: archive lines, table
    rows, quarantine records, index entries (all zero after an erasure)."""
    files = hour_files(place, hour, stored=True)
    left: Counter[str] = Counter()
    lines, _ = scan_archive(files, matcher)
    left["archive_lines"] += sum(lines.values())
    for kind, (_, locations) in files.parts().items():
        name = {
            QUARANTINE_PART: "quarantine",
            INDEX_PART: "index_entries",
            IDENTITIES_PART: "index_entries",
        }.get(kind, "table_rows")
        for location in locations:
            left[name] += traces(kind, location, matcher, mids, files.hour)[0]
    return left


# ------------------------------------------------------------------- many-hour index files


def many_hour_index_files(place: SourcePlace) -> list[str]:
    """Identity-index files that cover many hours (a compacted index: no ``hour=`` folder)."""
    root = layout.identity_index_root(place.lake_root, place.source_dir)
    return [
        loc
        for loc, _ in storage.list_files(root, recursive=True)
        if loc.endswith(".parquet")
        and layout.hour_of_index_file(loc) is None
        and not loc.rsplit("/", 1)[-1].startswith((".", "_"))
        and not layout.is_identity_summary(loc)
    ]  # rebuilt by summary.compact


def erase_many_hour_index(
    place: SourcePlace, matcher: Matcher, prove: bool = False
) -> tuple[int, int]:
    """``(entries, files)`` of the requested hashes in many-hour index files, each file
    replaced whole (atomically) without them; with ``prove``, only counted."""
    entries = files = 0
    for location in many_hour_index_files(place):
        removed, kept, codec = traces(IDENTITIES_PART, location, matcher, set())
        if not removed:
            continue
        entries, files = entries + removed, files + 1
        if prove or kept is None:
            continue
        sink = pa.BufferOutputStream()
        pq.write_table(kept, sink, compression=codec)
        storage.write_bytes_atomic(location, sink.getvalue().to_pybytes())
    return entries, files
