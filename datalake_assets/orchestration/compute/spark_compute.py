"""Compute resources: where the sync's Spark job runs. Assets only see ``SparkCompute``.

``LocalSparkCompute`` (here) runs it in the run's process; ``orchestration.compute.emr``
has ``EmrSparkCompute`` (steps of an existing EMR cluster) and ``EmrServerlessCompute``,
``orchestration.compute.databricks`` ``DatabricksSparkCompute``; ``remote_compute.py`` what those
share.
"""

from __future__ import annotations

from dagster import AssetExecutionContext, ConfigurableResource, InitResourceContext
from dagster_pyspark import LazyPySparkResource
from pydantic import Field, PrivateAttr

from datalake_assets.catalog.config import CatalogConfig, config_from_settings
from datalake_assets.lake.report import SyncReport
from datalake_assets.settings import LakeSettings
from datalake_assets.transform.session import (
    local_session_conf,
    local_spark_session,
    prepare_local_spark_env,
    spark_settings_conf,
)
from datalake_assets.transform.sync import run_sync
from datalake_assets.transform.sync_request import SyncRequest


class SparkCompute(ConfigurableResource):
    """Runs one sync (a source and a batch of hours) and returns its report.

    ``context`` is the asset's execution context when called from an asset (``None`` outside
    Dagster): remote backends report to the run through it (Dagster Pipes)."""

    def run_sync(  # pragma: no cover - interface
        self, request: SyncRequest, context: AssetExecutionContext | None = None
    ) -> SyncReport:
        raise NotImplementedError


class LocalSparkCompute(SparkCompute):
    """Spark in ``local[N]`` mode inside the run's process: the default, no cluster needed.

    The session is ``dagster_pyspark``'s (``LazyPySparkResource``, configured with
    ``transform.session.local_session_conf``): it starts on first use (about 5 s) and is
    reused by every sync of the run. It is not stopped at teardown: Spark has one session per
    process (``getOrCreate``), which the process's end stops, and stopping it would stop any
    other user's of it in the same process.
    """

    master: str = Field(default="local[2]", description="Spark master URL")
    driver_memory: str = Field(default="4g", description="JVM heap of the local driver")
    conf: dict[str, str] = Field(default_factory=dict, description="extra spark.* settings")
    catalog: list[str] = Field(
        default_factory=list,
        description="the catalog (CatalogConfig.to_args): its Hive settings join the session's "
        "when it starts, unless a server holds the metastore (metastore_server.py)",
    )
    quiet: bool = Field(
        default=False,
        description="Spark logs errors only (a terminal's process: the open hour's loop)",
    )
    _pyspark: LazyPySparkResource | None = PrivateAttr(default=None)

    @classmethod
    def from_settings(cls, settings: LakeSettings, quiet: bool = False) -> LocalSparkCompute:
        """The local compute of ``[spark]`` and the catalog (a Hive catalog may need the
        session; whether it does is known in the run, when the session starts)."""
        return cls(
            master=settings.spark.master,
            driver_memory=settings.spark.driver_memory,
            # [spark]'s settings now; the catalog's when the session starts
            conf=spark_settings_conf(settings.spark, CatalogConfig(backend="none")),
            catalog=config_from_settings(settings.catalog).to_args(),
            quiet=quiet,
        )

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._pyspark = None

    def spark(self):
        if self.quiet:  # the process's own session, its logs cut to errors
            extra = dict(self.conf)
            if self.catalog:
                extra.update(CatalogConfig.from_args(self.catalog).session_conf())
            return local_spark_session(self.master, self.driver_memory, extra, quiet=True)
        if self._pyspark is None:
            extra = dict(self.conf)
            if self.catalog:
                extra.update(CatalogConfig.from_args(self.catalog).session_conf())
            conf = local_session_conf(self.master, self.driver_memory, extra)
            prepare_local_spark_env(conf)  # a JDBC metastore's password: never in self.conf
            self._pyspark = LazyPySparkResource(spark_config=conf)
        return self._pyspark.spark_session

    def run_sync(
        self, request: SyncRequest, context: AssetExecutionContext | None = None
    ) -> SyncReport:
        return run_sync(self.spark, request)  # started on first use: a small batch may not
