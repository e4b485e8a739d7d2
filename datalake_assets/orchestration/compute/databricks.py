"""Spark on Databricks: the sync's job as a one-time run (Jobs API ``runs/submit``) on an
existing cluster, the customer's own as in Segment's Data Lakes, or on a job cluster made for
the run (under a cluster policy). Same interface as ``LocalSparkCompute``: only the resource
changes, not the assets.

One ``run_sync``:

1. **Package**: the zip of ``datalake_assets`` and ``dagster_pipes`` and the Databricks entry
   script, content-addressed under ``package_dir`` (a workspace folder, a Unity Catalog volume
   or DBFS; ``databricks_package.py``), uploaded when absent.
2. **Submit** through Dagster Pipes: a ``spark_python_task`` running the entry script with
   ``--package <zip>`` (the script adds it to the session: driver and executors), the Pipes
   arguments and, after ``--``, ``SyncRequest.to_args()``. The Pipes context and messages go
   through the lake's storage under ``_pipes/<run_id>/`` (``pipes_channel.py``), with the
   credentials the job already has for the lake. The run's ``timeout_seconds`` is both our
   timeouts: Databricks stops it even if Dagster is gone.
3. **Wait**, polling ``runs/get`` (``remote_compute.py``): past ``submit_timeout_s`` before it
   runs, or ``run_timeout_s`` running, or when the Dagster run is terminated, ``runs/cancel``,
   then wait (at most ``cancel_wait_s``) until Databricks has stopped the task.
4. **Result**: as on EMR, the report the job wrote in the lake becomes the ``SyncReport``; a
   ``SyncError`` on the cluster is raised as a ``SyncError``; any other end is a
   ``dagster.Failure`` with the run's state, its message, the task's error (``runs/get-output``)
   and the run's page.

Credentials are never settings: the Databricks SDK's default chain reads them from the
environment (``DATABRICKS_TOKEN``; an OAuth service principal's ``DATABRICKS_CLIENT_ID`` /
``DATABRICKS_CLIENT_SECRET``; an Azure service principal's ``ARM_CLIENT_ID`` /
``ARM_TENANT_ID`` / ``ARM_CLIENT_SECRET``).

Why not ``dagster_databricks.PipesDatabricksClient`` (0.29): it waits without a timeout, fails
with the run's state message only, cancels only on Dagster's interrupt and not on a timeout,
appends the Pipes arguments after the task's own (ours end with the job's argv), and keeps
Pipes files in DBFS root (``/tmp``), which Unity Catalog workspaces discourage. Like the EMR
resources, this one is built on the public ``open_pipes_session``.
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from dagster import AssetExecutionContext, Failure, open_pipes_session
from pydantic import Field

from datalake_assets.lake import storage
from datalake_assets.lake.report import SyncReport
from datalake_assets.orchestration.compute.databricks_package import (
    DEFAULT_PACKAGE_DIR,
    DatabricksPackage,
    stage_databricks_package,
)
from datalake_assets.orchestration.compute.pipes_channel import (
    StorageContextInjector,
    StorageMessageReader,
    default_pipes_root,
)
from datalake_assets.orchestration.compute.remote_compute import (
    RemoteRun,
    RemoteSparkCompute,
    RemoteStatus,
    WithoutTypedEventStream,
    sync_message,
)
from datalake_assets.settings.orchestration_section import JOB_LIBRARIES
from datalake_assets.spec import layout
from datalake_assets.transform.session import JOB_SPARK_CONF
from datalake_assets.transform.sync_request import SyncRequest

log = logging.getLogger(__name__)

RUN_RUNNING = frozenset({"RUNNING", "TERMINATING"})
# life cycle states after which a run does nothing more (its result state then says how)
RUN_ENDED = frozenset({"TERMINATED", "SKIPPED", "INTERNAL_ERROR"})
RUN_TERMINAL = frozenset(
    {
        "SUCCESS",
        "FAILED",
        "TIMEDOUT",
        "CANCELED",
        "MAXIMUM_CONCURRENT_RUNS_REACHED",
        "EXCLUDED",
        "SUCCESS_WITH_FAILURES",
        "UPSTREAM_FAILED",
        "UPSTREAM_CANCELED",
        "DISABLED",
        "INTERNAL_ERROR",
        "SKIPPED",
        "TERMINATED",
    }
)
NO_CREDENTIALS = (
    "set DATABRICKS_HOST (or [compute] databricks_host) and credentials in the "
    "environment: DATABRICKS_TOKEN, or an OAuth service principal "
    "(DATABRICKS_CLIENT_ID, DATABRICKS_CLIENT_SECRET), or an Azure service "
    "principal (ARM_CLIENT_ID, ARM_TENANT_ID, ARM_CLIENT_SECRET)"
)


def _value(enum: Any) -> str | None:
    return getattr(enum, "value", enum) if enum is not None else None


def run_state(run: Any) -> str:
    """One word for a run's state: its life cycle state while it lasts, then its result."""
    st = run.state
    life = _value(st.life_cycle_state) if st else None
    if life == "INTERNAL_ERROR":
        return life
    if life in RUN_ENDED:
        return _value(st.result_state) or life
    return life or "UNKNOWN"


def _error(e: Exception) -> str:
    code = getattr(e, "error_code", None)
    return f"{code}: {e}" if code else f"{type(e).__name__}: {e}"


class _DatabricksRun(RemoteRun):
    running, terminal, success = RUN_RUNNING, RUN_TERMINAL, "SUCCESS"

    def __init__(
        self, client: Any, run_id: int, where: str, poll_s: float, cancel_wait_s: float
    ) -> None:
        self.client, self.run_id = client, run_id
        self.poll_s, self.cancel_wait_s = poll_s, cancel_wait_s
        self.label = f"Databricks run {run_id} {where}"

    def status(self) -> RemoteStatus:
        run = self.client.jobs.get_run(self.run_id)
        state = run_state(run)
        reason = (run.state.state_message if run.state else "") or ""
        if state in self.terminal and state != self.success:
            reason = "; ".join(p for p in (reason, self._task_error(run)) if p)
        return RemoteStatus(
            state=state, reason=reason, log_location=run.run_page_url or "", raw=run.as_dict()
        )

    def _task_error(self, run: Any) -> str:
        """The failed task's own error (its exception's last line), from ``runs/get-output``."""
        for task in run.tasks or []:
            if task.run_id is None:
                continue
            try:
                out = self.client.jobs.get_run_output(task.run_id)
            except Exception as e:  # noqa: BLE001 - a detail of a failure already reported
                return f"(no task output: {_error(e)})"
            if out.error:
                return f"task {task.task_key}: {out.error}"
        return ""

    def cancel(self) -> str:
        """``runs/cancel`` is asynchronous: wait (bounded) until the task has stopped, as
        ``dagster-databricks`` does, so a cancelled sync is not still writing."""
        self.client.jobs.cancel_run(self.run_id)
        deadline = time.monotonic() + self.cancel_wait_s
        while True:
            run = self.client.jobs.get_run(self.run_id)
            life = _value(run.state.life_cycle_state) if run.state else None
            if life in RUN_ENDED or life == "TERMINATING":
                return f"cancelled: the run is {run_state(run)}"
            if time.monotonic() > deadline:
                return (
                    f"cancel requested, but the run was still {life} after {self.cancel_wait_s:g} s"
                )
            time.sleep(min(self.poll_s, 1.0))


class DatabricksSparkCompute(RemoteSparkCompute):
    """The sync as a one-time Databricks run, on ``cluster_id`` or on a job cluster."""

    host: str = Field(default="", description="workspace URL; '' -> DATABRICKS_HOST")
    cluster_id: str = Field(default="", description="existing cluster; '' -> a job cluster")
    policy_id: str = Field(default="", description="the job cluster's policy")
    spark_version: str = Field(default="", description="job cluster runtime; '' -> the policy's")
    node_type: str = Field(default="", description="job cluster VM size; '' -> the policy's")
    max_workers: int = Field(default=8, description="job cluster autoscaling ceiling")
    package_dir: str = Field(
        default=DEFAULT_PACKAGE_DIR, description="/Workspace/..., /Volumes/... or dbfs:/... folder"
    )
    pipes_root: str = Field(default="", description="Pipes files; '' -> <lake storage>/_pipes")
    libraries: list[str] = Field(
        default_factory=lambda: list(JOB_LIBRARIES),
        description="PyPI requirements installed for the task",
    )
    cancel_wait_s: float = Field(
        default=120.0, description="max seconds to wait for a cancelled run to stop"
    )

    # -------------------------------------------------------------------------- client

    def _client(self) -> Any:
        from databricks.sdk import WorkspaceClient

        try:
            return WorkspaceClient(
                host=self.host or None, product="datalake-assets", product_version="0.1.0"
            )
        except ValueError as e:  # the SDK found no host or no credentials
            raise Failure(description=f"Databricks: {e}. {NO_CREDENTIALS}") from None

    def _where(self) -> str:
        return f"on cluster {self.cluster_id}" if self.cluster_id else "on a job cluster"

    # -------------------------------------------------------------------------- run_sync

    def run_sync(
        self, request: SyncRequest, context: AssetExecutionContext | None = None
    ) -> SyncReport:
        req = self._remote_request(request)
        logger = context.log if context is not None else log
        client = self._client()
        if self.cluster_id:
            self._check_cluster(client, logger)
        try:
            package = stage_databricks_package(client, self.package_dir)
        except Exception as e:
            raise Failure(
                description=f"could not upload the job's package to {self.package_dir}: {_error(e)}"
            ) from None
        logger.info(
            f"job package {package.zip_path}"
            + (f" (uploaded {', '.join(package.uploaded)})" if package.uploaded else "")
        )
        submitted_at = datetime.now(UTC)
        message: dict | None = None
        if context is None:  # no Dagster run to report to: the job runs without Pipes
            run = self._submit(client, req, package, [], logger)
            final = self._wait(run, logger)
        else:
            folder = layout.join(self.pipes_root or default_pipes_root(req.lake_root), req.run_id)
            with open_pipes_session(
                context=WithoutTypedEventStream(context),
                context_injector=StorageContextInjector(folder),
                message_reader=StorageMessageReader(folder, interval=self.pipes_interval_s),
                extras={"source_id": req.source_id, "run_id": req.run_id},
            ) as session:
                pipes_args = [
                    a for k, v in session.get_bootstrap_cli_arguments().items() for a in (k, v)
                ]
                run = self._submit(client, req, package, pipes_args, logger)
                final = self._wait(run, logger)
            message = sync_message(session.get_custom_messages())
        return self._result(req, run, final, message, submitted_at)

    def _check_cluster(self, client: Any, logger: Any) -> None:
        """The cluster must exist; a terminated one is fine (Databricks starts it for the run)."""
        try:
            cluster = client.clusters.get(self.cluster_id)
        except Exception as e:
            raise Failure(
                description=f"Databricks cluster {self.cluster_id}: {_error(e)}"
            ) from None
        state = _value(cluster.state) or "UNKNOWN"
        logger.info(f"Databricks cluster {self.cluster_id} ({cluster.cluster_name}) is {state}")

    # ---------------------------------------------------------------------------- submit

    def submit_body(
        self, req: SyncRequest, package: DatabricksPackage, pipes_args: list[str]
    ) -> dict:
        """The ``runs/submit`` request."""
        params = ["--package", package.zip_path, "--runs-on", f"Databricks {self._where()}"]
        if pipes_args:
            params += ["--pipes-via", "storage", *pipes_args]
        params += ["--pipes-interval", f"{self.pipes_interval_s:g}", "--", *req.to_args()]
        task: dict[str, Any] = {
            "task_key": "sync",
            "spark_python_task": {"python_file": package.entry_path, "parameters": params},
            "libraries": [{"pypi": {"package": spec}} for spec in self.libraries],
        }
        if self.cluster_id:
            task["existing_cluster_id"] = self.cluster_id
        else:
            task["new_cluster"] = self.new_cluster(req)
        return {
            "run_name": f"datalake sync {req.source_id} {req.hours[0]}..{req.hours[-1]} "
            f"(run {req.run_id})"[:4096],
            "tasks": [task],
            # Databricks' own backstop: it stops the run past both timeouts, Dagster or not
            "timeout_seconds": int(self.submit_timeout_s + self.run_timeout_s),
            # a retried submit (a lost response) must not start a second sync
            "idempotency_token": uuid.uuid4().hex,
        }

    def new_cluster(self, req: SyncRequest) -> dict:
        """A job cluster for one run. Under a policy, what it fixes (runtime, VM size, the
        storage and metastore settings in ``infra/azure``) is applied by Databricks."""
        spec: dict[str, Any] = {
            "autoscale": {"min_workers": 1, "max_workers": self.max_workers},
            "spark_conf": self._job_conf(req),
        }
        if self.policy_id:
            spec.update(policy_id=self.policy_id, apply_policy_default_values=True)
        if self.spark_version:
            spec["spark_version"] = self.spark_version
        if self.node_type:
            spec["node_type_id"] = self.node_type
        return spec

    def _job_conf(self, req: SyncRequest) -> dict[str, str]:
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

    def _submit(
        self,
        client: Any,
        req: SyncRequest,
        package: DatabricksPackage,
        pipes_args: list[str],
        logger: Any,
    ) -> RemoteRun:
        from databricks.sdk.service.jobs import SubmitTask

        body = self.submit_body(req, package, pipes_args)
        try:
            waiter = client.jobs.submit(
                run_name=body["run_name"],
                tasks=[SubmitTask.from_dict(t) for t in body["tasks"]],
                timeout_seconds=body["timeout_seconds"],
                idempotency_token=body["idempotency_token"],
            )
            run_id = int(waiter.bind()["run_id"])
        except Exception as e:
            raise Failure(
                description=f"could not submit the sync to Databricks {self._where()}: {_error(e)}"
            ) from None
        logger.info(f"submitted Databricks run {run_id} {self._where()}")
        return _DatabricksRun(
            client, run_id, self._where(), self.poll_interval_s, self.cancel_wait_s
        )

    # ---------------------------------------------------------------------------- result

    def _read(self, location: str) -> bytes | None:
        return storage.read_bytes(location) if storage.exists(location) else None
