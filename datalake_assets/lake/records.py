"""The lake's own records, besides the tables: the schema record and the quarantine's format.

* ``_schema.json`` per source (``layout.schema_record_path``): each event table's columns and
  their types, as the last sync left them. The next sync widens from it; the Dagster code
  location and the dbt models read it to know which tables exist (``source_tables``);
  ``datalake ddl`` prints from it.
* Quarantine files (``layout.quarantine_dir``): Parquet with ``QUARANTINE_SCHEMA``, written by
  the sync, registered by the catalog.
"""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from datalake_assets.lake import storage
from datalake_assets.spec import layout
from datalake_assets.spec.naming import STANDARD_TABLES

QUARANTINE_SCHEMA = pa.schema(
    [
        ("source_id", pa.string()),
        ("run_id", pa.string()),
        ("level", pa.string()),  # "line": the whole line; "value": one value of a written row
        ("reason", pa.string()),
        ("detail", pa.string()),
        ("table_name", pa.string()),
        ("column_name", pa.string()),
        ("value", pa.string()),
        ("message_id", pa.string()),
        ("archive_file", pa.string()),
        ("line_number", pa.int64()),
        ("raw_line", pa.string()),  # the line as text (invalid UTF-8 replaced by U+FFFD)
        ("raw_line_base64", pa.string()),  # the exact bytes, when the line is not valid UTF-8
    ]
)


def read_schema_record(lake_root: str, source_dir: str) -> dict[str, list[tuple[str, str]]]:
    location = layout.schema_record_path(lake_root, source_dir)
    if not storage.exists(location):
        return {}
    body = orjson.loads(storage.read_bytes(location))
    return {t: [tuple(c) for c in spec["columns"]] for t, spec in body["tables"].items()}


def source_tables(lake_root: str, source_dir: str) -> list[str]:
    """Every table of a source, sorted: the standard ones, which every source has whatever its
    traffic, and each table of its schema record."""
    return sorted(STANDARD_TABLES | set(read_schema_record(lake_root, source_dir)))


def write_schema_record(
    lake_root: str, source_dir: str, tables: dict[str, list[tuple[str, str]]]
) -> None:
    body = {
        "version": 1,
        "updated_at": datetime.now(UTC).isoformat(),
        "tables": {t: {"columns": [list(c) for c in cols]} for t, cols in sorted(tables.items())},
    }
    storage.write_bytes_atomic(
        layout.schema_record_path(lake_root, source_dir),
        orjson.dumps(body, option=orjson.OPT_INDENT_2),
    )


def write_quarantine(
    root: str, hour: str, name_task: int, seq: int, run_id: str, records: list[dict]
) -> tuple[str, int]:
    """Write quarantine records of an hour (compact) under ``root``'s ``day=/hr=``."""
    h = layout.ArchiveHour.parse(hour)
    directory = layout.join(root, layout.hour_partition_path(h))
    location = layout.join(directory, layout.data_file_name(h, run_id, name_task, seq))
    fs, path = storage.resolve(location)
    storage.create_dir(directory)
    pq.write_table(
        pa.Table.from_pylist(records, schema=QUARANTINE_SCHEMA),
        path,
        filesystem=fs,
        compression="snappy",
    )
    return location, fs.get_file_info(path).size
