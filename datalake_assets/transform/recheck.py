"""The asset checks' figures of committed hours, measured again from the lake.

A sync measures its checks while it writes (``outcome.py``, ``hour_figures.py``). When a user
runs the checks alone (the *Execute all* button of a table's Checks tab), nothing is being
written, so the same figures are measured from what the lake holds now, and returned as a
``SyncReport`` whose ``by_hour`` entries the Dagster checks read exactly as a sync's:

* **duplicates**: message ids written twice in the hour's files of the table, or also held
  by another hour of the dedup lookback window (the lake's id index, as the sync compares);
* **type drift**: columns of the hour's files written with a narrower type than the table
  has now (the column was widened since), and the hour's values quarantined as
  ``type_mismatch`` (the quarantine);
* **schema conformance**: the pandera rules (``spec/conformance.py``) on the files' fixed
  columns;
* **tracking plan**: the hour's violations of each table's messages, by type (the
  ``violations`` table);
* **completeness**: the reconciliation of the hour as its latest sync report recorded it
  (``lines_in`` counts archive lines, which only a sync reads).
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from datalake_assets.lake import storage
from datalake_assets.lake.formats import SourceTables, table_hour_files
from datalake_assets.lake.hour_report import SourceHourEntry, TableHour
from datalake_assets.lake.records import read_schema_record
from datalake_assets.lake.report import SourceReport, SyncReport, TableChecks, TableReport
from datalake_assets.settings.formats_section import FormatConfig
from datalake_assets.spec import layout
from datalake_assets.spec.column_build import ARROW_TYPES
from datalake_assets.spec.conformance import CHECKED_COLUMNS, check_conformance
from datalake_assets.spec.naming import QUARANTINE, VIOLATIONS, holds_messages
from datalake_assets.transform.dedup import index_files
from datalake_assets.transform.index_lookup import prior_ids

_TYPE_NAMES = {str(t): name for name, t in ARROW_TYPES.items()}
_REPORT_RE = re.compile(r"/day=(\d{4}-\d{2}-\d{2})/source=([^/]+)/run_id=[^/]+/report\.json$")


@dataclass(frozen=True)
class LakeSource:
    """Where a source's hours are in the lake."""

    lake_root: str
    source_id: str
    source_dir: str
    date_layout: str
    lookback_hours: int
    database: str = ""
    table_prefix: str = ""
    table_format: FormatConfig = dataclasses.field(default_factory=FormatConfig)

    def hour_files(self, table: str, hour: layout.ArchiveHour) -> list[tuple[str, int]]:
        """The files readers read for the table's rows of ``hour`` (its table format says)."""
        tables = SourceTables(
            self.source_dir, self.database or self.source_id, self.table_prefix, self.date_layout
        )
        return table_hour_files(self.table_format, self.lake_root, tables, table, hour)


def _misfits(src: LakeSource, hour: layout.ArchiveHour) -> dict[str, Counter[str]]:
    """table -> column -> values of the hour quarantined for not fitting their column."""
    out: dict[str, Counter[str]] = {}
    for loc, _ in src.hour_files(QUARANTINE, hour):
        fs, path = storage.resolve(loc)
        rows = _of_hour(
            pq.ParquetFile(path, filesystem=fs),
            ["level", "reason", "table_name", "column_name"],
            hour,
        )
        for r in rows.to_pylist():
            if r["level"] == "value" and r["reason"] == "type_mismatch":
                out.setdefault(r["table_name"], Counter())[r["column_name"]] += 1
    return out


def _violations(src: LakeSource, hour: layout.ArchiveHour) -> dict[str, Counter[str]]:
    """table -> the violations of its messages in ``hour``, by type."""
    out: dict[str, Counter[str]] = {}
    for loc, _ in src.hour_files(VIOLATIONS, hour):
        fs, path = storage.resolve(loc)
        rows = _of_hour(
            pq.ParquetFile(path, filesystem=fs), ["event_table", "violation_type"], hour
        )
        for r in rows.to_pylist():
            out.setdefault(r["event_table"], Counter())[r["violation_type"]] += 1
    return out


def _of_hour(f: pq.ParquetFile, columns: list[str], hour: layout.ArchiveHour) -> pa.Table:
    """The file's rows of ``hour``: all of them, unless the file holds several hours (an
    Iceberg file of compacted data has ``day`` and ``hr`` columns:
    ``lake/formats/iceberg_compact.py``)."""
    if not {"day", "hr"} <= set(f.schema_arrow.names):
        return f.read(columns=columns)
    t = f.read(columns=[*columns, "day", "hr"])
    t = t.filter(pc.and_(pc.equal(t["day"], hour.day), pc.equal(t["hr"], hour.hr)))
    return t.select(columns)


def table_hour(
    src: LakeSource,
    table: str,
    hour: layout.ArchiveHour,
    columns: dict[str, str],
    misfits: Counter[str],
    violations: Counter[str] | None = None,
) -> TableHour | None:
    """The check figures of ``table`` in ``hour`` from its files (``None``: no file)."""
    files = src.hour_files(table, hour)
    if not files:
        return None
    parts, widened, rows = [], {}, 0
    for loc, _ in files:
        fs, path = storage.resolve(loc)
        f = pq.ParquetFile(path, filesystem=fs)
        for field in f.schema_arrow:
            now = columns.get(field.name)
            was = _TYPE_NAMES.get(str(field.type))
            if now and was and was != now:
                widened[field.name] = {"name": field.name, "from": was, "to": now}
        present = [c for c in CHECKED_COLUMNS if c in f.schema_arrow.names]
        part = _of_hour(f, present, hour)
        rows += part.num_rows
        parts.append(part)
    data = pa.concat_tables(parts, promote_options="default")
    repeated, held = 0, []
    if holds_messages(table):  # a side table's message ids repeat by design
        ids = data.column("message_id")
        repeated = len(ids) - len(pc.unique(ids))
        held = prior_ids(
            index_files(src.lake_root, src.source_dir, src.lookback_hours, [hour.compact]), ids
        )
    return TableHour(
        hour=str(hour),
        rows=rows,
        files=len(files),
        bytes=sum(s for _, s in files),
        repeated_message_ids=repeated + len(held),
        widened_columns=sorted(widened.values(), key=lambda w: w["name"]),
        misfits_by_column=dict(sorted(misfits.items())),
        conformance_failures=[{**f, "hour": str(hour)} for f in check_conformance(table, data)]
        if holds_messages(table)
        else [],
        violations=dict(sorted((violations or {}).items())),
    )


def _source_reports(src: LakeSource) -> Iterator[SourceReport]:
    """The source rows of the source's sync reports, newest first, read one finish day at a
    time (``reports/day=<finish day>/source=/run_id=/``): a caller that stops early reads
    only the last days' reports, not years of them."""
    by_day: dict[str, list[str]] = {}
    for loc, _ in storage.list_files(layout.join(src.lake_root, "reports"), recursive=True):
        m = _REPORT_RE.search(loc)
        if m and m.group(2) == src.source_id:
            by_day.setdefault(m.group(1), []).append(loc)
    for day in sorted(by_day, reverse=True):
        rows = [SyncReport.parse(storage.read_bytes(loc)).source for loc in by_day[day]]
        yield from sorted(rows, key=lambda r: r.finish_time or "", reverse=True)


def latest_synced_hours(src: LakeSource, limit: int) -> list[layout.ArchiveHour]:
    """The ``limit`` latest hours the lake holds synced data of (each synced hour has its id
    index folder, ``_index/<source>/hour=``: one listing), oldest first."""
    root = layout.index_root(src.lake_root, src.source_dir)
    hours = {
        h
        for loc, _ in storage.list_files(root, recursive=True)
        if (h := layout.hour_of_index_file(loc))
    }
    return sorted(layout.ArchiveHour.parse(h) for h in hours)[-limit:]


def latest_source_hours(
    src: LakeSource, hours: list[layout.ArchiveHour]
) -> dict[str, SourceHourEntry]:
    """Each hour's reconciliation from the newest sync report that synced it."""
    wanted = {str(h) for h in hours}
    found: dict[str, SourceHourEntry] = {}
    for report in _source_reports(src):  # newest first: the first entry of an hour wins
        for e in report.hour_entries():
            if e.hour in wanted:
                found.setdefault(e.hour, e)
        if len(found) == len(wanted):
            break
    return found


def recheck(src: LakeSource, tables: list[str], hours: list[layout.ArchiveHour]) -> SyncReport:
    """The check figures of ``tables`` (and the source's reconciliation) in ``hours``, from
    the lake as it is. An hour no sync report covers is left out of the source's
    ``by_hour`` (the completeness check then says so)."""
    record = read_schema_record(src.lake_root, src.source_dir)
    misfits = {h: _misfits(src, h) for h in hours}
    violations = {h: _violations(src, h) if VIOLATIONS in record else {} for h in hours}
    reports = {}
    for t in tables:
        columns = dict(record.get(t, []))
        entries = [
            e
            for h in hours
            if (
                e := table_hour(
                    src, t, h, columns, misfits[h].get(t, Counter()), violations[h].get(t)
                )
            )
        ]
        if entries:
            reports[t] = TableReport(
                table_name=t,
                source_id=src.source_id,
                row_count=sum(e.rows for e in entries),
                checks=TableChecks(),
                by_hour=entries,
            )
    by_hour = latest_source_hours(src, hours)
    source = SourceReport(
        source_id=src.source_id,
        hours_synced=[str(h) for h in hours],
        by_hour=[by_hour[str(h)] for h in hours if str(h) in by_hour],
    )
    return SyncReport(reports, source)
