"""The sync's catalog phase, as each hour's catalog asset sees it (issue #34).

After the commit, the sync registers what it wrote (``outcome.register``), then reads the
catalog back for its hours (``catalog/in_step.py``): each hour's report entry (``by_hour``)
gets a ``catalog`` object that the Dagster catalog asset and its check read:

    {"kind", "database", "tables": [catalog tables with a partition of the hour],
     "tables_created", "columns_added", "columns_widened", "partitions_registered",
     "problems": [what the catalog lacks or says differently from the lake's files],
     "error": "..." (registration failed)}

A registration that fails after the commit does not undo it: the report is written, with
that error on each hour, and ``CatalogBehind`` (a ``SyncError``) carries it, so the caller
can record the tables as synced and the catalog as behind. ``register_only`` (a request with
``catalog_only``) is the repair: it registers the request's hours from the lake's files and
checks them (``catalog_only = "check"``: checks only), reading no archive and writing no
data.
"""

from __future__ import annotations

from typing import Any

from datalake_assets.catalog import in_step
from datalake_assets.catalog.base import CatalogError
from datalake_assets.catalog.config import catalog_from_config
from datalake_assets.lake.records import read_schema_record
from datalake_assets.lake.report import SourceReport, SyncReport
from datalake_assets.spec import layout
from datalake_assets.transform.request import SyncError, SyncRequest
from datalake_assets.transform.run import SyncRun


class CatalogBehind(SyncError):
    """The data is committed, its registration failed: ``report`` is the committed sync's."""

    def __init__(self, message: str, code: str, report: SyncReport) -> None:
        super().__init__(message, code)
        self.report = report


def catalog_source(req: SyncRequest) -> in_step.CatalogSource:
    return in_step.CatalogSource(
        lake_root=req.lake_root,
        source_dir=req.source_dir,
        date_layout=req.date_layout,
        database=req.database,
        table_prefix=req.table_prefix,
    )


def hour_entries(
    run: SyncRun,
    hours: list[str],
    tables: list[str],
    registered: dict[str, dict] | None,
    error: str | None,
) -> dict[str, dict]:
    """Each hour's ``catalog`` object (hours: any spelling; keyed ``str(hour)``): what was
    registered for it and, unless registration failed, what the catalog still lacks."""
    req = run.req
    if req.catalog.backend == "none":
        return {}
    src = catalog_source(req)
    parsed = sorted({layout.ArchiveHour.parse(h) for h in hours})
    parts = in_step.lake_partitions(src, tables, parsed)
    problems: dict[str, list[str]] = {}
    if error is None and run.catalog is not None:
        try:
            problems = in_step.out_of_step(run.catalog, src, parts)
        except CatalogError as e:  # the check could not read the catalog: say so, per hour
            problems = {str(h): [f"the catalog could not be read: {e}"] for h in parsed}
    registered = registered or {}
    created = sorted(v["catalog_table"] for v in registered.values() if v.get("is_new"))
    added = sorted(
        f"{v['catalog_table']}.{c[0]}"
        for v in registered.values()
        for c in v.get("new_columns", [])
    )
    widened = sorted(
        f"{v['catalog_table']}.{w[0]} {w[1]} -> {w[2]}"
        for v in registered.values()
        for w in v.get("widened_columns", [])
    )
    out = {}
    # an Iceberg table's commit is its catalog's update: the hour is in every table it wrote
    committed = sorted(v["catalog_table"] for v in registered.values() if v.get("table_format"))
    for h in parsed:
        mine = committed or sorted(
            registered[p.table]["catalog_table"]
            for p in parts
            if p.hour == h and p.table in registered
        )
        entry: dict[str, Any] = {
            "kind": run.tables.name if committed else req.catalog.backend,
            "database": req.database,
            "tables": mine,
            "tables_created": created,
            "columns_added": added,
            "columns_widened": widened,
            "partitions_registered": len(mine),
            "problems": problems.get(str(h), []),
        }
        if error is not None:
            entry["error"] = error
        out[str(h)] = entry
    return out


def attach(source: SourceReport, entries: dict[str, dict]) -> None:
    """Puts each hour's catalog object on its ``by_hour`` entry (adding entries for hours
    the report has none of, as a catalog-only run's report)."""
    by_hour = {e["hour"]: e for e in source.by_hour}
    for hour, entry in entries.items():
        if hour not in by_hour:
            by_hour[hour] = {"hour": hour}
            source.by_hour.append(by_hour[hour])
        by_hour[hour]["catalog"] = entry


def catalog_only(run: SyncRun) -> SyncReport:
    """A catalog-only request: register its hours from the lake's files (unless it only
    checks), then check them."""
    req = run.req
    run.catalog = catalog_from_config(req.catalog, lambda: run.spark)
    src = catalog_source(req)
    hours = sorted({layout.ArchiveHour.parse(h) for h in req.hours})
    tables = sorted(read_schema_record(req.lake_root, req.source_dir))
    parts = in_step.lake_partitions(src, tables, hours)
    error, registered = None, {}
    try:
        if req.catalog_only == "register":
            registered = in_step.register_from_lake(
                run.catalog, src, parts, in_step.quarantine_hours(src, hours)
            )
    except CatalogError as e:
        error = f"catalog registration failed: {e}"
    source = SourceReport(
        run_id=req.run_id,
        source_id=req.source_id,
        database=req.database,
        hours_synced=[str(h) for h in hours],
        warning=f"catalog only ({req.catalog_only}): nothing read from the "
        "archive, no data written",
    )
    attach(source, hour_entries(run, req.hours, tables, registered, error))
    report = SyncReport({}, source)
    if error is not None:
        raise CatalogBehind(error, "catalog", report)
    return report
