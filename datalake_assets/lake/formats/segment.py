"""The Segment layout (the default table format): each table a tree of hive-style folders,
``<lake>/data/<source>/segment_type=<table>/<date partition>/part-<hour>-*.parquet``, registered
as an external table by the ``[catalog]``. A commit swaps each staged partition folder into
place (``lake/commit.py``); a reader of a folder sees the old hour or the new one."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from datalake_assets.lake import commit, storage
from datalake_assets.lake.formats import segment_models
from datalake_assets.lake.formats.format_interface import (
    SEGMENT_COMPACTION,
    CommittedTable,
    CompactionUnsupported,
    FormatError,
    ModelRows,
    SourceTables,
    TableCompaction,
    TableFormat,
    TablesToCommit,
    TableVersion,
)
from datalake_assets.spec import layout
from datalake_assets.spec.naming import QUARANTINE
from datalake_assets.spec.table_formats import SEGMENT


def hour_files(
    lake_root: str, src: SourceTables, table: str, hour: layout.ArchiveHour
) -> list[tuple[str, int]]:
    """``[(location, size)]`` of ``table``'s files of ``hour``: its partition folder's files
    whose name carries the hour (a coarse layout's folder holds 24 hours; the quarantine's
    folders are always hourly)."""
    folder = _hour_folder(lake_root, src, table, hour)
    return [
        (loc, size)
        for loc, size in storage.list_files(folder)
        if layout.hour_of_data_file(loc) == hour.compact and loc.endswith(".parquet")
    ]


def _hour_folder(lake_root: str, src: SourceTables, table: str, hour: layout.ArchiveHour) -> str:
    if table == QUARANTINE:
        return layout.quarantine_dir(lake_root, src.source_dir, hour)
    return layout.table_partition_dir(lake_root, src.source_dir, table, src.date_layout, hour)


class SegmentLayout(TableFormat):
    name = SEGMENT

    def plan(self, batch: TablesToCommit) -> tuple[list[commit.Swap], list[dict]]:
        """One swap per partition folder touched: tables written, and tables that lost all
        rows of a synced hour (swapped with an empty version)."""
        if batch.batch:  # the sync refuses batches first (``appends``); never half-applied
            raise FormatError("the Segment layout replaces whole hours: no batches", "unsupported")
        src = batch.src
        by_dir: dict[tuple[str, str], set[str]] = defaultdict(set)  # (target, staged) -> hours
        for h in batch.hours:
            hour = layout.ArchiveHour.parse(h)
            part = layout.date_partition_path(src.date_layout, hour)
            for t in batch.tables:
                by_dir[
                    (
                        layout.join(layout.table_root(self.lake_root, src.source_dir, t), part),
                        layout.join(layout.segment_type_dir(batch.staged_data_root, t), part),
                    )
                ].add(h)
            if batch.quarantine_staged:
                by_dir[
                    (
                        layout.quarantine_dir(self.lake_root, src.source_dir, hour),
                        layout.join(batch.quarantine_staged, layout.hour_partition_path(hour)),
                    )
                ].add(h)
        return commit.swaps_of(by_dir), []

    def location(self, src: SourceTables, table: str) -> str:
        if table == QUARANTINE:
            return layout.quarantine_root(self.lake_root, src.source_dir)
        return layout.table_root(self.lake_root, src.source_dir, table)

    def hour_location(self, src: SourceTables, table: str, hour: str) -> str:
        return _hour_folder(self.lake_root, src, table, layout.ArchiveHour.parse(hour))

    def committed(self, batch: TablesToCommit) -> dict[str, CommittedTable]:
        return {t: CommittedTable(t, "", self.location(batch.src, t)) for t in batch.tables}

    def live_files(self, src: SourceTables, table: str, hour: str) -> list[tuple[str, int]]:
        return hour_files(self.lake_root, src, table, layout.ArchiveHour.parse(hour))

    def compact(
        self, src: SourceTables, tables: list[str], cutoff: datetime, target_bytes: int
    ) -> list[TableCompaction]:
        """A partition is a folder here: files can merge only inside one (docs/concepts/compaction.md,
        "The Segment layout")."""
        raise CompactionUnsupported(SEGMENT_COMPACTION)

    def publish_model(self, src: SourceTables, out: ModelRows, run_id: str) -> CommittedTable:
        return segment_models.publish(self.lake_root, out, run_id)

    def current_version(
        self, src: SourceTables, table: str, model_location: str = ""
    ) -> TableVersion | None:
        return segment_models.folder_version(model_location or self.location(src, table))

    def model_files(
        self, src: SourceTables, model: str, model_location: str
    ) -> list[tuple[str, int]]:
        return segment_models.parquet_files(model_location)
