"""The open hour in Dagster: what a source's batches have put in the hours still taking events,
shown as provisional, and how fresh the lake is by its last batch.

``[<slug>, open_hour]`` is an asset beside the source's tables (not a table: ``naming.OPEN_HOUR``
is reserved, so no event table takes its key; not partitioned: it is always the hours open
now). Each batch of the loader (``open_hour_loader.py``), empty or not, reports a
materialization of it, runless since the loader is no Dagster run: the hours it looked at, the
messages and the rows of each table in them so far (from the table's metadata, so a batch run twice or a
loader restarted counts nothing twice), what the batch added, and when. Its freshness policy
(``alerts/freshness_policies.batches_policy``) fails once two batches are overdue, whether the
loader stopped or its batches fail: minutes after, not ``freshness_hours``.

Why not observations on the tables' hourly partitions: the open hour is no partition of theirs
yet (Dagster's hourly partitions end at the last closed hour), and the daily models' automation
reads their updates; the hour's partition is materialized, and its checks run, by the hour's sync
when it closes, as before. Nothing depends on this asset, so nothing runs because of it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from dagster import (
    AssetKey,
    AssetMaterialization,
    AssetSpec,
    DagsterInstance,
    Definitions,
    MetadataValue,
)

from datalake_assets.lake.report import SyncReport
from datalake_assets.orchestration.alerts.freshness_policies import batches_policy
from datalake_assets.orchestration.freshness.open_hour_loader import open_hours
from datalake_assets.orchestration.sync.sync_metadata import format_of
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets.spec.naming import OPEN_HOUR, RAW_ARCHIVE, STANDARD_TABLES

PROVISIONAL = (
    "Provisional: the rows the batches added to hours still open. When an hour closes, its sync "
    "replaces them with exactly what the archive holds (docs/concepts/freshness.md)."
)


def open_hour_key(slug: str) -> AssetKey:
    return AssetKey([slug, OPEN_HOUR])


def open_hour_spec(settings: LakeSettings, source: SourceSettings) -> AssetSpec | None:
    """The source's open hour asset, if its batches run (a ``[freshness]`` interval and a table
    format that appends; else ``None``)."""
    minutes = settings.freshness_minutes(source)
    tables, _ = format_of(settings, source)
    if minutes <= 0 or not tables.appends:
        return None
    return AssetSpec(
        key=open_hour_key(source.slug),
        deps=[AssetKey([source.slug, RAW_ARCHIVE])],
        group_name=source.slug,
        kinds={"iceberg"},
        owners=list(source.owners),
        description=(
            f"The hours of source {source.id} still taking events, as its batches fill them every "
            f"{minutes} min (datalake batches; datalake dev runs it). {PROVISIONAL}"
        ),
        freshness_policy=batches_policy(minutes),
    )


def build_freshness_definitions(settings: LakeSettings) -> Definitions:
    """The open hour asset of every source whose batches run."""
    specs = [open_hour_spec(settings, s) for s in settings.sources]
    return Definitions(assets=[s for s in specs if s is not None])


def rows_so_far(
    settings: LakeSettings,
    source: SourceSettings,
    hours: list[str],
    report: SyncReport,
    earlier: dict[str, dict[str, int]],
) -> dict[str, dict[str, int]]:
    """``{hour: {table: rows}}`` of the batch's ``hours``, counted from the tables' metadata
    now: the tables the batch wrote to and those the last batch named (``earlier``), so a
    batch run twice, an erasure or a restarted loader leaves no stale count."""
    fmt, src = format_of(settings, source)
    out: dict[str, dict[str, int]] = {}
    for hour in hours:
        names = set(earlier.get(hour, {})) | {
            t for t, table in report.tables.items() if (e := table.hour(hour)) and e.rows
        }
        compact = ArchiveHour.parse(hour).compact
        rows = {t: fmt.hour_rows(src, t, compact) or 0 for t in sorted(names)}
        out[hour] = {t: n for t, n in rows.items() if n}
    return out


def batch_event(
    source: SourceSettings,
    hours: list[str],
    report: SyncReport,
    rows: dict[str, dict[str, int]],
    at: datetime,
) -> AssetMaterialization:
    """The materialization of ``[<slug>, open_hour]`` for one batch of ``hours``."""
    s = report.source
    current = hours[-1]
    return AssetMaterialization(
        asset_key=open_hour_key(source.slug),
        description=PROVISIONAL,
        metadata={
            "open_hour": current,
            # each message once: a track's row in its event's table is its row in tracks
            "messages_so_far": sum(
                n for t, n in rows.get(current, {}).items() if t in STANDARD_TABLES
            ),
            "rows_by_table": MetadataValue.json(rows),
            "last_batch": MetadataValue.timestamp(at),
            "batch_id": s.batch_id or "",
            "new_files": s.files_in,
            "rows_added": s.messages_written,
            "duplicates": s.duplicates,
            "lines_quarantined": s.lines_quarantined,
        },
    )


def earlier_rows(instance: DagsterInstance, key: AssetKey) -> dict[str, dict[str, int]]:
    """The rows by hour and table the source's last batch reported (none if never)."""
    event = instance.get_latest_materialization_event(key)
    mat = event.asset_materialization if event else None
    value = mat.metadata.get("rows_by_table") if mat else None
    return dict(value.value) if value is not None else {}


def dagster_reporter(
    instance: DagsterInstance, settings: LakeSettings
) -> Callable[[SourceSettings, SyncReport, datetime], None]:
    """What the loader calls after each batch: the batch's materialization in ``instance``."""

    def report_batch(source: SourceSettings, report: SyncReport, at: datetime) -> None:
        # the hours the batch looked at (an empty batch's report names none)
        hours = open_hours(at, settings.automation.settle_minutes)
        key = open_hour_key(source.slug)
        rows = rows_so_far(settings, source, hours, report, earlier_rows(instance, key))
        instance.report_runless_asset_event(batch_event(source, hours, report, rows, at))

    return report_batch
