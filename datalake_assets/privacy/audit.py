"""The ``privacy_requests`` audit table, in the reports database next to ``sync_reports``::

    <lake_root>/privacy_requests/day=<YYYY-MM-DD>/<request_id>.parquet

One row per request (the day it last completed or failed; a re-run of the request replaces its
row and removes the one of an earlier day). Identities appear only as keyed hashes
(``identity_hashes``); every other column is a count, a time or a status, so the table can be
shown to an auditor. Query it by name::

    SELECT request_id, status, rows_remaining FROM segment_datalake_meta.privacy_requests
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from datalake_assets.catalog.catalog_interface import Catalog, PartitionSpec
from datalake_assets.catalog.reports import columns_of
from datalake_assets.lake import storage
from datalake_assets.spec import layout

PRIVACY_TABLE = "privacy_requests"
PARTITION_KEYS = ("day",)
_TS = pa.timestamp("us", tz="UTC")
PRIVACY_SCHEMA = pa.schema(
    [
        ("request_id", pa.string()),
        ("received_at", _TS),
        ("started_at", _TS),
        ("completed_at", _TS),
        ("identity_hashes", pa.list_(pa.string())),  # requested and linked, keyed hashes
        ("follow_links", pa.bool_()),
        ("sources", pa.list_(pa.string())),  # empty: every source
        ("erase", pa.bool_()),
        ("suppress", pa.bool_()),
        ("status", pa.string()),  # completed / failed
        ("hours_rewritten", pa.int64()),
        ("files_rewritten", pa.int64()),
        ("rows_removed", pa.string()),  # JSON object: table (and "quarantine") -> rows
        ("archive_lines_removed", pa.int64()),
        ("spool_lines_removed", pa.int64()),
        ("index_entries_removed", pa.int64()),
        ("rows_remaining", pa.int64()),  # the proof: traces found after the erasure
        ("proof_checked_at", _TS),
        ("error", pa.string()),
    ]
)


def audit_partition_dir(lake_root: str, day: str) -> str:
    return layout.join(layout.privacy_requests_table_root(lake_root), f"day={day}")


def audit_location(lake_root: str, request_id: str, day: str) -> str:
    return layout.join(audit_partition_dir(lake_root, day), f"{request_id}.parquet")


def _ts(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def write_audit_row(lake_root: str, row: dict[str, Any], previous: str | None) -> str:
    """Write the request's row (``PRIVACY_SCHEMA`` keys; times as ISO text) on the day of its
    ``completed_at``; returns its location. ``previous``: the location of an earlier row of
    the request, removed once the new one is written."""
    day = row["completed_at"][:10]
    location = audit_location(lake_root, row["request_id"], day)
    values = dict(row)
    for name in ("received_at", "started_at", "completed_at", "proof_checked_at"):
        values[name] = _ts(values.get(name))
    values["rows_removed"] = orjson.dumps(
        values.get("rows_removed") or {}, option=orjson.OPT_SORT_KEYS
    ).decode()
    table = pa.Table.from_pylist(
        [{f.name: values.get(f.name) for f in PRIVACY_SCHEMA}], schema=PRIVACY_SCHEMA
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    storage.write_bytes_atomic(location, sink.getvalue().to_pybytes())
    if previous and previous != location:
        storage.delete_file(previous)
    return location


def read_audit_rows(lake_root: str) -> list[dict[str, Any]]:
    """Every row of the table, read from its files (for tests and tools without a catalog)."""
    rows = []
    for location, _ in storage.list_files(
        layout.privacy_requests_table_root(lake_root), recursive=True
    ):
        if location.endswith(".parquet") and "/." not in location:
            fs, path = storage.resolve(location)
            rows += pq.read_table(path, filesystem=fs, schema=PRIVACY_SCHEMA).to_pylist()
    return rows


def register_audit(catalog: Catalog, reports_database: str, lake_root: str, day: str) -> int:
    """Make sure ``<reports_database>.privacy_requests`` exists with the partition of ``day``;
    returns how many partitions were new (0 or 1)."""
    catalog.ensure_database(reports_database, "Sync reports of datalake-assets")
    catalog.create_or_update_table(
        reports_database,
        PRIVACY_TABLE,
        columns_of(PRIVACY_SCHEMA),
        list(PARTITION_KEYS),
        layout.privacy_requests_table_root(lake_root),
        "Privacy requests (erasure, suppression) and their proof (datalake-assets)",
    )
    return catalog.add_partitions(
        reports_database,
        PRIVACY_TABLE,
        [PartitionSpec((day,), audit_partition_dir(lake_root, day))],
    )
