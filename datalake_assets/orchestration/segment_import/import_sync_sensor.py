"""The run-status sensor ``<slug>_segment_import_sync_sensor``: after each successful import
run, requests the sync of the hours it changed that the archive sensor will not see again."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from dagster import (
    AssetKey,
    DagsterEventType,
    DagsterRunStatus,
    RunRequest,
    RunStatusSensorContext,
    SensorDefinition,
    SkipReason,
    run_status_sensor,
)

from datalake_assets.ingest.segment_import import hour_ranges
from datalake_assets.orchestration.automation import archive_sensor as sn
from datalake_assets.orchestration.automation import sensor_toolkit as kit
from datalake_assets.orchestration.segment_import.import_asset import (
    IMPORT_ASSET,
    SYNC_PRIORITY,
    import_job_name,
    import_sync_sensor_name,
)
from datalake_assets.orchestration.sync import sync_job as sj
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.settings.orchestration_section import AutomationSettings
from datalake_assets.spec.layout import ArchiveHour

IMPORT_TRIGGER = "segment_import"  # TRIGGER_TAG of the syncs requested after an import run
IMPORT_RUN_TAG = "datalake/import_run"
# The run tags of a single-run backfill of a partition range (Dagster's documented tag names;
# its constants live in the private dagster._core.storage.tags).
ASSET_PARTITION_RANGE_START_TAG = "dagster/asset_partition_range_start"
ASSET_PARTITION_RANGE_END_TAG = "dagster/asset_partition_range_end"
HANDOFF_MARGIN_HOURS = 2  # hours this close to the archive sensor's window: requested here too


def changed_hours_of_run(instance: Any, run_id: str, key: AssetKey) -> list[ArchiveHour]:
    """The ``hours_changed`` that a run's materializations of ``key`` recorded."""
    conn = instance.get_records_for_run(run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION)
    hours: set[ArchiveHour] = set()
    for record in conn.records:
        mat = record.event_log_entry.asset_materialization
        if mat is None or mat.asset_key != key or "hours_changed" not in mat.metadata:
            continue
        hours.update(ArchiveHour.parse(h) for h in mat.metadata["hours_changed"].value)
    return sorted(hours)


def handoff_hour(now: datetime, automation: AutomationSettings) -> ArchiveHour:
    """The archive sensor sees (again) every hour from about here on; the import path syncs
    the hours before it (with a margin of overlap, never a gap)."""
    return ArchiveHour.of(now - timedelta(hours=automation.recheck_hours - HANDOFF_MARGIN_HOURS))


def sync_requests_after_import(
    source: SourceSettings,
    hours: Sequence[ArchiveHour],
    *,
    run_id: str,
    now: datetime,
    automation: AutomationSettings,
) -> tuple[list[RunRequest], list[ArchiveHour]]:
    """``(run requests of <slug>_sync_job, hours left to the archive sensor)`` for the hours an
    import run changed. Hours before the source's start (no partition) are not requested."""
    start = ArchiveHour.parse(source.start)
    limit = min(handoff_hour(now, automation), ArchiveHour.of(now))  # the open hour: not yet
    wanted = [h for h in hours if start <= h < limit]
    left = [h for h in hours if h >= limit]
    tags = {
        kit.TRIGGER_TAG: IMPORT_TRIGGER,
        kit.PRIORITY_TAG: SYNC_PRIORITY,
        IMPORT_RUN_TAG: run_id,
    }
    requests = []
    for first, last in hour_ranges(wanted, automation.backfill_hours_per_run):
        run_key = f"{source.id}:import:{run_id}:{first}"
        if first == last:
            requests.append(
                RunRequest(run_key=run_key, partition_key=first.partition_key, tags=tags)
            )
        else:
            requests.append(
                RunRequest(
                    run_key=run_key,
                    tags={
                        **tags,
                        ASSET_PARTITION_RANGE_START_TAG: first.partition_key,
                        ASSET_PARTITION_RANGE_END_TAG: last.partition_key,
                    },
                )
            )
    return requests, left


def build_import_sync_sensor(
    settings: LakeSettings,
    source: SourceSettings,
    import_job: kit.AssetJob,
    sync_job: kit.AssetJob,
    *,
    clock: kit.Clock = kit.utc_now,
) -> SensorDefinition:
    auto = settings.automation
    key = AssetKey([source.slug, IMPORT_ASSET])

    @run_status_sensor(
        name=import_sync_sensor_name(source),
        run_status=DagsterRunStatus.SUCCESS,
        monitored_jobs=[import_job],
        request_job=sync_job,
        minimum_interval_seconds=auto.interval_seconds,
        default_status=kit.sensor_status(auto),
        description=(
            f"After each successful {import_job_name(source)} run, requests "
            f"{sj.job_name(source)} for the hours it changed that are older than the archive "
            f"sensor's re-check window ({auto.recheck_hours} h)."
        ),
    )
    def import_sync_sensor(context: RunStatusSensorContext):
        run = context.dagster_run
        hours = changed_hours_of_run(context.instance, run.run_id, key)
        requests, left = sync_requests_after_import(
            source, hours, run_id=run.run_id, now=kit.clock_time(clock), automation=auto
        )
        context.log.info(
            f"import run {run.run_id} changed {len(hours)} hours: {len(requests)} sync runs "
            f"requested, {len(left)} recent hours left to {sn.sensor_name(source)}"
        )
        if not requests:
            return SkipReason(
                f"import run {run.run_id}: no hour to sync here "
                f"({len(hours)} changed, {len(left)} left to the archive sensor)"
            )
        return requests

    return import_sync_sensor
