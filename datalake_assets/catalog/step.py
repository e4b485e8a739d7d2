"""The sync's catalog step: what one sync (or one repair) does with the catalog, in one call.

The conductor (``transform/sync.py``) touches the catalog at three moments, each one call
here:

* ``prepare``, before the commit: the source's database exists (a catalog that is down, or a
  permission that is missing, fails the sync before anything is committed);
* ``register_and_check``, once after the commit: the committed tables, their partitions and
  the quarantine registered (``register.register_sync``), then the catalog read back for the
  synced hours (``in_step.out_of_step``); returns a ``CatalogOutcome``: what was registered,
  each hour's ``CatalogHour`` (what the Dagster catalog asset and its ``in_step`` check read)
  and the registration's error, if it failed. A failure after the commit does not undo it:
  the caller reports the error on each hour (``transform/catalog_phase.CatalogBehind``).
  The repair (a ``catalog_only`` request) calls the same step with ``FromLake``: the hours
  registered again from the lake's files (or only checked);
* ``record_report``, once the report is final: its rows in the ``sync_reports`` table (the
  table format's own table, else a Parquet file registered in the catalog).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from datalake_assets.catalog.catalog_interface import Catalog, CatalogError, Column
from datalake_assets.catalog.in_step import (
    CatalogSource,
    lake_partitions,
    out_of_step,
    quarantine_hours,
    register_from_lake,
)
from datalake_assets.catalog.register import register_sync
from datalake_assets.catalog.reports import (
    REPORTS_PARTITION_KEYS,
    REPORTS_TABLE,
    register_reports,
    report_table,
    write_report_table,
)
from datalake_assets.lake import faults
from datalake_assets.lake.formats import TableFormat
from datalake_assets.lake.hour_report import CatalogHour
from datalake_assets.spec import layout

TABLES_DESCRIPTION = "Segment data lake tables (datalake-assets)"


def prepare(catalog: Catalog, database: str) -> None:
    """Before the commit: the source's database exists (raises ``CatalogError``)."""
    catalog.ensure_database(database, TABLES_DESCRIPTION)


@dataclass(frozen=True)
class Committed:
    """What a sync committed, as the catalog step registers and checks it."""

    hours: Sequence[str]  # the synced hours (any spelling)
    checked: Sequence[str]  # the tables the sync wrote: their hours are checked
    # the external tables to register (the Segment layout's), with the sync's columns, the
    # hours each wrote, and the hours that quarantined something
    tables: Mapping[str, Sequence[Column]] = field(default_factory=dict)
    partitions: Mapping[str, Iterable[layout.ArchiveHour | str]] = field(default_factory=dict)
    quarantine_hours: Sequence[layout.ArchiveHour | str] = ()
    # tables whose commit was their catalog's update (Iceberg), as ``register_sync`` describes
    # a table, with ``table_format`` (the format's name) and ``snapshot_id``
    by_format: Mapping[str, dict] = field(default_factory=dict)


@dataclass(frozen=True)
class FromLake:
    """A repair: ``tables``' ``hours`` registered again from the lake's files (the schema
    record's columns, each partition with its files' columns) and checked; ``register``
    False: checked only."""

    hours: Sequence[str]
    tables: Sequence[str]
    register: bool = True


@dataclass(frozen=True)
class CatalogOutcome:
    """What the step did: ``registered`` (per lake table, ``register_sync``'s description),
    each hour's entry by ``str(hour)`` (none with ``backend = "none"``), and the error."""

    registered: dict[str, dict]
    entries: dict[str, CatalogHour]
    failed: CatalogError | None = None
    error: str | None = None  # ``failed``, in the words the report and the run use
    register_s: float = 0.0  # the registration's time (not the check's)


def register_and_check(
    catalog: Catalog, src: CatalogSource, backend: str, what: Committed | FromLake
) -> CatalogOutcome:
    """Register ``what`` (a sync's commit, or hours from the lake's files), then check its
    hours; never raises a ``CatalogError`` (it is the outcome's ``failed``)."""
    t = time.monotonic()
    hours = sorted({layout.ArchiveHour.parse(h) for h in what.hours})
    tables = list(what.checked if isinstance(what, Committed) else what.tables)
    parts = None
    registered: dict[str, dict] = {}
    try:
        if isinstance(what, Committed):
            registered = register_sync(
                catalog,
                database=src.database,
                table_prefix=src.table_prefix,
                lake_root=src.lake_root,
                source_dir=src.source_dir,
                date_layout=src.date_layout,
                tables=what.tables,
                partitions=what.partitions,
                quarantine_hours=what.quarantine_hours,
                count_partitions=True,  # Glue: one paginated listing per table written
            )
        elif what.register:
            parts = lake_partitions(src, tables, hours)
            registered = register_from_lake(catalog, src, parts, quarantine_hours(src, hours))
    except CatalogError as e:
        failed = e
        if isinstance(what, Committed):
            error = (
                f"data committed, but the catalog registration failed: {e}. Re-run the sync, "
                "or materialize the source's catalog asset for these hours, to register it "
                "(every step is idempotent)"
            )
            registered = {}
        else:
            error = f"catalog registration failed: {e}"
    else:
        failed = error = None
        if isinstance(what, Committed):
            registered.update(what.by_format)
            faults.checkpoint("registered")
    register_s = time.monotonic() - t
    if backend == "none":
        return CatalogOutcome(registered, {}, failed, error, register_s)
    if isinstance(what, Committed) and what.by_format and not what.tables:
        parts = []  # committed to the format's own catalog (Iceberg): no external table to check
    if parts is None:
        parts = lake_partitions(src, tables, hours)
    problems: dict[str, list[str]] = {}
    if error is None and parts:
        try:
            problems = out_of_step(catalog, src, parts)
        except CatalogError as e:  # the check could not read the catalog: say so, per hour
            problems = {str(h): [f"the catalog could not be read: {e}"] for h in hours}
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
    # an Iceberg table's commit is its catalog's update: the hour is in every table it wrote
    by_format = [v for v in registered.values() if v.get("table_format")]
    committed = sorted(v["catalog_table"] for v in by_format)
    entries = {}
    for h in hours:
        mine = committed or sorted(
            registered[p.table]["catalog_table"]
            for p in parts
            if p.hour == h and p.table in registered
        )
        entries[str(h)] = CatalogHour(
            kind=by_format[0]["table_format"] if committed else backend,
            database=src.database,
            tables=mine,
            tables_created=created,
            columns_added=added,
            columns_widened=widened,
            partitions_registered=len(mine),
            problems=problems.get(str(h), []),
            error=error,
        )
    return CatalogOutcome(registered, entries, failed, error, register_s)


def record_report(
    catalog: Catalog | None,
    tables: TableFormat,
    reports_database: str,
    lake_root: str,
    source_id: str,
    run_id: str,
    rows: list[dict],
    day: str,
) -> None:
    """The report's ``rows`` (``SyncReport.rows()``) in the ``sync_reports`` table: appended to
    the table format's own table (Iceberg), else written as the run's Parquet file of the
    table and its partition of ``source_id`` and ``day`` registered in ``catalog`` (none: not
    registered)."""
    if tables.append(
        reports_database,
        REPORTS_TABLE,
        report_table(source_id, rows, day),
        REPORTS_PARTITION_KEYS,
    ):
        return
    write_report_table(lake_root, source_id, run_id, rows, day)
    if catalog is not None:
        register_reports(catalog, reports_database, lake_root, source_id, day)
