"""The local session's Java options: the idle-heap flags reach the JVM, with or without a Hive
catalog's own options, and never override a user's JVM flags."""

from __future__ import annotations

import os

import pytest

from datalake_assets.catalog.config import hive_spark_conf
from datalake_assets.transform.session import IDLE_HEAP_JAVA_OPTIONS, local_session_conf

JAVA = "spark.driver.extraJavaOptions"


def test_the_idle_heap_flags_join_every_set_of_java_options(tmp_path):
    assert local_session_conf()[JAVA] == f"-Duser.timezone=UTC {IDLE_HEAP_JAVA_OPTIONS}"
    hive = hive_spark_conf(str(tmp_path / "m"), str(tmp_path / "w"), None)
    java = local_session_conf(extra=hive)[JAVA].split()
    assert f"-Dderby.system.home={tmp_path}/m" in java  # the Hive catalog's options stay
    assert IDLE_HEAP_JAVA_OPTIONS.split() == java[-3:]
    user = {JAVA: "-Duser.timezone=UTC -XX:+UseParallelGC"}
    assert local_session_conf(extra=user)[JAVA] == "-Duser.timezone=UTC -XX:+UseParallelGC"


@pytest.mark.spark
def test_the_suites_jvm_runs_with_the_flags(spark):
    """The suite's session is built by ``local_spark_session`` with a Hive conf: its JVM got
    the flags (an unknown -XX flag would not have started at all)."""
    args = list(
        spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    )
    for flag in IDLE_HEAP_JAVA_OPTIONS.split():
        assert flag in args


@pytest.mark.spark
def test_the_suites_jvms_map_its_class_data_archive():
    """``support/jvm_cds.py``: a JVM that PySpark launches (the launcher and class path of
    every session the suite starts) maps the archive, so its classes come from it; a JVM
    that silently fell back (the archive no longer fits the jars) fails this test."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    from datalake_assets_tests.support import jvm_cds

    if jvm_cds.archive_path() is None:
        pytest.skip("the suite runs without a class-data archive (DATALAKE_TEST_CDS_DIR=off)")
    jvm_cds.start_build()
    path = Path(os.environ[jvm_cds.PATH_ENV])
    deadline = time.monotonic() + 300
    while not path.exists() and time.monotonic() < deadline:  # being built: minutes at most
        time.sleep(1)
    assert path.exists(), (
        f"no archive after 5 minutes: `python -m datalake_assets_tests.support.jvm_cds {path}` "
        "builds it in the foreground and shows why it fails"
    )
    jvm_cds.use_if_ready()
    assert f"-XX:SharedArchiveFile={path}" in os.environ["SPARK_SUBMIT_OPTS"]
    # PySpark's launcher forks with a preexec_fn: from this worker, grown by half an hour of
    # tests, the kernel once refused the fork (ENOMEM, the fresh-clone run at d990b0e). A
    # small interpreter launches the JVM instead, as every sync process of the suite does.
    done = subprocess.run(
        [sys.executable, "-c", _MAPS_OF_A_PYSPARK_JVM],
        env=os.environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    maps = done.stdout
    assert str(path) in maps, "the JVM did not map the archive: it loads every class itself"


_MAPS_OF_A_PYSPARK_JVM = """
from pathlib import Path
from pyspark import SparkConf
from pyspark.java_gateway import launch_gateway

gateway = launch_gateway(SparkConf(loadDefaults=False))
try:
    print(Path(f"/proc/{gateway.proc.pid}/maps").read_text())
finally:
    gateway.shutdown()
    gateway.proc.stdin.close()
    gateway.proc.wait(timeout=60)
"""
