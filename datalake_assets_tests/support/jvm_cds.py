"""A class-data-sharing archive for the suite's Spark JVMs (the JDK's AppCDS).

Most of a short Spark JVM's CPU is spent loading and verifying the same ~15,000 classes
(Spark, Hive, Derby, Parquet) that every other JVM of the suite loads too. A dynamic CDS
archive holds them already parsed: the JVM maps the file instead. Measured on the 2-core
machine, a local session that runs one aggregation and writes one Parquet file took 17-20
CPU-seconds without the archive and 11-13 with it.

The conftest starts building the archive (``start_build``) as a run begins, in a cache
folder keyed by the JDK and PySpark's jars, and puts it on ``SPARK_SUBMIT_OPTS`` once it is
there (``use_if_ready``, before each test): a run's first JVMs may start without it, every
later run's have it from the start. A JVM whose class path differs (PySpark 3.5's, one with
the MariaDB driver added) cannot use it and runs as before; ``-Xlog:cds=off,cds+dynamic=off``
keeps that fallback's one-line notice off the outputs the tests read. The product's own JVMs
never see the archive.

Run as ``python -m datalake_assets_tests.support.jvm_cds <archive>``: the representative
workload whose classes the archive holds (a Hive catalog on Derby, SQL, Parquet and JSON).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# the JVM's notice when the archive does not fit its class path, kept off the outputs
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
CACHE_ENV = "DATALAKE_TEST_CDS_DIR"  # where archives are kept; "off" builds and uses none
PATH_ENV = "DATALAKE_TEST_CDS_ARCHIVE"  # this run's archive, for the workers
BUILD_TIMEOUT_S = 600


def _key() -> str:
    """What the archive is valid for: the java binary and every jar of PySpark (the JVM
    checks the jars' sizes and times itself; a stale archive is only a wasted file)."""
    import pyspark

    java = shutil.which("java") or ""
    parts = [os.path.realpath(java), pyspark.__version__]
    jars = Path(pyspark.__file__).parent / "jars"
    for jar in sorted(jars.glob("*.jar")):
        st = jar.stat()
        parts.append(f"{jar.name}:{st.st_size}:{int(st.st_mtime)}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def archive_path() -> Path | None:
    """Where this machine's archive is (or will be); None when the suite runs without one
    (``DATALAKE_TEST_CDS_DIR=off``, or no ``java`` on the path)."""
    if os.environ.get(PATH_ENV):
        return Path(os.environ[PATH_ENV])
    where = os.environ.get(CACHE_ENV) or str(Path.home() / ".cache" / "datalake-tests" / "cds")
    if where == "off" or not shutil.which("java"):
        return None
    return Path(where) / f"spark-{_key()}.jsa"


def start_build() -> None:
    """Start building the archive in the background unless it exists or is being built; its
    path goes to ``PATH_ENV`` for the test processes started after this one. The build runs
    while the workers start and collect; their JVMs use the archive once it is there
    (``use_if_ready``). A build left running when pytest exits finishes for the next run."""
    path = archive_path()
    if path is None:
        return
    os.environ[PATH_ENV] = str(path)
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    marker = Path(f"{path}.building")
    try:  # one build at a time (a stale marker, from a build killed midway, expires)
        if time.time() - marker.stat().st_mtime < BUILD_TIMEOUT_S:
            return
        marker.unlink()
    except FileNotFoundError:
        pass
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    subprocess.Popen(
        [sys.executable, "-m", "datalake_assets_tests.support.jvm_cds", str(path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # not in the tests' process group, nor waited for
    )


def use_if_ready() -> None:
    """Put the archive on ``SPARK_SUBMIT_OPTS`` once it exists (JVMs started from then on)."""
    path = os.environ.get(PATH_ENV)
    opts = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if path and "SharedArchiveFile" not in opts and os.path.exists(path):
        os.environ["SPARK_SUBMIT_OPTS"] = f"{opts} -XX:SharedArchiveFile={path} {QUIET}".strip()


def build(path: str) -> None:
    """Run the workload with the archive written next to ``path``, then rename it into place
    (a reader never maps half a file); the build's marker goes either way."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        _workload(tmp)
        os.replace(tmp, path)
    finally:
        for leftover in (tmp, f"{path}.building"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)


def _workload(archive: str) -> None:
    """A session like the suite's (Hive on Derby, SQL, Parquet, JSON), then a normal JVM
    exit: the JVM writes the archive as it exits, so wait for it."""
    os.environ["SPARK_SUBMIT_OPTS"] = f"-XX:TieredStopAtLevel=1 -XX:ArchiveClassesAtExit={archive}"
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from datalake_assets.catalog.config import hive_spark_conf

    work = tempfile.mkdtemp(prefix="datalake-cds-")
    try:
        builder = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
        for k, v in hive_spark_conf(work, f"{work}/warehouse", None).items():
            builder = builder.config(k, v)
        spark = builder.enableHiveSupport().getOrCreate()
        gateway = spark.sparkContext._gateway
        proc = gateway.proc
        (Path(work) / "in.json").write_text('{"a": 1, "b": "x"}\n{"a": 2, "b": "y"}\n')
        df = spark.read.json(f"{work}/in.json")
        df.write.partitionBy("b").parquet(f"{work}/out")
        spark.read.parquet(f"{work}/out").groupBy("b").count().collect()
        spark.sql("CREATE DATABASE IF NOT EXISTS cds")
        spark.sql(
            f"CREATE TABLE cds.t (a BIGINT) PARTITIONED BY (b STRING) STORED AS PARQUET "
            f"LOCATION '{work}/out'"
        )
        spark.sql(f"ALTER TABLE cds.t ADD PARTITION (b='x') LOCATION '{work}/out/b=x'")
        spark.sql("SELECT count(*) FROM cds.t").collect()
        spark.stop()
        gateway.shutdown()
        proc.stdin.close()  # PySpark's gateway server exits when its stdin closes
        proc.wait(timeout=240)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    build(sys.argv[1])
