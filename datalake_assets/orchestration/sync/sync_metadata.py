"""The metadata of a sync's materializations: where a table's files are, its catalog name, and
an hour's figures as a table's or the sync report's materialization shows them."""

from __future__ import annotations

from typing import Any

from dagster import MetadataValue, TableColumn, TableSchema

from datalake_assets.lake.formats import SourceTables, table_format
from datalake_assets.lake.hour_report import SourceHour, TableHour
from datalake_assets.lake.report import SourceReport, TableReport
from datalake_assets.orchestration.sync.report_hours import batch_metadata
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.settings.formats_section import FormatConfig
from datalake_assets.spec.naming import catalog_table_name


def format_of(settings: LakeSettings, source: SourceSettings):
    """The lake's table format and the source's tables in it."""
    return (
        table_format(FormatConfig.of_settings(settings), settings.lake_root),
        SourceTables(
            source.lake_dir, source.database, source.effective_table_prefix, source.date_layout
        ),
    )


def table_uri(settings: LakeSettings, source: SourceSettings, table: str) -> str:
    """Where the table's files are (the quarantine's too), as the lake's format keeps them."""
    tables, src = format_of(settings, source)
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
    report: TableReport, entry: TableHour, settings: LakeSettings, source: SourceSettings
) -> dict[str, Any]:
    """A table's materialization of one hour: that hour's figures, the table's schema."""
    schema = TableSchema(columns=[TableColumn(c["name"], c["type"]) for c in report.columns])
    uri = table_uri(settings, source, report.table_name)
    return {
        "rows": entry.rows,
        "duplicates": entry.duplicates,
        "cross_hour_duplicates": entry.cross_hour_duplicates,
        "values_quarantined": entry.values_quarantined,
        "new_columns": MetadataValue.json(entry.new_columns),
        "widened_columns": MetadataValue.json(entry.widened_columns),
        "files": entry.files,
        "bytes": entry.bytes,
        "is_new": bool(report.is_new and entry.new_columns),
        "dagster/column_schema": schema,
        "dagster/row_count": entry.rows,
        "dagster/uri": MetadataValue.path(uri),
        "path": MetadataValue.path(uri),
        "run_id": report.run_id,
        **_catalog_metadata(report.catalog),
    }


EMPTY_TABLE_HOUR = {
    "rows": 0,
    "dagster/row_count": 0,
    "note": "no event of this table in this hour",
}


def source_hour_metadata(src: SourceReport, e: SourceHour) -> dict[str, Any]:
    return {
        "lines_in": e.lines_in,
        "messages_written": e.messages_written,
        "duplicates": e.duplicates,
        "cross_hour_duplicates": e.cross_hour_duplicates,
        "lines_quarantined": e.lines_quarantined,
        "suppressed": e.suppressed,
        "values_quarantined": e.values_quarantined,
        "dagster/row_count": e.messages_written,
        "tables": src.tables,
        "replay": src.replay,
        "replay_from": src.replay_from or "",
        "replay_to": src.replay_to or "",
        "warning": src.warning or "",
        "run_id": src.run_id,
    }


def batch_totals(src: SourceReport, keys: list[str]) -> dict[str, Any]:
    """The whole sync's figures, on a multi-hour batch's materializations, named as such."""
    if len(keys) <= 1:
        return {"duration_mins": src.duration_mins}
    return {
        **batch_metadata(keys),
        "batch_lines_in": src.lines_in,
        "batch_messages_written": src.messages_written,
        "batch_duration_mins": src.duration_mins,
        "batch_hours_synced": MetadataValue.json(src.hours_synced),
    }
