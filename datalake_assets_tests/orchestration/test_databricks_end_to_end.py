"""The Databricks backend end to end, through Pipes, against the fake workspace
(``databricks_fake.py``): the asset uploads the package and submits a run; the "cluster" runs
the uploaded entry script under ``spark-submit`` (local Spark, the lake in a temp folder, the
job's code only from the package); Pipes messages and the report come back through the lake's
storage. Then a sync error, and a Dagster run terminated while the job runs.
"""

from __future__ import annotations

import glob
import os
import threading
import time

import pytest
from dagster import AssetKey, DagsterInstance, materialize

from datalake_assets.lake.report import SyncReport
from datalake_assets.orchestration.compute import remote_compute as remote_module
from datalake_assets.orchestration.compute.databricks import DatabricksSparkCompute
from datalake_assets_tests.orchestration.databricks_fake import live_processes
from datalake_assets_tests.orchestration.test_emr_end_to_end import write_archive
from datalake_assets_tests.support.settings_files import load_lake_toml

CLUSTER = "0123-456789-abcd1234"
FAST = {
    "poll_interval_s": 0.05,
    "pipes_interval_s": 1.0,
    "submit_timeout_s": 120.0,
    "run_timeout_s": 900.0,
    "cancel_wait_s": 60.0,
}


def settings_for(tmp_path, catalog: str = 'backend = "none"', table_format: str | None = "segment"):
    return load_lake_toml(
        tmp_path,
        f"""
archive_root = "archive"
lake_root = "lake"
[catalog]
{catalog}
[[sources]]
id = "web-prod"
slug = "web_prod"
start = "2026-11-01-00:00"
""",
        env={"DATALAKE_HOME": str(tmp_path / "home")},
        table_format=table_format,
    )


def the_run(fake):
    (run,) = fake.runs.values()
    return run


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.dagster
def test_end_to_end_a_run_on_an_existing_cluster_reports_through_pipes(fake_databricks, tmp_path):
    """On the default table format, Iceberg (its SQL catalog in the lake): the task's driver
    commits the tables; the job cluster's test below runs the Segment layout."""
    from datalake_assets.orchestration.sync.source_assets import build_source_assets
    from datalake_assets_tests.support.iceberg_reader import sql_catalog, tables

    settings = settings_for(tmp_path, table_format=None)
    assert settings.table_format == "iceberg"
    source = settings.sources[0]
    lines = write_archive(settings.archive_root, source.id)
    compute = DatabricksSparkCompute(host=fake_databricks.url, cluster_id=CLUSTER, **FAST)
    instance = DagsterInstance.ephemeral()
    result = materialize(
        build_source_assets(settings, source),
        resources={"compute": compute},
        partition_key="2026-11-21-10:00",
        instance=instance,
        raise_on_error=False,
    )
    run = the_run(fake_databricks)
    assert result.success, run.stderr[-4000:]
    assert (run.life, run.result) == ("TERMINATED", "SUCCESS")

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
    committed = tables(sql_catalog(settings.lake_root), "web_prod")
    assert committed["tracks"].scan().to_arrow().num_rows == 6
    checks = {
        (e.asset_key.path[-1], e.check_name): e.passed for e in result.get_asset_check_evaluations()
    }
    assert checks[("sync_reports", "completeness")] is True
    # the job's own words reached the Dagster run through Pipes
    logs = [r.user_message for r in instance.all_logs(result.run_id)]
    assert any(f"starting on Databricks on cluster {CLUSTER}" in m for m in logs), logs
    assert any("sync finished: 11 lines in, 9 rows" in m for m in logs), logs
    (path,) = glob.glob(
        f"{settings.lake_root}/reports/day=*/source={source.id}/run_id={result.run_id}/report.json"
    )
    with open(path, "rb") as f:
        assert SyncReport.parse(f.read()).source.lines_in == lines

    # what was submitted: the uploaded entry script, the package, Pipes via the lake's storage
    task = run.task
    assert task["existing_cluster_id"] == CLUSTER and "new_cluster" not in task
    params = task["spark_python_task"]["parameters"]
    assert task["spark_python_task"]["python_file"].startswith("/Workspace/Shared/datalake/jobs/")
    assert params[params.index("--package") + 1].endswith("/datalake_assets.zip")
    assert params[params.index("--pipes-via") + 1] == "storage"
    assert run.body["timeout_seconds"] == 120 + 900
    assert {lib["pypi"]["package"] for lib in task["libraries"]} >= {
        "orjson>=3.9",
        "pydantic>=2.11,<3",
        "pyiceberg==0.12.0",  # the driver's Iceberg commit
    }
    # Pipes files: one folder per run next to the lake, context and message chunks
    pipes = tmp_path / "_pipes" / result.run_id
    assert (pipes / "context.json").is_file()
    assert sorted(p.name for p in (pipes / "messages").iterdir())[0] == "1.json"
    endpoints = {p for _, p in fake_databricks.calls}
    assert {
        "/api/2.1/clusters/get",
        "/api/2.2/jobs/runs/submit",
        "/api/2.2/jobs/runs/get",
    } <= endpoints
    assert "/api/2.2/jobs/runs/cancel" not in endpoints


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.dagster
def test_end_to_end_a_sync_error_on_a_job_cluster_fails_the_check(fake_databricks, tmp_path):
    from datalake_assets.orchestration.sync.source_assets import build_source_assets

    # Glue unreachable: the job fails with a SyncError (catalog) after writing nothing
    settings = settings_for(
        tmp_path,
        'backend = "glue"\nglue_region = "us-east-1"\nglue_endpoint_url = "http://127.0.0.1:9"',
    )
    source = settings.sources[0]
    write_archive(settings.archive_root, source.id)
    fake_databricks.env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    compute = DatabricksSparkCompute(
        host=fake_databricks.url,
        policy_id="E0631F5C0D0003E6",
        package_dir="/Volumes/main/lake/jobs",
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
    run = the_run(fake_databricks)
    assert (run.life, run.result) == ("TERMINATED", "FAILED"), run.stderr[-4000:]
    assert not result.success
    cluster = run.task["new_cluster"]
    assert (cluster["policy_id"], cluster["apply_policy_default_values"]) == (
        "E0631F5C0D0003E6",
        True,
    )
    assert run.task["spark_python_task"]["python_file"].startswith("/Volumes/main/lake/jobs/")
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    error = failure.step_failure_data.error.cause  # the asset's error, under Dagster's wrapper
    assert error.cls_name == "SyncError"
    assert "catalog" in error.message
    assert f"Databricks run {run.run_id} on a job cluster ended FAILED" in error.message
    assert f"#job/runs/{run.run_id}" in error.message  # where its logs are
    completeness = [
        e for e in result.get_asset_check_evaluations() if e.check_name == "completeness"
    ]
    assert completeness and completeness[0].passed is False
    logs = [r.user_message for r in instance.all_logs(result.run_id)]
    assert any("sync failed (" in m for m in logs), logs


def _python_driver(run) -> int | None:
    """The pid of the task's Python driver (the JVM's child running the entry script)."""
    if run.process is None:
        return None
    for pid in live_processes(run.process.pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"python" in os.path.basename(argv[0]) and any(
            a.endswith(b"pipes_entry.py") for a in argv
        ):
            return pid
    return None


def _interrupt_once_the_job_runs(monkeypatch, fake) -> list[int]:
    """Ctrl-C (what terminating a Dagster run raises in the step) in the main thread, once, at
    the wait's first pause after the task's Python driver has started."""
    real_sleep, drivers = time.sleep, []

    def sleep(seconds: float) -> None:
        if not drivers and threading.current_thread() is threading.main_thread():
            pid = next((p for r in fake.runs.values() if (p := _python_driver(r))), None)
            if pid is not None:
                drivers.append(pid)
                raise KeyboardInterrupt
        real_sleep(seconds)

    monkeypatch.setattr(remote_module.time, "sleep", sleep)
    return drivers


@pytest.mark.slow
@pytest.mark.spark
def test_terminating_the_run_cancels_it_and_kills_the_task(fake_databricks, tmp_path, monkeypatch):
    from datalake_assets.transform.sync_request import request_from_settings

    settings = settings_for(tmp_path)
    source = settings.sources[0]
    write_archive(settings.archive_root, source.id)
    req = request_from_settings(settings, source, ("2026-11-21T10",), replay=False)
    compute = DatabricksSparkCompute(host=fake_databricks.url, cluster_id=CLUSTER, **FAST)
    drivers = _interrupt_once_the_job_runs(monkeypatch, fake_databricks)
    with pytest.raises(KeyboardInterrupt):
        compute.run_sync(req)
    assert drivers
    run = the_run(fake_databricks)
    assert ("POST", "/api/2.2/jobs/runs/cancel") in fake_databricks.calls
    assert (run.life, run.result) == ("TERMINATED", "CANCELED")
    # the task's whole process group is gone: spark-submit, its JVM, the Python driver
    assert run.process.poll() is not None
    assert live_processes(run.process.pid) == []
    assert not glob.glob(f"{settings.lake_root}/reports/**/report.json", recursive=True)
