"""The table format's maintenance of one source, serialised with its syncs and erasures.

Under the source's lock (``lake/lock.py``: a sync of the source waits, and so does this),
an unfinished commit is rolled forward first (``lake/commit.py``), then every table of the
source's schema record, and its quarantine, is maintained (``TableFormat.maintain``: Iceberg
expires snapshots older than the retention and deletes the files nothing references any
more). The Dagster job ``table_maintenance`` and ``datalake maintain`` call this."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from datalake_assets.lake import commit
from datalake_assets.lake.formats import SourceTables, table_format
from datalake_assets.lake.lock import SourceLock
from datalake_assets.lake.records import read_schema_record
from datalake_assets.spec.naming import QUARANTINE


def maintain_source(
    lake_root: str,
    config: Any,  # settings.formats_section.FormatConfig
    src: SourceTables,
    owner: str,
    retention: timedelta | None = None,
) -> dict[str, dict]:
    """Per table, what the maintenance removed (``{}``: the format keeps nothing to expire)."""
    fmt = table_format(config, lake_root)
    if not fmt.keeps_versions:
        return {}
    tables = [*sorted(read_schema_record(lake_root, src.source_dir)), QUARANTINE]
    with SourceLock(lake_root, src.source_dir, owner):
        commit.recover(lake_root, src.source_dir, fmt.apply)
        return fmt.maintain(src, tables, retention)
