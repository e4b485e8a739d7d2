"""The sync as an EMR Serverless job run: the ``EmrServerlessCompute`` resource, the
``start_job_run`` request it sends, and how a job run's state and logs are read."""

from __future__ import annotations

import math
from typing import Any

from dagster import Failure
from pydantic import Field

from datalake_assets.orchestration.compute.emr import AwsSparkCompute, client_error
from datalake_assets.orchestration.compute.emr_package import StagedPackage, dir_uri
from datalake_assets.orchestration.compute.remote_compute import RemoteRun, RemoteStatus
from datalake_assets.transform.sync_request import SyncRequest

JOB_RUN_RUNNING = frozenset({"RUNNING"})
JOB_RUN_TERMINAL = frozenset({"SUCCESS", "FAILED", "CANCELLED"})


def job_run_log_location(log_uri: str, application_id: str, job_run_id: str) -> str:
    """The driver's logs of a job run (``stdout.gz``/``stderr.gz``) under the job's S3 log URI."""
    return f"{dir_uri(log_uri)}applications/{application_id}/jobs/{job_run_id}/SPARK_DRIVER/"


class _ServerlessJobRun(RemoteRun):
    running, terminal, success = JOB_RUN_RUNNING, JOB_RUN_TERMINAL, "SUCCESS"

    def __init__(self, client: Any, application_id: str, job_run_id: str, log_uri: str) -> None:
        self.client, self.application_id, self.job_run_id = client, application_id, job_run_id
        self.log_uri = log_uri
        self.label = f"EMR Serverless job run {job_run_id} of application {application_id}"

    def status(self) -> RemoteStatus:
        run = self.client.get_job_run(applicationId=self.application_id, jobRunId=self.job_run_id)[
            "jobRun"
        ]
        return RemoteStatus(
            state=run.get("state", "UNKNOWN"),
            reason=run.get("stateDetails") or "",
            log_location=job_run_log_location(self.log_uri, self.application_id, self.job_run_id),
            raw=run,
        )

    def cancel(self) -> str:
        self.client.cancel_job_run(applicationId=self.application_id, jobRunId=self.job_run_id)
        return "cancel requested"


class EmrServerlessCompute(AwsSparkCompute):
    """The sync as an EMR Serverless job run: no cluster to keep running between hourly syncs."""

    application_id: str = Field(description="the EMR Serverless (Spark) application")
    execution_role_arn: str = Field(description="the job runtime role (S3, Glue access)")
    log_uri: str = Field(
        default="", description="S3 URI for the job runs' logs; '' -> <staging_prefix>logs/"
    )

    def job_run_params(
        self,
        req: SyncRequest,
        package: StagedPackage,
        pipes_args: list[str],
        region: str,
        tags: dict[str, str],
        log_uri: str,
    ) -> dict:
        """The ``start_job_run`` request. Spark settings go in the ``spark-defaults``
        classification (values may contain spaces), the Python files in the submit parameters."""
        minutes = max(5, math.ceil((self.submit_timeout_s + self.run_timeout_s) / 60))
        return {
            "applicationId": self.application_id,
            "executionRoleArn": self.execution_role_arn,
            "name": f"datalake sync {req.source_id} {req.hours[0]}..{req.hours[-1]}"[:256],
            "jobDriver": {
                "sparkSubmit": {
                    "entryPoint": package.entry_uri,
                    "entryPointArguments": self._entry_args(region, pipes_args, req),
                    "sparkSubmitParameters": f"--py-files {package.zip_uri}",
                }
            },
            "configurationOverrides": {
                "applicationConfiguration": [
                    {"classification": "spark-defaults", "properties": self._job_conf(req)}
                ],
                "monitoringConfiguration": {"s3MonitoringConfiguration": {"logUri": log_uri}},
            },
            # AWS cancels the run itself past this, even if Dagster is gone
            "executionTimeoutMinutes": minutes,
            "tags": {
                **{k: v[:256] for k, v in tags.items()},
                "datalake/source": req.source_id,
                "datalake/run_id": req.run_id,
            },
        }

    def _submit(
        self,
        req: SyncRequest,
        package: StagedPackage,
        pipes_args: list[str],
        tags: dict[str, str],
        logger: Any,
    ) -> RemoteRun:
        from botocore.exceptions import ClientError

        region = self._region()
        log_uri = dir_uri(self.log_uri or f"{self._staging(req)}logs/")
        client = self._client("emr-serverless")
        params = self.job_run_params(req, package, pipes_args, region, tags, log_uri)
        try:
            job_run_id = client.start_job_run(**params)["jobRunId"]
        except ClientError as e:
            raise Failure(
                description=f"could not start a job run on EMR Serverless application "
                f"{self.application_id}: {client_error(e)}"
            ) from None
        logger.info(f"started EMR Serverless job run {job_run_id} on {self.application_id}")
        return _ServerlessJobRun(client, self.application_id, job_run_id, log_uri)
