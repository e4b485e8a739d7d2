"""A sync report's hour entries: what one hour of a sync holds, typed.

A sync may cover a batch of hours (the batched sensor run, a backfill chunk, a replay), but
Dagster shows one materialization and one check result per hourly partition, so the report
carries each hour's own figures besides the batch's totals: a ``TableHour`` per table and hour
(``TableReport.by_hour``) and a ``SourceHourEntry`` per hour (``SourceReport.by_hour``: the
hour's reconciliation ``SourceHour`` and what the catalog step did, ``CatalogHour``). They are
made by ``transform/hour_figures.py`` and ``catalog/step.py``, read by the Dagster events
(``orchestration/sync/``), ``datalake status`` and the re-checks; ``to_dict``/``from_dict``
are the only places they meet JSON (``lake/report.py`` writes them inside the report's rows).

Entries written by other versions read back: a missing field takes its default, an unknown one
is kept in ``extra`` and written again as it was.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class SourceHour:
    """One hour's reconciliation figures: the sync's figures of the hour
    (``transform/hour_figures.py``), a report's totals (``SourceReport.totals``: a one-hour
    report of a version before ``by_hour``, or a batch as a whole), or an hour of nothing read
    (all zero)."""

    lines_in: int = 0
    messages_written: int = 0
    duplicates: int = 0
    cross_hour_duplicates: int = 0
    lines_quarantined: int = 0
    suppressed: int = 0
    values_quarantined: int = 0
    violations: int = 0  # a tracking plan's violations recorded (rows of ``violations``)

    def __add__(self, other: SourceHour) -> SourceHour:
        """Two reads of the same hour added up: an hour's sync and the open hour's batches
        after it (``lake/sync_status.py``)."""
        return SourceHour(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    @property
    def reconciled(self) -> bool:
        """Every line read is a row, a duplicate, quarantined or suppressed."""
        return self.lines_in == (
            self.messages_written + self.duplicates + self.lines_quarantined + self.suppressed
        )


@dataclass(frozen=True)
class CatalogHour:
    """What the catalog step did and found for one hour (``catalog/step.py``): the
    ``catalog`` object of the hour's ``SourceHourEntry``, read by the Dagster catalog asset
    and its ``in_step`` check."""

    kind: str  # the catalog's backend, or the table format whose commit registered the tables
    database: str
    tables: list[str]  # catalog tables with a partition of the hour
    tables_created: list[str]
    columns_added: list[str]
    columns_widened: list[str]
    partitions_registered: int
    problems: list[str]  # what the catalog lacks or says differently from the lake's files
    error: str | None = None  # the registration failed

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.error is None:
            del out["error"]
        return out

    @classmethod
    def from_dict(cls, entry: dict[str, Any]) -> CatalogHour:
        return cls(
            kind=entry.get("kind", ""),
            database=entry.get("database", ""),
            tables=list(entry.get("tables", [])),
            tables_created=list(entry.get("tables_created", [])),
            columns_added=list(entry.get("columns_added", [])),
            columns_widened=list(entry.get("columns_widened", [])),
            partitions_registered=entry.get("partitions_registered", 0),
            problems=list(entry.get("problems", [])),
            error=entry.get("error"),
        )


_SOURCE_FIGURES = tuple(f.name for f in fields(SourceHour))


@dataclass(frozen=True)
class SourceHourEntry:
    """A source report's ``by_hour`` entry: the hour (``YYYY-MM-DDTHH``), its reconciliation
    (``None``: the run read nothing of it, as a catalog-only run) and what the catalog step
    did for it. Written flat, as reports have always held it: ``{"hour", <figures>,
    "reconciled", "catalog"}``."""

    hour: str
    figures: SourceHour | None = None
    catalog: CatalogHour | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # keys this version does not know

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"hour": self.hour}
        if self.figures is not None:
            out.update(asdict(self.figures))
            if not self.figures.violations:  # a source without a plan: as reports were
                del out["violations"]
            out["reconciled"] = self.figures.reconciled
        if self.catalog is not None:
            out["catalog"] = self.catalog.to_dict()
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> SourceHourEntry:
        has_figures = any(k in obj for k in _SOURCE_FIGURES)
        known = {"hour", "reconciled", "catalog", *_SOURCE_FIGURES}
        return cls(
            hour=obj.get("hour", ""),
            figures=SourceHour(**{k: obj[k] for k in _SOURCE_FIGURES if k in obj})
            if has_figures
            else None,
            catalog=CatalogHour.from_dict(obj["catalog"]) if obj.get("catalog") else None,
            extra={k: v for k, v in obj.items() if k not in known},
        )


@dataclass(frozen=True, kw_only=True)
class TableHour:
    """A table report's ``by_hour`` entry: what the sync wrote to the table in one hour
    (``transform/hour_figures.py``), or what a re-check found in the lake
    (``transform/recheck.py``, which alone counts ``repeated_message_ids`` per hour)."""

    hour: str
    rows: int = 0
    duplicates: int = 0
    cross_hour_duplicates: int = 0
    suppressed: int = 0
    values_quarantined: int = 0
    files: int = 0
    bytes: int = 0
    new_columns: list[dict[str, str]] = field(default_factory=list)  # [{"name", "type"}]
    widened_columns: list[dict[str, str]] = field(default_factory=list)  # [{"name","from","to"}]
    misfits_by_column: dict[str, int] = field(default_factory=dict)
    conformance_failures: list[dict[str, Any]] = field(default_factory=list)
    repeated_message_ids: int | None = None
    # a tracking plan's violations by the table's messages in the hour, by violation type
    violations: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # keys this version does not know

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        if self.repeated_message_ids is None:
            del out["repeated_message_ids"]
        if not self.violations:  # a source without a plan: as reports were
            del out["violations"]
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> TableHour:
        known = {f.name for f in fields(cls) if f.name != "extra"}
        return cls(
            **{k: v for k, v in obj.items() if k in known},
            extra={k: v for k, v in obj.items() if k not in known},
        )
