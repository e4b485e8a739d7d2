"""The table format's maintenance as a Dagster job on a schedule (``table_maintenance``):
each source's tables, under the source's lock (``lake/formats/maintain.py``). Only a format
that keeps replaced versions (Iceberg's snapshots) has one; its retention is
``[iceberg] retention_hours``."""

from typing import Any

from dagster import (
    MetadataValue,
    OpExecutionContext,
    ScheduleDefinition,
    in_process_executor,
    job,
    op,
)

from datalake_assets.lake.formats import FormatConfig, SourceTables, table_format
from datalake_assets.lake.formats.maintain import maintain_source
from datalake_assets.orchestration.sensors import schedule_status
from datalake_assets.settings import LakeSettings

MAINTENANCE_JOB = "table_maintenance"
MAINTENANCE_SCHEDULE = "table_maintenance_nightly"
MAINTENANCE_CRON = "15 4 * * *"  # UTC, after the night's syncs and the identity compaction


def build_maintenance_automation(settings: LakeSettings) -> tuple[list[Any], list[Any]]:
    """``([job], [schedule])``, or nothing when the lake's format keeps no old versions."""
    config = FormatConfig.of_settings(settings)
    if not table_format(config, settings.lake_root).keeps_versions:
        return [], []

    @op(name="maintain_tables",
        description="Expires each table's snapshots older than [iceberg] retention_hours and "
                    "deletes the files no snapshot references (a killed sync's, replaced ones).")
    def maintain_op(context: OpExecutionContext) -> None:
        done: dict[str, Any] = {}
        for s in settings.sources:
            src = SourceTables(s.lake_dir, s.database, s.effective_table_prefix, s.date_layout)
            tables = maintain_source(settings.lake_root, config, src, f"maintain-{context.run_id}")
            files = sum(t["orphan_files_removed"] for t in tables.values())
            context.log.info(f"{s.id}: {len(tables)} tables; "
                             f"{sum(t['snapshots_expired'] for t in tables.values())} snapshots "
                             f"expired, {files} unreferenced files deleted")
            done[s.id] = tables
        context.add_output_metadata({"sources": MetadataValue.json(done)})

    @job(name=MAINTENANCE_JOB, executor_def=in_process_executor,
         tags={"datalake/kind": "maintenance"},
         description="Table format maintenance: old snapshots expired, unreferenced files "
                     "deleted, so storage does not grow with every replay.")
    def table_maintenance() -> None:
        maintain_op()

    schedule = ScheduleDefinition(
        name=MAINTENANCE_SCHEDULE, job=table_maintenance, cron_schedule=MAINTENANCE_CRON,
        execution_timezone="UTC", default_status=schedule_status(settings.automation),
        description="Nightly: the table format's maintenance (lake/formats/maintain.py).")
    return [table_maintenance], [schedule]
