"""A class-data-sharing archive for the suite's Spark JVMs (the JDK's AppCDS).

Most of a short Spark JVM's CPU is spent loading and verifying the same ~15,000 classes
(Spark, Hive, Derby, Parquet) that every other JVM of the suite loads too. A dynamic CDS
archive holds them already parsed: the JVM maps the file instead. Measured on the 2-core
machine, a local session that runs one aggregation and writes one Parquet file took 17-20
CPU-seconds without the archive and 11-13 with it.

The conftest builds the archive once (``ensure_archive``) in a cache folder keyed by the
JDK and PySpark's jars, and puts it on ``SPARK_SUBMIT_OPTS`` for every JVM the suite starts.
A JVM whose class path differs (PySpark 3.5's, one with the MariaDB driver added) cannot use
it and runs as before; ``-Xlog:cds=off,cds+dynamic=off`` keeps that fallback's one-line
notice off the outputs the tests read. The product's own JVMs never see the archive.

Run as ``python -m datalake_assets_tests.support.jvm_cds <archive>``: the representative
workload whose classes the archive holds (a Hive catalog on Derby, SQL, Parquet and JSON).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# the JVM's notice when the archive does not fit its class path, kept off the outputs
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
CACHE_ENV = "DATALAKE_TEST_CDS_DIR"  # where archives are kept; "off" builds and uses none


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


def ensure_archive(timeout_s: float = 300.0) -> Path | None:
    """The archive's path, built if missing; None when it cannot be built (no Java, a
    failure): the suite then runs without one, only slower."""
    where = os.environ.get(CACHE_ENV) or str(Path.home() / ".cache" / "datalake-tests" / "cds")
    if where == "off" or not shutil.which("java"):
        return None
    path = Path(where) / f"spark-{_key()}.jsa"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    # built next to its final name and renamed: two runs building at once never read half
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".jsa.tmp")
    os.close(fd)
    os.unlink(tmp)  # the JVM creates the file itself
    try:
        done = subprocess.run(
            [sys.executable, "-m", "datalake_assets_tests.support.jvm_cds", tmp],
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
        if done.returncode != 0 or not os.path.exists(tmp):
            return None
        os.replace(tmp, path)
        return path
    except subprocess.TimeoutExpired:
        return None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def submit_opts(archive: Path | None, base: str) -> str:
    return f"{base} -XX:SharedArchiveFile={archive} {QUIET}" if archive else base


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
    _workload(sys.argv[1])
