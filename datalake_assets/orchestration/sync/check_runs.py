"""Runs of part of a source's assets that sync nothing: the asset checks on their own
(*Execute all* on a Checks tab) and the catalog asset on its own (``catalog_asset.py``).

The UI launches the source's sync job with no asset selected, only the table's checks, and
no partition (Dagster's UI does not yet pick partitions for checks run alone). Nothing is
synced then: the checks are evaluated again from the lake (``transform/recheck.py``), for the
run's hours when it has some (the launchpad, a partitioned launch), else for the latest
``LATEST_HOURS`` hours the syncs recorded, each result tied to its hour's partition.
"""

from __future__ import annotations

from collections.abc import Iterator

from dagster import (
    AssetCheckEvaluation,
    AssetCheckSeverity,
    AssetExecutionContext,
    AssetKey,
    Failure,
    MaterializeResult,
)

from datalake_assets.orchestration.compute.spark_compute import SparkCompute
from datalake_assets.orchestration.sync.catalog_asset import (
    CHECK_IN_STEP,
    catalog_key,
    in_step_results,
    registered_hours,
)
from datalake_assets.orchestration.sync.sync_checks import (
    CHECK_COMPLETENESS,
    completeness_results,
    plan_check_of,
    table_check_results,
    targeted,
)
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.settings.formats_section import FormatConfig
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets.spec.naming import SYNC_REPORTS
from datalake_assets.transform.catalog_phase import CatalogBehind
from datalake_assets.transform.recheck import LakeSource, latest_synced_hours, recheck
from datalake_assets.transform.sync_request import request_from_settings

LATEST_HOURS = 24  # what "Execute all" re-evaluates without a partition


def lake_source(settings: LakeSettings, source: SourceSettings) -> LakeSource:
    return LakeSource(
        lake_root=settings.lake_root,
        source_id=source.id,
        source_dir=source.lake_dir,
        date_layout=source.date_layout,
        lookback_hours=settings.sync.dedup_lookback_days * 24,
        database=source.database,
        table_prefix=source.effective_table_prefix,
        table_format=FormatConfig.of_settings(settings),
    )


def run_checks_alone(
    context: AssetExecutionContext,
    settings: LakeSettings,
    source: SourceSettings,
    compute: SparkCompute,
) -> Iterator[AssetCheckEvaluation]:
    """The selected checks' evaluations, one per hour, measured from the lake (the catalog's
    ``in_step``: by the compute, which reads the catalog: ``catalog_only = "check"``)."""
    src = lake_source(settings, source)
    if context.has_partition_key or context.has_partition_key_range:
        hours = [ArchiveHour.parse(k) for k in context.partition_keys]
        chosen = "the run's hours"
    else:
        hours = latest_synced_hours(src, LATEST_HOURS)
        chosen = f"the latest {len(hours)} hours synced"
    wanted = context.selected_asset_check_keys
    if not hours:
        context.log.warning("no synced hour to check yet: nothing evaluated")
        return
    context.log.info(
        f"evaluating {len(wanted)} checks of {source.id} from the lake for "
        f"{chosen}, {hours[0]} .. {hours[-1]} (nothing is synced)"
    )
    slug = source.slug
    if any(k.name == CHECK_IN_STEP for k in wanted):
        report = compute.run_sync(
            request_from_settings(
                settings,
                source,
                hours,
                replay=False,
                run_id=context.run.run_id,
                catalog_only="check",
            ),
            context=context,
        )
        yield from targeted(
            in_step_results(slug, report, [h.partition_key for h in hours]), context.instance
        )
    tables = sorted(
        {k.asset_key.path[-1] for k in wanted} - {SYNC_REPORTS, catalog_key(slug).path[-1]}
    )
    report = recheck(src, tables, hours)
    keys = [h.partition_key for h in hours]
    evaluations = [
        e
        for t in tables
        for e in table_check_results(slug, t, report.tables.get(t), keys, plan_check_of(source))
    ]
    if any(k.name == CHECK_COMPLETENESS for k in wanted):
        recorded = {e.hour for e in report.source.by_hour}
        evaluations += [
            e
            for e in completeness_results(slug, report.source, keys)
            if str(ArchiveHour.parse(e.partition)) in recorded
        ]
        evaluations += [
            AssetCheckEvaluation(
                asset_key=AssetKey([slug, SYNC_REPORTS]),
                check_name=CHECK_COMPLETENESS,
                passed=False,
                severity=AssetCheckSeverity.ERROR,
                partition=h.partition_key,
                metadata={"hour": str(h)},
                description=f"no sync report records hour {h}: not synced yet",
            )
            for h in hours
            if str(h) not in recorded
        ]
    yield from targeted([e for e in evaluations if e.asset_check_key in wanted], context.instance)


def register_catalog_alone(
    context: AssetExecutionContext,
    settings: LakeSettings,
    source: SourceSettings,
    compute: SparkCompute,
) -> Iterator:
    """The catalog asset materialized alone: its hours registered again from the lake's
    files, then checked; no archive read, no data written."""
    keys = list(context.partition_keys)
    slug = source.slug
    context.log.info(
        f"registering {source.id}'s hours {keys[0]} .. {keys[-1]} from the lake's "
        "files (nothing is synced)"
    )
    request = request_from_settings(
        settings, source, keys, replay=False, run_id=context.run.run_id, catalog_only="register"
    )
    try:
        report = compute.run_sync(request, context=context)
    except CatalogBehind as e:
        yield from targeted(in_step_results(slug, e.report, keys), context.instance)
        raise Failure(description=str(e)) from None
    per_hour, _ = registered_hours(report, keys)
    for k in keys:
        context.add_asset_metadata(per_hour[k], asset_key=catalog_key(slug), partition_key=k)
    yield MaterializeResult(asset_key=catalog_key(slug))
    yield from targeted(in_step_results(slug, report, keys), context.instance)
