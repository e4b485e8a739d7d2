"""The sync as a step of an existing EMR cluster (EMR on EC2): the ``EmrSparkCompute``
resource, the step it submits, and how a step's state, failure reason and logs are read."""

from __future__ import annotations

import re
from typing import Any

from dagster import Failure
from pydantic import Field

from datalake_assets.orchestration.compute.emr import AwsSparkCompute, client_error
from datalake_assets.orchestration.compute.emr_package import StagedPackage, dir_uri
from datalake_assets.orchestration.compute.remote_compute import RemoteRun, RemoteStatus
from datalake_assets.transform.sync_request import SyncRequest

STEP_RUNNING = frozenset({"RUNNING"})
STEP_TERMINAL = frozenset({"COMPLETED", "CANCELLED", "FAILED", "INTERRUPTED"})
CLUSTER_USABLE = frozenset({"STARTING", "BOOTSTRAPPING", "RUNNING", "WAITING"})


def step_failure_reason(status: dict) -> str:
    """The reason of an EMR step's state: its ``FailureDetails`` (reason, message) or its
    ``StateChangeReason``."""
    failure = status.get("FailureDetails") or {}
    parts = [failure.get("Reason"), failure.get("Message")]
    change = status.get("StateChangeReason") or {}
    parts += [change.get("Code"), change.get("Message")]
    seen: list[str] = []
    for p in parts:
        if p and p not in seen:
            seen.append(p)
    return "; ".join(seen)


def step_log_location(status: dict, log_uri: str | None, cluster_id: str, step_id: str) -> str:
    """The step's log file (``FailureDetails.LogFile``), else its folder under the cluster's
    ``LogUri`` (``stdout.gz``/``stderr.gz``; EMR uploads them every few minutes)."""
    log_file = (status.get("FailureDetails") or {}).get("LogFile")
    if log_file:
        return re.sub(r"^s3n://", "s3://", log_file)
    if log_uri:
        base = dir_uri(re.sub(r"^s3n://", "s3://", log_uri))
        return f"{base}{cluster_id}/steps/{step_id}/"
    return (
        f"cluster {cluster_id} has no LogUri: the step's logs are only on its primary node, "
        f"/mnt/var/log/hadoop/steps/{step_id}/"
    )


class _EmrStep(RemoteRun):
    running, terminal, success = STEP_RUNNING, STEP_TERMINAL, "COMPLETED"

    def __init__(self, emr: Any, cluster_id: str, step_id: str, log_uri: str | None) -> None:
        self.emr, self.cluster_id, self.step_id, self.log_uri = emr, cluster_id, step_id, log_uri
        self.label = f"EMR step {step_id} on cluster {cluster_id}"

    def status(self) -> RemoteStatus:
        step = self.emr.describe_step(ClusterId=self.cluster_id, StepId=self.step_id)["Step"]
        st = step.get("Status", {})
        return RemoteStatus(
            state=st.get("State", "UNKNOWN"),
            reason=step_failure_reason(st),
            log_location=step_log_location(st, self.log_uri, self.cluster_id, self.step_id),
            raw=step,
        )

    def cancel(self) -> str:
        r = self.emr.cancel_steps(
            ClusterId=self.cluster_id,
            StepIds=[self.step_id],
            StepCancellationOption="SEND_INTERRUPT",
        )
        info = (r.get("CancelStepsInfoList") or [{}])[0]
        return " ".join(
            p for p in ("cancel", info.get("Status", "requested"), info.get("Reason") or "") if p
        )


class EmrSparkCompute(AwsSparkCompute):
    """The sync as a step of an existing EMR cluster (``add_job_flow_steps``), like Segment's
    Data Lakes. Replays (``request.replay``) go to ``replay_cluster_id`` when set, so a long
    backfill never queues the hourly syncs behind it."""

    cluster_id: str = Field(description="the EMR cluster (j-...) that runs the syncs")
    replay_cluster_id: str = Field(default="", description="cluster for replays; '' -> cluster_id")
    deploy_mode: str = Field(
        default="client",
        description="spark-submit --deploy-mode: client (driver on the primary node) or cluster",
    )

    def cluster_for(self, req: SyncRequest) -> str:
        return self.replay_cluster_id if req.replay and self.replay_cluster_id else self.cluster_id

    def step_args(
        self,
        req: SyncRequest,
        package: StagedPackage,
        pipes_args: list[str],
        region: str,
        cluster_id: str,
    ) -> list[str]:
        """``command-runner.jar`` arguments: the ``spark-submit`` of the step."""
        args = [
            "spark-submit",
            "--deploy-mode",
            self.deploy_mode,
            "--name",
            f"datalake-sync-{req.source_id}",
            "--py-files",
            package.zip_uri,
        ]
        for k, v in sorted(self._job_conf(req).items()):
            args += ["--conf", f"{k}={v}"]
        return [
            *args,
            package.entry_uri,
            *self._entry_args(region, pipes_args, req, ["--emr-cluster-id", cluster_id]),
        ]

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
        cluster_id = self.cluster_for(req)
        emr = self._client("emr")
        try:
            cluster = emr.describe_cluster(ClusterId=cluster_id)["Cluster"]
        except ClientError as e:
            raise Failure(description=f"EMR cluster {cluster_id}: {client_error(e)}") from None
        state = cluster.get("Status", {}).get("State", "UNKNOWN")
        if state not in CLUSTER_USABLE:
            reason = (cluster.get("Status", {}).get("StateChangeReason") or {}).get("Message")
            raise Failure(
                description=f"EMR cluster {cluster_id} is {state}"
                + (f" ({reason})" if reason else "")
                + ": it cannot run steps"
            )
        step = {
            "Name": f"datalake sync {req.source_id} {req.hours[0]}..{req.hours[-1]} "
            f"(run {req.run_id})"[:256],
            "ActionOnFailure": "CONTINUE",  # a failed sync never stops the shared cluster
            "HadoopJarStep": {
                "Jar": "command-runner.jar",
                "Args": self.step_args(req, package, pipes_args, region, cluster_id),
            },
        }
        try:
            step_id = emr.add_job_flow_steps(JobFlowId=cluster_id, Steps=[step])["StepIds"][0]
        except ClientError as e:
            raise Failure(
                description=f"could not add a step to EMR cluster {cluster_id}: {client_error(e)}"
            ) from None
        logger.info(f"submitted EMR step {step_id} to cluster {cluster_id} ({state})")
        return _EmrStep(emr, cluster_id, step_id, cluster.get("LogUri"))
