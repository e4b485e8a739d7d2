"""A sync report read hour by hour: the figures of one hourly partition (the report's
``by_hour`` entries, ``transform/hour_figures.py``), and the names of the assets a sync reports
on besides its tables. A sync may cover a batch of hours, but the UI shows one materialization
and one check result per hour (``sync_events.py``, ``sync_checks.py``).
"""

from __future__ import annotations

from typing import Any

from datalake_assets.lake.hour_report import SourceHour, TableHour
from datalake_assets.lake.report import SourceReport, TableReport
from datalake_assets.spec import layout


def report_hour(key: str) -> str:
    """A partition key as the report names hours (``YYYY-MM-DDTHH``)."""
    return str(layout.ArchiveHour.parse(key))


def batch_metadata(keys: list[str] | None) -> dict[str, Any]:
    """Names the batch an hour was synced in (nothing for a one-hour sync)."""
    if not keys or len(keys) == 1:
        return {}
    return {
        "batch_hours": len(keys),
        "batch_first_hour": report_hour(keys[0]),
        "batch_last_hour": report_hour(keys[-1]),
    }


def table_hour(report: TableReport, key: str, single: bool) -> TableHour | None:
    """The table's figures of the partition ``key``; ``single``: the sync covered that hour
    alone, so a report without ``by_hour`` (older) has them as its totals."""
    entry = report.hour(report_hour(key))
    if entry is None and single and not report.by_hour:
        entry = TableHour(
            hour=report_hour(key),
            rows=report.row_count,
            duplicates=report.duplicates,
            cross_hour_duplicates=report.cross_hour_duplicates or 0,
            suppressed=report.suppressed,
            values_quarantined=report.values_quarantined,
            files=report.files,
            bytes=report.bytes,
            new_columns=report.new_columns,
            widened_columns=report.widened_columns,
            misfits_by_column=report.checks.misfits_by_column,
            conformance_failures=report.checks.conformance_failures,
        )
    return entry


def source_hour(src: SourceReport, key: str, single: bool) -> SourceHour:
    """The source's reconciliation of the partition ``key`` (all zero: an hour of the
    request without archive files, nothing read)."""
    entry = src.hour(report_hour(key))
    if entry is not None and entry.figures is not None:
        return entry.figures
    if single and not src.by_hour:  # a report without by_hour (older): its totals
        return src.totals()
    return SourceHour()
