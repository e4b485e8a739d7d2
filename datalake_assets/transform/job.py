"""The sync: one Spark job per source and batch of archive hours (never one per table).

Run it outside Dagster with plain arguments::

    spark-submit datalake_assets/transform/job.py --lake-root /data/lake \\
        --archive-root /data/archive --source-id demo --hours 2026-11-21T09 2026-11-21T10

or ``python -m datalake_assets.transform.job ...`` (starts a local session). It prints the sync
report as JSON on stdout and writes it to ``<lake>/reports/day=/source=/run_id=/report.json``.

Passes over the data (see ``stages.py``):

1. Stage A, one task per archive file: each line is read once, parsed, validated and
   flattened; messages are written per table as columnar work files, kinds counted per
   column; rejected lines go to the staged quarantine. Only small key rows reach the JVM.
2. Driver: merges stage A's per-column statistics into column types (``schema.py``) against
   the lake's schema record.
3. JVM: duplicates are found on ``(messageId, receivedAt, position)`` only (a small shuffle);
   the losers' positions go to stage B, which skips them.
4. Stage B, one task per group of one table's work files: casts every column with Arrow
   kernels, writes each table's Parquet per hour into staging; returns a manifest.
5. Driver: checks ``lines_in = rows + duplicates + quarantined``, commits (``commit.py``),
   updates the schema record, writes the report.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import orjson

from datalake_assets.catalog.base import CatalogError
from datalake_assets.catalog.config import CatalogConfig, catalog_from_config
from datalake_assets.catalog.register import read_schemas, register_sync
from datalake_assets.catalog.reports import register_reports, write_report_table
from datalake_assets.spec import layout
from datalake_assets.spec.naming import TRACKS_TABLE
from datalake_assets.spec.schema import TableChange, plan_table
from datalake_assets.spec.types import TYPES, widen
from datalake_assets.lake import commit, faults, storage
from datalake_assets.lake.lock import LockLost, LockTimeout, SourceLock
from datalake_assets.lake.records import read_schema_record, write_schema_record
from datalake_assets.transform.stages import (
    MANIFEST_SCHEMA,
    ROW,
    STAGE_A_SCHEMA,
    STAGE_B_TASK_SCHEMA,
    STANDARD_TABLES,
    STATS,
    StageAConfig,
    StageBConfig,
    merge_stats,
    plan_stage_b_tasks,
    run_stage_a,
    run_stage_b,
)

QUARANTINE_TABLE = "quarantine"


class SyncError(RuntimeError):
    """A sync that failed; ``code`` is one of Segment's categories."""

    def __init__(self, message: str, code: str = "internal") -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class SyncRequest:
    lake_root: str
    archive_root: str
    source_id: str
    hours: tuple[str, ...]  # "YYYY-MM-DDTHH" (UTC)
    source_dir: str = ""  # lake folder of the source (id or slug); default: source_id
    database: str = ""
    date_layout: str = layout.DEFAULT_DATE_LAYOUT
    run_id: str = ""
    max_message_bytes: int = 32 * 1024
    max_depth: int = 16
    replay: bool = False
    table_prefix: str = ""  # catalog table names: <prefix><table>
    dedup_lookback_hours: int = 7 * 24  # messageId unique across this window (id index)
    lock_wait_seconds: float = 600.0  # wait this long for another sync of the source to end
    catalog: CatalogConfig = field(default_factory=lambda: CatalogConfig(backend="none"))

    def resolved(self) -> "SyncRequest":
        run_id = self.run_id or datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]
        return replace(
            self,
            source_dir=self.source_dir or self.source_id,
            database=self.database or self.source_id,
            run_id=run_id,
            hours=tuple(str(layout.ArchiveHour.parse(h)) for h in self.hours),
        )

    def to_args(self) -> list[str]:
        args = [
            "--lake-root", self.lake_root, "--archive-root", self.archive_root,
            "--source-id", self.source_id, "--source-dir", self.source_dir or self.source_id,
            "--database", self.database or self.source_id, "--date-layout", self.date_layout,
            "--max-message-bytes", str(self.max_message_bytes), "--max-depth", str(self.max_depth),
            "--dedup-lookback-hours", str(self.dedup_lookback_hours),
            "--lock-wait-seconds", str(self.lock_wait_seconds),
            *self.catalog.to_args(),
        ]
        if self.table_prefix:
            args += ["--table-prefix", self.table_prefix]
        if self.run_id:
            args += ["--run-id", self.run_id]
        if self.replay:
            args.append("--replay")
        return args + ["--hours", *self.hours]


def parse_args(argv: list[str]) -> SyncRequest:
    p = argparse.ArgumentParser(prog="datalake-sync", description=__doc__.split("\n\n")[0])
    p.add_argument("--lake-root", required=True)
    p.add_argument("--archive-root", required=True)
    p.add_argument("--source-id", required=True)
    p.add_argument("--source-dir", default="")
    p.add_argument("--database", default="")
    p.add_argument("--date-layout", default=layout.DEFAULT_DATE_LAYOUT, choices=sorted(layout.DATE_LAYOUTS))
    p.add_argument("--run-id", default="")
    p.add_argument("--max-message-bytes", type=int, default=32 * 1024)
    p.add_argument("--max-depth", type=int, default=16)
    p.add_argument("--replay", action="store_true")
    p.add_argument("--table-prefix", default="")
    p.add_argument("--dedup-lookback-hours", type=int, default=7 * 24)
    p.add_argument("--lock-wait-seconds", type=float, default=600.0)
    p.add_argument("--hours", nargs="+", required=True, help="UTC hours, YYYY-MM-DDTHH")
    CatalogConfig.add_arguments(p)
    a = p.parse_args(argv)
    return SyncRequest(
        lake_root=a.lake_root, archive_root=a.archive_root, source_id=a.source_id,
        source_dir=a.source_dir, database=a.database, date_layout=a.date_layout, run_id=a.run_id,
        max_message_bytes=a.max_message_bytes, max_depth=a.max_depth, replay=a.replay,
        hours=tuple(a.hours), table_prefix=a.table_prefix,
        dedup_lookback_hours=a.dedup_lookback_hours, catalog=CatalogConfig.from_args(a),
        lock_wait_seconds=a.lock_wait_seconds,
    )


# ------------------------------------------------------------------------------------ sync


@dataclass
class SyncResult:
    report: list[dict]  # one object per table, then one for the source
    source: dict = field(default_factory=dict)

    @property
    def tables(self) -> dict[str, dict]:
        return {r["table_name"]: r for r in self.report if r["type"] == "event"}


def _hour_compact(h: layout.ArchiveHour) -> str:
    return h.compact


def _hour_from_compact(c: str) -> layout.ArchiveHour:
    return layout.ArchiveHour.parse(f"{c[:4]}-{c[4:6]}-{c[6:8]}T{c[8:10]}")


def list_archive_files(req: SyncRequest) -> list[tuple[str, str, int]]:
    """``[(location, hour compact, size)]`` of the requested hours' archive files."""
    out = []
    for h in sorted(layout.ArchiveHour.parse(x) for x in req.hours):
        directory = layout.archive_hour_dir(req.archive_root, req.source_id, h)
        for location, size in storage.list_files(directory):
            if layout.is_archive_file(location):
                out.append((location, h.compact, size))
    return out


def run_sync(spark, request: SyncRequest) -> SyncResult:
    """Sync the request's hours; returns the report (also written under ``<lake>/reports``).

    Holds the source's lock (``lock.py``) throughout: a second sync of the source waits for
    this one, then runs against its committed result.
    """
    req = request.resolved()
    try:
        with SourceLock(req.lake_root, req.source_dir, req.run_id,
                        wait_s=req.lock_wait_seconds) as held:
            return _run_sync_locked(spark, req, held)
    except LockTimeout as e:
        raise SyncError(str(e), "locked") from e
    except LockLost as e:
        raise SyncError(str(e), "locked") from e
    except Exception as e:
        cause = _task_failure(e)
        if cause is None:
            raise
        raise SyncError(f"a Spark task failed, nothing committed: {cause}",
                        "storage" if "ShortRead" in cause or "OSError" in cause else "internal") from e


_PY_ERROR_LINE = re.compile(r"^\s*((?:[\w.]+\.)?\w*(?:Error|ShortRead|Exception)): (.+)$", re.M)


def _task_failure(e: Exception) -> str | None:
    """The Python error that failed a Spark task, from the JVM's wrapping of it."""
    if type(e).__name__ not in ("Py4JJavaError", "PythonException"):
        return None
    text = str(e)
    if "Traceback" not in text:
        return None
    lines = [m for m in _PY_ERROR_LINE.finditer(text) if "py4j" not in m.group(1).lower()
             and "org.apache" not in m.group(1)]
    return f"{lines[-1].group(1).rsplit('.', 1)[-1]}: {lines[-1].group(2)[:1000]}" if lines else None


def _run_sync_locked(spark, req: SyncRequest, held: SourceLock) -> SyncResult:  # noqa: C901
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    started = datetime.now(UTC)
    t0 = time.monotonic()
    timings: dict[str, float] = {"lock_wait_s": held.waited_s}
    recovered = commit.recover(req.lake_root, req.source_dir)
    storage.delete_dir(layout.join(req.lake_root, "_staging", req.source_dir))

    files = list_archive_files(req)
    existing = read_schema_record(req.lake_root, req.source_dir)
    base = {
        "run_id": req.run_id, "source_id": req.source_id, "database": req.database,
        "start_time": started.isoformat(), "replay": req.replay,
        "replay_from": req.hours[0] if req.replay else None,
        "replay_to": req.hours[-1] if req.replay else None,
        "emr_cluster_id": os.environ.get("EMR_CLUSTER_ID"),
        "s3_bucket": req.lake_root.split("://", 1)[1].split("/", 1)[0] if "://" in req.lake_root else None,
    }
    hours_with_files = sorted({h for _, h, _ in files})
    if not files:
        return _finish(req, base, t0, [], {
            "lines_in": 0, "messages_written": 0, "duplicates": 0, "lines_quarantined": 0,
            "values_quarantined": 0, "hours_synced": [], "warning": "no_archive_files",
            "recovered_commits": recovered, "bytes_in": 0, "files_in": 0,
        })

    catalog = catalog_from_config(req.catalog, spark)
    sc = spark.sparkContext
    staging = layout.join(req.lake_root, "_staging", req.source_dir, req.run_id)
    file_rows = [(i, loc, hour) for i, (loc, hour, _) in enumerate(files)]
    # Exactly one archive file per stage-A task (gzip is not splittable; hash partitioning
    # would put two files in one task and leave another idle).
    files_df = spark.createDataFrame(
        sc.parallelize(file_rows, len(file_rows)), "file_idx int, location string, hour string"
    )
    a_cfg = StageAConfig(
        max_message_bytes=req.max_message_bytes, max_depth=req.max_depth,
        source_id=req.source_id, run_id=req.run_id,
        work_root=layout.join(staging, "work"),
        quarantine_root=layout.join(staging, "quarantine"),
        archive_files=tuple(loc for loc, _, _ in files),
        archive_sizes=tuple(size for _, _, size in files),
    )

    def stage_a(batches):
        return run_stage_a(batches, a_cfg)

    # Stage A writes work files as a side effect: its output (small key rows) is persisted so
    # that it runs once; the first action below computes every partition.
    keys = files_df.mapInArrow(stage_a, STAGE_A_SCHEMA).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        t = time.monotonic()
        sc.setJobDescription(f"sync {req.source_id} {req.hours[0]}..{req.hours[-1]}: parse")
        stats_rows = keys.filter(F.col("kind") == STATS).select("payload").collect()
        stats = merge_stats([bytes(r.payload) for r in stats_rows])
        timings["parse_s"] = time.monotonic() - t
        faults.checkpoint("parsed")

        # The catalog may know a column wider than the lake's record (widened by another
        # writer or by hand): the sync never writes a type narrower than the catalog's.
        for table, cols in _catalog_schemas(catalog, req, stats.counts).items():
            existing[table] = _widest(existing.get(table, []), cols)
        changes: dict[str, TableChange] = {
            table: plan_table(table, existing.get(table), cols)
            for table, cols in stats.counts.items()
        }

        t = time.monotonic()
        sc.setJobDescription(f"sync {req.source_id}: find duplicates")
        order = Window.partitionBy("message_id").orderBy(
            F.col("received_at").asc_nulls_last(), "file_idx", "line_no"
        )
        ranked = (
            keys.filter(F.col("kind") == ROW)
            .select("message_id", "received_at", "file_idx", "line_no", "table", "hour")
            .withColumn("_n", F.row_number().over(order))
        )
        # Across hours: ids the lake already holds for other hours of the lookback window
        # (the id index, never the tables) are duplicates; the message stays where it was.
        prior_files = _index_files(req, hours_with_files)
        if prior_files:
            # The window's index is big, the batch small: the batch's ids are broadcast and the
            # index is scanned once, without shuffling it; only the ids found come back.
            batch_ids = keys.filter(F.col("kind") == ROW).select("message_id").distinct()
            prior = (_ids_in_index(spark, prior_files, batch_ids).withColumn("_seen", F.lit(True)))
            ranked = ranked.join(prior, "message_id", "left")
        else:
            ranked = ranked.withColumn("_seen", F.lit(None).cast("boolean"))
        losers = (
            ranked.filter((F.col("_n") > 1) | F.col("_seen").isNotNull())
            .select("table", "hour", "file_idx", "line_no",
                    (F.col("_n") == 1).alias("cross_hour"))
            .collect()
        )
        timings["dedup_s"] = time.monotonic() - t
    finally:
        keys.unpersist()
    duplicates: Counter[tuple[str, str]] = Counter()
    cross_hour: Counter[tuple[str, str]] = Counter()
    drop: defaultdict[tuple[str, int], list[int]] = defaultdict(list)
    for r in losers:
        duplicates[(r["table"], r["hour"])] += 1
        if r["cross_hour"]:
            cross_hour[(r["table"], r["hour"])] += 1
        drop[(r["table"], r["file_idx"])].append(r["line_no"])
    del losers

    b_cfg = StageBConfig(
        source_id=req.source_id, run_id=req.run_id,
        staging_root=layout.join(staging, "data"),
        quarantine_staging_root=layout.join(staging, "quarantine"),
        date_layout=req.date_layout,
        tables={t: tuple(c.columns) for t, c in changes.items()},
        index_staging_root=layout.join(staging, "_index"),
    )
    tasks = plan_stage_b_tasks(stats.work_files, drop)
    manifest: list[dict] = []
    if tasks:

        def stage_b(batches):
            return run_stage_b(batches, b_cfg)

        t = time.monotonic()
        sc.setJobDescription(f"sync {req.source_id}: write tables")
        try:
            tasks_df = spark.createDataFrame(sc.parallelize(tasks, len(tasks)), STAGE_B_TASK_SCHEMA)
            manifest = [r.asDict() for r in tasks_df.mapInArrow(stage_b, MANIFEST_SCHEMA).collect()]
        finally:
            sc.setJobDescription(None)
        timings["write_s"] = time.monotonic() - t
        t = time.monotonic()
        repeated_ids = _repeated_message_ids(
            spark, layout.join(staging, "data"), [t for t in changes if t != TRACKS_TABLE],
            prior_files,
        )
        timings["check_s"] = time.monotonic() - t
    else:
        repeated_ids = {}
    storage.delete_dir(layout.join(staging, "work"))

    # ------------------------------------------------------------------ reconcile, commit
    lines_in = stats.lines_in
    rows: Counter[tuple[str, str]] = Counter()
    files_out: defaultdict[tuple[str, str], list[dict]] = defaultdict(list)
    values_q: Counter[str] = Counter()
    lines_q = sum(stats.lines_quarantined.values())
    misfits_by_column: defaultdict[str, Counter[str]] = defaultdict(Counter)
    conformance: defaultdict[str, list[dict]] = defaultdict(list)
    quarantine_hours: set[str] = {h for h, _, _, _ in stats.quarantine_files}
    for m in manifest:
        if m["entry"] == "file":
            rows[(m["table"], m["hour"])] += m["rows"]
            values_q[m["table"]] += m["values_quarantined"]
            if m["location"]:
                files_out[(m["table"], m["hour"])].append(m)
        elif m["entry"] == "quarantine":
            quarantine_hours.add(m["hour"])
        elif m["entry"] == "misfits":
            misfits_by_column[m["table"]][m["location"]] += m["rows"]
        elif m["entry"] == "conformance":
            for f in orjson.loads(m["location"]):
                conformance[m["table"]].append({**f, "hour": str(_hour_from_compact(m["hour"]))})
    messages_written = sum(n for (t, _), n in rows.items() if t != TRACKS_TABLE)
    track_rows = sum(n for (t, _), n in rows.items() if t not in STANDARD_TABLES and t != TRACKS_TABLE)
    tracks_rows = sum(n for (t, _), n in rows.items() if t == TRACKS_TABLE)
    repeated_ids[TRACKS_TABLE] = abs(tracks_rows - track_rows) + sum(
        n for t, n in repeated_ids.items() if t not in STANDARD_TABLES and t != TRACKS_TABLE)
    dup_total = sum(duplicates.values())
    if lines_in != messages_written + dup_total + lines_q:
        storage.delete_dir(staging)
        raise SyncError(
            f"reconciliation failed, nothing committed: lines_in={lines_in} != rows={messages_written}"
            f" + duplicates={dup_total} + quarantined={lines_q}"
        )

    try:  # before anything is committed: a missing permission fails with nothing changed
        catalog.ensure_database(req.database, "Segment data lake tables (datalake-assets)")
    except CatalogError as e:
        storage.delete_dir(staging)
        raise SyncError(f"catalog: {e}; nothing committed", e.code) from e
    swaps = _plan_swaps(req, staging, existing, files_out, quarantine_hours, hours_with_files)
    faults.checkpoint("staged")
    held.check()  # an S3 lease lost during a long pause: fail here, before the lake changes
    commit.commit(req.lake_root, req.source_dir, req.run_id, swaps)
    faults.checkpoint("committed")
    storage.delete_dir(staging)

    tables_after = dict(existing)
    for t, c in changes.items():
        tables_after[t] = c.columns
    write_schema_record(req.lake_root, req.source_dir, tables_after)
    try:
        registered = register_sync(
            catalog, database=req.database, table_prefix=req.table_prefix,
            lake_root=req.lake_root, source_dir=req.source_dir, date_layout=req.date_layout,
            tables={t: c.columns for t, c in changes.items()},
            partitions={t: [h for (tt, h), n in rows.items() if tt == t and n] for t in changes},
            quarantine_hours=sorted(quarantine_hours),
            count_partitions=True,  # Glue: one paginated listing per table written
        )
    except CatalogError as e:
        raise SyncError(
            f"data committed, but the catalog registration failed: {e}. Re-run the sync to "
            "register it (every step is idempotent)", e.code,
        ) from e
    faults.checkpoint("registered")

    table_reports = []
    for t in sorted(changes):
        c = changes[t]
        hours_t = sorted({h for (tt, h) in rows if tt == t and rows[(tt, h)]})
        table_reports.append({
            "type": "event", "table_name": t, **base,
            "partitions": [{"day": _hour_from_compact(h).day, "hr": _hour_from_compact(h).hr} for h in hours_t],
            "new_columns": [{"name": n, "type": ty} for n, ty in c.new_columns],
            "widened_columns": [{"name": n, "from": a, "to": b} for n, a, b in c.widened],
            "columns": [{"name": n, "type": ty} for n, ty in c.columns],
            "row_count": sum(n for (tt, _), n in rows.items() if tt == t),
            "duplicates": sum(n for (tt, _), n in duplicates.items() if tt == t),
            "cross_hour_duplicates": sum(n for (tt, _), n in cross_hour.items() if tt == t),
            "values_quarantined": values_q.get(t, 0),
            "files": sum(len(v) for (tt, _), v in files_out.items() if tt == t),
            "bytes": sum(m["bytes"] for (tt, _), v in files_out.items() if tt == t for m in v),
            "is_new": c.is_new,
            "catalog": _catalog_entry(registered.get(t)),
            "checks": {
                # message ids written more than once in this sync's output (re-read from it)
                "repeated_message_ids": repeated_ids.get(t, 0),
                "misfits_by_column": dict(sorted(misfits_by_column[t].items())),
                "conformance_failures": conformance[t],
            },
        })
    source = {
        "lines_in": lines_in, "messages_written": messages_written, "duplicates": dup_total,
        "lines_quarantined": lines_q, "values_quarantined": sum(values_q.values()),
        "cross_hour_duplicates": sum(cross_hour.values()),
        "dedup_lookback_hours": req.dedup_lookback_hours,
        "index_ids_written": sum(m["rows"] for m in manifest if m["entry"] == "index"),
        "hours_synced": [str(_hour_from_compact(h)) for h in hours_with_files],
        "recovered_commits": recovered, "files_in": len(files),
        "bytes_in": sum(s for _, _, s in files),
        "timings": {k: round(v, 3) for k, v in timings.items()},
    }
    return _finish(req, base, t0, table_reports, source, catalog)


def _index_files(req: SyncRequest, batch_hours: list[str]) -> list[str]:
    """Index files of the hours within ``dedup_lookback_hours`` of the batch (before its first
    hour or after its last), the batch's own hours excluded."""
    if req.dedup_lookback_hours <= 0 or not batch_hours:
        return []
    first = _hour_from_compact(min(batch_hours)).start
    last = _hour_from_compact(max(batch_hours)).start
    span = timedelta(hours=req.dedup_lookback_hours)
    lo = layout.ArchiveHour.of(first - span).compact
    hi = layout.ArchiveHour.of(last + span).compact
    own = set(batch_hours)
    out = []
    for location, _ in storage.list_files(layout.index_root(req.lake_root, req.source_dir), recursive=True):
        m = re.search(r"/hour=(\d{10})/[^/]+\.parquet$", location)
        if m and lo <= m.group(1) <= hi and m.group(1) not in own:
            out.append(location)
    return out


def _catalog_schemas(catalog, req: SyncRequest, tables) -> dict[str, list[tuple[str, str]]]:
    try:
        return read_schemas(catalog, req.database, req.table_prefix, list(tables))
    except CatalogError as e:  # read before anything is written
        raise SyncError(f"catalog: {e}; nothing committed", e.code) from e


def _widest(record: list[tuple[str, str]], catalog: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The record's columns in order, each at the wider of its two types, then the catalog's
    other columns."""
    theirs = {n: t for n, t in catalog if t in TYPES}
    out = [(n, widen(t, theirs[n]) if n in theirs else t) for n, t in record]
    known = {n for n, _ in record}
    return out + [(n, t) for n, t in catalog if n not in known and t in TYPES]


def _catalog_entry(info: dict | None) -> dict | None:
    if not info:
        return None
    return {k: info.get(k) for k in ("catalog_table", "database", "partitions", "partitions_added",
                                     "is_new", "location")}


def _ids_in_index(spark, index_files: list[str], ids):
    """The distinct ``message_id`` of ``ids`` that the index files hold (a broadcast semi-join:
    the index is read once and never shuffled)."""
    from pyspark.sql import functions as F

    index = spark.read.parquet(*index_files).select("message_id")
    return index.join(F.broadcast(ids), "message_id", "left_semi").distinct()


def _repeated_message_ids(spark, staged_data: str, tables: list[str],
                          prior_files: list[str]) -> dict[str, int]:
    """Per table: how many message ids were written more than once (in one table or in two),
    or also live in another hour of the lookback window (per the lake's id index). It reads
    the written Parquet back (the ``message_id`` column only), so it checks what was written,
    not what the dedup intended. ``tracks`` is made of the track tables' rows: it is checked
    through them (and its row count against theirs, by the caller)."""
    from pyspark.sql import functions as F

    dirs = [layout.join(staged_data, f"segment_type={t}") for t in tables]
    dirs = [d for d in dirs if storage.list_files(d, recursive=True)]
    if not dirs:
        return {}
    if not prior_files:
        local = _repeated_in_output(staged_data, tables)
        if local is not None:
            return local
    ids = (
        spark.read.option("basePath", staged_data).schema("message_id string").parquet(*dirs)
        .select(F.regexp_extract(F.input_file_name(), r"/segment_type=([^/]+)/", 1).alias("t"),
                "message_id")
    )
    counted = ids.groupBy("message_id").agg(F.count("*").alias("n"), F.min("t").alias("t"))
    bad = F.col("n") > 1
    if prior_files:
        seen = _ids_in_index(spark, prior_files, ids.select("message_id").distinct()).withColumn(
            "_seen", F.lit(1))
        counted = counted.join(seen, "message_id", "left")
        bad = bad | F.col("_seen").isNotNull()
    rows = counted.filter(bad).groupBy("t").count().collect()
    return {r["t"]: r["count"] for r in rows}


_DRIVER_CHECK_MAX_ROWS = 20_000_000


def _repeated_in_output(staged_data: str, tables: list[str]) -> dict[str, int] | None:
    """``_repeated_message_ids`` without a lookback window, on the driver with Arrow: reads
    the ``message_id`` column of the written files. ``None`` when the output is too big for
    the driver (the caller then uses Spark)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    files = [(i, loc) for i, t in enumerate(tables)
             for loc, _ in storage.list_files(layout.join(staged_data, f"segment_type={t}"), recursive=True)
             if loc.endswith(".parquet")]
    rows = 0
    for _, loc in files:
        fs, path = storage.resolve(loc)
        with fs.open_input_file(path) as f:
            rows += pq.ParquetFile(f).metadata.num_rows
    if rows > _DRIVER_CHECK_MAX_ROWS:
        return None
    ids, owner = [], []
    for i, loc in files:
        fs, path = storage.resolve(loc)
        col = pq.read_table(path, columns=["message_id"], filesystem=fs).column(0).combine_chunks()
        ids.append(col)
        owner.append(pa.array([i] * len(col), pa.int32()))
    if not ids:
        return {}
    table = pa.table({"id": pa.concat_arrays(ids), "t": pa.concat_arrays(owner)})
    per_id = table.group_by("id").aggregate([("t", "count"), ("t", "min")])
    repeated = per_id.filter(pc.greater(per_id["t_count"], 1))
    out: dict[str, int] = {}
    for t in repeated["t_min"].to_pylist():
        out[tables[t]] = out.get(tables[t], 0) + 1
    return out


def _plan_swaps(
    req: SyncRequest,
    staging: str,
    existing: dict[str, list[tuple[str, str]]],
    files_out: dict[tuple[str, str], list[dict]],
    quarantine_hours: set[str],
    hours: list[str],
) -> list[commit.Swap]:
    """One swap per partition directory touched: written tables, tables that lost all rows of
    a synced hour (swapped with an empty version), and each hour's quarantine."""
    by_dir: dict[tuple[str, str], set[str]] = defaultdict(set)
    tables = {t for t, _ in files_out} | set(existing)
    for t in tables:
        for h in hours:
            part = layout.date_partition_path(req.date_layout, _hour_from_compact(h))
            by_dir[(f"data/{req.source_dir}/segment_type={t}", part)].add(h)
    for h in hours:
        ah = _hour_from_compact(h)
        by_dir[(f"quarantine/{req.source_dir}", f"day={ah.day}/hr={ah.hr}")].add(h)
        by_dir[(f"_index/{req.source_dir}", f"hour={h}")].add(h)
    swaps = []
    for (prefix, part), hs in sorted(by_dir.items()):
        target = layout.join(req.lake_root, prefix, part)
        kind, rest = prefix.split("/", 1)
        staged = layout.join(staging, kind, *rest.split("/")[1:], part)
        has_new = storage.exists(staged)
        if not has_new:
            # Only swap an empty version in where the live partition has data of these hours.
            live = [loc for loc, _ in storage.list_files(target)]
            if not any(layout.hour_of_data_file(loc) in hs for loc in live):
                continue
            if not storage.is_uri(staged):
                os.makedirs(staged, exist_ok=True)
        swaps.append(commit.Swap(staged=staged, target=target, hours=tuple(sorted(hs))))
    return swaps


def _finish(req: SyncRequest, base: dict, t0: float, tables: list[dict], source: dict,
            catalog=None) -> SyncResult:
    finished = datetime.now(UTC)
    duration = round((time.monotonic() - t0) / 60, 4)
    for r in tables:
        r.update(finish_time=finished.isoformat(), duration_mins=duration, status="finished",
                 error=None, error_code=None)
    src = {
        "type": "source", "table_name": None, **base, **source,
        "finish_time": finished.isoformat(), "duration_mins": duration, "status": "finished",
        "error": None, "error_code": None,
        "partitions": [{"day": layout.ArchiveHour.parse(h).day, "hr": layout.ArchiveHour.parse(h).hr}
                       for h in source.get("hours_synced", [])],
        "tables": len(tables),
    }
    report = tables + [src]
    day = finished.strftime("%Y-%m-%d")  # = src["finish_time"][:10]: see report_location
    write_report(req.lake_root, req.source_id, req.run_id, report, day)
    try:  # the reports table: a row per table and one per source, queryable by SQL
        write_report_table(req.lake_root, req.source_id, req.run_id, report, day)
        if catalog is not None:
            register_reports(catalog, req.catalog.reports_database, req.lake_root, req.source_id, day)
    except (CatalogError, OSError) as e:  # the sync itself is committed: say so, don't fail
        src["warning"] = f"sync report table not updated: {e}"
    return SyncResult(report=report, source=src)


def write_report(lake_root: str, source_id: str, run_id: str, report: list[dict],
                 day: str | None = None) -> str:
    """Writes the report as JSON lines (one object per table, then the source's); ``day``
    (``YYYY-MM-DD``, default today UTC) is the ``day=`` folder: the sync's finish day."""
    day = day or datetime.now(UTC).strftime("%Y-%m-%d")
    location = layout.report_path(lake_root, source_id, run_id, day)
    body = b"".join(orjson.dumps(r) + b"\n" for r in report)
    storage.write_bytes_atomic(location, body)
    return location


def report_location(lake_root: str, source_id: str, run_id: str, source_row: dict) -> str:
    """Where ``write_report`` put a sync's report, from its source row (its finish day)."""
    return layout.report_path(lake_root, source_id, run_id, source_row["finish_time"][:10])


def parse_report(body: bytes) -> SyncResult:
    """A ``report.json`` (as ``write_report`` writes it) back as the ``SyncResult``."""
    rows = [orjson.loads(line) for line in body.splitlines() if line.strip()]
    sources = [r for r in rows if r.get("type") == "source"]
    if len(sources) != 1:
        raise ValueError(f"a sync report has one source row, this one has {len(sources)}")
    return SyncResult(report=rows, source=sources[0])


# Session settings the job relies on, wherever it runs (local session or spark-submit).
JOB_SPARK_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


def _with_task_retries(master: str) -> str:
    """``local[N]`` -> ``local[N,4]``: like a cluster (``spark.task.maxFailures`` = 4), a task
    that hit a transient error (an S3 SlowDown on a small ranged read fails inside the AWS SDK
    without a retry) is run again. Tasks are idempotent: their files have deterministic names
    and a failed attempt's output rows are discarded."""
    m = re.fullmatch(r"local\[(\d+|\*)\]", master.strip())
    return f"local[{m.group(1)},4]" if m else master


def local_spark_session(master: str = "local[2]", driver_memory: str = "4g", extra: dict | None = None):
    """A local session sized for a small machine (used by the CLI, Dagster and the tests)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(_with_task_retries(master))
        .appName("datalake-sync")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
    )
    for k, v in JOB_SPARK_CONF.items():
        builder = builder.config(k, v)
    for k, v in (extra or {}).items():
        builder = builder.config(k, v)
    return builder.getOrCreate()


def job_spark_session(req: SyncRequest):
    """Under ``spark-submit`` the submit's session (its configuration comes from the submit);
    otherwise a local one configured for the request's catalog."""
    if os.environ.get("SPARK_ENV_LOADED") is None:
        return local_spark_session(extra=req.catalog.spark_conf())
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    # What the local session sets at build time and a cluster's defaults may not: the job
    # reads and writes UTC wall clock, and hands key rows to the JVM through Arrow.
    for k, v in JOB_SPARK_CONF.items():
        spark.conf.set(k, v)
    return spark


def main(argv: list[str] | None = None) -> int:
    req = parse_args(sys.argv[1:] if argv is None else argv)
    spark = job_spark_session(req)
    try:
        result = run_sync(spark, req)
    except SyncError as e:
        print(json.dumps({"status": "failed", "error": str(e), "error_code": e.code}))
        return 1
    except Exception as e:  # storage, Spark, anything: still one machine-readable last line
        import traceback

        traceback.print_exc()
        code = "storage" if isinstance(e, OSError) else "internal"
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        print(json.dumps({"status": "failed", "error": f"{type(e).__name__}: {first}"[:2000],
                          "error_code": code}))
        return 1
    print(json.dumps(result.source))
    return 0


if __name__ == "__main__":
    sys.exit(main())
