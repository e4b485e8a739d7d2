"""The sync's report: a row per table it wrote and one for the source, with each hour's own
figures (``hour_figures.py``), written as JSON lines and into the ``sync_reports`` table
(``lake/report.py`` holds the rows' types). ``sync.py`` writes it last, after the commit and the
catalog step (``outcome.py``)."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

from datalake_assets.catalog import step
from datalake_assets.lake import storage
from datalake_assets.lake.report import (
    SourceReport,
    SyncReport,
    TableChecks,
    TableReport,
    write_report,
)
from datalake_assets.spec import layout
from datalake_assets.spec.schema import TableChange
from datalake_assets.transform import open_hour
from datalake_assets.transform.dedup import Duplicates
from datalake_assets.transform.hour_figures import source_hours, table_hours
from datalake_assets.transform.run import SyncRun
from datalake_assets.transform.tally import Tally


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
