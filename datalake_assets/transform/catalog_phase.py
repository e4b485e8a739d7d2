"""The sync's catalog phase, as each hour's catalog asset sees it (issue #34).

After the commit, the sync calls the catalog step once (``catalog/step.py``): it registers
what was committed, then reads the catalog back for the synced hours; each hour's report
entry (``by_hour``) gets the step's ``HourEntry`` as a ``catalog`` object that the Dagster
catalog asset and its check read:

    {"kind", "database", "tables": [catalog tables with a partition of the hour],
     "tables_created", "columns_added", "columns_widened", "partitions_registered",
     "problems": [what the catalog lacks or says differently from the lake's files],
     "error": "..." (registration failed)}

A registration that fails after the commit does not undo it: the report is written, with
that error on each hour, and ``CatalogBehind`` (a ``SyncError``) carries it, so the caller
can record the tables as synced and the catalog as behind. ``catalog_only`` (a request with
``catalog_only``) is the repair: the same step registers the request's hours from the lake's
files and checks them (``catalog_only = "check"``: checks only), reading no archive and
writing no data.
"""

from __future__ import annotations

from dataclasses import replace

from datalake_assets.catalog import step
from datalake_assets.catalog.config import catalog_from_config
from datalake_assets.lake.hour_report import CatalogHour, SourceHourEntry
from datalake_assets.lake.records import read_schema_record
from datalake_assets.lake.report import SourceReport, SyncReport
from datalake_assets.spec import layout
from datalake_assets.transform.run import SyncRun
from datalake_assets.transform.sync_request import SyncError, SyncRequest


class CatalogBehind(SyncError):
    """The data is committed, its registration failed: ``report`` is the committed sync's."""

    def __init__(self, message: str, code: str, report: SyncReport) -> None:
        super().__init__(message, code)
        self.report = report


def catalog_source(req: SyncRequest) -> step.CatalogSource:
    return step.CatalogSource(
        lake_root=req.lake_root,
        source_dir=req.source_dir,
        date_layout=req.date_layout,
        database=req.database,
        table_prefix=req.table_prefix,
    )


def attach(source: SourceReport, entries: dict[str, CatalogHour]) -> None:
    """Puts each hour's catalog object on its ``by_hour`` entry (adding entries for hours
    the report has none of, as a catalog-only run's report)."""
    by_hour = {e.hour: i for i, e in enumerate(source.by_hour)}
    for hour, entry in entries.items():
        if hour in by_hour:
            i = by_hour[hour]
            source.by_hour[i] = replace(source.by_hour[i], catalog=entry)
        else:
            source.by_hour.append(SourceHourEntry(hour, catalog=entry))


def catalog_only(run: SyncRun) -> SyncReport:
    """A catalog-only request: register its hours from the lake's files (unless it only
    checks), then check them: the catalog step, as after a sync's commit."""
    req = run.req
    run.catalog = catalog_from_config(req.catalog, lambda: run.spark)
    hours = sorted({layout.ArchiveHour.parse(h) for h in req.hours})
    tables = sorted(read_schema_record(req.lake_root, req.source_dir))
    outcome = step.register_and_check(
        run.catalog,
        catalog_source(req),
        req.catalog.backend,
        step.FromLake(req.hours, tables, register=req.catalog_only == "register"),
    )
    source = SourceReport(
        run_id=req.run_id,
        source_id=req.source_id,
        database=req.database,
        hours_synced=[str(h) for h in hours],
        warning=f"catalog only ({req.catalog_only}): nothing read from the "
        "archive, no data written",
    )
    attach(source, outcome.entries)
    report = SyncReport({}, source)
    if outcome.error is not None:
        raise CatalogBehind(outcome.error, "catalog", report)
    return report
