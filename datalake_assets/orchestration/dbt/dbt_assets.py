"""A source's parsed dbt project as Dagster assets, through ``dagster-dbt``.

``model_assets.py`` says what the model assets are (partitions, automation, the sensor); this
module is what needs ``dagster-dbt``: the translator from dbt nodes to the source's asset
keys, the two ``@dbt_assets`` of a project, and one dbt build. It is imported only when a
source has models (``model_assets.build_model_assets``), so a code location without them does
not pay dagster-dbt's and dbt's imports in each of its processes.
"""

# no "from __future__ import annotations": Dagster reads the context annotation at runtime

import contextlib
import io
import os
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetKey,
    BackfillPolicy,
    Failure,
    TimeWindowPartitionMapping,
)
from dagster_dbt import (
    DagsterDbtTranslator,
    DagsterDbtTranslatorSettings,
    DbtCliResource,
    dbt_assets,
)

from datalake_assets.models.build import built_models, day_env, day_range
from datalake_assets.models.engines import engine_for
from datalake_assets.models.workspace import SourceProject, dbt_executable
from datalake_assets.orchestration.dbt.model_rules import (
    DAILY_TAG,
    daily_condition,
    daily_partitions,
    is_daily,
    models_group,
    table_condition,
)
from datalake_assets.settings import LakeSettings, SourceSettings


class LakeTranslator(DagsterDbtTranslator):
    """dbt nodes -> the source's asset keys, groups, partition mappings and automation."""

    def __init__(self, source: SourceSettings):
        super().__init__(
            DagsterDbtTranslatorSettings(enable_asset_checks=True, enable_code_references=False)
        )
        self.source = source

    def get_asset_key(self, dbt_resource_props: Mapping[str, Any]) -> AssetKey:
        # a source is the lake table of that name; a model is named as in the catalog
        return AssetKey([self.source.slug, dbt_resource_props["name"]])

    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str | None:
        return models_group(self.source)

    def get_owners(self, dbt_resource_props: Mapping[str, Any]):
        return list(self.source.owners) or None

    def get_partition_mapping(self, dbt_resource_props, dbt_parent_resource_props):
        if (
            is_daily(dbt_resource_props)
            and dbt_parent_resource_props.get("resource_type") == "source"
        ):
            # the day's 24 hours; a source's first day starts at its first hour (the hours
            # before are no partitions), which must not make that day unselectable
            return TimeWindowPartitionMapping(allow_nonexistent_upstream_partitions=True)
        return None

    def get_automation_condition(self, dbt_resource_props):
        return daily_condition() if is_daily(dbt_resource_props) else table_condition()

    def get_metadata(self, dbt_resource_props: Mapping[str, Any]) -> Mapping[str, Any]:
        meta = dict(super().get_metadata(dbt_resource_props))
        if dbt_resource_props["resource_type"] == "model":
            meta["dagster/table_name"] = f"{self.source.database}.{dbt_resource_props['name']}"
        return meta


@contextlib.contextmanager
def _environ(extra: Mapping[str, str]) -> Iterator[None]:
    """``extra`` in ``os.environ`` while dagster-dbt starts dbt (it copies the environment)."""
    saved = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def day_vars(start: datetime, end: datetime) -> dict[str, str]:
    """``{min_day, max_day}`` of a time window ``[start, end)`` of days."""
    return {
        "min_day": start.strftime("%Y-%m-%d"),
        "max_day": (end - timedelta(days=1)).strftime("%Y-%m-%d"),
    }


def project_assets(settings: LakeSettings, source: SourceSettings, project: SourceProject) -> list:
    """The two ``@dbt_assets`` of the source's parsed project: the daily models, the others."""
    translator = LakeTranslator(source)
    daily = daily_partitions(source)

    @dbt_assets(
        manifest=project.manifest_path,
        select=f"tag:{DAILY_TAG}",
        name=f"{source.slug}_daily_models",
        partitions_def=daily,
        dagster_dbt_translator=translator,
        backfill_policy=BackfillPolicy.single_run(),
        pool="spark_local",
    )
    def daily_models(context: AssetExecutionContext):
        window = context.partition_time_window
        days = day_vars(window.start, window.end)
        yield from _run(context, settings, source, project, ["build"], days)

    @dbt_assets(
        manifest=project.manifest_path,
        exclude=f"tag:{DAILY_TAG}",
        name=f"{source.slug}_models",
        dagster_dbt_translator=translator,
        pool="spark_local",
    )
    def table_models(context: AssetExecutionContext):
        yield from _run(context, settings, source, project, ["build"], None)

    return [daily_models, table_models]


def _quietly(context: AssetExecutionContext, stream) -> list:
    """``stream()``'s events. dagster-dbt writes each of dbt's events to stdout as it streams
    them, which ``datalake dev`` prints (about 25 lines a models run, every run): they go to
    the run's log instead, at debug level (the run's page in the UI shows them), and the
    terminal keeps the run's own lines and every warning and failure."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        events = list(stream())
    for line in out.getvalue().splitlines():
        if line.strip():
            context.log.debug(f"dbt: {line}")
    return events


def _run(
    context: AssetExecutionContext,
    settings: LakeSettings,
    source: SourceSettings,
    project: SourceProject,
    args: list[str],
    days: dict[str, str] | None,
):
    """One dbt build on the source's engine (``models/engines/``): dbt's events are held
    until the models it built are published into the lake, so a materialization in Dagster
    means the model's table is in the lake. A model that failed is not published and fails
    the run with dbt's message; the models that built are published all the same."""
    engine = engine_for(settings)
    which = f"days {days['min_day']}..{days['max_day']}" if days else "every day"
    context.log.info(f"dbt {' '.join(args)} on {engine.name}, {which} ({project.project_dir})")
    with (
        engine.run(settings, source, project, context.run.run_id) as run,
        _environ({**run.env, **day_env(days)}),
    ):
        invocation = DbtCliResource(
            project_dir=project.project_dir,
            profiles_dir=project.profiles_dir,
            target=project.target,
            dbt_executable=dbt_executable(),
        ).cli(args, context=context, raise_on_error=False)
        events = _quietly(context, invocation.stream)
        built = built_models(
            invocation.get_artifact("manifest.json"),
            invocation.get_artifact("run_results.json"),
            day_range(days),
        )
        published = run.publish(built)
    for table in published:
        context.log.info(f"published {table.table} to {table.location}")
    yield from events
    if not invocation.is_successful():
        error = invocation.get_error()
        raise Failure(
            description=f"dbt {args[0]} failed on {engine.name}: {error}",
        )
