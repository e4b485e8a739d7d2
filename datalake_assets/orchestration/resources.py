"""Compute resources: where the sync's Spark job runs. Assets only see ``SparkCompute``.

``LocalSparkCompute`` (here) runs it in the run's process; ``datalake_assets.orchestration.emr`` has
``EmrSparkCompute`` (steps of an existing EMR cluster) and ``EmrServerlessCompute``.
"""

from __future__ import annotations

from dagster import AssetExecutionContext, ConfigurableResource, InitResourceContext
from pydantic import Field, PrivateAttr

from datalake_assets.transform.job import SyncRequest, SyncResult, local_spark_session, run_sync


class SparkCompute(ConfigurableResource):
    """Runs one sync (a source and a batch of hours) and returns its report.

    ``context`` is the asset's execution context when called from an asset (``None`` outside
    Dagster): remote backends report to the run through it (Dagster Pipes)."""

    def run_sync(  # pragma: no cover - interface
        self, request: SyncRequest, context: AssetExecutionContext | None = None
    ) -> SyncResult:
        raise NotImplementedError


class LocalSparkCompute(SparkCompute):
    """Spark in ``local[N]`` mode inside the run's process: the default, no cluster needed.

    The session starts on first use (about 5 s) and is reused by every sync of the run.
    """

    master: str = Field(default="local[2]", description="Spark master URL")
    driver_memory: str = Field(default="4g", description="JVM heap of the local driver")
    conf: dict[str, str] = Field(default_factory=dict, description="extra spark.* settings")
    _spark: object = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._spark = None

    def spark(self):
        if self._spark is None:
            self._spark = local_spark_session(self.master, self.driver_memory, dict(self.conf))
        return self._spark

    def run_sync(
        self, request: SyncRequest, context: AssetExecutionContext | None = None
    ) -> SyncResult:
        return run_sync(self.spark(), request)
