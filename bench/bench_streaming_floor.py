"""The floor of the third way to run an open hour's batches (issue #55): Spark Structured
Streaming with ``trigger(availableNow=True)``, as Databricks users run incremental loads.

    python bench/bench_streaming_floor.py [--batches 12] [--lines 1000] [--out DIR]

What it measures is a lower bound, not our batch: a local session (the lake's ``[spark]``
defaults, as the loop's would be) kept for the run, and for each of ``--batches`` spool
segments of ``--lines`` Segment track messages one ``availableNow`` query over the hour's
folder (a JSON file source with its checkpoint, which finds the new file) whose
``foreachBatch`` only counts the rows: none of the sync's rules, no write, no commit. Compared
with the loop's whole batch of the same size (``bench_open_hour.py``: about 2 CPU-s and 1.8 s,
everything included), this says what Spark's micro-batch machinery costs by itself, and what the
JVM holds in memory between batches (its RSS, from /proc). Output: a Markdown table on stdout
and ``<out>/results.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def jvm_pid(spark) -> int:
    return int(spark._jvm.ProcessHandle.current().pid())


def segment(folder: Path, n: int, lines: int) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    rows = (
        json.dumps(
            {
                "type": "track",
                "event": "Tick",
                "messageId": f"m-{n}-{i}",
                "anonymousId": f"a-{i % 50}",
                "receivedAt": now,
                "timestamp": now,
                "properties": {"seq": i, "plan": "free", "total": i * 1.5},
            }
        )
        for i in range(lines)
    )
    tmp = folder / f".part-{n:04d}.jsonl.gz"
    with gzip.open(tmp, "wt") as f:
        f.write("\n".join(rows) + "\n")
    tmp.rename(folder / f"part-{n:04d}.jsonl.gz")  # the collector's roll: a rename


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("--lines", type=int, default=1000)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    from datalake_assets.settings.transform_section import SparkSettings
    from datalake_assets.transform.session import local_spark_session

    work = Path(tempfile.mkdtemp(prefix="bench-stream-"))
    hour = work / "archive" / "web" / "day=2026-11-29" / "hr=12"
    hour.mkdir(parents=True)
    defaults = SparkSettings()
    t0, c0 = time.monotonic(), cpu_s(os.getpid())
    spark = local_spark_session(defaults.master, defaults.driver_memory, quiet=True)
    jvm = jvm_pid(spark)
    start_s, start_cpu = time.monotonic() - t0, cpu_s(os.getpid()) - c0 + cpu_s(jvm)
    seen: list[int] = []

    def count(df, _batch_id) -> None:
        seen.append(df.count())

    per_batch = []
    for n in range(args.batches):
        segment(hour, n, args.lines)
        w, c = time.monotonic(), cpu_s(os.getpid()) + cpu_s(jvm)
        query = (
            spark.readStream.option("pathGlobFilter", "part-*.jsonl.gz")
            .text(str(hour))
            .writeStream.foreachBatch(count)
            .option("checkpointLocation", str(work / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        per_batch.append(
            {
                "wall_s": time.monotonic() - w,
                "cpu_s": cpu_s(os.getpid()) + cpu_s(jvm) - c,
                "rows": seen[-1] if seen else 0,
                "jvm_rss_mb": rss_mb(jvm),
                "python_rss_mb": rss_mb(os.getpid()),
            }
        )
    spark.stop()
    walls = [b["wall_s"] for b in per_batch[1:]]  # the first pays the query's planning once
    cpus = [b["cpu_s"] for b in per_batch[1:]]
    result = {
        "session_start_wall_s": start_s,
        "session_start_cpu_s": start_cpu,
        "batches": per_batch,
        "median_wall_s": statistics.median(walls),
        "median_cpu_s": statistics.median(cpus),
        "jvm_rss_mb_last": per_batch[-1]["jvm_rss_mb"],
        "rows_each": sorted({b["rows"] for b in per_batch}),
    }
    print("| what | figure |")
    print("|---|---|")
    print(f"| session start (once) | {start_s:.1f} s wall, {start_cpu:.1f} CPU-s |")
    print(
        f"| a {args.lines}-line availableNow batch, count only (median of {len(walls)}) | "
        f"{result['median_wall_s']:.2f} s wall, {result['median_cpu_s']:.2f} CPU-s |"
    )
    print(f"| memory held between batches | JVM {result['jvm_rss_mb_last']:.0f} MB RSS |")
    print(f"| rows each batch saw | {result['rows_each']} |")
    out = Path(args.out or work)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
