"""Spark on AWS: the sync's job as a step of an existing EMR cluster, or as an EMR Serverless
job run. Same interface as ``LocalSparkCompute``: only the resource changes, not the assets.

This module holds what both backends share (``AwsSparkCompute``: staging, Pipes, waiting,
failures, the report); ``emr_steps.py`` holds ``EmrSparkCompute`` (a step of a cluster),
``emr_serverless.py`` ``EmrServerlessCompute``, and ``emr_package.py`` the job's package.

One ``run_sync``:

1. **Package**: a zip of ``datalake_assets`` and ``dagster_pipes`` (pure Python; PySpark and the
   native dependencies come with the cluster image, see ``docs/emr.md``) and the entry script,
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
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from dagster import AssetExecutionContext, Failure, MetadataValue, open_pipes_session
from dagster_aws.pipes import PipesS3ContextInjector, PipesS3MessageReader
from pydantic import Field

from datalake_assets.orchestration.emr_package import (
    StagedPackage,
    default_staging_prefix,
    dir_uri,
    split_s3_uri,
    stage_package,
)
from datalake_assets.orchestration.resources import SparkCompute
from datalake_assets.spec import layout
from datalake_assets.lake import storage
from datalake_assets.lake.report import SyncReport
from datalake_assets.transform.request import SyncError, SyncRequest
from datalake_assets.transform.session import JOB_SPARK_CONF
from datalake_assets.transform.pipes_entry import MESSAGE_KIND

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------- remote runs, status


@dataclass(frozen=True)
class RemoteStatus:
    state: str
    reason: str = ""  # state change reason, failure details or stateDetails
    log_location: str = ""
    raw: dict = field(default_factory=dict, compare=False, repr=False)


class RemoteRun:
    """A submitted step or job run: how to poll it and how to cancel it."""

    label: str
    running: frozenset[str]
    terminal: frozenset[str]
    success: str

    def status(self) -> RemoteStatus:  # pragma: no cover - interface
        raise NotImplementedError

    def cancel(self) -> str:  # pragma: no cover - interface
        """Request the cancellation; returns what AWS answered."""
        raise NotImplementedError


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


class _WithoutTypedEventStream:
    """The asset's context for ``open_pipes_session`` minus one side effect: the session switches
    the step to a "typed event stream", in which every declared output must be yielded. The sync
    asset yields its results from the lake's report (as with local Spark) and skips tables
    without rows this time (skippable specs), which that mode would turn into a failure."""

    def __init__(self, context: Any) -> None:
        self._context = context

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)

    def set_requires_typed_event_stream(self, *, error_message: str | None = None) -> None:
        pass


class _Timeout(Exception):
    pass


# ----------------------------------------------------------------------------------- resources


class AwsSparkCompute(SparkCompute):
    """What both AWS backends share: staging, Pipes, waiting, failures, the report."""

    region: str = Field(default="", description="AWS region; '' -> AWS_REGION / ~/.aws/config")
    staging_prefix: str = Field(
        default="", description="S3 URI for job packages, Pipes files (and serverless logs); "
                                "'' -> s3://<lake bucket>/_jobs/")
    submit_timeout_s: float = Field(default=3600, description="max seconds before the job runs")
    run_timeout_s: float = Field(default=4 * 3600, description="max seconds the job may run")
    poll_interval_s: float = Field(default=15.0, description="seconds between status polls")
    pipes_interval_s: float = Field(
        default=10.0, description="seconds between reads (and remote uploads) of Pipes messages")
    conf: dict[str, str] = Field(default_factory=dict,
                                 description="spark.* settings of the job (spark-submit --conf)")
    endpoint_url: str = Field(default="", description="one endpoint for every AWS call: a test "
                                                      "server or gateway; '' -> AWS's")

    # ------------------------------------------------------------------------ AWS clients

    def _session(self):
        import boto3

        return boto3.session.Session(region_name=self.region or None)

    def _client(self, service: str):
        from botocore.config import Config

        config = Config(retries={"mode": "standard", "max_attempts": 10}, connect_timeout=10,
                        read_timeout=60, user_agent_extra="datalake-assets")
        return self._session().client(service, endpoint_url=self.endpoint_url or None,
                                      config=config)

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
        logger.info(f"job package {package.zip_uri}"
                    + (f" (uploaded {', '.join(package.uploaded)})" if package.uploaded else ""))
        submitted_at = datetime.now(UTC)
        messages: list[dict] = []
        if context is None:  # no Dagster run to report to: the job runs without Pipes
            run = self._submit(req, package, [], {}, logger)
            final = self._wait(run, logger)
        else:
            bucket, prefix = split_s3_uri(staging)
            pipes_prefix = f"{prefix}pipes/{req.run_id}/"
            with open_pipes_session(
                context=_WithoutTypedEventStream(context),
                context_injector=PipesS3ContextInjector(bucket=bucket, client=s3,
                                                        key_prefix=pipes_prefix),
                message_reader=_StagedS3MessageReader(
                    bucket=bucket, client=s3, key_prefix=pipes_prefix,
                    interval=self.pipes_interval_s),
                extras={"source_id": req.source_id, "run_id": req.run_id},
            ) as session:
                pipes_args = [a for k, v in session.get_bootstrap_cli_arguments().items()
                              for a in (k, v)]
                run = self._submit(req, package, pipes_args,
                                   dict(session.default_remote_invocation_info), logger)
                final = self._wait(run, logger)
            messages = [m for m in session.get_custom_messages()
                        if isinstance(m, dict) and m.get("kind") == MESSAGE_KIND]
        return self._result(req, run, final, messages[-1] if messages else None, submitted_at,
                            s3)

    def _staging(self, req: SyncRequest) -> str:
        if self.staging_prefix:
            return dir_uri(self.staging_prefix)
        if not req.lake_root.startswith("s3://"):
            raise Failure(description=f"the lake ({req.lake_root}) is not on S3: set "
                                      "staging_prefix (an s3:// URI) for the job's files")
        return default_staging_prefix(req.lake_root)

    def _remote_request(self, request: SyncRequest) -> SyncRequest:
        """The request as the cluster runs it: resolved (its ``run_id`` fixed, so the report's
        path is known before submitting), Glue in our region unless one is set."""
        req = request.resolved()
        catalog = req.catalog
        if catalog.backend == "hive" and not catalog.hive_metastore_uri:
            raise Failure(description=(
                "the catalog is an embedded Derby metastore (backend 'hive' without "
                "hive_metastore_uri), which only exists on this machine: use the 'glue' backend "
                "(or 'none', or a remote Hive metastore) with EMR"))
        if catalog.backend == "glue" and not catalog.glue_region:
            req = replace(req, catalog=replace(catalog, glue_region=self._region()))
        return req

    def _submit(self, req: SyncRequest, package: StagedPackage, pipes_args: list[str],
                tags: dict[str, str], logger: Any) -> RemoteRun:  # pragma: no cover
        raise NotImplementedError

    def _job_conf(self, req: SyncRequest) -> dict[str, str]:
        """The job's Spark settings: what it relies on, a remote Hive metastore's, then ours."""
        conf = dict(JOB_SPARK_CONF)
        if req.catalog.backend == "hive" and req.catalog.hive_metastore_uri:
            conf.update({k: v for k, v in req.catalog.spark_conf().items()
                         if not k.endswith("extraJavaOptions")})
        conf.update(self.conf)
        return conf

    def _entry_args(self, region: str, pipes_args: list[str], req: SyncRequest,
                    extra: tuple[str, ...] | list[str] = ()) -> list[str]:
        return [*pipes_args, "--aws-region", region, "--pipes-interval",
                str(self.pipes_interval_s), *extra, "--", *req.to_args()]

    # ------------------------------------------------------------------------------ wait

    def _wait(self, run: RemoteRun, logger: Any) -> RemoteStatus:
        """Poll until a terminal state; a timeout or an interruption cancels the run."""
        start = time.monotonic()
        running_since: float | None = None
        last: RemoteStatus | None = None
        try:
            while True:
                status = run.status()
                if last is None or status.state != last.state:
                    logger.info(f"{run.label}: {status.state}")
                last = status
                if status.state in run.terminal:
                    return status
                now = time.monotonic()
                if running_since is None and status.state in run.running:
                    running_since = now
                if running_since is None and now - start > self.submit_timeout_s:
                    raise _Timeout(f"did not start within submit_timeout_s="
                                   f"{self.submit_timeout_s} (still {status.state})")
                if running_since is not None and now - running_since > self.run_timeout_s:
                    raise _Timeout(f"ran longer than run_timeout_s={self.run_timeout_s} "
                                   f"(still {status.state})")
                time.sleep(self.poll_interval_s)
        except _Timeout as e:
            cancelled = self._cancel(run, logger)
            where = last.log_location if last else ""
            raise Failure(
                description=f"{run.label} timed out: {e}; {cancelled}. Logs: {where}",
                metadata={"state": last.state if last else "", "cancel": cancelled,
                          "logs": MetadataValue.path(where)},
            ) from None
        except BaseException:  # the Dagster run was terminated (or polling broke): stop it
            logger.warning(f"interrupted while waiting: cancelling {run.label}")
            self._cancel(run, logger)
            raise

    def _cancel(self, run: RemoteRun, logger: Any) -> str:
        try:
            outcome = run.cancel()
        except Exception as e:  # noqa: BLE001 - reported; never hides why we cancelled
            outcome = f"cancel failed: {type(e).__name__}: {e}"
        logger.warning(f"{run.label}: {outcome}")
        return outcome

    # ---------------------------------------------------------------------------- result

    def _result(self, req: SyncRequest, run: RemoteRun, final: RemoteStatus,
                message: dict | None, submitted_at: datetime, s3: Any) -> SyncReport:
        where = f"{run.label} ended {final.state}" + (f": {final.reason}" if final.reason else "")
        where += f"; logs: {final.log_location}"
        metadata = {"state": final.state, "reason": final.reason,
                    "logs": MetadataValue.path(final.log_location)}
        if final.state != run.success:
            if message and message.get("status") == "failed":
                raise SyncError(f"{message.get('error')} ({where})",
                                message.get("error_code") or "internal")
            raise Failure(description=where, metadata=metadata)
        path = message.get("report_path") if message and message.get("status") == "finished" \
            else None
        candidates = [path] if path else _report_candidates(req, submitted_at)
        for location in candidates:
            body = self._read(location, s3)
            if body is not None:
                result = SyncReport.parse(body)
                warning = ((message or {}).get("source") or {}).get("warning")
                if warning and not result.source.warning:
                    result.source.warning = warning  # added after the report was written
                return result
        raise Failure(description=f"{where}, but no sync report was found at "
                                  f"{' or '.join(candidates)}", metadata=metadata)

    def _read(self, location: str, s3: Any) -> bytes | None:
        if not storage.is_uri(location):
            return storage.read_bytes(location) if os.path.exists(location) else None
        from botocore.exceptions import ClientError

        bucket, key = split_s3_uri(location)
        try:
            return s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise


def _report_candidates(req: SyncRequest, submitted_at: datetime) -> list[str]:
    """The report's possible paths (its ``day=`` is the finish day): submit day to today."""
    day, last = submitted_at.date(), datetime.now(UTC).date()
    out = []
    while day <= last:
        out.append(layout.report_path(req.lake_root, req.source_id, req.run_id, day.isoformat()))
        day += timedelta(days=1)
    return out


def client_error(e: Any) -> str:
    err = e.response.get("Error", {})
    return f"{err.get('Code', 'error')}: {err.get('Message', str(e))}"
