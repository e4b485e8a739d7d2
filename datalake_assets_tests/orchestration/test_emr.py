"""The EMR compute backend against moto: the package uploaded, the step submitted, how runs
end.

moto 5.2.5 keeps EMR steps RUNNING (or PENDING behind another) forever and starts EMR
Serverless job runs in SUCCESS; it has no CancelSteps. The tests play AWS's side through moto's
own objects: they set a step's or job run's state (and reason) in moto's backend, and add
CancelSteps to moto (acting on its step objects as EMR does). Our code is never mocked.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile

import pytest
from dagster import Failure

from datalake_assets.catalog.config import CatalogConfig
from datalake_assets.lake.report import SyncReport
from datalake_assets.orchestration.compute.emr_package import (
    ENTRY_FILE,
    PACKAGE_FILE,
    build_package,
    stage_package,
)
from datalake_assets.orchestration.compute.emr_steps import (
    EmrSparkCompute,
    step_failure_reason,
    step_log_location,
)
from datalake_assets.transform.job import parse_args
from datalake_assets.transform.pipes_entry import split_argv
from datalake_assets.transform.session import JOB_SPARK_CONF
from datalake_assets_tests.orchestration.emr_helpers import (
    BUCKET,
    FAST,
    REGION,
    after_double_dash,
    as_submitted,
    interrupt_once_waiting,
    our_step,
    put_report,
    request,
    sample_report,
    when,
)


def test_package_lands_in_the_staging_prefix_once(emr_world):
    staged = stage_package(emr_world.s3, f"s3://{BUCKET}/_jobs/")
    folder = f"_jobs/{staged.sha256}/"
    assert staged.zip_uri == f"s3://{BUCKET}/{folder}{PACKAGE_FILE}"
    assert staged.entry_uri == f"s3://{BUCKET}/{folder}{ENTRY_FILE}"
    assert staged.uploaded == (PACKAGE_FILE, ENTRY_FILE)
    keys = {o["Key"] for o in emr_world.s3.list_objects_v2(Bucket=BUCKET)["Contents"]}
    assert keys == {folder + PACKAGE_FILE, folder + ENTRY_FILE}

    body = emr_world.s3.get_object(Bucket=BUCKET, Key=folder + PACKAGE_FILE)["Body"].read()
    names = set(zipfile.ZipFile(io.BytesIO(body)).namelist())
    for name in (
        "datalake_assets/__init__.py",
        "datalake_assets/transform/job.py",
        "datalake_assets/transform/pipes_entry.py",
        "datalake_assets/transform/stage_a.py",
        "datalake_assets/spec/layout.py",
        "datalake_assets/catalog/glue.py",
        "datalake_assets/lake.toml",
        "dagster_pipes/__init__.py",
    ):
        assert name in names, name
    assert not any(
        n.startswith(("pyspark/", "pyarrow/", "dagster/", "datalake_assets_tests/"))
        or "__pycache__" in n
        or n.endswith(".pyc")
        for n in names
    )
    entry = emr_world.s3.get_object(Bucket=BUCKET, Key=folder + ENTRY_FILE)["Body"].read().decode()
    assert "from datalake_assets.transform.pipes_entry import main" in entry
    compile(entry, ENTRY_FILE, "exec")

    # content-addressed: the same sources give the same bytes; nothing is uploaded again
    assert build_package() == body
    again = stage_package(emr_world.s3, f"s3://{BUCKET}/_jobs")
    assert (again.sha256, again.uploaded) == (staged.sha256, ())


def test_an_old_package_is_uploaded_again(emr_world):
    """A lifecycle rule on _jobs/ must never expire a package in use: older than the refresh
    age, it is put again (which renews its date)."""
    stage_package(emr_world.s3, f"s3://{BUCKET}/_jobs/")
    assert stage_package(emr_world.s3, f"s3://{BUCKET}/_jobs/", refresh_after_s=0).uploaded == (
        PACKAGE_FILE,
        ENTRY_FILE,
    )


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
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ""},
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "--lake-root" in out.stdout  # the job's own --help, reached without Pipes


def test_entry_argv_splits_at_the_double_dash():
    req = request()
    opts, job_argv = split_argv(
        [
            "--dagster-pipes-context",
            "c",
            "--dagster-pipes-messages",
            "m",
            "--aws-region",
            "eu-west-1",
            "--emr-cluster-id",
            "j-1",
            "--",
            *req.to_args(),
        ]
    )
    assert (opts.pipes_context, opts.pipes_messages, opts.aws_region, opts.emr_cluster_id) == (
        "c",
        "m",
        "eu-west-1",
        "j-1",
    )
    assert parse_args(job_argv) == req
    opts, job_argv = split_argv(req.to_args())  # no "--": all of it is the job's
    assert opts.pipes_context is None and parse_args(job_argv) == req


# ------------------------------------------------------------------------------ EMR: steps


def test_step_runs_spark_submit_with_the_package_and_the_request(emr_world, tmp_path):
    req = request()
    body = sample_report(tmp_path, req)
    compute = EmrSparkCompute(
        cluster_id=emr_world.cluster,
        replay_cluster_id=emr_world.replay_cluster,
        conf={"spark.executor.memory": "8g"},
        **FAST,
    )

    def complete(step):  # the job wrote its report, then the step completed
        put_report(emr_world.s3, req, body)
        step.state = "COMPLETED"

    sim = when(lambda: our_step(emr_world.cluster), complete)
    result = compute.run_sync(req)
    sim.join()
    assert not sim.errors
    assert result == SyncReport.parse(body)
    assert result.source.lines_in == 5 and result.tables["tracks"].row_count == 3

    steps = emr_world.emr.list_steps(ClusterId=emr_world.cluster)["Steps"]
    assert (
        len(steps) == 1
        and not emr_world.emr.list_steps(ClusterId=emr_world.replay_cluster)["Steps"]
    )
    step = emr_world.emr.describe_step(ClusterId=emr_world.cluster, StepId=steps[0]["Id"])["Step"]
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
    opts, job_argv = split_argv(args[entry_at + 1 :])
    assert (opts.aws_region, opts.emr_cluster_id, opts.pipes_context) == (
        REGION,
        emr_world.cluster,
        None,
    )  # no Dagster context here: no Pipes
    assert parse_args(job_argv) == as_submitted(req)
    keys = {
        o["Key"] for o in emr_world.s3.list_objects_v2(Bucket=BUCKET, Prefix="_jobs/")["Contents"]
    }
    assert zip_uri.split(f"{BUCKET}/", 1)[1] in keys and entry_uri.split(f"{BUCKET}/", 1)[1] in keys


def test_a_replay_runs_on_the_replay_cluster(emr_world, tmp_path):
    req = request(replay=True, hours=("2026-11-21T10", "2026-11-21T11"))
    body = sample_report(tmp_path, req)

    def complete(step):
        put_report(emr_world.s3, req, body)
        step.state = "COMPLETED"

    sim = when(lambda: our_step(emr_world.replay_cluster), complete)
    compute = EmrSparkCompute(
        cluster_id=emr_world.cluster, replay_cluster_id=emr_world.replay_cluster, **FAST
    )
    assert compute.run_sync(req) == SyncReport.parse(body)
    sim.join()
    assert not emr_world.emr.list_steps(ClusterId=emr_world.cluster)["Steps"]
    step = emr_world.emr.list_steps(ClusterId=emr_world.replay_cluster)["Steps"][0]
    assert "2026-11-21T10..2026-11-21T11" in step["Name"]
    args = emr_world.emr.describe_step(ClusterId=emr_world.replay_cluster, StepId=step["Id"])[
        "Step"
    ]
    assert parse_args(after_double_dash(args["Config"]["Args"])).replay is True


def test_a_failed_step_names_its_state_reason_and_logs(emr_world):
    def fail(step):
        step.state = "FAILED"
        step.last_state_change_reason = "Step failed with exitCode 1"

    sim = when(lambda: our_step(emr_world.cluster), fail)
    with pytest.raises(Failure) as err:
        EmrSparkCompute(cluster_id=emr_world.cluster, **FAST).run_sync(request())
    sim.join()
    step = our_step(emr_world.cluster)
    text = err.value.description
    assert f"EMR step {step.id} on cluster {emr_world.cluster} ended FAILED" in text
    assert "Step failed with exitCode 1" in text
    assert f"s3://{BUCKET}/emr-logs/{emr_world.cluster}/steps/{step.id}/" in text
    assert err.value.metadata["state"].value == "FAILED"


def test_step_failure_details_and_log_locations():
    """EMR's FailureDetails (moto does not return them) win over the state change reason."""
    status = {
        "State": "FAILED",
        "StateChangeReason": {"Message": "Step failed"},
        "FailureDetails": {
            "Reason": "Unknown error.",
            "Message": "Exception in main",
            "LogFile": "s3n://logs/j-1/steps/s-1/stderr.gz",
        },
    }
    assert step_failure_reason(status) == "Unknown error.; Exception in main; Step failed"
    assert step_log_location(status, "s3n://logs/", "j-1", "s-1") == (
        "s3://logs/j-1/steps/s-1/stderr.gz"
    )
    status.pop("FailureDetails")
    assert step_log_location(status, "s3n://logs", "j-1", "s-1") == "s3://logs/j-1/steps/s-1/"
    assert "/mnt/var/log/hadoop/steps/s-1/" in step_log_location(status, None, "j-1", "s-1")


def test_a_step_that_never_starts_is_cancelled(emr_world, moto_cancel_steps):
    # another step holds the cluster: ours stays PENDING behind it
    emr_world.emr.add_job_flow_steps(
        JobFlowId=emr_world.cluster,
        Steps=[
            {
                "Name": "someone else's",
                "ActionOnFailure": "CONTINUE",
                "HadoopJarStep": {"Jar": "command-runner.jar", "Args": ["sleep", "3600"]},
            }
        ],
    )
    compute = EmrSparkCompute(cluster_id=emr_world.cluster, **{**FAST, "submit_timeout_s": 0.3})
    with pytest.raises(Failure) as err:
        compute.run_sync(request())
    step = our_step(emr_world.cluster)
    assert moto_cancel_steps == [(emr_world.cluster, [step.id], "SEND_INTERRUPT")]
    assert step.state == "CANCELLED"
    text = err.value.description
    assert "timed out: did not start within submit_timeout_s=0.3 (still PENDING)" in text
    assert "cancel SUBMITTED" in text and f"{emr_world.cluster}/steps/{step.id}/" in text


def test_a_cancel_that_fails_does_not_hide_the_timeout(emr_world):
    """Without CancelSteps (moto's gap, or missing permissions) the timeout still says why."""
    compute = EmrSparkCompute(cluster_id=emr_world.cluster, **{**FAST, "run_timeout_s": 0.2})
    with pytest.raises(Failure) as err:
        compute.run_sync(request())
    text = err.value.description
    assert "ran longer than run_timeout_s=0.2 (still RUNNING)" in text
    assert "cancel failed: NotImplementedError" in text


def test_interrupting_the_run_cancels_the_step(emr_world, moto_cancel_steps, monkeypatch):
    """The Dagster run being terminated (an interrupt in the wait) cancels the step."""
    interrupt_once_waiting(monkeypatch, lambda: our_step(emr_world.cluster))
    with pytest.raises(KeyboardInterrupt):
        EmrSparkCompute(cluster_id=emr_world.cluster, **FAST).run_sync(request())
    assert our_step(emr_world.cluster).state == "CANCELLED"
    assert len(moto_cancel_steps) == 1


def test_a_terminated_cluster_is_refused_before_submitting(emr_world):
    emr_world.emr.terminate_job_flows(JobFlowIds=[emr_world.replay_cluster])
    with pytest.raises(Failure, match=f"EMR cluster {emr_world.replay_cluster} is TERMINATED"):
        EmrSparkCompute(cluster_id=emr_world.replay_cluster, **FAST).run_sync(request())


def test_a_completed_step_without_a_report_is_a_failure(emr_world):
    sim = when(lambda: our_step(emr_world.cluster), lambda s: setattr(s, "state", "COMPLETED"))
    with pytest.raises(Failure) as err:
        EmrSparkCompute(cluster_id=emr_world.cluster, **FAST).run_sync(request())
    sim.join()
    assert "ended COMPLETED" in err.value.description
    assert "no sync report was found at s3://lake-bucket/lake/reports/day=" in err.value.description


def test_an_embedded_hive_metastore_is_refused(emr_world):
    req = request(catalog=CatalogConfig(backend="hive", metastore_dir="/tmp/m"))
    with pytest.raises(Failure, match="embedded Derby metastore"):
        EmrSparkCompute(cluster_id=emr_world.cluster, **FAST).run_sync(req)
    assert our_step(emr_world.cluster) is None
