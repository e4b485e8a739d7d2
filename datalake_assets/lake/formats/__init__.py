"""Table formats: the seam between a sync's staged files and the tables readers query
(``format_interface.py`` says what a format does; ``segment.py`` and ``iceberg.py`` are the two)."""

from __future__ import annotations

from typing import Any

from datalake_assets.lake.formats.format_interface import (
    FormatError,
    SourceTables,
    TableFormat,
    TablesToCommit,
    TableWrite,
)
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets.spec.table_formats import ICEBERG

__all__ = [
    "FormatError",
    "SourceTables",
    "TableFormat",
    "TablesToCommit",
    "TableWrite",
    "table_format",
    "table_hour_files",
]


def table_format(config: Any, lake_root: str) -> TableFormat:
    """The lake's table format, as its settings say (``config``: a
    ``settings.formats_section.FormatConfig``, of a layer above this one)."""
    if config.format == ICEBERG:
        from datalake_assets.lake.formats.iceberg import IcebergFormat

        return IcebergFormat(config, lake_root)
    from datalake_assets.lake.formats.segment import SegmentLayout

    return SegmentLayout(config, lake_root)


def table_hour_files(
    config: Any, lake_root: str, src: SourceTables, table: str, hour: ArchiveHour
) -> list[tuple[str, int]]:
    """``[(location, size)]``: the files readers read for ``table``'s rows of ``hour`` (the
    quarantine's too), as the lake's table format keeps them (``TableFormat.live_files``;
    the Segment layout: the partition folder's files whose name carries the hour)."""
    return table_format(config, lake_root).live_files(src, table, hour.compact)
