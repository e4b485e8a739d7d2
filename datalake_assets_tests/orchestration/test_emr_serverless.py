"""The EMR Serverless compute backend against moto: the job run submitted, how runs end
(test_emr.py says how moto plays AWS's side)."""

from __future__ import annotations

import pytest
from dagster import Failure

from datalake_assets.orchestration.compute.emr_package import ENTRY_FILE, PACKAGE_FILE
from datalake_assets.orchestration.compute.emr_serverless import EmrServerlessCompute
from datalake_assets.transform.job import parse_args
from datalake_assets.transform.pipes_entry import split_argv
from datalake_assets.transform.session import JOB_SPARK_CONF
from datalake_assets_tests.orchestration.emr_helpers import (
    BUCKET,
    FAST,
    REGION,
    ROLE,
    as_submitted,
    interrupt_once_waiting,
    our_job_run,
    put_report,
    request,
    sample_report,
    when,
)


def serverless(emr_world, **kw) -> EmrServerlessCompute:
    return EmrServerlessCompute(
        application_id=emr_world.app, execution_role_arn=ROLE, **{**FAST, **kw}
    )


def test_serverless_job_run_has_the_package_the_request_and_the_role(emr_world, tmp_path):
    req = request()
    put_report(emr_world.s3, req, sample_report(tmp_path, req))  # moto's job runs succeed at once
    compute = serverless(
        emr_world, conf={"spark.executor.memory": "8g"}, submit_timeout_s=600, run_timeout_s=3000
    )
    result = compute.run_sync(req)
    assert result.source.messages_written == 3

    (run,) = emr_world.es.list_job_runs(applicationId=emr_world.app)["jobRuns"]
    job = emr_world.es.get_job_run(applicationId=emr_world.app, jobRunId=run["id"])["jobRun"]
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
        f"s3://{BUCKET}/_jobs/logs/"
    )
    assert job["executionTimeoutMinutes"] == 60  # submit + run timeouts: AWS's own backstop
    assert job["tags"]["datalake/source"] == "web-prod"


def test_a_failed_job_run_names_its_state_details_and_logs(emr_world, monkeypatch):
    monkeypatch.setattr("moto.emrserverless.models.JOB_STATUS", "RUNNING")
    details = (
        "Job failed, please check complete logs in configured logging destination. ExitCode: 1."
    )

    def fail(run):
        run.state, run.state_details = "FAILED", details

    sim = when(lambda: our_job_run(emr_world.app), fail)
    with pytest.raises(Failure) as err:
        serverless(emr_world, log_uri=f"s3://{BUCKET}/serverless-logs").run_sync(request())
    sim.join()
    run = our_job_run(emr_world.app)
    text = err.value.description
    assert f"EMR Serverless job run {run.id} of application {emr_world.app} ended FAILED" in text
    assert details in text
    assert (
        f"s3://{BUCKET}/serverless-logs/applications/{emr_world.app}/jobs/{run.id}/"
        "SPARK_DRIVER/" in text
    )


def test_a_job_run_past_its_timeout_is_cancelled(emr_world, monkeypatch):
    monkeypatch.setattr("moto.emrserverless.models.JOB_STATUS", "RUNNING")
    with pytest.raises(Failure) as err:
        serverless(emr_world, run_timeout_s=0.3).run_sync(request())
    assert our_job_run(emr_world.app).state == "CANCELLED"
    assert "ran longer than run_timeout_s=0.3" in err.value.description
    assert "cancel requested" in err.value.description


def test_a_job_run_stuck_in_the_queue_is_cancelled(emr_world, monkeypatch):
    monkeypatch.setattr("moto.emrserverless.models.JOB_STATUS", "PENDING")
    with pytest.raises(Failure, match="did not start within submit_timeout_s=0.2 .still PENDING"):
        serverless(emr_world, submit_timeout_s=0.2).run_sync(request())
    assert our_job_run(emr_world.app).state == "CANCELLED"


def test_interrupting_the_run_cancels_the_job_run(emr_world, monkeypatch):
    monkeypatch.setattr("moto.emrserverless.models.JOB_STATUS", "RUNNING")
    interrupt_once_waiting(monkeypatch, lambda: our_job_run(emr_world.app))
    with pytest.raises(KeyboardInterrupt):
        serverless(emr_world).run_sync(request())
    assert our_job_run(emr_world.app).state == "CANCELLED"
