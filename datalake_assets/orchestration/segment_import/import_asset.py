"""The Segment import's asset ``[<slug>, segment_import]`` (daily partitions: the received
day of a Segment day folder), its job, and the names and priorities both import sensors share
(``import_definitions.py`` says how they fit together)."""

from __future__ import annotations

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    AssetsDefinition,
    DailyPartitionsDefinition,
    MaterializeResult,
    MetadataValue,
    asset,
    define_asset_job,
)

from datalake_assets.ingest.segment_import import SegmentImporter
from datalake_assets.ingest.segment_layout import day_ms_of, segment_source_dir
from datalake_assets.ingest.segment_listing import SegmentLister
from datalake_assets.orchestration.automation import sensor_toolkit as kit
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.spec import layout
from datalake_assets.spec.azure_uri import is_azure
from datalake_assets.spec.layout import ArchiveHour

IMPORT_ASSET = "segment_import"
CHECK_ALL_FILES = "all_files_imported"
# Imports and the syncs they lead to share the backfills' priority: the archive sensor's hourly
# syncs (priority 1) go first, and a long history interleaves imports and syncs (first come,
# first served) instead of queueing every import before the first sync.
IMPORT_PRIORITY = "0"
SYNC_PRIORITY = "0"


def import_job_name(source: SourceSettings) -> str:
    return f"{source.slug}_segment_import_job"


def import_sensor_name(source: SourceSettings) -> str:
    return f"{source.slug}_segment_import_sensor"


def import_sync_sensor_name(source: SourceSettings) -> str:
    return f"{source.slug}_segment_import_sync_sensor"


def import_partitions(source: SourceSettings) -> DailyPartitionsDefinition:
    """Received days from the source's start; today included (its folder is being written)."""
    return DailyPartitionsDefinition(
        start_date=ArchiveHour.parse(source.start).day, timezone="UTC", end_offset=1
    )


# ----------------------------------------------------------------------------------- the asset


def build_import_asset(
    settings: LakeSettings, source: SourceSettings, lister: SegmentLister | None = None
) -> AssetsDefinition:
    key = AssetKey([source.slug, IMPORT_ASSET])
    folder = segment_source_dir(source.segment_archive, source.segment_source_id)

    @asset(
        key=key,
        partitions_def=import_partitions(source),
        group_name=source.slug,
        kinds={("azure" if is_azure(folder) else "s3") if "://" in folder else "json"},
        check_specs=[
            AssetCheckSpec(
                CHECK_ALL_FILES,
                asset=key,
                description="Every file of the day folder was read to its end and imported",
            )
        ],
        description=(
            f"Segment's S3-destination archive {folder}/<day epoch ms>/*.gz, re-partitioned "
            f"by receivedAt hour into {layout.join(settings.archive_root, source.id)}."
        ),
    )
    def segment_import(context):  # an AssetExecutionContext (a string annotation is refused)
        importer = SegmentImporter.for_source(settings.archive_root, source, lister=lister)
        report = importer.import_day(context.partition_key)
        s = report.summary()
        for f in report.failures:
            context.log.error(f"{f.day}/{f.name} not imported: {f.error}")
        context.log.info(
            f"{s['files']} files: {s['files_imported']} imported, {s['files_unchanged']} "
            f"unchanged, {s['files_failed']} failed; {s['lines_in']} lines; "
            f"{len(s['hours_changed'])} archive hours changed"
        )
        failures = MetadataValue.json(s["failures"])
        return MaterializeResult(
            metadata={
                "files": s["files"],
                "files_imported": s["files_imported"],
                "files_unchanged": s["files_unchanged"],
                "files_failed": s["files_failed"],
                "lines_in": s["lines_in"],
                "unrouted": MetadataValue.json(s["unrouted"]),
                "hours_changed": MetadataValue.json(s["hours_changed"]),
                "ignored_files": s["ignored_files"],
                "path": MetadataValue.path(f"{folder}/{day_ms_of(context.partition_key)}"),
            },
            check_results=[
                AssetCheckResult(
                    check_name=CHECK_ALL_FILES,
                    passed=not report.failures,
                    severity=AssetCheckSeverity.ERROR,
                    metadata={"failures": failures},
                )
            ],
        )

    return segment_import


def build_import_job(source: SourceSettings, import_asset: AssetsDefinition) -> kit.AssetJob:
    return define_asset_job(
        import_job_name(source),
        selection=[import_asset.key],
        description=f"Import received days of Segment's archive into source {source.id}.",
    )
