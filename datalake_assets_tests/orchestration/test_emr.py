"""The AWS compute backends against moto: what is uploaded, what is submitted, how runs end.

moto 5.2.5 keeps EMR steps RUNNING (or PENDING behind another) forever and starts EMR
Serverless job runs in SUCCESS; it has no CancelSteps. The tests play AWS's side through moto's
own objects: they set a step's or job run's state (and reason) in moto's backend, and add
CancelSteps to moto (acting on its step objects as EMR does). Our code is never mocked.

The two end-to-end tests run the Pipes flow for real against a moto server on loopback: the
asset submits, a "cluster" thread runs the submitted spark-submit's entry script from the
uploaded package in a subprocess (local Spark, the lake in a temp folder, Pipes through moto's
S3), then sets the step / job run state from the exit code.
"""

from __future__ import annotations

import glob
import io
import json
import os
import shlex
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from types import SimpleNamespace

import boto3
import pytest
from dagster import AssetKey, DagsterInstance, Failure, materialize

from datalake_assets.orchestration import emr as emr_module
from datalake_assets.catalog.config import CatalogConfig
from datalake_assets.orchestration.emr import (
    ENTRY_FILE,
    JOB_RUN_TERMINAL,
    PACKAGE_FILE,
    EmrServerlessCompute,
    EmrSparkCompute,
    build_package,
    stage_package,
    step_failure_reason,
    step_log_location,
)
from datalake_assets.settings import SettingsError, load_settings
from datalake_assets.spec import layout
from datalake_assets.transform.job import (
    JOB_SPARK_CONF,
    SyncRequest,
    parse_args,
    parse_report,
    write_report,
)
from datalake_assets.transform.pipes_entry import split_argv

ACCOUNT = "123456789012"  # moto's
REGION = "us-east-1"
BUCKET = "lake-bucket"
LAKE = f"s3://{BUCKET}/lake"
ARCHIVE = f"s3://{BUCKET}/archive"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/datalake-job-runtime"
# fast polls; bounded waits, so a broken simulation fails a test instead of hanging it
FAST = {"region": REGION, "poll_interval_s": 0.02, "pipes_interval_s": 1.0,
        "submit_timeout_s": 120.0, "run_timeout_s": 900.0}


# ------------------------------------------------------------------------------------ fixtures


@pytest.fixture()
def aws_env(monkeypatch, tmp_path):
    """moto's fake credentials; nothing from the real environment or ~/.aws."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))


def _make_world(endpoint_url: str | None = None) -> SimpleNamespace:
    kw = {"region_name": REGION, "endpoint_url": endpoint_url}
    s3, emr, es = (boto3.client(s, **kw) for s in ("s3", "emr", "emr-serverless"))
    s3.create_bucket(Bucket=BUCKET)

    def cluster(name: str) -> str:
        return emr.run_job_flow(
            Name=name, ReleaseLabel="emr-7.5.0", LogUri=f"s3://{BUCKET}/emr-logs/",
            Instances={"MasterInstanceType": "m5.xlarge", "InstanceCount": 1,
                       "KeepJobFlowAliveWhenNoSteps": True},
            JobFlowRole="EMR_EC2_DefaultRole", ServiceRole="EMR_DefaultRole",
        )["JobFlowId"]

    app = es.create_application(name="lake", releaseLabel="emr-7.5.0", type="SPARK")
    return SimpleNamespace(s3=s3, emr=emr, es=es, cluster=cluster("hourly"),
                           replay_cluster=cluster("replays"), app=app["applicationId"])


@pytest.fixture()
def aws(aws_env):
    from moto import mock_aws

    with mock_aws():
        yield _make_world()


@pytest.fixture()
def moto_cancel_steps(monkeypatch):
    """moto 5.2.5 has no CancelSteps: add it to moto, acting on moto's steps as EMR does (a
    PENDING or RUNNING step becomes CANCELLED). Returns the calls it received."""
    from moto.core.responses import ActionResult
    from moto.emr.responses import ElasticMapReduceResponse

    calls = []

    def cancel_steps(self):
        cluster_id = self._get_param("ClusterId")
        step_ids = self._get_param("StepIds", [])
        calls.append((cluster_id, list(step_ids), self._get_param("StepCancellationOption")))
        out = []
        for step in self.backend.clusters[cluster_id].steps:
            if step.id in step_ids and step.state in ("PENDING", "RUNNING"):
                step.state = "CANCELLED"
                step.last_state_change_reason = "Cancelled by the user"
                out.append({"StepId": step.id, "Status": "SUBMITTED", "Reason": ""})
        return ActionResult({"CancelStepsInfoList": out})

    monkeypatch.setattr(ElasticMapReduceResponse, "cancel_steps", cancel_steps, raising=False)
    return calls


def emr_backend():
    from moto.emr.models import emr_backends

    return emr_backends[ACCOUNT][REGION]


def serverless_backend():
    from moto.emrserverless.models import emrserverless_backends

    return emrserverless_backends[ACCOUNT][REGION]


def our_step(cluster_id: str):
    steps = [s for s in emr_backend().clusters[cluster_id].steps
             if s.name.startswith("datalake sync")]
    return steps[-1] if steps else None


def our_job_run(app: str, states: tuple[str, ...] | None = None):
    runs = serverless_backend().job_runs.get(app, [])
    runs = [r for r in runs if states is None or r.state in states]
    return runs[-1] if runs else None


def when(find: Callable, act: Callable, timeout: float = 120.0) -> threading.Thread:
    """AWS's side of a run: ``act(x)`` in a thread as soon as ``find()`` returns ``x``."""
    errors: list[BaseException] = []

    def loop() -> None:
        end = time.monotonic() + timeout
        try:
            while time.monotonic() < end:
                found = find()
                if found is not None:
                    act(found)
                    return
                time.sleep(0.02)
        except BaseException as e:  # noqa: BLE001 - the test reads t.errors
            errors.append(e)

    t = threading.Thread(target=loop, daemon=True)
    t.errors = errors
    t.start()
    return t


def interrupt_once_waiting(monkeypatch, find: Callable) -> None:
    """Ctrl-C (what terminating a Dagster run raises in the step), raised in the main thread
    at the wait's first pause once the step / job run exists: at a known point of the wait,
    not whenever a helper thread's simulated signal happens to land."""
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        if threading.current_thread() is threading.main_thread() and find() is not None:
            raise KeyboardInterrupt
        real_sleep(seconds)

    monkeypatch.setattr(emr_module.time, "sleep", sleep)


def request(**kw) -> SyncRequest:
    base = {"lake_root": LAKE, "archive_root": ARCHIVE, "source_id": "web-prod",
            "source_dir": "web-prod", "database": "web_prod", "hours": ("2026-11-21T10",),
            "run_id": "run-1", "catalog": CatalogConfig(backend="glue")}
    return SyncRequest(**{**base, **kw})


def as_submitted(req: SyncRequest) -> SyncRequest:
    """The request the cluster gets: resolved, Glue in the resource's region."""
    r = req.resolved()
    return replace(r, catalog=replace(r.catalog, glue_region=REGION))


def sample_report(tmp_path, req: SyncRequest) -> bytes:
    """A report as the job writes it (``write_report``), for ``req``, finished now (one
    reading of the clock: its folder's day is its finish time's, even at midnight)."""
    now = datetime.now(UTC)
    day = now.strftime("%Y-%m-%d")
    base = {"run_id": req.run_id, "source_id": req.source_id, "database": req.database,
            "replay": req.replay, "status": "finished", "error": None, "error_code": None,
            "finish_time": now.isoformat(), "emr_cluster_id": "j-X"}
    rows = [
        {"type": "event", "table_name": "tracks", **base, "row_count": 3, "duplicates": 1,
         "columns": [{"name": "message_id", "type": "string"}], "partitions": [],
         "checks": {"repeated_message_ids": 0, "misfits_by_column": {},
                    "conformance_failures": []}},
        {"type": "source", "table_name": None, **base, "lines_in": 5, "messages_written": 3,
         "duplicates": 1, "lines_quarantined": 1, "values_quarantined": 0, "tables": 1,
         "hours_synced": list(req.hours)},
    ]
    path = write_report(str(tmp_path / "lake"), req.source_id, req.run_id, rows, day)
    with open(path, "rb") as f:
        return f.read()


def put_report(s3, req: SyncRequest, body: bytes) -> str:
    day = json.loads(body.splitlines()[-1])["finish_time"][:10]  # where the job puts it
    location = layout.report_path(req.lake_root, req.source_id, req.run_id, day)
    key = location.split(f"s3://{BUCKET}/", 1)[1]
    s3.put_object(Bucket=BUCKET, Key=key, Body=body)
    return location


def after_double_dash(args: list[str]) -> list[str]:
    return args[args.index("--") + 1:]


# ----------------------------------------------------------------------------------- packaging


def test_package_lands_in_the_staging_prefix_once(aws):
    staged = stage_package(aws.s3, f"s3://{BUCKET}/_jobs/")
    folder = f"_jobs/{staged.sha256}/"
    assert staged.zip_uri == f"s3://{BUCKET}/{folder}{PACKAGE_FILE}"
    assert staged.entry_uri == f"s3://{BUCKET}/{folder}{ENTRY_FILE}"
    assert staged.uploaded == (PACKAGE_FILE, ENTRY_FILE)
    keys = {o["Key"] for o in aws.s3.list_objects_v2(Bucket=BUCKET)["Contents"]}
    assert keys == {folder + PACKAGE_FILE, folder + ENTRY_FILE}

    body = aws.s3.get_object(Bucket=BUCKET, Key=folder + PACKAGE_FILE)["Body"].read()
    names = set(zipfile.ZipFile(io.BytesIO(body)).namelist())
    for name in ("datalake_assets/__init__.py", "datalake_assets/transform/job.py",
                 "datalake_assets/transform/pipes_entry.py", "datalake_assets/transform/stages.py",
                 "datalake_assets/spec/layout.py", "datalake_assets/catalog/glue.py",
                 "datalake_assets/lake.toml", "dagster_pipes/__init__.py"):
        assert name in names, name
    assert not any(n.startswith(("pyspark/", "pyarrow/", "dagster/", "datalake_assets_tests/"))
                   or "__pycache__" in n or n.endswith(".pyc") for n in names)
    entry = aws.s3.get_object(Bucket=BUCKET, Key=folder + ENTRY_FILE)["Body"].read().decode()
    assert "from datalake_assets.transform.pipes_entry import main" in entry
    compile(entry, ENTRY_FILE, "exec")

    # content-addressed: the same sources give the same bytes; nothing is uploaded again
    assert build_package() == body
    again = stage_package(aws.s3, f"s3://{BUCKET}/_jobs")
    assert (again.sha256, again.uploaded) == (staged.sha256, ())


def test_an_old_package_is_uploaded_again(aws):
    """A lifecycle rule on _jobs/ must never expire a package in use: older than the refresh
    age, it is put again (which renews its date)."""
    stage_package(aws.s3, f"s3://{BUCKET}/_jobs/")
    assert stage_package(aws.s3, f"s3://{BUCKET}/_jobs/", refresh_after_s=0).uploaded == (
        PACKAGE_FILE, ENTRY_FILE)


def test_the_remote_side_runs_from_the_zip_without_dagster(tmp_path):
    """What the cluster imports: the job and its entry point from the zip, dagster_pipes from
    the zip, never dagster itself (not on the cluster); plain argv still runs the job."""
    zip_path = tmp_path / PACKAGE_FILE
    zip_path.write_bytes(build_package())
    probe = f"""
import importlib.abc, sys
class NoDagster(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("dagster", "dagster_aws", "dagster_shared"):
            raise ImportError("no dagster on the cluster: " + name)
sys.meta_path.insert(0, NoDagster())
sys.path.insert(0, {str(zip_path)!r})
import datalake_assets.transform.pipes_entry as entry, datalake_assets.transform.job as job
import dagster_pipes
for m in (entry, job, dagster_pipes):
    assert m.__file__.startswith({str(zip_path)!r}), m.__file__
from datalake_assets.settings import default_settings_text
assert "[compute]" in default_settings_text()  # package data read from the zip
opts, rest = entry.split_argv(["--aws-region", "eu-west-1", "--", "--help"])
entry.main(["--", "--help"])
"""
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": ""}, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert "--lake-root" in out.stdout  # the job's own --help, reached without Pipes


def test_entry_argv_splits_at_the_double_dash():
    req = request()
    opts, job_argv = split_argv(["--dagster-pipes-context", "c", "--dagster-pipes-messages", "m",
                                 "--aws-region", "eu-west-1", "--emr-cluster-id", "j-1", "--",
                                 *req.to_args()])
    assert (opts.pipes_context, opts.pipes_messages, opts.aws_region, opts.emr_cluster_id) == (
        "c", "m", "eu-west-1", "j-1")
    assert parse_args(job_argv) == req
    opts, job_argv = split_argv(req.to_args())  # no "--": all of it is the job's
    assert opts.pipes_context is None and parse_args(job_argv) == req


# ------------------------------------------------------------------------------ EMR: steps


def test_step_runs_spark_submit_with_the_package_and_the_request(aws, tmp_path):
    req = request()
    body = sample_report(tmp_path, req)
    compute = EmrSparkCompute(cluster_id=aws.cluster, replay_cluster_id=aws.replay_cluster,
                              conf={"spark.executor.memory": "8g"}, **FAST)

    def complete(step):  # the job wrote its report, then the step completed
        put_report(aws.s3, req, body)
        step.state = "COMPLETED"

    sim = when(lambda: our_step(aws.cluster), complete)
    result = compute.run_sync(req)
    sim.join()
    assert not sim.errors
    assert result == parse_report(body)
    assert result.source["lines_in"] == 5 and result.tables["tracks"]["row_count"] == 3

    steps = aws.emr.list_steps(ClusterId=aws.cluster)["Steps"]
    assert len(steps) == 1 and not aws.emr.list_steps(ClusterId=aws.replay_cluster)["Steps"]
    step = aws.emr.describe_step(ClusterId=aws.cluster, StepId=steps[0]["Id"])["Step"]
    assert step["ActionOnFailure"] == "CONTINUE"  # a failed sync never stops the cluster
    assert step["Config"]["Jar"] == "command-runner.jar"
    args = step["Config"]["Args"]
    assert args[:3] == ["spark-submit", "--deploy-mode", "client"]
    zip_uri = args[args.index("--py-files") + 1]
    assert zip_uri.startswith(f"s3://{BUCKET}/_jobs/") and zip_uri.endswith(f"/{PACKAGE_FILE}")
    entry_uri = zip_uri.rsplit("/", 1)[0] + f"/{ENTRY_FILE}"
    confs = [args[i + 1] for i, a in enumerate(args) if a == "--conf"]
    for k, v in {**JOB_SPARK_CONF, "spark.executor.memory": "8g"}.items():
        assert f"{k}={v}" in confs
    # after the submit options: the entry script, its options, "--", the job's argv
    entry_at = args.index(entry_uri)
    assert entry_at == args.index("--py-files") + 2 + 2 * len(confs)
    opts, job_argv = split_argv(args[entry_at + 1:])
    assert (opts.aws_region, opts.emr_cluster_id, opts.pipes_context) == (
        REGION, aws.cluster, None)  # no Dagster context here: no Pipes
    assert parse_args(job_argv) == as_submitted(req)
    keys = {o["Key"] for o in aws.s3.list_objects_v2(Bucket=BUCKET, Prefix="_jobs/")["Contents"]}
    assert zip_uri.split(f"{BUCKET}/", 1)[1] in keys and entry_uri.split(f"{BUCKET}/", 1)[1] in keys


def test_a_replay_runs_on_the_replay_cluster(aws, tmp_path):
    req = request(replay=True, hours=("2026-11-21T10", "2026-11-21T11"))
    body = sample_report(tmp_path, req)

    def complete(step):
        put_report(aws.s3, req, body)
        step.state = "COMPLETED"

    sim = when(lambda: our_step(aws.replay_cluster), complete)
    compute = EmrSparkCompute(cluster_id=aws.cluster, replay_cluster_id=aws.replay_cluster,
                              **FAST)
    assert compute.run_sync(req) == parse_report(body)
    sim.join()
    assert not aws.emr.list_steps(ClusterId=aws.cluster)["Steps"]
    step = aws.emr.list_steps(ClusterId=aws.replay_cluster)["Steps"][0]
    assert "2026-11-21T10..2026-11-21T11" in step["Name"]
    args = aws.emr.describe_step(ClusterId=aws.replay_cluster, StepId=step["Id"])["Step"]
    assert parse_args(after_double_dash(args["Config"]["Args"])).replay is True


def test_a_failed_step_names_its_state_reason_and_logs(aws):
    def fail(step):
        step.state = "FAILED"
        step.last_state_change_reason = "Step failed with exitCode 1"

    sim = when(lambda: our_step(aws.cluster), fail)
    with pytest.raises(Failure) as err:
        EmrSparkCompute(cluster_id=aws.cluster, **FAST).run_sync(request())
    sim.join()
    step = our_step(aws.cluster)
    text = err.value.description
    assert f"EMR step {step.id} on cluster {aws.cluster} ended FAILED" in text
    assert "Step failed with exitCode 1" in text
    assert f"s3://{BUCKET}/emr-logs/{aws.cluster}/steps/{step.id}/" in text
    assert err.value.metadata["state"].value == "FAILED"


def test_step_failure_details_and_log_locations():
    """EMR's FailureDetails (moto does not return them) win over the state change reason."""
    status = {"State": "FAILED", "StateChangeReason": {"Message": "Step failed"},
              "FailureDetails": {"Reason": "Unknown error.", "Message": "Exception in main",
                                 "LogFile": "s3n://logs/j-1/steps/s-1/stderr.gz"}}
    assert step_failure_reason(status) == "Unknown error.; Exception in main; Step failed"
    assert step_log_location(status, "s3n://logs/", "j-1", "s-1") == (
        "s3://logs/j-1/steps/s-1/stderr.gz")
    status.pop("FailureDetails")
    assert step_log_location(status, "s3n://logs", "j-1", "s-1") == "s3://logs/j-1/steps/s-1/"
    assert "/mnt/var/log/hadoop/steps/s-1/" in step_log_location(status, None, "j-1", "s-1")


def test_a_step_that_never_starts_is_cancelled(aws, moto_cancel_steps):
    # another step holds the cluster: ours stays PENDING behind it
    aws.emr.add_job_flow_steps(JobFlowId=aws.cluster, Steps=[{
        "Name": "someone else's", "ActionOnFailure": "CONTINUE",
        "HadoopJarStep": {"Jar": "command-runner.jar", "Args": ["sleep", "3600"]}}])
    compute = EmrSparkCompute(cluster_id=aws.cluster, **{**FAST, "submit_timeout_s": 0.3})
    with pytest.raises(Failure) as err:
        compute.run_sync(request())
    step = our_step(aws.cluster)
    assert moto_cancel_steps == [(aws.cluster, [step.id], "SEND_INTERRUPT")]
    assert step.state == "CANCELLED"
    text = err.value.description
    assert "timed out: did not start within submit_timeout_s=0.3 (still PENDING)" in text
    assert "cancel SUBMITTED" in text and f"{aws.cluster}/steps/{step.id}/" in text


def test_a_cancel_that_fails_does_not_hide_the_timeout(aws):
    """Without CancelSteps (moto's gap, or missing permissions) the timeout still says why."""
    compute = EmrSparkCompute(cluster_id=aws.cluster, **{**FAST, "run_timeout_s": 0.2})
    with pytest.raises(Failure) as err:
        compute.run_sync(request())
    text = err.value.description
    assert "ran longer than run_timeout_s=0.2 (still RUNNING)" in text
    assert "cancel failed: NotImplementedError" in text


def test_interrupting_the_run_cancels_the_step(aws, moto_cancel_steps, monkeypatch):
    """The Dagster run being terminated (an interrupt in the wait) cancels the step."""
    interrupt_once_waiting(monkeypatch, lambda: our_step(aws.cluster))
    with pytest.raises(KeyboardInterrupt):
        EmrSparkCompute(cluster_id=aws.cluster, **FAST).run_sync(request())
    assert our_step(aws.cluster).state == "CANCELLED"
    assert len(moto_cancel_steps) == 1


def test_a_terminated_cluster_is_refused_before_submitting(aws):
    aws.emr.terminate_job_flows(JobFlowIds=[aws.replay_cluster])
    with pytest.raises(Failure, match=f"EMR cluster {aws.replay_cluster} is TERMINATED"):
        EmrSparkCompute(cluster_id=aws.replay_cluster, **FAST).run_sync(request())


def test_a_completed_step_without_a_report_is_a_failure(aws):
    sim = when(lambda: our_step(aws.cluster), lambda s: setattr(s, "state", "COMPLETED"))
    with pytest.raises(Failure) as err:
        EmrSparkCompute(cluster_id=aws.cluster, **FAST).run_sync(request())
    sim.join()
    assert "ended COMPLETED" in err.value.description
    assert "no sync report was found at s3://lake-bucket/lake/reports/day=" in err.value.description


def test_an_embedded_hive_metastore_is_refused(aws):
    req = request(catalog=CatalogConfig(backend="hive", metastore_dir="/tmp/m"))
    with pytest.raises(Failure, match="embedded Derby metastore"):
        EmrSparkCompute(cluster_id=aws.cluster, **FAST).run_sync(req)
    assert our_step(aws.cluster) is None


# ------------------------------------------------------------------------- EMR Serverless


def serverless(aws, **kw) -> EmrServerlessCompute:
    return EmrServerlessCompute(application_id=aws.app, execution_role_arn=ROLE, **{**FAST, **kw})


def test_serverless_job_run_has_the_package_the_request_and_the_role(aws, tmp_path):
    req = request()
    put_report(aws.s3, req, sample_report(tmp_path, req))  # moto's job runs succeed at once
    compute = serverless(aws, conf={"spark.executor.memory": "8g"}, submit_timeout_s=600,
                         run_timeout_s=3000)
    result = compute.run_sync(req)
    assert result.source["messages_written"] == 3

    (run,) = aws.es.list_job_runs(applicationId=aws.app)["jobRuns"]
    job = aws.es.get_job_run(applicationId=aws.app, jobRunId=run["id"])["jobRun"]
    assert job["executionRole"] == ROLE
    submit = job["jobDriver"]["sparkSubmit"]
    assert submit["entryPoint"].startswith(f"s3://{BUCKET}/_jobs/")
    assert submit["entryPoint"].endswith(f"/{ENTRY_FILE}")
    zip_uri = submit["entryPoint"].rsplit("/", 1)[0] + f"/{PACKAGE_FILE}"
    assert submit["sparkSubmitParameters"] == f"--py-files {zip_uri}"
    opts, job_argv = split_argv(submit["entryPointArguments"])
    assert opts.aws_region == REGION and opts.emr_cluster_id is None
    assert parse_args(job_argv) == as_submitted(req)
    overrides = job["configurationOverrides"]
    (defaults,) = overrides["applicationConfiguration"]
    assert defaults["classification"] == "spark-defaults"
    assert defaults["properties"] == {**JOB_SPARK_CONF, "spark.executor.memory": "8g"}
    assert overrides["monitoringConfiguration"]["s3MonitoringConfiguration"]["logUri"] == (
        f"s3://{BUCKET}/_jobs/logs/")
    assert job["executionTimeoutMinutes"] == 60  # submit + run timeouts: AWS's own backstop
    assert job["tags"]["datalake/source"] == "web-prod"


def test_a_failed_job_run_names_its_state_details_and_logs(aws, monkeypatch):
    monkeypatch.setattr("moto.emrserverless.models.JOB_STATUS", "RUNNING")
    details = ("Job failed, please check complete logs in configured logging destination. "
               "ExitCode: 1.")

    def fail(run):
        run.state, run.state_details = "FAILED", details

    sim = when(lambda: our_job_run(aws.app), fail)
    with pytest.raises(Failure) as err:
        serverless(aws, log_uri=f"s3://{BUCKET}/serverless-logs").run_sync(request())
    sim.join()
    run = our_job_run(aws.app)
    text = err.value.description
    assert f"EMR Serverless job run {run.id} of application {aws.app} ended FAILED" in text
    assert details in text
    assert (f"s3://{BUCKET}/serverless-logs/applications/{aws.app}/jobs/{run.id}/SPARK_DRIVER/"
            in text)


def test_a_job_run_past_its_timeout_is_cancelled(aws, monkeypatch):
    monkeypatch.setattr("moto.emrserverless.models.JOB_STATUS", "RUNNING")
    with pytest.raises(Failure) as err:
        serverless(aws, run_timeout_s=0.3).run_sync(request())
    assert our_job_run(aws.app).state == "CANCELLED"
    assert "ran longer than run_timeout_s=0.3" in err.value.description
    assert "cancel requested" in err.value.description


def test_a_job_run_stuck_in_the_queue_is_cancelled(aws, monkeypatch):
    monkeypatch.setattr("moto.emrserverless.models.JOB_STATUS", "PENDING")
    with pytest.raises(Failure, match="did not start within submit_timeout_s=0.2 .still PENDING"):
        serverless(aws, submit_timeout_s=0.2).run_sync(request())
    assert our_job_run(aws.app).state == "CANCELLED"


def test_interrupting_the_run_cancels_the_job_run(aws, monkeypatch):
    monkeypatch.setattr("moto.emrserverless.models.JOB_STATUS", "RUNNING")
    interrupt_once_waiting(monkeypatch, lambda: our_job_run(aws.app))
    with pytest.raises(KeyboardInterrupt):
        serverless(aws).run_sync(request())
    assert our_job_run(aws.app).state == "CANCELLED"


# ------------------------------------------------------------------------------- settings


def write_settings(tmp_path, text: str):
    f = tmp_path / "lake.toml"
    f.write_text(text)
    return str(f)


EMR_TOML = """
archive_root = "s3://lake-bucket/archive"
lake_root = "s3://lake-bucket/lake"
[catalog]
backend = "glue"
[compute]
backend = "emr"
region = "eu-west-1"
cluster_id = "j-2AXXXXXXGAPLF"
replay_cluster_id = "j-3BXXXXXXGAPLF"
deploy_mode = "cluster"
submit_timeout_s = 600
run_timeout_s = 7200
poll_interval_s = 30
[compute.conf]
"spark.executor.memory" = "8g"
"spark.dynamicAllocation.enabled" = true
"spark.executor.cores" = 4
"""


def test_compute_settings_choose_the_resource(tmp_path):
    from datalake_assets.definitions import build_compute
    from datalake_assets.orchestration.resources import LocalSparkCompute

    home = {"DATALAKE_HOME": str(tmp_path / "home")}
    assert isinstance(build_compute(load_settings(env=home)), LocalSparkCompute)

    s = load_settings(write_settings(tmp_path, EMR_TOML), env=home)
    c = s.compute
    assert (c.backend, c.region, c.cluster_id, c.deploy_mode, c.poll_interval_s) == (
        "emr", "eu-west-1", "j-2AXXXXXXGAPLF", "cluster", 30)
    assert c.conf == {"spark.executor.memory": "8g", "spark.dynamicAllocation.enabled": "true",
                      "spark.executor.cores": "4"}
    hash(s)
    compute = build_compute(s)
    assert isinstance(compute, EmrSparkCompute)
    assert (compute.cluster_id, compute.replay_cluster_id, compute.deploy_mode) == (
        "j-2AXXXXXXGAPLF", "j-3BXXXXXXGAPLF", "cluster")
    assert (compute.submit_timeout_s, compute.run_timeout_s) == (600, 7200)
    assert compute.conf["spark.executor.cores"] == "4"

    serverless_toml = EMR_TOML.replace('backend = "emr"', 'backend = "emr_serverless"').replace(
        'deploy_mode = "cluster"',
        f'application_id = "00fm4oe0607u5a1d"\nexecution_role_arn = "{ROLE}"')
    compute = build_compute(load_settings(write_settings(tmp_path, serverless_toml), env=home))
    assert isinstance(compute, EmrServerlessCompute)
    assert (compute.application_id, compute.execution_role_arn) == ("00fm4oe0607u5a1d", ROLE)
    # the environment picks the backend
    env = {**home, "DATALAKE_COMPUTE_BACKEND": "emr"}
    assert load_settings(write_settings(tmp_path, EMR_TOML), env=env).compute.backend == "emr"


@pytest.mark.parametrize("change, key, fragment", [
    (('backend = "emr"', 'backend = "k8s"'), "compute.backend", "'emr_serverless'"),
    (('cluster_id = "j-2AXXXXXXGAPLF"\n', ""), "compute.cluster_id",
     "required when backend = 'emr'"),
    (('cluster_id = "j-2AXXXXXXGAPLF"', 'cluster_id = "cluster-1"'), "compute.cluster_id",
     "EMR cluster id"),
    (('backend = "emr"', 'backend = "emr_serverless"'), "compute.application_id", "required"),
    (('deploy_mode = "cluster"', 'deploy_mode = "yarn"'), "compute.deploy_mode", "'client'"),
    (('poll_interval_s = 30', 'poll_interval_s = 0'), "compute.poll_interval_s", "1 to 600"),
    (('run_timeout_s = 7200', 'run_timeout_s = "2h"'), "compute.run_timeout_s", "integer"),
    (('[compute.conf]', '[compute.conf]\n"spark.master" = "yarn"'),
     'compute.conf."spark.master"', "not allowed here"),
    (('[compute.conf]', '[compute.conf]\n"spark.submit.deployMode" = "cluster"'),
     'compute.conf."spark.submit.deployMode"', "deploy_mode"),
    (('region = "eu-west-1"', 'region = "eu-west-1"\nstaging_prefix = "/tmp/jobs"'),
     "compute.staging_prefix", "S3 URI"),
    (('region = "eu-west-1"', 'regoin = "eu-west-1"'), "compute.regoin", "did you mean 'region'"),
    (('lake_root = "s3://lake-bucket/lake"', 'lake_root = "lake"'), "lake_root",
     "must be an s3:// URI when [compute] backend = 'emr'"),
    (('backend = "glue"', 'backend = "hive"'), "catalog.backend", "embedded Derby metastore"),
])
def test_compute_settings_errors(tmp_path, change, key, fragment):
    text = EMR_TOML.replace(*change)
    assert text != EMR_TOML
    with pytest.raises(SettingsError) as err:
        load_settings(write_settings(tmp_path, text), env={"DATALAKE_HOME": str(tmp_path)})
    assert err.value.key == key, str(err.value)
    assert fragment in str(err.value)
    assert str(err.value).startswith(f"settings file {tmp_path / 'lake.toml'}: ")


def test_emr_from_the_environment_is_checked_like_the_file(tmp_path):
    env = {"DATALAKE_HOME": str(tmp_path), "DATALAKE_COMPUTE_BACKEND": "emr"}
    with pytest.raises(SettingsError) as err:
        load_settings(env=env)
    assert str(err.value) == ("environment: DATALAKE_COMPUTE_BACKEND: [compute] cluster_id: "
                              "required when backend = 'emr'")
    local_roots = EMR_TOML.replace('backend = "emr"', 'backend = "local"').replace(
        "s3://lake-bucket/", "")
    with pytest.raises(SettingsError) as err:
        load_settings(write_settings(tmp_path, local_roots), env=env)
    assert str(err.value).startswith("environment: archive_root: must be an s3:// URI when "
                                     "[compute] backend = 'emr'")


# ------------------------------------------------------------------ end to end, with Pipes


@pytest.fixture()
def moto_server(aws_env):
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def run_like_spark_submit(world, endpoint: str, args: list[str],
                          workdir) -> subprocess.CompletedProcess:
    """What spark-submit does with the submitted arguments, on this machine: fetch the entry
    script and --py-files zip from S3, run the script with the zip on PYTHONPATH (the job then
    starts a local session; the --conf entries are not applied here)."""
    options_with_value = {"--deploy-mode", "--name", "--py-files", "--conf"}
    i, py_files = 0, None
    while args[i].startswith("--"):
        if args[i] == "--py-files":
            py_files = args[i + 1]
        assert args[i] in options_with_value, args[i]
        i += 2
    entry_uri, app_args = args[i], args[i + 1:]
    local = {}
    for uri in (entry_uri, py_files):
        key = uri.split(f"s3://{BUCKET}/", 1)[1]
        local[uri] = workdir / key.rsplit("/", 1)[1]
        local[uri].write_bytes(world.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYTHONPATH"))}
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
               AWS_DEFAULT_REGION=REGION, AWS_ENDPOINT_URL=endpoint,
               PYTHONPATH=str(local[py_files]), SPARK_LOCAL_IP="127.0.0.1")
    return subprocess.run([sys.executable, str(local[entry_uri]), *app_args], cwd=workdir,
                          env=env, capture_output=True, text=True, timeout=600, check=False)


def write_archive(archive_root: str, source_id: str) -> int:
    from datalake_assets_tests.support.archive_builders import msg, write_hour

    lines = [msg(f"m{i}", minute=i) for i in range(6)]  # Order Completed tracks
    lines += [msg(f"p{i}", type="page", name="Home", minute=i) for i in range(3)]
    lines += [msg("m0", minute=30), b'{"broken json']  # a duplicate, a malformed line
    write_hour(archive_root, source_id, "2026-11-21T10", lines)
    return len(lines)


def e2e_settings(tmp_path, glue_endpoint: str):
    return load_settings(write_settings(tmp_path, f"""
archive_root = "archive"
lake_root = "lake"
[catalog]
backend = "glue"
glue_region = "{REGION}"
glue_endpoint_url = "{glue_endpoint}"
[[sources]]
id = "web-prod"
slug = "web_prod"
start = "2026-11-01-00:00"
"""), env={"DATALAKE_HOME": str(tmp_path / "home")})


@pytest.mark.spark
@pytest.mark.dagster
def test_end_to_end_an_emr_step_reports_through_pipes(moto_server, tmp_path):
    from datalake_assets.orchestration.assets import build_source_assets

    world = _make_world(moto_server)
    settings = e2e_settings(tmp_path, moto_server)
    source = settings.sources[0]
    lines = write_archive(settings.archive_root, source.id)
    workdir = tmp_path / "cluster"
    workdir.mkdir()
    outputs: list[subprocess.CompletedProcess] = []

    def run_step(step):  # the cluster: run the step, then record how it ended
        done = run_like_spark_submit(world, moto_server, step.args[1:], workdir)
        outputs.append(done)
        step.state = "COMPLETED" if done.returncode == 0 else "FAILED"

    sim = when(lambda: our_step(world.cluster), run_step, timeout=600)
    compute = EmrSparkCompute(cluster_id=world.cluster, endpoint_url=moto_server,
                              staging_prefix=f"s3://{BUCKET}/_jobs/", **FAST)
    instance = DagsterInstance.ephemeral()
    result = materialize(build_source_assets(settings, source), resources={"compute": compute},
                         partition_key="2026-11-21-10:00", instance=instance)
    sim.join()
    assert not sim.errors
    assert outputs and outputs[0].returncode == 0, outputs[0].stderr[-3000:]
    assert result.success

    md = instance.get_latest_materialization_event(
        AssetKey(["web_prod", "sync_reports"])).asset_materialization.metadata
    assert md["lines_in"].value == lines
    assert (md["messages_written"].value, md["duplicates"].value,
            md["lines_quarantined"].value) == (9, 1, 1)
    tracks = instance.get_latest_materialization_event(AssetKey(["web_prod", "tracks"]))
    assert tracks.asset_materialization.metadata["rows"].value == 6
    checks = {(e.asset_key.path[-1], e.check_name): e.passed
              for e in result.get_asset_check_evaluations()}
    assert checks[("sync_reports", "completeness")] is True
    assert checks[("tracks", "duplicates")] is True
    # the job's own words reached the run through Pipes, and it ran on "the cluster"
    logs = [r.user_message for r in instance.all_logs(result.run_id)]
    assert any(f"starting on {world.cluster}" in m for m in logs), logs
    assert any("sync finished: 11 lines in, 9 rows" in m for m in logs), logs
    (path,) = glob.glob(f"{settings.lake_root}/reports/day=*/source={source.id}/"
                        f"run_id={result.run_id}/report.json")
    with open(path, "rb") as f:
        assert parse_report(f.read()).source["emr_cluster_id"] == world.cluster
    # tables registered in (moto's) Glue by the job; Pipes files under the staging prefix
    glue = boto3.client("glue", region_name=REGION, endpoint_url=moto_server)
    names = {t["Name"] for t in glue.get_tables(DatabaseName="web_prod")["TableList"]}
    assert {"tracks", "pages", "order_completed"} <= names
    keys = [o["Key"] for o in world.s3.list_objects_v2(Bucket=BUCKET, Prefix="_jobs/pipes/")
            .get("Contents", [])]
    assert keys and all(k.startswith(f"_jobs/pipes/{result.run_id}/") for k in keys)


@pytest.mark.spark
@pytest.mark.dagster
def test_end_to_end_a_sync_error_on_serverless_fails_the_check(moto_server, tmp_path,
                                                                 monkeypatch):
    from datalake_assets.orchestration.assets import build_source_assets

    monkeypatch.setattr("moto.emrserverless.models.JOB_STATUS", "PENDING")
    world = _make_world(moto_server)
    settings = e2e_settings(tmp_path, "http://127.0.0.1:9")  # Glue unreachable: a SyncError
    source = settings.sources[0]
    write_archive(settings.archive_root, source.id)
    workdir = tmp_path / "serverless"
    workdir.mkdir()
    outputs: list[subprocess.CompletedProcess] = []

    def run_job(run):  # EMR Serverless: schedule, run, end with the exit code
        run.state = "RUNNING"
        submit = run.job_driver["sparkSubmit"]
        args = [*shlex.split(submit["sparkSubmitParameters"]), submit["entryPoint"],
                *submit["entryPointArguments"]]
        done = run_like_spark_submit(world, moto_server, args, workdir)
        outputs.append(done)
        if done.returncode == 0:
            run.state = "SUCCESS"
        else:
            run.state = "FAILED"
            run.state_details = f"Job failed. ExitCode: {done.returncode}."

    sim = when(lambda: our_job_run(world.app, ("PENDING",)), run_job, timeout=600)
    compute = EmrServerlessCompute(application_id=world.app, execution_role_arn=ROLE,
                                   endpoint_url=moto_server,
                                   staging_prefix=f"s3://{BUCKET}/_jobs/", **FAST)
    instance = DagsterInstance.ephemeral()
    result = materialize(build_source_assets(settings, source), resources={"compute": compute},
                         partition_key="2026-11-21-10:00", instance=instance,
                         raise_on_error=False)
    sim.join()
    assert not sim.errors
    assert outputs and outputs[0].returncode == 1, outputs[0].stderr[-3000:]
    assert not result.success
    run = our_job_run(world.app)
    assert run.state in JOB_RUN_TERMINAL
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    error = failure.step_failure_data.error.cause  # the asset's error, under Dagster's wrapper
    assert error.cls_name == "SyncError"
    assert "catalog" in error.message
    assert (f"EMR Serverless job run {run.id} of application {world.app} ended FAILED"
            in error.message)
    assert f"jobs/{run.id}/SPARK_DRIVER/" in error.message
    completeness = [e for e in result.get_asset_check_evaluations()
                    if e.check_name == "completeness"]
    assert completeness and completeness[0].passed is False
    assert "catalog" in completeness[0].metadata["error"].value
    logs = [r.user_message for r in instance.all_logs(result.run_id)]
    assert any("sync failed (" in m for m in logs), logs
