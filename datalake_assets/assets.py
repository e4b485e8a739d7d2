"""Assets per source: the raw archive (external), the lake's tables, quarantine, sync report.

Asset keys name where the data lives: ``[<source slug>, <table>]``. One multi-asset per source
materializes all its tables for a batch of hours with ONE Spark job (never one per table).

Event types first seen at runtime: the asset graph is built at load time from the tables the
lake's schema record knows, plus the standard ones. A sync that creates a new table logs a
materialization for its key at once (visible in the catalog) and the table becomes a regular
asset at the next reload of the code location (``Reload definitions`` in the UI, or restart).
"""


from dagster import (
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
from datalake_assets.transform.job import SyncRequest, read_schema_record

STANDARD_TABLES = tuple(sorted(TYPE_TABLES.values()))
QUARANTINE = "quarantine"
SYNC_REPORTS = "sync_reports"
RAW_ARCHIVE = "raw_archive"
BACKFILL_HOURS_PER_RUN = 24


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
    }


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
        backfill_policy=BackfillPolicy.multi_run(BACKFILL_HOURS_PER_RUN),
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
        )
        context.log.info(f"syncing {source.id} hours {hours[0]} .. {hours[-1]}")
        result = compute.run_sync(request)
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
                "lines_quarantined": src["lines_quarantined"],
                "values_quarantined": src["values_quarantined"],
                "tables": src["tables"],
                "hours_synced": MetadataValue.json(src["hours_synced"]),
                "warning": src.get("warning") or "",
                "duration_mins": src["duration_mins"],
            },
        )

    return [raw, lake_sync]
