"""``[automation]`` (the sensors, ``orchestration.automation``) and ``[compute]`` (where the sync's
Spark job runs: ``orchestration.compute``: local, EMR, Databricks)."""

import dataclasses
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import PlainValidator, model_validator

from datalake_assets.settings.fields import (
    AwsRegion,
    HttpUrl,
    Int,
    Match,
    OneOf,
    SettingsError,
    SparkConf,
    default_home,
    settings_model,
    string_array,
)

SENSOR_STATUSES = ("running", "stopped")
SENSOR_RUNS = ("auto", "batched", "per_source")
COMPUTE_BACKENDS = ("local", "emr", "emr_serverless", "databricks")
# What the job imports beyond the standard library and PySpark, pinned like pyproject.toml:
# installed for each Databricks task (docs/guides/emr.md installs the same on EMR nodes).
JOB_LIBRARIES = (
    "pyarrow>=16",
    "orjson>=3.9",
    "numpy>=1.26",
    "pandas>=2.2,<3",
    "pandera[pandas]>=0.20",
    "pydantic>=2.11,<3",
    "boto3>=1.34",
    "duckdb==1.5.5",
    # the driver's commit of an Iceberg lake (the default table format): pyiceberg, and
    # SQLAlchemy for its SQL catalog
    "pyiceberg==0.12.0",
    "sqlalchemy>=2,<3",
)
_REQUIREMENT_RE = re.compile(
    r"[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?"
    r"([<>=!~]=?[A-Za-z0-9.*+!-]+(,[<>=!~]=?[A-Za-z0-9.*+!-]+)*)?"
)
DEPLOY_MODES = ("client", "cluster")
_CLUSTER = "an EMR cluster id such as 'j-2AXXXXXXGAPLF'"
_S3 = r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](?:/[^\s]*)?"
# Spark settings the remote job may not take from [compute.conf]: they are set for it.
_COMPUTE_CONF_OWNED = {
    "spark.master": "is not allowed here: EMR runs Spark on YARN (or serverless): the master is "
    "not ours to set",
    "spark.submit.deployMode": "is not allowed here: set [compute] deploy_mode instead",
    "spark.submit.pyFiles": "is not allowed here: the job's package is added by the compute "
    "resource",
}


def _libraries(value: Any) -> tuple[str, ...]:
    return string_array(
        value,
        "PyPI requirements",
        _REQUIREMENT_RE,
        "invalid requirement; allowed: a PyPI name with optional extras "
        'and version bounds, e.g. "pandas>=2.2,<3"',
    )


@settings_model
class AutomationSettings:
    """The archive sensors (``orchestration/automation/archive_sensor.py``), one per source."""

    # default status of the sensors: "running" or "stopped"
    sensors: OneOf(SENSOR_STATUSES, "sensor status", "'running' or 'stopped'") = "running"
    interval_seconds: Int(10, 86400) = 60  # minimum time between two ticks of a sensor
    settle_minutes: Int(0, 1440) = 5  # an hour is synced this long after it closes
    recheck_hours: Int(1, 720) = 48  # hours this recent are listed again for late files
    max_queued_runs: Int(1, 10000) = 24  # per source: no new requests while this many runs wait
    # "batched": one sensor (datalake_archive_sensor) and ONE run per tick for every due
    # source-hour (one JVM and metastore for all; orchestration/automation/batch_sync.py); "per_source":
    # a sensor and a run per source-hour; "auto": batched with local compute, else per source
    sensor_runs: OneOf(SENSOR_RUNS, "sensor runs", "'auto', 'batched' or 'per_source'") = "auto"
    backfill_hours_per_run: Int(1, 744) = 24  # a backfill runs one Spark job per this many hours
    definitions_interval_seconds: Int(10, 86400) = 30  # how often the definitions sensor looks
    # The Dagster webserver the definitions sensor asks to reload the code location when new
    # event tables appear (GraphQL reloadRepositoryLocation). "": no automatic reload, the
    # sensor says what changed and the UI's "Reload definitions" applies it. `datalake dev`
    # sets it (DATALAKE_WEBSERVER_URL) to the server it starts.
    webserver_url: Match(
        r"https?://[^\s'\"\\]+", "URL", "http(s)://host:port of the Dagster webserver", empty=True
    ) = ""


def dagster_home(env: Mapping[str, str] | None = None) -> Path:
    """The Dagster home ``datalake dev`` uses, and where syncs run from the CLI are recorded
    (``sync_records.py``): ``$DAGSTER_HOME``, else ``<DATALAKE_HOME>/dagster_home``."""
    env = os.environ if env is None else env
    return Path(env.get("DAGSTER_HOME") or Path(default_home(env)) / "dagster_home")


BATCH_SENSOR = "datalake_archive_sensor"  # the one sensor of batched runs (batch_sync.py)


def sensor_runs_batched(automation: AutomationSettings, compute: Any) -> bool:
    """``[automation] sensor_runs``: one run per tick for all sources (``batch_sync.py``), or
    one per source-hour; "auto" batches with local compute, where every run would pay its own
    JVM and metastore start, and not with remote compute, whose runs may overlap."""
    mode = automation.sensor_runs
    return mode == "batched" or (mode == "auto" and compute.backend == "local")


def archive_sensor_name(automation: AutomationSettings, compute: Any, slug: str) -> str:
    """The sensor that requests the syncs of a source's new hours (for messages naming it)."""
    return BATCH_SENSOR if sensor_runs_batched(automation, compute) else f"{slug}_archive_sensor"


@settings_model
class ComputeSettings:
    """Where the sync's Spark job runs (``orchestration/compute/``).

    ``backend``: ``"local"`` (default: Spark in the run's process, ``[spark]``), ``"emr"`` (a
    step of the existing cluster ``cluster_id``; replays on ``replay_cluster_id`` if set) or
    ``"emr_serverless"`` (a job run of ``application_id`` as ``execution_role_arn``). The other
    keys only matter for the AWS backends; ``conf`` holds their job's ``spark.*`` settings
    (``[spark]`` is for local Spark only)."""

    backend: OneOf(COMPUTE_BACKENDS, "compute backend") = "local"
    # "" -> AWS_REGION / ~/.aws/config
    region: AwsRegion("region") = ""
    cluster_id: Match(r"j-[A-Za-z0-9]{1,64}", "cluster id", _CLUSTER, empty=True) = ""  # emr
    # emr: replays (backfills) go here; "" -> cluster_id
    replay_cluster_id: Match(r"j-[A-Za-z0-9]{1,64}", "replay cluster id", _CLUSTER, empty=True) = ""
    application_id: Match(
        r"[0-9a-z]{1,64}",
        "application id",  # emr_serverless
        "an EMR Serverless application id",
        empty=True,
    ) = ""
    # emr_serverless: the job runtime role
    execution_role_arn: Match(
        r"arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}",
        "execution role arn",
        "an IAM role ARN (arn:aws:iam::<id>:role/..)",
        empty=True,
    ) = ""
    # s3://bucket/prefix/ for job files; "" -> s3://<lake bucket>/_jobs/
    staging_prefix: Match(
        _S3, "staging prefix", "an S3 URI such as 's3://my-lake/_jobs/'", empty=True
    ) = ""
    # emr_serverless: job run logs; "" -> <staging_prefix>logs/
    log_uri: Match(_S3, "log uri", "an S3 URI such as 's3://my-lake/_jobs/logs/'", empty=True) = ""
    deploy_mode: OneOf(
        DEPLOY_MODES,
        "deploy mode",
        "'client' (the driver on the primary node) or 'cluster' (in a YARN container)",
    ) = "client"  # emr: spark-submit
    submit_timeout_s: Int(60, 7 * 86400) = 3600  # the job must start within this
    run_timeout_s: Int(60, 7 * 86400) = 4 * 3600  # and finish within this once started
    poll_interval_s: Int(1, 600) = 15
    # one endpoint for EMR, EMR Serverless and S3 (tests, gateways)
    endpoint_url: HttpUrl("endpoint url") = ""
    # the remote job's spark.* settings
    conf: SparkConf(_COMPUTE_CONF_OWNED) = dataclasses.field(default_factory=dict)
    # databricks: the workspace URL; "" -> DATABRICKS_HOST. Credentials: environment only.
    databricks_host: HttpUrl("databricks host") = ""
    # databricks: an existing cluster; "" -> a job cluster per run
    databricks_cluster_id: Match(
        r"[0-9]{4}-[0-9]{6}-[A-Za-z0-9]{4,32}",
        "cluster id",
        "a Databricks cluster id such as '0123-456789-abcd1234'",
        empty=True,
    ) = ""
    databricks_policy_id: Match(
        r"[0-9A-Za-z]{1,64}",
        "policy id",  # the job cluster's
        "a Databricks cluster policy id",
        empty=True,
    ) = ""
    # databricks job cluster: runtime and VM size; "" -> the policy's
    databricks_spark_version: Match(
        r"[0-9A-Za-z][0-9A-Za-z._-]{0,127}",
        "spark version",
        "a Databricks runtime such as '15.4.x-scala2.12'",
        empty=True,
    ) = ""
    databricks_node_type: Match(
        r"[0-9A-Za-z][0-9A-Za-z._-]{0,127}",
        "node type",
        "a node type such as 'Standard_D4ds_v5'",
        empty=True,
    ) = ""
    databricks_max_workers: Int(1, 10000) = 8  # databricks job cluster: autoscaling ceiling
    # databricks: where the job's package is uploaded
    databricks_package_dir: Match(
        r"(/Volumes/|/Workspace/|dbfs:/)[^\s'\"\\;`]*",
        "package folder",
        "a /Workspace/..., /Volumes/... or dbfs:/... folder",
    ) = "/Workspace/Shared/datalake/jobs"
    # databricks: PyPI requirements installed for each run's task
    databricks_libraries: Annotated[tuple[str, ...], PlainValidator(_libraries)] = JOB_LIBRARIES

    @model_validator(mode="after")
    def _backend_needs(self) -> "ComputeSettings":
        required = {
            "emr": ("cluster_id",),
            "emr_serverless": ("application_id", "execution_role_arn"),
        }
        for name in required.get(self.backend, ()):
            if not getattr(self, name):
                raise SettingsError(f"required when backend = {self.backend!r}", key=name)
        if self.backend == "databricks" and not self.databricks_cluster_id:
            if not self.databricks_policy_id and not (
                self.databricks_spark_version and self.databricks_node_type
            ):
                raise SettingsError(
                    "a job cluster (no databricks_cluster_id) needs databricks_policy_id, or "
                    "databricks_spark_version and databricks_node_type",
                    key="databricks_policy_id",
                )
        if self.backend == "databricks" and self.databricks_cluster_id and self.conf:
            raise SettingsError(
                "a run on an existing cluster cannot set its Spark settings: set them on the "
                "cluster (or leave databricks_cluster_id empty for a job cluster)",
                key="conf",
            )
        return self

    @property
    def remote(self) -> bool:
        return self.backend != "local"


def check_compute_fits(compute: ComputeSettings, catalog: Any, roots: dict[str, str]) -> None:
    """A job on AWS reads and writes S3, one on Databricks its cloud's storage (``roots``:
    archive_root, lake_root), and registers its tables where the cluster can (``catalog``: the
    ``CatalogSettings``)."""
    if not compute.remote:
        return
    backend = compute.backend
    if backend == "databricks":
        for name, value in roots.items():
            if "://" not in value:
                raise SettingsError(
                    "must be a URI of the cloud storage the cluster reads (abfss://..., "
                    f"s3://...) when [compute] backend = 'databricks', not the local folder "
                    f"{value!r}",
                    key=name,
                )
        _check_catalog_reachable(catalog, backend, "Databricks")
        return
    for name, value in roots.items():
        if not value.startswith("s3://"):
            raise SettingsError(
                f"must be an s3:// URI when [compute] backend = {backend!r} (the job runs on "
                f"AWS and cannot reach {value!r})",
                key=name,
            )
    _check_catalog_reachable(catalog, backend, "AWS")


def _check_catalog_reachable(catalog: Any, backend: str, cloud: str) -> None:
    # A thrift metastore or a MySQL/MariaDB one (metastore_jdbc_url) is shared by whoever can
    # reach it; the embedded Derby database is a folder of this machine.
    if (
        catalog.backend == "hive"
        and not catalog.hive_metastore_uri
        and not getattr(catalog, "metastore_jdbc_url", "")
    ):
        glue = (
            "set backend = 'glue' (the Glue Data Catalog, which EMR uses as its Hive "
            "metastore), 'none'"
            if cloud == "AWS"
            else "set backend = 'none'"
        )
        raise SettingsError(
            f"the embedded Derby metastore of backend 'hive' lives on this machine, but "
            f"[compute] backend = {backend!r} runs the job on {cloud}: {glue}, a "
            "hive_metastore_uri, or a metastore_jdbc_url (MySQL/MariaDB) the cluster can "
            "reach",
            key="catalog.backend",
        )
