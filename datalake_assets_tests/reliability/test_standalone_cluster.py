"""The sync distributed: a Spark standalone cluster on loopback (a master and two worker
processes from pyspark's own distribution), the job sent with ``spark-submit --master
spark://...`` and ``--py-files`` as on EMR, and its lake compared with a ``local[2]`` sync of
the same archive, table by table and row by row."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import zipfile

import duckdb
import pytest

from datalake_assets.ingest.demo import generate_archive
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets.transform.job import SyncRequest, run_sync

pytestmark = pytest.mark.spark

SRC = "dist"
HOURS = ("2026-11-21T10", "2026-11-21T11")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _spark_home() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return _find_spark_home()


def _master_state(ui_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """``spark://127.0.0.1:<port>`` with two one-core workers; torn down after the module."""
    home = _spark_home()
    base = tmp_path_factory.mktemp("standalone")
    env = {
        **os.environ,
        "SPARK_HOME": home,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(base / "logs"),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_NO_DAEMONIZE": "1",
    }
    spark_class = os.path.join(home, "bin", "spark-class")
    procs = []

    def start(args: list[str], log: str) -> None:
        out = open(base / log, "wb")
        procs.append(
            subprocess.Popen(
                [spark_class, *args],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

    # Port 0: the master binds its own ports and logs them. (A port picked free by the test
    # and released before the JVM binds it can be taken in between by another process.)
    start(
        [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--webui-port",
            "0",
        ],
        "master.log",
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            log = (base / "master.log").read_text(errors="replace")
            rpc = re.search(r"Starting Spark master at spark://127\.0\.0\.1:(\d+)", log)
            web = re.search(r"MasterWebUI.*started at http://[^:]+:(\d+)", log)
            if rpc and web and "I have been elected leader" in log:
                port, ui = int(rpc.group(1)), int(web.group(1))
                break
            assert procs[0].poll() is None and time.monotonic() < deadline, log[-3000:]
            time.sleep(0.5)
        for i in range(2):
            work = base / f"worker{i}"
            work.mkdir()
            start(
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1500m",
                    "--webui-port",
                    "0",
                    "--work-dir",
                    str(work),
                    f"spark://127.0.0.1:{port}",
                ],
                f"worker{i}.log",
            )
        while len([w for w in _master_state(ui)["workers"] if w["state"] == "ALIVE"]) < 2:
            assert time.monotonic() < deadline, "workers never registered"
            time.sleep(0.5)
        yield {"url": f"spark://127.0.0.1:{port}", "ui": ui, "base": base, "env": env}
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


def package(dest: str) -> str:
    """The job's package as a ``--py-files`` zip, the way a cluster receives it."""
    path = os.path.join(dest, "datalake_assets.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for f in glob.glob(os.path.join(REPO, "datalake_assets", "**", "*"), recursive=True):
            if os.path.isfile(f) and "__pycache__" not in f:
                z.write(f, os.path.relpath(f, REPO))
    return path


def table_rows(lake_root: str) -> dict[str, list[tuple]]:
    """Every table's full content, sorted; quarantine without its run id."""
    out = {}
    for d in sorted(glob.glob(f"{lake_root}/data/{SRC}/segment_type=*")):
        files = glob.glob(f"{d}/**/*.parquet", recursive=True)
        out[d.rsplit("=", 1)[1]] = duckdb.sql(
            f"select * from read_parquet({files!r}, union_by_name=true, hive_partitioning=false)"
            " order by all"
        ).fetchall()
    q = glob.glob(f"{lake_root}/quarantine/{SRC}/**/*.parquet", recursive=True)
    out["_quarantine"] = duckdb.sql(
        f"select * exclude (run_id) from read_parquet({q!r}, hive_partitioning=false) order by all"
    ).fetchall()
    return out


@pytest.mark.slow
def test_the_sync_on_a_standalone_cluster_equals_the_local_sync(spark, cluster, tmp_path):
    archive = str(tmp_path / "archive")
    generate_archive(
        archive,
        SRC,
        [ArchiveHour.parse(h) for h in HOURS],
        events_per_hour=3000,
        files_per_hour=3,
        seed=21,
    )
    # The archive paths differ between the two lakes only by the lake root.
    local_lake, cluster_lake = str(tmp_path / "lake-local"), str(tmp_path / "lake-cluster")
    local = run_sync(spark, SyncRequest(local_lake, archive, SRC, HOURS)).source.to_dict()

    # The cluster runs the Spark path (a batch this small would otherwise stay in the driver);
    # the local lake, synced by the driver-local path, is the reference.
    req = SyncRequest(cluster_lake, archive, SRC, HOURS, run_id="on-cluster", local_max_bytes=0)
    submit = [
        os.path.join(_spark_home(), "bin", "spark-submit"),
        "--master",
        cluster["url"],
        "--conf",
        "spark.executor.cores=1",
        "--conf",
        "spark.executor.memory=1g",
        "--conf",
        "spark.cores.max=2",
        "--conf",
        "spark.driver.memory=1g",
        "--name",
        "datalake-sync",
        "--conf",
        "spark.ui.showConsoleProgress=false",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.sql.shuffle.partitions=4",
        "--py-files",
        package(str(tmp_path)),
        os.path.join(REPO, "datalake_assets", "transform", "job.py"),
        *req.to_args(),
    ]
    env = {k: v for k, v in cluster["env"].items() if k != "PYTHONPATH"}  # only the zip
    done = subprocess.run(submit, env=env, capture_output=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()[-4000:]
    on_cluster = json.loads(done.stdout.decode().strip().splitlines()[-1])

    # It really ran distributed: one application, an executor on each worker process.
    apps = _master_state(cluster["ui"])["completedapps"]
    assert len(apps) == 1 and apps[0]["state"] == "FINISHED" and apps[0]["cores"] == 2
    for i in range(2):
        assert glob.glob(str(cluster["base"] / f"worker{i}" / "app-*" / "*" / "stderr")), i

    for k in (
        "lines_in",
        "messages_written",
        "duplicates",
        "lines_quarantined",
        "values_quarantined",
        "hours_synced",
    ):
        assert on_cluster[k] == local[k], k
    assert on_cluster["lines_in"] == 6000
    local_rows, cluster_rows = table_rows(local_lake), table_rows(cluster_lake)
    assert sorted(cluster_rows) == sorted(local_rows)
    for t in local_rows:
        assert cluster_rows[t] == local_rows[t], t
    shutil.rmtree(cluster_lake)
