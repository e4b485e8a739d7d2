"""The models' engine seam: what runs a source's dbt project, and how its results reach the
lake (``[models] engine``; one module per engine, ``engines/__init__.py`` picks it).

An engine says whether it can run here (``why_not``), what dbt needs to reach it (the local
``profiles.yml`` target, the models' config in ``dbt_project.yml``), and wraps each build
(``run``): before dbt starts it prepares what dbt reads (DuckDB: a database of views over the
lake's current tables), after dbt ends it publishes the models dbt built into the lake
(DuckDB: through the table format, ``lake/formats``), then cleans up. Engines whose dbt
adapter writes into the lake itself (Spark, Athena) publish nothing.

Every build goes through ``run``: a Dagster asset's (``orchestration/dbt/model_assets.py``),
an erasure's (``models/erasure.py``) and the benchmark's."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from datalake_assets.settings import LakeSettings, SourceSettings


class EngineError(RuntimeError):
    """The models cannot run on this setup (the message says what to configure)."""


@dataclass(frozen=True)
class BuiltModel:
    """A model a dbt build built (``run_results.json``): its relation and the days it holds.

    ``day_column``: a daily model's partition column (``meta.datalake.day_column``);
    ``days``: the days the build replaced (``min_day`` - ``days_before`` ..
    ``max_day``), ``None`` for a build of every day or a whole table."""

    name: str
    schema: str
    identifier: str
    day_column: str = ""
    days: tuple[str, str] | None = None


@dataclass
class EngineRun:
    """One build on an engine: the environment of dbt's process, and what to do with the
    models it built."""

    env: dict[str, str] = field(default_factory=dict)

    def publish(self, built: list[BuiltModel]) -> list[Any]:
        """Put the built models' rows in the lake; the tables committed (``CommittedTable``)."""
        return []


class ModelEngine(ABC):
    name: str

    @abstractmethod
    def why_not(self, settings: LakeSettings) -> str | None:
        """Why the models cannot run on this engine here; ``None``: they can."""

    @abstractmethod
    def profile(self, settings: LakeSettings, source: SourceSettings) -> dict:
        """The local ``profiles.yml`` target's output for the source."""

    def models_config(self, settings: LakeSettings, source: SourceSettings) -> dict:
        """The ``+`` configs of every model in ``dbt_project.yml`` (where the engine writes)."""
        return {}

    @contextlib.contextmanager
    def run(
        self,
        settings: LakeSettings,
        source: SourceSettings,
        project: Any,  # models.workspace.SourceProject
        run_id: str,
    ) -> Iterator[EngineRun]:
        """Wrap one dbt build (see the module doc)."""
        yield EngineRun()
