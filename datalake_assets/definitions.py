"""The code location: every source's assets, its sync job and archive sensor, the import of
Segment's archive for sources that have one, the compute resource."""

from __future__ import annotations

from dagster import Definitions

from datalake_assets.assets import build_source_assets
from datalake_assets.import_sensors import build_import_automation
from datalake_assets.resources import LocalSparkCompute, SparkCompute
from datalake_assets.sensors import ArchiveLister, Clock, build_automation, utc_now
from datalake_assets.settings import LakeSettings, load_settings


def build_definitions(
    settings: LakeSettings | None = None,
    *,
    clock: Clock = utc_now,
    lister: ArchiveLister | None = None,
) -> Definitions:
    """``clock`` and ``lister`` reach the archive sensors (tests, benchmarks)."""
    settings = settings or load_settings()
    assets, jobs, sensors = [], [], []
    for source in settings.sources:
        source_assets = build_source_assets(settings, source)
        assets.extend(source_assets)
        job, archive_sensor = build_automation(
            settings, source, source_assets, clock=clock, lister=lister
        )
        jobs.append(job)
        sensors.append(archive_sensor)
        if source.segment_archive:
            more_assets, more_jobs, more_sensors = build_import_automation(
                settings, source, job, clock=clock)
            assets.extend(more_assets)
            jobs.extend(more_jobs)
            sensors.extend(more_sensors)
    resources = {"compute": build_compute(settings)}
    return Definitions(assets=assets, jobs=jobs, sensors=sensors, resources=resources)


def build_compute(settings: LakeSettings) -> SparkCompute:
    """The compute resource of ``[compute] backend``: local Spark, an EMR cluster's steps or
    EMR Serverless job runs (the assets are the same)."""
    c = settings.compute
    if c.backend == "local":
        return LocalSparkCompute(
            master=settings.spark.master,
            driver_memory=settings.spark.driver_memory,
            conf={
                "spark.sql.shuffle.partitions": str(settings.spark.shuffle_partitions),
                **settings.spark.extra_conf,
                **settings.catalog_config().spark_conf(),  # a Hive catalog needs the session
            },
        )
    from datalake_assets.emr import EmrServerlessCompute, EmrSparkCompute

    common = {
        "region": c.region, "staging_prefix": c.staging_prefix,
        "submit_timeout_s": float(c.submit_timeout_s), "run_timeout_s": float(c.run_timeout_s),
        "poll_interval_s": float(c.poll_interval_s), "conf": dict(c.conf),
        "endpoint_url": c.endpoint_url,
    }
    if c.backend == "emr":
        return EmrSparkCompute(cluster_id=c.cluster_id, replay_cluster_id=c.replay_cluster_id,
                               deploy_mode=c.deploy_mode, **common)
    return EmrServerlessCompute(application_id=c.application_id,
                                execution_role_arn=c.execution_role_arn, log_uri=c.log_uri,
                                **common)


defs = build_definitions()
