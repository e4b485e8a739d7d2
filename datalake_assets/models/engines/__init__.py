"""The models' engines (``engine_interface.py`` says what an engine does): ``duckdb_engine``
(the default), ``spark_engine``, ``athena_engine``."""

from __future__ import annotations

from datalake_assets.models.engines.engine_interface import (
    BuiltModel,
    EngineError,
    EngineRun,
    ModelEngine,
)
from datalake_assets.settings import LakeSettings
from datalake_assets.settings.models_section import ATHENA, SPARK

__all__ = ["BuiltModel", "EngineError", "EngineRun", "ModelEngine", "can_run", "engine_for"]


def engine_for(settings: LakeSettings) -> ModelEngine:
    """The engine ``[models] engine`` names."""
    if settings.models.engine == SPARK:
        from datalake_assets.models.engines.spark_engine import SparkEngine

        return SparkEngine()
    if settings.models.engine == ATHENA:
        from datalake_assets.models.engines.athena_engine import AthenaEngine

        return AthenaEngine()
    from datalake_assets.models.engines.duckdb_engine import DuckDBEngine

    return DuckDBEngine()


def can_run(settings: LakeSettings) -> str | None:
    """Why the models cannot run here (``None``: they can)."""
    return engine_for(settings).why_not(settings)
