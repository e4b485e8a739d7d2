"""Spark on AWS: the sync's job as a step of an existing EMR cluster, or as an EMR Serverless
job run. Same interface as ``LocalSparkCompute``: only the resource changes, not the assets.

This module holds what both backends share (``AwsSparkCompute``: staging and Pipes on S3;
waiting, failures and the report are ``remote_compute.py``'s, shared with Databricks);
``emr_steps.py`` holds ``EmrSparkCompute`` (a step of a cluster), ``emr_serverless.py``
``EmrServerlessCompute``, and ``emr_package.py`` the job's package.

One ``run_sync``:

1. **Package**: a zip of ``datalake_assets`` and ``dagster_pipes`` (pure Python; PySpark and the
   native dependencies come with the cluster image, see ``docs/guides/emr.md``) and the entry script,
   content-addressed under the staging prefix: ``s3://<bucket>/_jobs/<sha256>/``. Uploaded when
   absent (or older than a day, so a lifecycle rule on ``_jobs/`` never expires one in use).
2. **Submit** through Dagster Pipes: ``spark-submit --py-files <zip> <entry> <pipes args>
   -- <SyncRequest.to_args()>``. The Pipes context and messages go through S3 under
   ``_jobs/pipes/<run_id>/`` (``PipesS3ContextInjector``, ``PipesS3MessageReader``); the job logs
   to the Dagster run and reports where it wrote its report.
3. **Wait**, polling (no boto waiter: their default limits are shorter than a replay), at most
   ``submit_timeout_s`` for the job to start and ``run_timeout_s`` for it to run. A timeout, or
   the Dagster run being terminated, cancels the step / job run.
4. **Result**: the report the job wrote in the lake
   (``<lake>/reports/day=/source=/run_id=/report.json``) becomes the ``SyncReport``, so the
   asset yields the same materializations and checks as with local Spark. A ``SyncError`` on the
   cluster is raised as a ``SyncError`` (the asset then fails its completeness check); any other
   failure is a ``dagster.Failure`` naming the state, the reason and where the logs are.

Why not the upstream clients of ``dagster_aws.pipes`` (0.29): ``PipesEMRClient`` starts a new
cluster per call (``run_job_flow``) and waits with boto's cluster waiters; nothing runs steps on
an existing cluster. ``PipesEMRServerlessClient`` has no timeout and fails with a bare "job
failed" (the state details only in a log line), and reads messages from CloudWatch only. Both are
built on the public ``open_pipes_session``, as this module is, with the upstream S3 context
injector and message reader.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from dagster import AssetExecutionContext, Failure, open_pipes_session
from dagster_aws.pipes import PipesS3ContextInjector, PipesS3MessageReader
from pydantic import Field

from datalake_assets.lake import storage
from datalake_assets.lake.report import SyncReport
from datalake_assets.orchestration.compute.emr_package import (
    StagedPackage,
    default_staging_prefix,
    dir_uri,
    split_s3_uri,
    stage_package,
)
from datalake_assets.orchestration.compute.remote_compute import (
    RemoteRun,
    RemoteSparkCompute,
    WithoutTypedEventStream,
    sync_message,
)
from datalake_assets.transform.session import JOB_SPARK_CONF
from datalake_assets.transform.sync_request import SyncRequest

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------ Pipes plumbing


class _StagedS3MessageReader(PipesS3MessageReader):
    """``PipesS3MessageReader`` whose message chunks land under ``key_prefix`` (the staging
    prefix) instead of a random folder at the bucket's root."""

    def __init__(self, *, key_prefix: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.key_prefix = key_prefix

    @contextmanager
    def get_params(self) -> Iterator[dict]:
        with super().get_params() as params:
            yield {**params, "key_prefix": self.key_prefix + params["key_prefix"]}


# ----------------------------------------------------------------------------------- resources


class AwsSparkCompute(RemoteSparkCompute):
    """What both AWS backends share: staging on S3, Pipes through S3, Glue's region."""

    region: str = Field(default="", description="AWS region; '' -> AWS_REGION / ~/.aws/config")
    staging_prefix: str = Field(
        default="",
        description="S3 URI for job packages, Pipes files (and serverless logs); "
        "'' -> s3://<lake bucket>/_jobs/",
    )
    endpoint_url: str = Field(
        default="",
        description="one endpoint for every AWS call: a test server or gateway; '' -> AWS's",
    )

    # ------------------------------------------------------------------------ AWS clients

    def _session(self):
        import boto3

        return boto3.session.Session(region_name=self.region or None)

    def _client(self, service: str):
        from botocore.config import Config

        config = Config(
            retries={"mode": "standard", "max_attempts": 10},
            connect_timeout=10,
            read_timeout=60,
            user_agent_extra="datalake-assets",
        )
        return self._session().client(
            service, endpoint_url=self.endpoint_url or None, config=config
        )

    def _region(self) -> str:
        region = self.region or self._session().region_name
        if not region:
            raise Failure(description="no AWS region: set [compute] region or AWS_REGION")
        return region

    # -------------------------------------------------------------------------- run_sync

    def run_sync(
        self, request: SyncRequest, context: AssetExecutionContext | None = None
    ) -> SyncReport:
        req = self._remote_request(request)
        logger = context.log if context is not None else log
        staging = self._staging(req)
        s3 = self._client("s3")
        package = stage_package(s3, staging)
        logger.info(
            f"job package {package.zip_uri}"
            + (f" (uploaded {', '.join(package.uploaded)})" if package.uploaded else "")
        )
        submitted_at = datetime.now(UTC)
        message: dict | None = None
        if context is None:  # no Dagster run to report to: the job runs without Pipes
            run = self._submit(req, package, [], {}, logger)
            final = self._wait(run, logger)
        else:
            bucket, prefix = split_s3_uri(staging)
            pipes_prefix = f"{prefix}pipes/{req.run_id}/"
            with open_pipes_session(
                context=WithoutTypedEventStream(context),
                context_injector=PipesS3ContextInjector(
                    bucket=bucket, client=s3, key_prefix=pipes_prefix
                ),
                message_reader=_StagedS3MessageReader(
                    bucket=bucket,
                    client=s3,
                    key_prefix=pipes_prefix,
                    interval=self.pipes_interval_s,
                ),
                extras={"source_id": req.source_id, "run_id": req.run_id},
            ) as session:
                pipes_args = [
                    a for k, v in session.get_bootstrap_cli_arguments().items() for a in (k, v)
                ]
                run = self._submit(
                    req, package, pipes_args, dict(session.default_remote_invocation_info), logger
                )
                final = self._wait(run, logger)
            message = sync_message(session.get_custom_messages())
        return self._result(req, run, final, message, submitted_at)

    def _staging(self, req: SyncRequest) -> str:
        if self.staging_prefix:
            return dir_uri(self.staging_prefix)
        if not req.lake_root.startswith("s3://"):
            raise Failure(
                description=f"the lake ({req.lake_root}) is not on S3: set "
                "staging_prefix (an s3:// URI) for the job's files"
            )
        return default_staging_prefix(req.lake_root)

    def _remote_request(self, request: SyncRequest) -> SyncRequest:
        """The request as the cluster runs it, with Glue in our region unless one is set."""
        req = super()._remote_request(request)
        catalog = req.catalog
        if catalog.backend == "glue" and not catalog.glue_region:
            req = replace(req, catalog=replace(catalog, glue_region=self._region()))
        return req

    def _submit(
        self,
        req: SyncRequest,
        package: StagedPackage,
        pipes_args: list[str],
        tags: dict[str, str],
        logger: Any,
    ) -> RemoteRun:  # pragma: no cover
        raise NotImplementedError

    def _job_conf(self, req: SyncRequest) -> dict[str, str]:
        """The job's Spark settings: what it relies on, a remote Hive metastore's, then ours."""
        conf = dict(JOB_SPARK_CONF)
        if req.catalog.backend == "hive" and req.catalog.hive_metastore_uri:
            conf.update(
                {
                    k: v
                    for k, v in req.catalog.spark_conf().items()
                    if not k.endswith("extraJavaOptions")
                }
            )
        conf.update(self.conf)
        return conf

    def _entry_args(
        self,
        region: str,
        pipes_args: list[str],
        req: SyncRequest,
        extra: tuple[str, ...] | list[str] = (),
    ) -> list[str]:
        return [
            *pipes_args,
            "--aws-region",
            region,
            "--pipes-interval",
            str(self.pipes_interval_s),
            *extra,
            "--",
            *req.to_args(),
        ]

    # ---------------------------------------------------------------------------- result

    def _read(self, location: str) -> bytes | None:
        if not storage.is_uri(location):
            return storage.read_bytes(location) if os.path.exists(location) else None
        from botocore.exceptions import ClientError

        bucket, key = split_s3_uri(location)
        try:
            return self._client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise


def client_error(e: Any) -> str:
    err = e.response.get("Error", {})
    return f"{err.get('Code', 'error')}: {err.get('Message', str(e))}"
