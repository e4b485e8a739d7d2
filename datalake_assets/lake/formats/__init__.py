"""Table formats: the seam between a sync's staged files and the tables readers query
(``base.py`` says what a format does; ``segment.py`` and ``iceberg.py`` are the two)."""

from __future__ import annotations

from typing import Any

from datalake_assets.lake.formats.base import (
    FormatError,
    SourceTables,
    TableFormat,
    TablesToCommit,
)
from datalake_assets.spec.table_formats import ICEBERG

__all__ = [
    "FormatError",
    "SourceTables",
    "TableFormat",
    "TablesToCommit",
    "table_format",
]


def table_format(config: Any, lake_root: str) -> TableFormat:
    """The lake's table format, as its settings say (``config``: a
    ``settings.formats_section.FormatConfig``, of a layer above this one)."""
    if config.format == ICEBERG:
        from datalake_assets.lake.formats.iceberg import IcebergFormat

        return IcebergFormat(config, lake_root)
    from datalake_assets.lake.formats.segment import SegmentLayout

    return SegmentLayout(config, lake_root)
