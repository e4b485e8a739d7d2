"""The driver-local path of a small sync: stages A and B as plain calls in the driver.

A batch of a few hundred kilobytes of archive pays seconds for Spark itself (a job per phase,
the start of the Python workers, a shuffle for the dedup) and well under a second for its
work. Below ``SyncRequest.local_max_bytes`` of archive (compressed, as listed) the sync runs
the same functions over the same inputs in its own process instead (``sync.py`` picks the
path; ``bench/README.md`` has the measurements behind the default):

* stage A (``run_stage_a``): one call per archive file, as Spark runs one task per file;
* the dedup: the same rule as ``dedup.find_duplicates`` (per message id, the first by
  ``received_at`` ascending with nulls last, then ``file_idx``, then ``line_no`` wins; the
  others are duplicates), with Arrow kernels; plus the ids of the lookback window's id index;
* stage B (``run_stage_b``): one call per task of ``plan_stage_b_tasks``;
* the check of the output for repeated ids, read back with pyarrow.

Like a Spark task (``local[N,4]``), a call that fails is run again, up to ``TASK_ATTEMPTS``
times: its files have deterministic names and a failed attempt's output is discarded. The
result, the lake and the report are those of the Spark path; the report's timings keep their
names (``parse_s``, ``dedup_s``, ``write_s``, ``check_s``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from datalake_assets.lake import faults, storage
from datalake_assets.spec import layout
from datalake_assets.transform.dedup import Duplicates, index_files
from datalake_assets.transform.identity_tally import IDENTITY
from datalake_assets.transform.manifest import ManifestEntry
from datalake_assets.transform.request import SyncError, SyncRequest
from datalake_assets.transform.run import SyncRun
from datalake_assets.transform.stage_a import (
    ROW,
    STATS,
    StageAConfig,
    StageAStats,
    merge_stats,
    run_stage_a,
)
from datalake_assets.transform.stage_b import StageBConfig, run_stage_b

TASK_ATTEMPTS = 4  # = the local session's spark.task.maxFailures (session._with_task_retries)
_KEY_COLUMNS = ["table", "hour", "message_id", "received_at", "file_idx", "line_no"]
_T = TypeVar("_T")


def is_small(req: SyncRequest, files: list[tuple[str, str, int]]) -> bool:
    """Whether the batch's archive files (``[(location, hour, size)]``) take the local path."""
    return sum(size for _, _, size in files) < req.local_max_bytes


def _task(what: str, fn: Callable[[], _T]) -> _T:
    """``fn()``, attempted up to ``TASK_ATTEMPTS`` times; the last failure fails the sync
    with nothing committed, as a failed Spark task does (``sync.run_sync``)."""
    for attempt in range(1, TASK_ATTEMPTS + 1):
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - as Spark: any task failure is retried
            if attempt == TASK_ATTEMPTS:
                code = "storage" if isinstance(e, (OSError, storage.ShortRead)) else "internal"
                raise SyncError(f"a task ({what}) failed {TASK_ATTEMPTS} times, nothing "
                                f"committed: {type(e).__name__}: {str(e)[:1000]}", code) from e
    raise AssertionError("unreachable")


# ------------------------------------------------------------------------------ stage A


def read(run: SyncRun, cfg: StageAConfig,
         files: list[tuple[str, str, int]]) -> tuple[StageAStats, pa.Table]:
    """Stage A over ``files``, one call per file: the merged statistics (with the identity
    index entries) and the key rows (``_KEY_COLUMNS``)."""
    t = time.monotonic()
    stats, identity, keys = [], [], []
    for i, (location, hour, _) in enumerate(files):
        task_in = pa.RecordBatch.from_arrays(
            [pa.array([i], pa.int32()), pa.array([location]), pa.array([hour])],
            names=["file_idx", "location", "hour"])
        out = _task(f"stage A of {location}",
                    lambda b=task_in: list(run_stage_a(iter([b]), cfg)))
        for batch in out:
            kind = batch.column(0)
            if pc.all(pc.equal(kind, ROW)).as_py():
                keys.append(pa.Table.from_batches([batch]).select(_KEY_COLUMNS))
                continue
            for k, payload in zip(kind.to_pylist(), batch.column("payload").to_pylist()):
                (stats if k == STATS else identity if k == IDENTITY else []).append(payload)
    merged = merge_stats(stats)
    merged.identity_parts = identity
    key_rows = pa.concat_tables(keys) if keys else pa.table(
        {"table": pa.array([], pa.string()), "hour": pa.array([], pa.string()),
         "message_id": pa.array([], pa.string()), "received_at": pa.array([], pa.int64()),
         "file_idx": pa.array([], pa.int32()), "line_no": pa.array([], pa.int64())})
    run.timings["parse_s"] = time.monotonic() - t
    faults.checkpoint("parsed")
    return merged, key_rows


# -------------------------------------------------------------------------------- dedup


def prior_ids(prior_files: list[str], batch_ids: pa.Array) -> pa.Array:
    """The distinct ids of ``batch_ids`` that the id index files ``prior_files`` hold.

    The one place the local path reads the lookback window's index (an adapter: the dedup's
    own driver-side lookup replaces its body when it exists)."""
    found = []
    for location in prior_files:
        fs, path = storage.resolve(location)
        ids = pq.read_table(path, columns=["message_id"], filesystem=fs).column(0)
        ids = ids.combine_chunks().cast(pa.string())
        found.append(ids.filter(pc.is_in(ids, value_set=batch_ids, skip_nulls=True)))
    return pc.unique(pa.concat_arrays(found)) if found else pa.array([], pa.string())


def dedup(run: SyncRun, keys: pa.Table, hours: list[str]) -> Duplicates:
    """``dedup.find_duplicates`` on the driver, with Arrow kernels."""
    t = time.monotonic()
    req = run.req
    prior_files = index_files(req.lake_root, req.source_dir, req.dedup_lookback_hours, hours)
    found = find_duplicates(keys, prior_files)
    run.timings["dedup_s"] = time.monotonic() - t
    return found


def find_duplicates(keys: pa.Table, prior_files: list[str]) -> Duplicates:
    """Per message id the first by ``received_at`` (nulls last), ``file_idx``, ``line_no``
    wins; the others are duplicates, and so is the winner when the window's index holds its
    id (a cross-hour duplicate)."""
    out = Duplicates(prior_files=prior_files)
    n = keys.num_rows
    if n == 0:
        return out
    # nulls last: each nullable key is preceded by its is-null flag (whatever the pyarrow)
    ranked = pa.table({"id_null": pc.is_null(keys.column("message_id")),
                       "id": keys.column("message_id"),
                       "at_null": pc.is_null(keys.column("received_at")),
                       "at": keys.column("received_at"), "file_idx": keys.column("file_idx"),
                       "line_no": keys.column("line_no")})
    order = pc.sort_indices(ranked, sort_keys=[(c, "ascending") for c in ranked.column_names])
    rows = keys.take(order)
    ids = rows.column("message_id").combine_chunks()
    prev = pa.concat_arrays([pa.nulls(1, pa.string()), ids.slice(0, n - 1)])
    both_null = pc.and_(pc.is_null(ids), pc.is_null(prev))
    both_null = pc.and_(both_null, pa.array([False] + [True] * (n - 1)))  # row 0 is a first
    first = pc.invert(pc.or_(pc.fill_null(pc.equal(ids, prev), False), both_null))
    if prior_files:
        seen = pc.is_in(ids, value_set=prior_ids(prior_files, pc.unique(ids)), skip_nulls=True)
    else:
        seen = pa.array([False] * n)
    losers = pc.or_(pc.invert(first), seen)
    lost = rows.filter(losers)
    cross = pc.and_(first, seen).filter(losers).to_pylist()
    for table, hour, file_idx, line_no, cross_hour in zip(
            lost.column("table").to_pylist(), lost.column("hour").to_pylist(),
            lost.column("file_idx").to_pylist(), lost.column("line_no").to_pylist(), cross):
        out.counts[(table, hour)] += 1
        if cross_hour:
            out.cross_hour[(table, hour)] += 1
        out.drop[(table, file_idx)].append(line_no)
    return out


# ------------------------------------------------------------------------------ stage B


def write(run: SyncRun, cfg: StageBConfig,
          tasks: list[tuple[int, str, str]]) -> list[ManifestEntry]:
    """Stage B, one call per task; the manifest of what was written."""
    t = time.monotonic()
    manifest: list[ManifestEntry] = []
    for task, table, items in tasks:
        task_in = pa.RecordBatch.from_arrays(
            [pa.array([task], pa.int32()), pa.array([table]), pa.array([items])],
            names=["task", "table", "items"])
        rows = _task(f"stage B of {table}", lambda b=task_in: [
            r for out in run_stage_b(iter([b]), cfg) for r in out.to_pylist()])
        manifest.extend(ManifestEntry.from_row(r) for r in rows)
    run.timings["write_s"] = time.monotonic() - t
    return manifest


def repeated_message_ids(staged_data: str, tables: list[str],
                         prior_files: list[str]) -> dict[str, int]:
    """``dedup.repeated_message_ids`` on the driver: per table, the message ids written more
    than once or also held by another hour of the window (counted under the smallest name of
    the tables holding the id, as the Spark check's ``min``)."""
    tables = sorted(tables)
    ids, owner = [], []
    for i, t in enumerate(tables):
        for location, _ in storage.list_files(layout.segment_type_dir(staged_data, t),
                                              recursive=True):
            if location.endswith(".parquet"):
                fs, path = storage.resolve(location)
                col = pq.read_table(path, columns=["message_id"], filesystem=fs).column(0)
                ids.append(col.combine_chunks().cast(pa.string()))
                owner.append(pa.array([i] * len(ids[-1]), pa.int32()))
    if not ids:
        return {}
    per_id = pa.table({"id": pa.concat_arrays(ids), "t": pa.concat_arrays(owner)}).group_by(
        "id").aggregate([("t", "count"), ("t", "min")])
    bad = pc.greater(per_id["t_count"], 1)
    if prior_files:
        held = prior_ids(prior_files, per_id["id"].combine_chunks())
        bad = pc.or_(bad, pc.is_in(per_id["id"], value_set=held, skip_nulls=True))
    out: dict[str, int] = {}
    for t in per_id.filter(bad)["t_min"].to_pylist():
        out[tables[t]] = out.get(tables[t], 0) + 1
    return out
