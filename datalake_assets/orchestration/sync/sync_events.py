"""What a finished sync tells Dagster: each hour's materializations and check evaluations.

A sync may cover a batch of hours (the archive sensor's batched run, a backfill chunk, a
replay), but the UI shows one materialization and one check result per hourly partition, so
each carries **its own hour's** figures (the report's ``by_hour`` entries,
``transform/hour_figures.py``): rows, duplicates, quarantined values, files, bytes, new and
widened columns. What only the batch as a whole measured is named as such (``batch_*``).

Its checks are ``sync_checks.py``, its metadata ``sync_metadata.py``, an hour's figures
``report_hours.py``. Used by every sync in a Dagster run (``sync_hours.py``: the source's
multi-asset, the batched sensor job) and by syncs outside Dagster recorded in the instance
(``sync_records.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet

from dagster import (
    AssetKey,
    AssetMaterialization,
    DagsterInstance,
    MaterializeResult,
    MetadataValue,
)

from datalake_assets.lake.report import SyncReport, TableReport
from datalake_assets.orchestration.sync.catalog_asset import (
    catalog_key,
    has_catalog,
    in_step_results,
    registered_hours,
)
from datalake_assets.orchestration.sync.report_hours import batch_metadata, source_hour, table_hour
from datalake_assets.orchestration.sync.sync_checks import (
    completeness_results,
    plan_check_of,
    table_check_results,
    targeted,
)
from datalake_assets.orchestration.sync.sync_metadata import (
    EMPTY_TABLE_HOUR,
    batch_totals,
    format_of,
    source_hour_metadata,
    table_hour_metadata,
)
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.spec import layout
from datalake_assets.spec.naming import QUARANTINE, SYNC_REPORTS

# Adds partition-scoped metadata to a selected asset's materialization:
# ``AssetExecutionContext.add_asset_metadata(metadata, asset_key=, partition_key=)``.
AddMetadata = Callable[..., None]


def sync_events(
    settings: LakeSettings,
    source: SourceSettings,
    tables: list[str],
    keys: list[str],
    result: SyncReport,
    selected: AbstractSet[AssetKey] | None,
    add_metadata: AddMetadata | None = None,
    unselected_note: str = "synced by the archive sensor's run",
    instance: DagsterInstance | None = None,
) -> Iterator:
    """What a finished sync of ``keys`` (partition keys) of ``source`` reports to Dagster: its
    tables, quarantine and report as one materialization per hour, each with its hour's own
    figures, and every check's evaluations.

    ``selected``: the assets of the running multi-asset (each gets a ``MaterializeResult``
    with the batch's figures, and its hours' figures through ``add_metadata``, the context's
    partition-scoped metadata); any other asset the sync rewrote, runtime
    ``AssetMaterialization`` events, one per hour. ``None`` outside the source's multi-asset
    (the batched sensor job, a sync recorded from the CLI): every asset is recorded by
    runtime events, an empty table's too, described as ``unselected_note``.

    The materializations come first, then the checks' evaluations, each tied to the hour's
    materialization through ``instance`` (``targeted``): the events must be stored as they
    are yielded (a run's step, or ``report_runless_asset_event``)."""
    slug = source.slug
    src = result.source
    declared = {AssetKey([slug, t]) for t in [*tables, QUARANTINE, SYNC_REPORTS]}
    declared.add(catalog_key(slug))
    chosen = selected if selected is not None else frozenset()
    single = len(keys) == 1
    batch = batch_metadata(keys)

    def record(
        key: AssetKey, per_hour: Callable[[str], dict], batch_md: dict, note: str | None = None
    ) -> Iterator:
        if key in chosen:
            assert add_metadata is not None, "a selected asset needs the run's context"
            for k in keys:
                add_metadata(per_hour(k), asset_key=key, partition_key=k)
            yield MaterializeResult(asset_key=key, metadata=batch_md)
            return
        if note is None:
            note = (
                "synced with the selected assets of the same source-hour"
                if selected is not None
                else unselected_note
            )
            if key not in declared:
                note = (
                    "new table: it becomes an asset of this source at the next load of "
                    "the code location (automatic, see README)"
                )
        for k in keys:
            yield AssetMaterialization(
                asset_key=key, partition=k, metadata={**per_hour(k), **batch_md}, description=note
            )

    for name, report in result.tables.items():

        def per_hour(k: str, report: TableReport = report) -> dict:
            entry = table_hour(report, k, single)
            return (
                dict(EMPTY_TABLE_HOUR)
                if entry is None
                else table_hour_metadata(report, entry, settings, source)
            )

        yield from record(
            AssetKey([slug, name]),
            per_hour,
            {**batch, "batch_rows": report.row_count} if batch else {},
        )
    for t in tables:
        key = AssetKey([slug, t])
        if t not in result.tables and (key in chosen or selected is None):
            # Synced and empty for these hours: say so. A selected asset without a result
            # would leave a backfill waiting for it, then mark the backfill failed.
            yield from record(
                key,
                lambda k: dict(EMPTY_TABLE_HOUR),
                batch,
                "no event of this table in these hours",
            )
    fmt, fsrc = format_of(settings, source)
    yield from record(
        AssetKey([slug, QUARANTINE]),
        lambda k: {
            "lines_quarantined": source_hour(src, k, single).lines_quarantined,
            "values_quarantined": source_hour(src, k, single).values_quarantined,
            "path": MetadataValue.path(
                fmt.hour_location(fsrc, QUARANTINE, layout.ArchiveHour.parse(k).compact)
            ),
        },
        {**batch, "root": MetadataValue.path(fmt.location(fsrc, QUARANTINE))} if batch else {},
    )
    yield from record(
        AssetKey([slug, SYNC_REPORTS]),
        lambda k: source_hour_metadata(src, source_hour(src, k, single)),
        batch_totals(src, keys),
    )
    catalog_hours, _ = registered_hours(result, keys) if has_catalog(settings) else ({}, None)
    if catalog_hours:  # after the tables it describes; not when registration failed
        yield from record(catalog_key(slug), catalog_hours.__getitem__, batch)
    # Tables the graph does not declare yet (found by this sync) get their checks' results
    # too: the UI shows them for these hours once the reload declares the table.
    evaluations = [
        ev
        for t in [*tables, *sorted(set(result.tables) - set(tables))]
        for ev in table_check_results(slug, t, result.tables.get(t), keys, plan_check_of(source))
    ]
    evaluations += completeness_results(slug, src, keys)
    if has_catalog(settings):
        evaluations += in_step_results(slug, result, keys)
    yield from targeted(evaluations, instance)
