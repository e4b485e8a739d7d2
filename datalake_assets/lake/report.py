"""The sync report: its types, its JSON-lines file, and where that file lives.

A sync reports one object per table it wrote (``type = "event"``), then one for the source
(``type = "source"``), with Segment's fields and ours. ``SyncReport.rows`` is the only place
they become JSON objects and ``SyncReport.from_rows`` the only place they are read back, so
the file (``<lake>/reports/day=/source=/run_id=/report.json``), the ``sync_reports`` table
(``catalog/reports.py``), ``datalake sync``'s output and the Dagster metadata all say the same.

Objects written by other versions read back: a missing field takes its default, an unknown
one is kept in ``extra`` and written again as it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, ClassVar

import orjson

from datalake_assets.lake import storage
from datalake_assets.lake.hour_report import SourceHour, SourceHourEntry, TableHour
from datalake_assets.spec import layout

EVENT, SOURCE = "event", "source"
FINISHED = "finished"

# The fields of every row of a run, in the order they are written.
_RUN_FIELDS = (
    "run_id",
    "source_id",
    "database",
    "start_time",
    "replay",
    "replay_from",
    "replay_to",
    "emr_cluster_id",
    "s3_bucket",
)
_OUTCOME_FIELDS = ("finish_time", "duration_mins", "status", "error", "error_code")


@dataclass(kw_only=True)
class _Row:
    """What every row of a sync's report says: the run and its outcome."""

    run_id: str = ""
    source_id: str = ""
    database: str = ""
    start_time: str | None = None  # ISO 8601, UTC
    replay: bool = False
    replay_from: str | None = None  # first hour of a replay, YYYY-MM-DDTHH
    replay_to: str | None = None
    emr_cluster_id: str | None = None
    s3_bucket: str | None = None
    finish_time: str | None = None
    duration_mins: float | None = None
    status: str = FINISHED
    error: str | None = None
    error_code: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # keys this version does not know

    _ORDER: ClassVar[tuple[str, ...]] = ()  # the row's keys, in file order (set by the subclasses)
    _OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = (
        frozenset()
    )  # keys written only when they have a value

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in self._ORDER:
            if key == "type":
                out[key] = self.type  # type: ignore[attr-defined]
                continue
            value = getattr(self, key)
            if value is None and key in self._OMITTED_WHEN_NONE:
                continue
            if key == "by_hour":
                value = [e.to_dict() for e in value]
            out[key] = value.to_dict() if isinstance(value, TableChecks) else value
        out.update(self.extra)
        return out

    @classmethod
    def _hour_entry(cls, obj: dict[str, Any]) -> Any:
        raise NotImplementedError  # each row type reads its own ``by_hour`` entries

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> _Row:
        known = {f.name for f in fields(cls) if f.name != "extra"}
        kwargs = {k: v for k, v in obj.items() if k in known}
        if isinstance(kwargs.get("checks"), dict):
            kwargs["checks"] = TableChecks.from_dict(kwargs["checks"])
        if "by_hour" in kwargs:
            kwargs["by_hour"] = [cls._hour_entry(e) for e in kwargs["by_hour"] or []]
        extra = {k: v for k, v in obj.items() if k not in known and k not in cls._ORDER}
        return cls(**kwargs, extra=extra)


@dataclass(kw_only=True)
class TableChecks:
    """What the sync measured on a table's written rows (the Dagster checks' inputs)."""

    repeated_message_ids: int = 0  # message ids written more than once (re-read from the output)
    misfits_by_column: dict[str, int] = field(default_factory=dict)  # values that did not fit
    conformance_failures: list[dict[str, Any]] = field(default_factory=list)  # pandera's

    def to_dict(self) -> dict[str, Any]:
        return {
            "repeated_message_ids": self.repeated_message_ids,
            "misfits_by_column": self.misfits_by_column,
            "conformance_failures": self.conformance_failures,
        }

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> TableChecks:
        return cls(
            **{
                k: obj[k]
                for k in ("repeated_message_ids", "misfits_by_column", "conformance_failures")
                if k in obj
            }
        )


@dataclass(kw_only=True)
class TableReport(_Row):
    """One table the sync wrote (``type = "event"``)."""

    table_name: str = ""
    partitions: list[dict[str, str]] = field(default_factory=list)  # [{"day", "hr"}] written
    new_columns: list[dict[str, str]] = field(default_factory=list)  # [{"name", "type"}]
    widened_columns: list[dict[str, str]] = field(default_factory=list)  # [{"name","from","to"}]
    columns: list[dict[str, str]] = field(default_factory=list)  # [{"name", "type"}], in order
    row_count: int = 0
    duplicates: int = 0
    suppressed: int = 0  # lines of suppressed identities that would have been rows here
    cross_hour_duplicates: int | None = None
    values_quarantined: int = 0
    files: int = 0
    bytes: int = 0
    is_new: bool = False
    catalog: dict[str, Any] | None = None  # what the registration did (register_sync's entry)
    checks: TableChecks = field(default_factory=TableChecks)
    # Each synced hour's own figures (``transform/hour_figures.py``): the fields above are
    # the batch's totals; a Dagster partition shows its hour's entry.
    by_hour: list[TableHour] = field(default_factory=list)

    type = EVENT
    _ORDER = (
        "type",
        "table_name",
        *_RUN_FIELDS,
        "partitions",
        "new_columns",
        "widened_columns",
        "columns",
        "row_count",
        "duplicates",
        "suppressed",
        "cross_hour_duplicates",
        "values_quarantined",
        "files",
        "bytes",
        "is_new",
        "catalog",
        "checks",
        *_OUTCOME_FIELDS,
        "by_hour",
    )
    _OMITTED_WHEN_NONE = frozenset({"cross_hour_duplicates"})

    @classmethod
    def _hour_entry(cls, obj: dict[str, Any]) -> TableHour:
        return TableHour.from_dict(obj)

    def hour(self, hour: str) -> TableHour | None:
        """The entry of ``hour`` (``YYYY-MM-DDTHH``), if the table has one."""
        return next((e for e in self.by_hour if e.hour == hour), None)


@dataclass(kw_only=True)
class SourceReport(_Row):
    """The sync of the source (``type = "source"``): its reconciliation
    ``lines_in = messages_written + duplicates + lines_quarantined + suppressed`` and what it
    read. ``suppressed``: lines of suppressed identities, stored nowhere (a report of a
    version before suppression has none: 0)."""

    lines_in: int = 0
    messages_written: int = 0
    duplicates: int = 0
    lines_quarantined: int = 0
    suppressed: int = 0
    values_quarantined: int = 0
    cross_hour_duplicates: int | None = None
    dedup_lookback_hours: int | None = None
    index_ids_written: int | None = None
    hours_synced: list[str] = field(default_factory=list)  # YYYY-MM-DDTHH
    recovered_commits: list[Any] = field(default_factory=list)
    files_in: int = 0
    bytes_in: int = 0
    timings: dict[str, float] | None = None  # seconds per phase
    partitions: list[dict[str, str]] = field(default_factory=list)  # of hours_synced
    tables: int = 0
    warning: str | None = None
    # an open hour's batch (``transform/open_hour.py``): its id; the figures are the rows it
    # added to ``hours_synced``, not the hours' (None: a sync, which replaced its hours)
    batch_id: str | None = None
    # Each synced hour's reconciliation and catalog step (``transform/hour_figures.py``,
    # ``transform/catalog_phase.py``); the fields above are the batch's totals. Reports of
    # versions before it have none.
    by_hour: list[SourceHourEntry] = field(default_factory=list)

    type = SOURCE
    table_name = None
    _ORDER = (
        "type",
        "table_name",
        *_RUN_FIELDS,
        "lines_in",
        "messages_written",
        "duplicates",
        "lines_quarantined",
        "suppressed",
        "values_quarantined",
        "cross_hour_duplicates",
        "dedup_lookback_hours",
        "index_ids_written",
        "hours_synced",
        "recovered_commits",
        "files_in",
        "bytes_in",
        "timings",
        *_OUTCOME_FIELDS,
        "partitions",
        "tables",
        "warning",
        "batch_id",
        "by_hour",
    )
    _OMITTED_WHEN_NONE = frozenset(
        {
            "cross_hour_duplicates",
            "dedup_lookback_hours",
            "index_ids_written",
            "timings",
            "warning",
            "batch_id",
        }
    )

    @classmethod
    def _hour_entry(cls, obj: dict[str, Any]) -> SourceHourEntry:
        return SourceHourEntry.from_dict(obj)

    def summary(self) -> str:
        """What the run read and wrote, in one line (a terminal's: ``datalake dev``, the
        batches' loop)."""
        return (
            f"{self.lines_in} lines, {self.messages_written} rows, {self.duplicates} "
            f"duplicates, {self.lines_quarantined} quarantined ({self.files_in} files, "
            f"{(self.duration_mins or 0) * 60:.1f} s)"
        )

    def totals(self) -> SourceHour:
        """The report's totals as figures (``cross_hour_duplicates``: 0 when it has none)."""
        return SourceHour(
            lines_in=self.lines_in,
            messages_written=self.messages_written,
            duplicates=self.duplicates,
            cross_hour_duplicates=self.cross_hour_duplicates or 0,
            lines_quarantined=self.lines_quarantined,
            suppressed=self.suppressed,
            values_quarantined=self.values_quarantined,
        )

    @property
    def reconciled(self) -> bool:
        return self.totals().reconciled

    def hour(self, hour: str) -> SourceHourEntry | None:
        """The entry of ``hour`` (``YYYY-MM-DDTHH``), if the report has one."""
        return next((e for e in self.by_hour if e.hour == hour), None)

    def hour_entries(self) -> list[SourceHourEntry]:
        """The report's figures hour by hour: ``by_hour``, or for a report of a version before
        it that synced one hour, its totals as that hour's."""
        if self.by_hour:
            return self.by_hour
        if len(self.hours_synced) == 1:
            return [SourceHourEntry(self.hours_synced[0], self.totals())]
        return []


@dataclass
class SyncReport:
    """A sync's report: its tables (by name, in the report's order), then the source."""

    tables: dict[str, TableReport]
    source: SourceReport

    def rows(self) -> list[dict[str, Any]]:
        """The report's objects as written: one per table, then the source's."""
        return [t.to_dict() for t in self.tables.values()] + [self.source.to_dict()]

    def to_json_lines(self) -> bytes:
        return b"".join(orjson.dumps(r) + b"\n" for r in self.rows())

    @classmethod
    def from_rows(cls, rows: list[dict[str, Any]]) -> SyncReport:
        sources = [r for r in rows if r.get("type") == SOURCE]
        if len(sources) != 1:
            raise ValueError(f"a sync report has one source row, this one has {len(sources)}")
        tables = [TableReport.from_dict(r) for r in rows if r.get("type") == EVENT]
        return cls({t.table_name: t for t in tables}, SourceReport.from_dict(sources[0]))  # type: ignore[arg-type]

    @classmethod
    def parse(cls, body: bytes) -> SyncReport:
        """A ``report.json`` (as ``write_report`` writes it) back as the report."""
        return cls.from_rows([orjson.loads(line) for line in body.splitlines() if line.strip()])


def write_report(lake_root: str, report: SyncReport, day: str | None = None) -> str:
    """Writes the report as JSON lines (one object per table, then the source's) to
    ``report_location``; ``day`` (``YYYY-MM-DD``, default today UTC) is the ``day=`` folder:
    the sync's finish day."""
    day = day or datetime.now(UTC).strftime("%Y-%m-%d")
    location = layout.report_path(lake_root, report.source.source_id, report.source.run_id, day)
    storage.write_bytes_atomic(location, report.to_json_lines())
    return location


def report_location(lake_root: str, source: SourceReport) -> str:
    """Where ``write_report`` put a sync's report, from its source row (its finish day)."""
    return layout.report_path(
        lake_root, source.source_id, source.run_id, (source.finish_time or "")[:10]
    )
