"""The sync: one Spark job per source and batch of archive hours (never one per table).

Run it outside Dagster with plain arguments::

    spark-submit datalake_assets/transform/job.py --lake-root /data/lake \\
        --archive-root /data/archive --source-id demo --hours 2026-11-21T09 2026-11-21T10

or ``python -m datalake_assets.transform.job ...`` (starts a local session). It prints the sync
report as JSON on stdout and writes it to ``<lake>/reports/day=/source=/run_id=/report.json``.

Passes over the data (``sync.py`` runs them as its phases):

1. Stage A, one task per archive file: each line is read once, parsed, validated and
   flattened (``stage_a.py``); messages are written per table as columnar work files, kinds
   counted per column; rejected lines go to the staged quarantine. Only small key rows reach
   the JVM.
2. Driver: merges stage A's per-column statistics into column types (``schema.py``) against
   the lake's schema record.
3. JVM: duplicates are found on ``(messageId, receivedAt, position)`` only (a small shuffle);
   the losers' positions go to stage B, which skips them (``dedup.py``).
4. Stage B, one task per group of one table's work files: casts every column with Arrow
   kernels, writes each table's Parquet per hour into staging; returns a manifest
   (``stage_b.py``, ``manifest.py``).
5. Driver: checks ``lines_in = rows + duplicates + quarantined + suppressed``, commits
   (``commit.py``) with the id and identity indexes, updates the schema record, registers
   the catalog, writes the report (``outcome.py``, ``sync_report.py``, ``lake/report.py``).

This module is the entry point; the request is ``sync_request.py``, the session ``session.py``.
"""

from __future__ import annotations

import json
import sys
import traceback

from datalake_assets.transform.session import job_spark_session, local_spark_session
from datalake_assets.transform.sync import run_sync
from datalake_assets.transform.sync_request import SyncError, SyncRequest, parse_args

# What callers of the job import from its entry module.
__all__ = ["SyncError", "SyncRequest", "local_spark_session", "main", "parse_args", "run_sync"]


def main(argv: list[str] | None = None) -> int:
    req = parse_args(sys.argv[1:] if argv is None else argv)
    try:  # the session starts when the sync first needs it (a small batch may not)
        result = run_sync(lambda: job_spark_session(req.catalog), req)
    except SyncError as e:
        print(json.dumps({"status": "failed", "error": str(e), "error_code": e.code}))
        return 1
    except Exception as e:  # storage, Spark, anything: still one machine-readable last line
        traceback.print_exc()
        code = "storage" if isinstance(e, OSError) else "internal"
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        print(
            json.dumps(
                {
                    "status": "failed",
                    "error": f"{type(e).__name__}: {first}"[:2000],
                    "error_code": code,
                }
            )
        )
        return 1
    print(json.dumps(result.source.to_dict()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
