"""Assets per source: the raw archive (external), the lake's tables, quarantine, sync report.

Asset keys name where the data lives: ``[<source slug>, <table>]``. One multi-asset per source
materializes its tables for a batch of hours with ONE Spark job (never one per table).

The tables of a source's graph come from the ``LakeState`` the code location was loaded with
(``lake_state.py``): the standard ones plus every event table the lake had then. The same state
reaches every run launched from that load, so a run always sees the graph its launcher saw.

What a selection means: any subset of a source's assets can be selected (one table, several,
all; one hour or a range), and the whole source-hour is synced anyway, because one pass over
the archive hour writes all of its tables. The selected assets get their materializations as
usual; every other table the sync rewrote is recorded as materialized too (a runtime
materialization with the same metadata), so the catalog never shows stale data as current.
"""

import ast
import functools
import hashlib
import warnings
from collections.abc import Iterator, Set as AbstractSet
from dataclasses import replace
from importlib import resources

from dagster import (
    AssetCheckEvaluation,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetMaterialization,
    AssetSpec,
    BackfillPolicy,
    HourlyPartitionsDefinition,
    MaterializeResult,
    MetadataValue,
    PreviewWarning,
    TableColumn,
    TableSchema,
    multi_asset,
)

from datalake_assets.lake.report import SourceReport, SyncReport, TableReport
from datalake_assets.orchestration.lake_state import SourceState, read_source_state
from datalake_assets.orchestration.resources import SparkCompute
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.spec import layout
from datalake_assets.spec.naming import STANDARD_TABLES, catalog_table_name
from datalake_assets.transform.request import SyncError, request_from_settings

# Per-hour check results need partitioned check specs, a preview feature of Dagster 1.13 that we
# chose on purpose (README): say so once here instead of warning on every load and run.
warnings.filterwarnings("ignore", message=".*partitions_def on an AssetCheckSpec",
                        category=PreviewWarning)
warnings.filterwarnings("ignore", message=".*with_reconstruction_metadata", category=PreviewWarning)

QUARANTINE = "quarantine"
SYNC_REPORTS = "sync_reports"
RAW_ARCHIVE = "raw_archive"

# Asset checks, evaluated on every sync from what its Spark job measured (never by loading the
# partitions into Dagster), one result per hour synced. Blocking checks (ERROR) stop downstream
# assets from running on a bad hour; the others warn.
# on sync_reports: lines_in = rows + duplicates + quarantined + suppressed
CHECK_COMPLETENESS = "completeness"
CHECK_DUPLICATES = "duplicates"  # per table: no message id written twice, in the synced hours or
# in another hour of the dedup lookback window (re-read from the output, against the id index)
CHECK_TYPE_DRIFT = "type_drift"  # per table: a column widened or values did not fit (WARN)
CHECK_CONFORMANCE = "schema_conformance"  # per table: pandera rules of the fixed columns
TABLE_CHECKS = (CHECK_DUPLICATES, CHECK_TYPE_DRIFT, CHECK_CONFORMANCE)

# The modules whose rules decide what a sync writes: every pure rule (spec/: how messages are
# validated, routed, named, flattened, typed and laid out) and the two worker stages that
# apply them. Their code (comments and docstrings aside) is the sync's code_version, so
# changing a rule shows every hour synced before as stale in the UI. spec/ is globbed so a
# rule module added later counts without anyone remembering this list.
_RULE_STAGES = ("transform/stage_a.py", "transform/identity_tally.py", "transform/stage_b.py")


def _rule_modules() -> list[str]:
    spec = resources.files("datalake_assets").joinpath("spec")
    return sorted(f"spec/{p.name}" for p in spec.iterdir()
                  if p.name.endswith(".py")) + list(_RULE_STAGES)


@functools.cache  # the same for every source and load of this process
def rules_code_version() -> str:
    h = hashlib.sha256()
    package = resources.files("datalake_assets")
    for name in _rule_modules():
        tree = ast.parse(package.joinpath(name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):  # docstrings are not rules
            body = getattr(node, "body", None)
            if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                    and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                body[0] = ast.Pass()
        h.update(name.encode() + b"\0" + ast.dump(tree).encode() + b"\0")
    return h.hexdigest()[:12]


def _check_specs(slug: str, tables: list[str], partitions) -> list[AssetCheckSpec]:
    specs = [AssetCheckSpec(
        CHECK_COMPLETENESS, asset=AssetKey([slug, SYNC_REPORTS]), blocking=True,
        partitions_def=partitions,
        description="lines_in = rows written + duplicates + lines quarantined + lines of "
                    "suppressed identities, for the hour",
    )]
    for t in tables:
        key = AssetKey([slug, t])
        specs += [
            AssetCheckSpec(CHECK_DUPLICATES, asset=key, blocking=True, partitions_def=partitions,
                           description="No messageId appears twice in what the sync wrote"),
            AssetCheckSpec(CHECK_TYPE_DRIFT, asset=key, partitions_def=partitions,
                           description="Warns when a column widened or values were quarantined "
                                       "for not fitting their column's type"),
            AssetCheckSpec(CHECK_CONFORMANCE, asset=key, partitions_def=partitions,
                           description="pandera rules of the fixed columns (ids, type, event, "
                                       "received_at) hold on every written row"),
        ]
    return specs


def table_check_results(slug: str, table: str, report: TableReport | None,
                        hours: list[str] | None = None) -> list[AssetCheckEvaluation]:
    """The three per-table checks from the table's sync report (``None``: no rows this time),
    one evaluation per synced hour (``hours``: partition keys; ``None``: unpartitioned)."""
    key = AssetKey([slug, table])
    if report is None:
        results = [(name, True, AssetCheckSeverity.ERROR,
                    {"note": "no rows for this table in these hours"}) for name in TABLE_CHECKS]
    else:
        repeated = report.checks.repeated_message_ids
        misfits = report.checks.misfits_by_column
        widened = report.widened_columns
        failures = report.checks.conformance_failures
        results = [
            (CHECK_DUPLICATES, repeated == 0, AssetCheckSeverity.ERROR,
             {"repeated_message_ids": repeated,
              "duplicates_removed": report.duplicates,
              "cross_hour_duplicates_removed": report.cross_hour_duplicates or 0}),
            (CHECK_TYPE_DRIFT, not widened and not misfits, AssetCheckSeverity.WARN,
             {"widened_columns": MetadataValue.json(widened),
              "misfits_by_column": MetadataValue.json(misfits),
              "values_quarantined": sum(misfits.values())}),
            (CHECK_CONFORMANCE, not failures, AssetCheckSeverity.ERROR,
             {"failures": MetadataValue.json(failures),
              "failing_values": sum(f["failures"] for f in failures)}),
        ]
    return [ev for name, passed, severity, metadata in results
            for ev in _per_hour(key, name, passed, severity, metadata, hours)]


def completeness_results(slug: str, src: SourceReport | None, hours: list[str] | None = None,
                         error: str | None = None) -> list[AssetCheckEvaluation]:
    key = AssetKey([slug, SYNC_REPORTS])
    if src is None:
        return _per_hour(key, CHECK_COMPLETENESS, False, AssetCheckSeverity.ERROR,
                         {"error": error or "", "committed": False}, hours)
    return _per_hour(
        key, CHECK_COMPLETENESS, src.reconciled, AssetCheckSeverity.ERROR,
        {"lines_in": src.lines_in, "rows": src.messages_written,
         "duplicates": src.duplicates, "lines_quarantined": src.lines_quarantined,
         "suppressed": src.suppressed},
        hours,
    )


def _per_hour(key: AssetKey, name: str, passed: bool, severity: AssetCheckSeverity,
              metadata: dict, hours: list[str] | None) -> list[AssetCheckEvaluation]:
    """One evaluation per hour, so the UI ties each result to its partition. A batch of hours
    is measured by one Spark job: each hour's result says which batch it was measured in."""
    if not hours:
        return [AssetCheckEvaluation(asset_key=key, check_name=name, passed=passed,
                                     severity=severity, metadata=metadata)]
    first, last = hours[0], hours[-1]
    batch = f"hour {first}" if len(hours) == 1 else (
        f"batch of {len(hours)} hours {first} .. {last}, measured together")
    return [AssetCheckEvaluation(
        asset_key=key, check_name=name, passed=passed, severity=severity, partition=h,
        metadata={**metadata, "hour": h, "batch_first_hour": first, "batch_last_hour": last},
        description=f"{'passed' if passed else 'FAILED'} for {batch}",
    ) for h in hours]


def source_partitions(source: SourceSettings) -> HourlyPartitionsDefinition:
    return HourlyPartitionsDefinition(start_date=source.start, timezone="UTC")


def _table_uri(settings: LakeSettings, source: SourceSettings, table: str) -> str:
    return layout.table_root(settings.lake_root, source.lake_dir, table)


def _table_name(source: SourceSettings, table: str) -> str:
    """The table's name in the catalog, as engines query it (``database.table``)."""
    return f"{source.database}.{catalog_table_name(table, source.effective_table_prefix)}"


def _table_metadata(report: TableReport, settings: LakeSettings, source: SourceSettings) -> dict:
    schema = TableSchema(columns=[TableColumn(c["name"], c["type"]) for c in report.columns])
    uri = _table_uri(settings, source, report.table_name)
    return {
        "rows": report.row_count,
        "duplicates": report.duplicates,
        "values_quarantined": report.values_quarantined,
        "new_columns": MetadataValue.json(report.new_columns),
        "widened_columns": MetadataValue.json(report.widened_columns),
        "files": report.files,
        "bytes": report.bytes,
        "is_new": report.is_new,
        "dagster/column_schema": schema,
        "dagster/row_count": report.row_count,
        "dagster/uri": MetadataValue.path(uri),
        "path": MetadataValue.path(uri),
        "run_id": report.run_id,
        **_catalog_metadata(report.catalog),
    }


def _catalog_metadata(entry: dict | None) -> dict:
    if not entry:
        return {}
    name = f"{entry['database']}.{entry['catalog_table']}"
    out = {"catalog_table": name, "dagster/table_name": name}
    if entry.get("partitions") is not None:
        out["catalog_partitions"] = entry["partitions"]
    return out


def build_source_assets(settings: LakeSettings, source: SourceSettings,
                        state: SourceState | None = None) -> list:
    """The raw archive and the sync multi-asset of ``source``, whose tables and partition start
    are those of ``state`` (default: read from the lake now; the code location passes the
    state it was loaded with)."""
    if state is None:
        state = read_source_state(settings, source)
    source = replace(source, start=state.start)
    partitions = source_partitions(source)
    slug = source.slug
    owners = list(source.owners)
    raw_key = AssetKey([slug, RAW_ARCHIVE])
    raw = AssetSpec(
        key=raw_key,
        partitions_def=partitions,
        group_name=slug,
        kinds={"json"},
        owners=owners,
        description=(
            f"Raw Segment messages of source {source.id}, gzipped JSON lines by received hour, "
            f"under {layout.join(settings.archive_root, source.id)}/day=YYYY-MM-DD/hr=HH/. "
            "Recorded by the archive sensor when an hour's files appear or change."
        ),
        metadata={"dagster/uri": MetadataValue.path(layout.join(settings.archive_root,
                                                                 source.id))},
    )
    tables = list(state.tables)
    table_specs = [
        AssetSpec(
            key=AssetKey([slug, t]),
            deps=[raw_key],
            partitions_def=partitions,
            group_name=slug,
            kinds={"parquet", "spark"},
            owners=owners,
            skippable=True,  # an hour may have no event of this type
            description=(f"Lake table {t} of source {source.id}: typed Parquet, one partition "
                         "per received hour." + ("" if t in STANDARD_TABLES else
                                                 " Created by the sync that first saw it.")),
            metadata={"dagster/table_name": _table_name(source, t),
                      "dagster/uri": MetadataValue.path(_table_uri(settings, source, t))},
        )
        for t in tables
    ]
    side_specs = [
        AssetSpec(
            key=AssetKey([slug, QUARANTINE]), deps=[raw_key], partitions_def=partitions,
            group_name=slug, kinds={"parquet"}, owners=owners,
            description="Lines and values that could not be written as they are, with reasons.",
            metadata={"dagster/uri": MetadataValue.path(
                layout.quarantine_root(settings.lake_root, source.lake_dir))},
        ),
        AssetSpec(
            key=AssetKey([slug, SYNC_REPORTS]), deps=[raw_key], partitions_def=partitions,
            group_name=slug, kinds={"json"}, owners=owners,
            description="The sync's reconciliation: lines_in = rows + duplicates + quarantined "
                        "+ suppressed.",
        ),
    ]

    @multi_asset(
        name=f"{slug}_lake_sync",
        specs=table_specs + side_specs,
        partitions_def=partitions,
        backfill_policy=BackfillPolicy.multi_run(settings.automation.backfill_hours_per_run),
        check_specs=_check_specs(slug, tables, partitions),
        can_subset=True,  # any selection syncs the whole source-hour (module docstring)
        code_version=rules_code_version(),
        pool="spark_local",
    )
    def lake_sync(context: AssetExecutionContext, compute: SparkCompute):
        keys = list(context.partition_keys)
        hours = [str(layout.ArchiveHour.parse(k)) for k in keys]
        selected = context.selected_asset_keys
        context.log.info(f"syncing {source.id} hours {hours[0]} .. {hours[-1]} (all tables of "
                         f"these hours; {len(selected)} assets selected)")
        try:
            request = request_from_settings(
                settings, source, hours, run_id=context.run.run_id,
                replay=len(hours) > 1 or "dagster/backfill" in context.run.tags)
            result = compute.run_sync(request, context=context)
        except SyncError as e:
            # Report the failed reconciliation, then fail the run: nothing was committed, so
            # there is no materialization to attach data to.
            yield from completeness_results(slug, None, keys, str(e))
            raise
        yield from sync_events(settings, source, tables, keys, result, selected)

    return [raw, lake_sync]


def sync_events(settings: LakeSettings, source: SourceSettings, tables: list[str],
                keys: list[str], result: SyncReport,
                selected: AbstractSet[AssetKey] | None) -> Iterator:
    """What a finished sync of ``keys`` (partition keys) of ``source`` reports to Dagster: its
    tables, quarantine and report as materializations, and every check's evaluations.

    ``selected``: the assets of the running multi-asset (each gets a ``MaterializeResult``;
    any other asset the sync rewrote, a runtime ``AssetMaterialization``); ``None`` outside
    the source's multi-asset (the batched sensor job, ``batch_sync.py``): every asset is
    recorded by runtime events, an empty table's too, as a sensor run of the source's own job
    would record them."""
    slug = source.slug
    src = result.source
    declared = {AssetKey([slug, t]) for t in [*tables, QUARANTINE, SYNC_REPORTS]}
    chosen = selected if selected is not None else frozenset()

    def record(key: AssetKey, metadata: dict, note: str | None = None):
        """A selected asset's result; any other rewritten asset, a runtime event."""
        if key in chosen:
            return [MaterializeResult(asset_key=key, metadata=metadata)]
        if note is None:
            note = ("synced with the selected assets of the same source-hour"
                    if selected is not None else "synced by the archive sensor's run")
            if key not in declared:
                note = ("new table: it becomes an asset of this source at the next load of "
                        "the code location (automatic, see README)")
        return [AssetMaterialization(asset_key=key, partition=k, metadata=metadata,
                                     description=note) for k in keys]

    for name, report in result.tables.items():
        yield from record(AssetKey([slug, name]), _table_metadata(report, settings, source))
    for t in tables:
        key = AssetKey([slug, t])
        if t not in result.tables and (key in chosen or selected is None):
            # Synced and empty for these hours: say so. A selected asset without a result
            # would leave a backfill waiting for it, then mark the backfill failed.
            yield from record(key, {"rows": 0, "dagster/row_count": 0,
                                    "note": "no event of this table in these hours"},
                              "no event of this table in these hours")
    for t in tables:
        yield from table_check_results(slug, t, result.tables.get(t), keys)
    yield from completeness_results(slug, src, keys)
    yield from record(AssetKey([slug, QUARANTINE]), {
        "lines_quarantined": src.lines_quarantined,
        "values_quarantined": src.values_quarantined,
        "path": MetadataValue.path(layout.quarantine_root(settings.lake_root, source.lake_dir)),
    })
    yield from record(AssetKey([slug, SYNC_REPORTS]), {
        "lines_in": src.lines_in,
        "messages_written": src.messages_written,
        "duplicates": src.duplicates,
        "cross_hour_duplicates": src.cross_hour_duplicates or 0,
        "lines_quarantined": src.lines_quarantined,
        "suppressed": src.suppressed,
        "values_quarantined": src.values_quarantined,
        "tables": src.tables,
        "replay": src.replay,
        "replay_from": src.replay_from or "",
        "replay_to": src.replay_to or "",
        "hours_synced": MetadataValue.json(src.hours_synced),
        "warning": src.warning or "",
        "duration_mins": src.duration_mins,
    })
