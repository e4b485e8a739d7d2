"""``[automation]`` (the sensors, ``orchestration.sensors``) and ``[compute]`` (where the sync's
Spark job runs, ``orchestration.resources`` / ``orchestration.emr``)."""

import dataclasses
from typing import Any

from pydantic import model_validator

from datalake_assets.settings_base import (
    Int, Match, OneOf, SettingsError, SparkConf, settings_model)

SENSOR_STATUSES = ("running", "stopped")
COMPUTE_BACKENDS = ("local", "emr", "emr_serverless")
DEPLOY_MODES = ("client", "cluster")
_URL = "an http:// or https:// URL"
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


@settings_model
class AutomationSettings:
    """The archive sensors (``datalake_assets.orchestration.sensors``), one per source."""

    # default status of the sensors: "running" or "stopped"
    sensors: OneOf(SENSOR_STATUSES, "sensor status", "'running' or 'stopped'") = "running"
    interval_seconds: Int(10, 86400) = 60  # minimum time between two ticks of a sensor
    settle_minutes: Int(0, 1440) = 5  # an hour is synced this long after it closes
    recheck_hours: Int(1, 720) = 48  # hours this recent are listed again for late files
    max_queued_runs: Int(1, 10000) = 24  # per source: no new requests while this many runs wait
    backfill_hours_per_run: Int(1, 744) = 24  # a backfill runs one Spark job per this many hours
    definitions_interval_seconds: Int(10, 86400) = 30  # how often the definitions sensor looks
    # The Dagster webserver the definitions sensor asks to reload the code location when new
    # event tables appear (GraphQL reloadRepositoryLocation). "": no automatic reload, the
    # sensor says what changed and the UI's "Reload definitions" applies it. `datalake dev`
    # sets it (DATALAKE_WEBSERVER_URL) to the server it starts.
    webserver_url: Match(r"https?://[^\s'\"\\]+", "URL",
                         "http(s)://host:port of the Dagster webserver", empty=True) = ""


@settings_model
class ComputeSettings:
    """Where the sync's Spark job runs (``orchestration.resources`` / ``orchestration.emr``).

    ``backend``: ``"local"`` (default: Spark in the run's process, ``[spark]``), ``"emr"`` (a
    step of the existing cluster ``cluster_id``; replays on ``replay_cluster_id`` if set) or
    ``"emr_serverless"`` (a job run of ``application_id`` as ``execution_role_arn``). The other
    keys only matter for the AWS backends; ``conf`` holds their job's ``spark.*`` settings
    (``[spark]`` is for local Spark only)."""

    backend: OneOf(COMPUTE_BACKENDS, "compute backend") = "local"
    # "" -> AWS_REGION / ~/.aws/config
    region: Match(r"[a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}", "region",
                  "an AWS region such as 'us-east-1'", empty=True) = ""
    cluster_id: Match(r"j-[A-Za-z0-9]{1,64}", "cluster id", _CLUSTER, empty=True) = ""  # emr
    # emr: replays (backfills) go here; "" -> cluster_id
    replay_cluster_id: Match(r"j-[A-Za-z0-9]{1,64}", "replay cluster id", _CLUSTER,
                             empty=True) = ""
    application_id: Match(r"[0-9a-z]{1,64}", "application id",  # emr_serverless
                          "an EMR Serverless application id", empty=True) = ""
    # emr_serverless: the job runtime role
    execution_role_arn: Match(r"arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}",
                              "execution role arn", "an IAM role ARN (arn:aws:iam::<id>:role/..)",
                              empty=True) = ""
    # s3://bucket/prefix/ for job files; "" -> s3://<lake bucket>/_jobs/
    staging_prefix: Match(_S3, "staging prefix", "an S3 URI such as 's3://my-lake/_jobs/'",
                          empty=True) = ""
    # emr_serverless: job run logs; "" -> <staging_prefix>logs/
    log_uri: Match(_S3, "log uri", "an S3 URI such as 's3://my-lake/_jobs/logs/'",
                   empty=True) = ""
    deploy_mode: OneOf(DEPLOY_MODES, "deploy mode", "'client' (the driver on the primary node) "
                       "or 'cluster' (in a YARN container)") = "client"  # emr: spark-submit
    submit_timeout_s: Int(60, 7 * 86400) = 3600  # the job must start within this
    run_timeout_s: Int(60, 7 * 86400) = 4 * 3600  # and finish within this once started
    poll_interval_s: Int(1, 600) = 15
    # one endpoint for EMR, EMR Serverless and S3 (tests, gateways)
    endpoint_url: Match(r"https?://[^\s'\"\\;`]+", "endpoint url", _URL, empty=True) = ""
    # the remote job's spark.* settings
    conf: SparkConf(_COMPUTE_CONF_OWNED) = dataclasses.field(default_factory=dict)

    @model_validator(mode="after")
    def _backend_needs(self) -> "ComputeSettings":
        required = {"emr": ("cluster_id",),
                    "emr_serverless": ("application_id", "execution_role_arn")}
        for name in required.get(self.backend, ()):
            if not getattr(self, name):
                raise SettingsError(f"required when backend = {self.backend!r}", key=name)
        return self

    @property
    def remote(self) -> bool:
        return self.backend != "local"


def check_compute_fits(compute: ComputeSettings, catalog: Any, roots: dict[str, str]) -> None:
    """A job on AWS reads and writes S3 (``roots``: archive_root, lake_root), and registers its
    tables where the cluster can (``catalog``: the ``CatalogSettings``)."""
    if not compute.remote:
        return
    backend = compute.backend
    for name, value in roots.items():
        if not value.startswith("s3://"):
            raise SettingsError(
                f"must be an s3:// URI when [compute] backend = {backend!r} (the job runs on "
                f"AWS and cannot reach {value!r})", key=name)
    if catalog.backend == "hive" and not catalog.hive_metastore_uri:
        raise SettingsError(
            f"the embedded Derby metastore of backend 'hive' lives on this machine, but "
            f"[compute] backend = {backend!r} runs the job on AWS: set backend = 'glue' (the "
            "Glue Data Catalog, which EMR uses as its Hive metastore), 'none', or a "
            "hive_metastore_uri the cluster can reach", key="catalog.backend")
