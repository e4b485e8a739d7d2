"""What a finished sync tells Dagster: each hour's materializations and check evaluations.

A sync may cover a batch of hours (the archive sensor's batched run, a backfill chunk, a
replay), but the UI shows one materialization and one check result per hourly partition, so
each carries **its own hour's** figures (the report's ``by_hour`` entries,
``transform/hour_figures.py``): rows, duplicates, quarantined values, files, bytes, new and
widened columns. What only the batch as a whole measured is named as such (``batch_*``).

Used by the source's multi-asset (``assets.py``), the batched sensor job (``batch_sync.py``)
and syncs outside Dagster recorded in the instance (``sync_records.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckSeverity,
    AssetKey,
    AssetMaterialization,
    AssetRecordsFilter,
    DagsterInstance,
    MaterializeResult,
    MetadataValue,
    TableColumn,
    TableSchema,
)
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)

from datalake_assets.lake.formats import FormatConfig, SourceTables, table_format
from datalake_assets.lake.report import SourceReport, SyncReport, TableReport
from datalake_assets.orchestration.sync.catalog_asset import (
    catalog_key,
    has_catalog,
    in_step_results,
    registered_hours,
)
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.spec import layout
from datalake_assets.spec.naming import catalog_table_name

QUARANTINE = "quarantine"
SYNC_REPORTS = "sync_reports"
RAW_ARCHIVE = "raw_archive"

# Asset checks, evaluated on every sync from what its Spark job measured (never by loading the
# partitions into Dagster), one result per hour synced. Blocking checks (ERROR) stop downstream
# assets from running on a bad hour; the others warn.
# on sync_reports: lines_in = rows + duplicates + quarantined + suppressed, for the hour
CHECK_COMPLETENESS = "completeness"
CHECK_DUPLICATES = "duplicates"  # per table: no message id written twice, in the synced hours or
# in another hour of the dedup lookback window (re-read from the output, against the id index)
CHECK_TYPE_DRIFT = "type_drift"  # per table: a column widened or values did not fit (WARN)
CHECK_CONFORMANCE = "schema_conformance"  # per table: pandera rules of the fixed columns
TABLE_CHECKS = (CHECK_DUPLICATES, CHECK_TYPE_DRIFT, CHECK_CONFORMANCE)

# Adds partition-scoped metadata to a selected asset's materialization:
# ``AssetExecutionContext.add_asset_metadata(metadata, asset_key=, partition_key=)``.
AddMetadata = Callable[..., None]


def _hour(key: str) -> str:
    """A partition key as the report names hours (``YYYY-MM-DDTHH``)."""
    return str(layout.ArchiveHour.parse(key))


def _batch(keys: list[str] | None) -> dict[str, Any]:
    """Names the batch an hour was synced in (nothing for a one-hour sync)."""
    if not keys or len(keys) == 1:
        return {}
    return {
        "batch_hours": len(keys),
        "batch_first_hour": _hour(keys[0]),
        "batch_last_hour": _hour(keys[-1]),
    }


def hour_entry(rows: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    """The ``by_hour`` entry of a partition key, if the report has one."""
    hour = _hour(key)
    return next((e for e in rows if e.get("hour") == hour), None)


def _table_hour(report: TableReport, key: str, single: bool) -> dict[str, Any] | None:
    entry = hour_entry(report.by_hour, key)
    if entry is None and single and not report.by_hour:  # a report without by_hour (older)
        entry = {
            "rows": report.row_count,
            "duplicates": report.duplicates,
            "cross_hour_duplicates": report.cross_hour_duplicates or 0,
            "values_quarantined": report.values_quarantined,
            "files": report.files,
            "bytes": report.bytes,
            "new_columns": report.new_columns,
            "widened_columns": report.widened_columns,
            "misfits_by_column": report.checks.misfits_by_column,
            "conformance_failures": report.checks.conformance_failures,
        }
    return entry


def _source_hour(src: SourceReport, key: str, single: bool) -> dict[str, Any]:
    entry = hour_entry(src.by_hour, key)
    if entry is None and single and not src.by_hour:  # a report without by_hour (older)
        entry = {
            "lines_in": src.lines_in,
            "messages_written": src.messages_written,
            "duplicates": src.duplicates,
            "lines_quarantined": src.lines_quarantined,
            "suppressed": src.suppressed,
            "values_quarantined": src.values_quarantined,
            "cross_hour_duplicates": src.cross_hour_duplicates or 0,
            "reconciled": src.reconciled,
        }
    if entry is None:  # an hour of the request without archive files: nothing read
        entry = {
            "lines_in": 0,
            "messages_written": 0,
            "duplicates": 0,
            "lines_quarantined": 0,
            "suppressed": 0,
            "values_quarantined": 0,
            "cross_hour_duplicates": 0,
            "reconciled": True,
        }
    return entry


# ------------------------------------------------------------------------------------ checks


def _evaluation(
    key: AssetKey,
    name: str,
    passed: bool,
    severity: AssetCheckSeverity,
    metadata: dict,
    partition: str | None,
    keys: list[str] | None,
) -> AssetCheckEvaluation:
    if partition is None:
        return AssetCheckEvaluation(
            asset_key=key, check_name=name, passed=passed, severity=severity, metadata=metadata
        )
    return AssetCheckEvaluation(
        asset_key=key,
        check_name=name,
        passed=passed,
        severity=severity,
        partition=partition,
        metadata={**metadata, "hour": _hour(partition), **_batch(keys)},
        description=f"{'passed' if passed else 'FAILED'} for hour {_hour(partition)}",
    )


def table_check_results(
    slug: str, table: str, report: TableReport | None, hours: list[str] | None = None
) -> list[AssetCheckEvaluation]:
    """The three per-table checks, one evaluation per synced hour (``hours``: partition keys;
    ``None``: one unpartitioned evaluation of the batch), each from its hour's figures.
    ``report`` ``None``: the table had no rows in these hours."""
    key = AssetKey([slug, table])
    out = []
    for partition in hours or [None]:
        if report is None:
            entry = None
        elif partition is None:  # the batch as a whole
            entry = {
                "duplicates": report.duplicates,
                "cross_hour_duplicates": report.cross_hour_duplicates or 0,
                "widened_columns": report.widened_columns,
                "misfits_by_column": report.checks.misfits_by_column,
                "conformance_failures": report.checks.conformance_failures,
            }
        else:
            entry = _table_hour(report, partition, len(hours or []) == 1)
        if entry is None:
            out += [
                _evaluation(
                    key,
                    name,
                    True,
                    AssetCheckSeverity.ERROR,
                    {"note": "no rows for this table in this hour"},
                    partition,
                    hours,
                )
                for name in TABLE_CHECKS
            ]
            continue
        # A sync re-reads its batch's output as a whole: a repeat is counted for the batch;
        # a re-check from the lake (transform/recheck.py) counts it for each hour.
        per_hour = "repeated_message_ids" in entry
        repeated = entry["repeated_message_ids"] if per_hour else report.checks.repeated_message_ids  # type: ignore[union-attr]
        misfits = entry.get("misfits_by_column") or {}
        widened = entry.get("widened_columns") or []
        failures = entry.get("conformance_failures") or []
        results = [
            (
                CHECK_DUPLICATES,
                repeated == 0,
                AssetCheckSeverity.ERROR,
                {
                    "repeated_message_ids"
                    if per_hour
                    else "repeated_message_ids_in_batch": repeated,
                    "duplicates_removed": entry.get("duplicates", 0),
                    "cross_hour_duplicates_removed": entry.get("cross_hour_duplicates", 0),
                },
            ),
            (
                CHECK_TYPE_DRIFT,
                not widened and not misfits,
                AssetCheckSeverity.WARN,
                {
                    "widened_columns": MetadataValue.json(widened),
                    "misfits_by_column": MetadataValue.json(misfits),
                    "values_quarantined": sum(misfits.values()),
                },
            ),
            (
                CHECK_CONFORMANCE,
                not failures,
                AssetCheckSeverity.ERROR,
                {
                    "failures": MetadataValue.json(failures),
                    "failing_values": sum(f["failures"] for f in failures),
                },
            ),
        ]
        out += [
            _evaluation(key, name, passed, severity, metadata, partition, hours)
            for name, passed, severity, metadata in results
        ]
    return out


def completeness_results(
    slug: str, src: SourceReport | None, hours: list[str] | None = None, error: str | None = None
) -> list[AssetCheckEvaluation]:
    """``lines_in = rows + duplicates + quarantined + suppressed`` for each hour (the sync
    refuses to commit unless it holds for the batch); ``src`` ``None``: the sync failed."""
    key = AssetKey([slug, SYNC_REPORTS])
    out = []
    for partition in hours or [None]:
        if src is None:
            passed, metadata = False, {"error": error or "", "committed": False}
        else:
            e = (
                _source_hour(src, partition, len(hours or []) == 1)
                if partition
                else {
                    "lines_in": src.lines_in,
                    "messages_written": src.messages_written,
                    "duplicates": src.duplicates,
                    "lines_quarantined": src.lines_quarantined,
                    "suppressed": src.suppressed,
                    "reconciled": src.reconciled,
                }
            )
            passed = bool(e["reconciled"]) and src.reconciled
            metadata = {
                "lines_in": e["lines_in"],
                "rows": e["messages_written"],
                "duplicates": e["duplicates"],
                "lines_quarantined": e["lines_quarantined"],
                "suppressed": e["suppressed"],
            }
        out.append(
            _evaluation(
                key,
                CHECK_COMPLETENESS,
                passed,
                AssetCheckSeverity.ERROR,
                metadata,
                partition,
                hours,
            )
        )
    return out


def targeted(
    evaluations: Iterable[AssetCheckEvaluation], instance: DagsterInstance | None
) -> Iterator[AssetCheckEvaluation]:
    """Each evaluation tied to the latest materialization of the partition it checked. The
    UI counts a partition's check result only while it targets that partition's latest
    materialization; a check result yielded as an event (not returned by a check function)
    carries no target unless it is given one. Call after the materializations were stored."""
    latest: dict[tuple[AssetKey, str], AssetCheckEvaluationTargetMaterializationData | None] = {}
    for ev in evaluations:
        if instance is None or ev.partition is None:
            yield ev
            continue
        key = (ev.asset_key, ev.partition)
        if key not in latest:
            found = instance.fetch_materializations(
                AssetRecordsFilter(asset_key=ev.asset_key, asset_partitions=[ev.partition]), limit=1
            ).records
            latest[key] = (
                AssetCheckEvaluationTargetMaterializationData(
                    storage_id=found[0].storage_id,
                    run_id=found[0].event_log_entry.run_id,
                    timestamp=found[0].timestamp,
                )
                if found
                else None
            )
        yield AssetCheckEvaluation(
            asset_key=ev.asset_key,
            check_name=ev.check_name,
            passed=ev.passed,
            metadata=ev.metadata,
            severity=ev.severity,
            description=ev.description,
            blocking=ev.blocking,
            partition=ev.partition,
            target_materialization_data=latest[key],
        )


# ---------------------------------------------------------------------------------- metadata


def _format_of(settings: LakeSettings, source: SourceSettings):
    """The lake's table format and the source's tables in it."""
    return (
        table_format(FormatConfig.of_settings(settings), settings.lake_root),
        SourceTables(
            source.lake_dir, source.database, source.effective_table_prefix, source.date_layout
        ),
    )


def table_uri(settings: LakeSettings, source: SourceSettings, table: str) -> str:
    """Where the table's files are (the quarantine's too), as the lake's format keeps them."""
    tables, src = _format_of(settings, source)
    return tables.location(src, table)


def table_name(source: SourceSettings, table: str) -> str:
    """The table's name in the catalog, as engines query it (``database.table``)."""
    return f"{source.database}.{catalog_table_name(table, source.effective_table_prefix)}"


def _catalog_metadata(entry: dict | None) -> dict:
    if not entry:
        return {}
    name = f"{entry['database']}.{entry['catalog_table']}"
    out = {"catalog_table": name, "dagster/table_name": name}
    if entry.get("partitions") is not None:
        out["catalog_partitions"] = entry["partitions"]
    if entry.get("snapshot_id") is not None:  # Iceberg: the table version this run committed
        out["iceberg_snapshot_id"] = MetadataValue.text(str(entry["snapshot_id"]))
    return out


def table_hour_metadata(
    report: TableReport, entry: dict[str, Any], settings: LakeSettings, source: SourceSettings
) -> dict[str, Any]:
    """A table's materialization of one hour: that hour's figures, the table's schema."""
    schema = TableSchema(columns=[TableColumn(c["name"], c["type"]) for c in report.columns])
    uri = table_uri(settings, source, report.table_name)
    return {
        "rows": entry["rows"],
        "duplicates": entry["duplicates"],
        "cross_hour_duplicates": entry.get("cross_hour_duplicates", 0),
        "values_quarantined": entry["values_quarantined"],
        "new_columns": MetadataValue.json(entry.get("new_columns") or []),
        "widened_columns": MetadataValue.json(entry.get("widened_columns") or []),
        "files": entry["files"],
        "bytes": entry["bytes"],
        "is_new": bool(report.is_new and entry.get("new_columns")),
        "dagster/column_schema": schema,
        "dagster/row_count": entry["rows"],
        "dagster/uri": MetadataValue.path(uri),
        "path": MetadataValue.path(uri),
        "run_id": report.run_id,
        **_catalog_metadata(report.catalog),
    }


_EMPTY_TABLE_HOUR = {
    "rows": 0,
    "dagster/row_count": 0,
    "note": "no event of this table in this hour",
}


def _source_hour_metadata(src: SourceReport, e: dict[str, Any]) -> dict[str, Any]:
    return {
        "lines_in": e["lines_in"],
        "messages_written": e["messages_written"],
        "duplicates": e["duplicates"],
        "cross_hour_duplicates": e.get("cross_hour_duplicates", 0),
        "lines_quarantined": e["lines_quarantined"],
        "suppressed": e["suppressed"],
        "values_quarantined": e["values_quarantined"],
        "dagster/row_count": e["messages_written"],
        "tables": src.tables,
        "replay": src.replay,
        "replay_from": src.replay_from or "",
        "replay_to": src.replay_to or "",
        "warning": src.warning or "",
        "run_id": src.run_id,
    }


def _batch_totals(src: SourceReport, keys: list[str]) -> dict[str, Any]:
    """The whole sync's figures, on a multi-hour batch's materializations, named as such."""
    if len(keys) <= 1:
        return {"duration_mins": src.duration_mins}
    return {
        **_batch(keys),
        "batch_lines_in": src.lines_in,
        "batch_messages_written": src.messages_written,
        "batch_duration_mins": src.duration_mins,
        "batch_hours_synced": MetadataValue.json(src.hours_synced),
    }


# -------------------------------------------------------------------------------- the events


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
    batch = _batch(keys)

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
            entry = _table_hour(report, k, single)
            return (
                dict(_EMPTY_TABLE_HOUR)
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
                lambda k: dict(_EMPTY_TABLE_HOUR),
                batch,
                "no event of this table in these hours",
            )
    fmt, fsrc = _format_of(settings, source)
    yield from record(
        AssetKey([slug, QUARANTINE]),
        lambda k: {
            "lines_quarantined": _source_hour(src, k, single)["lines_quarantined"],
            "values_quarantined": _source_hour(src, k, single)["values_quarantined"],
            "path": MetadataValue.path(
                fmt.hour_location(fsrc, QUARANTINE, layout.ArchiveHour.parse(k).compact)
            ),
        },
        {**batch, "root": MetadataValue.path(fmt.location(fsrc, QUARANTINE))} if batch else {},
    )
    yield from record(
        AssetKey([slug, SYNC_REPORTS]),
        lambda k: _source_hour_metadata(src, _source_hour(src, k, single)),
        _batch_totals(src, keys),
    )
    catalog_hours, _ = registered_hours(result, keys) if has_catalog(settings) else ({}, None)
    if catalog_hours:  # after the tables it describes; not when registration failed
        yield from record(catalog_key(slug), catalog_hours.__getitem__, batch)
    # Tables the graph does not declare yet (found by this sync) get their checks' results
    # too: the UI shows them for these hours once the reload declares the table.
    evaluations = [
        ev
        for t in [*tables, *sorted(set(result.tables) - set(tables))]
        for ev in table_check_results(slug, t, result.tables.get(t), keys)
    ]
    evaluations += completeness_results(slug, src, keys)
    if has_catalog(settings):
        evaluations += in_step_results(slug, result, keys)
    yield from targeted(evaluations, instance)
