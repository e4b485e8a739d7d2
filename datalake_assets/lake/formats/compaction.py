"""Compaction of one source's tables: the small files of cold data rewritten into right-sized
ones (``TableFormat.compact``; Iceberg: ``iceberg_compact.py``), serialised with its syncs and
erasures.

Like the maintenance (``maintain.py``), it runs under the source's lock (``lake/lock.py``),
after rolling an unfinished commit forward; the lock is taken **table by table**, so a sync of
the source waits for one table's compaction at most, never for the whole source's. An hour is
cold once it ended ``settle_hours`` before ``now`` (``[iceberg] compact_after_hours``): late
syncs and replays of recent hours are never fought. The Dagster job ``table_maintenance`` and
``datalake compact`` call ``compact_source``; each run's report is written to
``<lake>/reports/compaction/source=<source>/<UTC time>.json`` and printed (``report_lines``).

``compact_source`` is the one entry point (benchmarks call it too); a format that cannot
compact (the Segment layout, unless its implementation says otherwise) gives a report whose
``note`` says why, and no table."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from datalake_assets.lake import commit, storage
from datalake_assets.lake.formats import SourceTables, table_format
from datalake_assets.lake.formats.format_interface import CompactionUnsupported, TableCompaction
from datalake_assets.lake.lock import SourceLock
from datalake_assets.lake.records import read_schema_record
from datalake_assets.spec import layout
from datalake_assets.spec.naming import QUARANTINE

MB = 1 << 20


@dataclass
class CompactionReport:
    """One source's compaction: per table, what was rewritten (files, bytes, partitions)."""

    source: str  # the source's lake folder
    format: str
    cutoff: str  # ISO UTC: hours that ended before this were cold
    settle_hours: int
    target_bytes: int
    tables: list[TableCompaction] = field(default_factory=list)  # only tables rewritten
    seconds: float = 0.0
    note: str = ""  # why nothing could be compacted (a format without compaction)

    @property
    def supported(self) -> bool:
        return not self.note

    def totals(self) -> dict[str, int]:
        keys = ("files_before", "files_after", "bytes_before", "bytes_after", "rows")
        return {k: sum(getattr(t, k) for t in self.tables) for k in keys}

    def to_json(self) -> dict:
        return {**asdict(self), "totals": self.totals()}


def cold_cutoff(now: datetime, settle_hours: int) -> datetime:
    """Hours that ended at or before this are cold."""
    return now.astimezone(UTC) - timedelta(hours=settle_hours)


def compact_source(
    lake_root: str,
    config: Any,  # settings.formats_section.FormatConfig
    src: SourceTables,
    owner: str,
    *,
    settle_hours: int | None = None,
    target_bytes: int | None = None,
    now: datetime | None = None,
    tables: list[str] | None = None,
    lock_wait_s: float = 600.0,
) -> CompactionReport:
    """Compact every table of the source's schema record and its quarantine (or ``tables``);
    ``settle_hours``/``target_bytes`` default to the config's ``compact_after_hours`` and
    ``target_file_mb``."""
    t0 = time.monotonic()
    fmt = table_format(config, lake_root)
    settle = config.compact_after_hours if settle_hours is None else settle_hours
    target = config.target_file_mb * MB if target_bytes is None else target_bytes
    cutoff = cold_cutoff(now or datetime.now(UTC), settle)
    report = CompactionReport(src.source_dir, fmt.name, cutoff.isoformat(), settle, target)
    names = (
        tables
        if tables is not None
        else [*sorted(read_schema_record(lake_root, src.source_dir)), QUARANTINE]
    )
    for table in names:
        with SourceLock(lake_root, src.source_dir, owner, wait_s=lock_wait_s):
            commit.recover(lake_root, src.source_dir, fmt.apply)
            try:
                done = fmt.compact(src, [table], cutoff, target)
            except CompactionUnsupported as e:
                report.note = str(e)
                break
        report.tables += [t for t in done if t.files_before]
    report.seconds = round(time.monotonic() - t0, 3)
    return report


def report_path(lake_root: str, source_dir: str, at: datetime) -> str:
    """Beside the sync reports (``reports/``), under a folder of its own that their readers
    (``reports/day=/source=/run_id=/``) do not match."""
    return layout.join(
        lake_root,
        "reports",
        "compaction",
        f"source={source_dir}",
        at.astimezone(UTC).strftime("%Y%m%dT%H%M%S%fZ") + ".json",
    )


def write_report(lake_root: str, report: CompactionReport, at: datetime | None = None) -> str:
    """Write the report (JSON); returns its location."""
    location = report_path(lake_root, report.source, at or datetime.now(UTC))
    storage.write_bytes_atomic(location, json.dumps(report.to_json(), indent=2).encode())
    return location


def _mb(n: int) -> str:
    return f"{n / MB:.1f} MB" if n >= MB // 10 else f"{n / 1024:.1f} KB"


def report_lines(source_id: str, report: CompactionReport) -> list[str]:
    """What ``datalake compact`` prints: a line per table rewritten, then the source's."""
    if not report.supported:
        return [f"{source_id}: {report.note}"]
    out = [
        f"{source_id}.{t.table}: {t.files_before} files ({_mb(t.bytes_before)}) -> "
        f"{t.files_after} ({_mb(t.bytes_after)}), {t.rows} rows, "
        f"{len(t.partitions)} partitions ({', '.join(t.partitions[:3])}"
        f"{', ...' if len(t.partitions) > 3 else ''}), {t.seconds:.2f} s"
        for t in report.tables
    ]
    tot = report.totals()
    out.append(
        f"{source_id}: {len(report.tables)} tables compacted, {tot['files_before']} files "
        f"-> {tot['files_after']}, {_mb(tot['bytes_before'])} -> "
        f"{_mb(tot['bytes_after'])}; hours before {report.cutoff[:16]}Z, target "
        f"{_mb(report.target_bytes)}; {report.seconds:.1f} s"
    )
    return out
