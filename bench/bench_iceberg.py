"""Benchmark: the cost of committing to Iceberg tables against the Segment layout (issue #29).

    PYTHONPATH=. .venv/bin/python bench/bench_iceberg.py --events 1000           # a small hour
    PYTHONPATH=. .venv/bin/python bench/bench_iceberg.py --events 2000000 --files 20 --spark

One archive hour (``generate_archive(..., "bench", [2026-11-21T10], events_per_hour=--events,
files_per_hour=--files, seed=7)``, as ``bench_sync.py`` makes it) is synced into two fresh
lakes in the same process and run: ``segment`` (the default layout) and ``iceberg`` (the SQL
catalog in SQLite under the lake), catalog ``none`` for both. Each lake gets a first sync (it
creates the tables) then ``--repeat`` replays of the hour (each replaces the hour), the two
formats alternating so a change in the machine's load touches both.

Printed per sync: **wall** (``run_sync`` from its call to its report), **commit_s** (the
report's timing of the commit: the folder swaps, or the Iceberg transactions), and the lake's
file operations of the commit, counted from the lake after it: **files added** (created under
the lake root, data and metadata) and **files now** (in the lake). On S3 each added file is at
least one PUT; each Iceberg table commit also reads the table's current metadata (a GET) and
the catalog (a SQL query, or a Glue GetTable + UpdateTable).

``--spark``: the sync's Spark path (a local[2] session, ``--spark-memory``); default: the
driver-local path (``local_max_bytes`` forced), as a small hour takes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCE = "bench"
HOUR = "2026-11-21T10"


def files_under(root: str) -> set[str]:
    return {
        os.path.join(d, f)
        for d, _, fs in os.walk(root)
        for f in fs
        if "/_staging/" not in os.path.join(d, f)
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=1000)
    p.add_argument("--files", type=int, default=2)
    p.add_argument("--repeat", type=int, default=2, help="replays after the first sync")
    p.add_argument("--spark", action="store_true", help="the Spark path (default: driver-local)")
    p.add_argument("--spark-memory", default="6g")
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "iceberg"))
    a = p.parse_args()

    from datalake_assets.ingest.demo import generate_archive
    from datalake_assets.settings.formats_section import FormatConfig
    from datalake_assets.spec.layout import ArchiveHour
    from datalake_assets.transform.sync import run_sync
    from datalake_assets.transform.sync_request import SyncRequest

    out = Path(a.out)
    shutil.rmtree(out, ignore_errors=True)
    archive = str(out / "archive")
    generate_archive(
        archive,
        SOURCE,
        [ArchiveHour.parse(HOUR)],
        events_per_hour=a.events,
        files_per_hour=a.files,
        seed=7,
    )
    session = None
    if a.spark:
        from datalake_assets.transform.job import local_spark_session

        session = local_spark_session(
            "local[2]", a.spark_memory, {"spark.local.dir": str(out / "spark-local")}
        )

    def no_spark():
        raise AssertionError("the driver-local path started Spark")

    rows: list[dict] = []
    for i in range(1 + a.repeat):
        for fmt in ("segment", "iceberg") if i % 2 == 0 else ("iceberg", "segment"):
            lake = str(out / fmt)
            before = files_under(lake)
            req = SyncRequest(
                lake,
                archive,
                SOURCE,
                (HOUR,),
                replay=i > 0,
                local_max_bytes=0 if a.spark else 1 << 40,
                table_format=FormatConfig(format=fmt),
            )
            t = time.monotonic()
            report = run_sync(session or no_spark, req)
            wall = time.monotonic() - t
            after = files_under(lake)
            rows.append(
                {
                    "format": fmt,
                    "sync": "first" if i == 0 else f"replay {i}",
                    "wall_s": round(wall, 2),
                    "commit_s": round(report.source.timings.get("commit_s", 0.0), 2),
                    "files_added": len(after - before),
                    "files_now": len(after),
                    "tables": len(report.tables),
                    "rows": report.source.messages_written,
                }
            )
    print(
        f"\n{a.events} events, {a.files} files, {'Spark' if a.spark else 'driver-local'} "
        f"path, load {os.getloadavg()[0]:.1f}\n"
    )
    print("| format | sync | wall s | commit s | files added | files in lake | tables |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['format']} | {r['sync']} | {r['wall_s']} | {r['commit_s']} | "
            f"{r['files_added']} | {r['files_now']} | {r['tables']} |"
        )
    replays = {
        f: [r for r in rows if r["format"] == f and r["sync"] != "first"]
        for f in ("segment", "iceberg")
    }
    if all(replays.values()):
        med = {f: statistics.median(r["wall_s"] for r in rs) for f, rs in replays.items()}
        com = {f: statistics.median(r["commit_s"] for r in rs) for f, rs in replays.items()}
        print(
            f"\nreplays, median: iceberg/segment wall {med['iceberg'] / med['segment']:.2f}x "
            f"({med['iceberg']:.2f} s / {med['segment']:.2f} s); commit {com['iceberg']:.2f} s "
            f"against {com['segment']:.2f} s"
        )
    (out / "results.json").write_text(json.dumps(rows, indent=2))
    if session is not None:
        session.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
