"""The automation concern's definitions: what requests the syncs (an archive sensor per source,
or one sensor and job for all sources: ``[automation] sensor_runs``) and what reloads the code
location when the lake has new tables (the definitions sensor and its job)."""

from __future__ import annotations

from collections.abc import Mapping

from dagster import Definitions

from datalake_assets.lake.listing import ArchiveLister
from datalake_assets.orchestration.automation.archive_sensor import build_archive_sensor
from datalake_assets.orchestration.automation.batch_sync import (
    BatchSource,
    build_batch_job,
    build_batch_sensor,
)
from datalake_assets.orchestration.automation.definitions_reload import (
    build_definitions_sensor,
    reload_job,
)
from datalake_assets.orchestration.automation.sensor_toolkit import AssetJob, Clock, utc_now
from datalake_assets.orchestration.sync.lake_state import LakeState
from datalake_assets.orchestration.sync.sync_job import job_name
from datalake_assets.settings import LakeSettings
from datalake_assets.settings.orchestration_section import sensor_runs_batched


def build_automation_definitions(
    settings: LakeSettings,
    state: LakeState,
    sync_jobs: Mapping[str, AssetJob],
    *,
    clock: Clock = utc_now,
    lister: ArchiveLister | None = None,
) -> Definitions:
    """The sensors requesting ``sync_jobs`` (by name, ``build_sync_definitions``' jobs) and
    the definitions sensor comparing the lake with ``state``, the state this load is built
    from. ``clock`` and ``lister`` reach the archive sensors (tests, benchmarks)."""
    jobs, sensors = [reload_job], [build_definitions_sensor(settings, state)]
    batched = sensor_runs_batched(settings.automation, settings.compute)
    batch_sources = []
    for source_settings in settings.sources:
        source = state.effective(source_settings)  # start resolved ("auto")
        if batched:
            batch_sources.append(BatchSource(source, tuple(state.source(source).tables)))
        else:
            job = sync_jobs[job_name(source)]
            sensors.append(build_archive_sensor(settings, source, job, clock=clock, lister=lister))
    if batch_sources:
        batch_job = build_batch_job(settings, batch_sources)
        jobs.append(batch_job)
        sensors.append(
            build_batch_sensor(settings, batch_sources, batch_job, clock=clock, lister=lister)
        )
    return Definitions(jobs=jobs, sensors=sensors)
