"""The identity summary: a source's identity index compacted per month and sorted by hash, so
that a request finds a person's hours by reading a few row groups, not a footer per hour.

**Why.** The sync writes the identity index per hour (``lake/identities.py``): a lookup that
opened every hour's index would pay 8,760 Parquet footers for a year of one source. The
summary holds the same facts in twelve files a year (``docs/reference/performance.md`` has the figures).

**Layout.** ``<lake>/_identities/<source>/_summary/month=YYYY-MM/summary.parquet``. The ``_``
keeps it out of the ``hour=`` folders that the sync swaps and that lookups glob. Columns:

* ``identity``: an identity hash, from any row of the hour's index (presence rows, quarantine
  rows and link rows alike);
* ``hour``: the compact hour ``YYYYMMDDHH`` whose index had it;
* ``linked``: null for presence rows. A link row of the index (X linked to Y) is stored both
  ways, ``(X, hour, Y)`` and ``(Y, hour, X)``, so a lookup of either hash finds the link.

Rows are distinct and sorted by ``identity``, in row groups sized so that a month's footer
plus one row group is smallest (``row_group_rows``: about 2,000 rows for a month of 200,000).
Parquet keeps each row group's min and max ``identity`` in the footer, and hashes are
uniform. A lookup therefore reads, per month, the footer and at most one row group per
requested hash: a few tens of KB, however many hours the month has.

**Manifest.** The footer's key-value metadata (``MANIFEST_KEY``) records, for every hour
compacted, the per-hour index files its rows came from: name, size and modification time.
The summary and its manifest are one file, written whole, so a reader never sees one without
the other.

**Freshness: a lookup never misses an hour.** A sync that replaces an hour writes new index
files (new names: the run id is in them). An erasure that rewrites an hour's index in place
changes its size and time; under a new name it cannot be mistaken at all.
``find_hours_compacted`` lists the per-hour index, as every lookup must, and compares each
hour's files with the manifest:

* an hour whose files match its manifest entry is answered from the summary;
* every other hour is *stale*: re-synced or rewritten since the compaction, new since, or left
  out of it. Stale hours are answered from their per-hour files, and summary rows of stale
  hours are ignored.

So the result is exactly what reading every per-hour index file would give, at the cost of
the summary plus the hours changed since the last compaction. If an hour's files vanish
between the listing and the read (a sync replacing them), that hour is listed and read again.

**Compaction** (``compact``) brings a month's summary up to date. It reads the month's old
summary, keeps the rows of its unchanged hours, reads the per-hour files of the changed and
new hours, and writes the result atomically (``storage.write_bytes_atomic``: a staged file
renamed locally, a single PUT on S3). A month whose hours are unchanged is not rewritten, and
a month with no index left is deleted. An hour that vanishes while it is being read is left
out of the manifest, so lookups read it from its per-hour files until the next compaction.
Compaction takes no lock: a concurrent sync or erasure only makes some hours stale.
Every byte read goes through a counting file (``index_files.Reads``), so ``bytes_read`` is
what was taken from storage; listings are counted apart.
"""

from __future__ import annotations

import base64
import bisect
import math
import re
import time
import zlib
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from datalake_assets.lake import storage
from datalake_assets.privacy.index_files import (
    FileKey,
    HourFiles,
    Reads,
    hour_dir,
    list_hour,
    list_index_hours,
    open_parquet,
)
from datalake_assets.spec import layout

SUMMARY_FILE = "summary.parquet"
MANIFEST_KEY = b"datalake.identity_summary"
FORMAT_VERSION = 1
# A lookup of one hash reads a month's footer (about FOOTER_BYTES_PER_GROUP per row group)
# and one row group (about BYTES_PER_ROW per row, zstd). With R rows in groups of r, that is
# F*R/r + B*r bytes, least at r = sqrt(F*R/B): ~2,000 rows for a month of 200,000 rows.
FOOTER_BYTES_PER_GROUP = 300  # measured: three column chunks' metadata, identity min/max
BYTES_PER_ROW = 14  # measured: a 32-hex hash ~10 bytes zstd, hour and linked dictionaries
MIN_GROUP_ROWS, MAX_GROUP_ROWS = 256, 1 << 16
READ_ATTEMPTS = 3  # re-listings of an hour whose files vanish while it is read
SUMMARY_SCHEMA = pa.schema(
    [
        pa.field("identity", pa.string(), nullable=False),
        pa.field("hour", pa.string(), nullable=False),
        pa.field("linked", pa.string()),
    ]
)
_MONTH_RE = re.compile(r"^\d{4}-\d{2}$")


def summary_root(lake_root: str, source_dir: str) -> str:
    return layout.identity_summary_root(lake_root, source_dir)


def summary_location(lake_root: str, source_dir: str, month: str) -> str:  # month: YYYY-MM
    return layout.join(summary_root(lake_root, source_dir), f"month={month}", SUMMARY_FILE)


def month_of(hour: str) -> str:
    return f"{hour[:4]}-{hour[4:6]}"


def summary_months(lake_root: str, source_dir: str) -> list[str]:
    """The months (``YYYY-MM``) the source has a summary of."""
    return sorted(_list_summaries(lake_root, source_dir))


def _list_summaries(lake_root: str, source_dir: str) -> dict[str, str]:
    """month -> location of every summary of the source."""
    out = {}
    for location, _ in storage.list_files(summary_root(lake_root, source_dir), recursive=True):
        m = re.search(r"/month=(\d{4}-\d{2})/" + re.escape(SUMMARY_FILE) + "$", location)
        if m:
            out[m.group(1)] = location
    return out


def _read_hour(
    lake_root: str,
    source_dir: str,
    hour: str,
    files: tuple[FileKey, ...],
    reads: Reads,
    wanted: list[str] | None = None,
) -> pa.Table:
    """The summary rows of one hour, from its per-hour index files; with ``wanted`` (sorted
    hashes), only the row groups whose ``identity`` or ``linked`` range may hold one."""
    directory = hour_dir(lake_root, source_dir, hour)
    parts = []
    for name, _, _ in files:
        pf = open_parquet(layout.join(directory, name), reads)
        if wanted is None:
            parts.append(pf.read(columns=["identity", "linked"]))
            continue
        cols = [pf.metadata.schema.names.index(c) for c in ("identity", "linked")]
        groups = [
            i
            for i in range(pf.metadata.num_row_groups)
            if any(_may_hold(pf.metadata.row_group(i), c, wanted) for c in cols)
        ]
        reads.row_groups += len(groups)
        if groups:
            parts.append(pf.read_row_groups(groups, columns=["identity", "linked"]))
    if not parts:
        return SUMMARY_SCHEMA.empty_table()
    t = pa.concat_tables(parts)
    links = t.filter(pc.is_valid(t["linked"]))

    def column(*parts: pa.ChunkedArray) -> pa.Array:
        return pa.concat_arrays([p.combine_chunks().cast(pa.string()) for p in parts])

    # Every row's identity is present in the hour; a link is kept both ways (docstring).
    identities = column(t["identity"], links["identity"], links["linked"])
    linked = column(
        pa.chunked_array([pa.nulls(t.num_rows, pa.string())]), links["linked"], links["identity"]
    )
    return pa.table(
        [identities, pa.repeat(pa.scalar(hour, pa.string()), len(identities)), linked],
        schema=SUMMARY_SCHEMA,
    )


def _read_hour_retrying(
    lake_root: str,
    source_dir: str,
    hour: str,
    files: tuple[FileKey, ...],
    reads: Reads,
    wanted: list[str] | None = None,
) -> pa.Table:
    """``_read_hour``; when a file vanished (a sync replaced the hour after the listing), the
    hour is listed again and read again."""
    for _ in range(READ_ATTEMPTS):
        try:
            return _read_hour(lake_root, source_dir, hour, files, reads, wanted)
        except FileNotFoundError:
            files = list_hour(lake_root, source_dir, hour)
    raise RuntimeError(
        f"hour {hour} of source {source_dir}'s identity index changed "
        f"{READ_ATTEMPTS} times while it was read; run the request again"
    )


def _encode_manifest(manifest: HourFiles) -> bytes:
    body = {
        "v": FORMAT_VERSION,
        "hours": {h: [list(f) for f in files] for h, files in sorted(manifest.items())},
    }
    return base64.b64encode(zlib.compress(orjson.dumps(body), 9))


def _decode_manifest(metadata: dict[bytes, bytes] | None) -> HourFiles | None:
    """The manifest, or None when the file has none or another version's (then the month
    counts as not compacted: its hours are read per hour, the next compaction rewrites it)."""
    try:
        body = orjson.loads(zlib.decompress(base64.b64decode((metadata or {})[MANIFEST_KEY])))
        if body.get("v") != FORMAT_VERSION:
            return None
        return {
            h: tuple((str(n), int(s), int(t)) for n, s, t in files)
            for h, files in body["hours"].items()
        }
    except (ValueError, TypeError, KeyError, zlib.error):
        return None


# ------------------------------------------------------------------------------- compaction


@dataclass
class CompactStats:
    """What one ``compact`` did. ``hours_read``: hours whose per-hour files were read (new or
    changed since the last compaction); ``hours_vanished``: hours re-synced while they were
    read, left stale."""

    months_written: int = 0
    months_unchanged: int = 0
    months_removed: int = 0
    hours: int = 0
    hours_read: int = 0
    hours_vanished: int = 0
    rows_written: int = 0
    bytes_read: int = 0
    files_read: int = 0
    bytes_written: int = 0
    seconds: float = 0.0
    months: list[str] = field(default_factory=list)  # the months written or removed

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def compact(
    lake_root: str, source_dir: str, months: Iterable[str] | None = None, *, force: bool = False
) -> CompactStats:
    """Bring the source's summaries up to date: every month (``months=None``) or the months
    listed (``YYYY-MM``). ``force`` re-reads every hour of those months."""
    started = time.monotonic()
    stats, reads = CompactStats(), Reads()
    current, _ = list_index_hours(lake_root, source_dir)
    by_month: dict[str, HourFiles] = {}
    for hour, files in current.items():
        by_month.setdefault(month_of(hour), {})[hour] = files
    existing = _list_summaries(lake_root, source_dir)
    if months is None:
        targets = set(by_month) | set(existing)
    else:
        targets = set(months)
        bad = [m for m in targets if not isinstance(m, str) or not _MONTH_RE.match(m)]
        if bad:
            raise ValueError(f"months must be YYYY-MM, got {sorted(map(str, bad))[:3]}")
    for month in sorted(targets):
        hours_now = by_month.get(month, {})
        location = summary_location(lake_root, source_dir, month)
        if not hours_now:
            if month in existing and storage.delete_file(location):
                stats.months_removed += 1
                stats.months.append(month)
            continue
        stats.hours += len(hours_now)
        # The footer says whether the month changed; its rows are read only if it did.
        old, old_manifest = _open_summary(location, reads) if month in existing else (None, {})
        changed = sorted(
            h for h, files in hours_now.items() if force or old_manifest.get(h) != files
        )
        if not changed and set(old_manifest) == set(hours_now):
            stats.months_unchanged += 1
            continue
        kept = [h for h in hours_now if h not in changed]
        parts = []
        if kept and old is not None:
            rows = _rows_of(old, kept)
            if rows is None:  # the body is damaged: every hour is read again
                changed, kept = sorted(hours_now), []
            else:
                parts.append(rows)
        manifest = {h: hours_now[h] for h in kept}
        for hour in changed:
            try:
                parts.append(_read_hour(lake_root, source_dir, hour, hours_now[hour], reads))
            except FileNotFoundError:  # replaced meanwhile: lookups read it per hour
                stats.hours_vanished += 1
                continue
            manifest[hour] = hours_now[hour]
            stats.hours_read += 1
        data, rows = _summary_bytes(parts, manifest)
        storage.write_bytes_atomic(location, data)
        stats.months_written += 1
        stats.months.append(month)
        stats.rows_written += rows
        stats.bytes_written += len(data)
    stats.bytes_read, stats.files_read = reads.bytes, reads.files
    stats.seconds = round(time.monotonic() - started, 3)
    return stats


def _open_summary(location: str, reads: Reads) -> tuple[pq.ParquetFile | None, HourFiles]:
    """A month's summary, its footer read, and its manifest; a missing, damaged or foreign
    summary counts as none (its hours are then read per hour, and compaction rewrites it)."""
    try:
        pf = open_parquet(location, reads)
    except (OSError, ValueError, pa.ArrowException):
        return None, {}
    manifest = _decode_manifest(pf.metadata.metadata)
    return (pf, manifest) if manifest is not None else (None, {})


def _rows_of(pf: pq.ParquetFile, hours: list[str]) -> pa.Table | None:
    """The summary's rows of ``hours``; None if they cannot be read."""
    try:
        rows = pf.read(columns=SUMMARY_SCHEMA.names).cast(SUMMARY_SCHEMA)
    except (OSError, ValueError, pa.ArrowException):
        return None
    return rows.filter(pc.is_in(rows["hour"], pa.array(hours, pa.string())))


def row_group_rows(rows: int) -> int:
    best = math.isqrt(rows * FOOTER_BYTES_PER_GROUP // BYTES_PER_ROW)
    return max(MIN_GROUP_ROWS, min(MAX_GROUP_ROWS, best))


def _summary_bytes(parts: list[pa.Table], manifest: HourFiles) -> tuple[bytes, int]:
    """The summary file of ``parts`` (rows, deduplicated and sorted here) and its row count."""
    rows = pa.concat_tables(parts) if parts else SUMMARY_SCHEMA.empty_table()
    names = SUMMARY_SCHEMA.names
    rows = rows.group_by(names, use_threads=False).aggregate([]).select(names)
    rows = rows.sort_by([(n, "ascending") for n in names]).cast(SUMMARY_SCHEMA)
    out = pa.BufferOutputStream()
    with pq.ParquetWriter(
        out,
        SUMMARY_SCHEMA,
        compression="zstd",
        write_statistics=["identity"],  # the only statistics a lookup uses: a smaller footer
        use_dictionary=["hour", "linked"],
        store_schema=False,
        sorting_columns=[pq.SortingColumn(i) for i in range(len(names))],
    ) as writer:
        writer.write_table(rows, row_group_size=row_group_rows(rows.num_rows))
        writer.add_key_value_metadata({MANIFEST_KEY: _encode_manifest(manifest)})
    return out.getvalue().to_pybytes(), rows.num_rows


def _may_hold(row_group: pq.RowGroupMetaData, column: int, wanted: list[str]) -> bool:
    stats = row_group.column(column).statistics
    if stats is not None and not stats.has_min_max and stats.null_count == row_group.num_rows:
        return False  # only nulls (``linked`` of presence rows)
    if stats is None or not stats.has_min_max:
        return True
    i = bisect.bisect_left(wanted, stats.min)
    return i < len(wanted) and wanted[i] <= stats.max
