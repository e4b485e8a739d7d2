"""The sync's last phases, once stage B has written into staging: reconcile, commit, what
the catalog step registers (``catalog/step.py``), report (``sync.py`` runs them in that
order)."""

from __future__ import annotations

import os
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime

from datalake_assets.catalog import step
from datalake_assets.lake import commit, faults, storage
from datalake_assets.lake.formats import TablesToCommit
from datalake_assets.lake.records import write_schema_record
from datalake_assets.lake.report import (
    SourceReport,
    SyncReport,
    TableChecks,
    TableReport,
    write_report,
)
from datalake_assets.spec import layout
from datalake_assets.spec.naming import STANDARD_TABLES, TRACKS_TABLE
from datalake_assets.spec.schema import TableChange
from datalake_assets.transform import open_hour
from datalake_assets.transform.dedup import Duplicates
from datalake_assets.transform.hour_figures import source_hours, table_hours
from datalake_assets.transform.manifest import (
    CONFORMANCE,
    FILE,
    INDEX,
    MISFITS,
    QUARANTINE,
    ManifestEntry,
)
from datalake_assets.transform.run import SyncRun
from datalake_assets.transform.stage_a import StageAStats
from datalake_assets.transform.sync_request import SyncError
from datalake_assets.transform.tally import Tally

# --------------------------------------------------------------------------------- reconcile


def reconcile(
    run: SyncRun,
    stats: StageAStats,
    duplicates: Duplicates,
    manifest: list[ManifestEntry],
    repeated_ids: dict[str, int],
) -> Tally:
    """The tally of what was written; fails, with nothing committed, unless every line read
    is a row, a duplicate, quarantined or suppressed."""
    tally = _tally(stats, manifest, repeated_ids)
    written, dups, quarantined = tally.messages_written, duplicates.total, tally.lines_quarantined
    suppressed = tally.lines_suppressed
    if tally.lines_in != written + dups + quarantined + suppressed:
        storage.delete_dir(run.staging)
        raise SyncError(
            f"reconciliation failed, nothing committed: lines_in={tally.lines_in} != rows={written}"
            f" + duplicates={dups} + quarantined={quarantined} + suppressed={suppressed}"
        )
    return tally


def _tally(
    stats: StageAStats, manifest: list[ManifestEntry], repeated_ids: dict[str, int]
) -> Tally:
    tally = Tally(
        lines_in=stats.lines_in,
        lines_quarantined=sum(stats.lines_quarantined.values()),
        quarantine_hours={h for h, _, _, _ in stats.quarantine_files},
        repeated_ids=dict(repeated_ids),
        suppressed=Counter(stats.suppressed),
        lines_by_hour=dict(stats.lines_by_hour),
        quarantined_by_hour=dict(stats.lines_quarantined),
    )
    for m in manifest:
        if m.entry == FILE:
            tally.rows[(m.table, m.hour)] += m.rows
            tally.values_quarantined[m.table] += m.values_quarantined
            tally.values_by_hour[(m.table, m.hour)] += m.values_quarantined
            tally.valued[(m.table, m.hour)].update(m.columns)
            if m.location:
                tally.files[(m.table, m.hour)].append(m)
        elif m.entry == QUARANTINE:
            tally.quarantine_hours.add(m.hour)
        elif m.entry == MISFITS:
            tally.misfits_by_column[m.table][m.column] += m.rows
            tally.misfits_by_hour[(m.table, m.hour)][m.column] += m.rows
        elif m.entry == CONFORMANCE:
            hour = str(layout.ArchiveHour.parse(m.hour))
            tally.conformance[m.table].extend({**f, "hour": hour} for f in m.failures)
        elif m.entry == INDEX:
            tally.index_ids_written += m.rows
    # ``tracks`` holds the track tables' rows: its count must match theirs, and an id
    # repeated in a track table is repeated in tracks.
    track_rows = sum(n for (t, _), n in tally.rows.items() if t not in STANDARD_TABLES)
    tally.repeated_ids[TRACKS_TABLE] = abs(tally.table_rows(TRACKS_TABLE) - track_rows) + sum(
        n for t, n in tally.repeated_ids.items() if t not in STANDARD_TABLES
    )
    return tally


# ------------------------------------------------------------------------------------ commit


def commit_sync(
    run: SyncRun,
    existing: dict[str, list[tuple[str, str]]],
    changes: dict[str, TableChange],
    tally: Tally,
    files: list[open_hour.ArchiveFile],
) -> None:
    """Commit the staged hours: the tables through the lake's table format (``lake/formats``),
    the quarantine and the indexes as folder swaps, in one journal (``lake/commit.py``); then
    record the tables' schemas. The catalog was prepared before (``sync.py``). The hours'
    ledgers of ``files`` go with their id index (``open_hour.py``). An open hour's batch
    (``req.batch``) appends to its hours instead of replacing them."""
    req = run.req
    hours = sorted({hour for _, hour, _ in files})
    tables_after = dict(existing)
    for t, c in changes.items():
        tables_after[t] = c.columns
    open_hour.stage_ledgers(layout.staged_index_root(run.staging), req.run_id, files)
    batch = tables_to_commit(run, tables_after, changes, tally, hours, files)
    table_swaps, steps = run.tables.plan(batch)
    swaps = table_swaps + _plan_side_swaps(run, hours)
    faults.checkpoint("staged")
    run.held.check()  # an S3 lease lost during a long pause: fail here, before the lake changes
    t = time.monotonic()
    commit.commit(req.lake_root, req.source_dir, req.run_id, swaps, steps, run.tables.apply)
    run.timings["commit_s"] = time.monotonic() - t
    faults.checkpoint("committed")
    _files_readers_read(run, tally, hours)
    storage.delete_dir(run.staging)
    write_schema_record(req.lake_root, req.source_dir, tables_after)


def _files_readers_read(run: SyncRun, tally: Tally, hours: list[str]) -> None:
    """The report's and the UI's files and bytes of each table-hour are those readers read:
    a format that writes its own files (Iceberg's staged rows) replaces the staged ones'
    figures; files written in place are the ones readers read."""
    for table in sorted({t for t, _ in tally.files} - run.in_place):
        live = run.tables.committed_files(run.src, table, hours)
        if live is None:
            return
        for h in hours:
            if (table, h) in tally.files:
                tally.files[(table, h)] = [
                    ManifestEntry(FILE, table, h, bytes=size, location=loc)
                    for loc, size in live.get(h, [])
                ]


def tables_to_commit(
    run: SyncRun,
    tables_after: dict[str, list[tuple[str, str]]],
    changes: dict[str, TableChange],
    tally: Tally,
    hours: list[str],
    files: list[open_hour.ArchiveFile],
) -> TablesToCommit:
    """Every table of the source has its ``hours`` replaced: those this run wrote, and the
    others (a replayed hour may have lost all its rows of one). The files of a table written
    in place are listed for the format's commit. An open hour's batch appends to the tables
    it wrote rows to, and to no other."""
    if run.req.batch:
        tables_after = {t: cols for t, cols in tables_after.items() if t in changes}
    written: dict[str, list[tuple[str, int, str]]] = {t: [] for t in run.in_place}
    for (table, hour), entries in sorted(tally.files.items()):
        if table in written:
            written[table].extend((e.location, e.bytes, hour) for e in entries if e.location)
    return TablesToCommit(
        src=run.src,
        run_id=run.req.run_id,
        staged_data_root=layout.staged_data_root(run.staging),
        hours=tuple(sorted(hours)),
        quarantine_staged=layout.staged_quarantine_root(run.staging),
        tables={t: tuple(tuple(c) for c in cols) for t, cols in sorted(tables_after.items())},
        widened={t: tuple(n for n, _, _ in c.widened) for t, c in changes.items() if c.widened},
        written={t: tuple(entries) for t, entries in written.items()},
        batch=open_hour.batch_id(files) if run.req.batch else "",
    )


def _plan_side_swaps(run: SyncRun, hours: list[str]) -> list[commit.Swap]:
    """Each hour's id index and identity index (the lake's own records, in every table
    format): one folder swap each. An open hour's batch adds its files to the hour's (a swap
    that replaces no hour: every live file is carried over)."""
    req, staging = run.req, run.staging
    by_dir: dict[tuple[str, str], set[str]] = defaultdict(set)  # (target, staged) -> hours
    for h in hours:
        hour = layout.ArchiveHour.parse(h)
        by_dir[
            (
                layout.join(
                    layout.index_root(req.lake_root, req.source_dir),
                    layout.index_partition_path(hour),
                ),
                layout.join(layout.staged_index_root(staging), layout.index_partition_path(hour)),
            )
        ].add(h)
        by_dir[
            (
                layout.join(
                    layout.identity_index_root(req.lake_root, req.source_dir),
                    layout.index_partition_path(hour),
                ),
                layout.join(
                    layout.staged_identity_root(staging), layout.index_partition_path(hour)
                ),
            )
        ].add(h)
    if req.batch:
        by_dir = {key: set() for key in by_dir}
    return commit.swaps_of(by_dir)


# ---------------------------------------------------------------------------------- register


def committed(
    run: SyncRun, changes: dict[str, TableChange], tally: Tally, hours: list[str]
) -> step.Committed:
    """What the catalog step registers and checks of the commit: the Segment layout's tables
    and quarantine are external tables of the [catalog]; an Iceberg table's commit was its
    catalog's update (the step reports it as the format's catalog holds it)."""
    if not run.tables.registered_by_catalog:
        return step.Committed(hours, sorted(changes), by_format=_format_tables(run, changes))
    return step.Committed(
        hours,
        sorted(changes),
        tables={t: c.columns for t, c in changes.items()},
        partitions={t: tally.hours_written(t) for t in changes},
        quarantine_hours=sorted(tally.quarantine_hours),
    )


def _format_tables(run: SyncRun, changes: dict[str, TableChange]) -> dict[str, dict]:
    """The tables as the format's own catalog holds them (Iceberg: name, location, snapshot)."""
    batch = TablesToCommit(
        src=run.src,
        run_id=run.req.run_id,
        staged_data_root="",
        hours=(),
        tables={t: tuple(c.columns) for t, c in changes.items()},
    )
    return {
        t: {
            "catalog_table": c.name.split(".", 1)[1],
            "database": c.name.split(".", 1)[0],
            "location": c.location,
            "snapshot_id": c.snapshot_id,
            "is_new": changes[t].is_new,
            "table_format": run.tables.name,
        }
        for t, c in run.tables.committed(batch).items()
    }


# ------------------------------------------------------------------------------------ report


def _run_fields(run: SyncRun) -> dict:
    """The fields every row of the run's report shares."""
    req = run.req
    return {
        "run_id": req.run_id,
        "source_id": req.source_id,
        "database": req.database,
        "start_time": run.started.isoformat(),
        "replay": req.replay,
        "replay_from": req.hours[0] if req.replay else None,
        "replay_to": req.hours[-1] if req.replay else None,
        "emr_cluster_id": os.environ.get("EMR_CLUSTER_ID"),
        "s3_bucket": (
            req.lake_root.split("://", 1)[1].split("/", 1)[0]  # S3 lakes only
            if storage.on_s3(req.lake_root)
            else None
        ),
    }


def _partitions(hours: list[str]) -> list[dict[str, str]]:
    return [{"day": h.day, "hr": h.hr} for h in map(layout.ArchiveHour.parse, hours)]


def table_reports(
    run: SyncRun,
    changes: dict[str, TableChange],
    tally: Tally,
    duplicates: Duplicates,
    registered: dict[str, dict],
    hours: list[str],
) -> list[TableReport]:
    out = []
    for t in sorted(changes):
        c = changes[t]
        files = [m for (tt, _), v in tally.files.items() if tt == t for m in v]
        out.append(
            TableReport(
                table_name=t,
                **_run_fields(run),
                partitions=_partitions(tally.hours_written(t)),
                new_columns=[{"name": n, "type": ty} for n, ty in c.new_columns],
                widened_columns=[{"name": n, "from": a, "to": b} for n, a, b in c.widened],
                columns=[{"name": n, "type": ty} for n, ty in c.columns],
                row_count=tally.table_rows(t),
                duplicates=sum(n for (tt, _), n in duplicates.counts.items() if tt == t),
                suppressed=tally.table_suppressed(t),
                cross_hour_duplicates=sum(
                    n for (tt, _), n in duplicates.cross_hour.items() if tt == t
                ),
                values_quarantined=tally.values_quarantined.get(t, 0),
                files=len(files),
                bytes=sum(m.bytes for m in files),
                is_new=c.is_new,
                catalog=_catalog_entry(registered.get(t)),
                checks=TableChecks(
                    # message ids written more than once in this sync's output (re-read from it)
                    repeated_message_ids=tally.repeated_ids.get(t, 0),
                    misfits_by_column=dict(sorted(tally.misfits_by_column[t].items())),
                    conformance_failures=tally.conformance[t],
                ),
                by_hour=table_hours(t, c, tally, duplicates, hours),
            )
        )
    return out


def _catalog_entry(info: dict | None) -> dict | None:
    if not info:
        return None
    return {
        k: info.get(k)
        for k in (
            "catalog_table",
            "database",
            "partitions",
            "partitions_added",
            "is_new",
            "location",
            "snapshot_id",
            "table_format",
        )
        if k in info or k not in ("snapshot_id", "table_format")
    }


def source_report(
    run: SyncRun,
    tally: Tally,
    duplicates: Duplicates,
    files: list[tuple[str, str, int]],
    hours: list[str],
    recovered: list[str],
) -> SourceReport:
    return SourceReport(
        **_run_fields(run),
        lines_in=tally.lines_in,
        messages_written=tally.messages_written,
        duplicates=duplicates.total,
        lines_quarantined=tally.lines_quarantined,
        suppressed=tally.lines_suppressed,
        values_quarantined=sum(tally.values_quarantined.values()),
        cross_hour_duplicates=sum(duplicates.cross_hour.values()),
        dedup_lookback_hours=run.req.dedup_lookback_hours,
        index_ids_written=tally.index_ids_written,
        hours_synced=[str(layout.ArchiveHour.parse(h)) for h in hours],
        recovered_commits=recovered,
        files_in=len(files),
        bytes_in=sum(s for _, _, s in files),
        timings={k: round(v, 3) for k, v in run.timings.items()},
        by_hour=source_hours(tally, duplicates, hours),
        batch_id=open_hour.batch_id(files) if run.req.batch else None,
    )


def empty_source_report(run: SyncRun, recovered: list[str]) -> SourceReport:
    """The report of a sync that found no archive file: nothing was written."""
    return SourceReport(**_run_fields(run), warning="no_archive_files", recovered_commits=recovered)


def finish(
    run: SyncRun, tables: list[TableReport], source: SourceReport, record: bool = True
) -> SyncReport:
    """The run's outcome on every row; the report written as JSON lines and as a row per
    object of the ``sync_reports`` table (registered in the catalog), unless not ``record``."""
    req = run.req
    finished = datetime.now(UTC)
    duration = round((time.monotonic() - run.t0) / 60, 4)
    for row in (*tables, source):
        row.finish_time, row.duration_mins = finished.isoformat(), duration
        row.status, row.error, row.error_code = "finished", None, None
    source.partitions = _partitions(source.hours_synced)
    source.tables = len(tables)
    report = SyncReport({t.table_name: t for t in tables}, source)
    if not record:
        return report
    day = finished.strftime("%Y-%m-%d")  # = finish_time[:10]: see report_location
    write_report(req.lake_root, report, day)
    try:  # the reports table: a row per table and one per source, queryable by SQL
        # (an Iceberg table of the format's catalog, else Parquet files in the [catalog])
        step.record_report(
            run.catalog,
            run.tables,
            req.catalog.reports_database,
            req.lake_root,
            req.source_id,
            req.run_id,
            report.rows(),
            day,
        )
    except Exception as e:  # noqa: BLE001 - the sync itself is committed: say so, don't fail
        source.warning = f"sync report table not updated: {e}"
    return report
