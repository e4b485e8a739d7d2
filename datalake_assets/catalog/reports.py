"""Sync reports and the quarantine as catalog tables, next to the event tables.

``sync_reports`` (one table for every source, in its own database, default
``segment_datalake_meta``)::

    <lake_root>/sync_reports/source_id=<source id>/day=<YYYY-MM-DD>/<run_id>.parquet

One row per report object of a sync: one per table (``type = 'event'``) and one for the
source (``type = 'source'``), with Segment's columns (``run_id``, ``start_time``,
``finish_time``, ``duration_mins``, ``status``, ``error``, ``error_code``, ``table_name``,
``database``, ``partitions`` and ``new_columns`` as JSON text, ``row_count``, ``is_new``,
``replay``, ``replay_from``, ``replay_to``, ``emr_cluster_id``, ``s3_bucket``) and ours
(reconciliation counters, widened columns, files, bytes, ...). Keys the schema does not know
are kept as JSON text in ``extra``, so nothing a newer sync reports is lost, and a missing key
is NULL. The file is written atomically (rename locally, one PUT on S3), named after the run,
so re-writing a run's report replaces it.

``quarantine`` (per source, in the source's database, with its table prefix): the
quarantine Parquet files the sync already writes (``<lake>/quarantine/<source>/day=/hr=/``),
with the columns of ``lake.records.QUARANTINE_SCHEMA``, partitioned ``day``, ``hr``.

Query them like any table, e.g. with Spark SQL on the local Hive catalog::

    SELECT status, count(*) FROM segment_datalake_meta.sync_reports
    WHERE source_id = 'demo' GROUP BY status
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from datalake_assets.catalog.catalog_interface import (
    LIST_OF_STRING,
    Catalog,
    Column,
    PartitionSpec,
    check_partition_value,
)
from datalake_assets.lake import storage
from datalake_assets.lake.records import QUARANTINE_SCHEMA
from datalake_assets.spec import layout
from datalake_assets.spec.naming import catalog_table_name

REPORTS_TABLE = "sync_reports"
REPORTS_PARTITION_KEYS = ("source_id", "day")
QUARANTINE_TABLE = "quarantine"
QUARANTINE_PARTITION_KEYS = ("day", "hr")

_STR, _JSON, _INT, _FLOAT, _BOOL, _TS = "str", "json", "int", "float", "bool", "ts"
_ARROW = {
    _STR: pa.string(),
    _JSON: pa.string(),
    _INT: pa.int64(),
    _FLOAT: pa.float64(),
    _BOOL: pa.bool_(),
    _TS: pa.timestamp("us", tz="UTC"),
}

# (column, how the report's value is stored). Segment's columns first, then ours.
REPORT_FIELDS: tuple[tuple[str, str], ...] = (
    ("type", _STR),  # "event" (one per table) or "source"
    ("run_id", _STR),
    ("start_time", _TS),
    ("finish_time", _TS),
    ("duration_mins", _FLOAT),
    ("status", _STR),  # finished / failed
    ("error", _STR),
    ("error_code", _STR),  # insufficient_permissions / invalid_settings / internal
    ("table_name", _STR),
    ("database", _STR),
    ("partitions", _JSON),
    ("new_columns", _JSON),
    ("row_count", _INT),
    ("is_new", _BOOL),
    ("replay", _BOOL),
    ("replay_from", _STR),
    ("replay_to", _STR),
    ("emr_cluster_id", _STR),
    ("s3_bucket", _STR),
    # ours
    ("duplicates", _INT),
    ("values_quarantined", _INT),
    ("widened_columns", _JSON),
    ("columns", _JSON),
    ("files", _INT),
    ("bytes", _INT),
    ("lines_in", _INT),
    ("messages_written", _INT),
    ("lines_quarantined", _INT),
    ("suppressed", _INT),  # lines of suppressed identities (NULL in reports written before it)
    ("files_in", _INT),
    ("bytes_in", _INT),
    ("hours_synced", _JSON),
    ("recovered_commits", _JSON),
    ("tables", _INT),
    ("warning", _STR),
    ("batch_id", _STR),  # an open hour's batch (transform/open_hour.py); NULL for a sync
    ("catalog", _JSON),  # what the catalog registration did (register_sync's result)
    ("extra", _JSON),  # every other key of the report object, as a JSON object
)
REPORT_SCHEMA = pa.schema([(name, _ARROW[kind]) for name, kind in REPORT_FIELDS])
_KINDS = dict(REPORT_FIELDS)
_PARTITION_ONLY = set(REPORTS_PARTITION_KEYS)  # stored as partition values, not in the file

_HIVE_TYPES = {
    pa.string(): "string",
    pa.int64(): "bigint",
    pa.float64(): "double",
    pa.bool_(): "boolean",
}
_DAY_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_RUN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,199}")


def hive_type(arrow_type: pa.DataType) -> str:
    """Our Hive name of an Arrow type (the lake's five types, and a list of strings)."""
    if pa.types.is_timestamp(arrow_type):
        return "timestamp"
    if arrow_type in _HIVE_TYPES:
        return _HIVE_TYPES[arrow_type]
    if arrow_type == pa.list_(pa.string()):
        return LIST_OF_STRING
    raise ValueError(f"no catalog type for Arrow type {arrow_type}")


def columns_of(schema: pa.Schema, exclude: Iterable[str] = ()) -> list[Column]:
    skip = set(exclude)
    return [(f.name, hive_type(f.type)) for f in schema if f.name not in skip]


def report_columns() -> list[Column]:
    return columns_of(REPORT_SCHEMA)


def quarantine_columns() -> list[Column]:
    return columns_of(QUARANTINE_SCHEMA, exclude=QUARANTINE_PARTITION_KEYS)


def report_partition_dir(lake_root: str, source_id: str, day: str) -> str:
    check_partition_value(source_id, "source_id")
    if not _DAY_RE.fullmatch(day):
        raise ValueError(f"invalid report day {day!r}; expected YYYY-MM-DD")
    return layout.reports_table_partition_dir(lake_root, source_id, day)


# ------------------------------------------------------------------------------- rows


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str).decode()


def _coerce(kind: str, value: Any) -> tuple[Any, bool]:
    """``(stored value, ok)``; ``ok`` False when the value does not fit (kept in ``extra``)."""
    if value is None:
        return None, True
    if kind == _STR:
        if isinstance(value, str):
            return value, True
        if isinstance(value, (bool, int, float)):
            return (str(value).lower() if isinstance(value, bool) else str(value)), True
        return _json(value), True
    if kind == _JSON:
        return (value if isinstance(value, str) else _json(value)), True
    if kind == _INT:
        if isinstance(value, bool):
            return int(value), True
        if isinstance(value, int):
            return value, True
        if isinstance(value, float) and value.is_integer():
            return int(value), True
        if isinstance(value, str) and re.fullmatch(r"-?\d{1,18}", value.strip()):
            return int(value), True
        return None, False
    if kind == _FLOAT:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value), True
        try:
            return float(value), True
        except (TypeError, ValueError):
            return None, False
    if kind == _BOOL:
        if isinstance(value, bool):
            return value, True
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true", True
        return None, False
    if kind == _TS:
        if isinstance(value, datetime):
            return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC), True
        if isinstance(value, str):
            try:
                ts = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            except ValueError:
                return None, False
            return (ts if ts.tzinfo else ts.replace(tzinfo=UTC)).astimezone(UTC), True
        return None, False
    raise AssertionError(kind)  # pragma: no cover


def report_rows(report: Sequence[dict]) -> list[dict]:
    """The report's objects (``SyncReport.rows()``) as rows of ``REPORT_SCHEMA``: missing keys are NULL, unknown
    keys and values that do not fit their column go to ``extra``."""
    rows = []
    for obj in report:
        row: dict[str, Any] = dict.fromkeys(_KINDS)
        extra: dict[str, Any] = {}
        for key, value in obj.items():
            if key in _PARTITION_ONLY:
                continue
            kind = _KINDS.get(key)
            if kind is None or key == "extra":
                extra[key] = value
                continue
            stored, ok = _coerce(kind, value)
            row[key] = stored
            if not ok:
                extra[key] = value
        row["extra"] = _json(extra) if extra else None
        rows.append(row)
    return rows


def report_table(source_id: str, report: Sequence[dict], day: str) -> pa.Table:
    """The run's report as rows of the ``sync_reports`` table with its partition columns
    (``source_id``, ``day``) inside: what a table format that holds the table appends."""
    table = pa.Table.from_pylist(report_rows(report), schema=REPORT_SCHEMA)
    n = table.num_rows
    return table.append_column("source_id", pa.array([source_id] * n, pa.string())).append_column(
        "day", pa.array([day] * n, pa.string())
    )


def write_report_table(
    lake_root: str, source_id: str, run_id: str, report: Sequence[dict], day: str
) -> str:
    """Write the run's report (``SyncReport.rows()``) as one Parquet file of the ``sync_reports`` table; returns its
    location ``<lake_root>/sync_reports/source_id=<id>/day=<day>/<run_id>.parquet``."""
    if not isinstance(run_id, str) or not _RUN_ID_RE.fullmatch(run_id):
        raise ValueError(f"invalid run id {run_id!r} for a report file name")
    location = layout.join(report_partition_dir(lake_root, source_id, day), f"{run_id}.parquet")
    table = pa.Table.from_pylist(report_rows(report), schema=REPORT_SCHEMA)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    storage.write_bytes_atomic(location, sink.getvalue().to_pybytes())
    return location


# ------------------------------------------------------------------------ registration


def register_reports(
    catalog: Catalog, reports_database: str, lake_root: str, source_id: str, day: str
) -> int:
    """Make sure ``<reports_database>.sync_reports`` exists and has the partition of
    ``source_id`` and ``day``; returns how many partitions were new (0 or 1)."""
    catalog.ensure_database(reports_database, "Sync reports of datalake-assets")
    catalog.create_or_update_table(
        reports_database,
        REPORTS_TABLE,
        report_columns(),
        list(REPORTS_PARTITION_KEYS),
        layout.reports_table_root(lake_root),
        "Sync reports of every source (datalake-assets)",
    )
    location = report_partition_dir(lake_root, source_id, day)
    return catalog.add_partitions(
        reports_database, REPORTS_TABLE, [PartitionSpec((source_id, day), location)]
    )


def register_quarantine(
    catalog: Catalog,
    database: str,
    table_prefix: str,
    lake_root: str,
    source_dir: str,
    hours: Iterable[layout.ArchiveHour | str],
) -> dict:
    """The source's ``quarantine`` table (with the prefix) and the partitions of ``hours``."""
    name = catalog_table_name(QUARANTINE_TABLE, table_prefix)
    columns = quarantine_columns()
    catalog.ensure_database(database)
    info = catalog.create_or_update_table(
        database,
        name,
        columns,
        list(QUARANTINE_PARTITION_KEYS),
        layout.quarantine_root(lake_root, source_dir),
        f"Quarantined lines and values of {source_dir} (datalake-assets)",
    )
    specs = {}
    for h in sorted({layout.ArchiveHour.parse(h) for h in hours}):
        specs[(h.day, h.hr)] = PartitionSpec(
            (h.day, h.hr), layout.quarantine_dir(lake_root, source_dir, h), tuple(columns)
        )
    added = catalog.add_partitions(database, name, list(specs.values())) if specs else 0
    return {
        "catalog_table": name,
        "database": database,
        "columns": info.columns,
        "location": info.location,
        "partitions_added": added,
        "partitions": catalog.partition_count(database, name),
    }
