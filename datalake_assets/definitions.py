"""The code location: every source's assets, its sync job and archive sensor (or one sensor and
job for all sources: ``[automation] sensor_runs``), the import of
Segment's archive for sources that have one, the compute resource, the definitions sensor, and
the privacy jobs (``forget_person``, its request-file sensor, the nightly summary compaction).

How the graph stays one graph across processes (docs/concepts/dagster-model.md, "Event types
and the asset graph"):
``defs`` reads the lake's state (each source's tables and partition start) once, when the code
server loads it for the webserver and the daemon, and attaches it to the definitions as
reconstruction metadata. Dagster stores that metadata with every run it creates from this load,
and a run worker rebuilds the definitions from it (``DefinitionsLoadType.RECONSTRUCTION``)
instead of reading the lake again. So a run's graph is always the graph its launcher showed,
even if syncs discovered tables since. ``reload.py`` brings new tables in with a reload.
"""

from __future__ import annotations

from dagster import Definitions, definitions, in_process_executor

# Dagster 1.13 documents reconstruction metadata (Definitions.with_reconstruction_metadata,
# preview) but exports the load context only from this module; one import, in one place.
from dagster._core.definitions.definitions_load_context import (
    DefinitionsLoadContext,
    DefinitionsLoadType,
)

from datalake_assets.orchestration.assets import build_source_assets
from datalake_assets.orchestration.batch_sync import (
    BatchSource,
    build_batch_job,
    build_batch_sensor,
)
from datalake_assets.orchestration.import_sensors import build_import_automation
from datalake_assets.orchestration.lake_state import LakeState, read_lake_state
from datalake_assets.orchestration.maintenance import build_maintenance_automation
from datalake_assets.orchestration.models import build_model_assets, build_models_sensor
from datalake_assets.orchestration.privacy_jobs import build_privacy_automation
from datalake_assets.orchestration.reload import build_definitions_sensor, reload_job
from datalake_assets.orchestration.resources import LocalSparkCompute, SparkCompute
from datalake_assets.orchestration.sensors import (
    ArchiveLister,
    Clock,
    build_archive_sensor,
    build_sync_job,
    find_lake_sync,
    utc_now,
)
from datalake_assets.settings import LakeSettings, load_settings
from datalake_assets.settings.orchestration_section import sensor_runs_batched

STATE_KEY = "datalake/lake_state"  # the reconstruction metadata key of the LakeState


def build_definitions(
    settings: LakeSettings | None = None,
    *,
    state: LakeState | None = None,
    clock: Clock = utc_now,
    lister: ArchiveLister | None = None,
) -> Definitions:
    """The definitions for ``state`` (default: the lake's state now). ``clock`` and ``lister``
    reach the archive sensors (tests, benchmarks)."""
    settings = settings or load_settings()
    state = state or read_lake_state(settings, clock)
    assets, jobs, sensors = [], [reload_job], [build_definitions_sensor(settings, state)]
    batched = sensor_runs_batched(settings.automation, settings.compute)
    batch_sources, model_sources = [], []
    for source_settings in settings.sources:
        source = state.effective(source_settings)  # start resolved ("auto")
        source_state = state.source(source)
        source_assets = build_source_assets(settings, source, source_state)
        assets.extend(source_assets)
        model_assets = build_model_assets(settings, source, list(source_state.tables))
        assets.extend(model_assets)
        if model_assets:
            model_sources.append(source)
        job = build_sync_job(source, find_lake_sync(source, source_assets))
        jobs.append(job)
        if batched:
            batch_sources.append(BatchSource(source, tuple(source_state.tables)))
        else:
            sensors.append(build_archive_sensor(settings, source, job, clock=clock, lister=lister))
        if source.segment_archive:
            more_assets, more_jobs, more_sensors = build_import_automation(
                settings, source, job, clock=clock
            )
            assets.extend(more_assets)
            jobs.extend(more_jobs)
            sensors.extend(more_sensors)
    if batch_sources:
        batch_job = build_batch_job(settings, batch_sources)
        jobs.append(batch_job)
        sensors.append(
            build_batch_sensor(settings, batch_sources, batch_job, clock=clock, lister=lister)
        )
    sensors.extend(build_models_sensor(settings, model_sources))
    privacy_jobs, privacy_sensors, schedules = build_privacy_automation(settings, clock=clock)
    jobs.extend(privacy_jobs)
    sensors.extend(privacy_sensors)
    maintenance_jobs, maintenance_schedules = build_maintenance_automation(settings)
    jobs.extend(maintenance_jobs)
    schedules = [*schedules, *maintenance_schedules]
    resources = {"compute": build_compute(settings)}
    return Definitions(
        assets=assets,
        jobs=jobs,
        sensors=sensors,
        schedules=schedules,
        resources=resources,
        # every job here is one step (a sync, an import): no step process per run (the UI's
        # Materialize runs the implicit asset job; <slug>_sync_job sets it too)
        executor=in_process_executor,
    ).with_reconstruction_metadata({STATE_KEY: state.to_json()})


def build_compute(settings: LakeSettings) -> SparkCompute:
    """The compute resource of ``[compute] backend``: local Spark, an EMR cluster's steps,
    EMR Serverless job runs or Databricks runs (the assets are the same)."""
    c = settings.compute
    if c.backend == "local":
        return LocalSparkCompute.from_settings(settings)
    waits = {
        "submit_timeout_s": float(c.submit_timeout_s),
        "run_timeout_s": float(c.run_timeout_s),
        "poll_interval_s": float(c.poll_interval_s),
        "conf": dict(c.conf),
    }
    if c.backend == "databricks":
        from datalake_assets.orchestration.databricks import DatabricksSparkCompute

        return DatabricksSparkCompute(
            host=c.databricks_host,
            cluster_id=c.databricks_cluster_id,
            policy_id=c.databricks_policy_id,
            spark_version=c.databricks_spark_version,
            node_type=c.databricks_node_type,
            max_workers=c.databricks_max_workers,
            package_dir=c.databricks_package_dir,
            libraries=list(c.databricks_libraries),
            **waits,
        )
    from datalake_assets.orchestration.emr_serverless import EmrServerlessCompute
    from datalake_assets.orchestration.emr_steps import EmrSparkCompute

    common = {
        "region": c.region,
        "staging_prefix": c.staging_prefix,
        "endpoint_url": c.endpoint_url,
        **waits,
    }
    if c.backend == "emr":
        return EmrSparkCompute(
            cluster_id=c.cluster_id,
            replay_cluster_id=c.replay_cluster_id,
            deploy_mode=c.deploy_mode,
            **common,
        )
    return EmrServerlessCompute(
        application_id=c.application_id,
        execution_role_arn=c.execution_role_arn,
        log_uri=c.log_uri,
        **common,
    )


def loaded_state(settings: LakeSettings) -> LakeState:
    """The state to build from: the one carried by the run (a run worker rebuilding the
    definitions its run was created from), else the lake's, read now (a code server loading)."""
    context = DefinitionsLoadContext.get()
    if context.load_type == DefinitionsLoadType.RECONSTRUCTION:
        carried = context.reconstruction_metadata.get(STATE_KEY)
        if carried is not None:
            return LakeState.from_json(carried)
    return read_lake_state(settings)


@definitions
def defs() -> Definitions:
    """What ``dagster dev -w workspace.yaml``, ``dg`` and the run workers load."""
    settings = load_settings()
    return build_definitions(settings, state=loaded_state(settings))
