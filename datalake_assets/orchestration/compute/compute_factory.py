"""The compute resource of ``[compute] backend``: the one ``SparkCompute`` the code location's
assets and jobs run their sync on (``spark_compute.py`` says what it is)."""

from __future__ import annotations

from datalake_assets.orchestration.compute.spark_compute import LocalSparkCompute, SparkCompute
from datalake_assets.settings import LakeSettings


def build_compute(settings: LakeSettings, quiet: bool = False) -> SparkCompute:
    """The compute resource of ``[compute] backend``: local Spark, an EMR cluster's steps,
    EMR Serverless job runs or Databricks runs (the assets are the same). ``quiet``: a local
    session logs errors only (a process printing to a terminal: the open hour's loop)."""
    c = settings.compute
    if c.backend == "local":
        return LocalSparkCompute.from_settings(settings, quiet=quiet)
    waits = {
        "submit_timeout_s": float(c.submit_timeout_s),
        "run_timeout_s": float(c.run_timeout_s),
        "poll_interval_s": float(c.poll_interval_s),
        "conf": dict(c.conf),
    }
    if c.backend == "databricks":
        from datalake_assets.orchestration.compute.databricks import DatabricksSparkCompute

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
    from datalake_assets.orchestration.compute.emr_serverless import EmrServerlessCompute
    from datalake_assets.orchestration.compute.emr_steps import EmrSparkCompute

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
