"""The identity index of a sync's hours, on the driver: stage A's entries (``IDENTITY`` rows,
collected with its statistics) merged into one staged file per hour,
``<staging>/_identities/hour=<YYYYMMDDHH>/part-<hour>-<run>-....parquet``
(``lake/identities.INDEX_SCHEMA``), committed with the hour's tables by the same
swap as the id index (``outcome._plan_swaps``), so the index always describes the hour's
committed version. An hour without identities gets no staged file: the commit then swaps an
empty directory over the hour's old index, as it does for the id index.

Rows: a presence row per (identity hash, table) with its message count (``tracks`` is listed
too, for the identities of its track tables, so an erasure reads each table it names), and a
link row per linked pair (``table`` = ``LINK``, the smaller hash in ``identity``, the other in
``linked``, ``rows`` = the messages that link them). Like the id index, it is a superset of
the hour: a message dropped by the dedup is still counted.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from datalake_assets.lake import storage
from datalake_assets.lake.identities import (
    INDEX_SCHEMA,
    LINK,
    QUARANTINE,
    SUPPRESSED,
    lake_key,
    read_suppressed,
)
from datalake_assets.spec import layout
from datalake_assets.spec.naming import STANDARD_TABLES, TRACKS_TABLE
from datalake_assets.transform.identity_tally import read_entries
from datalake_assets.transform.run import SyncRun
from datalake_assets.transform.stage_a_stats import StageAStats

INDEX_ROW_GROUP_ROWS = 65_536
_NOT_TRACK_TABLES = pa.array(sorted(STANDARD_TABLES | {QUARANTINE, LINK, SUPPRESSED}), pa.string())


def load_privacy(run: SyncRun) -> None:
    """The lake's key and suppression list, read once per run on the driver (stage A's
    tasks get them in their config)."""
    t = time.monotonic()
    run.identity_key = lake_key(run.req.lake_root)
    run.suppressed = read_suppressed(run.req.lake_root)
    run.timings["privacy_s"] = time.monotonic() - t


def index_identities(run: SyncRun, stats: StageAStats) -> int:
    """Stage A's identity entries (``stats.identity_parts``) written as the staged index of
    each hour; returns the rows written."""
    t = time.monotonic()
    written = write_staged_index(
        run.staging, run.req.run_id, merge_rows(read_entries(stats.identity_parts))
    )
    run.timings["identities_s"] = time.monotonic() - t
    return written


def merge_rows(rows: pa.Table) -> pa.Table:
    """The tasks' rows ``(hour, identity, table, rows, linked)`` summed per key (an identity
    seen by two tasks of an hour is one row), plus each identity's ``tracks`` row."""
    if rows.num_rows == 0:
        return rows
    # group_by keys may not be null: links carry their other hash, presence rows "" meanwhile
    rows = rows.set_column(
        rows.column_names.index("linked"), "linked", pc.fill_null(rows.column("linked"), "")
    )
    keys = ["hour", "identity", "table", "linked"]
    summed = rows.group_by(keys).aggregate([("rows", "sum")]).rename_columns([*keys, "rows"])
    tracks = summed.filter(pc.invert(pc.is_in(summed.column("table"), _NOT_TRACK_TABLES)))
    if tracks.num_rows:
        per = tracks.group_by(["hour", "identity"]).aggregate([("rows", "sum")])
        n = per.num_rows
        summed = pa.concat_tables(
            [
                summed,
                pa.table(
                    {
                        "hour": per.column("hour"),
                        "identity": per.column("identity"),
                        "table": pa.array([TRACKS_TABLE] * n, pa.string()),
                        "linked": pa.array([""] * n, pa.string()),
                        "rows": per.column("rows_sum"),
                    }
                ).select(summed.column_names),
            ]
        )
    linked = pc.if_else(
        pc.equal(summed.column("linked"), ""), pa.scalar(None, pa.string()), summed.column("linked")
    )
    return summed.set_column(summed.column_names.index("linked"), "linked", linked)


def write_staged_index(staging: str, run_id: str, rows: pa.Table) -> int:
    """One ``INDEX_SCHEMA`` file per hour of ``rows``, sorted by identity (a request reads a
    few hashes of many hours: sorted row groups keep its reads small)."""
    if rows.num_rows == 0:
        return 0
    for hour in pc.unique(rows.column("hour")).to_pylist():
        part = rows.filter(pc.equal(rows.column("hour"), hour))
        part = part.sort_by(
            [("identity", "ascending"), ("table", "ascending"), ("linked", "ascending")]
        )
        h = layout.ArchiveHour.parse(hour)
        directory = layout.join(
            layout.staged_identity_root(staging), layout.index_partition_path(h)
        )
        location = layout.join(directory, layout.data_file_name(h, run_id, 0, 0))
        fs, path = storage.resolve(location)
        storage.create_dir(directory)
        table = pa.table(
            [part.column(f.name).cast(f.type) for f in INDEX_SCHEMA], schema=INDEX_SCHEMA
        )
        # row groups of 64k entries: a lookup of a few hashes in a busy hour reads one of them
        pq.write_table(
            table, path, filesystem=fs, compression="zstd", row_group_size=INDEX_ROW_GROUP_ROWS
        )
    return rows.num_rows
