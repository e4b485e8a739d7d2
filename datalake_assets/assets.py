"""Assets per source: the raw archive (external), the lake's tables, quarantine, sync report.

Asset keys name where the data lives: ``[<source slug>, <table>]``. One multi-asset per source
materializes all its tables for a batch of hours with ONE Spark job (never one per table).

Event types first seen at runtime: the asset graph is built at load time from the tables the
lake's schema record knows, plus the standard ones. A sync that creates a new table logs a
materialization for its key at once (visible in the catalog) and the table becomes a regular
asset at the next reload of the code location (``Reload definitions`` in the UI, or restart).
"""


from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetMaterialization,
    AssetSpec,
    BackfillPolicy,
    HourlyPartitionsDefinition,
    MaterializeResult,
    MetadataValue,
    TableColumn,
    TableSchema,
    multi_asset,
)

from datalake_assets.resources import SparkCompute
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.spec import layout
from datalake_assets.spec.naming import TYPE_TABLES
from datalake_assets.transform.job import SyncError, SyncRequest, read_schema_record

STANDARD_TABLES = tuple(sorted(TYPE_TABLES.values()))
QUARANTINE = "quarantine"
SYNC_REPORTS = "sync_reports"
RAW_ARCHIVE = "raw_archive"

# Asset checks, evaluated on every sync from what its Spark job measured (never by loading the
# partitions into Dagster). Blocking checks (ERROR) stop downstream assets from running on a
# bad hour; the others warn.
CHECK_COMPLETENESS = "completeness"  # on sync_reports: lines_in = rows + duplicates + quarantined
CHECK_DUPLICATES = "duplicates"  # per table: no message id written twice, in the synced hours or
# in another hour of the dedup lookback window (re-read from the output, against the id index)
CHECK_TYPE_DRIFT = "type_drift"  # per table: a column widened or values did not fit (WARN)
CHECK_CONFORMANCE = "schema_conformance"  # per table: pandera rules of the fixed columns


def _check_specs(slug: str, tables: list[str]) -> list[AssetCheckSpec]:
    specs = [AssetCheckSpec(
        CHECK_COMPLETENESS, asset=AssetKey([slug, SYNC_REPORTS]), blocking=True,
        description="lines_in = rows written + duplicates + lines quarantined, for the hours synced",
    )]
    for t in tables:
        key = AssetKey([slug, t])
        specs += [
            AssetCheckSpec(CHECK_DUPLICATES, asset=key, blocking=True,
                           description="No messageId appears twice in what the sync wrote"),
            AssetCheckSpec(CHECK_TYPE_DRIFT, asset=key,
                           description="Warns when a column widened or values were quarantined "
                                       "for not fitting their column's type"),
            AssetCheckSpec(CHECK_CONFORMANCE, asset=key,
                           description="pandera rules of the fixed columns (ids, type, event, "
                                       "received_at) hold on every written row"),
        ]
    return specs


def table_check_results(slug: str, table: str, report: dict | None) -> list[AssetCheckResult]:
    """The three per-table checks from the table's sync report (``None``: no rows this time)."""
    key = AssetKey([slug, table])
    if report is None:
        return [AssetCheckResult(asset_key=key, check_name=name, passed=True,
                                 metadata={"note": "no rows for this table in these hours"})
                for name in (CHECK_DUPLICATES, CHECK_TYPE_DRIFT, CHECK_CONFORMANCE)]
    checks = report.get("checks", {})
    repeated = checks.get("repeated_message_ids", 0)
    misfits = checks.get("misfits_by_column", {})
    widened = report.get("widened_columns", [])
    failures = checks.get("conformance_failures", [])
    return [
        AssetCheckResult(
            asset_key=key, check_name=CHECK_DUPLICATES, passed=repeated == 0,
            severity=AssetCheckSeverity.ERROR,
            metadata={"repeated_message_ids": repeated,
                      "duplicates_removed": report.get("duplicates", 0),
                      "cross_hour_duplicates_removed": report.get("cross_hour_duplicates", 0)},
        ),
        AssetCheckResult(
            asset_key=key, check_name=CHECK_TYPE_DRIFT, passed=not widened and not misfits,
            severity=AssetCheckSeverity.WARN,
            metadata={"widened_columns": MetadataValue.json(widened),
                      "misfits_by_column": MetadataValue.json(misfits),
                      "values_quarantined": sum(misfits.values())},
        ),
        AssetCheckResult(
            asset_key=key, check_name=CHECK_CONFORMANCE, passed=not failures,
            severity=AssetCheckSeverity.ERROR,
            metadata={"failures": MetadataValue.json(failures),
                      "failing_values": sum(f["failures"] for f in failures)},
        ),
    ]


def completeness_result(slug: str, src: dict | None, error: str | None = None) -> AssetCheckResult:
    key = AssetKey([slug, SYNC_REPORTS])
    if src is None:
        return AssetCheckResult(asset_key=key, check_name=CHECK_COMPLETENESS, passed=False,
                                severity=AssetCheckSeverity.ERROR,
                                metadata={"error": error or "", "committed": False})
    accounted = src["messages_written"] + src["duplicates"] + src["lines_quarantined"]
    return AssetCheckResult(
        asset_key=key, check_name=CHECK_COMPLETENESS, passed=src["lines_in"] == accounted,
        severity=AssetCheckSeverity.ERROR,
        metadata={"lines_in": src["lines_in"], "rows": src["messages_written"],
                  "duplicates": src["duplicates"], "lines_quarantined": src["lines_quarantined"]},
    )


def source_partitions(source: SourceSettings) -> HourlyPartitionsDefinition:
    return HourlyPartitionsDefinition(start_date=source.start, timezone="UTC")


def known_tables(settings: LakeSettings, source: SourceSettings) -> list[str]:
    """Standard tables plus every table the lake's schema record knows for the source."""
    try:
        recorded = read_schema_record(settings.lake_root, source.lake_dir)
    except Exception:  # an unreadable record must not take the code location down
        recorded = {}
    return sorted(set(STANDARD_TABLES) | set(recorded))


def _table_metadata(report: dict, settings: LakeSettings, source: SourceSettings) -> dict:
    schema = TableSchema(columns=[TableColumn(c["name"], c["type"]) for c in report["columns"]])
    return {
        "rows": report["row_count"],
        "duplicates": report["duplicates"],
        "values_quarantined": report["values_quarantined"],
        "new_columns": MetadataValue.json(report["new_columns"]),
        "widened_columns": MetadataValue.json(report["widened_columns"]),
        "files": report["files"],
        "bytes": report["bytes"],
        "is_new": report["is_new"],
        "dagster/column_schema": schema,
        "dagster/row_count": report["row_count"],
        "path": MetadataValue.path(
            layout.table_root(settings.lake_root, source.lake_dir, report["table_name"])
        ),
        "run_id": report["run_id"],
        **_catalog_metadata(report.get("catalog")),
    }


def _catalog_metadata(entry: dict | None) -> dict:
    if not entry:
        return {}
    out = {"catalog_table": f"{entry['database']}.{entry['catalog_table']}"}
    if entry.get("partitions") is not None:
        out["catalog_partitions"] = entry["partitions"]
    return out


def build_source_assets(settings: LakeSettings, source: SourceSettings) -> list:
    partitions = source_partitions(source)
    slug = source.slug
    raw_key = AssetKey([slug, RAW_ARCHIVE])
    raw = AssetSpec(
        key=raw_key,
        partitions_def=partitions,
        group_name=slug,
        kinds={"json"},
        description=(
            f"Raw Segment messages of source `{source.id}`, gzipped JSON lines by received hour: "
            f"`{layout.join(settings.archive_root, source.id)}/day=YYYY-MM-DD/hr=HH/*.jsonl.gz`."
        ),
    )
    tables = known_tables(settings, source)
    table_specs = [
        AssetSpec(
            key=AssetKey([slug, t]),
            deps=[raw_key],
            partitions_def=partitions,
            group_name=slug,
            kinds={"parquet", "spark"},
            skippable=True,  # an hour may have no event of this type
            description=f"Lake table `{t}` of source `{source.id}` (typed Parquet, hourly).",
        )
        for t in tables
    ]
    side_specs = [
        AssetSpec(
            key=AssetKey([slug, QUARANTINE]), deps=[raw_key], partitions_def=partitions,
            group_name=slug, kinds={"parquet"},
            description="Lines and values that could not be written as they are, with reasons.",
        ),
        AssetSpec(
            key=AssetKey([slug, SYNC_REPORTS]), deps=[raw_key], partitions_def=partitions,
            group_name=slug, kinds={"json"},
            description="The sync's reconciliation: lines_in = rows + duplicates + quarantined.",
        ),
    ]
    declared = {s.key for s in table_specs}

    @multi_asset(
        name=f"{slug}_lake_sync",
        specs=table_specs + side_specs,
        partitions_def=partitions,
        backfill_policy=BackfillPolicy.multi_run(settings.automation.backfill_hours_per_run),
        check_specs=_check_specs(slug, tables),
        can_subset=False,
        pool="spark_local",
    )
    def lake_sync(context: AssetExecutionContext, compute: SparkCompute):
        hours = [str(layout.ArchiveHour.parse(k)) for k in context.partition_keys]
        request = SyncRequest(
            lake_root=settings.lake_root,
            archive_root=settings.archive_root,
            source_id=source.id,
            source_dir=source.lake_dir,
            database=source.database,
            date_layout=source.date_layout,
            hours=tuple(hours),
            run_id=context.run_id,
            max_message_bytes=settings.sync.max_message_bytes,
            max_depth=settings.sync.max_depth,
            replay=len(hours) > 1 or context.has_tag("dagster/backfill"),
            table_prefix=source.effective_table_prefix,
            catalog=settings.catalog_config(),
            dedup_lookback_hours=settings.sync.dedup_lookback_days * 24,
        )
        context.log.info(f"syncing {source.id} hours {hours[0]} .. {hours[-1]}")
        try:
            result = compute.run_sync(request, context=context)
        except SyncError as e:
            # Report the failed reconciliation as a check, then fail the run: nothing was
            # committed, so there is no materialization to attach data to.
            yield completeness_result(slug, None, str(e))
            for t in tables:
                yield from table_check_results(slug, t, None)
            raise
        src = result.source
        for name, report in result.tables.items():
            key = AssetKey([slug, name])
            metadata = _table_metadata(report, settings, source)
            if key in declared:
                yield MaterializeResult(asset_key=key, metadata=metadata)
            else:
                for h in hours:
                    context.log_event(
                        AssetMaterialization(
                            asset_key=key, partition=layout.ArchiveHour.parse(h).partition_key,
                            metadata=metadata,
                            description="new table: it becomes an asset at the next reload",
                        )
                    )
        for t in tables:
            yield from table_check_results(slug, t, result.tables.get(t))
        yield completeness_result(slug, src)
        yield MaterializeResult(
            asset_key=AssetKey([slug, QUARANTINE]),
            metadata={
                "lines_quarantined": src["lines_quarantined"],
                "values_quarantined": src["values_quarantined"],
                "path": MetadataValue.path(
                    layout.join(settings.lake_root, "quarantine", source.lake_dir)
                ),
            },
        )
        yield MaterializeResult(
            asset_key=AssetKey([slug, SYNC_REPORTS]),
            metadata={
                "lines_in": src["lines_in"],
                "messages_written": src["messages_written"],
                "duplicates": src["duplicates"],
                "cross_hour_duplicates": src.get("cross_hour_duplicates", 0),
                "lines_quarantined": src["lines_quarantined"],
                "values_quarantined": src["values_quarantined"],
                "tables": src["tables"],
                "replay": src["replay"],
                "replay_from": src["replay_from"] or "",
                "replay_to": src["replay_to"] or "",
                "hours_synced": MetadataValue.json(src["hours_synced"]),
                "warning": src.get("warning") or "",
                "duration_mins": src["duration_mins"],
            },
        )

    return [raw, lake_sync]
