"""The sync of one source and batch of hours, as its phases (``run_sync``).

Under the source's lock: recover an unfinished commit, then

1. **read**: stage A (``stage_a.py``), one task per archive file, writes work files and
   returns key rows, identity index entries and per-column statistics; it drops the
   messages of suppressed identities (the lake's list, read once: ``identity_index.py``);
2. **plan types**: the statistics against the lake's schema record and the catalog;
3. **dedup** (``dedup.py``): the duplicates, from the key rows and the id index; the identity
   index of each hour is staged (``identity_index.py``);
4. **write**: stage B (``stage_b.py``) writes each table's Parquet per hour into staging and
   returns a manifest (``manifest.py``); the output is re-read for repeated ids;
5. **reconcile**: ``lines_in = rows + duplicates + quarantined + suppressed``, or nothing is
   committed;
6. **commit** (``lake/commit.py``), then the schema record (the catalog's database is made
   sure of first: ``catalog/step.prepare``);
7. **register** the tables, partitions and quarantine in the catalog and check them, in one
   call of the catalog step (``catalog/step.register_and_check``);
8. **report** (``report.py``; its rows in the ``sync_reports`` table: ``step.record_report``).
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import replace

from datalake_assets.catalog import step
from datalake_assets.catalog.catalog_interface import CatalogError, NoCatalog
from datalake_assets.catalog.config import catalog_from_config
from datalake_assets.lake import commit, faults, storage
from datalake_assets.lake.formats import format_record
from datalake_assets.lake.formats.format_interface import FormatError
from datalake_assets.lake.lock import LockLost, LockTimeout, SourceLock
from datalake_assets.lake.records import read_schema_record
from datalake_assets.lake.report import SyncReport
from datalake_assets.spec import layout
from datalake_assets.spec.naming import TRACKS_TABLE, holds_messages
from datalake_assets.spec.schema import TableChange
from datalake_assets.transform import catalog_phase, local_path, open_hour
from datalake_assets.transform.dedup import (
    Duplicates,
    find_duplicates,
    repeated_in_output,
    repeated_message_ids,
)
from datalake_assets.transform.identity_index import index_identities, load_privacy
from datalake_assets.transform.identity_tally import IDENTITY
from datalake_assets.transform.manifest import FILE, MANIFEST_SCHEMA, ManifestEntry
from datalake_assets.transform.outcome import commit_sync, committed, reconcile
from datalake_assets.transform.run import SyncRun
from datalake_assets.transform.stage_a import (
    STAGE_A_SCHEMA,
    STATS,
    StageAConfig,
    run_stage_a,
)
from datalake_assets.transform.stage_a_stats import StageAStats, merge_stats
from datalake_assets.transform.stage_b import (
    STAGE_B_TASK_SCHEMA,
    StageBConfig,
    plan_stage_b_tasks,
    run_stage_b,
)
from datalake_assets.transform.sync_report import (
    empty_source_report,
    finish,
    source_report,
    table_reports,
)
from datalake_assets.transform.sync_request import SyncError, SyncRequest
from datalake_assets.transform.type_plan import plan_types


def list_archive_files(req: SyncRequest) -> list[tuple[str, str, int]]:
    """``[(location, hour compact, size)]`` of the requested hours' archive files."""
    out = []
    for h in sorted(layout.ArchiveHour.parse(x) for x in req.hours):
        directory = layout.archive_hour_dir(req.archive_root, req.source_id, h)
        for location, size in storage.list_files(directory):
            if layout.is_archive_file(location):
                out.append((location, h.compact, size))
    return out


def run_sync(spark, request: SyncRequest) -> SyncReport:
    """Sync the request's hours; returns the report (also written under ``<lake>/reports``).
    ``spark``: a session, or a function that makes one when the sync first needs it.

    Holds the source's lock (``lock.py``) throughout: a second sync of the source waits for
    this one, then runs against its committed result.
    """
    req = request.resolved()
    try:
        format_record.check(req.lake_root, req.table_format.format)
    except FormatError as e:
        raise SyncError(str(e), e.code) from None
    try:
        with SourceLock(
            req.lake_root, req.source_dir, req.run_id, wait_s=req.lock_wait_seconds
        ) as held:
            report = _run_sync_locked(
                SyncRun(spark, req, held, timings={"lock_wait_s": held.waited_s})
            )
            format_record.record(req.lake_root, req.table_format.format)
            return report
    except LockTimeout as e:
        raise SyncError(str(e), "locked") from e
    except LockLost as e:
        raise SyncError(str(e), "locked") from e
    except Exception as e:
        cause = _task_failure(e)
        if cause is None:
            raise
        raise SyncError(
            f"a Spark task failed, nothing committed: {cause}",
            "storage" if "ShortRead" in cause or "OSError" in cause else "internal",
        ) from e


_PY_ERROR_LINE = re.compile(r"^\s*((?:[\w.]+\.)?\w*(?:Error|ShortRead|Exception)): (.+)$", re.M)


def _task_failure(e: Exception) -> str | None:
    """The Python error that failed a Spark task, from the JVM's wrapping of it."""
    if type(e).__name__ not in ("Py4JJavaError", "PythonException"):
        return None
    text = str(e)
    if "Traceback" not in text:
        return None
    lines = [
        m
        for m in _PY_ERROR_LINE.finditer(text)
        if "py4j" not in m.group(1).lower() and "org.apache" not in m.group(1)
    ]
    return (
        f"{lines[-1].group(1).rsplit('.', 1)[-1]}: {lines[-1].group(2)[:1000]}" if lines else None
    )


def _run_sync_locked(run: SyncRun) -> SyncReport:
    req = run.req
    recovered = commit.recover(req.lake_root, req.source_dir, run.tables.apply)
    if req.catalog_only:  # register and check the hours from the lake's files: no data
        return catalog_phase.catalog_only(run)
    _clear_staging(req)
    files = list_archive_files(req)
    if req.batch:  # an open hour's batch: the files no run took in yet (open_hour.py)
        files = open_hour.untaken(run, files)
    existing = read_schema_record(req.lake_root, req.source_dir)
    if not files:  # a batch that found nothing new records nothing (one runs every minutes)
        quiet = req.batch and not recovered
        return finish(run, [], empty_source_report(run, recovered), record=not quiet)
    if run.tables.registered_by_catalog:
        # Hive: the served metastore's session, else this process's (started only then)
        run.catalog = catalog_from_config(req.catalog, lambda: run.spark)
        threading.Thread(
            target=run.catalog.warm_up, args=(req.database,), daemon=True, name="catalog-warm-up"
        ).start()  # Derby boots while stage A runs
    else:  # an Iceberg table's commit is its own catalog's update: [catalog] is not opened
        run.catalog = NoCatalog()
    load_privacy(run)
    hours = sorted({h for _, h, _ in files})
    local = local_path.is_small(req, files)  # no Spark job for a small batch
    stats, changes, duplicates = (_read_local if local else _read_spark)(
        run, files, existing, hours
    )
    if req.batch and any(c.widened for c in changes.values()):
        # A widening rewrites the table's rows: the whole hours' sync does it (open_hour.py).
        storage.delete_dir(run.staging)
        run.req = replace(req, batch=False)
        return _run_sync_locked(run)
    index_identities(run, stats)
    manifest, repeated_ids = write(run, stats, changes, duplicates, local)
    tally = reconcile(run, stats, duplicates, manifest, repeated_ids)
    _prepare_catalog(run)
    commit_sync(run, existing, changes, tally, files)
    t = time.monotonic()
    what = committed(run, changes, tally, hours)
    prepared_s = time.monotonic() - t
    catalog = step.register_and_check(
        run.catalog, catalog_phase.catalog_source(req), req.catalog.backend, what
    )
    if catalog.failed is None:
        run.timings["register_s"] = prepared_s + catalog.register_s
    source = source_report(run, tally, duplicates, files, hours, recovered)
    source.warning = catalog.error
    catalog_phase.attach(source, catalog.entries)
    report = finish(
        run, table_reports(run, changes, tally, duplicates, catalog.registered, hours), source
    )
    if catalog.failed is not None:
        raise catalog_phase.CatalogBehind(catalog.error, catalog.failed.code, report)
    return report


def _prepare_catalog(run: SyncRun) -> None:
    """Before anything is committed: a catalog that is down, or a missing permission, fails
    the sync with nothing changed."""
    try:
        step.prepare(run.catalog, run.req.database)
    except CatalogError as e:
        storage.delete_dir(run.staging)
        raise SyncError(f"catalog: {e}; nothing committed", e.code) from e


def _clear_staging(req: SyncRequest, attempts: int = 5) -> None:
    """Delete what earlier runs left in the source's staging area. After a crash, an orphaned
    Python worker of the dead run (PySpark's workers live in a process group of their own) may
    still be finishing a write there for a moment: the deletion is tried again, a second
    apart, before it fails the sync."""
    for attempt in range(attempts):
        try:
            storage.delete_dir(layout.staging_root(req.lake_root, req.source_dir))
            return
        except OSError:
            if attempt == attempts - 1:
                raise
            time.sleep(1.0)


# ------------------------------------------------------------------------------ read (stage A)


def _read_spark(
    run: SyncRun,
    files: list[tuple[str, str, int]],
    existing: dict[str, list[tuple[str, str]]],
    hours: list[str],
):
    """Stage A, the types and the dedup as Spark jobs: ``(stats, changes, duplicates)``."""
    keys = read(run, files)
    try:
        stats = collect_stats(run, keys)
        changes = plan_types(run, existing, stats)
        return stats, changes, dedup(run, keys, _key_rows(stats), hours)
    finally:
        keys.unpersist()


def _read_local(
    run: SyncRun,
    files: list[tuple[str, str, int]],
    existing: dict[str, list[tuple[str, str]]],
    hours: list[str],
):
    """The same, in the driver's process (``local_path.py``)."""
    stats, keys = local_path.read(run, stage_a_config(run, files), files)
    changes = plan_types(run, existing, stats)
    return stats, changes, local_path.dedup(run, keys, hours)


def read(run: SyncRun, files: list[tuple[str, str, int]]):
    """Stage A over ``files``: its key rows, persisted (stage A writes work files as a side
    effect, so it must run once; the first action computes every partition)."""
    from pyspark import StorageLevel

    file_rows = [(i, loc, hour) for i, (loc, hour, _) in enumerate(files)]
    # Exactly one archive file per stage-A task (gzip is not splittable; hash partitioning
    # would put two files in one task and leave another idle).
    sc = run.spark.sparkContext
    files_df = run.spark.createDataFrame(
        sc.parallelize(file_rows, len(file_rows)), "file_idx int, location string, hour string"
    )
    a_cfg = stage_a_config(run, files)

    def stage_a(batches):
        return run_stage_a(batches, a_cfg)

    return files_df.mapInArrow(stage_a, STAGE_A_SCHEMA).persist(StorageLevel.MEMORY_AND_DISK)


def stage_a_config(run: SyncRun, files: list[tuple[str, str, int]]) -> StageAConfig:
    staging = run.staging
    return StageAConfig(
        max_message_bytes=run.req.max_message_bytes,
        max_depth=run.req.max_depth,
        source_id=run.req.source_id,
        run_id=run.req.run_id,
        work_root=layout.staged_work_root(staging),
        quarantine_root=layout.staged_quarantine_root(staging),
        archive_files=tuple(loc for loc, _, _ in files),
        archive_sizes=tuple(size for _, _, size in files),
        identity_key=run.identity_key,
        identity_traits=tuple(run.req.identity_traits),
        suppressed=run.suppressed,
        plan=run.plan,
    )


def collect_stats(run: SyncRun, keys) -> StageAStats:
    """Runs stage A and merges its tasks' statistics (the identity index entries come along:
    ``stats.identity_parts``)."""
    from pyspark.sql import functions as F

    t = time.monotonic()
    run.describe_jobs(f"sync {run.req.source_id} {run.req.hours[0]}..{run.req.hours[-1]}: parse")
    rows = keys.filter(F.col("kind").isin(STATS, IDENTITY)).select("kind", "payload").collect()
    stats = merge_stats([bytes(r.payload) for r in rows if r.kind == STATS])
    stats.identity_parts = [bytes(r.payload) for r in rows if r.kind == IDENTITY]
    run.timings["parse_s"] = time.monotonic() - t
    faults.checkpoint("parsed")
    return stats


def _key_rows(stats: StageAStats) -> int:
    """How many key rows stage A emitted: one per message it kept (``tracks`` is derived)."""
    return sum(
        n for table, n in stats.messages.items() if table != TRACKS_TABLE and holds_messages(table)
    )


# ------------------------------------------------------------------------------------- dedup


def dedup(run: SyncRun, keys, messages: int, hours: list[str]) -> Duplicates:
    t = time.monotonic()
    run.describe_jobs(f"sync {run.req.source_id}: find duplicates")
    found = find_duplicates(
        run.spark,
        keys,
        messages,
        run.req.dedup_lookback_hours,
        run.req.lake_root,
        run.req.source_dir,
        hours,
        appends=run.req.batch,
    )
    run.timings["dedup_s"] = time.monotonic() - t
    return found


# ----------------------------------------------------------------------------- write (stage B)


def write(
    run: SyncRun,
    stats: StageAStats,
    changes: dict[str, TableChange],
    duplicates: Duplicates,
    local: bool = False,
) -> tuple[list[ManifestEntry], dict[str, int]]:
    """Stage B: the tables into staging; returns its manifest and, per table, the message ids
    written more than once (re-read from the output). The work files are deleted. ``local``:
    in the driver's process (``local_path.py``), not as a Spark job."""
    staging = run.staging
    tables_of_run = {t: tuple(c.columns) for t, c in changes.items()}
    # a format that keeps its files where Stage B writes them (Iceberg) says where and how
    targets = run.tables.write_targets(
        run.src,
        tables_of_run,
        {t: tuple(n for n, _, _ in c.widened) for t, c in changes.items() if c.widened},
        sorted({hour for _, hour, _, _, _ in stats.work_files}),
    )
    run.in_place = frozenset(targets)
    b_cfg = StageBConfig(
        source_id=run.req.source_id,
        run_id=run.req.run_id,
        staging_root=layout.staged_data_root(staging),
        quarantine_staging_root=layout.staged_quarantine_root(staging),
        date_layout=run.req.date_layout,
        tables=tables_of_run,
        index_staging_root=layout.staged_index_root(staging),
        target_file_bytes=run.req.target_file_bytes,
        targets=targets,
    )
    tasks = plan_stage_b_tasks(stats.work_files, duplicates.drop)
    manifest: list[ManifestEntry] = []
    repeated_ids: dict[str, int] = {}
    if tasks:
        tables = [t for t in changes if t != TRACKS_TABLE and holds_messages(t)]
        if local:
            manifest = local_path.write(run, b_cfg, tasks)
        else:
            manifest = _write_spark(run, b_cfg, tasks)
        t = time.monotonic()
        staged = layout.staged_data_root(staging)
        # written in place, the files are among the tables' others: read those the manifest
        # lists (in staging, the tables' staged folders hold exactly what was written)
        written = (
            [(m.table, m.location, m.bytes) for m in manifest if m.entry == FILE and m.location]
            if run.in_place
            else None
        )
        # A small batch's output is read back on the driver: no session needed.
        repeated_ids = (
            repeated_in_output(staged, tables, duplicates.held, written) if local else None
        )
        if repeated_ids is None:
            repeated_ids = repeated_message_ids(run.spark, staged, tables, duplicates.held, written)
        run.timings["check_s"] = time.monotonic() - t
    storage.delete_dir(layout.staged_work_root(staging))
    return manifest, repeated_ids


def _write_spark(run: SyncRun, b_cfg: StageBConfig, tasks: list) -> list[ManifestEntry]:
    def stage_b(batches):
        return run_stage_b(batches, b_cfg)

    t = time.monotonic()
    run.describe_jobs(f"sync {run.req.source_id}: write tables")
    try:
        sc = run.spark.sparkContext
        tasks_df = run.spark.createDataFrame(sc.parallelize(tasks, len(tasks)), STAGE_B_TASK_SCHEMA)
        manifest = [
            ManifestEntry.from_row(r.asDict())
            for r in tasks_df.mapInArrow(stage_b, MANIFEST_SCHEMA).collect()
        ]
    finally:
        run.describe_jobs(None)
    run.timings["write_s"] = time.monotonic() - t
    return manifest
