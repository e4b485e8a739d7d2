"""Segment-archive import in Dagster, for each source with a ``segment_archive``.

* Asset ``[<slug>, segment_import]``, daily partitions (the *received* day of Segment's day
  folder), job ``<slug>_segment_import_job``: imports that day folder's new or changed files
  (``segment_import.SegmentImporter.import_day``). Its materialization lists the archive hours
  whose content changed (``hours_changed``); the check ``all_files_imported`` fails for files
  that could not be read (nothing of them is committed; re-materialize the day to retry).
* ``<slug>_segment_import_sensor`` lists Segment's day folders from its cursor (a local listing
  of the day folders at or after it; on S3 ``StartAfter`` the cursor's day), fingerprints each
  day's files (``sensors.fingerprint``: names, sizes, ETags or mtimes) and requests the import
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
import sensor), ``import_sync_sensor`` (the syncs after an import run); here, all of a source.
"""

from __future__ import annotations

from dagster import AssetsDefinition, SensorDefinition

from datalake_assets.ingest.segment_listing import SegmentLister
from datalake_assets.orchestration import sensors as sn
from datalake_assets.orchestration.import_asset import build_import_asset, build_import_job
from datalake_assets.orchestration.import_day_sensor import build_import_sensor
from datalake_assets.orchestration.import_sync_sensor import build_import_sync_sensor
from datalake_assets.settings import LakeSettings, SourceSettings


def build_import_automation(
    settings: LakeSettings,
    source: SourceSettings,
    sync_job: sn.AssetJob,
    *,
    clock: sn.Clock = sn.utc_now,
    lister: SegmentLister | None = None,
) -> tuple[list[AssetsDefinition], list[sn.AssetJob], list[SensorDefinition]]:
    """The import asset, its job and both sensors of a source with a ``segment_archive``."""
    import_asset = build_import_asset(settings, source, lister)
    job = build_import_job(source, import_asset)
    return (
        [import_asset],
        [job],
        [
            build_import_sensor(settings, source, job, clock=clock, lister=lister),
            build_import_sync_sensor(settings, source, job, sync_job, clock=clock),
        ],
    )
