"""The asset checks a sync evaluates from what its Spark job measured (never by loading the
partitions into Dagster), one result per hour synced, each tied to the hour's latest
materialization so the UI counts it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

from dagster import (
    AssetCheckEvaluation,
    AssetCheckSeverity,
    AssetKey,
    AssetRecordsFilter,
    DagsterInstance,
    MetadataValue,
)
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)

from datalake_assets.lake.hour_report import TableHour
from datalake_assets.lake.report import SourceReport, TableReport
from datalake_assets.orchestration.sync.report_hours import (
    batch_metadata,
    report_hour,
    source_hour,
    table_hour,
)
from datalake_assets.spec.naming import SYNC_REPORTS, holds_messages

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
# per table of a source with a tracking plan: the hour's messages kept to it (the violations
# by type in the metadata); WARN, or ERROR (blocking) when the source's settings say "block"
CHECK_TRACKING_PLAN = "tracking_plan"


def plan_check_of(source) -> str | None:
    """The ``tracking_plan`` check's severity setting of a source (None: it has no plan)."""
    return source.tracking_plan_check if source.tracking_plan else None


def has_plan_check(plan_check: str | None, table: str) -> bool:
    """Whether ``table`` has a ``tracking_plan`` check (the violations table has none)."""
    return plan_check is not None and holds_messages(table)


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
        metadata={**metadata, "hour": report_hour(partition), **batch_metadata(keys)},
        description=f"{'passed' if passed else 'FAILED'} for hour {report_hour(partition)}",
    )


def table_check_results(
    slug: str,
    table: str,
    report: TableReport | None,
    hours: list[str] | None = None,
    plan_check: str | None = None,
) -> list[AssetCheckEvaluation]:
    """The per-table checks, one evaluation per synced hour (``hours``: partition keys;
    ``None``: one unpartitioned evaluation of the batch), each from its hour's figures.
    ``report`` ``None``: the table had no rows in these hours. ``plan_check``: the source's
    ``tracking_plan_check`` (``plan_check_of``), adding the ``tracking_plan`` check."""
    key = AssetKey([slug, table])
    names = TABLE_CHECKS + ((CHECK_TRACKING_PLAN,) if has_plan_check(plan_check, table) else ())
    plan_severity = AssetCheckSeverity.ERROR if plan_check == "block" else AssetCheckSeverity.WARN
    out = []
    for partition in hours or [None]:
        if report is None:
            entry = None
        elif partition is None:  # the batch as a whole
            entry = TableHour(
                hour="",
                duplicates=report.duplicates,
                cross_hour_duplicates=report.cross_hour_duplicates or 0,
                widened_columns=report.widened_columns,
                misfits_by_column=report.checks.misfits_by_column,
                conformance_failures=report.checks.conformance_failures,
                violations=dict(sum((Counter(h.violations) for h in report.by_hour), Counter())),
            )
        else:
            entry = table_hour(report, partition, len(hours or []) == 1)
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
                for name in names
            ]
            continue
        # A sync re-reads its batch's output as a whole: a repeat is counted for the batch;
        # a re-check from the lake (transform/recheck.py) counts it for each hour.
        per_hour = entry.repeated_message_ids is not None
        repeated = (
            entry.repeated_message_ids
            if entry.repeated_message_ids is not None
            else report.checks.repeated_message_ids  # type: ignore[union-attr]
        )
        misfits = entry.misfits_by_column
        widened = entry.widened_columns
        failures = entry.conformance_failures
        results = [
            (
                CHECK_DUPLICATES,
                repeated == 0,
                AssetCheckSeverity.ERROR,
                {
                    "repeated_message_ids"
                    if per_hour
                    else "repeated_message_ids_in_batch": repeated,
                    "duplicates_removed": entry.duplicates,
                    "cross_hour_duplicates_removed": entry.cross_hour_duplicates,
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
        if CHECK_TRACKING_PLAN in names:
            violations = entry.violations
            results.append(
                (
                    CHECK_TRACKING_PLAN,
                    not violations,
                    plan_severity,
                    {
                        "violations": sum(violations.values()),
                        "violations_by_type": MetadataValue.json(violations),
                    },
                )
            )
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
            e = source_hour(src, partition, len(hours or []) == 1) if partition else src.totals()
            passed = e.reconciled and src.reconciled
            metadata = {
                "lines_in": e.lines_in,
                "rows": e.messages_written,
                "duplicates": e.duplicates,
                "lines_quarantined": e.lines_quarantined,
                "suppressed": e.suppressed,
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
