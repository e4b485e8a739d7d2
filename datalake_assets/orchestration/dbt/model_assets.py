"""The dbt models as Dagster assets, per source, downstream of its hourly tables.

Each source's project (``models/workspace.py``) is loaded with ``dagster-dbt``'s
``@dbt_assets`` twice (``dbt_assets.py``, imported only when a source has models), split by
the model's tag:

* ``daily`` models (``daily_event_counts``, ``sessions``, a user's model tagged ``daily``):
  daily-partitioned (UTC, from the source's first day); each day depends on its 24 hourly
  partitions of every table it reads (``TimeWindowPartitionMapping``). A range of days is ONE
  dbt invocation (``BackfillPolicy.single_run``), its days passed in dbt's environment
  (``models/build.py``'s ``day_env``, read by the project's ``build_days()``; never
  string-built SQL, and no ``--vars``, which would make dbt parse the project again), so a
  year's backfill is one ``dbt build``.
* the others (``identity_graph``, ``users``): whole tables, rebuilt from every day.

Asset keys are ``[<slug>, <model>]`` (the catalog's ``<database>.<model>``); sources map to the
tables' keys ``[<slug>, <table>]``, which is the lineage. dbt's tests are asset checks on their
models (dagster-dbt's default). Automation (``AutomationCondition``): a day builds by itself
once all its hours are in, again when one of its hours is synced again (a late file, a replay
within ``REPLAY_DAYS``); the whole tables once a day (``TABLES_CRON``): ``model_rules.py``.
"""

import logging

from dagster import (
    AssetSelection,
    AutomationConditionSensorDefinition,
    Definitions,
)

from datalake_assets.models.engines import can_run
from datalake_assets.models.workspace import (
    ModelsError,
    prepare_project,
)
from datalake_assets.orchestration.alerts.freshness_policies import with_freshness_policies
from datalake_assets.orchestration.automation.sensor_toolkit import sensor_status
from datalake_assets.orchestration.dbt.model_rules import models_group
from datalake_assets.orchestration.sync.lake_state import LakeState
from datalake_assets.settings import LakeSettings, SourceSettings

log = logging.getLogger(__name__)


MODELS_SENSOR = "datalake_models_automation"


def build_models_sensor(settings: LakeSettings, sources: list[SourceSettings]) -> list:
    """The sensor that evaluates the models' automation conditions, running by default like
    every sensor here (``[automation] sensors``): Dagster's own default one starts stopped."""
    if not sources:
        return []
    return [
        AutomationConditionSensorDefinition(
            MODELS_SENSOR,
            target=AssetSelection.groups(*[models_group(s) for s in sources]),
            default_status=sensor_status(settings.automation),
            minimum_interval_seconds=30,
            description="Builds a day of the models once its 24 hours are synced (again when one "
            "is re-synced), and the whole-table models once a day (docs/concepts/models.md)",
        )
    ]


def build_model_assets(settings: LakeSettings, source: SourceSettings, tables: list[str]) -> list:
    """The source's model assets (none with ``[models] enabled = false``)."""
    if not settings.models.enabled:
        return []
    why_not = can_run(settings)
    if why_not:
        log.warning("no models for source %s: %s", source.id, why_not)
        return []
    try:
        project = prepare_project(settings, source, tables)
    except ModelsError as e:
        # a model that does not parse (a user's .sql with an error) must not take the lake's
        # sync down with it: the models are left out of this load, the log says why
        log.error(
            "%s; the models of source %s are left out of the graph until it parses", e, source.id
        )
        return []
    # dagster-dbt (and dbt with it) is imported only when a source has models: ~2.7 s of
    # every Dagster process (code server, run, daemon) that loads this code location
    from datalake_assets.orchestration.dbt.dbt_assets import project_assets

    return project_assets(settings, source, project)


def build_dbt_definitions(settings: LakeSettings, state: LakeState) -> Definitions:
    """Every source's model assets (for its tables in ``state``; the daily ones with their
    freshness policy, ``alerts/freshness_policies.py``) and the sensor evaluating their
    automation conditions."""
    assets, model_sources = [], []
    for source_settings in settings.sources:
        source = state.effective(source_settings)  # start resolved ("auto")
        model_assets = with_freshness_policies(
            build_model_assets(settings, source, list(state.source(source).tables)),
            settings.alerts,
        )
        assets.extend(model_assets)
        if model_assets:
            model_sources.append(source)
    return Definitions(assets=assets, sensors=build_models_sensor(settings, model_sources))
