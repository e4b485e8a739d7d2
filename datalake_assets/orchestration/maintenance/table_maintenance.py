"""The table format's maintenance as a Dagster job on a schedule (``table_maintenance``):
each source's tables, under the source's lock. Only a format that keeps replaced versions
(Iceberg's snapshots) has one. First the compaction of cold data (``lake/formats/
compaction.py``: ``[iceberg] compact_after_hours``, ``target_file_mb``), then the expiry
(``lake/formats/maintain.py``: ``[iceberg] retention_hours``), which deletes the replaced
files once older than the retention."""

from typing import Any

from dagster import (
    AssetKey,
    AssetObservation,
    Definitions,
    In,
    MetadataValue,
    Nothing,
    OpExecutionContext,
    ScheduleDefinition,
    in_process_executor,
    job,
    op,
)

from datalake_assets.lake.formats import SourceTables, table_format
from datalake_assets.lake.formats.compaction import compact_source, report_lines, write_report
from datalake_assets.lake.formats.maintain import maintain_source
from datalake_assets.orchestration.automation.sensor_toolkit import schedule_status
from datalake_assets.settings import LakeSettings
from datalake_assets.settings.formats_section import FormatConfig

MAINTENANCE_JOB = "table_maintenance"
MAINTENANCE_SCHEDULE = "table_maintenance_nightly"
MAINTENANCE_CRON = "15 4 * * *"  # UTC, after the night's syncs and the identity compaction


def build_maintenance_automation(settings: LakeSettings) -> tuple[list[Any], list[Any]]:
    """``([job], [schedule])``, or nothing when the lake's format keeps no old versions."""
    config = FormatConfig.of_settings(settings)
    if not table_format(config, settings.lake_root).keeps_versions:
        return [], []

    @op(
        name="compact_tables",
        description="Rewrites the small files of each table's cold hours (older than [iceberg] "
        "compact_after_hours) into files of about target_file_mb, one commit a "
        "table (docs/concepts/compaction.md).",
    )
    def compact_op(context: OpExecutionContext) -> None:
        done: dict[str, Any] = {}
        for s in settings.sources:
            src = SourceTables(s.lake_dir, s.database, s.effective_table_prefix, s.date_layout)
            report = compact_source(settings.lake_root, config, src, f"compact-{context.run_id}")
            location = write_report(settings.lake_root, report)
            for line in report_lines(s.id, report):
                context.log.info(line)
            # on each table's own asset page (Events), not only in this run's output
            for t in report.tables:
                context.log_event(
                    AssetObservation(
                        AssetKey([s.slug, t.table]),
                        metadata={
                            "compaction/files_before": t.files_before,
                            "compaction/files_after": t.files_after,
                            "compaction/bytes_before": t.bytes_before,
                            "compaction/bytes_after": t.bytes_after,
                            "compaction/partitions": MetadataValue.json(t.partitions),
                            "compaction/seconds": round(t.seconds, 2),
                            "compaction/report": location,
                        },
                    )
                )
            done[s.id] = {**report.to_json(), "report": location}
        totals = {
            k: sum(r["totals"][k] for r in done.values())
            for k in ("files_before", "files_after", "bytes_before", "bytes_after")
        }
        context.add_output_metadata({"sources": MetadataValue.json(done), **totals})

    @op(
        name="maintain_tables",
        ins={"compacted": In(Nothing)},
        description="Expires each table's snapshots older than [iceberg] retention_hours and "
        "deletes the files no snapshot references (a killed sync's, replaced ones).",
    )
    def maintain_op(context: OpExecutionContext) -> None:
        done: dict[str, Any] = {}
        for s in settings.sources:
            src = SourceTables(s.lake_dir, s.database, s.effective_table_prefix, s.date_layout)
            tables = maintain_source(settings.lake_root, config, src, f"maintain-{context.run_id}")
            files = sum(t["orphan_files_removed"] for t in tables.values())
            context.log.info(
                f"{s.id}: {len(tables)} tables; "
                f"{sum(t['snapshots_expired'] for t in tables.values())} snapshots "
                f"expired, {files} unreferenced files deleted"
            )
            done[s.id] = tables
        context.add_output_metadata({"sources": MetadataValue.json(done)})

    @job(
        name=MAINTENANCE_JOB,
        executor_def=in_process_executor,
        tags={"datalake/kind": "maintenance"},
        description="Table format maintenance: old snapshots expired, unreferenced files "
        "deleted, so storage does not grow with every replay; cold data compacted "
        "first.",
    )
    def table_maintenance() -> None:
        maintain_op(compacted=compact_op())

    schedule = ScheduleDefinition(
        name=MAINTENANCE_SCHEDULE,
        job=table_maintenance,
        cron_schedule=MAINTENANCE_CRON,
        execution_timezone="UTC",
        default_status=schedule_status(settings.automation),
        description="Nightly: the table format's maintenance (lake/formats/maintain.py).",
    )
    return [table_maintenance], [schedule]


def build_maintenance_definitions(settings: LakeSettings) -> Definitions:
    """The table maintenance job and its nightly schedule (none when the lake's format keeps
    no old versions)."""
    jobs, schedules = build_maintenance_automation(settings)
    return Definitions(jobs=jobs, schedules=schedules)
