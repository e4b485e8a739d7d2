"""Stage B's manifest: what each task wrote, one entry per file, count or check result.

Stage B's tasks return it as Arrow rows (``MANIFEST_SCHEMA``) through Spark; the driver reads
it back as ``ManifestEntry`` (``from_row``) to reconcile, commit and report. Each kind of
entry fills its own fields:

* ``FILE``: a table's Parquet file of an hour (``location``; ``None`` when every row of the
  task's hour was dropped but values were quarantined), its ``rows``, ``bytes``, the
  ``values_quarantined`` from its rows and the ``columns`` that hold a value in them (each
  hour's own new and widened columns are told from these);
* ``MISFITS``: how many values (``rows``) of a ``column`` did not fit its type;
* ``CONFORMANCE``: the pandera rules that failed (``failures``; ``rows``: failing values);
* ``INDEX``: the id-index file of the hour (``location``; ``rows``: ids);
* ``QUARANTINE``: the values' quarantine file of the hour (``location``, ``rows``, ``bytes``);
* ``VIOLATION``: a tracking plan's violations written (``rows``) of one type (``column``) by
  the messages of one table (``table``: the message's, not ``violations``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa

FILE, MISFITS, CONFORMANCE, INDEX, QUARANTINE, VIOLATION = (
    "file",
    "misfits",
    "conformance",
    "index",
    "quarantine",
    "violation",
)

MANIFEST_SCHEMA = (
    "entry string, table string, hour string, location string, column string, "
    "failures string, rows long, bytes long, values_quarantined long, columns string"
)
_MANIFEST_ARROW = pa.schema(
    [
        ("entry", pa.string()),
        ("table", pa.string()),
        ("hour", pa.string()),
        ("location", pa.string()),
        ("column", pa.string()),
        ("failures", pa.string()),
        ("rows", pa.int64()),
        ("bytes", pa.int64()),
        ("values_quarantined", pa.int64()),
        ("columns", pa.string()),
    ]
)


@dataclass
class ManifestEntry:
    entry: str  # FILE, MISFITS, CONFORMANCE, INDEX, QUARANTINE or VIOLATION
    table: str
    hour: str  # compact, YYYYMMDDHH
    rows: int = 0
    bytes: int = 0
    values_quarantined: int = 0
    location: str | None = None  # FILE, INDEX, QUARANTINE: the file written
    column: str | None = None  # MISFITS: the column; VIOLATION: the violation type
    failures: list[dict[str, Any]] = field(default_factory=list)  # CONFORMANCE: pandera's
    columns: list[str] = field(default_factory=list)  # FILE: the columns holding a value

    def to_row(self) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "table": self.table,
            "hour": self.hour,
            "location": self.location,
            "column": self.column,
            "failures": orjson.dumps(self.failures).decode() if self.failures else None,
            "rows": self.rows,
            "bytes": self.bytes,
            "values_quarantined": self.values_quarantined,
            "columns": orjson.dumps(self.columns).decode() if self.columns else None,
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ManifestEntry:
        return cls(
            entry=row["entry"],
            table=row["table"],
            hour=row["hour"],
            rows=row["rows"],
            bytes=row["bytes"],
            values_quarantined=row["values_quarantined"],
            location=row["location"],
            column=row["column"],
            failures=orjson.loads(row["failures"]) if row["failures"] else [],
            columns=orjson.loads(row["columns"]) if row.get("columns") else [],
        )


def manifest_batch(entries: list[ManifestEntry]) -> pa.RecordBatch:
    """The entries as one Arrow batch of ``MANIFEST_SCHEMA`` (a stage-B task's output)."""
    return pa.RecordBatch.from_pylist([e.to_row() for e in entries], schema=_MANIFEST_ARROW)
