"""Segment-archive import in Dagster, for each source with a ``segment_archive``.

* Asset ``[<slug>, segment_import]``, daily partitions (the *received* day of Segment's day
  folder), job ``<slug>_segment_import_job``: imports that day folder's new or changed files
  (``segment_import.SegmentImporter.import_day``). Its materialization lists the archive hours
  whose content changed (``hours_changed``); the check ``all_files_imported`` fails for files
  that could not be read (nothing of them is committed; re-materialize the day to retry).
* ``<slug>_segment_import_sensor`` lists Segment's day folders from its cursor (a local listing
  of the day folders at or after it; on S3 ``StartAfter`` the cursor's day), fingerprints each
  day's files (``lake.listing.fingerprint``: names, sizes, ETags or mtimes) and requests the import
  job for each day folder that is new or changed, oldest first, at most ``max_queued_runs``
  queued at a time. Like the archive sensor, it lists again the day folders of the last
  ``recheck_hours`` (Segment writes a day's files during that day, a few a bit later), and
  its cursor holds one fingerprint per day since then.
* ``<slug>_segment_import_sync_sensor`` (a run-status sensor) closes the loop: after each
  successful import run it requests ``<slug>_sync_job`` for the changed hours that the archive
  sensor will not see any more (those before its re-check window, ``recheck_hours``, less a
  margin of ``HANDOFF_MARGIN_HOURS``): one run per contiguous range of at most
  ``backfill_hours_per_run`` hours (range tags: one Spark job for a day). Recent hours are left
  to the archive sensor, which sees their new files itself, so they are not synced twice.

So importing years of Segment archive is: set ``segment_archive`` and ``start``, let the import
sensor work through the day folders (or backfill ``<slug>/segment_import`` in the UI), and every
imported hour is synced without a manual step.
Modules: ``import_asset`` (the asset, its job, the shared names), ``import_day_sensor`` (the
import sensor), ``import_sync_sensor`` (the syncs after an import run); here, all of them for
every source.
"""

from __future__ import annotations

from collections.abc import Mapping

from dagster import AssetsDefinition, Definitions, SensorDefinition

from datalake_assets.ingest.segment_listing import SegmentLister
from datalake_assets.orchestration.automation.sensor_toolkit import AssetJob, Clock, utc_now
from datalake_assets.orchestration.segment_import.import_asset import (
    build_import_asset,
    build_import_job,
)
from datalake_assets.orchestration.segment_import.import_day_sensor import build_import_sensor
from datalake_assets.orchestration.segment_import.import_sync_sensor import build_import_sync_sensor
from datalake_assets.orchestration.sync.lake_state import LakeState
from datalake_assets.orchestration.sync.sync_job import job_name
from datalake_assets.settings import LakeSettings


def build_segment_import_definitions(
    settings: LakeSettings,
    state: LakeState,
    sync_jobs: Mapping[str, AssetJob],
    *,
    clock: Clock = utc_now,
    lister: SegmentLister | None = None,
) -> Definitions:
    """For each source with a ``segment_archive``: the import asset, its job and both sensors
    (the second requests the source's sync job, found by name in ``sync_jobs``)."""
    assets: list[AssetsDefinition] = []
    jobs: list[AssetJob] = []
    sensors: list[SensorDefinition] = []
    for source_settings in settings.sources:
        source = state.effective(source_settings)  # start resolved ("auto")
        if not source.segment_archive:
            continue
        import_asset = build_import_asset(settings, source, lister)
        job = build_import_job(source, import_asset)
        assets.append(import_asset)
        jobs.append(job)
        sensors += [
            build_import_sensor(settings, source, job, clock=clock, lister=lister),
            build_import_sync_sensor(
                settings, source, job, sync_jobs[job_name(source)], clock=clock
            ),
        ]
    return Definitions(assets=assets, jobs=jobs, sensors=sensors)
