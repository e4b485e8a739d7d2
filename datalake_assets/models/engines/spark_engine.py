"""``[models] engine = "spark"``: dbt-spark writes the models into the lake itself (their files
under ``<lake>/models/<slug>/``, ``location_root``; their tables in the Hive catalog).

Which Spark the models run on: dbt-spark's ``session`` method pointed at a Spark Connect
server (``SPARK_REMOTE``) that holds the lake's catalog.

dbt-spark has no Spark Connect method of its own, but its ``session`` method builds its session
with ``SparkSession.builder.getOrCreate()``, which PySpark 4 turns into a Connect session when
``SPARK_REMOTE`` is set. So dbt itself (a subprocess, as dagster-dbt runs it) starts no JVM and
never opens the metastore; the Spark that already holds it runs the models:

* **served** (``datalake dev``): the metastore's own Connect server (``catalog/
  metastore_server.py``). Derby admits one JVM; this is the one. No second JVM is started.
* **not served** (``dagster asset materialize`` from a shell, ``dg launch``, tests, a
  ``datalake forget`` without ``datalake dev``): the process opens the catalog itself, exactly
  as a sync outside ``datalake dev`` does (its local session with the catalog's Hive settings,
  or the session it already has), and serves that session to dbt: a Connect service started
  inside it, on 127.0.0.1 with a random token, for the life of the process.

With ``[models] profiles_dir`` (your own ``profiles.yml``: EMR's Thrift server, Databricks)
nothing here is used; dbt connects as that profile says.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from datalake_assets.catalog.config import config_from_settings
from datalake_assets.models.engines.engine_interface import EngineError, EngineRun, ModelEngine
from datalake_assets.models.publish import models_root
from datalake_assets.settings import LakeSettings, SourceSettings

_lock = threading.Lock()
_hosted: dict[int, str] = {}  # id(JVM SparkContext) -> URL of the Connect service it hosts


class SparkEngine(ModelEngine):
    name = "spark"

    def why_not(self, settings: LakeSettings) -> str | None:
        return can_run(settings)

    def profile(self, settings: LakeSettings, source: SourceSettings) -> dict:
        """dbt-spark's ``session`` method. It sets no ``spark.master``: the session is a Spark
        Connect one (``SPARK_REMOTE``) to the Spark that holds the catalog, so the models land
        in the same metastore as the event tables."""
        return {
            "type": "spark",
            "method": "session",
            "host": "NA",
            "schema": source.database,
            # tests and independent models run side by side: each is a small query, mostly
            # planning and catalog calls, so a few at once keep the local cores busy
            "threads": 4,
            "server_side_parameters": {
                "spark.sql.session.timeZone": "UTC",
                # a table model's files are in the lake (location_root): dbt drops the external
                # table and creates it again at the same place, over the previous files
                "spark.sql.legacy.allowNonEmptyLocationInCTAS": "true",
            },
        }

    def models_config(self, settings: LakeSettings, source: SourceSettings) -> dict:
        return {"+location_root": models_root(settings, source), "+file_format": "parquet"}

    @contextlib.contextmanager
    def run(self, settings, source, project, run_id) -> Iterator[EngineRun]:
        yield EngineRun(env=subprocess_extra(dbt_env(settings)))


def can_run(settings: LakeSettings) -> str | None:
    """Why the models cannot run here (``None``: they can): the local profile needs Spark
    with a Hive catalog; Glue or no catalog need a profile of your own."""
    backend = settings.catalog.backend
    if settings.models.profiles_dir:
        return None
    if settings.table_format != "segment":
        # the local profile reads the event tables from Spark's Hive catalog: an Iceberg
        # lake's tables are in the Iceberg catalog, and no Iceberg runtime for Spark installs
        return (
            f"table_format is {settings.table_format!r}: the local models profile reads "
            "the tables through Spark's Hive catalog, which cannot read Iceberg tables here; "
            'use [models] engine = "duckdb" (the default: it reads Iceberg tables), or set '
            "[models] profiles_dir to a profiles.yml for a Spark with the Iceberg runtime "
            "(docs/guides/models.md)"
        )
    if backend == "hive":
        return None
    return (
        f"[catalog] backend is {backend!r}: the Spark engine's local profile runs on Spark with "
        'a Hive catalog; use [models] engine = "duckdb" (the default) or "athena" (Glue), or '
        "set [models] profiles_dir to a profiles.yml for your Spark (EMR's Thrift server, "
        "Databricks: docs/guides/models.md)"
    )


def dbt_env(settings: LakeSettings, spark: Any = None) -> dict[str, str]:
    """The environment dbt needs to reach the platform's Spark: ``{"SPARK_REMOTE": url}``, or
    ``{}`` with a profile of your own. ``spark``: a session of this process to serve when no
    server holds the metastore (default: the active one, else a new local one)."""
    if settings.models.profiles_dir:
        return {}
    why_not = can_run(settings)
    if why_not:
        raise EngineError(why_not)
    cfg = config_from_settings(settings.catalog)
    if cfg.servable:
        from datalake_assets.catalog import metastore_server

        url = metastore_server.served_url(cfg.metastore_dir)
        if url is not None:
            return {"SPARK_REMOTE": url}
    return {"SPARK_REMOTE": host_connect(spark or _local_session(settings))}


def _local_session(settings: LakeSettings) -> Any:
    """This process's Spark session: the active one, else the local session a sync outside
    ``datalake dev`` opens (``[spark]`` and the catalog's Hive settings)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    from datalake_assets.transform.session import settings_spark_session

    return settings_spark_session(settings)


def host_connect(spark: Any) -> str:
    """Start a Spark Connect service inside ``spark`` (a classic session of this process), on
    127.0.0.1 with a random token, once per SparkContext; returns its ``sc://`` URL."""
    jsc = spark.sparkContext._jsc.sc()
    with _lock:
        url = _hosted.get(id(spark.sparkContext))
        if url is not None:
            return url
        token = secrets.token_hex(24)
        conf = jsc.conf()  # read by the service when it starts: set before
        for key, value in _service_conf(token).items():
            conf.set(key, value)
        service = getattr(
            getattr(spark._jvm.org.apache.spark.sql.connect.service, "SparkConnectService$"),
            "MODULE$",
        )
        service.start(jsc)
        # "localhost": PySpark's client sends a token over plain gRPC to localhost only
        url = f"sc://localhost:{service.localPort()}/;token={token}"
        _hosted[id(spark.sparkContext)] = url
        return url


def _service_conf(token: str) -> Mapping[str, str]:
    return {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": "0",  # any free port
        "spark.connect.authenticate.token": token,
    }


def subprocess_extra(extra: Mapping[str, str]) -> dict[str, str]:
    """``extra`` for dbt's process, quieter: dbt-spark asks for Hive support, which a Connect
    session cannot change (one warning a model, not ours to fix)."""
    out = dict(extra)
    if "PYTHONWARNINGS" not in os.environ:
        out["PYTHONWARNINGS"] = "ignore::UserWarning:pyspark.sql.connect.conf"
    return out
