"""The EMR and EMR Serverless backends end to end, through Pipes.

The two tests run the Pipes flow for real against a moto server on loopback: the asset submits,
a "cluster" thread runs the submitted spark-submit's entry script from the uploaded package in
a subprocess (local Spark, the lake in a temp folder, Pipes through moto's S3), then sets the
step / job run state from the exit code.
"""

from __future__ import annotations

import glob
import os
import shlex
import subprocess
import sys

import boto3
import pytest
from dagster import AssetKey, DagsterInstance, materialize

from datalake_assets.lake.report import SyncReport
from datalake_assets.orchestration.compute.emr_serverless import (
    JOB_RUN_TERMINAL,
    EmrServerlessCompute,
)
from datalake_assets.orchestration.compute.emr_steps import EmrSparkCompute
from datalake_assets_tests.orchestration.emr_helpers import (
    BUCKET,
    FAST,
    REGION,
    ROLE,
    make_world,
    our_job_run,
    our_step,
    when,
)
from datalake_assets_tests.support.aws import FAKE_CREDENTIALS
from datalake_assets_tests.support.settings_files import load_lake_toml


def run_like_spark_submit(
    world, endpoint: str, args: list[str], workdir
) -> subprocess.CompletedProcess:
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
    entry_uri, app_args = args[i], args[i + 1 :]
    local = {}
    for uri in (entry_uri, py_files):
        key = uri.split(f"s3://{BUCKET}/", 1)[1]
        local[uri] = workdir / key.rsplit("/", 1)[1]
        local[uri].write_bytes(world.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYTHONPATH"))}
    env.update(
        FAKE_CREDENTIALS,
        AWS_DEFAULT_REGION=REGION,
        AWS_ENDPOINT_URL=endpoint,
        PYTHONPATH=str(local[py_files]),
        SPARK_LOCAL_IP="127.0.0.1",
    )
    return subprocess.run(
        [sys.executable, str(local[entry_uri]), *app_args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def write_archive(archive_root: str, source_id: str) -> int:
    from datalake_assets_tests.support.archive_builders import msg, write_hour

    lines = [msg(f"m{i}", minute=i) for i in range(6)]  # Order Completed tracks
    lines += [msg(f"p{i}", type="page", name="Home", minute=i) for i in range(3)]
    lines += [msg("m0", minute=30), b'{"broken json']  # a duplicate, a malformed line
    write_hour(archive_root, source_id, "2026-11-21T10", lines)
    return len(lines)


def e2e_settings(tmp_path, glue_endpoint: str, table_format: str | None = "segment"):
    return load_lake_toml(
        tmp_path,
        f"""
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
""",
        env={"DATALAKE_HOME": str(tmp_path / "home")},
        table_format=table_format,
    )


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.dagster
def test_end_to_end_an_emr_step_reports_through_pipes(moto_endpoint, tmp_path):
    """On the default table format, Iceberg: the step's driver commits the tables into the
    Iceberg catalog, Glue (as [catalog] is); the Serverless test below runs the Segment
    layout."""
    from datalake_assets.orchestration.sync.source_assets import build_source_assets

    world = make_world(moto_endpoint)
    settings = e2e_settings(tmp_path, moto_endpoint, table_format=None)
    assert settings.table_format == "iceberg"
    source = settings.sources[0]
    lines = write_archive(settings.archive_root, source.id)
    workdir = tmp_path / "cluster"
    workdir.mkdir()
    outputs: list[subprocess.CompletedProcess] = []

    def run_step(step):  # the cluster: run the step, then record how it ended
        done = run_like_spark_submit(world, moto_endpoint, step.args[1:], workdir)
        outputs.append(done)
        step.state = "COMPLETED" if done.returncode == 0 else "FAILED"

    sim = when(lambda: our_step(world.cluster), run_step, timeout=600)
    compute = EmrSparkCompute(
        cluster_id=world.cluster,
        endpoint_url=moto_endpoint,
        staging_prefix=f"s3://{BUCKET}/_jobs/",
        **FAST,
    )
    instance = DagsterInstance.ephemeral()
    result = materialize(
        build_source_assets(settings, source),
        resources={"compute": compute},
        partition_key="2026-11-21-10:00",
        instance=instance,
    )
    sim.join()
    assert not sim.errors
    assert outputs and outputs[0].returncode == 0, outputs[0].stderr[-3000:]
    assert result.success

    md = instance.get_latest_materialization_event(
        AssetKey(["web_prod", "sync_reports"])
    ).asset_materialization.metadata
    assert md["lines_in"].value == lines
    assert (
        md["messages_written"].value,
        md["duplicates"].value,
        md["lines_quarantined"].value,
    ) == (9, 1, 1)
    tracks = instance.get_latest_materialization_event(AssetKey(["web_prod", "tracks"]))
    assert tracks.asset_materialization.metadata["rows"].value == 6
    checks = {
        (e.asset_key.path[-1], e.check_name): e.passed for e in result.get_asset_check_evaluations()
    }
    assert checks[("sync_reports", "completeness")] is True
    assert checks[("tracks", "duplicates")] is True
    # the job's own words reached the run through Pipes, and it ran on "the cluster"
    logs = [r.user_message for r in instance.all_logs(result.run_id)]
    assert any(f"starting on {world.cluster}" in m for m in logs), logs
    assert any("sync finished: 11 lines in, 9 rows" in m for m in logs), logs
    (path,) = glob.glob(
        f"{settings.lake_root}/reports/day=*/source={source.id}/run_id={result.run_id}/report.json"
    )
    with open(path, "rb") as f:
        assert SyncReport.parse(f.read()).source.emr_cluster_id == world.cluster
    # Iceberg tables in (moto's) Glue, committed by the job's driver; Pipes files under the
    # staging prefix
    glue = boto3.client("glue", region_name=REGION, endpoint_url=moto_endpoint)
    found = {t["Name"]: t for t in glue.get_tables(DatabaseName="web_prod")["TableList"]}
    assert {"tracks", "pages", "order_completed"} <= set(found)
    assert found["tracks"]["Parameters"]["table_type"].upper() == "ICEBERG"
    keys = [
        o["Key"]
        for o in world.s3.list_objects_v2(Bucket=BUCKET, Prefix="_jobs/pipes/").get("Contents", [])
    ]
    assert keys and all(k.startswith(f"_jobs/pipes/{result.run_id}/") for k in keys)


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.dagster
def test_end_to_end_a_sync_error_on_serverless_fails_the_check(
    moto_endpoint, tmp_path, monkeypatch
):
    from datalake_assets.orchestration.sync.source_assets import build_source_assets

    monkeypatch.setattr("moto.emrserverless.models.JOB_STATUS", "PENDING")
    world = make_world(moto_endpoint)
    settings = e2e_settings(tmp_path, "http://127.0.0.1:9")  # Glue unreachable: a SyncError
    source = settings.sources[0]
    write_archive(settings.archive_root, source.id)
    workdir = tmp_path / "serverless"
    workdir.mkdir()
    outputs: list[subprocess.CompletedProcess] = []

    def run_job(run):  # EMR Serverless: schedule, run, end with the exit code
        run.state = "RUNNING"
        submit = run.job_driver["sparkSubmit"]
        args = [
            *shlex.split(submit["sparkSubmitParameters"]),
            submit["entryPoint"],
            *submit["entryPointArguments"],
        ]
        done = run_like_spark_submit(world, moto_endpoint, args, workdir)
        outputs.append(done)
        if done.returncode == 0:
            run.state = "SUCCESS"
        else:
            run.state = "FAILED"
            run.state_details = f"Job failed. ExitCode: {done.returncode}."

    sim = when(lambda: our_job_run(world.app, ("PENDING",)), run_job, timeout=600)
    compute = EmrServerlessCompute(
        application_id=world.app,
        execution_role_arn=ROLE,
        endpoint_url=moto_endpoint,
        staging_prefix=f"s3://{BUCKET}/_jobs/",
        **FAST,
    )
    instance = DagsterInstance.ephemeral()
    result = materialize(
        build_source_assets(settings, source),
        resources={"compute": compute},
        partition_key="2026-11-21-10:00",
        instance=instance,
        raise_on_error=False,
    )
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
    assert (
        f"EMR Serverless job run {run.id} of application {world.app} ended FAILED" in error.message
    )
    assert f"jobs/{run.id}/SPARK_DRIVER/" in error.message
    completeness = [
        e for e in result.get_asset_check_evaluations() if e.check_name == "completeness"
    ]
    assert completeness and completeness[0].passed is False
    assert "catalog" in completeness[0].metadata["error"].value
    logs = [r.user_message for r in instance.all_logs(result.run_id)]
    assert any("sync failed (" in m for m in logs), logs
