"""The sync's Spark session: its settings, built from ``[spark]`` in one place.

``local_session_conf`` is every ``spark.*`` setting of a local session; ``local_spark_session``
builds it (the CLI, the job run by ``python -m``, the tests) and ``LocalSparkCompute`` hands
the same settings to ``dagster_pyspark``. Under ``spark-submit`` the submit's session is used
(``job_spark_session``) with what the job relies on (``JOB_SPARK_CONF``) set on it.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping

from datalake_assets.catalog.config import CatalogConfig, config_from_settings, prepare_session_env
from datalake_assets.settings import LakeSettings
from datalake_assets.settings.transform_section import SparkSettings
from datalake_assets.transform import spark_logs

# Session settings the job relies on, wherever it runs (local session or spark-submit).
JOB_SPARK_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}
APP_NAME = "datalake-sync"
# The JVM of a local sync is mostly idle (Python workers parse and write), yet G1 kept the
# heap it had grown: 2.2-2.6 GB of RSS through a 2M-event hour. A collection every second
# while idle, and a heap given back above 30 % free, cut that run's peak from 4.9 to 3.5 GB
# at no cost in time (bench/README.md, session 10). JDK 12+ (Spark 3.5 and 4 need 17).
IDLE_HEAP_JAVA_OPTIONS = (
    "-XX:G1PeriodicGCInterval=1000 -XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30"
)
_DEFAULT_SPARK = SparkSettings()


def _with_task_retries(master: str) -> str:
    """``local[N]`` -> ``local[N,4]``: like a cluster (``spark.task.maxFailures`` = 4), a task
    that hit a transient error (an S3 SlowDown on a small ranged read fails inside the AWS SDK
    without a retry) is run again. Tasks are idempotent: their files have deterministic names
    and a failed attempt's output rows are discarded."""
    m = re.fullmatch(r"local\[(\d+|\*)\]", master.strip())
    return f"local[{m.group(1)},4]" if m else master


def spark_settings_conf(spark: SparkSettings, catalog: CatalogConfig) -> dict[str, str]:
    """The ``extra`` settings of a local session from ``[spark]`` and the catalog (a Hive
    catalog needs the session, unless a server holds its metastore: ``metastore_server.py``):
    shuffle partitions, ``extra_conf``, then the catalog's."""
    return {
        "spark.sql.shuffle.partitions": str(spark.shuffle_partitions),
        **spark.extra_conf,
        **catalog.session_conf(),
    }


def prepare_local_spark_env(conf: Mapping[str, str] | None = None) -> None:
    """What a local session needs before the JVM starts: a loopback address, this Python,
    and for a metastore in MySQL/MariaDB its driver's jar and password (the JVM reads the
    password from its environment: ``catalog/metastore.py``)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if conf:
        prepare_session_env(conf)


def local_session_conf(
    master: str = _DEFAULT_SPARK.master,
    driver_memory: str = _DEFAULT_SPARK.driver_memory,
    extra: dict | None = None,
) -> dict[str, str]:
    """Every ``spark.*`` setting of a local session sized for a small machine; ``extra``
    (e.g. ``spark_settings_conf``, whose Hive conf sets its own Java options) last, so it
    may override any of them; ``IDLE_HEAP_JAVA_OPTIONS`` are then added to the Java options."""
    conf = {
        "spark.master": _with_task_retries(master),
        "spark.app.name": APP_NAME,
        "spark.driver.memory": driver_memory,
        "spark.sql.shuffle.partitions": str(_DEFAULT_SPARK.shuffle_partitions),
        "spark.ui.enabled": "false",
        "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
        **JOB_SPARK_CONF,
        **(extra or {}),
    }
    java = conf["spark.driver.extraJavaOptions"]
    if "-XX:" not in java:  # JVM flags of the user's own ([spark.conf]) are left alone
        conf["spark.driver.extraJavaOptions"] = f"{java} {IDLE_HEAP_JAVA_OPTIONS}"
    return conf


def local_spark_session(
    master: str = _DEFAULT_SPARK.master,
    driver_memory: str = _DEFAULT_SPARK.driver_memory,
    extra: dict | None = None,
    *,
    quiet: bool = False,
):
    """A local session (one per process: an existing one is returned). ``quiet`` (the
    ``datalake`` commands): Spark logs errors only (``spark_logs.py``)."""
    conf = local_session_conf(master, driver_memory, extra)
    prepare_local_spark_env(conf)
    from pyspark.sql import SparkSession

    if quiet:
        java = conf["spark.driver.extraJavaOptions"]
        conf["spark.driver.extraJavaOptions"] = spark_logs.quiet_java_options(java)
        spark_logs.quiet_query_error_logs()
        # no progress bar either: drawn by a JVM thread, it could land after the command's
        # own last line on stderr (a failed query's error)
        conf.setdefault("spark.ui.showConsoleProgress", "false")
    builder = SparkSession.builder
    for k, v in conf.items():
        builder = builder.config(k, v)
    if not quiet:
        return builder.getOrCreate()
    with spark_logs.jvm_notice_dropped():  # the JVM starts here, and inherits stderr
        return builder.getOrCreate()


def settings_spark_session(settings: LakeSettings, *, quiet: bool = False):
    """The local session of ``settings``' ``[spark]`` and catalog (``datalake sync``)."""
    s = settings.spark
    return local_spark_session(
        s.master,
        s.driver_memory,
        spark_settings_conf(s, config_from_settings(settings.catalog)),
        quiet=quiet,
    )


def settings_catalog(settings: LakeSettings, *, quiet: bool = False):
    """The catalog backend of ``settings`` outside a sync (``datalake forget``, the
    ``forget_person`` job): a Hive catalog gets the served metastore's session, or else the
    local session of ``settings`` (``quiet`` as ``local_spark_session``'s); the others need
    none."""
    from datalake_assets.catalog.config import catalog_from_config

    return catalog_from_config(
        config_from_settings(settings.catalog),
        lambda: settings_spark_session(settings, quiet=quiet),
    )


def job_spark_session(catalog: CatalogConfig):
    """Under ``spark-submit`` the submit's session (its configuration comes from the submit);
    otherwise a local one with the default ``[spark]`` settings and the request's catalog."""
    if os.environ.get("SPARK_ENV_LOADED") is None:
        return local_spark_session(extra=spark_settings_conf(_DEFAULT_SPARK, catalog))
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    # What the local session sets at build time and a cluster's defaults may not: the job
    # reads and writes UTC wall clock, and hands key rows to the JVM through Arrow.
    for k, v in JOB_SPARK_CONF.items():
        spark.conf.set(k, v)
    return spark
