"""The Databricks compute backend against the fake workspace (``databricks_fake.py``): the
package uploaded once per content hash, what a run is submitted with, how runs end, and the
failures that must be clear (no credentials, a wrong token, an unknown cluster, a task that
crashes, a run that never starts). Our code is never mocked; the fake plays Databricks.
"""

from __future__ import annotations

import io
import zipfile

import pytest
from dagster import Failure
from databricks.sdk import WorkspaceClient
from databricks.sdk.service.jobs import Run

from datalake_assets.catalog.config import CatalogConfig
from datalake_assets.orchestration.compute.databricks import DatabricksSparkCompute, run_state
from datalake_assets.orchestration.compute.databricks_package import (
    databricks_package,
    package_dir_kind,
    stage_databricks_package,
)
from datalake_assets.orchestration.compute.emr_package import (
    ENTRY_FILE,
    PACKAGE_FILE,
    build_package,
)
from datalake_assets.transform.job import parse_args
from datalake_assets.transform.pipes_entry import split_argv
from datalake_assets_tests.orchestration.databricks_fake import FAKE_TOKEN
from datalake_assets_tests.orchestration.emr_helpers import request

CLUSTER = "0123-456789-abcd1234"
FAST = {
    "poll_interval_s": 0.02,
    "pipes_interval_s": 1.0,
    "submit_timeout_s": 120.0,
    "run_timeout_s": 900.0,
    "cancel_wait_s": 30.0,
}
UPLOADS = {
    "/api/2.0/workspace/import",
    "/api/2.0/dbfs/close",
    "/api/2.0/dbfs/create",
    "/api/2.0/dbfs/add-block",
}


def local_request(tmp_path, **kw):
    base = {
        "lake_root": str(tmp_path / "lake"),
        "archive_root": str(tmp_path / "archive"),
        "catalog": CatalogConfig(backend="none"),
    }
    return request(**{**base, **kw})


@pytest.mark.parametrize(
    "package_dir",
    ["/Workspace/Shared/datalake/jobs", "/Volumes/main/lake/jobs", "dbfs:/datalake/jobs"],
)
def test_the_package_is_uploaded_once_per_content_hash(fake_databricks, package_dir):
    client = WorkspaceClient(host=fake_databricks.url, token=FAKE_TOKEN)
    staged = stage_databricks_package(client, package_dir)
    body, entry, digest = databricks_package()
    assert staged.sha256 == digest and staged.uploaded == (PACKAGE_FILE, ENTRY_FILE)
    assert staged.zip_path == f"{package_dir}/{digest}/{PACKAGE_FILE}"
    assert staged.entry_path == f"{package_dir}/{digest}/{ENTRY_FILE}"
    # what the cluster reads there is exactly what was built
    assert fake_databricks.local(staged.zip_path).read_bytes() == body == build_package()
    script = fake_databricks.local(staged.entry_path).read_text()
    compile(script, ENTRY_FILE, "exec")
    assert "addPyFile" in script and "from datalake_assets.transform.pipes_entry import main" in (
        script
    )
    names = set(zipfile.ZipFile(io.BytesIO(body)).namelist())
    assert {"datalake_assets/transform/pipes_storage.py", "dagster_pipes/__init__.py"} <= names
    uploads = [c for c in fake_databricks.calls if c[0] == "PUT" or c[1] in UPLOADS]
    assert uploads

    fake_databricks.calls.clear()  # the same content again: looked up, not uploaded
    again = stage_databricks_package(client, package_dir + "/")
    assert (again.sha256, again.uploaded) == (digest, ())
    assert [c for c in fake_databricks.calls if c[0] == "PUT" or c[1] in UPLOADS] == []

    # other content (the next code version) is a new folder, uploaded beside the first
    other = stage_databricks_package(client, package_dir, package=(body + b"x", entry, "0" * 64))
    assert other.uploaded == (PACKAGE_FILE, ENTRY_FILE) and "/" + "0" * 64 + "/" in (other.zip_path)


def test_package_dir_kinds():
    assert [package_dir_kind(d) for d in ("/Volumes/a/b/c", "/Workspace/Shared/x", "dbfs:/x")] == [
        "volume",
        "workspace",
        "dbfs",
    ]
    with pytest.raises(ValueError, match="not a Databricks package folder"):
        package_dir_kind("abfss://lake@acct.dfs.core.windows.net/_jobs")


def test_a_job_cluster_run_is_submitted_with_the_policy_and_the_request(fake_databricks, tmp_path):
    """A run that never starts (the cluster never frees up) is cancelled after
    submit_timeout_s; what it was submitted with is the request, unchanged."""
    fake_databricks.hold.set()
    req = local_request(tmp_path)
    compute = DatabricksSparkCompute(
        host=fake_databricks.url,
        policy_id="E0631F5C0D0003E6",
        spark_version="15.4.x-scala2.12",
        node_type="Standard_D4ds_v5",
        max_workers=3,
        conf={"spark.executor.memory": "8g"},
        libraries=["orjson>=3.9"],
        **{**FAST, "submit_timeout_s": 0.3},
    )
    with pytest.raises(Failure) as err:
        compute.run_sync(req)
    (run,) = fake_databricks.runs.values()
    text = err.value.description
    assert f"Databricks run {run.run_id} on a job cluster timed out" in text
    assert "did not start within submit_timeout_s=0.3 (still PENDING)" in text
    assert "cancelled: the run is CANCELED" in text and f"#job/runs/{run.run_id}" in text
    assert (run.life, run.result) == ("TERMINATED", "CANCELED") and run.process is None

    task = run.task
    assert task["new_cluster"] == {
        "autoscale": {"min_workers": 1, "max_workers": 3},
        "policy_id": "E0631F5C0D0003E6",
        "apply_policy_default_values": True,
        "spark_version": "15.4.x-scala2.12",
        "node_type_id": "Standard_D4ds_v5",
        "spark_conf": {**task["new_cluster"]["spark_conf"], "spark.executor.memory": "8g"},
    }
    assert "spark.sql.session.timeZone" in task["new_cluster"]["spark_conf"]
    assert task["libraries"] == [{"pypi": {"package": "orjson>=3.9"}}]
    assert run.body["run_name"].startswith("datalake sync web-prod 2026-11-21T10..2026-11-21T10")
    assert len(run.body["idempotency_token"]) == 32
    opts, job_argv = split_argv(task["spark_python_task"]["parameters"])
    assert opts.package.endswith(f"/{PACKAGE_FILE}") and opts.pipes_context is None
    assert opts.runs_on == "Databricks on a job cluster"
    assert parse_args(job_argv) == req.resolved()


@pytest.mark.slow
def test_a_task_that_crashes_names_the_state_the_error_and_the_run(fake_databricks, tmp_path):
    """A cluster whose Python is missing: not a SyncError, a Failure saying what Databricks
    said (the run's state message and the task's own error from runs/get-output)."""
    fake_databricks.env["PYSPARK_DRIVER_PYTHON"] = "/nonexistent/python3"
    compute = DatabricksSparkCompute(host=fake_databricks.url, cluster_id=CLUSTER, **FAST)
    with pytest.raises(Failure) as err:
        compute.run_sync(local_request(tmp_path))
    (run,) = fake_databricks.runs.values()
    text = err.value.description
    assert f"Databricks run {run.run_id} on cluster {CLUSTER} ended FAILED" in text
    assert "Workload failed, see run output for details" in text
    assert "task sync: " in text and "/nonexistent/python3" in text
    assert f"logs: {fake_databricks.url}/#job/runs/{run.run_id}" in text
    assert err.value.metadata["state"].value == "FAILED"
    assert ("GET", "/api/2.2/jobs/runs/get-output") in fake_databricks.calls


def test_an_unknown_cluster_is_refused_before_anything_is_uploaded(fake_databricks, tmp_path):
    compute = DatabricksSparkCompute(
        host=fake_databricks.url, cluster_id="0123-456789-nothere1", **FAST
    )
    with pytest.raises(
        Failure,
        match="Databricks cluster 0123-456789-nothere1: "
        "INVALID_PARAMETER_VALUE: Cluster 0123-456789-nothere1 "
        "does not exist",
    ):
        compute.run_sync(local_request(tmp_path))
    assert fake_databricks.calls == [("GET", "/api/2.1/clusters/get")]


def test_no_credentials_says_where_they_come_from(fake_databricks, tmp_path, monkeypatch):
    monkeypatch.delenv("DATABRICKS_TOKEN")
    compute = DatabricksSparkCompute(host=fake_databricks.url, cluster_id=CLUSTER, **FAST)
    with pytest.raises(Failure) as err:
        compute.run_sync(local_request(tmp_path))
    for name in ("DATABRICKS_TOKEN", "DATABRICKS_CLIENT_ID", "ARM_CLIENT_SECRET"):
        assert name in err.value.description
    assert fake_databricks.calls == []


def test_a_wrong_token_fails_clearly_and_is_never_shown(fake_databricks, tmp_path, monkeypatch):
    monkeypatch.setenv("DATABRICKS_TOKEN", "dapi-wrong-secret-value")
    compute = DatabricksSparkCompute(host=fake_databricks.url, cluster_id=CLUSTER, **FAST)
    with pytest.raises(Failure) as err:
        compute.run_sync(local_request(tmp_path))
    text = err.value.description
    assert "Invalid access token" in text and f"Databricks cluster {CLUSTER}" in text
    assert "dapi-wrong-secret-value" not in text and FAKE_TOKEN not in text
    assert fake_databricks.runs == {}


def test_an_embedded_hive_metastore_is_refused(fake_databricks, tmp_path):
    req = local_request(tmp_path, catalog=CatalogConfig(backend="hive", metastore_dir="/tmp/m"))
    with pytest.raises(Failure, match="embedded Derby metastore"):
        DatabricksSparkCompute(host=fake_databricks.url, cluster_id=CLUSTER, **FAST).run_sync(req)
    assert fake_databricks.calls == []


@pytest.mark.parametrize(
    ("state", "word"),
    [
        ({"life_cycle_state": "PENDING"}, "PENDING"),
        ({"life_cycle_state": "QUEUED"}, "QUEUED"),
        ({"life_cycle_state": "RUNNING"}, "RUNNING"),
        ({"life_cycle_state": "TERMINATING", "result_state": "CANCELED"}, "TERMINATING"),
        ({"life_cycle_state": "TERMINATED", "result_state": "SUCCESS"}, "SUCCESS"),
        ({"life_cycle_state": "TERMINATED", "result_state": "TIMEDOUT"}, "TIMEDOUT"),
        ({"life_cycle_state": "SKIPPED"}, "SKIPPED"),
        ({"life_cycle_state": "INTERNAL_ERROR", "result_state": "FAILED"}, "INTERNAL_ERROR"),
        ({}, "UNKNOWN"),
    ],
)
def test_run_states_in_one_word(state, word):
    assert run_state(Run.from_dict({"run_id": 1, "state": state})) == word
